// Synthetic model generation. Each tensor draws from its own splitmix64 stream
// seeded by (seed, tensor index), so the bytes do not depend on write order and
// two runs with one seed give identical files.
#include "model/synthetic_model.h"

#include <cmath>
#include <cstring>

#include "cpu/convert.h"
#include "model/architecture.h"
#include "model/gguf_writer.h"
#include "model/model_validation.h"

namespace gb {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Approximately standard normal: the Irwin-Hall sum of four 16-bit uniforms
// from one 64-bit draw, centred and scaled to unit variance. Tails stop at
// +-3.46, which is all a weight initialisation needs, at a fraction of the cost
// of Box-Muller for a billion values.
float approx_normal(uint64_t& state) {
  const uint64_t r = splitmix64(state);
  const float sum = static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
  constexpr float kMean = 4 * 65535.0f / 2, kScale = 1.7320508f / 65536.0f;  // sqrt(12/4) / 2^16
  return (sum - kMean) * kScale;
}

// A filler for a (rows, cols) tensor of `dtype`: N(constant, std^2), or all
// `constant` when std == 0.
GgufWriter::FillFn make_fill(WeightType dtype, uint64_t seed, uint64_t tensor_index, float stddev, float constant) {
  return [=](std::span<std::byte> out) {
    uint64_t state = seed * 0x2545f4914f6cdd1dull + tensor_index;
    const size_t n = out.size() / dtype_info(dtype).block_bytes;
    auto value = [&] { return stddev > 0.0f ? constant + stddev * approx_normal(state) : constant; };
    if (dtype == WeightType::F32) {
      auto* dst = reinterpret_cast<float*>(out.data());
      for (size_t i = 0; i < n; ++i) dst[i] = value();
    } else if (kernels::is_quantized(dtype)) {
      // A quantized type: 256 blocks quantized from random normals, then the
      // tensor's blocks drawn from them (a multi-GiB file in seconds; the
      // values are as random as a benchmark needs).
      const kernels::WeightTypeTraits& t = kernels::weight_traits(dtype);
      constexpr size_t kPool = 256;
      std::vector<float> values(kPool * static_cast<size_t>(t.block_elements));
      for (float& v : values) v = value();
      std::vector<std::byte> pool(kPool * static_cast<size_t>(t.block_bytes));
      t.quantize_row(values.data(), pool.data(), static_cast<int64_t>(values.size()));
      for (size_t i = 0; i < n; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        std::memcpy(out.data() + i * static_cast<size_t>(t.block_bytes),
                    pool.data() + (state >> 56) % kPool * static_cast<size_t>(t.block_bytes),
                    static_cast<size_t>(t.block_bytes));
      }
    } else {
      auto* dst = reinterpret_cast<uint16_t*>(out.data());
      const bool half = dtype == WeightType::F16;
      for (size_t i = 0; i < n; ++i) dst[i] = half ? kernels::f32_to_f16(value()) : kernels::f32_to_bf16(value());
    }
  };
}

void add_vocabulary(GgufWriter& w, int32_t vocab_size) {
  Vocabulary v = make_synthetic_vocabulary(vocab_size);
  w.add_metadata("tokenizer.ggml.model", GgufValue::str(v.model));
  w.add_metadata("tokenizer.ggml.tokens", GgufValue::string_array(std::move(v.tokens)));
  w.add_metadata("tokenizer.ggml.scores", GgufValue::f32_array(v.scores));
  w.add_metadata("tokenizer.ggml.token_type", GgufValue::i32_array(v.token_types));
  w.add_metadata("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(v.bos_id)));
  w.add_metadata("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(v.eos_id)));
  w.add_metadata("tokenizer.ggml.unknown_token_id", GgufValue::u32(static_cast<uint32_t>(v.unk_id)));
  w.add_metadata("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
  w.add_metadata("tokenizer.ggml.add_eos_token", GgufValue::boolean(false));
}

// The keys of a block's shape every synthetic file writes under prefix p
// ("llama." ...): widths, counts, the head size (key/value length only when it
// is explicit), RoPE dimensions and base, the norm epsilon.
void add_shape_metadata(GgufWriter& w, const std::string& p, const ModelConfig& c, bool explicit_head_dim,
                        float rope_base, float rms_eps) {
  const auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  w.add_metadata(p + "context_length", u32(c.context_length));
  w.add_metadata(p + "embedding_length", u32(c.dim));
  w.add_metadata(p + "block_count", u32(c.num_layers));
  w.add_metadata(p + "feed_forward_length", u32(c.hidden_dim));
  w.add_metadata(p + "attention.head_count", u32(c.num_heads));
  w.add_metadata(p + "attention.head_count_kv", u32(c.num_kv_heads));
  if (explicit_head_dim) {
    w.add_metadata(p + "attention.key_length", u32(c.head_dim));
    w.add_metadata(p + "attention.value_length", u32(c.head_dim));
  }
  w.add_metadata(p + "rope.dimension_count", u32(c.head_dim));
  w.add_metadata(p + "rope.freq_base", GgufValue::f32(rope_base));
  w.add_metadata(p + "attention.layer_norm_rms_epsilon", GgufValue::f32(rms_eps));
}

}  // namespace

const std::vector<SyntheticShape>& synthetic_shapes() {
  static const std::vector<SyntheticShape> shapes = {
      {"stories260K", 64, 172, 5, 8, 4, 512, 512, true},
      {"stories15M", 288, 768, 6, 6, 6, 32000, 256, true},
      {"stories42M", 512, 1376, 8, 8, 8, 32000, 1024, true},
      {"stories110M", 768, 2048, 12, 12, 12, 32000, 1024, true},
      {"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 2048, false},
      // Llama 3.1 8B's shape (its 128256-token vocabulary and 131072-token
      // context; RoPE base and scaling are not the model's).
      {"llama-3.1-8b", 4096, 14336, 32, 32, 8, 128256, 131072, false},
      // Qwen3-30B-A3B's shape: 128 experts of width 768, 8 per token, head size
      // 128 with q/k norms, its 151936-token vocabulary and 40960-token context.
      {.name = "qwen3-30b-a3b", .dim = 2048, .hidden_dim = 6144, .num_layers = 48, .num_heads = 32,
       .num_kv_heads = 4, .vocab_size = 151936, .context_length = 40960, .tied_classifier = false,
       .architecture = "qwen3moe", .head_dim = 128, .qk_norm = true, .experts = 128, .experts_used = 8,
       .expert_hidden_dim = 768},
  };
  return shapes;
}

std::optional<SyntheticShape> find_synthetic_shape(std::string_view name) {
  for (const auto& s : synthetic_shapes())
    if (s.name == name) return s;
  return std::nullopt;
}

Vocabulary make_synthetic_vocabulary(int32_t vocab_size) {
  GB_CHECK(vocab_size >= 260);
  Vocabulary v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {2, 3, 3};
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    v.tokens.emplace_back(buf);
    v.token_types.push_back(6);
  }
  std::vector<std::string> singles = {"\xE2\x96\x81"};  // U+2581, SentencePiece's space
  for (char ch = 'a'; ch <= 'z'; ++ch) singles.emplace_back(1, ch);
  for (char ch = '!'; ch <= '~'; ++ch)
    if (ch < 'a' || ch > 'z') singles.emplace_back(1, ch);
  // Breadth-first: all singles, then each piece so far extended by one single.
  // Pieces are distinct because (prefix, last character) pairs are distinct.
  std::vector<std::string> pieces;
  for (size_t i = 0; pieces.size() + v.tokens.size() < static_cast<size_t>(vocab_size); ++i) {
    if (i < singles.size()) {
      pieces.push_back(singles[i]);
      continue;
    }
    const std::string& prefix = pieces[(i - singles.size()) / singles.size()];
    pieces.push_back(prefix + singles[(i - singles.size()) % singles.size()]);
  }
  for (auto& p : pieces) {
    v.tokens.push_back(std::move(p));
    v.token_types.push_back(1);
  }
  v.scores.assign(v.tokens.size(), 0.0f);
  for (size_t i = 259; i < v.tokens.size(); ++i) v.scores[i] = -static_cast<float>(i - 259);
  return v;
}

Status write_synthetic_model(const SyntheticSpec& spec, const std::string& path,
                             const std::function<void(uint64_t, uint64_t)>& progress) {
  const SyntheticShape& s = spec.shape;
  ModelConfig c;
  c.dim = s.dim;
  c.hidden_dim = s.hidden_dim;
  c.num_layers = s.num_layers;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.vocab_size = s.vocab_size;
  c.context_length = s.context_length;
  c.head_dim = s.head_dim;
  GB_TRY(complete_model_config(c, path));
  if (s.vocab_size < 260) return make_error(path + ": synthetic vocab size must be at least 260");

  GgufWriter w;
  const std::string p = s.architecture + ".";
  w.add_metadata("general.architecture", GgufValue::str(s.architecture));
  w.add_metadata("general.name", GgufValue::str("synthetic-" + s.name));
  const uint32_t file_type = spec.dtype == WeightType::F32    ? 0
                             : spec.dtype == WeightType::F16  ? 1
                             : spec.dtype == WeightType::Q4_0 ? 2
                             : spec.dtype == WeightType::Q8_0 ? 7
                                                         : 32;
  w.add_metadata("general.file_type", GgufValue::u32(file_type));
  w.add_metadata("glassbox.synthetic.seed", GgufValue::u64(spec.seed));
  const auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  add_shape_metadata(w, p, c, s.head_dim > 0, 10000.0f, 1e-5f);
  if (s.experts > 0) {
    w.add_metadata(p + "expert_count", u32(s.experts));
    w.add_metadata(p + "expert_used_count", u32(s.experts_used));
    if (s.architecture != "llama") w.add_metadata(p + "expert_feed_forward_length", u32(s.expert_hidden_dim));
  }

  add_vocabulary(w, s.vocab_size);


  uint64_t index = 0;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    const uint64_t n = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
    w.add_tensor(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}, dtype_info(spec.dtype).gguf_code,
                 *dtype_bytes(spec.dtype, n), make_fill(spec.dtype, spec.seed, index++, 0.02f, 0.0f));
  };
  // The experts' 3-D stacks: ne = [cols, rows, experts].
  auto experts = [&](const std::string& name, int64_t rows, int64_t cols) {
    const uint64_t n = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * static_cast<uint64_t>(s.experts);
    w.add_tensor(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), static_cast<uint64_t>(s.experts)},
                 dtype_info(spec.dtype).gguf_code, *dtype_bytes(spec.dtype, n),
                 make_fill(spec.dtype, spec.seed, index++, 0.02f, 0.0f));
  };
  auto norm = [&](const std::string& name, int64_t n) {
    w.add_tensor(name, {static_cast<uint64_t>(n)}, dtype_info(WeightType::F32).gguf_code,
                 static_cast<uint64_t>(n) * sizeof(float), make_fill(WeightType::F32, spec.seed, index++, 0.0f, 1.0f));
  };
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
  matrix("token_embd.weight", c.vocab_size, c.dim);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    norm(b + "attn_norm.weight", c.dim);
    matrix(b + "attn_q.weight", q_dim, c.dim);
    matrix(b + "attn_k.weight", c.kv_dim(), c.dim);
    matrix(b + "attn_v.weight", c.kv_dim(), c.dim);
    if (s.qk_norm) {
      norm(b + "attn_q_norm.weight", c.head_dim);
      norm(b + "attn_k_norm.weight", c.head_dim);
    }
    matrix(b + "attn_output.weight", c.dim, q_dim);
    norm(b + "ffn_norm.weight", c.dim);
    if (s.experts > 0) {
      // The router in float32 (as converters write it), the experts in the file's type.
      const uint64_t n = static_cast<uint64_t>(s.experts) * static_cast<uint64_t>(c.dim);
      w.add_tensor(b + "ffn_gate_inp.weight", {static_cast<uint64_t>(c.dim), static_cast<uint64_t>(s.experts)},
                   dtype_info(WeightType::F32).gguf_code, n * sizeof(float),
                   make_fill(WeightType::F32, spec.seed, index++, 0.5f, 0.0f));
      experts(b + "ffn_gate_exps.weight", s.expert_hidden_dim, c.dim);
      experts(b + "ffn_down_exps.weight", c.dim, s.expert_hidden_dim);
      experts(b + "ffn_up_exps.weight", s.expert_hidden_dim, c.dim);
      continue;
    }
    matrix(b + "ffn_gate.weight", c.hidden_dim, c.dim);
    matrix(b + "ffn_down.weight", c.dim, c.hidden_dim);
    matrix(b + "ffn_up.weight", c.hidden_dim, c.dim);
  }
  norm("output_norm.weight", c.dim);
  if (!s.tied_classifier) matrix("output.weight", c.vocab_size, c.dim);
  return w.write(path, progress);
}

}  // namespace gb

// ---------------------------------------------------------------------------
// Architecture models (synth --arch): small, well-conditioned random models
// written with llama.cpp's key and tensor names for each architecture, for the
// reference tests (tests/data/arch, tools/make_arch_refs.py).

namespace gb {

const std::vector<SyntheticArch>& synthetic_archs() {
  // name, architecture, dim, hidden, layers, heads, kv heads, head_dim (0: dim/heads, no key_length),
  // vocab, context, rope base, rms eps, tied, sliding window, attn cap, final cap, linear rope factor,
  // original context (LongRoPE factors when > 0), embedding std
  static const std::vector<SyntheticArch> rows = {
      {"qwen3", "qwen3", 64, 128, 2, 4, 2, 32, 512, 256, 1000000.0f, 1e-6f, true, 0, 0, 0, 0, 0, 0.1f},
      {"mistral", "llama", 64, 160, 2, 4, 2, 0, 512, 256, 10000.0f, 1e-5f, false, 8, 0, 0, 0, 0},
      {"gemma2", "gemma2", 64, 128, 3, 4, 2, 32, 512, 256, 10000.0f, 1e-6f, true, 6, 5.0f, 15.0f, 0, 0, 0.02f},
      {"gemma3", "gemma3", 64, 128, 6, 4, 2, 32, 512, 256, 1000000.0f, 1e-6f, true, 6, 0, 0, 8.0f, 0, 0.02f},
      {"phi3", "phi3", 64, 128, 2, 4, 2, 0, 512, 256, 10000.0f, 1e-5f, false, 0, 0, 0, 0, 32},
  };
  return rows;
}

const SyntheticArch* find_synthetic_arch(std::string_view name) {
  for (const SyntheticArch& a : synthetic_archs())
    if (a.name == name) return &a;
  return nullptr;
}

namespace {

void add_arch_metadata(GgufWriter& w, const SyntheticArch& a, const ModelConfig& c, uint64_t seed) {
  const std::string p = a.architecture + ".";
  const auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  w.add_metadata("general.architecture", GgufValue::str(a.architecture));
  w.add_metadata("general.name", GgufValue::str("synthetic-arch-" + a.name));
  w.add_metadata("general.file_type", GgufValue::u32(0));
  w.add_metadata("glassbox.synthetic.seed", GgufValue::u64(seed));
  add_shape_metadata(w, p, c, a.head_dim > 0, a.rope_base, a.rms_eps);
  if (a.sliding_window > 0 || a.architecture == "phi3") w.add_metadata(p + "attention.sliding_window", u32(a.sliding_window));
  if (a.attn_softcap > 0) w.add_metadata(p + "attn_logit_softcapping", GgufValue::f32(a.attn_softcap));
  if (a.final_softcap > 0) w.add_metadata(p + "final_logit_softcapping", GgufValue::f32(a.final_softcap));
  if (a.rope_linear_factor > 0) {
    w.add_metadata(p + "rope.scaling.type", GgufValue::str("linear"));
    w.add_metadata(p + "rope.scaling.factor", GgufValue::f32(a.rope_linear_factor));
  }
  if (a.rope_orig_context > 0) {
    // LongRoPE (llama.cpp's Phi-3 converter): attention factor sqrt(1 + ln(s) / ln(orig)), s = ctx / orig.
    const double scale = static_cast<double>(c.context_length) / a.rope_orig_context;
    w.add_metadata(p + "rope.scaling.original_context_length", u32(a.rope_orig_context));
    w.add_metadata(p + "rope.scaling.attn_factor",
                   GgufValue::f32(static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(a.rope_orig_context)))));
  }
}

}  // namespace

std::vector<float> synthetic_rope_factors(int32_t n, bool long_factors) {
  std::vector<float> f(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) f[static_cast<size_t>(i)] = long_factors ? 1.0f + 3.0f * static_cast<float>(i) : 1.0f + 0.05f * static_cast<float>(i);
  return f;
}

Status write_synthetic_arch_model(const SyntheticArch& a, uint64_t seed, const std::string& path) {
  const ArchitectureSpec* spec = find_architecture(a.architecture);
  if (spec == nullptr) return make_error(path + ": unknown architecture " + a.architecture);
  ModelConfig c;
  c.dim = a.dim;
  c.hidden_dim = a.hidden_dim;
  c.num_layers = a.num_layers;
  c.num_heads = a.num_heads;
  c.num_kv_heads = a.num_kv_heads;
  c.head_dim = a.head_dim;
  c.vocab_size = a.vocab_size;
  c.context_length = a.context_length;
  GB_TRY(complete_model_config(c, path));
  GgufWriter w;
  add_arch_metadata(w, a, c, seed);
  add_vocabulary(w, a.vocab_size);

  // Scales after the fixture generators (../shared/tools/fixtures/make_tiny_models.py):
  // matrices N(0, 1.28/sqrt(fan_in)), embedding N(0, embed_std^2), norms 1 + N(0, 0.1),
  // the final norm scaled so that logits have a standard deviation of about 10.
  uint64_t index = 0;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float stddev) {
    w.add_tensor(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}, dtype_info(WeightType::F32).gguf_code,
                 static_cast<uint64_t>(rows * cols) * sizeof(float), make_fill(WeightType::F32, seed, index++, stddev, 0.0f));
  };
  auto vec = [&](const std::string& name, int64_t n, float mean, float stddev) {
    w.add_tensor(name, {static_cast<uint64_t>(n)}, dtype_info(WeightType::F32).gguf_code,
                 static_cast<uint64_t>(n) * sizeof(float), make_fill(WeightType::F32, seed, index++, stddev, mean));
  };
  const int64_t d = c.dim, hd = c.head_dim, q = int64_t{c.num_heads} * hd, kv = c.kv_dim(), h = c.hidden_dim;
  const auto fan = [](int64_t n) { return 1.28f / std::sqrt(static_cast<float>(n)); };
  matrix("token_embd.weight", c.vocab_size, d, a.embed_std);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    vec(b + "attn_norm.weight", d, 1.0f, 0.1f);
    if (spec->fused_qkv) {
      matrix(b + "attn_qkv.weight", q + 2 * kv, d, fan(d));
    } else {
      matrix(b + "attn_q.weight", q, d, fan(d));
      matrix(b + "attn_k.weight", kv, d, fan(d));
      matrix(b + "attn_v.weight", kv, d, fan(d));
    }
    if (spec->qkv_bias) {
      vec(b + "attn_q.bias", q, 0.0f, 0.5f);
      vec(b + "attn_k.bias", kv, 0.0f, 0.5f);
      vec(b + "attn_v.bias", kv, 0.0f, 0.5f);
    }
    if (spec->qk_norm) {
      vec(b + "attn_q_norm.weight", hd, 1.0f, 0.1f);
      vec(b + "attn_k_norm.weight", hd, 1.0f, 0.1f);
    }
    matrix(b + "attn_output.weight", d, q, fan(q));
    if (spec->post_norms) vec(b + "post_attention_norm.weight", d, 1.0f, 0.1f);
    vec(b + "ffn_norm.weight", d, 1.0f, 0.1f);
    if (!spec->fused_gate_up) matrix(b + "ffn_gate.weight", h, d, fan(d));
    matrix(b + "ffn_up.weight", spec->fused_gate_up ? 2 * h : h, d, fan(d));
    matrix(b + "ffn_down.weight", d, h, fan(h));
    if (spec->post_norms) vec(b + "post_ffw_norm.weight", d, 1.0f, 0.1f);
  }
  const float out_scale = a.tied ? 10.0f / (a.embed_std * std::sqrt(static_cast<float>(d))) : 10.0f / 1.28f;
  vec("output_norm.weight", d, out_scale, 0.1f * out_scale);
  if (!a.tied) matrix("output.weight", c.vocab_size, d, fan(d));
  if (a.rope_orig_context > 0) {
    for (const bool long_factors : {true, false}) {
      std::vector<float> f = synthetic_rope_factors(c.head_dim / 2, long_factors);
      std::vector<std::byte> bytes(f.size() * sizeof(float));
      std::memcpy(bytes.data(), f.data(), bytes.size());
      w.add_tensor(long_factors ? "rope_factors_long.weight" : "rope_factors_short.weight",
                   {static_cast<uint64_t>(f.size())}, WeightType::F32, std::move(bytes));
    }
  }
  return w.write(path);
}

}  // namespace gb
