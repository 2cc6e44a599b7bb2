//===- Attention.cpp - Fused scaled dot-product attention on the CPU ------------===//
#include "Attention.h"

#include "CpuMath.h"
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

constexpr int64_t kBlockRows = 64;  // query rows per work item
constexpr int64_t kBlockCols = 512; // keys per score block (64 x 512 floats: 128 KiB, in L2)
constexpr int kLanes = 16;          // one AVX-512 register of floats

Shape broadcastStrides(const Shape &shape) {
  Shape strides(shape.size(), 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

/// One block of score rows (row stride ld): applies the causal triangle (keys after `lastKey`
/// of each row), mask and bias, then the online softmax step: m (running max), l (running sum)
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

TCC_ISA_BODY void softmaxBlockBody(const ScoreBlock *bp) {
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
    // Row maximum in kLanes independent lanes (vectorises without reassociation).
    float lanes[kLanes];
    for (int t = 0; t < kLanes; ++t)
      lanes[t] = -inf;
    int64_t j = 0;
    for (; j + kLanes <= b.cols; j += kLanes)
      for (int t = 0; t < kLanes; ++t)
        lanes[t] = s[j + t] > lanes[t] ? s[j + t] : lanes[t];
    float mx = b.m[r];
    for (; j < b.cols; ++j)
      mx = s[j] > mx ? s[j] : mx;
    for (int t = 0; t < kLanes; ++t)
      mx = lanes[t] > mx ? lanes[t] : mx;
    // The reference softmax shifts by the maximum only when it is finite.
    float shift = std::isfinite(mx) ? mx : 0.0f;
    float c = tcc_expf(b.m[r] - shift);
    for (int t = 0; t < kLanes; ++t)
      lanes[t] = 0;
    j = 0;
    for (; j + kLanes <= b.cols; j += kLanes)
      for (int t = 0; t < kLanes; ++t) {
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
TCC_ISA_CLONES(softmaxBlock, softmaxBlockBody)

} // namespace

AttentionGeometry makeAttentionGeometry(const Shape &q, const Shape &k, const Shape &v,
                                        const Shape *mask, const Shape *bias, const Shape &output,
                                        double scale, bool causal, double maskedValue) {
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
  g.maskStrides = mask ? broadcastStrides(*mask) : Shape(r, 0);
  g.biasStrides = bias ? broadcastStrides(*bias) : Shape(r, 0);
  g.blockRows = std::min(kBlockRows, std::max<int64_t>(g.lq, 1));
  g.blockCols = std::min(kBlockCols, std::max<int64_t>(g.lk, 1));
  // Scores, running output, m, l and corr.
  g.workspaceFloats = (size_t)(g.blockRows * g.blockCols + g.blockRows * g.dv + 3 * g.blockRows);
  return g;
}

void runAttention(const AttentionGeometry &g, const float *q, const float *k, const float *v,
                  const bool *mask, const float *bias, float *output, int numThreads) {
  if (g.batches == 0 || g.lq == 0 || g.dv == 0)
    return;
  int64_t rowBlocks = (g.lq + g.blockRows - 1) / g.blockRows;
  int64_t items = g.batches * rowBlocks;
  int workers = (int)std::min<int64_t>(std::max(numThreads, 1), items);
  std::vector<float> workspace((size_t)workers * g.workspaceFloats);
  std::vector<int64_t> keyEnds((size_t)(workers * g.blockRows));
  size_t nb = g.qBatch.size();
  const float inf = std::numeric_limits<float>::infinity();
  parallelItems(workers, items, [&](int64_t worker, int64_t item) {
    int64_t batch = item / rowBlocks, i0 = item % rowBlocks * g.blockRows;
    int64_t rows = std::min(g.blockRows, g.lq - i0);
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
    float *s = workspace.data() + worker * g.workspaceFloats;
    float *o = s + g.blockRows * g.blockCols, *m = o + g.blockRows * g.dv, *l = m + g.blockRows,
          *corr = l + g.blockRows;
    int64_t *keyEnd = keyEnds.data() + worker * g.blockRows;
    std::fill(o, o + rows * g.dv, 0.0f);
    std::fill(m, m + rows, -inf);
    std::fill(l, l + rows, 0.0f);
    const float *qb = q + (batch * g.lq + i0) * g.d;
    const float *kb = k + kvBatch * g.lk * g.d, *vb = v + kvBatch * g.lk * g.dv;
    // Causal: keys after the block's last row are never seen.
    int64_t keys = g.causal ? std::min(g.lk, i0 + rows) : g.lk;
    for (int64_t j0 = 0; j0 < keys; j0 += g.blockCols) {
      int64_t cols = std::min(g.blockCols, keys - j0);
      sgemm(false, true, rows, cols, g.d, (float)g.scale, qb, g.d, kb + j0 * g.d, g.d, 0.0f, s,
            cols, 1);
      for (int64_t r = 0; r < rows; ++r)
        keyEnd[r] = g.causal ? std::clamp<int64_t>(i0 + r + 1 - j0, 0, cols) : cols;
      ScoreBlock block{s, rows, cols, cols, keyEnd, nullptr, 0, 0, nullptr, 0, 0,
                       (float)g.maskedValue, m, l, corr};
      size_t rd = nb, cd = nb + 1; // the scores' row and column dims
      if (g.hasMask) {
        block.mask = mask + maskBase + i0 * g.maskStrides[rd] + j0 * g.maskStrides[cd];
        block.maskRow = g.maskStrides[rd];
        block.maskCol = g.maskStrides[cd];
      }
      if (g.hasBias) {
        block.bias = bias + biasBase + i0 * g.biasStrides[rd] + j0 * g.biasStrides[cd];
        block.biasRow = g.biasStrides[rd];
        block.biasCol = g.biasStrides[cd];
      }
      softmaxBlock(&block);
      for (int64_t r = 0; r < rows; ++r)
        if (corr[r] != 1.0f)
          for (int64_t c = 0; c < g.dv; ++c)
            o[r * g.dv + c] *= corr[r];
      sgemm(false, false, rows, g.dv, cols, 1.0f, s, cols, vb + j0 * g.dv, g.dv, 1.0f, o, g.dv, 1);
    }
    float *out = output + (batch * g.lq + i0) * g.dv;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < g.dv; ++c)
        out[r * g.dv + c] = o[r * g.dv + c] / l[r];
  });
}

} // namespace tcc::rt
