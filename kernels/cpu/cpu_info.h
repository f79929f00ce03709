// What the CPU kernels run on, for benchmarks and reports: the processor's model
// name and the instruction sets the run-time dispatch (matmul_has_simd, from
// cpuid) chose. Any thread.
#pragma once

#include <string>

namespace gb::kernels {

// /proc/cpuinfo "model name", else the cpuid brand string, else "unknown processor".
std::string processor_name();

// "avx2+fma+f16c" when the SIMD kernels are in use, else "scalar".
std::string instruction_sets();

}  // namespace gb::kernels
