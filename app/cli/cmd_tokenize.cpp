// `glassbox-cli tokenize`: encode text with a model's tokenizer.
//   --text STRING      prints the ids (BOS first) on one line, then one line per
//                      token: id, tab, the piece as stored (control bytes escaped).
//   --vectors FILE.inp reads llama.cpp's tokenizer test vectors and prints one
//                      line per case in the .out format (ids without BOS, each
//                      preceded by a space), so `diff` against the .out works.
//   --file PATH        like --text, with the text read from a file; prints only
//                      the ids line (for comparing with other tokenizers).
//   --parse-special    control-token strings in the text ("<|im_start|>") become
//                      their ids; without it they are plain text.
// For a GGUF --model (a model or a tensor-less ggml-vocab-*.gguf) only its
// tokenizer metadata is read, so any architecture's vocabulary can be tested.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "cli/command_registry.h"
#include "model/gguf_file.h"
#include "model/gguf_vocabulary.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_test_vectors.h"

namespace gb::cli {
namespace {

struct TokenizeArgs {
  std::string model_path;
  std::string tokenizer_path;
  std::string vectors_path;
  std::string text;
  std::string file_path;
  bool has_text = false;
  bool parse_special = false;
};

bool starts_with_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

// The tokenizer of a vocabulary-only GGUF: its own vocabulary, or an explicit
// tokenizer file whose size must match it.
Result<std::shared_ptr<const Tokenizer>> vocab_file_tokenizer(const GgufFile& file, const TokenizeArgs& a) {
  auto vocab = vocabulary_from_gguf(file);
  if (!vocab.ok()) return vocab.error();
  if (!vocab.value()) return make_error(a.model_path + ": has neither tensors nor a tokenizer vocabulary");
  if (a.tokenizer_path.empty()) {
    std::string warning;
    auto tok = create_gguf_tokenizer(std::move(*vocab.value()), a.model_path, &warning);
    if (!warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
    return tok;
  }
  auto tok = load_tokenizer_file(a.tokenizer_path);
  if (!tok.ok()) return tok.error();
  const auto vocab_size = static_cast<int32_t>(vocab.value()->tokens.size());
  if (tok.value()->vocab_size() != vocab_size)
    return make_error("tokenizer vocab size " + std::to_string(tok.value()->vocab_size()) +
                      " does not match model vocab size " + std::to_string(vocab_size) + " (files " +
                      a.tokenizer_path + ", " + a.model_path + ")");
  return tok;
}

Result<std::shared_ptr<const Tokenizer>> open_tokenizer(const TokenizeArgs& a) {
  if (starts_with_gguf_magic(a.model_path)) {
    auto file = GgufFile::open(a.model_path, GgufReadOptions{.metadata_only = true});
    if (!file.ok()) return file.error();
    if (file.value().find("tokenizer.ggml.tokens") != nullptr || file.value().tensors().empty())
      return vocab_file_tokenizer(file.value(), a);
  }
  auto model = load_model(a.model_path);
  if (!model.ok()) return model.error();
  return load_tokenizer(*model.value(), a.tokenizer_path);
}

// The piece with bytes that would break the line layout escaped.
std::string printable_piece(const std::string& piece) {
  std::string out;
  for (const char c : piece) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
    else if (b < 0x20 || b == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", b);
      out += buf;
    } else out.push_back(c);
  }
  return out;
}

int run_tokenize(TokenizeArgs& a) {
  if (!a.file_path.empty()) {
    std::ifstream in(a.file_path, std::ios::binary);
    if (!in) return fail(a.file_path + ": cannot read");
    a.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    a.has_text = true;
  }
  if (a.vectors_path.empty() == !a.has_text) return fail("give exactly one of --text, --file or --vectors");
  auto tokenizer = open_tokenizer(a);
  if (!tokenizer.ok()) return fail(tokenizer.error().message);
  const Tokenizer& tok = *tokenizer.value();

  if (!a.vectors_path.empty()) {
    auto cases = read_vocab_test_inputs(a.vectors_path);
    if (!cases.ok()) return fail(cases.error().message);
    for (const std::string& text : cases.value()) {
      const std::string line = format_vocab_test_line(
          tok.encode(text, EncodeOptions{.add_bos = false, .parse_special = a.parse_special}));
      std::fwrite(line.data(), 1, line.size(), stdout);
      std::fputc('\n', stdout);
    }
    return 0;
  }
  const std::vector<TokenId> ids = tok.encode(a.text, EncodeOptions{.parse_special = a.parse_special});
  std::string line;
  for (const TokenId id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
  if (!a.file_path.empty()) return 0;
  for (const TokenId id : ids) std::printf("%d\t%s\n", id, printable_piece(tok.token_piece(id)).c_str());
  return 0;
}

const CommandRegistrar tokenize_command("tokenize", "Encode text or llama.cpp tokenizer test vectors",
                                 [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<TokenizeArgs>();
  sub.add_option("--model,-m", a->model_path, "Model file, or a vocabulary-only GGUF")->required();
  sub.add_option("--tokenizer", a->tokenizer_path, "Tokenizer file (.model = SentencePiece, else llama2.c .bin)");
  sub.add_option("--vectors", a->vectors_path, "llama.cpp test-vector .inp file: print one .out line per case");
  sub.add_option_function<std::string>("--text", [a](const std::string& t) { a->text = t; a->has_text = true; },
                                       "Text to encode: prints the ids (BOS as the vocabulary asks) and the pieces");
  sub.add_option("--file", a->file_path, "Encode the contents of this file; prints the ids line only");
  sub.add_flag("--parse-special", a->parse_special, "Recognise control-token strings (<|im_start|>) as their ids");
  return [a] { return run_tokenize(*a); };
});

}  // namespace
}  // namespace gb::cli
