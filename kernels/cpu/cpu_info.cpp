#include "cpu/cpu_info.h"

#include <cstring>
#include <fstream>

#include "cpu/matmul.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace gb::kernels {

namespace {

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::string cpuinfo_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return trim(line.substr(colon + 1));
  }
  return {};
}

std::string cpuid_brand_string() {
#if defined(__x86_64__)
  unsigned max_leaf = __get_cpuid_max(0x80000000u, nullptr);
  if (max_leaf < 0x80000004u) return {};
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    unsigned regs[4] = {};
    __get_cpuid(0x80000002u + i, &regs[0], &regs[1], &regs[2], &regs[3]);
    std::memcpy(brand + 16 * i, regs, sizeof regs);
  }
  return trim(brand);
#else
  return {};
#endif
}

}  // namespace

std::string processor_name() {
  static const std::string name = [] {
    std::string n = cpuinfo_model_name();
    if (n.empty()) n = cpuid_brand_string();
    return n.empty() ? std::string("unknown processor") : n;
  }();
  return name;
}

std::string instruction_sets() { return matmul_has_simd() ? "avx2+fma+f16c" : "scalar"; }

}  // namespace gb::kernels
