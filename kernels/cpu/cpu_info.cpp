#include "cpu/cpu_info.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <fstream>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace gb::kernels {

namespace {

// Each level and the cpuid features it needs (GCC's __builtin_cpu_supports names).
struct IsaRow {
  Isa isa;
  const char* name;
  const char* extensions;
  const char* features[10];
};
constexpr IsaRow kIsaTable[kIsaCount] = {
    {Isa::Scalar, "scalar", "scalar", {}},
    {Isa::Avx2, "avx2", "avx2+fma+f16c", {"avx2", "fma", "f16c"}},
    // AVX-512 with VNNI: Intel Ice Lake / Sapphire Rapids and later, AMD Zen 4
    // and later. Skylake-X (no VNNI) runs the AVX2 level.
    {Isa::Avx512, "avx512", "avx512f+bw+dq+vl+vnni", {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq",
                                                     "avx512vl", "avx512vnni"}},
    {Isa::Avx512Bf16, "avx512bf16", "avx512f+bw+dq+vl+vnni+bf16",
     {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512vnni", "avx512bf16"}},
};

bool has_feature(const char* f) {
#if defined(__x86_64__)
  // __builtin_cpu_supports needs a string literal, so spell the table out.
  const std::string s(f);
  if (s == "avx2") return __builtin_cpu_supports("avx2");
  if (s == "fma") return __builtin_cpu_supports("fma");
  if (s == "f16c") {
    // Read from cpuid (leaf 1, ECX bit 29): clang before 15 does not know the
    // name "f16c" in __builtin_cpu_supports, and the sanitizer builds use clang.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }
  if (s == "avx512f") return __builtin_cpu_supports("avx512f");
  if (s == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (s == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (s == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (s == "avx512vnni") return __builtin_cpu_supports("avx512vnni");
  if (s == "avx512bf16") {
    // cpuid leaf 7 sub-leaf 1, EAX bit 5 (clang 14 does not know the name in
    // __builtin_cpu_supports). The OS saves the zmm state: avx512f is checked too.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 5)) != 0;
  }
#endif
  (void)f;
  return false;
}

Isa detect_isa() {
  Isa best = Isa::Scalar;
  for (const IsaRow& row : kIsaTable)
    if (isa_supported(row.isa)) best = row.isa;
  if (const char* cap = std::getenv("GLASSBOX_CPU_ISA")) {
    for (const IsaRow& row : kIsaTable)
      if (std::strcmp(cap, row.name) == 0 && static_cast<int>(row.isa) < static_cast<int>(best)) best = row.isa;
  }
  return best;
}

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

bool isa_supported(Isa isa) {
  // Asked on every matmul call (matmul_weights_with): the feature checks run
  // once (perf had the uncached checks at 4% of a Q4_K_M decode).
  static const auto supported = [] {
    std::array<bool, kIsaCount> s{};
    for (int i = 0; i < kIsaCount; ++i) {
      s[static_cast<size_t>(i)] = true;
      for (const char* f : kIsaTable[i].features)
        if (f != nullptr && !has_feature(f)) s[static_cast<size_t>(i)] = false;
    }
    return s;
  }();
  return supported[static_cast<size_t>(isa)];
}

Isa active_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

const char* isa_name(Isa isa) { return kIsaTable[static_cast<int>(isa)].name; }
const char* isa_extensions(Isa isa) { return kIsaTable[static_cast<int>(isa)].extensions; }

std::string processor_name() {
  static const std::string name = [] {
    std::string n = cpuinfo_model_name();
    if (n.empty()) n = cpuid_brand_string();
    return n.empty() ? std::string("unknown processor") : n;
  }();
  return name;
}

std::string processor_signature() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return "unknown";
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return std::string(vendor);
  // Intel SDM / AMD APM: the extended family is added when the base family is
  // 15; the extended model is prepended when the family is 6 or 15 and above.
  const unsigned base_family = (eax >> 8) & 0xF, base_model = (eax >> 4) & 0xF;
  const unsigned family = base_family == 15 ? base_family + ((eax >> 20) & 0xFF) : base_family;
  const unsigned model = base_family == 6 || base_family == 15 ? (((eax >> 16) & 0xF) << 4) | base_model : base_model;
  return std::string(vendor) + " " + std::to_string(family) + "/" + std::to_string(model) + "/" +
         std::to_string(eax & 0xF);
#else
  return "unknown";
#endif
}

std::string instruction_sets() { return isa_extensions(active_isa()); }

}  // namespace gb::kernels
