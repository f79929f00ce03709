#include "model/weight_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "model/gguf_file.h"
#include "model/llama2c_file.h"
#include "model/mapped_file.h"

namespace gb {

namespace {

// llama_ftype values (general.file_type) and their names.
std::string file_type_name(int64_t code) {
  static const std::map<int64_t, std::string> kNames = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},   {25, "IQ4_NL"}, {30, "IQ4_XS"},
      {32, "BF16"},   {38, "MXFP4_MOE"}};
  auto it = kNames.find(code);
  return it == kNames.end() ? "" : it->second;
}

// Sums tensors per weight type; rows() gives the largest share of bytes first.
class TypeTally {
 public:
  void add(WeightType type, uint64_t values, uint64_t bytes) {
    WeightTypeRow& r = rows_[type];
    r.type = type;
    ++r.num_tensors;
    r.num_values += values;
    r.num_bytes += bytes;
  }
  std::vector<WeightTypeRow> rows() const {
    std::vector<WeightTypeRow> out;
    for (const auto& [type, row] : rows_) out.push_back(row);
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.num_bytes > b.num_bytes; });
    return out;
  }

 private:
  std::map<WeightType, WeightTypeRow> rows_;
};

// "Q4_K_M, 4.9 bpw": the declared mixture name, else the type holding most bytes.
std::string mixture_label(std::string name, const std::vector<WeightTypeRow>& table, double bpw) {
  if (name.empty() && !table.empty()) name = std::string(dtype_info(table.front().type).name);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %.1f bpw", name.c_str(), bpw);
  return buf;
}

}  // namespace

std::vector<WeightTypeRow> weight_type_table(const Model& model) {
  TypeTally tally;
  for (const TensorView* t : model.all_tensors())
    tally.add(t->dtype, static_cast<uint64_t>(t->num_elements()), t->num_bytes());
  return tally.rows();
}

double bits_per_weight(const Model& model) {
  const uint64_t n = model.num_parameters();
  return n ? 8.0 * static_cast<double>(model.weight_bytes()) / static_cast<double>(n) : 0;
}

std::string weight_type_label(const Model& model) {
  std::string name;
  for (const auto& [key, value] : model.metadata)
    if (key == "general.file_type") name = file_type_name(std::atoll(value.c_str()));
  return mixture_label(name, weight_type_table(model), bits_per_weight(model));
}

Result<WeightSummary> read_weight_summary(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  const std::shared_ptr<const MappedFile>& file = mapped.value();
  const Result<uint32_t> magic_read = file->magic();
  if (!magic_read) return magic_read.error();
  const uint32_t magic = magic_read.value();
  TypeTally tally;
  WeightSummary s;
  s.file_bytes = file->size_bytes();
  std::string declared;
  if (magic == kGgufMagic) {
    auto gguf = GgufFile::parse(file);
    if (!gguf) return gguf.error();
    for (const GgufTensorInfo& t : gguf.value().tensors()) tally.add(t.dtype, t.num_elements(), t.num_bytes);
    if (const GgufValue* ft = gguf.value().find("general.file_type"))
      if (auto code = ft->as_int()) declared = file_type_name(*code);
  } else {
    Model model;  // views into the mapping only; no weight byte is read
    model.path = path;
    GB_TRY(read_llama2c_model(file, model));
    for (const TensorView* t : model.all_tensors())
      tally.add(t->dtype, static_cast<uint64_t>(t->num_elements()), t->num_bytes());
  }
  s.types = tally.rows();
  for (const WeightTypeRow& r : s.types) { s.num_values += r.num_values; s.num_bytes += r.num_bytes; }
  const double bpw = s.num_values ? 8.0 * static_cast<double>(s.num_bytes) / static_cast<double>(s.num_values) : 0;
  s.label = magic == kGgufMagic ? mixture_label(declared, s.types, bpw) : "F32 (llama2.c)";
  return s;
}

uint64_t memory_estimate_bytes(const Model& model, int64_t num_tokens) {
  return model.weight_bytes() + model.config.kv_bytes_per_token(4) * static_cast<uint64_t>(std::max<int64_t>(0, num_tokens));
}

Status check_tensor_values(const Model& model) {
  for (const TensorView* t : model.all_tensors()) {
    const kernels::WeightTypeTraits& tr = kernels::weight_traits(t->dtype);
    const auto* bytes = static_cast<const uint8_t*>(t->data);
    const uint64_t blocks = static_cast<uint64_t>(t->num_elements()) / static_cast<uint64_t>(tr.block_elements);
    const auto bad = [&](uint64_t block, const char* what) {
      return make_error(model.path + ": tensor " + t->name + " (" + std::string(tr.name) + ") has a " + what +
                        " in block " + std::to_string(block) + " of " + std::to_string(blocks) + " (row " +
                        std::to_string(block * static_cast<uint64_t>(tr.block_elements) / static_cast<uint64_t>(t->cols)) + ")");
    };
    if (!kernels::is_quantized(t->dtype)) {
      float v = 0;
      for (uint64_t i = 0; i < blocks; ++i) {
        tr.dequantize_row(bytes + i * static_cast<uint64_t>(tr.block_bytes), &v, 1);
        if (!std::isfinite(v)) return bad(i, "NaN or infinite value");
      }
      continue;
    }
    for (uint64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = bytes + b * static_cast<uint64_t>(tr.block_bytes);
      for (int16_t off : {tr.scale_offset, tr.min_offset}) {
        if (off < 0 || !kernels::scale_is_nan_or_inf(tr.scale_format, blk + off)) continue;
        return bad(b, off == tr.scale_offset ? "NaN or infinite scale" : "NaN or infinite min");
      }
    }
  }
  return {};
}

}  // namespace gb
