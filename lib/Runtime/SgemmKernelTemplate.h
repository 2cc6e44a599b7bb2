//===- SgemmKernelTemplate.h - The one microkernel, over a vector type -----===//
//
// Included only by the per-ISA kernel files (SgemmAvx2.cpp, SgemmAvx512.cpp), each compiled
// with its own -m flags, after defining `Vec`: the vector traits of its instruction set
// (zero, load, broadcast, fma, the column-masked load and store of C) and `dot`, the k step
// acc += a * b (an FMA on f32 panels; on panels of bf16 pairs, AVX512-BF16's two-term dot
// product per 32-bit lane: SgemmAvx512Bf16.cpp). Everything here has
// internal linkage, so no copy compiled for one instruction set can be used by another file.
//
// kernel<M, W, MR>: M rows (<= MR) x W vectors of columns. Few rows give few accumulators and
// so a short FMA latency chain per k; those kernels keep S independent sums over k (p mod S)
// and add them at the end, so that the FMA pipes stay busy (batch-1 layers are such rows).
#pragma once

#include "SgemmKernels.h"

namespace tcc::rt {
namespace {

/// Stores a tile of M rows x W vectors of sums: C[0:M, 0:cols] = act(alpha * acc(i, w) +
/// beta * C + ...), the epilogue in SgemmEpilogue's order; beta == 0 does not read C. Every
/// microkernel ends here, so that each family's tiles round and clamp alike.
template <int M, int W, class Acc>
[[gnu::always_inline]] inline void storeTile(const Acc &acc, float *c, int64_t ldc, int64_t cols,
                                             float alpha, float beta,
                                             const SgemmEpilogue *epilogue) {
  using V = typename Vec::type;
  constexpr int L = Vec::lanes;
  V va = Vec::set1(alpha), vb = Vec::set1(beta);
  const bool hasBias = epilogue && epilogue->bias, hasRowBias = epilogue && epilogue->rowBias,
             hasResidual = epilogue && epilogue->residual, clamp = epilogue && epilogue->clamp;
  const V lo = clamp ? Vec::set1(epilogue->lo) : Vec::zero();
  const V hi = clamp ? Vec::set1(epilogue->hi) : Vec::zero();
#pragma GCC unroll 2
  for (int w = 0; w < W; ++w) {
    int64_t wc = cols - w * L; // columns of this vector (may be <= 0 or >= L)
    auto mask = Vec::mask(wc);
    V bias = hasBias ? Vec::maskedLoad(epilogue->bias + w * L, mask) : Vec::zero();
#pragma GCC unroll 32
    for (int i = 0; i < M; ++i) {
      float *at = c + i * ldc + w * L;
      V r = Vec::mul(va, acc(i, w));
      if (beta != 0.0f)
        r = Vec::fma(vb, Vec::maskedLoad(at, mask), r);
      if (hasBias)
        r = Vec::add(r, bias);
      if (hasRowBias)
        r = Vec::add(r, Vec::broadcast(epilogue->rowBias + i));
      if (hasResidual)
        r = Vec::add(r, Vec::maskedLoad(epilogue->residual + i * epilogue->ldResidual + w * L, mask));
      if (clamp) // maxps/minps return their second operand when one is NaN: NaN stays NaN
        r = Vec::min(hi, Vec::max(lo, r));
      Vec::maskedStore(at, mask, r);
    }
  }
}

/// The tile over A packed (row i of k step p at a[p * MR + i]) or, InPlaceA, A itself (at
/// a[i * lda + p]). Stream (prepacked weights, read from memory once a run): each k step also
/// prefetches into L2 the same lines of the operand's next panel (StreamA: k * MR floats on;
/// StreamB: k * ldb), so that they arrive while this panel is computed.
enum Stream { StreamNone, StreamA, StreamB };
template <int M, int W, int MR, bool InPlaceA, Stream Streamed = StreamNone>
[[gnu::always_inline]] inline void tile(int64_t k, const float *a, int64_t lda, const float *b,
                                        int64_t ldb, float *c, int64_t ldc, int64_t cols,
                                        float alpha, float beta, const SgemmEpilogue *epilogue) {
  using V = typename Vec::type;
  constexpr int L = Vec::lanes;
  // One row: two sums, in rowKernel's order, so that a row gives the same bits on every path.
  constexpr int S = M == 1 ? 2 : M * W <= 2 ? 4 : M * W <= 6 ? 2 : 1;
  V acc[S][M][W];
#pragma GCC unroll 64
  for (int s = 0; s < S; ++s)
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w)
        acc[s][i][w] = Vec::zero();
  auto step = [&](int s, const float *ap, const float *bp) {
    V bv[W];
#pragma GCC unroll 2
    for (int w = 0; w < W; ++w)
      bv[w] = Vec::load(bp + w * L);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      V ai = Vec::broadcast(InPlaceA ? ap + i * lda : ap + i);
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w)
        acc[s][i][w] = Vec::dot(ai, bv[w], acc[s][i][w]);
    }
  };
  constexpr int64_t aStep = InPlaceA ? 1 : MR; // from one k step's A to the next
  int64_t p = 0;
  for (; p + S <= k; p += S) {
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      if constexpr (Streamed == StreamA)
        Vec::prefetchL2(a + k * MR + s * aStep);
      if constexpr (Streamed == StreamB)
#pragma GCC unroll 2
        for (int w = 0; w < W; ++w)
          Vec::prefetchL2(b + k * ldb + s * ldb + w * L);
      step(s, a + s * aStep, b + s * ldb);
    }
    a += S * aStep;
    b += S * ldb;
  }
  for (; p < k; ++p) {
    step(0, a, b);
    a += aStep;
    b += ldb;
  }
#pragma GCC unroll 4
  for (int s = 1; s < S; ++s)
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w)
        acc[0][i][w] = Vec::add(acc[0][i][w], acc[s][i][w]);
  storeTile<M, W>([&](int i, int w) { return acc[0][i][w]; }, c, ldc, cols, alpha, beta,
                  epilogue);
}

template <int M, int W, int MR, Stream Streamed = StreamNone>
void kernel(int64_t k, const float *a, const float *b, int64_t ldb, float *c, int64_t ldc,
            int64_t cols, float alpha, float beta, const SgemmEpilogue *epilogue) {
  tile<M, W, MR, false, Streamed>(k, a, 0, b, ldb, c, ldc, cols, alpha, beta, epilogue);
}

template <int M, int W>
void kernelInPlaceA(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float *c, int64_t ldc, int64_t cols, float alpha, float beta,
                    const SgemmEpilogue *epilogue) {
  tile<M, W, 1, true>(k, a, lda, b, ldb, c, ldc, cols, alpha, beta, epilogue);
}

/// One row of A (a[p * aStep]: a packed panel's first row, or a row in place) times P panels
/// of B (2 vectors each), two sums over k a panel so that the FMA latency is hidden: 4P
/// accumulators.
template <int P>
void rowKernel(int64_t k, const float *a, int64_t aStep, const float *b, int64_t panelStride,
               float *c, int64_t cols, float alpha, float beta, const SgemmEpilogue *epilogue) {
  using V = typename Vec::type;
  constexpr int L = Vec::lanes, NR = 2 * L;
  V acc[2][P][2];
#pragma GCC unroll 2
  for (int s = 0; s < 2; ++s)
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q)
      acc[s][q][0] = acc[s][q][1] = Vec::zero();
  int64_t p = 0;
  for (; p + 2 <= k; p += 2) {
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
      V ai = Vec::broadcast(a + (p + s) * aStep);
#pragma GCC unroll 4
      for (int q = 0; q < P; ++q) {
        const float *bq = b + q * panelStride + (p + s) * NR;
        acc[s][q][0] = Vec::dot(ai, Vec::load(bq), acc[s][q][0]);
        acc[s][q][1] = Vec::dot(ai, Vec::load(bq + L), acc[s][q][1]);
      }
    }
  }
  for (; p < k; ++p) {
    V ai = Vec::broadcast(a + p * aStep);
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q) {
      const float *bq = b + q * panelStride + p * NR;
      acc[0][q][0] = Vec::dot(ai, Vec::load(bq), acc[0][q][0]);
      acc[0][q][1] = Vec::dot(ai, Vec::load(bq + L), acc[0][q][1]);
    }
  }
  V va = Vec::set1(alpha), vb = Vec::set1(beta);
#pragma GCC unroll 4
  for (int q = 0; q < P; ++q)
#pragma GCC unroll 2
    for (int w = 0; w < 2; ++w) {
      int64_t wc = cols - q * NR - w * L;
      auto mask = Vec::mask(wc);
      float *at = c + q * NR + w * L;
      V r = Vec::mul(va, Vec::add(acc[0][q][w], acc[1][q][w]));
      if (beta != 0.0f)
        r = Vec::fma(vb, Vec::maskedLoad(at, mask), r);
      if (epilogue && epilogue->bias)
        r = Vec::add(r, Vec::maskedLoad(epilogue->bias + q * NR + w * L, mask));
      if (epilogue && epilogue->rowBias)
        r = Vec::add(r, Vec::broadcast(epilogue->rowBias));
      if (epilogue && epilogue->residual)
        r = Vec::add(r, Vec::maskedLoad(epilogue->residual + q * NR + w * L, mask));
      if (epilogue && epilogue->clamp)
        r = Vec::min(Vec::set1(epilogue->hi), Vec::max(Vec::set1(epilogue->lo), r));
      Vec::maskedStore(at, mask, r);
    }
}

/// The family: byRows[r - 1] = kernel<r, 2, MR>, narrow[r - 1] = kernel<r, 1, MR> (inPlaceA,
/// inPlaceANarrow: the same over A in place; streamingA, streamingANarrow, streamingB,
/// streamingBNarrow: the same that prefetch the next A or B panel). constexpr,
/// and the families are constexpr variables: they must be constant-initialized. A dynamic
/// initializer in these files would be compiled with their -m flags and run when the library
/// loads, on any CPU (GCC zeroes such a struct with zmm stores: SIGILL without AVX-512).
template <int MR, int... R> constexpr SgemmKernelFamily makeFamily() {
  SgemmKernelFamily f{MR, 2 * Vec::lanes, Vec::lanes, {}, {}, {}};
  ((f.byRows[R - 1] = kernel<R, 2, MR>), ...);
  ((f.narrow[R - 1] = kernel<R, 1, MR>), ...);
  ((f.streamingA[R - 1] = kernel<R, 2, MR, StreamA>), ...);
  ((f.streamingANarrow[R - 1] = kernel<R, 1, MR, StreamA>), ...);
  ((f.streamingB[R - 1] = kernel<R, 2, MR, StreamB>), ...);
  ((f.streamingBNarrow[R - 1] = kernel<R, 1, MR, StreamB>), ...);
  ((f.inPlaceA[R - 1] = kernelInPlaceA<R, 2>), ...);
  ((f.inPlaceANarrow[R - 1] = kernelInPlaceA<R, 1>), ...);
  f.rowPanels[0] = rowKernel<1>;
  f.rowPanels[1] = rowKernel<2>;
  f.rowPanels[2] = rowKernel<3>;
  f.rowPanels[3] = rowKernel<4>;
  return f;
}

} // namespace
} // namespace tcc::rt
