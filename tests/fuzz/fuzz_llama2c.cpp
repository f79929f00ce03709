// llama2.c checkpoints (legacy and version 1 headers) through load_model, the
// entry point the app uses (it picks the reader from the magic). The heap peak
// of the load is bounded by the file size (fuzz_support.h).
#include "fuzz_support.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gbfuzz::InputFile input("model.bin");
  const std::string& path = input.write(data, size);
  gbfuzz::HeapPeak::arm();
  auto model = gb::load_model(path);
  gbfuzz::check_heap_bound(gbfuzz::HeapPeak::peak(), size, "load_model");
  if (!model.ok()) return 0;
  const gb::Model& m = *model.value();
  (void)m.num_parameters();
  for (const gb::TensorView* t : m.all_tensors())
    if (t == nullptr) gbfuzz::fuzz_fail("a loaded model has a null tensor");
  return 0;
}
