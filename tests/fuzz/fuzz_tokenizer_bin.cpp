// llama2.c tokenizer.bin files (load_tokenizer_file picks the reader from the
// extension), then the tokenizer in use.
#include "fuzz_support.h"
#include "fuzz_tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gbfuzz::InputFile input("tokenizer.bin");
  const std::string& path = input.write(data, size);
  gbfuzz::HeapPeak::arm();
  auto tok = gb::load_tokenizer_file(path);
  gbfuzz::check_heap_bound(gbfuzz::HeapPeak::peak(), size, "load_tokenizer_file");
  if (tok.ok()) gbfuzz::use_tokenizer(*tok.value());
  return 0;
}
