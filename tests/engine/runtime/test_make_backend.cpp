// make_backend: the device policy every front end shares. parse_device takes the
// CLI's three names only; cpu always gives the CPU backend with the asked thread
// count; auto gives the CPU backend whenever the CUDA plugin is not there or
// no device is present, and the CUDA backend otherwise, for float and quantized
// weights alike (the CUDA backend keeps quantized weights as GGUF blocks); cuda
// without the CUDA plugin (or with one that cannot load), or without a device, fails with a
// message naming the option; a weight type without CUDA kernels (MXFP4) takes
// the CPU under auto and is named by cuda. Models are stories260K-shaped
// synthetic files (F32, and Q8_0 or MXFP4 quantized from it), written to a temp dir.
#include <string>

#include "gb_test.h"
#include "backend/cuda_plugin.h"
#include "model/model.h"
#include "model/quantize_model.h"
#include "model/synthetic_model.h"
#include "runtime/make_backend.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_make_backend {

namespace {

// stories260K-shaped, F32 or (quantized from that, every matrix that can be)
// Q8_0 or MXFP4.
std::shared_ptr<const gb::Model> synth_model(gb::WeightType dtype) {
  gb::SyntheticSpec spec{*gb::find_synthetic_shape("stories260K"), gb::WeightType::F32, 7};
  std::string path = gbtest::temp_dir() + "/synth-f32.gguf";
  gb::Status st = gb::write_synthetic_model(spec, path);
  GB_CHECK_MSG(st.ok(), st.ok() ? nullptr : st.error().message.c_str());
  if (dtype != gb::WeightType::F32) {
    gb::QuantizeOptions q;
    // MXFP4 is no mixture of its own: llama-quantize's MXFP4_MOE, pure, gives every matrix MXFP4.
    q.type = dtype == gb::WeightType::MXFP4 ? std::string("MXFP4_MOE") : std::string(gb::dtype_info(dtype).name);
    q.pure = true;
    const std::string out = gbtest::temp_dir() + "/synth-" + q.type + ".gguf";
    auto quantized = gb::quantize_model(path, out, q);
    GB_CHECK_MSG(quantized.ok(), quantized.ok() ? nullptr : quantized.error().message.c_str());
    path = out;
  }
  auto model = gb::load_model(path, {});
  GB_CHECK_MSG(model.ok(), model.ok() ? nullptr : model.error().message.c_str());
  return *model;
}

}  // namespace

GB_TEST(parse_device_takes_the_three_cli_names) {
  QVERIFY(gb::parse_device("auto") == gb::Device::Auto);
  QVERIFY(gb::parse_device("cpu") == gb::Device::Cpu);
  QVERIFY(gb::parse_device("cuda") == gb::Device::Cuda);
  QVERIFY(!gb::parse_device("").has_value());
  QVERIFY(!gb::parse_device("CUDA").has_value());
  QVERIFY(!gb::parse_device("gpu").has_value());
}

GB_TEST(cpu_gives_the_cpu_backend_with_the_asked_threads) {
  gb::BackendOptions options;
  options.device = gb::Device::Cpu;
  options.num_threads = 2;
  auto backend = gb::make_backend(synth_model(gb::WeightType::F32), options);
  QVERIFY(backend.ok());
  QCOMPARE((*backend)->device_info().backend, std::string("cpu"));
  QCOMPARE((*backend)->device_info().num_threads, 2);
}

// A mixture of experts (the converted Qwen3-MoE file) runs on the CPU under
// auto, whatever the machine has; --device cuda says why it cannot.
GB_TEST(mixtures_of_experts_take_the_cpu) {
  auto model = gb::load_model(std::string(GLASSBOX_CONVERTED_REF_DIR) + "/qwen3moe.gguf");
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  gb::BackendOptions options;
  options.device = gb::Device::Auto;
  auto backend = gb::make_backend(*model, options);
  QVERIFY2(backend.ok(), backend.ok() ? "" : backend.error().message.c_str());
  QCOMPARE((*backend)->device_info().backend, std::string("cpu"));
  options.device = gb::Device::Cuda;
  auto refused = gb::make_backend(*model, options);
  QVERIFY(!refused.ok());
  QVERIFY2(refused.error().message.find("mixture-of-experts models run on the CPU backend only") != std::string::npos,
           refused.error().message.c_str());
}

namespace {

void check_auto_and_cuda_agree(gb::WeightType dtype) {
  auto model = synth_model(dtype);
  bool has_dtype = false;
  for (const gb::TensorView* t : model->all_tensors()) has_dtype |= t->dtype == dtype;
  QVERIFY(has_dtype);
  gb::BackendOptions options;
  options.num_threads = 1;
  auto automatic = gb::make_backend(model, options);
  options.device = gb::Device::Cuda;
  auto cuda = gb::make_backend(model, options);
  if (auto installed = gb::cuda_plugin(); !installed) {
    QVERIFY(automatic.ok());
    QCOMPARE((*automatic)->device_info().backend, std::string("cpu"));
    QVERIFY(!cuda.ok());
    QCOMPARE(cuda.error().message, "--device cuda: " + installed.error().message);
    return;
  }
  // A CUDA build: auto and cuda agree on whether a device is usable.
  QVERIFY(automatic.ok());
  if (cuda.ok()) {
    QCOMPARE((*cuda)->device_info().backend, std::string("cuda"));
    QCOMPARE((*automatic)->device_info().backend, std::string("cuda"));
  } else {
    QCOMPARE((*automatic)->device_info().backend, std::string("cpu"));
    QVERIFY(cuda.error().message.rfind("--device cuda: ", 0) == 0);
  }
}

}  // namespace

GB_TEST(auto_and_cuda_follow_what_the_build_and_machine_have) { check_auto_and_cuda_agree(gb::WeightType::F32); }

GB_TEST(quantized_weights_follow_the_same_policy) { check_auto_and_cuda_agree(gb::WeightType::Q8_0); }

// A type the CUDA backend has no kernels for (MXFP4): auto runs the model on the
// CPU whatever the machine has; --device cuda refuses it, naming the tensor and
// the type where the plugin is there (the check comes before the device's).
GB_TEST(weights_without_cuda_kernels_take_the_cpu) {
  auto model = synth_model(gb::WeightType::MXFP4);
  bool has_mxfp4 = false;
  for (const gb::TensorView* t : model->all_tensors()) has_mxfp4 |= t->dtype == gb::WeightType::MXFP4;
  QVERIFY(has_mxfp4);
  gb::BackendOptions options;
  options.num_threads = 1;
  auto automatic = gb::make_backend(model, options);
  QVERIFY2(automatic.ok(), automatic.ok() ? "" : automatic.error().message.c_str());
  QCOMPARE((*automatic)->device_info().backend, std::string("cpu"));
  options.device = gb::Device::Cuda;
  auto cuda = gb::make_backend(model, options);
  QVERIFY(!cuda.ok());
  if (auto installed = gb::cuda_plugin(); !installed) {
    QCOMPARE(cuda.error().message, "--device cuda: " + installed.error().message);
    return;
  }
  QVERIFY2(cuda.error().message.find("is MXFP4, which the CUDA backend has no kernels for (use --device cpu)") !=
               std::string::npos,
           cuda.error().message.c_str());
}

}  // namespace test_make_backend
