//===- TransposedConv.cpp - Convolutions over a dilated input (GEMM + col2im) ===//
//
// See TransposedConv.h. Index algebra, per spatial dim: tk.conv reads the dilated, padded input
// at q = p * stride + k * dilation - padLow for output pixel p and tap k; the dilated input holds
// x[i] at q = i * lhsDilation. So input pixel i reaches, through tap k, the output pixel
// p = (i * lhsDilation + padLow - k * dilation) / stride when that divides and 0 <= p < out.
//===----------------------------------------------------------------------===//

#include "TransposedConv.h"

#include "Parallel.h"

#include <algorithm>
#include <cstring>

namespace tcc::rt {
namespace {

constexpr int64_t kColumnsBudget = 2 << 20; // bytes of `cols` per tile: about L2

/// The output pixel input pixel i reaches through tap k in spatial dim d, or -1.
int64_t reachedPixel(const ConvGeometry &g, size_t d, int64_t k, int64_t i) {
  int64_t q = i * g.lhsDilations[d] + g.padLow[d] - k * g.dilations[d];
  if (q < 0 || q % g.strides[d] != 0)
    return -1;
  int64_t p = q / g.strides[d];
  return p < g.outSpatial[d] ? p : -1;
}

/// Where each input pixel's contributions go, precomputed per spatial dim.
struct Col2im {
  const ConvGeometry &g;
  size_t spatial, last;
  Shape outStrides; // element strides of the output's spatial dims
  // target[d][k * in_d + i] = reachedPixel(d, k, i).
  std::vector<std::vector<int64_t>> target;
  // Last dim with stride 1: per tap, the input pixels [lo, hi) that land in the output, at
  // p = i * lhsDilation + shift.
  std::vector<int64_t> lastLo, lastHi, lastShift;

  explicit Col2im(const ConvGeometry &geometry)
      : g(geometry), spatial(geometry.kernel.size()), last(spatial - 1) {
    outStrides.assign(spatial, 1);
    for (size_t d = last; d-- > 0;)
      outStrides[d] = outStrides[d + 1] * g.outSpatial[d + 1];
    target.resize(spatial);
    for (size_t d = 0; d < spatial; ++d) {
      int64_t in = g.inSpatial[d];
      target[d].resize((size_t)(g.kernel[d] * in));
      for (int64_t k = 0; k < g.kernel[d]; ++k)
        for (int64_t i = 0; i < in; ++i)
          target[d][k * in + i] = reachedPixel(g, d, k, i);
    }
    int64_t s = g.lhsDilations[last], in = g.inSpatial[last], out = g.outSpatial[last];
    for (int64_t k = 0; k < g.kernel[last]; ++k) {
      int64_t shift = g.padLow[last] - k * g.dilations[last];
      // 0 <= i * s + shift < out.
      int64_t lo = shift >= 0 ? 0 : (-shift + s - 1) / s;
      int64_t hi = out - shift <= 0 ? 0 : (out - shift + s - 1) / s;
      lo = std::min(lo, in);
      lastLo.push_back(lo);
      lastHi.push_back(std::clamp(hi, lo, in));
      lastShift.push_back(shift);
    }
  }

  /// Adds the rows of output channel o (cols: kernelSize rows of width j1 - j0, the input
  /// pixels [j0, j1)) into its output plane.
  void add(const float *cols, float *plane, int64_t j0, int64_t j1) const {
    int64_t width = j1 - j0, inLast = g.inSpatial[last];
    bool affine = g.strides[last] == 1;
    int64_t s = g.lhsDilations[last];
    std::vector<int64_t> kpos(spatial);
    for (int64_t kIndex = 0; kIndex < g.kernelSize; ++kIndex) {
      for (size_t d = spatial, rest = kIndex; d-- > 0;) {
        kpos[d] = (int64_t)rest % g.kernel[d];
        rest /= g.kernel[d];
      }
      const float *row = cols + kIndex * width - j0; // row[j]: input pixel j
      const int64_t *lastTarget = target[last].data() + kpos[last] * inLast;
      int64_t lo = lastLo[kpos[last]], hi = lastHi[kpos[last]], shift = lastShift[kpos[last]];
      for (int64_t j = j0; j < j1;) {
        int64_t line = j / inLast, iBegin = j % inLast;
        int64_t iEnd = std::min(inLast, iBegin + (j1 - j));
        int64_t base = 0;
        bool valid = true;
        for (size_t d = last, rest = line; valid && d-- > 0;) {
          int64_t id = (int64_t)rest % g.inSpatial[d];
          rest /= g.inSpatial[d];
          int64_t p = target[d][kpos[d] * g.inSpatial[d] + id];
          valid = p >= 0;
          base += p * outStrides[d];
        }
        if (valid) {
          const float *src = row + (j - iBegin);
          float *dst = plane + base;
          if (affine) {
            int64_t a = std::max(lo, iBegin), b = std::min(hi, iEnd);
            if (s == 1) {
              float *d1 = dst + shift;
              for (int64_t i = a; i < b; ++i)
                d1[i] += src[i];
            } else {
              for (int64_t i = a; i < b; ++i)
                dst[i * s + shift] += src[i];
            }
          } else {
            for (int64_t i = iBegin; i < iEnd; ++i)
              if (int64_t p = lastTarget[i]; p >= 0)
                dst[p] += src[i];
          }
        }
        j += iEnd - iBegin;
      }
    }
  }
};

} // namespace

size_t planTransposedConv(ConvGeometry &g) {
  g.transposedTile = 0;
  if (!g.transposed || g.inSize == 0 || g.outSize == 0)
    return 0;
  int64_t rows = g.groupOut * g.kernelSize;
  int64_t tile = std::max<int64_t>(64, kColumnsBudget / (std::max<int64_t>(rows, 1) * 4) / 64 * 64);
  g.transposedTile = std::min(tile, g.inSize);
  return (size_t)rows * (size_t)g.transposedTile * sizeof(float);
}

void transposedConvPackWeights(const ConvGeometry &g, const float *weight,
                               std::vector<SgemmPacked> &packed, int numThreads) {
  int64_t taps = g.kernelSize, rows = g.groupOut * taps;
  std::vector<float> a((size_t)(rows * g.groupIn)); // [(o, k), c], one group at a time
  for (int64_t grp = 0; grp < g.groups; ++grp) {
    const float *w = weight + grp * g.groupOut * g.groupIn * taps; // [o][c][k]
    for (int64_t o = 0; o < g.groupOut; ++o)
      for (int64_t c = 0; c < g.groupIn; ++c)
        for (int64_t k = 0; k < taps; ++k)
          a[(size_t)((o * taps + k) * g.groupIn + c)] = w[(o * g.groupIn + c) * taps + k];
    packed.push_back(packSgemmA(sgemmIsa(), false, rows, g.groupIn, a.data(), g.groupIn,
                                numThreads));
  }
}

void runTransposedConv(const ConvGeometry &g, const float *input, const SgemmPacked *packed,
                       float *output, float *workspace, int numThreads) {
  int64_t planeCount = g.batch * g.outChannels;
  if (g.inSize == 0 || g.groupIn == 0 || g.kernelSize == 0) { // nothing reaches the output
    std::memset(output, 0, sizeof(float) * (size_t)(planeCount * g.outSize));
    return;
  }
  Col2im col2im(g);
  int64_t rows = g.groupOut * g.kernelSize, tile = g.transposedTile;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float *in = input + (n * g.inChannels + grp * g.groupIn) * g.inSize;
      float *out = output + (n * g.outChannels + grp * g.groupOut) * g.outSize;
      for (int64_t j0 = 0; j0 < g.inSize; j0 += tile) {
        int64_t j1 = std::min(g.inSize, j0 + tile), width = j1 - j0;
        sgemm(false, false, rows, width, g.groupIn, 1.0f, nullptr, g.groupIn, in + j0,
              g.inSize, 0.0f, workspace, width, numThreads, &packed[grp]);
        parallelFor(numThreads, g.groupOut, g.kernelSize * width * 2,
                    [&](int64_t oBegin, int64_t oEnd) {
                      for (int64_t o = oBegin; o < oEnd; ++o) {
                        float *plane = out + o * g.outSize;
                        if (j0 == 0)
                          std::memset(plane, 0, sizeof(float) * (size_t)g.outSize);
                        col2im.add(workspace + o * g.kernelSize * width, plane, j0, j1);
                      }
                    });
      }
    }
}

} // namespace tcc::rt
