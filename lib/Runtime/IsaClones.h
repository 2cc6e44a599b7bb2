//===- IsaClones.h - One loop compiled per x86 ISA, chosen by cpuid ----------===//
//
// TCC_ISA_CLONES(name, body) defines `name(args...)`, which calls `body(args...)` compiled for
// AVX-512F, for AVX2 with FMA (which the AVX2 family requires: the transcendentals' fused
// multiply-adds are one instruction there) or for the baseline, the variant chosen once per
// argument-type list from the CPU's features (sgemmIsa(): the widest the CPU and OS support,
// capped by $TCC_GEMM_ISA, so tests cover every variant on one machine). `body` is a
// TCC_ISA_BODY function: always inlined, so each variant's loops are vectorised for its ISA.
//
// This is what GCC's target_clones attribute does, without its IFUNC resolvers: those run while
// the dynamic loader relocates libtccrt, before ThreadSanitizer's runtime is initialised, and
// crash an instrumented build at load.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "Sgemm.h"

#define TCC_ISA_BODY static inline __attribute__((always_inline))
// After a lambda's parameters in a TCC_ISA_BODY: always inlined too (a lambda does not take its
// enclosing variant's target; called out of line, its loops compiled for the baseline).
#define TCC_ISA_LAMBDA __attribute__((always_inline))

// `name(args...)`: calls name##Avx512, name##Avx2 or name##Baseline, the one for sgemmIsa(),
// chosen once per argument-type list.
#define TCC_ISA_DISPATCH(name)                                                                     \
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

#define TCC_ISA_CLONES(name, body)                                                                 \
  template <class... A> __attribute__((target("avx512f"))) void name##Avx512(A... a) {            \
    body(a...);                                                                                    \
  }                                                                                                \
  template <class... A> __attribute__((target("avx2,fma"))) void name##Avx2(A... a) {             \
    body(a...);                                                                                    \
  }                                                                                                \
  template <class... A> void name##Baseline(A... a) { body(a...); }                                \
  TCC_ISA_DISPATCH(name)

namespace tcc::rt {
/// Float vectors of one AVX-512, AVX2 or SSE2 register.
typedef float IsaVec16 __attribute__((vector_size(64)));
typedef float IsaVec8 __attribute__((vector_size(32)));
typedef float IsaVec4 __attribute__((vector_size(16)));

/// Lanes of the vectors TCC_ISA_CLONES_VECTOR's variant for sgemmIsa() uses.
inline int isaVectorLanes() {
  switch (sgemmIsa()) {
  case SgemmIsa::Avx512: return 16;
  case SgemmIsa::Avx2: return 8;
  default: return 4;
  }
}

template <class From, class To, class Convert>
TCC_ISA_BODY void convertRangeBody(const From *__restrict from, To *__restrict to, int64_t n,
                                   Convert convert) {
  for (int64_t i = 0; i < n; ++i)
    to[i] = convert(from[i]);
}
/// convertRange(from, to, n, convert): to[i] = convert(from[i]) for i < n (distinct arrays), a
/// loop GCC vectorises for the CPU's widest ISA (the conversion inlined, not called through a
/// pointer).
TCC_ISA_CLONES(convertRange, convertRangeBody)
} // namespace tcc::rt

// TCC_ISA_CLONES_VECTOR(name, body): TCC_ISA_CLONES for a body templated on its float vector
// type, `body<V>(args...)`, V being each variant's register: IsaVec16 (AVX-512), IsaVec8 (AVX2
// with FMA, which the AVX2 family requires) or IsaVec4 (the baseline's SSE2). A generic vector
// wider than the ISA's registers is split by GCC into narrow pieces through memory: the AVX2
// variant of a 16-lane depthwise loop ran 8x slower than the AVX-512 one.
#define TCC_ISA_CLONES_VECTOR(name, body)                                                          \
  template <class... A> __attribute__((target("avx512f"))) void name##Avx512(A... a) {            \
    body<IsaVec16>(a...);                                                                          \
  }                                                                                                \
  template <class... A> __attribute__((target("avx2,fma"))) void name##Avx2(A... a) {             \
    body<IsaVec8>(a...);                                                                           \
  }                                                                                                \
  template <class... A> void name##Baseline(A... a) { body<IsaVec4>(a...); }                       \
  TCC_ISA_DISPATCH(name)

