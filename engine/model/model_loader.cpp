// load_model(): format detection by magic, the GGUF mapping (metadata keys ->
// ModelConfig, tensor names -> ModelWeights with shape checks, both driven by the
// architecture table in architecture.h and kLayerTensors below), context
// override, and the human-readable metadata list. The llama2.c formats live in
// llama2c_file.cpp. GGUF dims are ne order (ne[0] = columns = input features,
// ne[1] = rows = output features), matching TensorView's row-major layout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numbers>

#include "cpu/convert.h"
#include "model/architecture.h"
#include "model/gguf_file.h"
#include "model/gguf_vocabulary.h"
#include "model/llama2c_file.h"
#include "model/mapped_file.h"
#include "model/model.h"
#include "model/model_validation.h"
#include "model/weight_report.h"

namespace gb {

namespace {

// The width a tensor dimension must have, by name.
enum class Width { One, Dim, QDim, KvDim, Hidden, UpRows, HeadDim, QkvDim, Experts, ExpertHidden, Heads };
// When a layer tensor is present, by the architecture row's flags and, for
// mixtures of experts, the file's expert count.
enum class Needed {
  Always, QkvBias, SeparateQkv, FusedQkv, Dense, Gate, Moe, QkNorm, PostNorms, OutBias, Sinks, FfnNorm,
  FfnNormPostAttention, MoeBiases,
};

// The tensors of one block: GGUF name after "blk.N.", where it goes, its shape
// (rows x cols; vectors have rows One) and when it is required. Expert tensors
// are 3-D, one (rows x cols) matrix per expert: GGUF ne = [cols, rows, experts].
struct LayerTensor {
  const char* name;
  TensorView LayerWeights::*field;
  Width rows, cols;
  Needed needed;
  bool per_expert = false;
  bool as_f32 = false;  // a matrix handed out as F32 whatever the file's type (the experts' bias rows)
};

constexpr LayerTensor kLayerTensors[] = {
    {"attn_norm.weight", &LayerWeights::attn_norm, Width::One, Width::Dim, Needed::Always},
    {"attn_q.weight", &LayerWeights::wq, Width::QDim, Width::Dim, Needed::SeparateQkv},
    {"attn_k.weight", &LayerWeights::wk, Width::KvDim, Width::Dim, Needed::SeparateQkv},
    {"attn_v.weight", &LayerWeights::wv, Width::KvDim, Width::Dim, Needed::SeparateQkv},
    {"attn_qkv.weight", &LayerWeights::wqkv, Width::QkvDim, Width::Dim, Needed::FusedQkv},
    {"attn_q.bias", &LayerWeights::bq, Width::One, Width::QDim, Needed::QkvBias},
    {"attn_k.bias", &LayerWeights::bk, Width::One, Width::KvDim, Needed::QkvBias},
    {"attn_v.bias", &LayerWeights::bv, Width::One, Width::KvDim, Needed::QkvBias},
    {"attn_q_norm.weight", &LayerWeights::q_norm, Width::One, Width::HeadDim, Needed::QkNorm},
    {"attn_k_norm.weight", &LayerWeights::k_norm, Width::One, Width::HeadDim, Needed::QkNorm},
    {"attn_output.weight", &LayerWeights::wo, Width::Dim, Width::QDim, Needed::Always},
    {"post_attention_norm.weight", &LayerWeights::post_attn_norm, Width::One, Width::Dim, Needed::PostNorms},
    {"ffn_norm.weight", &LayerWeights::ffn_norm, Width::One, Width::Dim, Needed::FfnNorm},
    {"post_attention_norm.weight", &LayerWeights::ffn_norm, Width::One, Width::Dim, Needed::FfnNormPostAttention},
    {"attn_output.bias", &LayerWeights::bo, Width::One, Width::Dim, Needed::OutBias},
    {"attn_sinks.weight", &LayerWeights::sinks, Width::One, Width::Heads, Needed::Sinks},
    {"ffn_gate.weight", &LayerWeights::w_gate, Width::Hidden, Width::Dim, Needed::Gate},
    {"ffn_down.weight", &LayerWeights::w_down, Width::Dim, Width::Hidden, Needed::Dense},
    {"ffn_up.weight", &LayerWeights::w_up, Width::UpRows, Width::Dim, Needed::Dense},
    {"ffn_gate_inp.weight", &LayerWeights::router, Width::Experts, Width::Dim, Needed::Moe},
    {"ffn_gate_exps.weight", &LayerWeights::gate_exps, Width::ExpertHidden, Width::Dim, Needed::Moe, true},
    {"ffn_up_exps.weight", &LayerWeights::up_exps, Width::ExpertHidden, Width::Dim, Needed::Moe, true},
    {"ffn_down_exps.weight", &LayerWeights::down_exps, Width::Dim, Width::ExpertHidden, Needed::Moe, true},
    {"ffn_gate_inp.bias", &LayerWeights::router_bias, Width::One, Width::Experts, Needed::MoeBiases},
    {"ffn_gate_exps.bias", &LayerWeights::gate_exps_bias, Width::Experts, Width::ExpertHidden, Needed::MoeBiases, false, true},
    {"ffn_up_exps.bias", &LayerWeights::up_exps_bias, Width::Experts, Width::ExpertHidden, Needed::MoeBiases, false, true},
    {"ffn_down_exps.bias", &LayerWeights::down_exps_bias, Width::Experts, Width::Dim, Needed::MoeBiases, false, true},
    {"post_ffw_norm.weight", &LayerWeights::post_ffn_norm, Width::One, Width::Dim, Needed::PostNorms},
};

bool needed(const ArchitectureSpec& a, const ModelConfig& c, Needed n) {
  switch (n) {
    case Needed::Always: return true;
    case Needed::QkvBias: return a.qkv_bias;
    case Needed::SeparateQkv: return !a.fused_qkv;
    case Needed::FusedQkv: return a.fused_qkv;
    case Needed::Dense: return !c.is_moe();
    case Needed::Gate: return !c.is_moe() && !a.fused_gate_up;
    case Needed::Moe: return c.is_moe();
    case Needed::QkNorm: return a.qk_norm;
    case Needed::PostNorms: return a.post_norms;
    case Needed::OutBias: return a.out_bias;
    case Needed::Sinks: return a.attn_sinks;
    case Needed::FfnNorm: return !a.ffn_norm_post_attention;
    case Needed::FfnNormPostAttention: return a.ffn_norm_post_attention;
    case Needed::MoeBiases: return a.moe_biases && c.is_moe();
  }
  return false;
}

int64_t width(const ModelConfig& c, Width w) {
  switch (w) {
    case Width::One: return 1;
    case Width::Dim: return c.dim;
    case Width::QDim: return int64_t{c.num_heads} * c.head_dim;
    case Width::KvDim: return c.kv_dim();
    case Width::Hidden: return c.hidden_dim;
    case Width::UpRows: return c.fused_gate_up ? int64_t{2} * c.hidden_dim : c.hidden_dim;  // gate rows, then up
    case Width::HeadDim: return c.head_dim;
    case Width::QkvDim: return int64_t{c.num_heads} * c.head_dim + 2 * int64_t{c.kv_dim()};
    case Width::Experts: return c.num_experts;
    case Width::ExpertHidden: return c.expert_hidden_dim;
    case Width::Heads: return c.num_heads;
  }
  return 0;
}

class GgufLlamaReader {
 public:
  // requested_context: LoadOptions::context_length (0: the file's), which picks
  // Phi-3's long or short RoPE factors.
  GgufLlamaReader(const GgufFile& file, Model& model, int32_t requested_context)
      : f_(file), m_(model), requested_context_(requested_context) {}

  Status read() {
    const GgufValue* arch = f_.find("general.architecture");
    if (arch == nullptr) return fail("missing general.architecture (string)");
    if (!arch->as_string()) return fail("general.architecture is not a string");
    const ArchitectureSpec* spec = find_architecture(arch->string);
    if (spec == nullptr)
      return fail("unsupported architecture '" + arch->string + "' (supported: " + supported_architectures() + ")");
    GB_TRY(read_experts(*spec));
    GB_TRY(read_config(*spec));
    GB_TRY(read_variations(*spec));
    GB_TRY(complete_model_config(m_.config, f_.path()));
    GB_TRY(read_tensors(*spec));
    GB_TRY(read_rope_factors(*spec));
    GB_TRY(read_classifier());
    auto vocab = vocabulary_from_gguf(f_);
    if (!vocab) return vocab.error();
    m_.vocabulary = std::move(vocab.value());
    if (const GgufValue* t = f_.find("tokenizer.chat_template"); t && t->as_string()) m_.chat_template = t->string;
    if (const GgufValue* n = f_.find("general.name"); n && n->as_string() && !n->string.empty()) m_.name = n->string;
    m_.metadata.emplace_back("format", "GGUF v" + std::to_string(f_.version()));
    m_.metadata.emplace_back("tensors", std::to_string(f_.tensors().size()));
    m_.metadata.emplace_back("alignment", std::to_string(f_.alignment()));
    for (const auto& [key, value] : f_.metadata()) m_.metadata.emplace_back(key, value.to_display());
    return Status::success();
  }

 private:
  Status read_config(const ArchitectureSpec& spec) {
    const std::string p = std::string(spec.name) + ".";
    ModelConfig& c = m_.config;
    c.architecture = std::string(spec.name);
    c.rope_style = spec.rope_style;
    c.qkv_bias = spec.qkv_bias;
    GB_TRY(read_int(p + "embedding_length", c.dim, true));
    GB_TRY(read_int(p + "feed_forward_length", c.hidden_dim, true));
    GB_TRY(read_int(p + "block_count", c.num_layers, true));
    GB_TRY(read_int(p + "attention.head_count", c.num_heads, true));
    c.num_kv_heads = c.num_heads;
    GB_TRY(read_int(p + "attention.head_count_kv", c.num_kv_heads, false));
    GB_TRY(read_int(p + "context_length", c.context_length, true));
    c.rope_dim = 0;  // default: the whole head
    GB_TRY(read_int(p + "rope.dimension_count", c.rope_dim, false));
    c.head_dim = 0;  // default: dim / heads
    GB_TRY(read_int(p + "attention.key_length", c.head_dim, false));
    int32_t value_length = c.head_dim;
    GB_TRY(read_int(p + "attention.value_length", value_length, false));
    if (value_length != c.head_dim)
      return fail(p + "attention.value_length " + std::to_string(value_length) + " differs from key_length " +
                  std::to_string(c.head_dim) + " (not supported)");
    GB_TRY(read_float(p + "rope.freq_base", c.rope_freq_base));
    GB_TRY(read_float(p + "attention.layer_norm_rms_epsilon", c.rms_eps));
    return read_vocab_size(p);
  }

  // Mixture of experts: the counts, the experts' width, and a refusal of the
  // variants the FFN step does not run (shared experts, other gating functions,
  // expert groups, scaled weights), each before the rest of the config is read.
  Status read_experts(const ArchitectureSpec& spec) {
    const std::string p = std::string(spec.name) + ".";
    ModelConfig& c = m_.config;
    int32_t experts = 0;
    GB_TRY(read_int(p + "expert_count", experts, false));
    if (experts <= 0) {
      if (spec.moe == MoeSupport::Required) return fail("missing or zero " + p + "expert_count (a mixture of experts)");
      return Status::success();
    }
    if (spec.moe == MoeSupport::None)
      return fail("mixture-of-experts " + std::string(spec.name) + " models are not supported (" + p +
                  "expert_count = " + std::to_string(experts) + "; supported: llama (Mixtral), qwen3moe)");
    if (experts > kMaxExperts)
      return fail(p + "expert_count = " + std::to_string(experts) + " is out of range (at most " +
                  std::to_string(kMaxExperts) + ")");
    int32_t used = 0;
    GB_TRY(read_int(p + "expert_used_count", used, true));
    if (used < 1 || used > experts)
      return fail(p + "expert_used_count = " + std::to_string(used) + " must be between 1 and expert_count (" +
                  std::to_string(experts) + ")");
    int32_t width = 0;
    GB_TRY(read_int(p + (spec.expert_ffn_length_key ? "expert_feed_forward_length" : "feed_forward_length"), width, true));
    if (width <= 0 || width > kMaxModelDim)
      return fail("expert width " + std::to_string(width) + " is out of range");
    for (const char* key : {"expert_shared_count", "expert_shared_feed_forward_length", "expert_group_count"}) {
      int32_t v = 0;
      GB_TRY(read_int(p + key, v, false));
      if (v > 0) return fail(p + key + " = " + std::to_string(v) + ": shared or grouped experts are not supported");
    }
    int32_t gating = 1;  // llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX
    GB_TRY(read_int(p + "expert_gating_func", gating, false));
    if (gating != 1)
      return fail(p + "expert_gating_func = " + std::to_string(gating) + " is not supported (1, softmax, is)");
    float scale = 1.0f;
    GB_TRY(read_float(p + "expert_weights_scale", scale));
    if (scale != 1.0f) return fail(p + "expert_weights_scale other than 1 is not supported");
    if (const GgufValue* norm = f_.find(p + "expert_weights_norm"); norm && norm->type == GgufType::Bool &&
                                                                    norm->as_int() && *norm->as_int() == 0)
      return fail(p + "expert_weights_norm = false is not supported (the chosen weights are renormalized)");
    c.num_experts = experts;
    c.num_experts_used = used;
    c.expert_hidden_dim = width;
    m_.weights.experts = experts;
    m_.weights.experts_used = used;
    return Status::success();
  }

  // The table row's variations, and the keys that tune them.
  Status read_variations(const ArchitectureSpec& spec) {
    const std::string p = std::string(spec.name) + ".";
    ModelConfig& c = m_.config;
    c.activation = spec.activation;
    c.out_bias = spec.out_bias;
    c.attn_sinks = spec.attn_sinks;
    c.moe_biases = spec.moe_biases && c.is_moe();
    c.qk_norm = spec.qk_norm;
    c.post_norms = spec.post_norms;
    c.fused_qkv = spec.fused_qkv;
    c.fused_gate_up = spec.fused_gate_up;
    c.swa_pattern = spec.swa_pattern;
    c.sliding_window = spec.default_sliding_window;
    GB_TRY(read_int(p + "attention.sliding_window", c.sliding_window, false));
    GB_TRY(read_int(p + "attention.sliding_window_pattern", c.swa_pattern, false));
    if (c.sliding_window < 0 || c.swa_pattern < 1)
      return fail("sliding window " + std::to_string(c.sliding_window) + " / pattern " +
                  std::to_string(c.swa_pattern) + " out of range");
    c.rope_freq_base_swa = spec.rope_freq_base_swa;
    GB_TRY(read_float(p + "rope.freq_base_swa", c.rope_freq_base_swa));
    GB_TRY(read_float(p + "attn_logit_softcapping", c.attn_softcap));
    GB_TRY(read_float(p + "final_logit_softcapping", c.final_softcap));
    GB_TRY(read_float(p + "rope.scaling.attn_factor", c.rope_attn_factor));
    GB_TRY(read_int(p + "rope.scaling.original_context_length", c.rope_orig_context, false));
    if (const GgufValue* t = f_.find(p + "rope.scaling.type"); t && t->as_string() && t->string != "none") {
      if (t->string != "linear" && t->string != "yarn")
        return fail("rope scaling type '" + t->string + "' is not supported (linear and yarn are)");
      float factor = 1.0f;
      GB_TRY(read_float(p + "rope.scaling.factor", factor));
      if (!(factor > 0.0f) || !std::isfinite(factor)) return fail(p + "rope.scaling.factor must be positive");
      if (t->string == "linear") c.rope_freq_scale = 1.0f / factor;
      else GB_TRY(read_yarn(spec, p, factor));
    }
    if (c.attn_softcap < 0.0f || c.final_softcap < 0.0f || !(c.rope_attn_factor > 0.0f))
      return fail("negative soft-cap or non-positive rope attention factor");
    if (spec.embed_scale_sqrt_dim) c.embed_scale = std::sqrt(static_cast<float>(c.dim));
    return Status::success();
  }

  // YaRN (gpt-oss): the factor, the original context it extends and the
  // correction range's rotation counts; read_rope_factors turns them into
  // per-pair frequency divisors. Variants llama.cpp reads but the divisors do
  // not express (another extrapolation mix, DeepSeek's log multiplier) are refused.
  Status read_yarn(const ArchitectureSpec& spec, const std::string& p, float factor) {
    ModelConfig& c = m_.config;
    if (c.rope_orig_context <= 0)
      return fail("YaRN RoPE scaling needs " + p + "rope.scaling.original_context_length");
    float ext = 1.0f, log_multiplier = 0.0f;
    GB_TRY(read_float(p + "rope.scaling.yarn_ext_factor", ext));
    GB_TRY(read_float(p + "rope.scaling.yarn_log_multiplier", log_multiplier));
    if (ext != 1.0f || log_multiplier != 0.0f)
      return fail("YaRN with yarn_ext_factor other than 1 or a yarn_log_multiplier is not supported");
    GB_TRY(read_float(p + "rope.scaling.yarn_beta_fast", c.rope_yarn_beta_fast));
    GB_TRY(read_float(p + "rope.scaling.yarn_beta_slow", c.rope_yarn_beta_slow));
    if (!(c.rope_yarn_beta_fast > 0.0f) || !(c.rope_yarn_beta_slow > 0.0f))
      return fail("YaRN beta_fast / beta_slow must be positive");
    c.rope_yarn_factor = factor;
    c.rope_yarn_truncate = spec.yarn_truncate;
    return Status::success();
  }

  // YaRN as frequency divisors: pair i turns at base^(-2i/d) / f_i with
  // 1/f_i = e_i + (1 - e_i) / factor, e_i = 1 - clamp((i - low) / (high - low), 0, 1)
  // (extrapolated below `low`, interpolated above `high`), low and high the
  // dimensions where a pair turns beta_fast and beta_slow times over the
  // original context; cos and sin x (0.1 ln(factor) + 1). As transformers'
  // _compute_yarn_parameters; llama.cpp's ggml_rope_yarn_corr_dims always rounds
  // the range outward (truncate), gpt-oss's own config says not to.
  void make_yarn_factors() {
    ModelConfig& c = m_.config;
    const double d = c.rope_dim, base = c.rope_freq_base, factor = c.rope_yarn_factor;
    const auto corr_dim = [&](double rotations) {
      return d * std::log(c.rope_orig_context / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
    };
    double low = corr_dim(c.rope_yarn_beta_fast), high = corr_dim(c.rope_yarn_beta_slow);
    if (c.rope_yarn_truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, d - 1.0);
    if (low == high) high += 0.001;
    const int64_t pairs = c.rope_dim / 2;
    std::vector<std::byte> buffer(static_cast<size_t>(pairs) * sizeof(float));
    auto* divisors = reinterpret_cast<float*>(buffer.data());
    for (int64_t i = 0; i < pairs; ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolated = 1.0 - ramp;
      divisors[i] = static_cast<float>(1.0 / (extrapolated + (1.0 - extrapolated) / factor));
    }
    m_.owned_buffers.push_back(std::move(buffer));
    m_.weights.rope_freqs = TensorView{"yarn (rope frequency divisors)", WeightType::F32,
                                       m_.owned_buffers.back().data(), 1, pairs};
    c.rope_freq_factors = true;
    if (factor > 1.0) c.rope_attn_factor *= static_cast<float>(0.1 * std::log(factor) + 1.0);
  }

  Status read_tensors(const ArchitectureSpec& spec) {
    ModelConfig& c = m_.config;
    ModelWeights& w = m_.weights;
    // Mixtral files converted before llama.cpp stacked the experts (early 2024)
    // hold one 2-D tensor per expert; the experts step reads 3-D stacks.
    if (c.is_moe() && f_.find_tensor("blk.0.ffn_gate_exps.weight") == nullptr &&
        f_.find_tensor("blk.0.ffn_gate.0.weight") != nullptr)
      return fail("the experts are stored one tensor per expert (blk.0.ffn_gate.0.weight, an older llama.cpp "
                  "layout); convert the model again with a current llama.cpp, which stacks them (ffn_gate_exps)");
    // Query scale: Gemma's 27B shapes use dim / heads (see architecture.h).
    if (spec.layers_27b > 0)
      c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.num_layers == spec.layers_27b ? c.dim / c.num_heads
                                                                                          : c.head_dim));
    GB_TRY(matrix("token_embd.weight", c.vocab_size, c.dim, w.token_embedding));
    w.layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
    for (int32_t l = 0; l < c.num_layers; ++l) {
      LayerWeights& lw = w.layers[static_cast<size_t>(l)];
      const std::string b = "blk." + std::to_string(l) + ".";
      for (const LayerTensor& t : kLayerTensors) {
        if (!needed(spec, c, t.needed)) continue;
        if (t.per_expert) GB_TRY(expert_matrix(b + t.name, width(c, t.rows), width(c, t.cols), lw.*t.field));
        else if (t.as_f32) GB_TRY(f32_matrix(b + t.name, width(c, t.rows), width(c, t.cols), lw.*t.field));
        else if (t.rows == Width::One) GB_TRY(vector(b + t.name, width(c, t.cols), lw.*t.field));
        else GB_TRY(matrix(b + t.name, width(c, t.rows), width(c, t.cols), lw.*t.field));
      }
    }
    return vector("output_norm.weight", c.dim, w.output_norm);
  }

  // Llama-3.1/3.2 "llama3" rope scaling is stored as per-pair frequency divisors
  // (rope_freqs); Phi-3 128k as two sets, long and short, chosen by the context
  // (long when it exceeds the original context, as llama.cpp does).
  Status read_rope_factors(const ArchitectureSpec& spec) {
    ModelConfig& c = m_.config;
    ModelWeights& w = m_.weights;
    if (c.rope_yarn_factor > 0.0f) {
      if (f_.find_tensor("rope_freqs.weight") != nullptr || f_.find_tensor("rope_factors_long.weight") != nullptr)
        return fail("YaRN RoPE scaling together with stored frequency factors is not supported");
      make_yarn_factors();
      return Status::success();
    }
    if (spec.rope_freqs && f_.find_tensor("rope_freqs.weight") != nullptr) {
      GB_TRY(vector("rope_freqs.weight", c.rope_dim / 2, w.rope_freqs));
      c.rope_freq_factors = true;
    }
    if (!spec.rope_long_short || f_.find_tensor("rope_factors_long.weight") == nullptr) return Status::success();
    const int32_t ctx = requested_context_ > 0 ? requested_context_ : c.context_length;
    c.rope_long_factors = c.rope_orig_context > 0 && ctx > c.rope_orig_context;
    const char* chosen = c.rope_long_factors ? "rope_factors_long.weight" : "rope_factors_short.weight";
    const char* other = c.rope_long_factors ? "rope_factors_short.weight" : "rope_factors_long.weight";
    GB_TRY(vector(chosen, c.rope_dim / 2, w.rope_freqs));
    GB_TRY(vector(other, c.rope_dim / 2, w.rope_factors_other));
    c.rope_freq_factors = true;
    return Status::success();
  }

  Status read_classifier() {
    ModelConfig& c = m_.config;
    ModelWeights& w = m_.weights;
    const int64_t d = c.dim;
    c.tied_classifier = f_.find_tensor("output.weight") == nullptr;
    if (c.tied_classifier) {
      w.classifier = w.token_embedding;
      return Status::success();
    }
    GB_TRY(matrix("output.weight", c.vocab_size, d, w.classifier));
    // Converters from tied checkpoints (llama2.c -> GGUF) write the embedding
    // twice. Treating a byte-identical copy as tied gives the same config as
    // the source file and halves the classifier's share of weight_bytes().
    // memcmp stops at the first differing byte, so a truly untied model costs
    // next to nothing here.
    if (w.classifier.dtype == w.token_embedding.dtype &&
        std::memcmp(w.classifier.data, w.token_embedding.data, w.classifier.num_bytes()) == 0) {
      c.tied_classifier = true;
      w.classifier = w.token_embedding;
      m_.metadata.emplace_back("output.weight", "byte-identical to token_embd.weight: treated as tied");
    }
    return Status::success();
  }

  Error fail(const std::string& problem) const { return make_error(f_.path() + ": " + problem); }

  Status read_int(const std::string& key, int32_t& out, bool required) {
    const GgufValue* v = f_.find(key);
    if (v == nullptr) return required ? Status(fail("missing metadata key " + key)) : Status::success();
    auto i = v->as_int();
    if (!i || v->type == GgufType::Bool) return fail(key + " is not an integer");
    // Out-of-int32 values are absurd for every key read here: said with the
    // file's own value (the config check reports the in-range absurd ones).
    if (*i > INT32_MAX || *i < INT32_MIN) return fail(key + " = " + std::to_string(*i) + " is out of range");
    out = static_cast<int32_t>(std::max<int64_t>(*i, -1));
    return Status::success();
  }

  Status read_float(const std::string& key, float& out) {
    const GgufValue* v = f_.find(key);
    if (v == nullptr) return Status::success();
    auto x = v->as_double();
    if (!x || v->type == GgufType::Bool) return fail(key + " is not a number");
    out = static_cast<float>(*x);
    return Status::success();
  }

  // Vocab size: <arch>.vocab_size if given, else the embedding's rows, else the
  // tokenizer's token count. The embedding shape is then checked against it.
  Status read_vocab_size(const std::string& p) {
    ModelConfig& c = m_.config;
    if (f_.find(p + "vocab_size") != nullptr) return read_int(p + "vocab_size", c.vocab_size, true);
    if (const GgufTensorInfo* t = f_.find_tensor("token_embd.weight"); t && t->dims.size() == 2) {
      c.vocab_size = static_cast<int32_t>(std::min<uint64_t>(t->dims[1], INT32_MAX));
    } else if (const GgufValue* tokens = f_.find("tokenizer.ggml.tokens")) {
      c.vocab_size = static_cast<int32_t>(std::min<uint64_t>(tokens->array_size(), INT32_MAX));
    }
    return Status::success();
  }

  Status find(const std::string& name, const GgufTensorInfo*& out) {
    out = f_.find_tensor(name);
    if (out == nullptr) return fail("missing tensor " + name);
    return Status::success();
  }

  static std::string shape_text(const std::vector<uint64_t>& dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }

  // A (rows, cols) matrix: GGUF ne = [cols, rows].
  Status matrix(const std::string& name, int64_t rows, int64_t cols, TensorView& out) {
    const GgufTensorInfo* t = nullptr;
    GB_TRY(find(name, t));
    const std::vector<uint64_t> want = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
    if (t->dims != want)
      return fail("tensor " + name + " has shape " + shape_text(t->dims) + " but the config expects " +
                  shape_text(want) + " (ne order: columns first)");
    out = TensorView{name, t->dtype, f_.tensor_data(*t), rows, cols};
    return Status::success();
  }

  // A stack of `experts` (rows, cols) matrices: GGUF ne = [cols, rows, experts],
  // viewed as one (experts * rows, cols) matrix (expert e's rows follow e - 1's).
  Status expert_matrix(const std::string& name, int64_t rows, int64_t cols, TensorView& out) {
    const GgufTensorInfo* t = nullptr;
    GB_TRY(find(name, t));
    const int64_t experts = m_.config.num_experts;
    const std::vector<uint64_t> want = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows),
                                        static_cast<uint64_t>(experts)};
    if (t->dims != want)
      return fail("tensor " + name + " has shape " + shape_text(t->dims) + " but the config expects " +
                  shape_text(want) + " (ne order: columns, rows, experts)");
    out = TensorView{name, t->dtype, f_.tensor_data(*t), rows * experts, cols};
    return Status::success();
  }

  // A (n) vector, always handed out as F32: norms are tiny, and converting them
  // once here (from any table type) spares every backend a non-F32 norm path.
  Status vector(const std::string& name, int64_t n, TensorView& out) {
    const GgufTensorInfo* t = nullptr;
    GB_TRY(find(name, t));
    const bool shape_ok = (t->dims.size() == 1 && t->dims[0] == static_cast<uint64_t>(n)) ||
                          (t->dims.size() == 2 && t->dims[0] == static_cast<uint64_t>(n) && t->dims[1] == 1);
    if (!shape_ok)
      return fail("tensor " + name + " has shape " + shape_text(t->dims) + " but the config expects [" +
                  std::to_string(n) + "]");
    return as_f32(*t, name, 1, n, out);
  }

  // A (rows, cols) matrix handed out as F32 (the experts' bias rows: small, and
  // added to float rows), converted once here from any table type.
  Status f32_matrix(const std::string& name, int64_t rows, int64_t cols, TensorView& out) {
    GB_TRY(matrix(name, rows, cols, out));
    const GgufTensorInfo* t = nullptr;
    GB_TRY(find(name, t));
    return as_f32(*t, name, rows, cols, out);
  }

  Status as_f32(const GgufTensorInfo& t, const std::string& name, int64_t rows, int64_t cols, TensorView& out) {
    out = TensorView{name, WeightType::F32, f_.tensor_data(t), rows, cols};
    if (t.dtype == WeightType::F32) return Status::success();
    const kernels::WeightTypeTraits& traits = kernels::weight_traits(t.dtype);
    if (cols % traits.block_elements != 0)
      return fail("tensor " + name + " of type " + std::string(traits.name) + " has rows of " + std::to_string(cols) +
                  " values, not whole blocks");
    std::vector<std::byte> converted(static_cast<size_t>(rows * cols) * sizeof(float));  // (rows, cols) f32
    const size_t row_bytes = static_cast<size_t>(cols / traits.block_elements) * static_cast<size_t>(traits.block_bytes);
    for (int64_t r = 0; r < rows; ++r)
      traits.dequantize_row(static_cast<const std::byte*>(f_.tensor_data(t)) + static_cast<size_t>(r) * row_bytes,
                            reinterpret_cast<float*>(converted.data()) + r * cols, cols);
    m_.owned_buffers.push_back(std::move(converted));
    out.data = m_.owned_buffers.back().data();
    return Status::success();
  }

  const GgufFile& f_;
  Model& m_;
  int32_t requested_context_ = 0;
};

void describe_llama2c(Model& m) {
  const ModelConfig& c = m.config;
  m.metadata.emplace_back("format", std::string(model_format_name(m.format)));
  m.metadata.emplace_back("dim", std::to_string(c.dim));
  m.metadata.emplace_back("hidden_dim", std::to_string(c.hidden_dim));
  m.metadata.emplace_back("n_layers", std::to_string(c.num_layers));
  m.metadata.emplace_back("n_heads", std::to_string(c.num_heads));
  m.metadata.emplace_back("n_kv_heads", std::to_string(c.num_kv_heads));
  m.metadata.emplace_back("vocab_size", std::to_string(c.vocab_size));
  m.metadata.emplace_back("seq_len", std::to_string(c.context_length));
  m.metadata.emplace_back("shared_classifier", c.tied_classifier ? "true" : "false");
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Touches every page of the mapping in 8 MiB chunks, reporting progress after
// each chunk and stopping if the callback says so.
Status read_all_pages(const MappedFile& file, const std::string& path, const std::function<bool(double)>& progress) {
  constexpr size_t kChunk = size_t{8} << 20;
  constexpr size_t kPage = 4096;
  const auto* bytes = reinterpret_cast<const volatile unsigned char*>(file.data());
  const size_t size = file.size_bytes();
  unsigned sink = 0;
  for (size_t begin = 0; begin < size; begin += kChunk) {
    if (!progress(static_cast<double>(begin) / static_cast<double>(size))) return make_error(path + ": loading cancelled");
    const size_t end = std::min(size, begin + kChunk);
    for (size_t off = begin; off < end; off += kPage) sink += bytes[off];
  }
  (void)sink;
  if (!progress(1.0)) return make_error(path + ": loading cancelled");
  return {};
}

}  // namespace

Result<std::shared_ptr<const Model>> load_model(const std::string& path, const LoadOptions& options) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  const std::shared_ptr<const MappedFile>& file = mapped.value();
  const Result<uint32_t> magic_read = file->magic();
  if (!magic_read) return magic_read.error();
  const uint32_t magic = magic_read.value();

  auto model = std::make_shared<Model>();
  model->path = path;
  model->file = file;
  model->name = std::filesystem::path(path).stem().string();
  if (magic == kGgufMagic) {
    model->format = ModelFormat::Gguf;
    auto gguf = GgufFile::parse(file);
    if (!gguf) return gguf.error();
    GgufLlamaReader reader(gguf.value(), *model, options.context_length);
    GB_TRY(reader.read());
  } else {
    bool plausible = false;
    Status st = read_llama2c_model(file, *model, &plausible);
    if (!st.ok() && model->format == ModelFormat::Llama2cLegacy && !plausible) {
      // Anything without a known magic is tried as a headerless legacy file;
      // say so, since a wrong file type is the likelier mistake.
      std::string why = st.error().message;
      if (why.rfind(path + ": ", 0) == 0) why = why.substr(path.size() + 2);
      return make_error(path + ": unrecognised file format (magic " + hex32(magic) +
                        " is neither GGUF nor llama2.c version 1), and as a legacy llama2.c checkpoint: " + why);
    }
    GB_TRY(st);
    describe_llama2c(*model);
  }

  if (options.progress) GB_TRY(read_all_pages(*file, path, options.progress));

  ModelConfig& c = model->config;
  if (options.context_length < 0 || options.context_length > kMaxContextLength)
    return make_error(path + ": requested context length " + std::to_string(options.context_length) +
                      " is out of range (1.." + std::to_string(kMaxContextLength) + ")");
  c.file_context_length = c.context_length;
  if (options.context_length > 0) {
    model->metadata.emplace_back("file context length", std::to_string(c.context_length));
    c.context_length = options.context_length;
  }
  if (options.check_tensors) GB_TRY(check_tensor_values(*model));
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace gb
