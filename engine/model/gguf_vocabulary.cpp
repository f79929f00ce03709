// tokenizer.ggml.* -> Vocabulary, with the type and length checks a tokenizer
// relies on (every id in range, one score and one type per token).
#include "model/gguf_vocabulary.h"

namespace gb {

namespace {

Error vocab_error(const GgufFile& file, const std::string& problem) {
  return make_error(file.path() + ": " + problem);
}

Status read_token_id(const GgufFile& file, const char* key, size_t num_tokens, int32_t& out) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return Status::success();
  auto id = v->as_int();
  if (!id || v->type == GgufType::Bool) return vocab_error(file, std::string(key) + " is not an integer");
  // Converters write 0xFFFFFFFF (or -1) for "no such token".
  if (*id == -1 || *id == int64_t{UINT32_MAX}) {
    out = -1;
    return Status::success();
  }
  if (*id < 0 || static_cast<uint64_t>(*id) >= num_tokens)
    return vocab_error(file, std::string(key) + " " + std::to_string(*id) + " is outside the vocabulary (" +
                                 std::to_string(num_tokens) + " tokens)");
  out = static_cast<int32_t>(*id);
  return Status::success();
}

Status read_flag(const GgufFile& file, const char* key, bool& out) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return Status::success();
  auto b = v->as_bool();
  if (!b) return vocab_error(file, std::string(key) + " is not a bool");
  out = *b;
  return Status::success();
}

}  // namespace

Result<std::optional<Vocabulary>> vocabulary_from_gguf(const GgufFile& file) {
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens == nullptr) return std::optional<Vocabulary>();
  if (!tokens->is_array() || tokens->element_type != GgufType::String)
    return vocab_error(file, "tokenizer.ggml.tokens is not an array of strings");
  if (tokens->strings.empty()) return vocab_error(file, "tokenizer.ggml.tokens is empty");
  if (tokens->strings.size() > static_cast<size_t>(INT32_MAX))
    return vocab_error(file, "tokenizer.ggml.tokens has too many entries");

  Vocabulary vocab;
  const size_t num_tokens = tokens->strings.size();
  vocab.tokens = tokens->strings;
  if (const GgufValue* m = file.find("tokenizer.ggml.model")) {
    if (!m->as_string()) return vocab_error(file, "tokenizer.ggml.model is not a string");
    vocab.model = m->string;
  }
  if (const GgufValue* p = file.find("tokenizer.ggml.pre")) {
    if (!p->as_string()) return vocab_error(file, "tokenizer.ggml.pre is not a string");
    vocab.pre = p->string;
  }
  if (const GgufValue* s = file.find("tokenizer.ggml.scores")) {
    if (!s->is_array() || (s->element_type != GgufType::Float32 && s->element_type != GgufType::Float64))
      return vocab_error(file, "tokenizer.ggml.scores is not an array of floats");
    if (s->array_size() != num_tokens)
      return vocab_error(file, "tokenizer.ggml.scores has " + std::to_string(s->array_size()) +
                                   " entries for " + std::to_string(num_tokens) + " tokens");
    vocab.scores.resize(num_tokens);
    for (size_t i = 0; i < num_tokens; ++i) vocab.scores[i] = static_cast<float>(s->double_at(i));
  }
  if (const GgufValue* t = file.find("tokenizer.ggml.token_type")) {
    if (!t->is_array() || t->element_type == GgufType::String || t->element_type == GgufType::Array ||
        t->element_type == GgufType::Float32 || t->element_type == GgufType::Float64)
      return vocab_error(file, "tokenizer.ggml.token_type is not an array of integers");
    if (t->array_size() != num_tokens)
      return vocab_error(file, "tokenizer.ggml.token_type has " + std::to_string(t->array_size()) +
                                   " entries for " + std::to_string(num_tokens) + " tokens");
    vocab.token_types.resize(num_tokens);
    for (size_t i = 0; i < num_tokens; ++i) vocab.token_types[i] = static_cast<int32_t>(t->int_at(i));
  }
  if (const GgufValue* m = file.find("tokenizer.ggml.merges")) {
    if (!m->is_array() || m->element_type != GgufType::String)
      return vocab_error(file, "tokenizer.ggml.merges is not an array of strings");
    vocab.merges = m->strings;
  }
  GB_TRY(read_token_id(file, "tokenizer.ggml.bos_token_id", num_tokens, vocab.bos_id));
  GB_TRY(read_token_id(file, "tokenizer.ggml.eot_token_id", num_tokens, vocab.eot_id));
  GB_TRY(read_token_id(file, "tokenizer.ggml.eom_token_id", num_tokens, vocab.eom_id));
  GB_TRY(read_token_id(file, "tokenizer.ggml.eos_token_id", num_tokens, vocab.eos_id));
  GB_TRY(read_token_id(file, "tokenizer.ggml.unknown_token_id", num_tokens, vocab.unk_id));
  GB_TRY(read_token_id(file, "tokenizer.ggml.padding_token_id", num_tokens, vocab.pad_id));
  vocab.add_space_prefix = vocab.model == "llama";
  GB_TRY(read_flag(file, "tokenizer.ggml.add_bos_token", vocab.add_bos));
  GB_TRY(read_flag(file, "tokenizer.ggml.add_eos_token", vocab.add_eos));
  GB_TRY(read_flag(file, "tokenizer.ggml.add_space_prefix", vocab.add_space_prefix));
  return std::optional<Vocabulary>(std::move(vocab));
}

Result<Vocabulary> read_gguf_vocabulary(const std::string& path) {
  auto file = GgufFile::open(path, GgufReadOptions{.metadata_only = true});
  if (!file) return file.error();
  auto vocab = vocabulary_from_gguf(*file);
  if (!vocab) return vocab.error();
  if (!vocab.value()) return make_error(path + ": no tokenizer vocabulary (tokenizer.ggml.tokens is missing)");
  return std::move(*vocab.value());
}

}  // namespace gb
