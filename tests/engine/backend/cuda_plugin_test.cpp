// The CUDA plugin's loader (backend/cuda_plugin.h) and make_backend through it:
// a missing file, a file that is no shared object, a shared object without the
// entry point, another build's plugin: each refused with a message naming the
// file and the reason; a plugin of this build is taken, and make_backend uses
// what it says (its "no device" reaches --device cuda's message, its backend is
// the one auto returns). The plugins here are stand-ins (fake_cuda_plugin.cpp);
// the real one, when this build has CUDA, must load too (its CUDA libraries are
// on this machine wherever it was built) and report a device or a reason.
#include <cstdlib>
#include <fstream>
#include <string>

#include "backend/cuda_plugin.h"
#include "gb_test.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "runtime/make_backend.h"

namespace test_cuda_plugin {

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::shared_ptr<const gb::Model> tiny_model() {
  gb::SyntheticSpec spec{*gb::find_synthetic_shape("stories260K"), gb::WeightType::F32, 7};
  const std::string path = gbtest::temp_dir() + "/plugin-synth.gguf";
  gb::Status st = gb::write_synthetic_model(spec, path);
  GB_CHECK_MSG(st.ok(), st.ok() ? nullptr : st.error().message.c_str());
  auto model = gb::load_model(path, {});
  GB_CHECK_MSG(model.ok(), model.ok() ? nullptr : model.error().message.c_str());
  return *model;
}

}  // namespace

GB_TEST(a_missing_or_foreign_file_is_refused_with_its_reason) {
  auto missing = gb::load_cuda_plugin(gbtest::temp_dir() + "/no-such-plugin.so");
  QVERIFY(!missing.ok());
  QVERIFY(contains(missing.error().message, "no-such-plugin.so does not exist"));

  const std::string text = gbtest::temp_dir() + "/not-a-library.so";
  std::ofstream(text) << "this is not an ELF file\n";
  auto garbage = gb::load_cuda_plugin(text);
  QVERIFY(!garbage.ok());
  QVERIFY(contains(garbage.error().message, "not-a-library.so could not be opened"));

  auto no_entry = gb::load_cuda_plugin(FAKE_PLUGIN_NO_ENTRY);
  QVERIFY(!no_entry.ok());
  QVERIFY(contains(no_entry.error().message, "is not a Glassbox CUDA plugin (no glassbox_cuda_plugin)"));

  auto other = gb::load_cuda_plugin(FAKE_PLUGIN_OTHER);
  QVERIFY(!other.ok());
  QVERIFY(contains(other.error().message, "was built by another build of Glassbox"));
  QVERIFY(contains(other.error().message, "glassbox 0.0.0 another build"));
  QVERIFY(contains(other.error().message, gb::cuda_plugin_build_id()));
}

GB_TEST(a_plugin_of_this_build_is_taken) {
  auto good = gb::load_cuda_plugin(FAKE_PLUGIN_GOOD);
  QVERIFY2(good.ok(), good.ok() ? "" : good.error().message.c_str());
  QCOMPARE((*good)->abi, gb::kCudaPluginAbi);
  QCOMPARE(std::string((*good)->build_id), gb::cuda_plugin_build_id());
  std::string why;
  ::unsetenv("GLASSBOX_FAKE_CUDA_DEVICE");
  QVERIFY(!(*good)->device_available(&why));
  QCOMPARE(why, std::string("fake plugin: no device"));
}

// The only case here that calls cuda_plugin() (loaded once per process).
GB_TEST(make_backend_goes_through_the_plugin_it_finds) {
  ::setenv("GLASSBOX_CUDA_PLUGIN", FAKE_PLUGIN_GOOD, 1);
  QCOMPARE(gb::cuda_plugin_candidates().size(), size_t{1});
  QVERIFY(gb::cuda_plugin().ok());
  auto model = tiny_model();
  gb::BackendOptions options;
  options.num_threads = 2;

  ::unsetenv("GLASSBOX_FAKE_CUDA_DEVICE");
  options.device = gb::Device::Cuda;
  auto refused = gb::make_backend(model, options);
  QVERIFY(!refused.ok());
  QCOMPARE(refused.error().message, std::string("--device cuda: fake plugin: no device"));
  options.device = gb::Device::Auto;
  auto fallback = gb::make_backend(model, options);
  QVERIFY(fallback.ok());
  QCOMPARE((*fallback)->device_info().num_threads, 2);  // the CPU backend as asked

  ::setenv("GLASSBOX_FAKE_CUDA_DEVICE", "1", 1);
  auto from_plugin = gb::make_backend(model, options);
  QVERIFY(from_plugin.ok());
  QCOMPARE((*from_plugin)->device_info().num_threads, 1);  // the plugin's backend
  ::unsetenv("GLASSBOX_FAKE_CUDA_DEVICE");
  ::unsetenv("GLASSBOX_CUDA_PLUGIN");
}

#if defined(REAL_CUDA_PLUGIN)
GB_TEST(the_real_plugin_loads_where_this_build_has_one) {
  auto real = gb::load_cuda_plugin(REAL_CUDA_PLUGIN);
  QVERIFY2(real.ok(), real.ok() ? "" : real.error().message.c_str());
  std::string why;
  const bool device = (*real)->device_available(&why);
  QVERIFY(device || !why.empty());
  QVERIFY((*real)->weights_supported(*tiny_model()).ok());
}
#endif

}  // namespace test_cuda_plugin
