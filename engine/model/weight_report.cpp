#include "model/weight_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace gb {

namespace {

// llama_ftype values (general.file_type) and their names.
std::string file_type_name(int64_t code) {
  static const std::map<int64_t, std::string> kNames = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},   {25, "IQ4_NL"}, {30, "IQ4_XS"},
      {32, "BF16"}};
  auto it = kNames.find(code);
  return it == kNames.end() ? "" : it->second;
}

}  // namespace

std::vector<WeightTypeRow> weight_type_table(const Model& model) {
  std::map<DType, WeightTypeRow> rows;
  for (const TensorView* t : model.all_tensors()) {
    WeightTypeRow& r = rows[t->dtype];
    r.type = t->dtype;
    ++r.num_tensors;
    r.num_values += static_cast<uint64_t>(t->num_elements());
    r.num_bytes += t->num_bytes();
  }
  std::vector<WeightTypeRow> out;
  for (const auto& [type, row] : rows) out.push_back(row);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.num_bytes > b.num_bytes; });
  return out;
}

double bits_per_weight(const Model& model) {
  const uint64_t n = model.num_parameters();
  return n ? 8.0 * static_cast<double>(model.weight_bytes()) / static_cast<double>(n) : 0;
}

std::string weight_type_label(const Model& model) {
  std::string name;
  for (const auto& [key, value] : model.metadata)
    if (key == "general.file_type") name = file_type_name(std::atoll(value.c_str()));
  if (name.empty()) {
    const auto table = weight_type_table(model);
    if (!table.empty()) name = std::string(dtype_info(table.front().type).name);
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %.1f bpw", name.c_str(), bits_per_weight(model));
  return buf;
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
        if (off < 0) continue;
        const auto h = static_cast<uint16_t>(blk[off] | (blk[off + 1] << 8));
        if ((h & 0x7c00u) == 0x7c00u) return bad(b, off == tr.scale_offset ? "NaN or infinite scale" : "NaN or infinite min");
      }
    }
  }
  return {};
}

}  // namespace gb
