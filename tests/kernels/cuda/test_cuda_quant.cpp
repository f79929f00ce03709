// Quantized weights on the GPU against the CPU oracle: every quantized type of
// the weight-type table, random blocks with finite scales of either sign, an
// odd row count. GEMV (1, 3 and 8 tokens) and the prefill path (13 tokens:
// dequantized tiles through cuBLAS, with a workspace that forces several
// tiles) against the CPU reference dequantization times float32 activations
// summed in double; the dequantized tiles against the CPU rows.
//
// Tolerance: 1e-5 of sum |w x| per output (float accumulation over 512 values;
// the device may fuse multiply-adds in the dequantization, a few ulp).
#include <cmath>
#include <cstring>
#include <random>

#include "cpu/convert.h"
#include "backend/cuda/cuda_gemm.h"
#include "cuda/cuda_kernels.h"
#include "cuda_test_support.h"
#include "gb_test.h"

using gbtest::cuda::DeviceArray;
using gb::kernels::WeightType;

namespace {

const WeightType kTypes[] = {WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_K, WeightType::Q5_K,
                             WeightType::Q6_K, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                             WeightType::Q2_K, WeightType::Q3_K, WeightType::IQ4_NL, WeightType::IQ4_XS};

std::vector<uint8_t> random_blocks(const gb::kernels::WeightTypeTraits& tr, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t blocks = rows * cols / tr.block_elements;
  std::vector<uint8_t> w(static_cast<size_t>(blocks * tr.block_bytes));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::normal_distribution<float> scale(0.0f, 0.02f);
  for (int64_t b = 0; b < blocks; ++b)
    for (int16_t off : {tr.scale_offset, tr.min_offset})
      if (off >= 0) {
        const uint16_t h = gb::kernels::f32_to_f16(scale(rng));
        std::memcpy(w.data() + b * tr.block_bytes + off, &h, 2);
      }
  return w;
}

void check_type(WeightType t) {
  const auto& tr = gb::kernels::weight_traits(t);
  const int64_t rows = 37, cols = 512, stride = cols / tr.block_elements * tr.block_bytes;
  const auto w = random_blocks(tr, rows, cols, 11 + static_cast<uint32_t>(t));
  std::vector<float> deq(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) tr.dequantize_row(w.data() + r * stride, deq.data() + r * cols, cols);
  DeviceArray<uint8_t> d_w(w);
  cublasHandle_t handle = nullptr;
  QVERIFY(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  for (int32_t tokens : {1, 3, 8, 13}) {
    const auto x = gbtest::cuda::random_floats(static_cast<size_t>(tokens * cols), 5 + static_cast<uint32_t>(tokens));
    DeviceArray<float> d_x(x), d_y(static_cast<size_t>(tokens * rows)), d_ws(static_cast<size_t>(10 * cols));
    const gb::cuda::DeviceMatrix m{d_w.get(), t, rows, cols};
    auto st = gb::cuda::gemm_quant_rows(handle, m, stride, d_x.get(), tokens, d_y.get(), 0.0f, d_ws.get(), 10 * cols,
                                        nullptr);
    QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
    const std::vector<float> y = d_y.download();
    for (int32_t k = 0; k < tokens; ++k)
      for (int64_t r = 0; r < rows; ++r) {
        double want = 0, scale = 1e-6;
        for (int64_t c = 0; c < cols; ++c) {
          want += static_cast<double>(deq[static_cast<size_t>(r * cols + c)]) * x[static_cast<size_t>(k * cols + c)];
          scale += std::abs(static_cast<double>(deq[static_cast<size_t>(r * cols + c)]) * x[static_cast<size_t>(k * cols + c)]);
        }
        const double got = y[static_cast<size_t>(k * rows + r)];
        QVERIFY2(std::abs(got - want) <= 1e-5 * scale,
                 (std::string(tr.name) + " tokens " + std::to_string(tokens) + " row " + std::to_string(r) + ": " +
                  std::to_string(got) + " vs " + std::to_string(want)).c_str());
      }
  }
  DeviceArray<float> d_rows(static_cast<size_t>(5 * cols));
  GB_CUDA_OK(gb::cuda::launch_dequantize_rows(d_w.get(), stride, t, 30, 5, cols, d_rows.get(), nullptr));
  const auto rows_back = d_rows.download();
  for (size_t i = 0; i < rows_back.size(); ++i)
    QVERIFY2(std::abs(rows_back[i] - deq[static_cast<size_t>(30 * cols) + i]) <=
                 1e-6f * (1.0f + std::abs(deq[static_cast<size_t>(30 * cols) + i])),
             (std::string(tr.name) + " dequantized value " + std::to_string(i)).c_str());
  cublasDestroy(handle);
}

}  // namespace

GB_TEST(quant_gemv_and_prefill_match_cpu_oracle_every_type) {
  for (WeightType t : kTypes) {
    check_type(t);
    if (QTest::currentTestFailed()) return;
  }
}

GB_TEST(quant_gemv_refuses_float_types_and_too_many_tokens) {
  DeviceArray<float> d(64);
  QVERIFY(gb::cuda::launch_quant_gemv(d.get(), 128, WeightType::F32, 1, 32, d.get(), 1, d.get(), 1, nullptr) != cudaSuccess);
  cudaGetLastError();
  QVERIFY(gb::cuda::launch_quant_gemv(d.get(), 34, WeightType::Q8_0, 1, 32, d.get(), gb::cuda::kMaxGemvTokens + 1,
                                      d.get(), 1, nullptr) != cudaSuccess);
}
