// Tokenizer::decode and the tokenizer loaders (see tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "model/model.h"
#include "tokenizer/gguf_bpe_tokenizer.h"
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

// tokenizer.ggml.model -> the tokenizer that reads that vocabulary kind.
struct GgufTokenizerKind {
  std::string_view model;
  Result<std::shared_ptr<const Tokenizer>> (*create)(Vocabulary, const std::string&, std::string*);
};

const GgufTokenizerKind kGgufTokenizerKinds[] = {
    {"llama", [](Vocabulary v, const std::string& source, std::string*) {
       return upcast(GgufSpmTokenizer::create(std::move(v), source));
     }},
    {"gpt2", [](Vocabulary v, const std::string& source, std::string* warning) {
       return upcast(GgufBpeTokenizer::create(std::move(v), source, warning));
     }},
};

}  // namespace

Result<std::shared_ptr<const Tokenizer>> create_gguf_tokenizer(Vocabulary vocabulary, const std::string& source_name,
                                                               std::string* warning) {
  std::string known;
  for (const GgufTokenizerKind& kind : kGgufTokenizerKinds) {
    if (kind.model == vocabulary.model) return kind.create(std::move(vocabulary), source_name, warning);
    known += (known.empty() ? "'" : ", '") + std::string(kind.model) + "'";
  }
  return make_error(source_name + ": tokenizer.ggml.model '" + vocabulary.model + "' is not supported (known: " +
                    known + ")");
}

const std::vector<Tokenizer::SpecialPiece>& Tokenizer::special_pieces() const {
  std::call_once(specials_once_, [this] {
    for (TokenId id = 0; id < vocab_size(); ++id) {
      const SpecialKind k = special_kind(id);
      if (k == SpecialKind::None) continue;
      std::string text = token_piece(id);
      if (text.empty()) continue;
      special_first_byte_[static_cast<uint8_t>(text[0])] = true;
      specials_.push_back({std::move(text), id, k == SpecialKind::Control});
    }
    std::stable_sort(specials_.begin(), specials_.end(),
                     [](const SpecialPiece& a, const SpecialPiece& b) { return a.text.size() > b.text.size(); });
  });
  return specials_;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<TokenId> ids;
  const bool add_bos = options.add_bos.value_or(default_add_bos());
  if (add_bos && bos_id() >= 0) ids.push_back(bos_id());
  const std::vector<SpecialPiece>& specials = special_pieces();
  // Cut at special-token strings; the plain text between goes to encode_fragment.
  size_t plain_begin = 0;
  bool at_boundary = true;
  for (size_t pos = 0; pos < text.size() && !specials.empty();) {
    if (!special_first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    const SpecialPiece* hit = nullptr;
    for (const SpecialPiece& sp : specials) {
      if (sp.control && !options.parse_special) continue;
      if (text.compare(pos, sp.text.size(), sp.text) == 0) {
        hit = &sp;
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    if (pos > plain_begin) encode_fragment(text.substr(plain_begin, pos - plain_begin), at_boundary, ids);
    ids.push_back(hit->id);
    at_boundary = true;
    pos += hit->text.size();
    plain_begin = pos;
  }
  if (plain_begin < text.size()) encode_fragment(text.substr(plain_begin), at_boundary, ids);
  if (!options.add_bos.has_value() && default_add_eos() && eos_id() >= 0) ids.push_back(eos_id());
  return ids;
}

std::vector<TokenId> Tokenizer::end_of_generation_ids() const {
  std::vector<TokenId> ids;
  for (TokenId id = 0; id < vocab_size(); ++id)
    if (is_end_of_generation(id)) ids.push_back(id);
  return ids;
}

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
    if (at_start && strips_dummy_prefix() && !is_byte(id) && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
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
    std::string warning;
    auto built = create_gguf_tokenizer(*model.vocabulary, model.path, &warning);
    if (!built.ok()) return built.error();
    if (!warning.empty()) std::fprintf(stderr, "glassbox: warning: %s\n", warning.c_str());
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
