#include "cuda_test_support.h"

#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "gb_test.h"

// Runs before any case: kernels are checked one by one (the debug mode), and
// without a usable device every case is skipped (exit
// 77) -- unless the machine was supposed to have one (GLASSBOX_REQUIRE_GPU=1,
// set by tools/device-check.sh): then a missing or unusable device fails the
// test, so a broken driver cannot pass as skipped.
void gb_test_setup() {
  // Every kernel drained and checked as it finishes, naming it on a fault
  // (backend/cuda/cuda_check.h), unless the caller chose otherwise.
  setenv("GLASSBOX_CUDA_SYNC_EACH_KERNEL", "1", /*overwrite=*/0);
  std::string why;
  if (gb::cuda_device_available(&why)) return;
  if (const char* require = std::getenv("GLASSBOX_REQUIRE_GPU"); require && std::string(require) == "1") {
    std::fprintf(stderr, "FAIL!  : GLASSBOX_REQUIRE_GPU=1 but no usable CUDA device: %s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  gbtest::skip_all("no CUDA device: " + why);
}

namespace gbtest::cuda {

std::vector<float> random_floats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::string Diff::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "max |diff| %.3g at %zu (reference %.9g, got %.9g)", max_abs, where, ref_at, got_at);
  return buf;
}

Diff compare(const std::vector<float>& reference, const std::vector<float>& got) {
  GB_CHECK(reference.size() == got.size());
  Diff d;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(reference[i]) - static_cast<double>(got[i]));
    if (!(diff <= d.max_abs)) {  // also catches NaN
      d.max_abs = std::isnan(diff) ? INFINITY : diff;
      d.where = i;
      d.ref_at = reference[i];
      d.got_at = got[i];
    }
  }
  return d;
}

std::string device_error() {
  const cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

std::string cuda_failure(const char* expr, cudaError_t error) {
  std::string text = expr;
  text += ": ";
  text += cudaGetErrorString(error);
  return text;
}

}  // namespace gbtest::cuda
