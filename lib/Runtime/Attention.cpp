//===- Attention.cpp - Fused scaled dot-product attention on the CPU ------------===//
#include "Attention.h"

#include "CpuMath.h"
#include "CpuMathAvx512.h"
#include "DType.h"
#include "IsaClones.h"
#include "Parallel.h"
#include "Program.h"
#include "Sgemm.h"
#include "tcc/Support/AttentionShapes.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tcc::rt {

namespace {

constexpr int64_t kBlockRows = 56;  // query rows per block (rounded up to the sgemm's tile rows)
constexpr int64_t kBlockCols = 512; // keys per score block (56 x 512 floats: 112 KiB, in L2)
// The row sums run in kLanes partial sums (every kLanes-th score), whatever the ISA: the same
// order, so the same result, on every variant.
constexpr int kLanes = 16;

/// The rounding of probabilities, dS and sums to bf16 (convertRange's conversion).
constexpr auto toBfloat16 = [](float x) { return floatToBfloat16(x); };


/// One block of score rows (row stride ld): applies the causal triangle (keys from keyEnd[r]
/// on), mask and bias, then the online softmax step: m (running max), l (running sum)
/// and corr (the factor the row's running output must be scaled by) are updated and the scores
/// replaced by their exponentials. keyEnd[r]: first masked key of row r (cols when none).
struct ScoreBlock {
  float *s;
  int64_t rows, cols, ld;
  const int64_t *keyEnd;
  const bool *mask;       // row 0's first key; null when none
  int64_t maskRow, maskCol;
  const float *bias;
  int64_t biasRow, biasCol;
  float maskedValue;
  float *m, *l, *corr;
};

/// Row r of the block: the causal triangle, the mask and the bias applied to its scores.
TCC_ISA_BODY void maskScoreRow(const ScoreBlock &b, int64_t r, float *s) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t j = b.keyEnd[r]; j < b.cols; ++j)
    s[j] = -inf;
  if (b.mask) {
    const bool *mrow = b.mask + r * b.maskRow;
    if (b.maskCol)
      for (int64_t j = 0; j < b.cols; ++j)
        s[j] = mrow[j] ? s[j] : b.maskedValue;
    else if (!mrow[0])
      for (int64_t j = 0; j < b.cols; ++j)
        s[j] = b.maskedValue;
  }
  if (b.bias) {
    const float *brow = b.bias + r * b.biasRow;
    if (b.biasCol)
      for (int64_t j = 0; j < b.cols; ++j)
        s[j] += brow[j];
    else
      for (int64_t j = 0; j < b.cols; ++j)
        s[j] += brow[0];
  }
}

/// Folds N lanes (a power of 2) with `op` in halves: lane i with lane i + N/2, and so on. A
/// fixed order (so the same sum on every ISA) whose depth is log2(N), not N: rows of 128 keys
/// had spent more time in the two folds, one dependent operation a lane, than in their exps.
template <int N, class Op> TCC_ISA_BODY float foldLanes(float *lanes, Op op) {
  static_assert((N & (N - 1)) == 0, "a power of 2");
#pragma GCC unroll 8
  for (int half = N / 2; half >= 1; half /= 2)
#pragma GCC unroll 16
    for (int t = 0; t < half; ++t)
      lanes[t] = op(lanes[t], lanes[t + half]);
  return lanes[0];
}

/// exp(x - shift) of one register of lanes at a time, into x and added to lanes[]: with
/// Nonpositive (a finite shift, the row's maximum: x - shift <= 0) by tcc_exp_nonpositive, bit
/// for bit tcc_expf's result in fewer instructions.
template <int L, bool Nonpositive>
TCC_ISA_BODY void expAndSum(float *x, float shift, float *lanes) {
  using cpumath::tcc_expf, cpumath::tcc_exp_nonpositive;
  for (int h = 0; h < kLanes; h += L) // one register of lanes at a time: vectorised
    for (int t = h; t < h + L; ++t) {
      float e = Nonpositive ? tcc_exp_nonpositive(x[t] - shift) : tcc_expf(x[t] - shift);
      x[t] = e;
      lanes[t] += e;
    }
}

/// The exponentials of a row's scores less `shift`, in place; returns their sum, in kLanes
/// partial sums (a row's last keys padded with -inf, whose exp is 0) folded in halves.
template <int L, bool Nonpositive> TCC_ISA_BODY float expRow(float *s, int64_t cols, float shift) {
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes)
    expAndSum<L, Nonpositive>(s + j, shift, lanes);
  if (j < cols) {
    float tail[kLanes];
    for (int t = 0; t < kLanes; ++t)
      tail[t] = j + t < cols ? s[j + t] : -std::numeric_limits<float>::infinity();
    expAndSum<L, Nonpositive>(tail, shift, lanes);
    std::copy(tail, tail + (cols - j), s + j);
  }
  return foldLanes<kLanes>(lanes, [](float x, float y) { return x + y; });
}

/// expRow<16, true> on AVX-512 (expNonpositiveVectors, four vectors a step): the same
/// exponentials and the same sums (each 16 scores added to the 16 partial sums in turn, the
/// row's last ones padded with -inf, the lanes folded in halves); out of line, a call a row.
/// Whisper's encoder (1500 keys): its softmax blocks went from 6% of the model to 4% on a
/// Zen 5.
[[gnu::target("avx512f")]] float expRowAvx512(float *s, int64_t cols, float shift) {
  constexpr int U = 4;
  const __m512 by = _mm512_set1_ps(shift);
  __m512 lanes = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 * U <= cols; j += 16 * U) {
    __m512 x[U];
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u)
      x[u] = _mm512_sub_ps(_mm512_loadu_ps(s + j + 16 * u), by);
    expNonpositiveVectors<U>(x);
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      _mm512_storeu_ps(s + j + 16 * u, x[u]);
      lanes = _mm512_add_ps(lanes, x[u]);
    }
  }
  for (; j < cols; j += 16) {
    const __mmask16 m =
        cols - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (cols - j)) - 1);
    const __m512 padded = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 x[1] = {_mm512_sub_ps(_mm512_mask_loadu_ps(padded, m, s + j), by)};
    expNonpositiveVectors<1>(x);
    _mm512_mask_storeu_ps(s + j, m, x[0]);
    lanes = _mm512_add_ps(lanes, x[0]);
  }
  float sums[kLanes];
  _mm512_storeu_ps(sums, lanes);
  return foldLanes<kLanes>(sums, [](float x, float y) { return x + y; });
}

template <class V> TCC_ISA_BODY void softmaxBlockBody(const ScoreBlock *bp) {
  constexpr int L = sizeof(V) / sizeof(float); // the ISA's register (TCC_ISA_CLONES_VECTOR)
  using cpumath::tcc_expf;
  const ScoreBlock &b = *bp;
  const float inf = std::numeric_limits<float>::infinity();
  // Rows in groups of kLanes: each group's corrections exp(m - shift) are one vector of exps
  // after its rows (one scalar exp a row, a chain of dependent operations, had cost 10% of
  // 128-key attention).
  for (int64_t r0 = 0; r0 < b.rows; r0 += kLanes) {
    const int64_t group = std::min<int64_t>(kLanes, b.rows - r0);
    float arg[kLanes] = {}, sums[kLanes] = {}, corr[kLanes];
    for (int64_t i = 0; i < group; ++i) {
      const int64_t r = r0 + i;
      float *s = b.s + r * b.ld;
      maskScoreRow(b, r, s);
      // Row maximum in L independent lanes (a vector of them: GCC's vectoriser leaves a max
      // reduction over floats scalar without -ffast-math; this needs no reassociation).
      V most = {};
      most -= inf;
      int64_t j = 0;
      for (; j + L <= b.cols; j += L) {
        V x;
        __builtin_memcpy(&x, s + j, sizeof x);
        most = x > most ? x : most;
      }
      float mx = b.m[r];
      for (; j < b.cols; ++j)
        mx = s[j] > mx ? s[j] : mx;
      float lanesMax[L];
      __builtin_memcpy(lanesMax, &most, sizeof most);
      mx = std::max(mx, foldLanes<L>(lanesMax, [](float x, float y) { return y > x ? y : x; }));
      // The reference softmax shifts by the maximum only when it is finite.
      const bool finite = std::isfinite(mx);
      const float shift = finite ? mx : 0.0f;
      if constexpr (L == 16)
        sums[i] = finite ? expRowAvx512(s, b.cols, shift) : expRow<L, false>(s, b.cols, shift);
      else
        sums[i] =
            finite ? expRow<L, true>(s, b.cols, shift) : expRow<L, false>(s, b.cols, shift);
      arg[i] = b.m[r] - shift;
      b.m[r] = mx;
    }
    // m = -inf before any finite score: arg = -inf (shift is finite), whose exp is 0 (nothing
    // accumulated yet).
    for (int t = 0; t < kLanes; ++t) // vectorised
      corr[t] = tcc_expf(arg[t]);
    for (int64_t i = 0; i < group; ++i) {
      b.corr[r0 + i] = corr[i];
      b.l[r0 + i] = b.l[r0 + i] * corr[i] + sums[i];
    }
  }
}
TCC_ISA_CLONES_VECTOR(softmaxBlock, softmaxBlockBody)

/// One block of the backward pass (rows x cols, row stride scores.ld). On entry scores.s holds
/// scale q k^T and dp holds dO v^T; on return s holds the probabilities, recomputed from the
/// forward's row statistics (exp(s - shift) / sum, the forward's own softmax), and dp holds
/// scale * dS = scale * p (dp - rowDot), 0 where the triangle or the mask replaced the score.
struct GradBlock {
  ScoreBlock scores;
  float *dp;
  const float *shift, *sum, *rowDot; // per row of the block
  float scale;
};

template <class V> TCC_ISA_BODY void gradBlockBody(const GradBlock *gp) {
  using cpumath::tcc_expf;
  const GradBlock &g = *gp;
  const ScoreBlock &b = g.scores;
  for (int64_t r = 0; r < b.rows; ++r) {
    float *s = b.s + r * b.ld, *dp = g.dp + r * b.ld;
    maskScoreRow(b, r, s);
    const float shift = g.shift[r], sum = g.sum[r], dot = g.rowDot[r];
    for (int64_t j = 0; j < b.cols; ++j) {
      float p = tcc_expf(s[j] - shift) / sum;
      s[j] = p;
      dp[j] = g.scale * (p * (dp[j] - dot));
    }
    // The replaced scores do not depend on q or k.
    for (int64_t j = b.keyEnd[r]; j < b.cols; ++j)
      dp[j] = 0;
    if (b.mask) {
      const bool *mrow = b.mask + r * b.maskRow;
      if (b.maskCol)
        for (int64_t j = 0; j < b.keyEnd[r]; ++j)
          dp[j] = mrow[j] ? dp[j] : 0.0f;
      else if (!mrow[0])
        std::fill(dp, dp + b.cols, 0.0f);
    }
  }
}
TCC_ISA_CLONES_VECTOR(gradBlock, gradBlockBody)

/// Packing and products of attention's element type: f32 on the sgemm, bf16 on libtccrt's
/// 16-bit GEMM (AMX, AVX512-BF16 or converted panels) with f32 sums. Operands are row-major with
/// the row stride of their width (A: k; B: ldb), as attention's blocks are.
struct ElementProducts {
  bool bf16;
  SgemmIsa isa;
  explicit ElementProducts(bool bf16)
      : bf16(bf16), isa(bf16 ? gemm16Isa(Half16::BF16) : sgemmIsa()) {}
  const char *at(const void *base, int64_t offset) const {
    return static_cast<const char *>(base) + offset * (bf16 ? sizeof(uint16_t) : sizeof(float));
  }
  SgemmPacked packA(int64_t m, int64_t k, const void *a) const {
    SgemmPacked p =
        bf16 ? packGemm16A(Half16::BF16, false, m, k, static_cast<const uint16_t *>(a), k)
             : packSgemmA(isa, false, m, k, static_cast<const float *>(a), k);
    p.inCache = true;
    return p;
  }
  SgemmPacked packB(bool transB, int64_t k, int64_t n, const void *b, int64_t ldb) const {
    SgemmPacked p = bf16 ? packGemm16B(Half16::BF16, transB, k, n,
                                       static_cast<const uint16_t *>(b), ldb)
                         : packSgemmB(isa, transB, k, n, static_cast<const float *>(b), ldb);
    p.inCache = true;
    return p;
  }
  /// C (f32) = alpha op(A) op(B) + beta C, on one thread.
  void product(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
               const void *a, int64_t lda, const void *b, int64_t ldb, float beta, float *c,
               int64_t ldc, const SgemmPacked *pa, const SgemmPacked *pb) const {
    if (bf16)
      gemm16(Half16::BF16, transA, transB, m, n, k, alpha, static_cast<const uint16_t *>(a), lda,
             static_cast<const uint16_t *>(b), ldb, beta, c, ldc, 1, pa, pb);
    else
      sgemm(transA, transB, m, n, k, alpha, static_cast<const float *>(a), lda,
            static_cast<const float *>(b), ldb, beta, c, ldc, 1, pa, pb);
  }
};

/// Where query batch `batch` reads its keys and values, and its mask and bias offsets.
struct BatchOffsets {
  int64_t kvBatch = 0, mask = 0, bias = 0;
};
BatchOffsets batchOffsets(const AttentionGeometry &g, int64_t batch) {
  BatchOffsets o;
  int64_t rest = batch, stride = 1;
  for (size_t dim = g.qBatch.size(); dim-- > 0;) {
    int64_t index = rest % g.qBatch[dim];
    rest /= g.qBatch[dim];
    o.kvBatch += index / (g.qBatch[dim] / g.kvBatch[dim]) * stride;
    stride *= g.kvBatch[dim];
    o.mask += index * g.maskStrides[dim];
    o.bias += index * g.biasStrides[dim];
  }
  return o;
}

/// The score block of rows [i0, i0 + rows) and keys [j0, j0 + cols) of query batch offsets `o`:
/// its causal key ends (in keyEnd), mask and bias.
ScoreBlock scoreBlock(const AttentionGeometry &g, const BatchOffsets &o, const bool *mask,
                      const float *bias, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                      float *s, int64_t *keyEnd, float *m, float *l, float *corr) {
  for (int64_t r = 0; r < rows; ++r)
    keyEnd[r] = g.causal ? std::clamp<int64_t>(i0 + r + 1 - j0, 0, cols) : cols;
  ScoreBlock sb{s, rows, cols, cols, keyEnd, nullptr, 0, 0, nullptr, 0, 0,
                (float)g.maskedValue, m, l, corr};
  size_t rd = g.qBatch.size(), cd = rd + 1; // the scores' row and column dims
  if (g.hasMask) {
    sb.mask = mask + o.mask + i0 * g.maskStrides[rd] + j0 * g.maskStrides[cd];
    sb.maskRow = g.maskStrides[rd];
    sb.maskCol = g.maskStrides[cd];
  }
  if (g.hasBias) {
    sb.bias = bias + o.bias + i0 * g.biasStrides[rd] + j0 * g.biasStrides[cd];
    sb.biasRow = g.biasStrides[rd];
    sb.biasCol = g.biasStrides[cd];
  }
  return sb;
}

} // namespace

AttentionGeometry makeAttentionGeometry(const Shape &q, const Shape &k, const Shape &v,
                                        const Shape *mask, const Shape *bias, const Shape &output,
                                        double scale, bool causal, double maskedValue,
                                        bool bf16) {
  Shape out;
  std::string error = attentionShapeError(q, k, v, mask, bias, out);
  if (!error.empty())
    throw Error("attention: " + error);
  if (out != output)
    throw Error("attention: the output " + shapeString(TCCRT_F32, output) + " must be " +
                shapeString(TCCRT_F32, out));
  AttentionGeometry g;
  size_t r = q.size();
  g.qBatch.assign(q.begin(), q.end() - 2);
  g.kvBatch.assign(k.begin(), k.end() - 2);
  for (int64_t b : g.qBatch)
    g.batches *= b;
  g.lq = q[r - 2];
  g.d = q[r - 1];
  g.lk = k[r - 2];
  g.dv = v[r - 1];
  g.scale = scale;
  g.causal = causal;
  g.maskedValue = maskedValue;
  g.hasMask = mask != nullptr;
  g.hasBias = bias != nullptr;
  g.bf16 = bf16;
  g.skipAboveDiagonal = causal && !(g.hasMask && maskedValue > -HUGE_VAL);
  g.maskStrides = mask ? attentionBroadcastStrides(*mask) : Shape(r, 0);
  g.biasStrides = bias ? attentionBroadcastStrides(*bias) : Shape(r, 0);
  int64_t tile = sgemmTileRows(bf16 ? gemm16Isa(Half16::BF16) : sgemmIsa());
  g.blockRows = std::min((kBlockRows + tile - 1) / tile * tile, std::max<int64_t>(g.lq, 1));
  g.blockCols = std::min(kBlockCols, std::max<int64_t>(g.lk, 1));
  // Scores, running output, m, l and corr, then each row's key end.
  size_t floats = (size_t)(g.blockRows * g.blockCols + g.blockRows * g.dv + 3 * g.blockRows);
  g.workspaceBytes = (floats * sizeof(float) + 63) / 64 * 64 +
                     ((size_t)g.blockRows * sizeof(int64_t) + 63) / 64 * 64;
  if (bf16) // the probabilities rounded to bf16 for the second product
    g.workspaceBytes += ((size_t)(g.blockRows * g.blockCols) * sizeof(uint16_t) + 63) / 64 * 64;
  return g;
}

std::string attentionShapeText(const AttentionGeometry &g) {
  return std::to_string(g.batches) + " x " + std::to_string(g.lq) + "x" + std::to_string(g.lk) +
         ", head " + std::to_string(g.d) + (g.causal ? ", causal" : "") +
         (g.hasMask ? ", mask" : "") + (g.hasBias ? ", bias" : "");
}

void runAttention(const AttentionGeometry &g, const void *q, const void *k, const void *v,
                  const bool *mask, const float *bias, void *output, void *workspace,
                  int numThreads) {
  if (g.batches == 0 || g.lq == 0 || g.dv == 0)
    return;
  const size_t elem = g.bf16 ? sizeof(uint16_t) : sizeof(float);
  if (g.lk == 0) { // no keys: every row is the empty sum, as the decomposed product gives
    std::fill_n(static_cast<char *>(output), g.batches * g.lq * g.dv * elem, 0); // +0 in both
    return;
  }
  const ElementProducts e(g.bf16);
  // Work items: a batch's row blocks, in as many contiguous chunks as keep every thread busy.
  // An item packs the key and value blocks it reads once for all its row blocks.
  int64_t rowBlocks = (g.lq + g.blockRows - 1) / g.blockRows;
  int64_t chunks = std::clamp<int64_t>((2 * std::max(numThreads, 1) + g.batches - 1) / g.batches,
                                       1, rowBlocks);
  int64_t items = g.batches * chunks;
  const float inf = std::numeric_limits<float>::infinity();
  parallelItems(numThreads, items, [&](int64_t worker, int64_t item) {
    int64_t batch = item / chunks, chunk = item % chunks;
    int64_t firstBlock = rowBlocks * chunk / chunks, endBlock = rowBlocks * (chunk + 1) / chunks;
    const BatchOffsets offsets = batchOffsets(g, batch);
    const char *kb = e.at(k, offsets.kvBatch * g.lk * g.d),
               *vb = e.at(v, offsets.kvBatch * g.lk * g.dv);
    // Causal (without a finite fill): keys after the item's last row are never seen.
    int64_t lastRow = std::min(g.lq, endBlock * g.blockRows);
    int64_t itemKeys = g.skipAboveDiagonal ? std::min(g.lk, lastRow) : g.lk;
    std::vector<SgemmPacked> keyBlocks, valueBlocks;
    for (int64_t j0 = 0; j0 < itemKeys; j0 += g.blockCols) {
      int64_t cols = std::min(g.blockCols, itemKeys - j0);
      keyBlocks.push_back(e.packB(/*transB=*/true, g.d, cols, e.at(kb, j0 * g.d), g.d));
      valueBlocks.push_back(e.packB(false, cols, g.dv, e.at(vb, j0 * g.dv), g.dv));
    }
    char *own = static_cast<char *>(workspace) + worker * g.workspaceBytes;
    float *s = reinterpret_cast<float *>(own);
    float *o = s + g.blockRows * g.blockCols, *m = o + g.blockRows * g.dv, *l = m + g.blockRows,
          *corr = l + g.blockRows;
    int64_t *keyEnd = reinterpret_cast<int64_t *>(
        own + ((corr + g.blockRows - s) * sizeof(float) + 63) / 64 * 64);
    uint16_t *p16 = reinterpret_cast<uint16_t *>( // bf16: the probabilities, rounded
        reinterpret_cast<char *>(keyEnd) + ((size_t)g.blockRows * sizeof(int64_t) + 63) / 64 * 64);
    for (int64_t block = firstBlock; block < endBlock; ++block) {
      int64_t i0 = block * g.blockRows, rows = std::min(g.blockRows, g.lq - i0);
      std::fill(o, o + rows * g.dv, 0.0f);
      std::fill(m, m + rows, -inf);
      std::fill(l, l + rows, 0.0f);
      const char *qb = e.at(q, (batch * g.lq + i0) * g.d);
      SgemmPacked queries = e.packA(rows, g.d, qb);
      int64_t keys = g.skipAboveDiagonal ? std::min(g.lk, i0 + rows) : g.lk;
      for (int64_t j0 = 0, kbi = 0; j0 < keys; j0 += g.blockCols, ++kbi) {
        // A causal row block may stop inside the item's last key block: the sgemm then packs
        // that shorter block itself.
        int64_t cols = std::min(g.blockCols, keys - j0);
        e.product(false, true, rows, cols, g.d, (float)g.scale, qb, g.d, e.at(kb, j0 * g.d), g.d,
                  0.0f, s, cols, &queries,
                  keyBlocks[kbi].outer == cols ? &keyBlocks[kbi] : nullptr);
        ScoreBlock sb =
            scoreBlock(g, offsets, mask, bias, i0, rows, j0, cols, s, keyEnd, m, l, corr);
        softmaxBlock(&sb);
        for (int64_t r = 0; r < rows; ++r)
          if (corr[r] != 1.0f)
            for (int64_t c = 0; c < g.dv; ++c)
              o[r * g.dv + c] *= corr[r];
        const void *probs = s;
        if (g.bf16) {
          convertRange(s, p16, rows * cols, toBfloat16);
          probs = p16;
        }
        e.product(false, false, rows, g.dv, cols, 1.0f, probs, cols, e.at(vb, j0 * g.dv), g.dv,
                  1.0f, o, g.dv, nullptr,
                  valueBlocks[kbi].k == cols ? &valueBlocks[kbi] : nullptr);
      }
      const int64_t first = (batch * g.lq + i0) * g.dv;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < g.dv; ++c) {
          float value = o[r * g.dv + c] / l[r];
          if (g.bf16)
            static_cast<uint16_t *>(output)[first + r * g.dv + c] = floatToBfloat16(value);
          else
            static_cast<float *>(output)[first + r * g.dv + c] = value;
        }
    }
  });
}

namespace {

constexpr int64_t kGradBlockCols = 256; // keys per block of the backward pass

/// The backward pass's per-thread workspace: the byte offset of each array, and its size.
/// Scores and their gradient, m, l and corr (the statistics pass), each row's key end; bf16:
/// the probabilities and dS rounded for the products, and the row block's f32 dQ.
struct GradWorkspaceLayout {
  size_t s, dp, m, l, corr, keyEnd, p16 = 0, ds16 = 0, dq = 0, bytes;
};
GradWorkspaceLayout gradWorkspaceLayout(const AttentionGeometry &g) {
  auto align = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  const size_t block = (size_t)(g.blockRows * g.blockCols), rows = (size_t)g.blockRows;
  GradWorkspaceLayout w;
  w.s = 0;
  w.dp = w.s + block * sizeof(float);
  w.m = w.dp + block * sizeof(float);
  w.l = w.m + rows * sizeof(float);
  w.corr = w.l + rows * sizeof(float);
  w.keyEnd = align(w.corr + rows * sizeof(float));
  w.bytes = w.keyEnd + align(rows * sizeof(int64_t));
  if (g.bf16) {
    w.p16 = w.bytes;
    w.ds16 = w.p16 + block * sizeof(uint16_t);
    w.dq = align(w.ds16 + block * sizeof(uint16_t));
    w.bytes = w.dq + align(rows * (size_t)g.d * sizeof(float));
  }
  return w;
}

} // namespace

AttentionGeometry makeAttentionGradGeometry(const Shape &q, const Shape &k, const Shape &v,
                                            const Shape *mask, const Shape *bias,
                                            const Shape &output, double scale, bool causal,
                                            double maskedValue, bool bf16) {
  AttentionGeometry g =
      makeAttentionGeometry(q, k, v, mask, bias, output, scale, causal, maskedValue, bf16);
  g.blockCols = std::min(kGradBlockCols, std::max<int64_t>(g.lk, 1));
  g.workspaceBytes = gradWorkspaceLayout(g).bytes;
  return g;
}

void runAttentionBackward(const AttentionGeometry &g, const void *q, const void *k,
                          const void *v, const void *output, const void *gradOutput,
                          const bool *mask, const float *bias, void *gradQ, void *gradK,
                          void *gradV, void *workspace, int numThreads) {
  int64_t kvBatches = 1;
  for (int64_t b : g.kvBatch)
    kvBatches *= b;
  const size_t elem = g.bf16 ? sizeof(uint16_t) : sizeof(float);
  auto zero = [&](void *p, int64_t n) { std::fill_n(static_cast<char *>(p), n * elem, 0); };
  zero(gradK, kvBatches * g.lk * g.d);
  zero(gradV, kvBatches * g.lk * g.dv);
  zero(gradQ, g.batches * g.lq * g.d);
  if (g.batches == 0 || g.lq == 0 || g.lk == 0)
    return; // no scores: every gradient is the empty sum
  const ElementProducts e(g.bf16);
  auto value = [&](const void *base, int64_t i) {
    return g.bf16 ? bfloat16ToFloat(static_cast<const uint16_t *>(base)[i])
                  : static_cast<const float *>(base)[i];
  };
  auto store = [&](void *base, int64_t i, float x) {
    if (g.bf16)
      static_cast<uint16_t *>(base)[i] = floatToBfloat16(x);
    else
      static_cast<float *>(base)[i] = x;
  };
  const int64_t rowBlocks = (g.lq + g.blockRows - 1) / g.blockRows;
  const int64_t keyBlocks = (g.lk + g.blockCols - 1) / g.blockCols;
  struct Workspace {
    float *s, *dp, *m, *l, *corr, *dq;
    int64_t *keyEnd;
    uint16_t *p16, *ds16;
  };
  const GradWorkspaceLayout layout = gradWorkspaceLayout(g);
  auto own = [&](int64_t worker) {
    char *base = static_cast<char *>(workspace) + worker * g.workspaceBytes;
    auto f32 = [&](size_t offset) { return reinterpret_cast<float *>(base + offset); };
    auto u16 = [&](size_t offset) { return reinterpret_cast<uint16_t *>(base + offset); };
    return Workspace{f32(layout.s),
                     f32(layout.dp),
                     f32(layout.m),
                     f32(layout.l),
                     f32(layout.corr),
                     f32(layout.dq),
                     reinterpret_cast<int64_t *>(base + layout.keyEnd),
                     u16(layout.p16),
                     u16(layout.ds16)};
  };
  // Keys a row block sees: causal (without a finite fill) stops at its last row.
  auto keysOf = [&](int64_t i0, int64_t rows) {
    return g.skipAboveDiagonal ? std::min(g.lk, i0 + rows) : g.lk;
  };

  // 1. Each row's softmax statistics (the maximum it was shifted by and the sum of its
  //    exponentials) and rowDot = dO . O, which is the row's sum of p dP.
  std::vector<float> shift((size_t)(g.batches * g.lq)), sum(shift.size()), rowDot(shift.size());
  const float inf = std::numeric_limits<float>::infinity();
  parallelItems(numThreads, g.batches * rowBlocks, [&](int64_t worker, int64_t item) {
    const int64_t batch = item / rowBlocks, i0 = item % rowBlocks * g.blockRows;
    const int64_t rows = std::min(g.blockRows, g.lq - i0), first = batch * g.lq + i0;
    const BatchOffsets offsets = batchOffsets(g, batch);
    const char *kb = e.at(k, offsets.kvBatch * g.lk * g.d), *qb = e.at(q, first * g.d);
    Workspace w = own(worker);
    std::fill(w.m, w.m + rows, -inf);
    std::fill(w.l, w.l + rows, 0.0f);
    SgemmPacked queries = e.packA(rows, g.d, qb);
    for (int64_t j0 = 0, keys = keysOf(i0, rows); j0 < keys; j0 += g.blockCols) {
      int64_t cols = std::min(g.blockCols, keys - j0);
      e.product(false, true, rows, cols, g.d, (float)g.scale, qb, g.d, e.at(kb, j0 * g.d), g.d,
                0.0f, w.s, cols, &queries, nullptr);
      ScoreBlock sb = scoreBlock(g, offsets, mask, bias, i0, rows, j0, cols, w.s, w.keyEnd, w.m,
                                 w.l, w.corr);
      softmaxBlock(&sb);
    }
    for (int64_t r = 0; r < rows; ++r) {
      shift[first + r] = std::isfinite(w.m[r]) ? w.m[r] : 0.0f;
      sum[first + r] = w.l[r];
      float dot = 0;
      for (int64_t c = 0; c < g.dv; ++c)
        dot += value(gradOutput, (first + r) * g.dv + c) * value(output, (first + r) * g.dv + c);
      rowDot[first + r] = dot;
    }
  });

  // 2. Work items: a key/value batch with every query batch that reads it (grouped-query heads
  //    summed in one place), its keys in chunks when there are fewer such batches than threads.
  //    An item owns its keys' rows of dK and dV; dQ is written directly when an item has all
  //    the keys, else summed from one partial dQ per chunk, in chunk order. Sums are f32: in
  //    bf16 dK and dV are kept in f32 for the item and dQ for the row block, then rounded.
  std::vector<std::vector<int64_t>> readers((size_t)kvBatches);
  for (int64_t batch = 0; batch < g.batches; ++batch)
    readers[batchOffsets(g, batch).kvBatch].push_back(batch);
  const int64_t chunks =
      kvBatches >= numThreads
          ? 1
          : std::clamp<int64_t>((2 * std::max(numThreads, 1) + kvBatches - 1) / kvBatches, 1,
                                keyBlocks);
  std::vector<float> partialQ(chunks > 1 ? (size_t)(chunks * g.batches * g.lq * g.d) : 0);
  parallelItems(numThreads, kvBatches * chunks, [&](int64_t worker, int64_t item) {
    const int64_t kvBatch = item / chunks, chunk = item % chunks;
    const int64_t firstKeyBlock = keyBlocks * chunk / chunks,
                  endKeyBlock = keyBlocks * (chunk + 1) / chunks;
    const int64_t firstKey = firstKeyBlock * g.blockCols,
                  endKey = std::min(g.lk, endKeyBlock * g.blockCols);
    const char *kb = e.at(k, kvBatch * g.lk * g.d), *vb = e.at(v, kvBatch * g.lk * g.dv);
    // The item's dK and dV rows (from firstKey), in f32: the outputs' own rows in f32.
    std::vector<float> sums16(g.bf16 ? (size_t)((endKey - firstKey) * (g.d + g.dv)) : 0);
    float *dk = g.bf16 ? sums16.data()
                       : static_cast<float *>(gradK) + (kvBatch * g.lk + firstKey) * g.d;
    float *dv = g.bf16 ? sums16.data() + (endKey - firstKey) * g.d
                       : static_cast<float *>(gradV) + (kvBatch * g.lk + firstKey) * g.dv;
    // Each key block packed once for the item: k^T for the scores, v^T for dP, k for dQ.
    std::vector<SgemmPacked> keysT, valuesT, keysN;
    for (int64_t kbi = firstKeyBlock; kbi < endKeyBlock; ++kbi) {
      int64_t j0 = kbi * g.blockCols, cols = std::min(g.blockCols, g.lk - j0);
      keysT.push_back(e.packB(true, g.d, cols, e.at(kb, j0 * g.d), g.d));
      valuesT.push_back(e.packB(true, g.dv, cols, e.at(vb, j0 * g.dv), g.dv));
      keysN.push_back(e.packB(false, cols, g.d, e.at(kb, j0 * g.d), g.d));
    }
    Workspace w = own(worker);
    for (int64_t batch : readers[kvBatch]) {
      const BatchOffsets offsets = batchOffsets(g, batch);
      float *partial = chunks > 1 ? partialQ.data() + (chunk * g.batches + batch) * g.lq * g.d
                                  : nullptr;
      if (partial)
        std::fill_n(partial, g.lq * g.d, 0.0f);
      // Causal: rows before the chunk's first key see none of its keys.
      int64_t firstRowBlock = g.skipAboveDiagonal ? firstKey / g.blockRows : 0;
      for (int64_t rb = firstRowBlock; rb < rowBlocks; ++rb) {
        const int64_t i0 = rb * g.blockRows, rows = std::min(g.blockRows, g.lq - i0);
        const int64_t first = batch * g.lq + i0;
        const char *qb = e.at(q, first * g.d), *gob = e.at(gradOutput, first * g.dv);
        // dQ's rows: the partial sum, the output's rows (f32), or the block's f32 sums (bf16).
        float *dq = partial ? partial + i0 * g.d
                            : g.bf16 ? w.dq : static_cast<float *>(gradQ) + first * g.d;
        if (!partial && g.bf16)
          std::fill_n(dq, rows * g.d, 0.0f);
        // q and dO as the left operands of the scores and dP, and as the right operands of
        // dK and dV: packed once for all the item's key blocks.
        SgemmPacked queries = e.packA(rows, g.d, qb), grads = e.packA(rows, g.dv, gob);
        SgemmPacked queriesB = e.packB(false, rows, g.d, qb, g.d);
        SgemmPacked gradsB = e.packB(false, rows, g.dv, gob, g.dv);
        const int64_t keys = keysOf(i0, rows);
        for (int64_t kbi = firstKeyBlock; kbi < endKeyBlock; ++kbi) {
          const int64_t j0 = kbi * g.blockCols;
          if (j0 >= keys)
            break;
          const int64_t cols = std::min(g.blockCols, g.lk - j0), idx = kbi - firstKeyBlock;
          e.product(false, true, rows, cols, g.d, (float)g.scale, qb, g.d, e.at(kb, j0 * g.d), g.d,
                    0.0f, w.s, cols, &queries, &keysT[idx]);
          e.product(false, true, rows, cols, g.dv, 1.0f, gob, g.dv, e.at(vb, j0 * g.dv), g.dv, 0.0f,
                    w.dp, cols, &grads, &valuesT[idx]);
          GradBlock gb{scoreBlock(g, offsets, mask, bias, i0, rows, j0, cols, w.s, w.keyEnd,
                                  nullptr, nullptr, nullptr),
                       w.dp, shift.data() + first, sum.data() + first, rowDot.data() + first,
                       (float)g.scale};
          gradBlock(&gb);
          const void *p = w.s, *ds = w.dp;
          if (g.bf16) { // rounded for the 16-bit products, as FlashAttention does
            convertRange(w.s, w.p16, rows * cols, toBfloat16);
            convertRange(w.dp, w.ds16, rows * cols, toBfloat16);
            p = w.p16;
            ds = w.ds16;
          }
          // dV += p^T dO, dK += (scale dS)^T q, dQ += (scale dS) k.
          const int64_t key = j0 - firstKey;
          e.product(true, false, cols, g.dv, rows, 1.0f, p, cols, gob, g.dv, 1.0f, dv + key * g.dv,
                    g.dv, nullptr, &gradsB);
          e.product(true, false, cols, g.d, rows, 1.0f, ds, cols, qb, g.d, 1.0f, dk + key * g.d,
                    g.d, nullptr, &queriesB);
          e.product(false, false, rows, g.d, cols, 1.0f, ds, cols, e.at(kb, j0 * g.d), g.d, 1.0f,
                    dq, g.d, nullptr, &keysN[idx]);
        }
        if (!partial && g.bf16)
          convertRange(dq, static_cast<uint16_t *>(gradQ) + first * g.d, rows * g.d, toBfloat16);
      }
    }
    if (g.bf16) {
      convertRange(dk, static_cast<uint16_t *>(gradK) + (kvBatch * g.lk + firstKey) * g.d,
                   (endKey - firstKey) * g.d, toBfloat16);
      convertRange(dv, static_cast<uint16_t *>(gradV) + (kvBatch * g.lk + firstKey) * g.dv,
                   (endKey - firstKey) * g.dv, toBfloat16);
    }
  });
  if (chunks > 1) {
    const int64_t n = g.batches * g.lq * g.d;
    parallelFor(numThreads, n, 8 * chunks, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float total = 0;
        for (int64_t c = 0; c < chunks; ++c)
          total += partialQ[c * n + i];
        store(gradQ, i, total);
      }
    });
  }
}

} // namespace tcc::rt
