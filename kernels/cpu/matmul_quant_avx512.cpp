// The quantized-weight kernels at the AVX-512 level: the AVX2 code with VNNI
// integer dot products (256-bit vpdpbusd, AVX512-VNNI + VL).
#define GB_QUANT_NAMESPACE avx512
#define GB_QUANT_VNNI 1
#include "cpu/matmul_quant_simd.inc"
