//===- SgemmAvx2.cpp - Sgemm microkernels for AVX2 + FMA (6 x 16 tile) -----===//
//
// Compiled with -mavx2 -mfma (CMakeLists.txt) and only called when the CPU reports both
// (Sgemm.cpp). 6 rows x 2 ymm of 8 columns: 12 accumulators, 2 registers of B, one broadcast.
// The column edge (cols < 16) is masked loads and stores.
#include "SgemmKernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tcc::rt {
namespace {

constexpr int kMR = 6, kNR = 16;

template <int M>
void kernel(int64_t k, const float *a, const float *b, int64_t ldb, float *c, int64_t ldc,
            int64_t cols, float alpha, float beta) {
  __m256 lo[M], hi[M];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
    lo[i] = hi[i] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    _mm_prefetch((const char *)(b + 8 * ldb), _MM_HINT_T0);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      lo[i] = _mm256_fmadd_ps(ai, b0, lo[i]);
      hi[i] = _mm256_fmadd_ps(ai, b1, hi[i]);
    }
    a += kMR;
    b += ldb;
  }
  // Lane masks: lane j of mask0 is on when j < cols, of mask1 when 8 + j < cols.
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i n0 = _mm256_set1_epi32((int)(cols < 16 ? cols : 16));
  __m256i mask0 = _mm256_cmpgt_epi32(n0, lanes);
  __m256i mask1 = _mm256_cmpgt_epi32(n0, _mm256_add_epi32(lanes, _mm256_set1_epi32(8)));
  __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    float *row = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(va, lo[i]), r1 = _mm256_mul_ps(va, hi[i]);
    if (beta != 0.0f) {
      r0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(row, mask0), r0);
      r1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(row + 8, mask1), r1);
    }
    _mm256_maskstore_ps(row, mask0, r0);
    _mm256_maskstore_ps(row + 8, mask1, r1);
  }
}

const SgemmKernelFamily kFamily = {
    kMR,
    kNR,
    {kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>, nullptr, nullptr, nullptr,
     nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}};

} // namespace

const SgemmKernelFamily *sgemmAvx2Kernels() { return &kFamily; }

} // namespace tcc::rt
#else
namespace tcc::rt {
const SgemmKernelFamily *sgemmAvx2Kernels() { return nullptr; }
} // namespace tcc::rt
#endif
