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

constexpr int64_t kColumnsBudget = 512 << 10; // bytes of `cols` per tile: stays in L2

int64_t floorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/// The output pixel input pixel i reaches through tap k in spatial dim d, or -1.
int64_t reachedPixel(const ConvGeometry &g, size_t d, int64_t k, int64_t i) {
  int64_t q = i * g.lhsDilations[d] + g.padLow[d] - k * g.dilations[d];
  if (q < 0 || q % g.strides[d] != 0)
    return -1;
  int64_t p = q / g.strides[d];
  return p < g.outSpatial[d] ? p : -1;
}

/// d[2i + shift] += even[i], d[2i + shift + 1] += odd[i] for i in [a, b): two taps of an input
/// dilation of 2 whose outputs interleave, written as contiguous pairs (vectorised).
void addInterleaved(float *d, const float *even, const float *odd, int64_t shift, int64_t a,
                    int64_t b) {
  float *out = d + shift;
  for (int64_t i = a; i < b; ++i) {
    out[2 * i] += even[i];
    out[2 * i + 1] += odd[i];
  }
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

  /// Adds one tap's row (row[i]: input pixel i of the line) to the output line `dst` for the
  /// input pixels [iBegin, iEnd).
  void addTap(const float *row, float *dst, int64_t kl, int64_t iBegin, int64_t iEnd) const {
    int64_t s = g.lhsDilations[last];
    if (g.strides[last] != 1) {
      const int64_t *t = target[last].data() + kl * g.inSpatial[last];
      for (int64_t i = iBegin; i < iEnd; ++i)
        if (int64_t p = t[i]; p >= 0)
          dst[p] += row[i];
      return;
    }
    int64_t a = std::max(lastLo[kl], iBegin), b = std::min(lastHi[kl], iEnd);
    float *d = dst + lastShift[kl];
    if (s == 1) {
      for (int64_t i = a; i < b; ++i)
        d[i] += row[i];
    } else {
      for (int64_t i = a; i < b; ++i)
        d[i * s] += row[i];
    }
  }

  /// Adds the rows of output channel o (cols: kernelSize rows of width j1 - j0, the input
  /// pixels [j0, j1)) into its output plane.
  void add(const float *cols, float *plane, int64_t j0, int64_t j1) const {
    int64_t width = j1 - j0, inLast = g.inSpatial[last], kLast = g.kernel[last];
    // Input dilation 2, stride 1, dilation 1 in the last dim: taps kl and kl + 1 reach
    // neighbouring output pixels (shifts differ by 1), so they go in pairs.
    bool pairs = g.lhsDilations[last] == 2 && g.strides[last] == 1 && g.dilations[last] == 1;
    std::vector<int64_t> kpos(spatial);
    for (int64_t kIndex = 0; kIndex < g.kernelSize; kIndex += kLast) { // outer taps
      for (size_t d = spatial, rest = kIndex; d-- > 0;) {
        kpos[d] = (int64_t)rest % g.kernel[d];
        rest /= g.kernel[d];
      }
      const float *rows = cols + kIndex * width - j0; // rows[kl * width + j]: input pixel j
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
          const float *src = rows + (j - iBegin); // src[kl * width + i]: input pixel i
          float *dst = plane + base;
          int64_t kl = 0;
          for (; pairs && kl + 1 < kLast; kl += 2) {
            // Tap kl + 1 reaches 2i + shift, tap kl 2i + shift + 1: both for i in [a, b).
            const float *odd = src + kl * width, *even = odd + width;
            int64_t a = std::max({lastLo[kl], lastLo[kl + 1], iBegin});
            int64_t b = std::max(a, std::min({lastHi[kl], lastHi[kl + 1], iEnd}));
            addInterleaved(dst, even, odd, lastShift[kl + 1], a, b);
            for (int64_t t : {kl, kl + 1}) { // the ends only one of the two reaches
              addTap(src + t * width, dst, t, iBegin, std::min(a, iEnd));
              addTap(src + t * width, dst, t, std::max(b, iBegin), iEnd);
            }
          }
          for (; kl < kLast; ++kl)
            addTap(src + kl * width, dst, kl, iBegin, iEnd);
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
  // Output rows (first spatial dim) are zeroed just before the first tile that can reach them,
  // so col2im adds into cache-resident lines rather than a plane zeroed long before: input row
  // i reaches output rows up to (i * lhsDilation + padLow) / stride, non-decreasing in i.
  int64_t inRow = g.inSize / g.inSpatial[0], outRow = g.outSize / g.outSpatial[0];
  auto zeroRows = [&](float *out, int64_t from, int64_t to) {
    if (to > from)
      parallelFor(numThreads, g.groupOut, (to - from) * outRow, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          std::memset(out + o * g.outSize + from * outRow, 0,
                      sizeof(float) * (size_t)((to - from) * outRow));
      });
  };
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float *in = input + (n * g.inChannels + grp * g.groupIn) * g.inSize;
      float *out = output + (n * g.outChannels + grp * g.groupOut) * g.outSize;
      int64_t zeroed = 0; // output rows [0, zeroed) are zeroed in every channel
      for (int64_t j0 = 0; j0 < g.inSize; j0 += tile) {
        int64_t j1 = std::min(g.inSize, j0 + tile), width = j1 - j0;
        sgemm(false, false, rows, width, g.groupIn, 1.0f, nullptr, g.groupIn, in + j0,
              g.inSize, 0.0f, workspace, width, numThreads, &packed[grp]);
        int64_t lastRow = (j1 - 1) / inRow;
        int64_t reach = floorDiv(lastRow * g.lhsDilations[0] + g.padLow[0], g.strides[0]) + 1;
        reach = std::clamp(reach, zeroed, g.outSpatial[0]);
        int64_t fresh = reach - zeroed;
        parallelFor(numThreads, g.groupOut, (g.kernelSize * width + fresh * outRow) * 2,
                    [&](int64_t oBegin, int64_t oEnd) {
                      for (int64_t o = oBegin; o < oEnd; ++o) {
                        float *plane = out + o * g.outSize;
                        std::memset(plane + zeroed * outRow, 0,
                                    sizeof(float) * (size_t)(fresh * outRow));
                        col2im.add(workspace + o * g.kernelSize * width, plane, j0, j1);
                      }
                    });
        zeroed = reach;
      }
      zeroRows(out, zeroed, g.outSpatial[0]); // rows no input pixel reaches
    }
}

} // namespace tcc::rt
