// GGUF container: header, metadata and tensor infos (GgufFile::open, as the
// model loader, `info` and the model-files panel call it), full and
// metadata-only, then every lookup the loader makes on a parsed file.
// The heap peak of a parse is bounded by the file size (fuzz_support.h).
#include "fuzz_support.h"
#include "model/gguf_file.h"
#include "model/gguf_vocabulary.h"
#include "model/mapped_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gbfuzz::InputFile input("input.gguf");
  const std::string& path = input.write(data, size);
  for (const bool metadata_only : {true, false}) {
    gbfuzz::HeapPeak::arm();
    auto file = gb::GgufFile::open(path, gb::GgufReadOptions{.metadata_only = metadata_only});
    gbfuzz::check_heap_bound(gbfuzz::HeapPeak::peak(), size, "GgufFile::open");
    if (!file.ok()) continue;
    const gb::GgufFile& f = file.value();
    for (const auto& [key, value] : f.metadata()) {
      if (f.find(key) == nullptr) gbfuzz::fuzz_fail("metadata key '" + key + "' not found by find()");
      (void)value.as_uint();
    }
    for (const gb::GgufTensorInfo& t : f.tensors()) {
      if (f.find_tensor(t.name) == nullptr) gbfuzz::fuzz_fail("tensor '" + t.name + "' not found by find_tensor()");
      const std::byte* bytes = f.tensor_data(t);
      const std::byte* end = f.file()->data() + f.file()->size_bytes();
      if (t.num_bytes > 0 && (bytes < f.file()->data() || bytes + t.num_bytes > end))
        gbfuzz::fuzz_fail("tensor '" + t.name + "' lies outside the file");
      (void)t.num_elements();
      (void)gb::ggml_type_label(t.ggml_type);
    }
    (void)gb::vocabulary_from_gguf(f);
  }
  return 0;
}
