#include "model/quantize_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

#include "core/thread_pool.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"

namespace gb {

namespace {

// Which layers get a rule (llama.cpp's defaults; n = number of such tensors).
enum class Layers {
  All,
  MoreBits,     // i < n/8, i >= 7n/8, or every third layer in between
  FirstTwo,     // i < 2
  FirstFour,    // i < 4
  FirstEighth,  // i < n/8
  FirstSixteenth,
  Gqa4,         // every layer, when the model has at least 4 query heads per KV head
};
struct Rule {
  std::string_view role;  // "attn_v", "attn_output", "ffn_down"
  Layers layers;
  WeightType type;
};
struct Mixture {
  std::string_view name;
  WeightType base;
  uint32_t file_type;     // llama_ftype value written as general.file_type
  std::vector<Rule> rules;  // first match wins
  // Set for MXFP4_MOE: base is then the type of the experts' stacks (3-D
  // tensors of more than one matrix) only, and every other matrix, the output
  // and the embedding included, gets this type (llama.cpp's
  // llama_tensor_get_type_impl for LLAMA_FTYPE_MOSTLY_MXFP4_MOE). --pure
  // gives every matrix base, as there.
  std::optional<WeightType> non_expert = std::nullopt;
};

const std::vector<Mixture>& mixtures() {
  using T = WeightType;
  static const std::vector<Mixture> kMixtures = {
      {"F32", T::F32, 0, {}},
      {"F16", T::F16, 1, {}},
      {"BF16", T::BF16, 32, {}},
      {"Q4_0", T::Q4_0, 2, {}},
      {"Q4_1", T::Q4_1, 3, {}},
      {"Q8_0", T::Q8_0, 7, {}},
      {"Q5_0", T::Q5_0, 8, {}},
      {"Q5_1", T::Q5_1, 9, {}},
      {"Q2_K", T::Q2_K, 10,
       {{"attn_v", Layers::Gqa4, T::Q4_K}, {"attn_v", Layers::All, T::Q3_K}, {"attn_output", Layers::All, T::Q3_K},
        {"ffn_down", Layers::All, T::Q3_K}}},
      {"Q3_K_S", T::Q3_K, 11, {}},
      {"Q3_K_M", T::Q3_K, 12,
       {{"attn_v", Layers::FirstTwo, T::Q5_K}, {"attn_v", Layers::All, T::Q4_K},
        {"attn_output", Layers::All, T::Q4_K}, {"ffn_down", Layers::FirstSixteenth, T::Q5_K},
        {"ffn_down", Layers::All, T::Q4_K}}},
      {"Q3_K_L", T::Q3_K, 13,
       {{"attn_v", Layers::All, T::Q5_K}, {"attn_output", Layers::All, T::Q5_K}, {"ffn_down", Layers::All, T::Q5_K}}},
      {"Q4_K_S", T::Q4_K, 14, {{"attn_v", Layers::FirstFour, T::Q5_K}, {"ffn_down", Layers::FirstEighth, T::Q5_K}}},
      {"Q4_K_M", T::Q4_K, 15, {{"attn_v", Layers::MoreBits, T::Q6_K}, {"ffn_down", Layers::MoreBits, T::Q6_K}}},
      {"Q5_K_S", T::Q5_K, 16, {}},
      {"Q5_K_M", T::Q5_K, 17, {{"attn_v", Layers::MoreBits, T::Q6_K}, {"ffn_down", Layers::MoreBits, T::Q6_K}}},
      {"Q6_K", T::Q6_K, 18, {}},
      {"IQ4_NL", T::IQ4_NL, 25, {{"attn_v", Layers::Gqa4, T::Q5_K}, {"ffn_down", Layers::FirstEighth, T::Q5_K}}},
      {"IQ4_XS", T::IQ4_XS, 30, {{"attn_v", Layers::Gqa4, T::Q5_K}, {"ffn_down", Layers::FirstEighth, T::Q5_K}}},
      {"MXFP4_MOE", T::MXFP4, 38, {}, T::Q8_0},
  };
  return kMixtures;
}

// Plain K-type names mean their "_M" mixture, as in llama-quantize.
std::optional<Mixture> find_mixture(std::string name) {
  for (auto& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (name == "Q3_K" || name == "Q4_K" || name == "Q5_K") name += "_M";
  for (const Mixture& m : mixtures())
    if (m.name == name) return m;
  return std::nullopt;
}

bool layer_matches(Layers which, int64_t i, int64_t n, int64_t gqa) {
  switch (which) {
    case Layers::All: return true;
    case Layers::MoreBits: return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
    case Layers::FirstTwo: return i < 2;
    case Layers::FirstFour: return i < 4;
    case Layers::FirstEighth: return i < n / 8;
    case Layers::FirstSixteenth: return i < n / 16;
    case Layers::Gqa4: return gqa >= 4;
  }
  return false;
}

// K-types need rows of whole 256-value super-blocks; llama.cpp falls back to
// these 32-value types for other widths.
WeightType fit_row_length(WeightType t, uint64_t cols) {
  const auto be = static_cast<uint64_t>(kernels::weight_traits(t).block_elements);
  if (cols % be == 0) return t;
  WeightType fallback = WeightType::F16;
  switch (t) {
    case WeightType::Q2_K: case WeightType::Q3_K: case WeightType::IQ4_XS: fallback = WeightType::IQ4_NL; break;
    case WeightType::Q4_K: fallback = WeightType::Q5_0; break;
    case WeightType::Q5_K: fallback = WeightType::Q5_1; break;
    case WeightType::Q6_K: fallback = WeightType::Q8_0; break;
    default: break;
  }
  return cols % 32 == 0 ? fallback : WeightType::F16;
}

struct Plan {
  const GgufTensorInfo* info;
  WeightType to;
};

int64_t uint_key(const GgufFile& f, const std::string& key, int64_t fallback) {
  const GgufValue* v = f.find(key);
  auto i = v ? v->as_int() : std::nullopt;
  return i ? *i : fallback;
}

std::vector<Plan> plan_types(const GgufFile& f, const Mixture& mix, bool pure) {
  std::string arch = "llama";
  if (const GgufValue* a = f.find("general.architecture"); a && a->as_string()) arch = a->string;
  const int64_t heads = uint_key(f, arch + ".attention.head_count", 1);
  const int64_t gqa = heads / std::max<int64_t>(1, uint_key(f, arch + ".attention.head_count_kv", heads));
  const bool has_output = f.find_tensor("output.weight") != nullptr;
  int64_t n_of[3] = {0, 0, 0};
  const std::string_view roles[3] = {"attn_v", "attn_output", "ffn_down"};
  // A role's tensor, dense or the experts' 3-D stack (ffn_down_exps), as
  // llama-quantize counts them.
  const auto has_role = [](const std::string& name, std::string_view role) {
    return name.find(std::string(role) + ".weight") != std::string::npos ||
           name.find(std::string(role) + "_exps.weight") != std::string::npos;
  };
  for (const auto& t : f.tensors())
    for (int r = 0; r < 3; ++r) n_of[r] += has_role(t.name, roles[r]);
  int64_t i_of[3] = {0, 0, 0};
  std::vector<Plan> plan;
  for (const auto& t : f.tensors()) {
    // Matrices and the experts' stacks of matrices are quantized row by row;
    // a mixture's router (ffn_gate_inp) stays as it is, as llama-quantize keeps it.
    const bool matrix = (t.dims.size() == 2 || t.dims.size() == 3) && t.name.size() > 6 && t.name.ends_with("weight") &&
                        t.name.find("ffn_gate_inp") == std::string::npos;
    if (!matrix) {
      plan.push_back({&t, t.dtype});
      continue;
    }
    WeightType to = mix.base;
    const bool is_output = t.name == "output.weight" || (!has_output && t.name == "token_embd.weight");
    const bool expert_stack = t.dims.size() == 3 && t.dims[2] > 1;
    if (!pure && mix.non_expert) {
      if (!expert_stack) to = *mix.non_expert;
      plan.push_back({&t, fit_row_length(to, t.dims[0])});
      continue;
    }
    if (!pure && is_output && kernels::is_quantized(mix.base)) to = mix.base == WeightType::Q8_0 ? WeightType::Q8_0 : WeightType::Q6_K;
    for (int r = 0; r < 3 && !pure; ++r) {
      if (!has_role(t.name, roles[r])) continue;
      for (const Rule& rule : mix.rules)
        if (rule.role == roles[r] && layer_matches(rule.layers, i_of[r], n_of[r], gqa)) {
          to = rule.type;
          break;
        }
      ++i_of[r];
    }
    plan.push_back({&t, fit_row_length(to, t.dims[0])});
  }
  return plan;
}

}  // namespace

std::vector<std::string> quantize_type_names() {
  std::vector<std::string> names;
  for (const Mixture& m : mixtures()) names.emplace_back(m.name);
  return names;
}

Result<std::vector<std::pair<std::string, WeightType>>> plan_quantization(const std::string& in_path,
                                                                     const QuantizeOptions& options) {
  auto mix = find_mixture(options.type);
  if (!mix) return make_error("unknown quantization type '" + options.type + "'");
  auto opened = GgufFile::open(in_path);
  if (!opened) return opened.error();
  std::vector<std::pair<std::string, WeightType>> out;
  for (const Plan& p : plan_types(opened.value(), *mix, options.pure)) out.emplace_back(p.info->name, p.to);
  return out;
}

Result<std::vector<QuantizedTensor>> quantize_model(const std::string& in_path, const std::string& out_path,
                                                    const QuantizeOptions& options) {
  auto mix = find_mixture(options.type);
  if (!mix) {
    std::string names;
    for (const auto& n : quantize_type_names()) names += (names.empty() ? "" : ", ") + n;
    return make_error("unknown quantization type '" + options.type + "' (known: " + names + ")");
  }
  auto opened = GgufFile::open(in_path);
  if (!opened) return opened.error();
  const GgufFile& f = opened.value();
  const std::vector<Plan> plan = plan_types(f, *mix, options.pure);

  GgufWriter writer(f.alignment());
  for (const auto& [key, value] : f.metadata()) {
    if (key == "general.alignment" || key == "general.file_type" || key == "general.quantization_version") continue;
    writer.add_metadata(key, value);
  }
  writer.add_metadata("general.file_type", GgufValue::u32(mix->file_type));
  writer.add_metadata("general.quantization_version", GgufValue::u32(2));

  auto pool = std::make_shared<ThreadPool>(options.num_threads);
  auto report = std::make_shared<std::vector<QuantizedTensor>>(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    const GgufTensorInfo& t = *plan[i].info;
    const WeightType to = plan[i].to;
    const auto cols = static_cast<int64_t>(t.dims[0]);
    const auto rows = static_cast<int64_t>(t.num_elements()) / cols;
    const uint64_t bytes = *dtype_bytes(to, t.num_elements());
    (*report)[i] = {t.name, t.dtype, to, static_cast<int64_t>(t.num_elements()), 0, 0};
    const std::byte* src = f.tensor_data(t);
    writer.add_tensor(t.name, t.dims, dtype_info(to).gguf_code, bytes,
                      [&, i, src, to, cols, rows, count = plan.size()](std::span<std::byte> out) {
      const WeightType from = (*report)[i].from;
      if (options.on_tensor) options.on_tensor(i, count, (*report)[i].name, to);
      if (from == to) {
        std::memcpy(out.data(), src, out.size());
        return;
      }
      const auto& in_tr = kernels::weight_traits(from);
      const auto& out_tr = kernels::weight_traits(to);
      const size_t in_row = *dtype_bytes(from, static_cast<uint64_t>(cols));
      const size_t out_row = *dtype_bytes(to, static_cast<uint64_t>(cols));
      std::vector<double> err(static_cast<size_t>(pool->num_threads()), 0.0), sq(err.size(), 0.0);
      pool->parallel_for(rows, [&](int64_t begin, int64_t end, int thread) {
        std::vector<float> x(static_cast<size_t>(cols)), back(static_cast<size_t>(cols));
        for (int64_t r = begin; r < end; ++r) {
          in_tr.dequantize_row(src + static_cast<size_t>(r) * in_row, x.data(), cols);
          std::byte* dst = out.data() + static_cast<size_t>(r) * out_row;
          out_tr.quantize_row(x.data(), dst, cols);
          out_tr.dequantize_row(dst, back.data(), cols);
          for (int64_t c = 0; c < cols; ++c) {
            err[static_cast<size_t>(thread)] += std::pow(static_cast<double>(back[static_cast<size_t>(c)]) - x[static_cast<size_t>(c)], 2);
            sq[static_cast<size_t>(thread)] += static_cast<double>(x[static_cast<size_t>(c)]) * x[static_cast<size_t>(c)];
          }
        }
      });
      double e = 0, s = 0;
      for (size_t k = 0; k < err.size(); ++k) e += err[k], s += sq[k];
      (*report)[i].rmse = std::sqrt(e / static_cast<double>(rows * cols));
      (*report)[i].source_rms = std::sqrt(s / static_cast<double>(rows * cols));
    });
  }
  GB_TRY(writer.write(out_path));
  return *report;
}

}  // namespace gb
