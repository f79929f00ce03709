// The quantized-weight kernels at the AVX2 level (-mavx2 -mfma -mf16c).
#define GB_QUANT_NAMESPACE avx2
#define GB_QUANT_VNNI 0
#include "cpu/matmul_quant_simd.inc"
