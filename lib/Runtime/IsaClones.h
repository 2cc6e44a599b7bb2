//===- IsaClones.h - One loop compiled per x86 ISA, chosen by cpuid ----------===//
//
// TCC_ISA_CLONES(name, body) defines `name(args...)`, which calls `body(args...)` compiled for
// AVX-512F, for AVX2 or for the baseline, the variant chosen once per argument-type list from
// the CPU's features (sgemmIsa(): the widest the CPU and OS support, capped by $TCC_GEMM_ISA,
// so tests cover every variant on one machine). `body` is a TCC_ISA_BODY function: always
// inlined, so each variant's loops are vectorised for its ISA.
//
// This is what GCC's target_clones attribute does, without its IFUNC resolvers: those run while
// the dynamic loader relocates libtccrt, before ThreadSanitizer's runtime is initialised, and
// crash an instrumented build at load.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "Sgemm.h"

#define TCC_ISA_BODY static inline __attribute__((always_inline))

#define TCC_ISA_CLONES(name, body)                                                                 \
  template <class... A> __attribute__((target("avx512f"))) void name##Avx512(A... a) {            \
    body(a...);                                                                                    \
  }                                                                                                \
  template <class... A> __attribute__((target("avx2"))) void name##Avx2(A... a) { body(a...); }   \
  template <class... A> void name##Baseline(A... a) { body(a...); }                                \
  template <class... A> void name(A... a) {                                                        \
    static void (*const variant)(A...) = [] {                                                      \
      switch (sgemmIsa()) {                                                                        \
      case SgemmIsa::Avx512: return &name##Avx512<A...>;                                           \
      case SgemmIsa::Avx2: return &name##Avx2<A...>;                                               \
      default: return &name##Baseline<A...>;                                                       \
      }                                                                                            \
    }();                                                                                           \
    variant(a...);                                                                                 \
  }
