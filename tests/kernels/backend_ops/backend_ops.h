// Op-by-op backend checks in the spirit of llama.cpp's test-backend-ops: one table
// of cases (every op a backend runs in the forward pass, on awkward sizes: 1, 7,
// 33 and 4095 columns, odd token counts, every weight type), one float64
// reference per op written here from the op's formula, and an OpBackend interface
// that each backend's test implements. tests/kernels/cpu/test_backend_ops.cpp runs
// the table on the CPU kernels; a CUDA test implements OpBackend with device
// copies and reuses op_cases() and run_case() unchanged (compile backend_ops.cpp
// into it, as test_backend_ops does).
//
// Tolerances (inputs are seeded N(0,1), weights rounded to their type first):
//   float-weight matmul ......... 1e-5 * sqrt(cols) * (1 + |y|): summation order
//   quantized-weight matmul ..... the 8-bit activation rounding bound
//                                 sum_i |w_i| * d_block / 2 plus the same order term
//   rmsnorm, add, softcap ....... 1e-5 relative + 1e-6
//   rope ........................ 2e-5 abs (angles formed in double on the CPU)
//   swiglu, gelu ................ 2e-6 relative + 1e-6 (polynomial exp on AVX2)
//   softmax ..................... 1e-6 abs
//   attention ................... 2e-5 abs (a convex combination of N(0,1) values)
// Threads: one case at a time; OpBackend implementations may use threads inside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cpu/ops.h"
#include "cpu/paged_attention.h"
#include "cpu/weight_type.h"

namespace gbtest::ops {

enum class OpKind { Matmul, RmsNorm, Rope, SwiGlu, GeluGated, Softcap, Add, Softmax, Attention };

struct OpCase {
  OpKind kind = OpKind::Add;
  std::string name;  // "matmul Q4_K rows 7 cols 768 tokens 3": what a failure prints
  // Matmul: W (rows, cols) of wtype, x (tokens, cols), y (tokens, rows).
  // Row-wise ops: `tokens` rows of `cols` values. Rope: `tokens` rows of
  // (rows = heads) x (cols = head_dim) at positions 0, 7, 14, ...
  gb::kernels::WeightType wtype = gb::kernels::WeightType::F32;
  int64_t rows = 1, cols = 1, tokens = 1;
  gb::kernels::RopeStyle rope_style = gb::kernels::RopeStyle::Adjacent;
  int32_t rope_dim = 0;
  // Attention: one query head over `ctx` positions through a scrambled block
  // table; head_dim = cols, kv heads = rows (the query reads the last one).
  int32_t ctx = 1;
  gb::kernels::AttentionShape shape;
  float param = 0.0f;  // rmsnorm eps, softcap cap
};

// Every case, op by op.
std::vector<OpCase> op_cases();

// A backend under test. Buffers are host memory in the layouts of the kernels'
// headers (cpu/ops.h, cpu/matmul_quant.h, cpu/paged_attention.h); a device
// backend copies them in and out. Return false when the op is not supported
// (reported as skipped, never as passed).
class OpBackend {
 public:
  virtual ~OpBackend() = default;
  // w: (rows) rows of weight_bytes(wtype, cols) bytes; x: (tokens, cols); y: (tokens, rows).
  virtual bool matmul(const OpCase& c, const void* w, const float* x, float* y) = 0;
  // Row-wise: x (tokens, cols) -> out (tokens, cols); weight (cols).
  virtual bool rmsnorm(const OpCase& c, const float* x, const float* weight, float* out) = 0;
  // v (tokens, rows, cols) in place; token t at positions[t].
  virtual bool rope(const OpCase& c, float* v, const int32_t* positions, const gb::kernels::RopeParams& p) = 0;
  virtual bool swiglu(const OpCase& c, const float* gate, const float* up, float* out) = 0;
  virtual bool gelu_gated(const OpCase& c, const float* gate, const float* up, float* out) = 0;
  virtual bool softcap(const OpCase& c, float* x) = 0;
  virtual bool add(const OpCase& c, float* x, const float* y) = 0;
  virtual bool softmax(const OpCase& c, float* x) = 0;  // each of the tokens rows
  // out (cols) = attention of q (cols) over kv head `rows - 1`.
  virtual bool attention(const OpCase& c, const float* q, const gb::kernels::PagedKvView& kv, float* out) = 0;
};

enum class Outcome { Passed, Failed, Unsupported };
struct CaseResult {
  Outcome outcome = Outcome::Passed;
  std::string problem;  // for Failed: where and by how much
};

// Seeded inputs, the backend, the float64 reference, the comparison.
CaseResult run_case(const OpCase& c, OpBackend& backend);

}  // namespace gbtest::ops
