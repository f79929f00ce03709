// Loading a model from a GGUF file, as the CLI and the workbench do: load_model
// (config from metadata, every tensor's shape and type checked, norms converted),
// then load_tokenizer from the file's vocabulary, then a look at every tensor.
// The heap peak of the load is bounded by the file size (fuzz_support.h).
#include "fuzz_support.h"
#include "fuzz_tokenizer_use.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gbfuzz::InputFile input("model.gguf");
  const std::string& path = input.write(data, size);
  gbfuzz::HeapPeak::arm();
  auto model = gb::load_model(path);
  gbfuzz::check_heap_bound(gbfuzz::HeapPeak::peak(), size, "load_model");
  if (!model.ok()) return 0;
  const gb::Model& m = *model.value();
  (void)m.num_parameters();
  (void)m.weight_bytes();
  (void)m.weight_bytes_per_token();
  for (const gb::TensorView* t : m.all_tensors())
    if (t == nullptr) gbfuzz::fuzz_fail("a loaded model has a null tensor");
  auto tok = gb::load_tokenizer(m, "");
  if (tok.ok()) gbfuzz::use_tokenizer(*tok.value());
  return 0;
}
