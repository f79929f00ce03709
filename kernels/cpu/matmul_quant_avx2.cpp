// The quantized-weight kernels at the AVX2 level (-mavx2 -mfma -mf16c).
#define GB_QUANT_NAMESPACE avx2
#define GB_QUANT_VNNI 0
// The pieces of the quantized-weight kernels, in this order (the overview:
// matmul_quant_simd_common.inc).
#include "cpu/matmul_quant_simd_common.inc"
#include "cpu/matmul_quant_simd_blocks32.inc"
#include "cpu/matmul_quant_simd_superblocks.inc"
#include "cpu/matmul_quant_simd_transposed.inc"
#include "cpu/matmul_quant_simd_kernel.inc"
#include "cpu/matmul_quant_simd_prefill.inc"
#include "cpu/matmul_quant_simd_decode.inc"
#include "cpu/matmul_quant_simd_entry.inc"
