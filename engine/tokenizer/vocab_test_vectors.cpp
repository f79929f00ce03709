// llama.cpp tokenizer test-vector files (see vocab_test_vectors.h).
#include "tokenizer/vocab_test_vectors.h"

#include <charconv>
#include <fstream>
#include <iterator>

namespace gb {
namespace {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

Result<std::vector<std::string>> parse_vocab_test_inputs(std::string_view text, const std::string& source_name) {
  std::vector<std::string> cases;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find(kVocabTestSeparator, start);
    if (end == std::string_view::npos)
      return make_error(source_name + ": text after the last case separator (the file must end with \"\\n" +
                        std::string(kVocabTestSeparator.substr(1, kVocabTestSeparator.size() - 2)) + "\\n\")");
    cases.emplace_back(text.substr(start, end - start));
    start = end + kVocabTestSeparator.size();
  }
  return cases;
}

Result<std::vector<std::string>> read_vocab_test_inputs(const std::string& path) {
  auto text = read_text_file(path);
  if (!text.ok()) return text.error();
  return parse_vocab_test_inputs(text.value(), path);
}

std::string format_vocab_test_line(std::span<const TokenId> ids) {
  std::string line;
  for (const TokenId id : ids) {
    line += ' ';
    line += std::to_string(id);
  }
  return line;
}

Result<std::vector<std::vector<TokenId>>> read_vocab_test_outputs(const std::string& path) {
  auto text = read_text_file(path);
  if (!text.ok()) return text.error();
  const std::string& s = text.value();
  std::vector<std::vector<TokenId>> lines;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    std::vector<TokenId> ids;
    for (size_t pos = start; pos < end;) {
      if (s[pos] == ' ') {
        ++pos;
        continue;
      }
      TokenId id = 0;
      const auto [next, ec] = std::from_chars(s.data() + pos, s.data() + end, id);
      if (ec != std::errc() || next == s.data() + pos)
        return make_error(path + ": line " + std::to_string(lines.size() + 1) + ": expected a token id");
      ids.push_back(id);
      pos = static_cast<size_t>(next - s.data());
    }
    lines.push_back(std::move(ids));
    start = end + 1;
  }
  return lines;
}

}  // namespace gb
