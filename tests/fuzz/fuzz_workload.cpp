// Workload JSON Lines for `glassbox-cli serve-bench` (app/cli/workload.cpp):
// load_workload with the stories260K tokenizer (tok512.bin) for text prompts.
#include "cli/workload.h"
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

namespace {
const gb::Tokenizer& tokenizer() {
  static const std::shared_ptr<const gb::Tokenizer> tok = [] {
    const std::string path = gbfuzz::shared_dir() + "/models/stories260K/tok512.bin";
    auto t = gb::load_tokenizer_file(path);
    if (!t.ok()) gbfuzz::fuzz_fail("cannot load " + path + ": " + t.error().message);
    return std::move(t).value();
  }();
  return *tok;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gbfuzz::InputFile input("workload.jsonl");
  const std::string& path = input.write(data, size);
  auto items = gb::cli::load_workload(path, tokenizer());
  if (!items.ok()) return 0;
  for (const gb::cli::WorkloadItem& item : items.value())
    for (const gb::TokenId id : item.request.prompt_ids)
      if (id < 0 || id >= tokenizer().vocab_size())
        gbfuzz::fuzz_fail("a workload request has prompt id " + std::to_string(id) + " outside the vocabulary");
  return 0;
}
