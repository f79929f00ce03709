// Reading and writing llama.cpp's tokenizer test vectors (models/ggml-vocab-*.inp
// and .out): the `tokenize --vectors` command and the tokenizer tests share them.
// Pure functions; any thread.
//
// .inp: each case is followed by "\n__ggml_vocab_test__\n", so the file ends with
//       that separator; a case may be empty or contain newlines.
// .out: one line per case, each id preceded by one space (" 15043 3186"); an
//       empty case gives an empty line.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/result.h"

namespace gb {

inline constexpr std::string_view kVocabTestSeparator = "\n__ggml_vocab_test__\n";

// Splits .inp text into cases; fails if the text does not end with the separator.
Result<std::vector<std::string>> parse_vocab_test_inputs(std::string_view text, const std::string& source_name);
Result<std::vector<std::string>> read_vocab_test_inputs(const std::string& path);

// One .out line (without the newline) for the given ids.
std::string format_vocab_test_line(std::span<const TokenId> ids);
// Parses .out text into one id list per line.
Result<std::vector<std::vector<TokenId>>> read_vocab_test_outputs(const std::string& path);

}  // namespace gb
