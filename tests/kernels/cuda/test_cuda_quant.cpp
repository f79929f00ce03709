// Quantized weights on the GPU against the CPU oracle: every quantized type of
// the weight-type table (kernels/cpu/weight_type.h), random blocks with finite
// scales of either sign, awkward row counts (1, 9, 37: a partial warp block,
// several cuBLAS tiles with a short last one). For each type:
//   - gemm_quant_rows with 1, 3 and 8 tokens (the GEMV kernel) and 13 tokens
//     (dequantized tiles through cuBLAS, with a workspace of 10 rows so the
//     matrix takes several tiles), written into columns [2, 2 + rows) of a
//     wider output with beta = 1 (how fused projections and the residual add
//     use it), against the CPU reference dequantization times float32
//     activations summed in double; the columns outside stay untouched;
//   - launch_dequantize_rows (a prefill tile) against the CPU rows;
//   - launch_embedding of a quantized table against the CPU rows.
//
// Tolerances: 1e-5 of sum |w x| per output (float accumulation over up to 768
// values; the device may fuse multiply-adds in the dequantization, a few ulp);
// dequantized values within 2e-6 of 1 + the row's largest magnitude (a few ulp
// of the block terms, which can cancel). A wrong nibble, scale or sign is off by
// orders of magnitude more.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_gemm.h"
#include "cpu/convert.h"
#include "cuda/cuda_kernels.h"
#include "cuda_test_support.h"
#include "gb_test.h"
#include "kernel_test_data.h"

using gb::kernels::WeightType;
using gbtest::cuda::DeviceArray;

namespace {

std::vector<WeightType> quantized_types() {
  std::vector<WeightType> out;
  for (int i = 0; i < gb::kernels::kNumWeightTypes; ++i) {
    const auto t = static_cast<WeightType>(i);
    // Not the CPU layouts, nor the types the backend refuses (checked below).
    if (gb::kernels::is_quantized(t) && gb::kernels::is_file_type(t) && !gbtest::cuda::lacks_cuda_kernels(t))
      out.push_back(t);
  }
  return out;
}

// One random quantized matrix, its CPU dequantization and its device copy.
struct QuantMatrix {
  const gb::kernels::WeightTypeTraits& tr;
  int64_t rows, cols, stride;
  std::vector<uint8_t> blocks;
  std::vector<float> deq;  // (rows, cols), the oracle
  DeviceArray<uint8_t> device;

  QuantMatrix(WeightType t, int64_t r, int64_t c)
      : tr(gb::kernels::weight_traits(t)), rows(r), cols(c), stride(c / tr.block_elements * tr.block_bytes),
        blocks(gbtest::random_quant_blocks(tr, r, c, 11 + static_cast<uint32_t>(t) * 7 + static_cast<uint32_t>(r))),
        deq(static_cast<size_t>(r * c)), device(blocks) {
    for (int64_t i = 0; i < rows; ++i) tr.dequantize_row(blocks.data() + i * stride, deq.data() + i * cols, cols);
  }
  gb::cuda::DeviceMatrix matrix() const { return {device.get(), tr.type, rows, cols, stride}; }
  std::string where() const {
    return std::string(tr.name) + " (" + std::to_string(rows) + " x " + std::to_string(cols) + ")";
  }
  float row_max(int64_t r) const {
    float m = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, std::abs(deq[static_cast<size_t>(r * cols + c)]));
    return m;
  }
};

constexpr int64_t kColumnOffset = 2, kExtraColumns = 3;

void check_product(const QuantMatrix& q, cublasHandle_t handle, int32_t tokens) {
  const int64_t ldy = q.rows + kExtraColumns;
  const auto x = gbtest::cuda::random_floats(static_cast<size_t>(tokens * q.cols), 5 + static_cast<uint32_t>(tokens));
  const auto y0 = gbtest::cuda::random_floats(static_cast<size_t>(tokens * ldy), 9 + static_cast<uint32_t>(tokens));
  DeviceArray<float> d_x(x), d_y(y0), d_ws(static_cast<size_t>(10 * q.cols));
  const gb::cuda::QuantWorkspace ws{d_ws.get(), d_ws.size()};
  const gb::Status st = gb::cuda::gemm_quant_rows(handle, q.matrix(), d_x.get(), tokens, d_y.get() + kColumnOffset,
                                                  ldy, 1.0f, ws, nullptr);
  QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
  const std::vector<float> y = d_y.download();
  for (int32_t k = 0; k < tokens; ++k)
    for (int64_t col = 0; col < ldy; ++col) {
      const size_t at = static_cast<size_t>(k * ldy + col);
      const int64_t r = col - kColumnOffset;
      if (r < 0 || r >= q.rows) {
        QVERIFY2(y[at] == y0[at],
                 (q.where() + ": column " + std::to_string(col) + " outside the part changed").c_str());
        continue;
      }
      double want = y0[at], scale = 1e-6 + std::abs(want);
      for (int64_t c = 0; c < q.cols; ++c) {
        const double p = static_cast<double>(q.deq[static_cast<size_t>(r * q.cols + c)]) * x[static_cast<size_t>(k * q.cols + c)];
        want += p;
        scale += std::abs(p);
      }
      QVERIFY2(std::abs(y[at] - want) <= 1e-5 * scale,
               (q.where() + " tokens " + std::to_string(tokens) + " row " + std::to_string(r) + ": " +
                std::to_string(y[at]) + " vs " + std::to_string(want)).c_str());
    }
}

void check_rows(const QuantMatrix& q, const std::vector<float>& got, const std::vector<int64_t>& rows, const char* what) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const float tol = 2e-6f * (1.0f + q.row_max(rows[i]));
    for (int64_t c = 0; c < q.cols; ++c) {
      const float want = q.deq[static_cast<size_t>(rows[i] * q.cols + c)];
      const float have = got[i * static_cast<size_t>(q.cols) + static_cast<size_t>(c)];
      QVERIFY2(std::abs(have - want) <= tol, (q.where() + " " + what + ": row " + std::to_string(rows[i]) + " value " +
                                               std::to_string(c) + ": " + std::to_string(have) + " vs " +
                                               std::to_string(want)).c_str());
    }
  }
}

void check_type(WeightType t, cublasHandle_t handle) {
  const int64_t shapes[][2] = {{1, 256}, {9, 768}, {37, 512}};
  for (const auto& shape : shapes) {
    const QuantMatrix q(t, shape[0], shape[1]);
    for (int32_t tokens : {1, 3, 8, 13}) {
      check_product(q, handle, tokens);
      if (QTest::currentTestFailed()) return;
    }
    // A prefill tile: the last min(5, rows) rows.
    const int64_t n = std::min<int64_t>(5, q.rows), begin = q.rows - n;
    DeviceArray<float> d_rows(static_cast<size_t>(n * q.cols));
    GB_CUDA_OK(gb::cuda::launch_dequantize_rows(q.device.get(), q.stride, t, begin, n, q.cols, d_rows.get(), nullptr));
    std::vector<int64_t> tile_rows;
    for (int64_t r = begin; r < q.rows; ++r) tile_rows.push_back(r);
    check_rows(q, d_rows.download(), tile_rows, "tile");
    if (QTest::currentTestFailed()) return;
    // Embedding lookup: repeated and out-of-order ids.
    const std::vector<int32_t> ids = {static_cast<int32_t>(q.rows - 1), 0, static_cast<int32_t>(q.rows / 2),
                                      static_cast<int32_t>(q.rows - 1)};
    DeviceArray<int32_t> d_ids(ids);
    DeviceArray<float> d_emb(ids.size() * static_cast<size_t>(q.cols));
    GB_CUDA_OK(gb::cuda::launch_embedding(d_ids.get(), static_cast<int32_t>(ids.size()), q.device.get(), t,
                                          static_cast<int32_t>(q.cols), d_emb.get(), nullptr));
    check_rows(q, d_emb.download(), std::vector<int64_t>(ids.begin(), ids.end()), "embedding");
    if (QTest::currentTestFailed()) return;
  }
}

}  // namespace

GB_TEST(quant_gemv_and_prefill_match_cpu_oracle_every_type) {
  const std::vector<WeightType> types = quantized_types();
  QVERIFY(types.size() >= 12);
  cublasHandle_t handle = nullptr;
  QVERIFY(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  for (WeightType t : types) {
    QVERIFY2(gb::cuda::quant_kernels_support(t), gb::kernels::weight_traits(t).name.data());
    check_type(t, handle);
    if (QTest::currentTestFailed()) break;
  }
  cublasDestroy(handle);
}

GB_TEST(quant_launchers_refuse_float_types_bad_shapes_and_too_many_tokens) {
  QVERIFY(!gb::cuda::quant_kernels_support(WeightType::F32));
  QVERIFY(!gb::cuda::quant_kernels_support(WeightType::F16));
  QVERIFY(gbtest::cuda::lacks_cuda_kernels(WeightType::MXFP4) && !gb::cuda::quant_kernels_support(WeightType::MXFP4));
  DeviceArray<float> d(1024);
  QVERIFY(gb::cuda::launch_quant_gemv(d.get(), 17, WeightType::MXFP4, 1, 32, d.get(), 1, d.get(), 1, 0.0f, nullptr) !=
          cudaSuccess);
  QVERIFY(gb::cuda::launch_dequantize_rows(d.get(), 17, WeightType::MXFP4, 0, 1, 32, d.get(), nullptr) != cudaSuccess);
  QVERIFY(gb::cuda::launch_quant_gemv(d.get(), 128, WeightType::F32, 1, 32, d.get(), 1, d.get(), 1, 0.0f, nullptr) !=
          cudaSuccess);
  QVERIFY(gb::cuda::launch_quant_gemv(d.get(), 34, WeightType::Q8_0, 1, 32, d.get(), gb::cuda::kMaxGemvTokens + 1,
                                      d.get(), 1, 0.0f, nullptr) != cudaSuccess);
  // 32 columns are not a whole Q4_K super-block.
  QVERIFY(gb::cuda::launch_quant_gemv(d.get(), 144, WeightType::Q4_K, 1, 32, d.get(), 1, d.get(), 1, 0.0f, nullptr) !=
          cudaSuccess);
  QVERIFY(gb::cuda::launch_dequantize_rows(d.get(), 144, WeightType::Q4_K, 0, 1, 32, d.get(), nullptr) != cudaSuccess);
  QVERIFY(gb::cuda::launch_dequantize_rows(d.get(), 128, WeightType::BF16, 0, 1, 64, d.get(), nullptr) != cudaSuccess);
  // The tiled path needs room for one row.
  cublasHandle_t handle = nullptr;
  QVERIFY(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  const gb::cuda::DeviceMatrix m{d.get(), WeightType::Q8_0, 2, 64, 68};
  const gb::Status st = gb::cuda::gemm_quant_rows(handle, m, d.get(), gb::cuda::kMaxGemvTokens + 1, d.get(), 2, 0.0f,
                                                  {d.get(), 32}, nullptr);
  QVERIFY(!st.ok());
  cublasDestroy(handle);
  QCOMPARE(gbtest::cuda::device_error(), std::string());
}
