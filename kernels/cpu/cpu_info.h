// What the CPU kernels run on: the instruction-set levels the run-time dispatch
// chooses between (from cpuid, never from the build machine), the processor's
// model name, for benchmarks and reports. Any thread.
#pragma once

#include <string>

namespace gb::kernels {

// Kernel levels, each a superset of the one before. A level is used only when
// cpuid reports every extension it lists (kIsaTable in cpu_info.cpp).
// Avx512Bf16 adds VDPBF16PS (AVX512-BF16: AMD Zen 4 and later, Intel Cooper Lake
// and Sapphire Rapids and later): BF16 weights take their dot products in bf16;
// every other kernel runs its Avx512 code there.
enum class Isa : int { Scalar = 0, Avx2 = 1, Avx512 = 2, Avx512Bf16 = 3 };
inline constexpr int kIsaCount = 4;

// True when this processor has every extension the level needs.
bool isa_supported(Isa isa);

// The level the kernels use: the highest supported one, capped by the
// environment variable GLASSBOX_CPU_ISA (scalar, avx2, avx512, avx512bf16) when set, so a
// machine can run the lower paths too. Read once per process.
Isa active_isa();

// "scalar", "avx2", "avx512", "avx512bf16".
const char* isa_name(Isa isa);

// The extensions of the level, e.g. "avx2+fma+f16c".
const char* isa_extensions(Isa isa);

// /proc/cpuinfo "model name", else the cpuid brand string, else "unknown processor".
std::string processor_name();

// The processor as cpuid names it: vendor, family/model/stepping (the
// displayed values, extended fields added), e.g. "AuthenticAMD 26/2/1": what
// per-processor tuning is keyed by (backend/decode_tuning.h). "unknown"
// where there is no cpuid.
std::string processor_signature();

// isa_extensions(active_isa()), e.g. "avx2+fma+f16c" or "scalar".
std::string instruction_sets();

}  // namespace gb::kernels
