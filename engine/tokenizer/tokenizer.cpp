// Tokenizer::decode and the tokenizer loaders (see tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <filesystem>

#include "model/model.h"
#include "tokenizer/gguf_spm_tokenizer.h"
#include "tokenizer/llama2c_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace gb {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

template <class T>
Result<std::shared_ptr<const Tokenizer>> upcast(Result<std::shared_ptr<const T>> r) {
  if (!r.ok()) return r.error();
  return std::shared_ptr<const Tokenizer>(std::move(r).value());
}

}  // namespace

std::string Tokenizer::decode(std::span<const TokenId> ids) const {
  std::string out;
  bool at_start = true;  // the next text piece is the first after BOS / the start
  for (const TokenId id : ids) {
    if (is_control(id)) {
      if (id == bos_id()) at_start = true;
      continue;
    }
    std::string bytes = token_bytes(id);
    // The dummy prefix is a leading space of a text piece; a byte token <0x20>
    // is a space the user typed and stays.
    if (at_start && !is_byte(id) && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    at_start = false;
    out += bytes;
  }
  return out;
}

Result<std::shared_ptr<const Tokenizer>> load_tokenizer_file(const std::string& path) {
  if (ends_with(path, ".model")) return upcast(SentencePieceTokenizer::load(path));
  return upcast(Llama2cTokenizer::load(path));
}

Result<std::shared_ptr<const Tokenizer>> load_tokenizer(const Model& model, const std::string& tokenizer_path) {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string source;  // where the vocabulary came from, for messages
  if (!tokenizer_path.empty()) {
    auto loaded = load_tokenizer_file(tokenizer_path);
    if (!loaded.ok()) return loaded.error();
    tokenizer = std::move(loaded).value();
    source = tokenizer_path;
  } else if (model.vocabulary) {
    auto built = GgufSpmTokenizer::create(*model.vocabulary, model.path);
    if (!built.ok()) return built.error();
    tokenizer = std::move(built).value();
    source = model.path + " (embedded vocabulary)";
  } else {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(model.path).parent_path();
    const std::vector<fs::path> candidates = {
        dir / ("tok" + std::to_string(model.config.vocab_size) + ".bin"),
        dir / "tokenizer.bin",
        dir / "tokenizer.model",
    };
    std::string tried;
    for (const fs::path& candidate : candidates) {
      std::error_code ec;
      if (fs::is_regular_file(candidate, ec)) {
        source = candidate.string();
        break;
      }
      tried += (tried.empty() ? "" : ", ") + candidate.string();
    }
    if (source.empty())
      return make_error(model.path + ": no tokenizer found: the file has no embedded vocabulary and none of " + tried +
                        " exists (pass a tokenizer path)");
    auto loaded = load_tokenizer_file(source);
    if (!loaded.ok()) return loaded.error();
    tokenizer = std::move(loaded).value();
  }
  if (tokenizer->vocab_size() != model.config.vocab_size)
    return make_error("tokenizer vocab size " + std::to_string(tokenizer->vocab_size()) +
                      " does not match model vocab size " + std::to_string(model.config.vocab_size) + " (files " +
                      source + ", " + model.path + ")");
  return tokenizer;
}

}  // namespace gb
