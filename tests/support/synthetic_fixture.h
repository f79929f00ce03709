// A synthesized model of a named architecture (model/synthetic_model.h, seed
// 11), written to the test's scratch folder and loaded with a 256-token
// context: the small sliding-window and mixed-layer models the engine tests
// run (mistral, gemma2, gemma3, ...). Aborts the test binary when the
// architecture is unknown or the file cannot be written or read back.
#pragma once

#include <memory>
#include <string>

#include "gb_test.h"
#include "model/model.h"
#include "model/synthetic_model.h"

namespace gbtest {

inline std::shared_ptr<const gb::Model> synthetic_arch_model(const std::string& arch_name) {
  const gb::SyntheticArch* arch = gb::find_synthetic_arch(arch_name);
  GB_CHECK(arch != nullptr);
  const std::string path = temp_dir() + "/synth-" + arch_name + "-11.gguf";
  GB_CHECK(gb::write_synthetic_arch_model(*arch, 11, path).ok());
  gb::LoadOptions options;
  options.context_length = 256;
  auto model = gb::load_model(path, options);
  GB_CHECK(model.ok());
  return *model;
}

}  // namespace gbtest
