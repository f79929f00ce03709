// SentencePiece .model files: our own proto rewriter (sentencepiece_proto_keep_whitespace)
// on the raw bytes, then load_tokenizer_file, which hands the rewritten proto to
// libsentencepiece (not instrumented: only crashes and heap misuse it does through
// the intercepted allocator show there), then the tokenizer in use.
#include <string_view>

#include "fuzz_support.h"
#include "fuzz_tokenizer_use.h"
#include "tokenizer/sentencepiece_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string error;
  (void)gb::sentencepiece_proto_keep_whitespace(std::string_view(reinterpret_cast<const char*>(data), size), error);
  static gbfuzz::InputFile input("tokenizer.model");
  const std::string& path = input.write(data, size);
  auto tok = gb::load_tokenizer_file(path);
  if (tok.ok()) gbfuzz::use_tokenizer(*tok.value());
  return 0;
}
