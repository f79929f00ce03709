// The quantized-weight kernels at the AVX-512 level: the AVX2 code with VNNI
// integer dot products (256-bit vpdpbusd, AVX512-VNNI + VL), and 512-bit ones
// where a type's layout allows (decode_zmm, micro_tile_zmm).

// GCC 12's AVX-512 cast, extract and insert intrinsics start from
// _mm512_undefined_*(), which -Wmaybe-uninitialized / -Wuninitialized report
// once inlined (a known false positive, as in matmul_avx512.cpp). Clang (the
// sanitizer builds) has no such warning group.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define GB_QUANT_NAMESPACE avx512
#define GB_QUANT_VNNI 1
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
