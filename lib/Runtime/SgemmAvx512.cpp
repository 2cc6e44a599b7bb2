//===- SgemmAvx512.cpp - Sgemm microkernels for AVX-512 (14 x 32 tile) -----===//
//
// Compiled with -mavx512f -mfma (CMakeLists.txt) and only called when the CPU reports AVX-512F
// (Sgemm.cpp). 14 rows x 2 zmm of 16 columns: 28 accumulators, 2 registers of B, broadcasts of
// A. The column edge is masked loads and stores; panels ending in <= 16 columns use the
// one-zmm kernels.
#include "SgemmKernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tcc::rt {
namespace {

struct Vec {
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
  static void prefetch(const float *p) { _mm_prefetch((const char *)p, _MM_HINT_T0); }
  /// Lanes [0, n) on.
  static __mmask16 mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
  }
  static __m512 maskedLoad(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
  static void maskedStore(float *p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
};

} // namespace
} // namespace tcc::rt

#include "SgemmKernelTemplate.h"

namespace tcc::rt {
namespace {
constexpr SgemmKernelFamily kFamily = makeFamily<14, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14>();
} // namespace

const SgemmKernelFamily *sgemmAvx512Kernels() { return &kFamily; }

} // namespace tcc::rt
#else
namespace tcc::rt {
const SgemmKernelFamily *sgemmAvx512Kernels() { return nullptr; }
} // namespace tcc::rt
#endif
