//===- Attention.cpp - Fused scaled dot-product attention on the CPU ------------===//
#include "Attention.h"

#include "CpuMath.h"
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

template <class V> TCC_ISA_BODY void softmaxBlockBody(const ScoreBlock *bp) {
  constexpr int L = sizeof(V) / sizeof(float); // the ISA's register (TCC_ISA_CLONES_VECTOR)
  using cpumath::tcc_expf;
  const ScoreBlock &b = *bp;
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < b.rows; ++r) {
    float *s = b.s + r * b.ld;
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
    for (int t = 0; t < L; ++t)
      mx = most[t] > mx ? most[t] : mx;
    // The reference softmax shifts by the maximum only when it is finite.
    float shift = std::isfinite(mx) ? mx : 0.0f;
    float c = tcc_expf(b.m[r] - shift);
    float lanes[kLanes] = {};
    j = 0;
    for (; j + kLanes <= b.cols; j += kLanes)
      for (int h = 0; h < kLanes; h += L) // one register of lanes at a time: vectorised
        for (int t = h; t < h + L; ++t) {
          float e = tcc_expf(s[j + t] - shift);
          s[j + t] = e;
          lanes[t] += e;
        }
    float sum = 0;
    for (; j < b.cols; ++j) {
      float e = tcc_expf(s[j] - shift);
      s[j] = e;
      sum += e;
    }
    for (int t = 0; t < kLanes; ++t)
      sum += lanes[t];
    // m = -inf before any finite score: exp(-inf - shift) = 0 (nothing accumulated yet).
    b.corr[r] = b.m[r] == -inf ? 0.0f : c;
    b.l[r] = b.l[r] * b.corr[r] + sum;
    b.m[r] = mx;
  }
}
TCC_ISA_CLONES_VECTOR(softmaxBlock, softmaxBlockBody)

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
  if (bf16 && g.hasBias)
    throw Error("attention: a bf16 attention takes no bias (its scores are f32)");
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
  // The element type's packing and products: f32 sgemm, or bf16 gemm16 with f32 sums.
  const SgemmIsa isa = g.bf16 ? gemm16Isa(Half16::BF16) : sgemmIsa();
  auto at = [&](const void *base, int64_t offset) {
    return static_cast<const char *>(base) + offset * elem;
  };
  auto packA = [&](int64_t m, int64_t kk, const void *a) {
    return g.bf16 ? packGemm16A(Half16::BF16, false, m, kk, static_cast<const uint16_t *>(a), kk)
                  : packSgemmA(isa, false, m, kk, static_cast<const float *>(a), kk);
  };
  auto packB = [&](bool transB, int64_t kk, int64_t n, const void *b, int64_t ldb) {
    return g.bf16 ? packGemm16B(Half16::BF16, transB, kk, n, static_cast<const uint16_t *>(b), ldb)
                  : packSgemmB(isa, transB, kk, n, static_cast<const float *>(b), ldb);
  };
  auto product = [&](bool transB, int64_t m, int64_t n, int64_t kk, float alpha, const void *a,
                     int64_t lda, const void *b, int64_t ldb, float beta, float *c, int64_t ldc,
                     const SgemmPacked *pa, const SgemmPacked *pb) {
    if (g.bf16)
      gemm16(Half16::BF16, false, transB, m, n, kk, alpha, static_cast<const uint16_t *>(a), lda,
             static_cast<const uint16_t *>(b), ldb, beta, c, ldc, 1, pa, pb);
    else
      sgemm(false, transB, m, n, kk, alpha, static_cast<const float *>(a), lda,
            static_cast<const float *>(b), ldb, beta, c, ldc, 1, pa, pb);
  };
  // Work items: a batch's row blocks, in as many contiguous chunks as keep every thread busy.
  // An item packs the key and value blocks it reads once for all its row blocks.
  int64_t rowBlocks = (g.lq + g.blockRows - 1) / g.blockRows;
  int64_t chunks = std::clamp<int64_t>((2 * std::max(numThreads, 1) + g.batches - 1) / g.batches,
                                       1, rowBlocks);
  int64_t items = g.batches * chunks;
  size_t nb = g.qBatch.size(), rd = nb, cd = nb + 1; // the scores' row and column dims
  const float inf = std::numeric_limits<float>::infinity();
  parallelItems(numThreads, items, [&](int64_t worker, int64_t item) {
    int64_t batch = item / chunks, chunk = item % chunks;
    int64_t firstBlock = rowBlocks * chunk / chunks, endBlock = rowBlocks * (chunk + 1) / chunks;
    // The key/value batch this query batch reads, and the mask/bias offsets of its scores.
    int64_t kvBatch = 0, maskBase = 0, biasBase = 0, rest = batch;
    int64_t stride = 1;
    for (size_t dim = nb; dim-- > 0;) {
      int64_t index = rest % g.qBatch[dim];
      rest /= g.qBatch[dim];
      kvBatch += index / (g.qBatch[dim] / g.kvBatch[dim]) * stride;
      stride *= g.kvBatch[dim];
      maskBase += index * g.maskStrides[dim];
      biasBase += index * g.biasStrides[dim];
    }
    const char *kb = at(k, kvBatch * g.lk * g.d), *vb = at(v, kvBatch * g.lk * g.dv);
    // Causal (without a finite fill): keys after the item's last row are never seen.
    int64_t lastRow = std::min(g.lq, endBlock * g.blockRows);
    int64_t itemKeys = g.skipAboveDiagonal ? std::min(g.lk, lastRow) : g.lk;
    std::vector<SgemmPacked> keyBlocks, valueBlocks;
    for (int64_t j0 = 0; j0 < itemKeys; j0 += g.blockCols) {
      int64_t cols = std::min(g.blockCols, itemKeys - j0);
      keyBlocks.push_back(packB(/*transB=*/true, g.d, cols, at(kb, j0 * g.d), g.d));
      valueBlocks.push_back(packB(false, cols, g.dv, at(vb, j0 * g.dv), g.dv));
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
      const char *qb = at(q, (batch * g.lq + i0) * g.d);
      SgemmPacked queries = packA(rows, g.d, qb);
      int64_t keys = g.skipAboveDiagonal ? std::min(g.lk, i0 + rows) : g.lk;
      for (int64_t j0 = 0, kbi = 0; j0 < keys; j0 += g.blockCols, ++kbi) {
        // A causal row block may stop inside the item's last key block: the sgemm then packs
        // that shorter block itself.
        int64_t cols = std::min(g.blockCols, keys - j0);
        product(true, rows, cols, g.d, (float)g.scale, qb, g.d, at(kb, j0 * g.d), g.d, 0.0f, s,
                cols, &queries, keyBlocks[kbi].outer == cols ? &keyBlocks[kbi] : nullptr);
        for (int64_t r = 0; r < rows; ++r)
          keyEnd[r] = g.causal ? std::clamp<int64_t>(i0 + r + 1 - j0, 0, cols) : cols;
        ScoreBlock sb{s, rows, cols, cols, keyEnd, nullptr, 0, 0, nullptr, 0, 0,
                      (float)g.maskedValue, m, l, corr};
        if (g.hasMask) {
          sb.mask = mask + maskBase + i0 * g.maskStrides[rd] + j0 * g.maskStrides[cd];
          sb.maskRow = g.maskStrides[rd];
          sb.maskCol = g.maskStrides[cd];
        }
        if (g.hasBias) {
          sb.bias = bias + biasBase + i0 * g.biasStrides[rd] + j0 * g.biasStrides[cd];
          sb.biasRow = g.biasStrides[rd];
          sb.biasCol = g.biasStrides[cd];
        }
        softmaxBlock(&sb);
        for (int64_t r = 0; r < rows; ++r)
          if (corr[r] != 1.0f)
            for (int64_t c = 0; c < g.dv; ++c)
              o[r * g.dv + c] *= corr[r];
        const void *probs = s;
        if (g.bf16) {
          for (int64_t i = 0; i < rows * cols; ++i)
            p16[i] = floatToBfloat16(s[i]);
          probs = p16;
        }
        product(false, rows, g.dv, cols, 1.0f, probs, cols, at(vb, j0 * g.dv), g.dv, 1.0f, o,
                g.dv, nullptr, valueBlocks[kbi].k == cols ? &valueBlocks[kbi] : nullptr);
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

} // namespace tcc::rt
