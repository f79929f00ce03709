// GGUF-embedded vocabularies: read_gguf_vocabulary (tokenizer.ggml.* keys) and
// create_gguf_tokenizer (SentencePiece BPE "llama" and byte-level BPE "gpt2" with
// its merges and pre-tokenizer), then the tokenizer in use.
#include "fuzz_support.h"
#include "fuzz_tokenizer_use.h"
#include "model/gguf_vocabulary.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gbfuzz::InputFile input("vocab.gguf");
  const std::string& path = input.write(data, size);
  gbfuzz::HeapPeak::arm();
  auto vocab = gb::read_gguf_vocabulary(path);
  std::shared_ptr<const gb::Tokenizer> tok;
  if (vocab.ok()) {
    std::string warning;
    auto created = gb::create_gguf_tokenizer(std::move(vocab).value(), path, &warning);
    if (created.ok()) tok = std::move(created).value();
  }
  gbfuzz::check_heap_bound(gbfuzz::HeapPeak::peak(), size, "reading the vocabulary");
  if (tok) gbfuzz::use_tokenizer(*tok);
  return 0;
}
