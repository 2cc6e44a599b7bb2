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

/// The kernel body; the generator prepends the geometry as constants (see emitCudaAttention).
const char *const kAttentionBody = R"cpp(
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
// Copies rows [key0, key0 + BC) of a [lk, W] matrix into a stage buffer with rows of P
// elements (rows past lk zeroed).
template <int W, int P>
__device__ __forceinline__ void tcc_attn_load_rows(uint16_t *to, const uint16_t *from, long long key0,
                                                   long long lk, int tid) {
#pragma unroll
  for (int chunk = tid; chunk < BC * W / 8; chunk += 128) {
    const int j = chunk / (W / 8), d0 = chunk % (W / 8) * 8;
    if (key0 + j < lk)
      tcc_attn_copy8(to + j * P + d0, from + (key0 + j) * W + d0);
    else
      *(tcc_vec<uint32_t, 4> *)(to + j * P + d0) = tcc_vec<uint32_t, 4>{{0u, 0u, 0u, 0u}};
  }
}
// Issues the copies of key/value tile `tile` into stage buffers ks/vs, as one cp.async group.
__device__ __forceinline__ void tcc_attn_load_tile(uint16_t *ks, uint16_t *vs, const uint16_t *kb,
                                                   const uint16_t *vb, long long tile, long long lk,
                                                   int tid) {
  tcc_attn_load_rows<D, KP>(ks, kb, tile * BC, lk, tid);
  tcc_attn_load_rows<DV, VP>(vs, vb, tile * BC, lk, tid);
  tcc_attn_commit();
}
} // namespace

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
      tcc_attn_load_tile(smem, smem + BC * KP, kb, vb, 0, LK, tid);
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
        tcc_attn_load_tile(next, next + BC * KP, kb, vb, tile + 1, LK, tid);
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
                x += tcc_attn_float(bias[biasOffset + (long long)row * BIAS_ROW + (long long)key * BIAS_COL]) * LOG2E;
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
)cpp";

} // namespace

std::string tcc::codegen::cudaAttentionUnsupported(tk::AttentionOp op) {
  for (Value x : {op.getQ(), op.getK(), op.getV(), op.getOutput(), op.getMask(), op.getBias()}) {
    if (!x)
      continue;
    auto type = cast<MemRefType>(x.getType());
    if (!type.getLayout().isIdentity())
      return "the CUDA attention kernel needs contiguous buffers";
  }
  for (Value x : {op.getQ(), op.getK(), op.getV()})
    if (ShapedType::isDynamic(cast<MemRefType>(x.getType()).getShape().back()))
      return "the CUDA attention kernel needs static head dims";
  return cudaAttentionKernelRefusal(typeString(op.getQ().getType().getElementType()),
                                    op.getQ().getType().getShape().back(),
                                    op.getV().getType().getShape().back());
}

CudaKernel tcc::codegen::emitCudaAttention(tk::AttentionOp op, unsigned alignment) {
  std::string why = cudaAttentionUnsupported(op);
  if (!why.empty())
    throw Error("tk.attention: " + why);
  if (failed(op.verify()))
    throw Error("tk.attention: the op does not verify");
  // Symbolic programs: the sizes below are the largest over the ranges (index widths, the
  // grid); the kernel reads the run's batch and sequence lengths from the size symbols.
  auto module = op->getParentOfType<ModuleOp>();
  SymbolRanges ranges = module ? symbolRanges(module) : SymbolRanges{};
  auto dims = [&](Value buffer, const char *what, SymShape &sym) {
    return codegen::detail::largestDims("tk.attention", buffer, what, ranges, sym);
  };
  SymShape qS, kS, vS, maskS, biasS;
  std::vector<int64_t> q = dims(op.getQ(), "query", qS), k = dims(op.getK(), "key", kS),
                       v = dims(op.getV(), "value", vS);
  bool symbolic = false;
  for (Value x : {op.getQ(), op.getK(), op.getV(), op.getOutput(), op.getMask(), op.getBias()})
    symbolic = symbolic || (x && !cast<MemRefType>(x.getType()).hasStaticShape());
  size_t rank = q.size();
  int64_t lq = q[rank - 2], lk = k[rank - 2], d = q[rank - 1], dv = v[rank - 1];
  int64_t batch = 1;
  SymExpr batchS(1);
  for (size_t i = 0; i + 2 < rank; ++i) {
    batch *= q[i];
    batchS *= qS[i];
  }
  Type et = cast<MemRefType>(op.getQ().getType()).getElementType();
  ScalarEmitter cuda(Target::Cuda);
  const double log2e = 1.4426950408889634;
  auto f32 = [&](double value) {
    return cuda.literal(FloatAttr::get(Float32Type::get(op->getContext()), value));
  };
  // A size as the kernel reads it: a literal, or an expression of the symbol locals.
  auto size = [&](const SymExpr &e) {
    std::optional<int64_t> c = e.constant();
    return c ? std::to_string(*c) + "LL" : "(long long)" + ScalarEmitter::sizeExpr(e);
  };

  // Batch offsets: the query batch index decomposed (last dim fastest) into the key/value
  // index (grouped heads share one) and the mask's and bias's broadcast offsets.
  SymShape maskStrides(rank, SymExpr(0)), biasStrides(rank, SymExpr(0));
  if (op.getMask()) {
    dims(op.getMask(), "mask", maskS);
    maskStrides = attentionBroadcastStrides(maskS);
  }
  if (op.getBias()) {
    dims(op.getBias(), "bias", biasS);
    biasStrides = attentionBroadcastStrides(biasS);
  }
  std::string offsets;
  SymExpr kvStride(1);
  for (size_t i = rank - 2; i-- > 0;) {
    std::optional<SymExpr> group = SymExpr::divideExactly(qS[i], kS[i]);
    if (!group)
      throw Error("tk.attention: query batch dim " + std::to_string(i) + " (" + qS[i].str() +
                  ") is not a multiple of the key's (" + kS[i].str() + ")");
    offsets += "index = rest % " + size(qS[i]) + "; rest /= " + size(qS[i]) + ";";
    offsets += " kvOffset += index / " + size(*group) + " * " + size(kvStride) + ";";
    if (maskStrides[i] != SymExpr(0))
      offsets += " maskOffset += index * " + size(maskStrides[i]) + ";";
    if (biasStrides[i] != SymExpr(0))
      offsets += " biasOffset += index * " + size(biasStrides[i]) + ";";
    offsets += " \\\n      ";
    kvStride *= kS[i];
  }
  offsets += "(void)rest; (void)index;";

  std::string storage = cuda.storageType(et);
  std::string params = "const " + storage + " *__restrict__ q, const " + storage +
                       " *__restrict__ k, const " + storage + " *__restrict__ v";
  if (op.getMask())
    params += ", const " + cuda.storageType(op.getMask().getType().getElementType()) +
              " *__restrict__ mask";
  if (op.getBias())
    params += ", const " + storage + " *__restrict__ bias";
  params += ", " + storage + " *__restrict__ out";
  if (symbolic)
    params += ", const int64_t *__restrict__ tcc_symbols";

  std::string desc;
  llvm::raw_string_ostream os(desc);
  os << "q" << codegen::detail::symList(qS) << " k" << codegen::detail::symList(kS) << " v"
     << codegen::detail::symList(vS) << " "
     << typeString(et) << " scale " << op.getScale().convertToDouble()
     << (op.getCausal() ? " causal" : "");
  if (op.getMask())
    os << " mask" << codegen::detail::symList(maskS) << " masked_value "
       << op.getMaskedValue().convertToDouble();
  if (op.getBias())
    os << " bias" << codegen::detail::symList(biasS);
  bool aligned = alignment >= 16;
  os << (aligned ? " aligned" : " unaligned");

  std::string defs;
  auto def = [&](const std::string &name, const std::string &value) {
    defs += "#define " + name + " " + value + "\n";
  };
  def("TCC_ATTN_BF16", et.isBF16() ? "1" : "0");
  def("TCC_ATTN_ALIGNED", aligned ? "1" : "0");
  def("TCC_ATTN_MASK", op.getMask() ? "1" : "0");
  def("TCC_ATTN_BIAS", op.getBias() ? "1" : "0");
  def("TCC_ATTN_PARAMS", params);
  def("TCC_ATTN_BATCH_OFFSETS", offsets);
  // The sizes, declared at the kernel's entry (TCC_ATTN_SIZES): constants, or the run's.
  std::string sizes = symbolic ? ScalarEmitter::symbolLocals(op->getParentOfType<func::FuncOp>(), "tcc_symbols") : "";
  sizes += std::string(symbolic ? "const" : "constexpr") + " long long BATCH = " + size(batchS) +
           ", LQ = " + size(qS[rank - 2]) + ", LK = " + size(kS[rank - 2]) + ";\n";
  sizes += std::string(symbolic ? "const" : "constexpr") + " long long MASK_ROW = " +
           size(maskStrides[rank - 2]) + ", MASK_COL = " + size(maskStrides[rank - 1]) +
           ", BIAS_ROW = " + size(biasStrides[rank - 2]) + ", BIAS_COL = " +
           size(biasStrides[rank - 1]) + ";\n";
  std::string sizesMacro;
  for (char c : sizes)
    sizesMacro += c == '\n' ? std::string(" \\\n  ") : std::string(1, c);
  def("TCC_ATTN_SIZES", sizesMacro);
  def("TCC_ATTN_SIZE", symbolic ? "const" : "constexpr");
  std::string body = "constexpr int D = " + std::to_string(d) + ", DV = " + std::to_string(dv) +
          ", BR = " + std::to_string(kRowsPerBlock) + ", BC = " + std::to_string(kKeysPerTile) +
          ";\n";
  // Row and key indices in 32 bits where they fit (64-bit compares cost two instructions).
  bool narrow = lq + 64 < (int64_t(1) << 31) && lk + 64 < (int64_t(1) << 31);
  body += std::string("typedef ") + (narrow ? "int" : "long long") + " KeyIndex;\n";
  // Two blocks per SM at least (up to 255 registers). Without a minimum, ptxas capped some
  // variants at 96-128 registers and spilled; with three, a d64 variant spilled on sm_80 at
  // 168. Head dims up to 64 use about 150-168 registers, so three blocks fit anyway.
  def("MIN_BLOCKS", "2");
  body += "constexpr bool CAUSAL = " + std::string(op.getCausal() ? "true" : "false") + ";\n";
  // The mask applies after the triangle: a finite masked_value where the mask is false also
  // replaces the triangle's -inf, so the keys above the diagonal count.
  bool skipAbove = op.getCausal() &&
                   (!op.getMask() || op.getMaskedValue().convertToDouble() == -INFINITY);
  body += "constexpr bool SKIP_ABOVE_DIAGONAL = " + std::string(skipAbove ? "true" : "false") +
          ";\n";
  body += "constexpr float LOG2E = " + f32(log2e) + ";\n";
  body += "#define SCALE_LOG2E " +
          f32(op.getScale().convertToDouble() * log2e) + "\n";
  body += "#define MASKED_VALUE_LOG2E " +
          f32(op.getMaskedValue().convertToDouble() * log2e) + "\n";

  std::string name = codegen::detail::hashName("attention", desc);
  def("TCC_ATTN_NAME", name);
  def("TCC_ATTN_IMPL", name + "_impl");

  CudaKernel kernel;
  kernel.name = name;
  // Sources are compiled together (NVRTC, the host emulation): the kernel's constants and
  // helpers live in a namespace of its own, its macros are undefined at its end.
  kernel.source = cuda.prelude() + "\n// tk.attention " + desc + "\n" + defs + "namespace " +
                  name + "_impl {\n" + body + kAttentionBody;
  kernel.strategy = "attention flash tile=64x64 stages=2";
  // Two stages of a tile of k and v, rows padded by 8 16-bit elements.
  kernel.launch.sharedBytes = (uint32_t)(2 * kKeysPerTile * ((d + 8) + (dv + 8)) * 2);
  int64_t items = batch * ((lq + kRowsPerBlock - 1) / kRowsPerBlock);
  kernel.launch.grid = {(uint32_t)std::clamp<int64_t>(items, 1, kMaxGrid), 1, 1};
  kernel.launch.block = {128, 1, 1};
  if (symbolic) {
    kernel.launch.gridWork =
        (batchS * SymExpr::ceilDiv(qS[rank - 2], SymExpr(kRowsPerBlock))).str();
    kernel.launch.workPerBlock = 1;
    kernel.launch.symbolsArgument = true;
  }
  return kernel;
}
