//===- CudaAttentionKernel.cpp - FlashAttention-2-style CUDA kernel for tk.attention -===//
//
// emitCudaAttention (CudaLibraryKernels.h): one generated kernel per attention geometry, for
// f16 and bf16 (f32 accumulation), head dims D = Dv in {16, 32, ..., 128}, on sm_80 and later.
//
// The algorithm is FlashAttention-2's forward pass:
//  * a block of 4 warps owns 64 query rows of one (batch..., head) slice, each warp 16 rows,
//    whose q fragments stay in registers for the whole pass (the A operands of S = q k^T);
//  * keys and values stream through shared memory in tiles of 64 rows, double-buffered: the
//    next tile's copies (cp.async, 16 bytes each) fly while this one is multiplied; rows are
//    padded by 8 elements, so the fragment loads (ldmatrix, four 8x8 matrices at a time;
//    transposing for v) hit 32 different banks;
//  * S = q k^T tile by tile on tensor cores (mma.sync m16n8k16, 16-bit inputs, f32
//    accumulators); scale, the causal triangle, the boolean mask and the additive bias are
//    applied to the accumulators in registers; the online softmax keeps each row's running
//    maximum and sum (the 4 threads sharing a row agree on the maximum through two shuffles;
//    the sums stay per thread until the end) and rescales the output accumulators;
//  * P (rounded to the input type, as FlashAttention does) is reused from the S accumulators
//    directly as the A operand of O += P v: the m16n8 accumulator layout of two neighbouring
//    n-tiles is exactly the m16k16 A layout;
//  * causal: key tiles wholly above the row block's diagonal are skipped (unless a finite
//    masked_value overrides the triangle there), and row blocks are dealt out longest first.
// Exponentials are exp2 (ex2.approx) of scores pre-multiplied by log2(e). A row whose scores are all -inf
// sums to 0 and gives 0/0 = NaN, as the op's definition (and a decomposed softmax) does; with
// no keys at all (Lk = 0) the result is 0.
//
// mma.sync, ldmatrix, cp.async and ex2 are inline PTX; tests compile the kernel for the host
// with a warp-level emulation of the same fragment layouts (test/support/CudaHostEmulation),
// selected by TCC_CUDA_EMULATION.
//
//===----------------------------------------------------------------------===//

#include "tcc/Codegen/CudaLibraryKernels.h"

#include "LibraryKernelUtils.h"

#include "tcc/Codegen/ScalarEmitter.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Support/AttentionShapes.h"
#include "tcc/Support/Tensor.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace tcc;
using namespace tcc::codegen;

namespace {

constexpr int64_t kRowsPerBlock = 64; // 4 warps x 16 rows (the kernel's BR)
constexpr int64_t kKeysPerTile = 64;  // keys of k and v per shared-memory stage (BC)
constexpr uint32_t kMaxGrid = 65535;

/// The kernels' shared helpers; the generator prepends the geometry as constants (see
/// emitCudaAttention).
const char *const kAttentionHelpers = R"cpp(
// Shared-memory address of a generic pointer (for the inline PTX below).
__device__ __forceinline__ uint32_t tcc_attn_smem_address(const void *p) {
#ifdef TCC_CUDA_EMULATION
  return 0;
#else
  return (uint32_t)__cvta_generic_to_shared(p);
#endif
}
// d += a b on tensor cores: m16n8k16, a 16x16 (row), b 16x8 (col), 16-bit inputs, f32 d.
__device__ __forceinline__ void tcc_mma16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
#ifdef TCC_CUDA_EMULATION
  tcc_emu_mma16816(d, a, b, TCC_ATTN_BF16);
#else
  asm volatile(
#if TCC_ATTN_BF16
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#else
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#endif
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
// Four 8x8 16-bit matrices of shared memory into fragments: lane l gives the address of row
// l % 8 of matrix l / 8 and receives, of each matrix i, r[i] = M_i[l / 4][2 (l % 4) ..+1]
// (transposed: M_i[2 (l % 4) ..+1][l / 4]).
template <bool TRANS>
__device__ __forceinline__ void tcc_ldmatrix_x4(uint32_t r[4], const uint16_t *row) {
#ifdef TCC_CUDA_EMULATION
  tcc_emu_ldmatrix_x4(r, row, TRANS);
#else
  if (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tcc_attn_smem_address(row)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tcc_attn_smem_address(row)));
#endif
}
// 2^x (ex2.approx: relative error 2^-22, far below the 16-bit rounding of P).
__device__ __forceinline__ float tcc_attn_exp2(float x) {
#ifdef TCC_CUDA_EMULATION
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}
// Eight consecutive 16-bit elements from global into 16-byte aligned shared memory,
// asynchronously where the source is 16-byte aligned (cp.async, waited for by
// tcc_attn_wait); element by element otherwise.
__device__ __forceinline__ void tcc_attn_copy8(uint16_t *to, const uint16_t *from) {
#if TCC_ATTN_ALIGNED && !defined(TCC_CUDA_EMULATION)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(tcc_attn_smem_address(to)), "l"(from));
#elif TCC_ATTN_ALIGNED
  *(tcc_vec<uint32_t, 4> *)to = *(const tcc_vec<uint32_t, 4> *)from;
#else
#pragma unroll
  for (int i = 0; i < 8; ++i)
    to[i] = from[i];
#endif
}
__device__ __forceinline__ void tcc_attn_commit() {
#ifndef TCC_CUDA_EMULATION
  asm volatile("cp.async.commit_group;");
#endif
}
// Waits until at most N groups of this thread's copies are in flight.
template <int N> __device__ __forceinline__ void tcc_attn_wait() {
#ifndef TCC_CUDA_EMULATION
  asm volatile("cp.async.wait_group %0;" :: "n"(N));
#endif
}
// Two floats rounded to the input type, `lo` in the low half (one cvt on the GPU).
__device__ __forceinline__ uint32_t tcc_attn_pack(float lo, float hi) {
#ifndef TCC_CUDA_EMULATION
  uint32_t r;
#if TCC_ATTN_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
#elif TCC_ATTN_BF16
  return (uint32_t)tcc_f32_to_bf16(lo) | ((uint32_t)tcc_f32_to_bf16(hi) << 16);
#else
  return (uint32_t)tcc_f32_to_f16(lo) | ((uint32_t)tcc_f32_to_f16(hi) << 16);
#endif
}
__device__ __forceinline__ float tcc_attn_float(uint16_t h) {
#if TCC_ATTN_BF16
  return tcc_bf16_to_f32(h);
#else
  return tcc_f16_to_f32(h);
#endif
}
// Two neighbouring 16-bit elements as one 32-bit word (the first in the low half), and back.
__device__ __forceinline__ uint32_t tcc_attn_pair(const uint16_t *p) {
#if TCC_ATTN_ALIGNED
  return *(const uint32_t *)p;
#else
  return (uint32_t)p[0] | ((uint32_t)p[1] << 16);
#endif
}
__device__ __forceinline__ void tcc_attn_store_pair(uint16_t *p, uint32_t w) {
#if TCC_ATTN_ALIGNED
  *(uint32_t *)p = w;
#else
  p[0] = (uint16_t)w;
  p[1] = (uint16_t)(w >> 16);
#endif
}
constexpr int KP = D + 8, VP = DV + 8; // padded rows: 16-byte aligned, no bank conflicts
// Copies rows [key0, key0 + ROWS) of a [lk, W] matrix into a buffer with rows of P elements
// (rows past lk zeroed).
template <int ROWS, int W, int P>
__device__ __forceinline__ void tcc_attn_load_rows(uint16_t *to, const uint16_t *from, long long key0,
                                                   long long lk, int tid) {
#pragma unroll
  for (int chunk = tid; chunk < ROWS * W / 8; chunk += 128) {
    const int j = chunk / (W / 8), d0 = chunk % (W / 8) * 8;
    if (key0 + j < lk)
      tcc_attn_copy8(to + j * P + d0, from + (key0 + j) * W + d0);
    else
      *(tcc_vec<uint32_t, 4> *)(to + j * P + d0) = tcc_vec<uint32_t, 4>{{0u, 0u, 0u, 0u}};
  }
}
// Issues the copies of rows [tile * ROWS, +ROWS) of a [lk, D] and (WITH_V) a [lk, DV] matrix
// into buffers ks/vs, as one cp.async group.
template <int ROWS, bool WITH_V = true>
__device__ __forceinline__ void tcc_attn_load_tile(uint16_t *ks, uint16_t *vs, const uint16_t *kb,
                                                   const uint16_t *vb, long long tile, long long lk,
                                                   int tid) {
  tcc_attn_load_rows<ROWS, D, KP>(ks, kb, tile * ROWS, lk, tid);
  if (WITH_V)
    tcc_attn_load_rows<ROWS, DV, VP>(vs, vb, tile * ROWS, lk, tid);
  tcc_attn_commit();
}
// The A fragment (m16k16) of rows [0, 16) and columns [0, 16) of a row-major 16-bit matrix in
// shared memory with rows of P elements: lane l addresses row l % 16, columns (l / 16) * 8.
template <int P>
__device__ __forceinline__ void tcc_attn_a_fragment(uint32_t a[4], const uint16_t *m, int lane) {
  tcc_ldmatrix_x4<false>(a, m + (lane % 16) * P + (lane / 16) * 8);
}
// acc[N / 8][4] += A B^T on tensor cores for one warp: A the 16 rows x K columns of a row-major
// matrix in shared memory with rows of PA elements, B the N rows x K columns of one with rows of
// PB elements (S = q k^T and dP = dO v^T of the backward pass, and their transposes).
template <int K, int N, int PA, int PB>
__device__ __forceinline__ void tcc_attn_mma_abt(float (*acc)[4], const uint16_t *a, const uint16_t *b,
                                                 int lane) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t af[4];
    tcc_attn_a_fragment<PA>(af, a + kk * 16, lane);
#pragma unroll
    for (int n = 0; n < N / 8; n += 2) {
      uint32_t r[4];
      tcc_ldmatrix_x4<false>(r, b + (n * 8 + (lane / 16) * 8 + lane % 8) * PB + (lane / 8 % 2) * 8 + kk * 16);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      tcc_mma16816(acc[n], af, b0);
      tcc_mma16816(acc[n + 1], af, b1);
    }
  }
}
// acc[N / 8][4] += P B for one warp: P the 16 x K values p[K / 8][4] in an m16n8 accumulator
// layout (an earlier product's, rounded to the input type: as neighbouring n-tiles they are the
// m16k16 A layout), B the K rows x N columns of a row-major matrix in shared memory with rows of
// PB elements, read by transposing loads.
template <int K, int N, int PB>
__device__ __forceinline__ void tcc_attn_mma_pb(float (*acc)[4], const float (*p)[4], const uint16_t *b,
                                                int lane) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const uint32_t pa[4] = {tcc_attn_pack(p[2 * kk][0], p[2 * kk][1]), tcc_attn_pack(p[2 * kk][2], p[2 * kk][3]),
                            tcc_attn_pack(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                            tcc_attn_pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
    const uint16_t *br = b + (kk * 16 + (lane / 8 % 2) * 8 + lane % 8) * PB + (lane / 16) * 8;
#pragma unroll
    for (int n = 0; n < N / 8; n += 2) {
      uint32_t r[4];
      tcc_ldmatrix_x4<true>(r, br + n * 8);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      tcc_mma16816(acc[n], pa, b0);
      tcc_mma16816(acc[n + 1], pa, b1);
    }
  }
}
// Reads one bias element as f32 (an f32 bias, or one in the input type).
__device__ __forceinline__ float tcc_attn_bias_value(const float *b, long long i) { return b[i]; }
__device__ __forceinline__ float tcc_attn_bias_value(const uint16_t *b, long long i) {
  return tcc_attn_float(b[i]);
}
} // namespace

)cpp";

/// The forward kernel (after kAttentionHelpers).
const char *const kAttentionForward = R"cpp(
extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) TCC_ATTN_NAME(TCC_ATTN_PARAMS) {
  using namespace TCC_ATTN_IMPL;
  const float NEG_INF = -__int_as_float(0x7f800000);
  // Two stages of keys and values, row-major (dynamic shared memory: SHARED_BYTES).
  extern __shared__ __align__(16) unsigned char tcc_smem[];
  // Stage i: keys at smem + i * STAGE, values BC * KP elements after them.
  uint16_t *const smem = (uint16_t *)tcc_smem;
  constexpr int STAGE = BC * (KP + VP);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  // The sizes: constants, or (symbolic programs) the run's, from the size symbols.
  TCC_ATTN_SIZES
  TCC_ATTN_SIZE long long ROW_BLOCKS = (LQ + BR - 1) / BR;
  TCC_ATTN_SIZE long long KEY_TILES = (LK + BC - 1) / BC;
  for (long long item = blockIdx.x; item < BATCH * ROW_BLOCKS; item += gridDim.x) {
    const long long b = item % BATCH;
    const long long rb = CAUSAL ? ROW_BLOCKS - 1 - item / BATCH : item / BATCH;
    long long kvOffset = 0, maskOffset = 0, biasOffset = 0;
    {
      long long rest = b, index;
      TCC_ATTN_BATCH_OFFSETS
    }
    const uint16_t *qb = q + b * LQ * D, *kb = k + kvOffset * LK * D, *vb = v + kvOffset * LK * DV;
    const long long tiles = SKIP_ABOVE_DIAGONAL
                                ? ((rb + 1) * BR < LK ? (rb + 1) * BR + BC - 1 : LK + BC - 1) / BC
                                : KEY_TILES;
    if (tiles > 0) // stage 0 is free: the previous item's last tile ended with a barrier
      tcc_attn_load_tile<BC>(smem, smem + BC * KP, kb, vb, 0, LK, tid);
    const KeyIndex row0 = (KeyIndex)(rb * BR) + warp * 16 + g, row1 = row0 + 8; // this thread's two rows
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int c = kk * 16 + 2 * t;
      qf[kk][0] = row0 < LQ ? tcc_attn_pair(qb + (long long)row0 * D + c) : 0u;
      qf[kk][1] = row1 < LQ ? tcc_attn_pair(qb + (long long)row1 * D + c) : 0u;
      qf[kk][2] = row0 < LQ ? tcc_attn_pair(qb + (long long)row0 * D + c + 8) : 0u;
      qf[kk][3] = row1 < LQ ? tcc_attn_pair(qb + (long long)row1 * D + c + 8) : 0u;
    }
    float o[DV / 8][4];
#pragma unroll
    for (int n = 0; n < DV / 8; ++n)
      o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.f, l1 = 0.f;
    for (long long tile = 0; tile < tiles; ++tile) {
      if (tile + 1 < tiles) {
        uint16_t *next = smem + ((tile + 1) & 1) * STAGE;
        tcc_attn_load_tile<BC>(next, next + BC * KP, kb, vb, tile + 1, LK, tid);
        tcc_attn_wait<1>(); // this tile's copies are done, the next one's may fly
      } else {
        tcc_attn_wait<0>();
      }
      __syncthreads(); // every thread's copies of this tile are visible
      const uint16_t *ks = smem + (tile & 1) * STAGE, *vs = ks + BC * KP;
      const long long key0 = tile * BC;
      float s[BC / 8][4];
#pragma unroll
      for (int n = 0; n < BC / 8; ++n)
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
      // S = q k^T: lane l addresses row l % 8 of key block n + (l / 16), columns (l / 8 % 2) * 8.
#pragma unroll
      for (int n = 0; n < BC / 8; n += 2) {
        const uint16_t *kr = ks + (n * 8 + (lane / 16) * 8 + lane % 8) * KP + (lane / 8 % 2) * 8;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t r[4];
          tcc_ldmatrix_x4<false>(r, kr + kk * 16);
          const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
          tcc_mma16816(s[n], qf[kk], b0);
          tcc_mma16816(s[n + 1], qf[kk], b1);
        }
      }
      // Scores in the log2 domain, masked; each thread's row maxima. Most tiles need no
      // masking: every key real and, causal, none after the warp's first row (warp-uniform).
      float mx0 = NEG_INF, mx1 = NEG_INF;
      const bool plain = !TCC_ATTN_MASK && !TCC_ATTN_BIAS && key0 + BC <= LK &&
                         (!CAUSAL || key0 + BC - 1 <= rb * BR + warp * 16);
      // Plain tiles keep the raw products and fold the scale into the exponent's FMA (a
      // positive scale commutes with the maximum).
      const bool deferScale = plain && SCALE_LOG2E > 0.f;
      const float factor = deferScale ? SCALE_LOG2E : 1.f;
      if (plain) {
#pragma unroll
        for (int n = 0; n < BC / 8; ++n) {
          if (!deferScale) {
            s[n][0] *= SCALE_LOG2E;
            s[n][1] *= SCALE_LOG2E;
            s[n][2] *= SCALE_LOG2E;
            s[n][3] *= SCALE_LOG2E;
          }
          mx0 = fmaxf(mx0, fmaxf(s[n][0], s[n][1]));
          mx1 = fmaxf(mx1, fmaxf(s[n][2], s[n][3]));
        }
        if (deferScale) {
          mx0 *= SCALE_LOG2E;
          mx1 *= SCALE_LOG2E;
        }
      } else {
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const KeyIndex row = e < 2 ? row0 : row1;
            const KeyIndex key = (KeyIndex)key0 + n * 8 + 2 * t + (e & 1);
            float x = s[n][e] * SCALE_LOG2E;
            if (key >= LK) {
              x = NEG_INF; // not a key: left out entirely
            } else {
              if (CAUSAL && key > row)
                x = NEG_INF;
#if TCC_ATTN_MASK
              if (row < LQ && !mask[maskOffset + (long long)row * MASK_ROW + (long long)key * MASK_COL])
                x = MASKED_VALUE_LOG2E;
#endif
#if TCC_ATTN_BIAS
              if (row < LQ)
                x += tcc_attn_bias_value(bias, biasOffset + (long long)row * BIAS_ROW + (long long)key * BIAS_COL) * LOG2E;
#endif
            }
            s[n][e] = x;
            if (e < 2)
              mx0 = fmaxf(mx0, x);
            else
              mx1 = fmaxf(mx1, x);
          }
      }
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
      const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
      // Shift by the running maximum unless it is not finite (then nothing was seen yet).
      const float base0 = n0 == NEG_INF ? 0.f : n0, base1 = n1 == NEG_INF ? 0.f : n1;
      const float alpha0 = tcc_attn_exp2(m0 - base0), alpha1 = tcc_attn_exp2(m1 - base1);
      m0 = n0;
      m1 = n1;
      l0 *= alpha0;
      l1 *= alpha1;
#pragma unroll
      for (int n = 0; n < DV / 8; ++n) {
        o[n][0] *= alpha0;
        o[n][1] *= alpha0;
        o[n][2] *= alpha1;
        o[n][3] *= alpha1;
      }
      // O += P v: P from the score accumulators; v^T fragments by transposing loads, lane l
      // addressing key row kk * 16 + (l / 8 % 2) * 8 + l % 8 of value columns n + (l / 16).
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        float p[8];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          p[e] = tcc_attn_exp2(__fmaf_rn(s[2 * kk][e], factor, -(e < 2 ? base0 : base1)));
          p[4 + e] = tcc_attn_exp2(__fmaf_rn(s[2 * kk + 1][e], factor, -(e < 2 ? base0 : base1)));
        }
        l0 += p[0] + p[1] + p[4] + p[5];
        l1 += p[2] + p[3] + p[6] + p[7];
        const uint32_t pa[4] = {tcc_attn_pack(p[0], p[1]), tcc_attn_pack(p[2], p[3]),
                                tcc_attn_pack(p[4], p[5]), tcc_attn_pack(p[6], p[7])};
        const uint16_t *vr = vs + (kk * 16 + (lane / 8 % 2) * 8 + lane % 8) * VP + (lane / 16) * 8;
#pragma unroll
        for (int n = 0; n < DV / 8; n += 2) {
          uint32_t r[4];
          tcc_ldmatrix_x4<true>(r, vr + n * 8);
          const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
          tcc_mma16816(o[n], pa, b0);
          tcc_mma16816(o[n + 1], pa, b1);
        }
      }
      __syncthreads(); // every warp is done with this stage before it is refilled
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    // No keys: the empty sum, 0 (o is 0, and so is inv). Else o / l (0 / 0 = NaN for a row
    // masked entirely with -inf).
    const float inv0 = LK == 0 ? 0.f : 1.f / l0, inv1 = LK == 0 ? 0.f : 1.f / l1;
    uint16_t *ob = out + b * LQ * DV;
#pragma unroll
    for (int n = 0; n < DV / 8; ++n) {
      const int c = n * 8 + 2 * t;
      if (row0 < LQ)
        tcc_attn_store_pair(ob + (long long)row0 * DV + c, tcc_attn_pack(o[n][0] * inv0, o[n][1] * inv0));
      if (row1 < LQ)
        tcc_attn_store_pair(ob + (long long)row1 * DV + c, tcc_attn_pack(o[n][2] * inv1, o[n][3] * inv1));
    }
  }
}
)cpp";

/// The backward pass's shared piece (after kAttentionHelpers): a score in the log2 domain as
/// the forward computes it, and whether it depends on q k^T (not a key past LK, not above the
/// causal diagonal, not masked out: only those scores pass a gradient on to q and k).
const char *const kAttentionGradScore = R"cpp(
namespace TCC_ATTN_IMPL {
// maskAt/biasAt: the mask's and bias's offsets of element (row, key).
template <class Mask, class Bias>
__device__ __forceinline__ float tcc_attn_grad_score(float product, KeyIndex row, KeyIndex key,
                                                     long long lk, const Mask *mask,
                                                     long long maskAt, const Bias *bias,
                                                     long long biasAt, bool &live) {
  const float NEG_INF = -__int_as_float(0x7f800000);
  live = key < lk;
  if (!live)
    return NEG_INF;
  float x = product * SCALE_LOG2E;
  if (CAUSAL && key > row) {
    x = NEG_INF;
    live = false;
  }
#if TCC_ATTN_MASK
  if (!mask[maskAt]) {
    x = MASKED_VALUE_LOG2E;
    live = false;
  }
#endif
#if TCC_ATTN_BIAS
  x += tcc_attn_bias_value(bias, biasAt) * LOG2E;
#endif
  return x;
}
} // namespace
)cpp";

/// TCC_ATTN_SCORE(product, row, key, live): tcc_attn_grad_score with the kernel's mask, bias and
/// their offsets (maskOffset, biasOffset and the strides, locals of the kernel).
const char *const kAttentionGradScoreMacro = R"cpp(
#define TCC_ATTN_SCORE(product, row, key, live) \
  tcc_attn_grad_score(product, row, key, LK, TCC_ATTN_MASK_ARG, \
                      maskOffset + (long long)(row) * MASK_ROW + (long long)(key) * MASK_COL, \
                      TCC_ATTN_BIAS_ARG, \
                      biasOffset + (long long)(row) * BIAS_ROW + (long long)(key) * BIAS_COL, live)
)cpp";

/// The backward pass, part 1 (query-major; after kAttentionHelpers and kAttentionGradScore):
/// dQ, and each query row's log-sum-exp and dO.O for part 2 (the workspace).
const char *const kAttentionGradQuery = R"cpp(
extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) TCC_ATTN_NAME(TCC_ATTN_PARAMS) {
  using namespace TCC_ATTN_IMPL;
  const float NEG_INF = -__int_as_float(0x7f800000);
  // The block's q and dO rows, then two stages of keys and values (dynamic shared memory).
  extern __shared__ __align__(16) unsigned char tcc_smem[];
  uint16_t *const qs = (uint16_t *)tcc_smem, *const dos = qs + BR * KP, *const stages = dos + BR * VP;
  constexpr int STAGE = BC * (KP + VP);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  TCC_ATTN_SIZES
  TCC_ATTN_SIZE long long ROW_BLOCKS = (LQ + BR - 1) / BR;
  TCC_ATTN_SIZE long long KEY_TILES = (LK + BC - 1) / BC;
  for (long long item = blockIdx.x; item < BATCH * ROW_BLOCKS; item += gridDim.x) {
    const long long b = item % BATCH;
    const long long rb = CAUSAL ? ROW_BLOCKS - 1 - item / BATCH : item / BATCH;
    long long kvOffset = 0, maskOffset = 0, biasOffset = 0;
    {
      long long rest = b, index;
      TCC_ATTN_BATCH_OFFSETS
    }
    const uint16_t *kb = k + kvOffset * LK * D, *vb = v + kvOffset * LK * DV;
    const uint16_t *ob = out + b * LQ * DV, *gb = grad + b * LQ * DV;
    const long long tiles = SKIP_ABOVE_DIAGONAL
                                ? ((rb + 1) * BR < LK ? (rb + 1) * BR + BC - 1 : LK + BC - 1) / BC
                                : KEY_TILES;
    tcc_attn_load_rows<BR, D, KP>(qs, q + b * LQ * D, rb * BR, LQ, tid);
    tcc_attn_load_rows<BR, DV, VP>(dos, gb, rb * BR, LQ, tid);
    tcc_attn_commit();
    if (tiles == 0)
      tcc_attn_wait<0>(); // no keys: nothing reads the rows, but no copy may outlive the item
    const KeyIndex row0 = (KeyIndex)(rb * BR) + warp * 16 + g, row1 = row0 + 8;
    // delta = dO . O of this thread's two rows (the 4 threads of a row split its columns).
    float delta0 = 0.f, delta1 = 0.f;
    for (int c = 2 * t; c < DV; c += 8)
      for (int e = 0; e < 2; ++e) {
        if (row0 < LQ)
          delta0 += tcc_attn_float(gb[(long long)row0 * DV + c + e]) * tcc_attn_float(ob[(long long)row0 * DV + c + e]);
        if (row1 < LQ)
          delta1 += tcc_attn_float(gb[(long long)row1 * DV + c + e]) * tcc_attn_float(ob[(long long)row1 * DV + c + e]);
      }
    delta0 += __shfl_xor_sync(0xffffffffu, delta0, 1);
    delta0 += __shfl_xor_sync(0xffffffffu, delta0, 2);
    delta1 += __shfl_xor_sync(0xffffffffu, delta1, 1);
    delta1 += __shfl_xor_sync(0xffffffffu, delta1, 2);
    const uint16_t *qa = qs + warp * 16 * KP, *da = dos + warp * 16 * VP;
    // Pass 0 finds each row's softmax statistics (keys only); pass 1 computes dQ.
    float lse0 = 0.f, lse1 = 0.f;
    float dq[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;
    for (int pass = 0; pass < 2; ++pass) {
      float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.f, l1 = 0.f;
      if (tiles > 0) {
        if (pass == 0)
          tcc_attn_load_tile<BC, false>(stages, stages + BC * KP, kb, vb, 0, LK, tid);
        else
          tcc_attn_load_tile<BC>(stages, stages + BC * KP, kb, vb, 0, LK, tid);
      }
      for (long long tile = 0; tile < tiles; ++tile) {
        if (tile + 1 < tiles) {
          uint16_t *next = stages + ((tile + 1) & 1) * STAGE;
          if (pass == 0)
            tcc_attn_load_tile<BC, false>(next, next + BC * KP, kb, vb, tile + 1, LK, tid);
          else
            tcc_attn_load_tile<BC>(next, next + BC * KP, kb, vb, tile + 1, LK, tid);
          tcc_attn_wait<1>();
        } else {
          tcc_attn_wait<0>();
        }
        __syncthreads(); // this tile (and the block's rows) are visible
        const uint16_t *ks = stages + (tile & 1) * STAGE, *vs = ks + BC * KP;
        const long long key0 = tile * BC;
        float s[BC / 8][4];
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
          s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
        tcc_attn_mma_abt<D, BC, KP, KP>(s, qa, ks, lane); // S = q k^T
        if (pass == 0) {
          float x[BC / 8][4], mx0 = NEG_INF, mx1 = NEG_INF;
#pragma unroll
          for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const KeyIndex row = e < 2 ? row0 : row1;
              bool live;
              x[n][e] = row < LQ ? TCC_ATTN_SCORE(s[n][e], row, (KeyIndex)key0 + n * 8 + 2 * t + (e & 1), live) : NEG_INF;
              if (e < 2)
                mx0 = fmaxf(mx0, x[n][e]);
              else
                mx1 = fmaxf(mx1, x[n][e]);
            }
          mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
          mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
          mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
          mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
          const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
          const float base0 = n0 == NEG_INF ? 0.f : n0, base1 = n1 == NEG_INF ? 0.f : n1;
          l0 *= tcc_attn_exp2(m0 - base0);
          l1 *= tcc_attn_exp2(m1 - base1);
          m0 = n0;
          m1 = n1;
#pragma unroll
          for (int n = 0; n < BC / 8; ++n) {
            l0 += tcc_attn_exp2(x[n][0] - base0) + tcc_attn_exp2(x[n][1] - base0);
            l1 += tcc_attn_exp2(x[n][2] - base1) + tcc_attn_exp2(x[n][3] - base1);
          }
        } else {
          // dP = dO v^T; then dS = P (dP - delta) where the score depends on q k^T, else 0.
          float dp[BC / 8][4];
#pragma unroll
          for (int n = 0; n < BC / 8; ++n)
            dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.f;
          tcc_attn_mma_abt<DV, BC, VP, VP>(dp, da, vs, lane);
#pragma unroll
          for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const KeyIndex row = e < 2 ? row0 : row1;
              bool live = false;
              const float x = row < LQ ? TCC_ATTN_SCORE(s[n][e], row, (KeyIndex)key0 + n * 8 + 2 * t + (e & 1), live) : NEG_INF;
              const float p = tcc_attn_exp2(x - (e < 2 ? lse0 : lse1));
              s[n][e] = live ? p * (dp[n][e] - (e < 2 ? delta0 : delta1)) : 0.f;
            }
          tcc_attn_mma_pb<BC, D, KP>(dq, s, ks, lane); // dQ += dS k (dS from the accumulators)
        }
        __syncthreads(); // every warp is done with this stage before it is refilled
      }
      if (pass == 0) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
        l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
        l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
        l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
        // log2 of the softmax's denominator; -inf for a row without a finite score (its
        // probabilities are then NaN, as the definition's 0/0).
        lse0 = (m0 == NEG_INF ? 0.f : m0) + log2f(l0);
        lse1 = (m1 == NEG_INF ? 0.f : m1) + log2f(l1);
        if (t == 0 && row0 < LQ) {
          workspace[(b * LQ + row0) * 2] = lse0;
          workspace[(b * LQ + row0) * 2 + 1] = delta0;
        }
        if (t == 0 && row1 < LQ) {
          workspace[(b * LQ + row1) * 2] = lse1;
          workspace[(b * LQ + row1) * 2 + 1] = delta1;
        }
      }
    }
    uint16_t *dqb = grad_q + b * LQ * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int c = n * 8 + 2 * t;
      if (row0 < LQ)
        tcc_attn_store_pair(dqb + (long long)row0 * D + c, tcc_attn_pack(dq[n][0] * SCALE, dq[n][1] * SCALE));
      if (row1 < LQ)
        tcc_attn_store_pair(dqb + (long long)row1 * D + c, tcc_attn_pack(dq[n][2] * SCALE, dq[n][3] * SCALE));
    }
    __syncthreads(); // the next item refills the rows
  }
}
)cpp";

/// The backward pass, part 2 (key-major; after kAttentionHelpers and kAttentionGradScore): dK
/// and dV of a block of 64 keys, summed over every query head of its group and every query
/// tile, from part 1's log-sum-exp and dO.O.
const char *const kAttentionGradKeys = R"cpp(
extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) TCC_ATTN_NAME(TCC_ATTN_PARAMS) {
  using namespace TCC_ATTN_IMPL;
  // The block's keys and values, then two stages of q and dO rows (dynamic shared memory).
  extern __shared__ __align__(16) unsigned char tcc_smem[];
  uint16_t *const ks = (uint16_t *)tcc_smem, *const vs = ks + BK * KP, *const stages = vs + BK * VP;
  constexpr int STAGE = QT * (KP + VP);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  TCC_ATTN_SIZES
  TCC_ATTN_SIZE long long KEY_BLOCKS = (LK + BK - 1) / BK;
  TCC_ATTN_SIZE long long QUERY_TILES = (LQ + QT - 1) / QT;
  for (long long item = blockIdx.x; item < KV_BATCH * KEY_BLOCKS; item += gridDim.x) {
    const long long kvb = item % KV_BATCH, key0 = item / KV_BATCH * BK;
    // Query tiles wholly above the causal diagonal see none of these keys.
    const long long firstTile = SKIP_ABOVE_DIAGONAL ? key0 / QT : 0;
    const long long tilesPerHead = QUERY_TILES - firstTile, steps = GROUPS * tilesPerHead;
    // Step i: query head `i / tilesPerHead` of the group, tile firstTile + i % tilesPerHead.
    auto queryOf = [&](long long step, long long &b, long long &maskOffset, long long &biasOffset) {
      long long rest = kvb, group = step / tilesPerHead, index;
      b = 0;
      maskOffset = 0;
      biasOffset = 0;
      TCC_ATTN_GROUP_OFFSETS
      return firstTile + step % tilesPerHead;
    };
    auto loadStep = [&](long long step, uint16_t *to) {
      long long b, maskOffset, biasOffset;
      const long long tile = queryOf(step, b, maskOffset, biasOffset);
      tcc_attn_load_tile<QT>(to, to + QT * KP, q + b * LQ * D, grad + b * LQ * DV, tile, LQ, tid);
    };
    tcc_attn_load_rows<BK, D, KP>(ks, k + kvb * LK * D, key0, LK, tid);
    tcc_attn_load_rows<BK, DV, VP>(vs, v + kvb * LK * DV, key0, LK, tid);
    tcc_attn_commit();
    if (steps > 0)
      loadStep(0, stages);
    const KeyIndex keyA = (KeyIndex)key0 + warp * 16 + g, keyB = keyA + 8; // this thread's keys
    const uint16_t *ka = ks + warp * 16 * KP, *va = vs + warp * 16 * VP;
    float dk[D / 8][4], dv[DV / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = 0.f;
#pragma unroll
    for (int n = 0; n < DV / 8; ++n)
      dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.f;
    for (long long step = 0; step < steps; ++step) {
      if (step + 1 < steps) {
        loadStep(step + 1, stages + ((step + 1) & 1) * STAGE);
        tcc_attn_wait<1>();
      } else {
        tcc_attn_wait<0>();
      }
      __syncthreads();
      long long b, maskOffset, biasOffset;
      const long long row0 = queryOf(step, b, maskOffset, biasOffset) * QT;
      const uint16_t *qsT = stages + (step & 1) * STAGE, *dosT = qsT + QT * KP;
      // S^T = k q^T and dP^T = v dO^T for this warp's 16 keys and the tile's QT rows.
      float s[QT / 8][4], dp[QT / 8][4];
#pragma unroll
      for (int n = 0; n < QT / 8; ++n) {
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
        dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.f;
      }
      tcc_attn_mma_abt<D, QT, KP, KP>(s, ka, qsT, lane);
      tcc_attn_mma_abt<DV, QT, VP, VP>(dp, va, dosT, lane);
      // P^T and dS^T, element by element (rows past LQ and keys past LK contribute 0).
#pragma unroll
      for (int n = 0; n < QT / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const KeyIndex key = e < 2 ? keyA : keyB, row = (KeyIndex)row0 + n * 8 + 2 * t + (e & 1);
          float p = 0.f, ds = 0.f;
          if (row < LQ && key < LK) {
            bool live;
            const float x = TCC_ATTN_SCORE(s[n][e], row, key, live);
            const float *stats = workspace + (b * LQ + row) * 2;
            p = tcc_attn_exp2(x - stats[0]);
            ds = live ? p * (dp[n][e] - stats[1]) : 0.f;
          }
          s[n][e] = p;
          dp[n][e] = ds;
        }
      // dV += P^T dO and dK += dS^T q: A from the accumulators, B by transposing loads.
      tcc_attn_mma_pb<QT, DV, VP>(dv, s, dosT, lane);
      tcc_attn_mma_pb<QT, D, KP>(dk, dp, qsT, lane);
      __syncthreads(); // every warp is done with this stage before it is refilled
    }
    if (steps == 0)
      tcc_attn_wait<0>(); // the block's own rows (unused: no query sees these keys)
    uint16_t *dkb = grad_k + kvb * LK * D, *dvb = grad_v + kvb * LK * DV;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int c = n * 8 + 2 * t;
      if (keyA < LK)
        tcc_attn_store_pair(dkb + (long long)keyA * D + c, tcc_attn_pack(dk[n][0] * SCALE, dk[n][1] * SCALE));
      if (keyB < LK)
        tcc_attn_store_pair(dkb + (long long)keyB * D + c, tcc_attn_pack(dk[n][2] * SCALE, dk[n][3] * SCALE));
    }
#pragma unroll
    for (int n = 0; n < DV / 8; ++n) {
      const int c = n * 8 + 2 * t;
      if (keyA < LK)
        tcc_attn_store_pair(dvb + (long long)keyA * DV + c, tcc_attn_pack(dv[n][0], dv[n][1]));
      if (keyB < LK)
        tcc_attn_store_pair(dvb + (long long)keyB * DV + c, tcc_attn_pack(dv[n][2], dv[n][3]));
    }
    __syncthreads(); // the next item refills the keys
  }
}
)cpp";

/// Every kernel ends with these: kernels of one translation unit define them anew.
const char *const kAttentionUndefs = R"cpp(
#undef TCC_ATTN_IMPL
#undef TCC_ATTN_BF16
#undef TCC_ATTN_ALIGNED
#undef TCC_ATTN_MASK
#undef TCC_ATTN_BIAS
#undef TCC_ATTN_PARAMS
#undef TCC_ATTN_BATCH_OFFSETS
#undef TCC_ATTN_SIZES
#undef TCC_ATTN_SIZE
#undef TCC_ATTN_NAME
#undef SCALE_LOG2E
#undef MASKED_VALUE_LOG2E
#undef MIN_BLOCKS
#undef TCC_ATTN_GROUP_OFFSETS
#undef TCC_ATTN_MASK_ARG
#undef TCC_ATTN_BIAS_ARG
#undef TCC_ATTN_SCORE
#undef SCALE
)cpp";

} // namespace

namespace {

/// Why the generated kernels cannot run `op` (tk.attention or tk.attention_grad); empty when
/// they can.
template <class Op> std::string unsupported(Op op) {
  for (Value x : op->getOperands()) {
    auto type = cast<MemRefType>(x.getType());
    if (!type.getLayout().isIdentity())
      return "the CUDA attention kernels need contiguous buffers";
  }
  for (Value x : {op.getQ(), op.getK(), op.getV()})
    if (ShapedType::isDynamic(cast<MemRefType>(x.getType()).getShape().back()))
      return "the CUDA attention kernels need static head dims";
  if (op.getBias()) {
    Type bias = op.getBias().getType().getElementType();
    if (!bias.isF32() && bias != op.getQ().getType().getElementType())
      return "the CUDA attention kernels read the bias in f32 or in q's type";
  }
  return cudaAttentionKernelRefusal(typeString(op.getQ().getType().getElementType()),
                                    op.getQ().getType().getShape().back(),
                                    op.getV().getType().getShape().back());
}

/// What the forward and backward kernels of one attention share: its geometry as macros
/// (`defs`, before the kernel's namespace) and constants (`body`, inside it), described in
/// words (`desc`, hashed into the names).
struct AttentionGeometry {
  std::string defs, body, desc;
  std::string storage; // the 16-bit elements' storage type
  bool symbolic = false;
  int64_t batch = 1, kvBatch = 1, lq = 0, lk = 0, d = 0, dv = 0;
  SymExpr batchS{1}, kvBatchS{1}, lqS{0}, lkS{0};

  void def(const std::string &name, const std::string &value) {
    defs += "#define " + name + " " + value + "\n";
  }
};

template <class Op>
AttentionGeometry attentionGeometry(Op op, const std::string &opName, unsigned alignment) {
  std::string why = unsupported(op);
  if (!why.empty())
    throw Error(opName + ": " + why);
  if (failed(op.verify()))
    throw Error(opName + ": the op does not verify");
  // Symbolic programs: the sizes below are the largest over the ranges (index widths, the
  // grid); the kernels read the run's batch and sequence lengths from the size symbols.
  auto module = op->template getParentOfType<ModuleOp>();
  SymbolRanges ranges = module ? symbolRanges(module) : SymbolRanges{};
  auto dims = [&](Value buffer, const char *what, SymShape &sym) {
    return codegen::detail::largestDims(opName, buffer, what, ranges, sym);
  };
  AttentionGeometry g;
  SymShape qS, kS, vS, maskS, biasS;
  std::vector<int64_t> q = dims(op.getQ(), "query", qS), k = dims(op.getK(), "key", kS),
                       v = dims(op.getV(), "value", vS);
  for (Value x : op->getOperands())
    g.symbolic = g.symbolic || !cast<MemRefType>(x.getType()).hasStaticShape();
  size_t rank = q.size();
  g.lq = q[rank - 2];
  g.lk = k[rank - 2];
  g.d = q[rank - 1];
  g.dv = v[rank - 1];
  g.lqS = qS[rank - 2];
  g.lkS = kS[rank - 2];
  for (size_t i = 0; i + 2 < rank; ++i) {
    g.batch *= q[i];
    g.batchS *= qS[i];
    g.kvBatch *= k[i];
    g.kvBatchS *= kS[i];
  }
  Type et = cast<MemRefType>(op.getQ().getType()).getElementType();
  ScalarEmitter cuda(Target::Cuda);
  g.storage = cuda.storageType(et);
  const double log2e = 1.4426950408889634;
  auto f32 = [&](double value) {
    return cuda.literal(FloatAttr::get(Float32Type::get(op->getContext()), value));
  };
  // A size as the kernel reads it: a literal, or an expression of the symbol locals.
  auto size = [&](const SymExpr &e) {
    std::optional<int64_t> c = e.constant();
    return c ? std::to_string(*c) + "LL" : "(long long)" + ScalarEmitter::sizeExpr(e);
  };

  // Batch offsets. Query-major kernels: the query batch index `rest` decomposed (last dim
  // fastest) into the key/value index (grouped heads share one) and the mask's and bias's
  // broadcast offsets. Key-major kernels: the key/value batch index `rest` and the group's
  // query head `group` composed into the query batch index `b` and the same offsets.
  SymShape maskStrides(rank, SymExpr(0)), biasStrides(rank, SymExpr(0));
  if (op.getMask()) {
    dims(op.getMask(), "mask", maskS);
    maskStrides = attentionBroadcastStrides(maskS);
  }
  if (op.getBias()) {
    dims(op.getBias(), "bias", biasS);
    biasStrides = attentionBroadcastStrides(biasS);
  }
  std::string offsets, groupOffsets;
  SymExpr kvStride(1), qStride(1), groups(1);
  for (size_t i = rank - 2; i-- > 0;) {
    std::optional<SymExpr> group = SymExpr::divideExactly(qS[i], kS[i]);
    if (!group)
      throw Error(opName + ": query batch dim " + std::to_string(i) + " (" + qS[i].str() +
                  ") is not a multiple of the key's (" + kS[i].str() + ")");
    std::string broadcast;
    if (maskStrides[i] != SymExpr(0))
      broadcast += " maskOffset += index * " + size(maskStrides[i]) + ";";
    if (biasStrides[i] != SymExpr(0))
      broadcast += " biasOffset += index * " + size(biasStrides[i]) + ";";
    offsets += "index = rest % " + size(qS[i]) + "; rest /= " + size(qS[i]) + ";";
    offsets += " kvOffset += index / " + size(*group) + " * " + size(kvStride) + ";" + broadcast +
               " \\\n      ";
    groupOffsets += "index = rest % " + size(kS[i]) + " * " + size(*group) + " + group % " +
                    size(*group) + "; rest /= " + size(kS[i]) + "; group /= " + size(*group) +
                    "; b += index * " + size(qStride) + ";" + broadcast + " \\\n      ";
    kvStride *= kS[i];
    qStride *= qS[i];
    groups *= *group;
  }
  offsets += "(void)rest; (void)index;";
  groupOffsets += "(void)rest; (void)group; (void)index;";

  llvm::raw_string_ostream os(g.desc);
  os << "q" << codegen::detail::symList(qS) << " k" << codegen::detail::symList(kS) << " v"
     << codegen::detail::symList(vS) << " " << typeString(et) << " scale "
     << op.getScale().convertToDouble() << (op.getCausal() ? " causal" : "");
  if (op.getMask())
    os << " mask" << codegen::detail::symList(maskS) << " masked_value "
       << op.getMaskedValue().convertToDouble();
  if (op.getBias())
    os << " bias" << codegen::detail::symList(biasS)
       << (op.getBias().getType().getElementType().isF32() && !et.isF32() ? " f32" : "");
  bool aligned = alignment >= 16;
  os << (aligned ? " aligned" : " unaligned");

  g.def("TCC_ATTN_BF16", et.isBF16() ? "1" : "0");
  g.def("TCC_ATTN_ALIGNED", aligned ? "1" : "0");
  g.def("TCC_ATTN_MASK", op.getMask() ? "1" : "0");
  g.def("TCC_ATTN_BIAS", op.getBias() ? "1" : "0");
  g.def("TCC_ATTN_MASK_ARG", op.getMask() ? "mask" : "(const uint8_t *)nullptr");
  g.def("TCC_ATTN_BIAS_ARG", op.getBias() ? "bias" : "(const float *)nullptr");
  g.def("TCC_ATTN_BATCH_OFFSETS", offsets);
  g.def("TCC_ATTN_GROUP_OFFSETS", groupOffsets);
  // The sizes, declared at the kernel's entry (TCC_ATTN_SIZES): constants, or the run's.
  const char *constness = g.symbolic ? "const" : "constexpr";
  std::string sizes =
      g.symbolic
          ? ScalarEmitter::symbolLocals(op->template getParentOfType<func::FuncOp>(), "tcc_symbols")
          : "";
  sizes += std::string(constness) + " long long BATCH = " + size(g.batchS) +
           ", KV_BATCH = " + size(g.kvBatchS) + ", GROUPS = " + size(groups) +
           ", LQ = " + size(qS[rank - 2]) + ", LK = " + size(kS[rank - 2]) + ";\n";
  sizes += std::string(constness) + " long long MASK_ROW = " + size(maskStrides[rank - 2]) +
           ", MASK_COL = " + size(maskStrides[rank - 1]) + ", BIAS_ROW = " +
           size(biasStrides[rank - 2]) + ", BIAS_COL = " + size(biasStrides[rank - 1]) + ";\n";
  sizes += "(void)BATCH; (void)KV_BATCH; (void)GROUPS;\n";
  std::string sizesMacro;
  for (char c : sizes)
    sizesMacro += c == '\n' ? std::string(" \\\n  ") : std::string(1, c);
  g.def("TCC_ATTN_SIZES", sizesMacro);
  g.def("TCC_ATTN_SIZE", constness);
  g.body = "constexpr int D = " + std::to_string(g.d) + ", DV = " + std::to_string(g.dv) +
           ", BR = " + std::to_string(kRowsPerBlock) + ", BC = " +
           std::to_string(kKeysPerTile) + ";\n";
  // Row and key indices in 32 bits where they fit (64-bit compares cost two instructions).
  bool narrow = g.lq + 64 < (int64_t(1) << 31) && g.lk + 64 < (int64_t(1) << 31);
  g.body += std::string("typedef ") + (narrow ? "int" : "long long") + " KeyIndex;\n";
  // Two blocks per SM at least (up to 255 registers). Without a minimum, ptxas capped some
  // variants at 96-128 registers and spilled; with three, a d64 variant spilled on sm_80 at
  // 168. Head dims up to 64 use about 150-168 registers, so three blocks fit anyway.
  g.def("MIN_BLOCKS", "2");
  g.body += "constexpr bool CAUSAL = " + std::string(op.getCausal() ? "true" : "false") + ";\n";
  // The mask applies after the triangle: a finite masked_value where the mask is false also
  // replaces the triangle's -inf, so the keys above the diagonal count.
  bool skipAbove = op.getCausal() &&
                   (!op.getMask() || op.getMaskedValue().convertToDouble() == -INFINITY);
  g.body += "constexpr bool SKIP_ABOVE_DIAGONAL = " + std::string(skipAbove ? "true" : "false") +
            ";\n";
  g.body += "constexpr float LOG2E = " + f32(log2e) + ";\n";
  g.body += "#define SCALE " + f32(op.getScale().convertToDouble()) + "\n";
  g.body += "#define SCALE_LOG2E " + f32(op.getScale().convertToDouble() * log2e) + "\n";
  g.body += "#define MASKED_VALUE_LOG2E " +
            f32(op.getMaskedValue().convertToDouble() * log2e) + "\n";
  return g;
}

/// The kernel named `prefix`_<hash of the geometry> with `params`, made of the shared helpers
/// and `kernelCode` (each kernel's constants and helpers live in a namespace of its own, its
/// macros are undefined at its end: sources are compiled together by NVRTC and by the host
/// emulation).
CudaKernel attentionKernel(const AttentionGeometry &g, const char *prefix,
                           const std::string &params, const std::string &extraBody,
                           const std::string &kernelCode, const std::string &comment) {
  std::string name = codegen::detail::hashName(prefix, g.desc);
  std::string defs = g.defs + "#define TCC_ATTN_PARAMS " + params + "\n" +
                     "#define TCC_ATTN_NAME " + name + "\n" + "#define TCC_ATTN_IMPL " +
                     name + "_impl\n";
  CudaKernel kernel;
  kernel.name = name;
  kernel.source = ScalarEmitter(Target::Cuda).prelude() + "\n// " + comment + " " + g.desc +
                  "\n" + defs + "namespace " + name + "_impl {\n" + g.body + extraBody +
                  kAttentionHelpers + kernelCode + kAttentionUndefs;
  kernel.launch.block = {128, 1, 1};
  return kernel;
}

/// A pointer parameter list: "const T *__restrict__ name" per input, "T *__restrict__ name"
/// per output, and the size symbols of symbolic programs.
std::string parameterList(const std::vector<std::pair<std::string, std::string>> &inputs,
                          const std::vector<std::pair<std::string, std::string>> &outputs,
                          bool symbolic) {
  std::string params;
  auto add = [&](const std::string &text) { params += (params.empty() ? "" : ", ") + text; };
  for (const auto &in : inputs)
    add("const " + in.first + " *__restrict__ " + in.second);
  for (const auto &out : outputs)
    add(out.first + " *__restrict__ " + out.second);
  if (symbolic)
    add("const int64_t *__restrict__ tcc_symbols");
  return params;
}

/// The grid for `items` work items of one block each (grid-stride loops cover the rest).
void setGrid(CudaKernel &kernel, int64_t items, const AttentionGeometry &g,
             const SymExpr &itemsS) {
  kernel.launch.grid = {(uint32_t)std::clamp<int64_t>(items, 1, kMaxGrid), 1, 1};
  if (g.symbolic) {
    kernel.launch.gridWork = itemsS.str();
    kernel.launch.workPerBlock = 1;
    kernel.launch.symbolsArgument = true;
  }
}

} // namespace

std::string tcc::codegen::cudaAttentionUnsupported(tk::AttentionOp op) { return unsupported(op); }

CudaKernel tcc::codegen::emitCudaAttention(tk::AttentionOp op, unsigned alignment) {
  AttentionGeometry g = attentionGeometry(op, "tk.attention", alignment);
  ScalarEmitter cuda(Target::Cuda);
  std::vector<std::pair<std::string, std::string>> inputs = {
      {g.storage, "q"}, {g.storage, "k"}, {g.storage, "v"}};
  if (op.getMask())
    inputs.push_back({cuda.storageType(op.getMask().getType().getElementType()), "mask"});
  if (op.getBias())
    inputs.push_back({cuda.storageType(op.getBias().getType().getElementType()), "bias"});
  CudaKernel kernel = attentionKernel(g, "attention",
                                      parameterList(inputs, {{g.storage, "out"}}, g.symbolic), "",
                                      kAttentionForward, "tk.attention");
  kernel.strategy = "attention flash tile=64x64 stages=2";
  // Two stages of a tile of k and v, rows padded by 8 16-bit elements.
  kernel.launch.sharedBytes = (uint32_t)(2 * kKeysPerTile * ((g.d + 8) + (g.dv + 8)) * 2);
  setGrid(kernel, g.batch * ((g.lq + kRowsPerBlock - 1) / kRowsPerBlock), g,
          g.batchS * SymExpr::ceilDiv(g.lqS, SymExpr(kRowsPerBlock)));
  return kernel;
}

std::array<CudaKernel, 2> tcc::codegen::emitCudaAttentionGrad(tk::AttentionGradOp op,
                                                               unsigned alignment) {
  if (!op.getWorkspace())
    throw Error("tk.attention_grad: the CUDA attention gradient needs a workspace operand");
  AttentionGeometry g = attentionGeometry(op, "tk.attention_grad", alignment);
  ScalarEmitter cuda(Target::Cuda);
  // Both kernels take every operand of the op, in operand order.
  std::vector<std::pair<std::string, std::string>> inputs = {
      {g.storage, "q"}, {g.storage, "k"}, {g.storage, "v"}, {g.storage, "out"},
      {g.storage, "grad"}};
  if (op.getMask())
    inputs.push_back({cuda.storageType(op.getMask().getType().getElementType()), "mask"});
  if (op.getBias())
    inputs.push_back({cuda.storageType(op.getBias().getType().getElementType()), "bias"});
  std::string params = parameterList(
      inputs,
      {{g.storage, "grad_q"}, {g.storage, "grad_k"}, {g.storage, "grad_v"}, {"float", "workspace"}},
      g.symbolic);
  // Part 1: 64 query rows per block, as the forward; q and dO rows stay in shared memory.
  // Both parts read scores through the shared score helper.
  const std::string scores = std::string(kAttentionGradScore) + kAttentionGradScoreMacro;
  CudaKernel rows = attentionKernel(g, "attention_grad_q", params, "", scores + kAttentionGradQuery,
                                    "tk.attention_grad (dq, row statistics)");
  rows.strategy = "attention flash backward dq tile=64x64 stages=2";
  rows.launch.sharedBytes = (uint32_t)(kRowsPerBlock * ((g.d + 8) + (g.dv + 8)) * 2 +
                                       2 * kKeysPerTile * ((g.d + 8) + (g.dv + 8)) * 2);
  setGrid(rows, g.batch * ((g.lq + kRowsPerBlock - 1) / kRowsPerBlock), g,
          g.batchS * SymExpr::ceilDiv(g.lqS, SymExpr(kRowsPerBlock)));
  // Part 2: 64 keys per block; query tiles of 32 rows for head dims above 64 (the dK and dV
  // accumulators take 128 registers there).
  int64_t queryTile = std::max(g.d, g.dv) > 64 ? 32 : 64;
  std::string constants = "constexpr int BK = " + std::to_string(kRowsPerBlock) +
                          ", QT = " + std::to_string(queryTile) + ";\n";
  CudaKernel keys = attentionKernel(g, "attention_grad_kv", params, constants,
                                    scores + kAttentionGradKeys, "tk.attention_grad (dk, dv)");
  keys.strategy = "attention flash backward dkv keys=64 tile=" + std::to_string(queryTile) +
                  " stages=2";
  keys.launch.sharedBytes = (uint32_t)(kRowsPerBlock * ((g.d + 8) + (g.dv + 8)) * 2 +
                                       2 * queryTile * ((g.d + 8) + (g.dv + 8)) * 2);
  setGrid(keys, g.kvBatch * ((g.lk + kRowsPerBlock - 1) / kRowsPerBlock), g,
          g.kvBatchS * SymExpr::ceilDiv(g.lkS, SymExpr(kRowsPerBlock)));
  return {rows, keys};
}
