//===- ChannelsLast.cpp - Convolutions on [N, S..., C] tensors --------------===//
//
// See ChannelsLast.h.
//
//===----------------------------------------------------------------------===//
#include "ChannelsLast.h"

#include "IsaClones.h"
#include "Parallel.h"

#include <cstring>

namespace tcc::rt {
namespace {

/// o[c] += x[c] * w[c] for c < n.
TCC_ISA_BODY void multiplyAddBody(float *__restrict o, const float *__restrict x,
                                  const float *__restrict w, int64_t n) {
#pragma GCC ivdep
  for (int64_t c = 0; c < n; ++c)
    o[c] += x[c] * w[c];
}
TCC_ISA_CLONES(multiplyAdd, multiplyAddBody)

/// The epilogue on one position's n channels: o[c] = clamp(o[c] + bias[c] + residual[c]).
TCC_ISA_BODY void epilogueRowBody(float *__restrict o, int64_t n, const float *__restrict bias,
                                  const float *__restrict residual, bool clamp, float lo,
                                  float hi) {
#pragma GCC ivdep
  for (int64_t c = 0; c < n; ++c) {
    float x = o[c];
    if (bias)
      x += bias[c];
    if (residual)
      x += residual[c];
    if (clamp) { // as ConvEpilogue::apply: NaN stays NaN
      x = lo > x ? lo : x;
      x = hi < x ? hi : x;
    }
    o[c] = x;
  }
}
TCC_ISA_CLONES(epilogueRow, epilogueRowBody)

void applyEpilogueRows(const ConvEpilogue *e, float *out, int64_t rows, int64_t channels,
                       int64_t firstRow) {
  if (!e)
    return;
  for (int64_t r = 0; r < rows; ++r)
    epilogueRow(out + r * channels, channels, e->bias,
                e->residual ? e->residual + (firstRow + r) * channels : nullptr, e->clamp, e->lo,
                e->hi);
}

/// y = x with dims [a, b, c] -> [a, c, b] (b, c of sizes rows, cols), per outer index a.
void transposeInner(const float *x, float *y, int64_t outer, int64_t rows, int64_t cols,
                    int numThreads) {
  parallelFor(numThreads, outer * rows, 2 * cols, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t a = i / rows, r = i % rows;
      const float *from = x + i * cols;
      float *to = y + a * rows * cols + r;
      for (int64_t c = 0; c < cols; ++c)
        to[c * rows] = from[c];
    }
  });
}

void pointwise(const ConvGeometry &g, const float *input, const float *weight, float *output,
               int numThreads, PackedOperand *cache, bool weightIsConstant,
               const ConvEpilogue *epilogue) {
  const int64_t rows = g.batch * g.outSize, k = g.inChannels, n = g.outChannels;
  const SgemmIsa isa = sgemmIsa();
  PackedOperand local;
  if (!cache)
    cache = &local;
  if (resetIfStale(*cache, weight, weightIsConstant, isa)) // W [K, C] as op(B) = W^T
    cache->matrices.push_back(packSgemmB(isa, true, k, n, weight, k, numThreads));
  SgemmEpilogue tile;
  if (epilogue) {
    tile.bias = epilogue->bias;
    tile.residual = epilogue->residual;
    tile.ldResidual = n;
    tile.clamp = epilogue->clamp;
    tile.lo = epilogue->lo;
    tile.hi = epilogue->hi;
  }
  sgemm(false, true, rows, n, k, 1.0f, input, k, nullptr, k, 0.0f, output, n, numThreads,
        nullptr, &cache->matrices[0], &tile);
}

void depthwise(const ConvGeometry &g, const float *input, const float *weight, float *output,
               int numThreads, PackedOperand *cache, bool weightIsConstant,
               const ConvEpilogue *epilogue) {
  const int64_t C = g.outChannels, ih = g.inSpatial[0], iw = g.inSpatial[1];
  const int64_t kh = g.kernel[0], kw = g.kernel[1], oh = g.outSpatial[0], ow = g.outSpatial[1];
  const int64_t sh = g.strides[0], sw = g.strides[1], dh = g.dilations[0], dw = g.dilations[1];
  const int64_t ph = g.padLow[0], pw = g.padLow[1], taps = kh * kw;
  PackedOperand local;
  if (!cache)
    cache = &local;
  std::vector<float> &w = cache->reordered; // [tap][C]
  if (resetIfStale(*cache, weight, weightIsConstant, sgemmIsa()) || w.empty()) {
    w.resize((size_t)(taps * C));
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < taps; ++t)
        w[t * C + c] = weight[c * taps + t];
  }
  // Items: output rows (image, oh); each writes its ow x C outputs once.
  parallelFor(numThreads, g.batch * oh, ow * taps * C, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t n = item / oh, y = item % oh;
      const float *in = input + n * ih * iw * C;
      float *outRow = output + item * ow * C;
      for (int64_t x = 0; x < ow; ++x) {
        float *o = outRow + x * C;
        std::memset(o, 0, sizeof(float) * (size_t)C);
        for (int64_t ky = 0; ky < kh; ++ky) {
          int64_t iy = y * sh - ph + ky * dh;
          if (iy < 0 || iy >= ih)
            continue;
          for (int64_t kx = 0; kx < kw; ++kx) {
            int64_t ix = x * sw - pw + kx * dw;
            if (ix < 0 || ix >= iw)
              continue;
            multiplyAdd(o, in + (iy * iw + ix) * C, w.data() + (ky * kw + kx) * C, C);
          }
        }
      }
      applyEpilogueRows(epilogue, outRow, ow, C, item * ow);
    }
  });
}

/// Any other convolution: through channels-first copies and runConv.
void throughChannelsFirst(const ConvGeometry &g, const float *input, const float *weight,
                          float *output, float *workspace, int numThreads, PackedOperand *cache,
                          bool weightIsConstant, const ConvEpilogue *epilogue) {
  ConvGeometry first = g;
  first.channelsLast = false;
  std::vector<float> x((size_t)(g.batch * g.inChannels * g.inSize));
  std::vector<float> y((size_t)(g.batch * g.outChannels * g.outSize));
  transposeInner(input, x.data(), g.batch, g.inSize, g.inChannels, numThreads);
  runConv(first, x.data(), weight, y.data(), workspace, numThreads, cache, weightIsConstant);
  transposeInner(y.data(), output, g.batch, g.outChannels, g.outSize, numThreads);
  applyEpilogueRows(epilogue, output, g.batch * g.outSize, g.outChannels, 0);
}

} // namespace

void runConvChannelsLast(const ConvGeometry &g, const float *input, const float *weight,
                         float *output, float *workspace, int numThreads, PackedOperand *cache,
                         bool weightIsConstant, const ConvEpilogue *epilogue) {
  if (g.outSize == 0 || g.outChannels == 0 || g.batch == 0)
    return;
  if (epilogue && !epilogue->any())
    epilogue = nullptr;
  if (g.pointwise && g.groups == 1 && g.inChannels > 0)
    return pointwise(g, input, weight, output, numThreads, cache, weightIsConstant, epilogue);
  if (g.kernel.size() == 2 && g.groupIn == 1 && g.groupOut == 1 && !g.transposed)
    return depthwise(g, input, weight, output, numThreads, cache, weightIsConstant, epilogue);
  throughChannelsFirst(g, input, weight, output, workspace, numThreads, cache, weightIsConstant,
                       epilogue);
}

} // namespace tcc::rt
