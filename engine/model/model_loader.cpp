// load_model(): format detection by magic, the GGUF mapping (metadata keys ->
// ModelConfig, tensor names -> ModelWeights with shape checks, both driven by the
// architecture table in architecture.h and kLayerTensors below), context
// override, and the human-readable metadata list. The llama2.c formats live in
// llama2c_file.cpp. GGUF dims are ne order (ne[0] = columns = input features,
// ne[1] = rows = output features), matching TensorView's row-major layout.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cpu/convert.h"
#include "model/architecture.h"
#include "model/gguf_file.h"
#include "model/gguf_vocabulary.h"
#include "model/llama2c_file.h"
#include "model/mapped_file.h"
#include "model/model.h"
#include "model/model_validation.h"

namespace gb {

namespace {

// The width a tensor dimension must have, by name.
enum class Width { One, Dim, QDim, KvDim, Hidden };
// When a layer tensor is present: always, or only for architectures with q/k/v biases.
enum class Needed { Always, QkvBias };

// The tensors of one block: GGUF name after "blk.N.", where it goes, its shape
// (rows x cols; vectors have rows One) and when it is required.
struct LayerTensor {
  const char* name;
  TensorView LayerWeights::*field;
  Width rows, cols;
  Needed needed;
};

constexpr LayerTensor kLayerTensors[] = {
    {"attn_norm.weight", &LayerWeights::attn_norm, Width::One, Width::Dim, Needed::Always},
    {"attn_q.weight", &LayerWeights::wq, Width::QDim, Width::Dim, Needed::Always},
    {"attn_k.weight", &LayerWeights::wk, Width::KvDim, Width::Dim, Needed::Always},
    {"attn_v.weight", &LayerWeights::wv, Width::KvDim, Width::Dim, Needed::Always},
    {"attn_q.bias", &LayerWeights::bq, Width::One, Width::QDim, Needed::QkvBias},
    {"attn_k.bias", &LayerWeights::bk, Width::One, Width::KvDim, Needed::QkvBias},
    {"attn_v.bias", &LayerWeights::bv, Width::One, Width::KvDim, Needed::QkvBias},
    {"attn_output.weight", &LayerWeights::wo, Width::Dim, Width::QDim, Needed::Always},
    {"ffn_norm.weight", &LayerWeights::ffn_norm, Width::One, Width::Dim, Needed::Always},
    {"ffn_gate.weight", &LayerWeights::w_gate, Width::Hidden, Width::Dim, Needed::Always},
    {"ffn_down.weight", &LayerWeights::w_down, Width::Dim, Width::Hidden, Needed::Always},
    {"ffn_up.weight", &LayerWeights::w_up, Width::Hidden, Width::Dim, Needed::Always},
};

int64_t width(const ModelConfig& c, Width w) {
  switch (w) {
    case Width::One: return 1;
    case Width::Dim: return c.dim;
    case Width::QDim: return int64_t{c.num_heads} * c.head_dim;
    case Width::KvDim: return c.kv_dim();
    case Width::Hidden: return c.hidden_dim;
  }
  return 0;
}

class GgufLlamaReader {
 public:
  GgufLlamaReader(const GgufFile& file, Model& model) : f_(file), m_(model) {}

  Status read() {
    const GgufValue* arch = f_.find("general.architecture");
    if (arch == nullptr || !arch->as_string()) return fail("missing general.architecture (string)");
    const ArchitectureSpec* spec = find_architecture(arch->string);
    if (spec == nullptr)
      return fail("unsupported architecture '" + arch->string + "' (supported: " + supported_architectures() + ")");
    const std::string p = arch->string + ".";
    ModelConfig& c = m_.config;
    c.architecture = arch->string;
    c.rope_style = spec->rope_style;
    c.qkv_bias = spec->qkv_bias;
    GB_TRY(read_int(p + "embedding_length", c.dim, true));
    GB_TRY(read_int(p + "feed_forward_length", c.hidden_dim, true));
    GB_TRY(read_int(p + "block_count", c.num_layers, true));
    GB_TRY(read_int(p + "attention.head_count", c.num_heads, true));
    c.num_kv_heads = c.num_heads;
    GB_TRY(read_int(p + "attention.head_count_kv", c.num_kv_heads, false));
    GB_TRY(read_int(p + "context_length", c.context_length, true));
    c.rope_dim = 0;  // default: the whole head
    GB_TRY(read_int(p + "rope.dimension_count", c.rope_dim, false));
    GB_TRY(read_float(p + "rope.freq_base", c.rope_freq_base));
    GB_TRY(read_float(p + "attention.layer_norm_rms_epsilon", c.rms_eps));
    GB_TRY(read_vocab_size(p));

    ModelWeights& w = m_.weights;
    GB_TRY(complete_model_config(c, f_.path()));
    const int64_t d = c.dim;
    GB_TRY(matrix("token_embd.weight", c.vocab_size, d, w.token_embedding));
    w.layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
    for (int32_t l = 0; l < c.num_layers; ++l) {
      LayerWeights& lw = w.layers[static_cast<size_t>(l)];
      const std::string b = "blk." + std::to_string(l) + ".";
      for (const LayerTensor& t : kLayerTensors) {
        if (t.needed == Needed::QkvBias && !spec->qkv_bias) continue;
        if (t.rows == Width::One) GB_TRY(vector(b + t.name, width(c, t.cols), lw.*t.field));
        else GB_TRY(matrix(b + t.name, width(c, t.rows), width(c, t.cols), lw.*t.field));
      }
    }
    GB_TRY(vector("output_norm.weight", d, w.output_norm));
    // Llama-3.1/3.2 "llama3" rope scaling, stored by converters as per-pair
    // frequency divisors.
    if (spec->rope_freqs && f_.find_tensor("rope_freqs.weight") != nullptr) {
      GB_TRY(vector("rope_freqs.weight", c.rope_dim / 2, w.rope_freqs));
      c.rope_freq_factors = true;
    }
    c.tied_classifier = f_.find_tensor("output.weight") == nullptr;
    if (c.tied_classifier) {
      w.classifier = w.token_embedding;
    } else {
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
    }

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
  Error fail(const std::string& problem) const { return make_error(f_.path() + ": " + problem); }

  Status read_int(const std::string& key, int32_t& out, bool required) {
    const GgufValue* v = f_.find(key);
    if (v == nullptr) return required ? Status(fail("missing metadata key " + key)) : Status::success();
    auto i = v->as_int();
    if (!i || v->type == GgufType::Bool) return fail(key + " is not an integer");
    // Out-of-int32 values are absurd for every key read here; clamp so the
    // config check reports them with its "exceeds the limit" message.
    out = static_cast<int32_t>(std::clamp<int64_t>(*i, -1, INT32_MAX));
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

  // A (n) vector, always handed out as F32: norms are tiny, and converting them
  // once here spares every backend a non-F32 norm path.
  Status vector(const std::string& name, int64_t n, TensorView& out) {
    const GgufTensorInfo* t = nullptr;
    GB_TRY(find(name, t));
    const bool shape_ok = (t->dims.size() == 1 && t->dims[0] == static_cast<uint64_t>(n)) ||
                          (t->dims.size() == 2 && t->dims[0] == static_cast<uint64_t>(n) && t->dims[1] == 1);
    if (!shape_ok)
      return fail("tensor " + name + " has shape " + shape_text(t->dims) + " but the config expects [" +
                  std::to_string(n) + "]");
    out = TensorView{name, DType::F32, f_.tensor_data(*t), 1, n};
    if (t->dtype == DType::F32) return Status::success();
    std::vector<std::byte> converted(static_cast<size_t>(n) * sizeof(float));  // (n) f32
    const auto* src = reinterpret_cast<const uint16_t*>(f_.tensor_data(*t));
    auto* dst = reinterpret_cast<float*>(converted.data());
    if (t->dtype == DType::F16) kernels::f16_to_f32_row(src, dst, static_cast<size_t>(n));
    else if (t->dtype == DType::BF16) kernels::bf16_to_f32_row(src, dst, static_cast<size_t>(n));
    else return fail("tensor " + name + ": no conversion to F32 for " + std::string(dtype_info(t->dtype).name));
    m_.owned_buffers.push_back(std::move(converted));
    out.data = m_.owned_buffers.back().data();
    return Status::success();
  }

  const GgufFile& f_;
  Model& m_;
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
  if (file->size_bytes() < 4) return make_error(path + ": truncated file: too short to hold a header");
  uint32_t magic = 0;
  std::memcpy(&magic, file->data(), sizeof magic);

  auto model = std::make_shared<Model>();
  model->path = path;
  model->file = file;
  model->name = std::filesystem::path(path).stem().string();
  if (magic == kGgufMagic) {
    model->format = ModelFormat::Gguf;
    auto gguf = GgufFile::parse(file);
    if (!gguf) return gguf.error();
    GgufLlamaReader reader(gguf.value(), *model);
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
  if (options.context_length > 0) {
    model->metadata.emplace_back("file context length", std::to_string(c.context_length));
    c.context_length = options.context_length;
  }
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace gb
