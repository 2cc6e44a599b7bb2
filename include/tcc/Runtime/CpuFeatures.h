//===- CpuFeatures.h - x86 ISA extensions a CPU artifact's kernels use -----===//
//
// Kernels are compiled with -march=native: they may use every ISA extension of the compiling
// machine. The compiler records the extensions its target enables (read from the compiler's
// predefined macros) in CpuModule.isa; the runtime refuses to load an artifact on a CPU that
// lacks one, instead of dying of an illegal instruction. Header-only, no dependencies.
#pragma once

#include <string>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tcc::rt {

// (GCC predefined macro, __builtin_cpu_supports name) of the extensions that change codegen.
#define TCC_CPU_FEATURES(X)                                                                        \
  X("__F16C__", "f16c")                                                                            \
  TCC_CPU_FEATURES_BUILTIN(X)
// Those that both GCC's and clang's __builtin_cpu_supports know.
#define TCC_CPU_FEATURES_BUILTIN(X)                                                                \
  X("__SSE4_2__", "sse4.2")                                                                        \
  X("__POPCNT__", "popcnt")                                                                        \
  X("__AVX__", "avx")                                                                              \
  X("__AVX2__", "avx2")                                                                            \
  X("__FMA__", "fma")                                                                              \
  X("__BMI__", "bmi")                                                                              \
  X("__BMI2__", "bmi2")                                                                            \
  X("__AVX512F__", "avx512f")                                                                      \
  X("__AVX512CD__", "avx512cd")                                                                    \
  X("__AVX512BW__", "avx512bw")                                                                    \
  X("__AVX512DQ__", "avx512dq")                                                                    \
  X("__AVX512VL__", "avx512vl")                                                                    \
  X("__AVX512VNNI__", "avx512vnni")                                                                \
  X("__AVX512BF16__", "avx512bf16")

/// The extensions enabled by a compiler's predefined macros (the output of `-E -dM`).
inline std::vector<std::string> cpuFeaturesFromMacros(const std::string &macros) {
  std::vector<std::string> out;
#define TCC_FROM_MACRO(macro, name)                                                                \
  if (macros.find(std::string("#define ") + macro + " ") != std::string::npos)                    \
    out.push_back(name);
  TCC_CPU_FEATURES(TCC_FROM_MACRO)
#undef TCC_FROM_MACRO
  return out;
}

/// Whether this CPU has the extension `name` (a name from TCC_CPU_FEATURES, or "amx-tile" or
/// "amx-bf16"; others: false). For AMX the OS must also grant the tile state (Sgemm.cpp asks).
inline bool cpuHasFeature(const std::string &name) {
#if defined(__x86_64__) || defined(__i386__)
  // F16C from cpuid (leaf 1, ECX bit 29): clang 14's __builtin_cpu_supports does not know it.
  if (name == "f16c") {
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
  }
  // AMX from cpuid (leaf 7, subleaf 0, EDX bits 24 and 22): GCC 12's builtin does not know it.
  if (name == "amx-tile" || name == "amx-bf16") {
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) &&
           (edx & (1u << (name == "amx-tile" ? 24 : 22)));
  }
  __builtin_cpu_init();
#define TCC_SUPPORTS(macro, feature)                                                               \
  if (name == feature)                                                                             \
    return __builtin_cpu_supports(feature);
  TCC_CPU_FEATURES_BUILTIN(TCC_SUPPORTS)
#undef TCC_SUPPORTS
#endif
  return false;
}

} // namespace tcc::rt
