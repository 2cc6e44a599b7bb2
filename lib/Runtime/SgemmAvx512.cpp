//===- SgemmAvx512.cpp - Sgemm microkernels for AVX-512 (14 x 32 tile) -----===//
//
// Compiled with -mavx512f -mfma (CMakeLists.txt) and only called when the CPU reports AVX-512F
// (Sgemm.cpp). 14 rows x 2 zmm of 16 columns: 28 accumulators, 2 registers of B, broadcasts of A
// folded into the FMAs. The column edge (cols < 32) is masked loads and stores.
#include "SgemmKernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace tcc::rt {
namespace {

constexpr int kMR = 14, kNR = 32;

template <int M>
void kernel(int64_t k, const float *a, const float *b, int64_t ldb, float *c, int64_t ldc,
            int64_t cols, float alpha, float beta) {
  __m512 lo[M], hi[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
    lo[i] = hi[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    _mm_prefetch((const char *)(b + 8 * ldb), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      __m512 ai = _mm512_set1_ps(a[i]);
      lo[i] = _mm512_fmadd_ps(ai, b0, lo[i]);
      hi[i] = _mm512_fmadd_ps(ai, b1, hi[i]);
    }
    a += kMR;
    b += ldb;
  }
  __mmask16 m0 = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1);
  __mmask16 m1 = cols >= 32   ? (__mmask16)0xFFFF
                 : cols > 16 ? (__mmask16)((1u << (cols - 16)) - 1)
                             : (__mmask16)0;
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    float *row = c + i * ldc;
    __m512 r0 = _mm512_mul_ps(va, lo[i]), r1 = _mm512_mul_ps(va, hi[i]);
    if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), r1);
    }
    _mm512_mask_storeu_ps(row, m0, r0);
    _mm512_mask_storeu_ps(row + 16, m1, r1);
  }
}

const SgemmKernelFamily kFamily = {
    kMR,
    kNR,
    {kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>, kernel<7>, kernel<8>,
     kernel<9>, kernel<10>, kernel<11>, kernel<12>, kernel<13>, kernel<14>, nullptr, nullptr}};

} // namespace

const SgemmKernelFamily *sgemmAvx512Kernels() { return &kFamily; }

} // namespace tcc::rt
#else
namespace tcc::rt {
const SgemmKernelFamily *sgemmAvx512Kernels() { return nullptr; }
} // namespace tcc::rt
#endif
