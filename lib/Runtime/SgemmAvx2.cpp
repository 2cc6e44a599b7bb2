//===- SgemmAvx2.cpp - Sgemm microkernels for AVX2 + FMA (6 x 16 tile) -----===//
//
// Compiled with -mavx2 -mfma (CMakeLists.txt) and only called when the CPU reports both
// (Sgemm.cpp). 6 rows x 2 ymm of 8 columns: 12 accumulators, 2 registers of B, one broadcast.
// The column edge is masked loads and stores; panels ending in <= 8 columns use the one-ymm
// kernels.
#include "SgemmKernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tcc::rt {
namespace {

struct Vec {
  using type = __m256;
  static constexpr int lanes = 8;
  static __m256 zero() { return _mm256_setzero_ps(); }
  static __m256 set1(float v) { return _mm256_set1_ps(v); }
  static __m256 load(const float *p) { return _mm256_loadu_ps(p); }
  static __m256 broadcast(const float *p) { return _mm256_broadcast_ss(p); }
  static __m256 fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
  static __m256 dot(__m256 a, __m256 b, __m256 c) { return fma(a, b, c); }
  static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  static __m256 max(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
  static __m256 min(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
  // In asm: GCC finds a function holding only __builtin_prefetch free of side effects and
  // drops its calls.
  static void prefetchL2(const float *p) { asm volatile("prefetcht1 %0" : : "m"(*p)); }
  /// Lanes [0, n) on (all bits of an on lane set).
  static __m256i mask(int64_t n) {
    int on = n >= 8 ? 8 : n <= 0 ? 0 : (int)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(on), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static __m256 maskedLoad(const float *p, __m256i m) { return _mm256_maskload_ps(p, m); }
  static void maskedStore(float *p, __m256i m, __m256 v) { _mm256_maskstore_ps(p, m, v); }
};

} // namespace
} // namespace tcc::rt

#include "SgemmKernelTemplate.h"

namespace tcc::rt {
namespace {
constexpr SgemmKernelFamily kFamily = makeFamily<6, 1, 2, 3, 4, 5, 6>();
} // namespace

const SgemmKernelFamily *sgemmAvx2Kernels() { return &kFamily; }

} // namespace tcc::rt
#else
namespace tcc::rt {
const SgemmKernelFamily *sgemmAvx2Kernels() { return nullptr; }
} // namespace tcc::rt
#endif
