//===- SgemmAvx512Vec.h - AVX-512 vector traits of the sgemm microkernels --===//
//
// Included only by the files compiled with AVX-512 flags (SgemmAvx512.cpp,
// SgemmAvx512Bf16.cpp): the f32 traits both kernel families share. Internal linkage, as
// everything of those files (SgemmKernelTemplate.h says why).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tcc::rt {
namespace {

struct Avx512Vec {
  using type = __m512;
  static constexpr int lanes = 16;
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512 set1(float v) { return _mm512_set1_ps(v); }
  static __m512 load(const float *p) { return _mm512_loadu_ps(p); }
  static __m512 broadcast(const float *p) { return _mm512_set1_ps(*p); }
  static __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
  static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
  // The maskz form: GCC 12's plain _mm512_max_ps warns of its own undefined source operand.
  static __m512 max(__m512 a, __m512 b) { return _mm512_maskz_max_ps(0xFFFF, a, b); }
  static __m512 min(__m512 a, __m512 b) { return _mm512_maskz_min_ps(0xFFFF, a, b); }
  // In asm: GCC finds a function holding only __builtin_prefetch free of side effects and
  // drops its calls.
  static void prefetchL2(const float *p) { asm volatile("prefetcht1 %0" : : "m"(*p)); }
  /// Lanes [0, n) on.
  static __mmask16 mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
  }
  static __m512 maskedLoad(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
  static void maskedStore(float *p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
};

} // namespace
} // namespace tcc::rt
