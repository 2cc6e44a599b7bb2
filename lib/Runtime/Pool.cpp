//===- Pool.cpp - Max and sum pooling (tk.pool) ---------------------------===//
//
// See CpuLibrary.h (PoolGeometry). The generated kernel of a padded window reduction clamps
// each input index and selects the identity outside the image: a gather per tap (ResNet-18's
// 3x3 stride-2 max pool took 1.7 ms on Zen 4, onnxruntime's 0.17 ms). Here each output row is
// two passes over contiguous memory: the window's valid input rows are reduced element-wise
// into a row buffer ([W][inner], in L1), then each output column reduces the buffer's valid
// columns, vectorised over `inner` (channels-last) or over the row (channels-first, stride 1).
//
//===----------------------------------------------------------------------===//
#include "CpuLibrary.h"
#include "DType.h"
#include "IsaClones.h"
#include "Parallel.h"
#include "Program.h"
#include "tcc/Support/PoolShapes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tcc::rt {

PoolGeometry makePoolGeometry(tccrt_dtype dtype, const Shape &input, const Shape &output,
                              bool max, const Shape &window, const Shape &strides,
                              const Shape &padLow, const Shape &padHigh, const Shape &dilations) {
  const std::string op = "pool";
  if (dtype != TCCRT_F32)
    throw Error(op + ": element type must be f32, got " + dtypeName(dtype));
  if (input.size() != 4 || output.size() != 4)
    throw Error(op + ": input and output must have rank 4, got " + shapeString(dtype, input) +
                " and " + shapeString(dtype, output));
  for (const Shape *attr : {&window, &strides, &padLow, &padHigh, &dilations})
    if (attr->size() != 4)
      throw Error(op + ": window, strides, pads and dilations need 4 entries each");
  for (int64_t d = 0; d < 4; ++d)
    if (window[d] < 1 || strides[d] < 1 || dilations[d] < 1 || padLow[d] < 0 || padHigh[d] < 0)
      throw Error(op + ": windows, strides and dilations must be >= 1 and pads >= 0");
  std::vector<int64_t> pooled = pooledDims(window, strides, padLow, padHigh, dilations);
  if (!poolsAdjacentDims(pooled))
    throw Error(op + ": it pools at most two adjacent dims");
  // [outer, H, W, inner]: H the first pooled dim (one pooled dim: the last one is W).
  int64_t h = pooled.empty() ? 1 : std::min<int64_t>(pooled[0], 2);
  int64_t w = h + 1;
  PoolGeometry g;
  g.max = max;
  g.outer = 1;
  for (int64_t d = 0; d < h; ++d)
    g.outer *= input[d];
  for (int64_t d = w + 1; d < 4; ++d)
    g.inner *= input[d];
  g.ih = input[h], g.iw = input[w];
  g.kh = window[h], g.kw = window[w], g.sh = strides[h], g.sw = strides[w];
  g.ph = padLow[h], g.pw = padLow[w], g.dh = dilations[h], g.dw = dilations[w];
  // Attributes come from an artifact that may be damaged: sizes that overflow are an error.
  auto windowed = [&](int64_t in, int64_t lo, int64_t hi, int64_t k, int64_t dil, int64_t s) {
    int64_t padded, span;
    if (__builtin_add_overflow(in, lo, &padded) || __builtin_add_overflow(padded, hi, &padded) ||
        __builtin_mul_overflow(k - 1, dil, &span) || __builtin_add_overflow(span, 1, &span))
      throw Error(op + ": window, dilation or pads overflow a 64-bit size");
    return padded < span ? 0 : (padded - span) / s + 1;
  };
  g.oh = windowed(g.ih, padLow[h], padHigh[h], g.kh, g.dh, g.sh);
  g.ow = windowed(g.iw, padLow[w], padHigh[w], g.kw, g.dw, g.sw);
  Shape want = input;
  want[h] = g.oh;
  want[w] = g.ow;
  if (output != want)
    throw Error(op + ": output " + shapeString(dtype, output) + " must be " +
                shapeString(dtype, want) + " for input " + shapeString(dtype, input));
  return g;
}

namespace {

/// The reduction of two values: max with NaN winning (as the generated kernels' max), or sum.
template <bool Max> inline float combine(float a, float b) {
  if constexpr (Max) { // selects only (no short-circuit), so that the loops vectorise
    const float larger = a < b ? b : a;
    const float orNaN = b != b ? b : larger;
    return a != a ? a : orNaN;
  } else {
    return a + b;
  }
}

template <bool Max>
TCC_ISA_BODY void reduceRowBody(float *__restrict acc, const float *__restrict row, int64_t n) {
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i)
    acc[i] = combine<Max>(acc[i], row[i]);
}

/// Channels-first: out[x] = the reduction of acc[x * sw - pw + kx * dw] over the valid kx, the
/// columns whose taps are all inside the row in tap-outer loops vectorised over x.
template <bool Max>
TCC_ISA_BODY void reduceColumnsBody(float *__restrict out, const float *__restrict acc,
                                    int64_t ow, int64_t iw, int64_t kw, int64_t sw, int64_t pw,
                                    int64_t dw, float identity) {
  // Interior x: x * sw - pw >= 0 and x * sw - pw + (kw - 1) * dw < iw.
  int64_t lo = std::min<int64_t>(ow, (pw + sw - 1) / sw);
  int64_t last = iw - 1 + pw - (kw - 1) * dw; // x * sw <= last
  int64_t hi = last < 0 ? lo : std::clamp<int64_t>(last / sw + 1, lo, ow);
  auto edge = [&](int64_t x) {
    float o = identity;
    for (int64_t kx = 0; kx < kw; ++kx) {
      int64_t ix = x * sw - pw + kx * dw;
      if (ix >= 0 && ix < iw)
        o = combine<Max>(o, acc[ix]);
    }
    out[x] = o;
  };
  for (int64_t x = 0; x < lo; ++x)
    edge(x);
  const float *base = acc - pw;
#pragma GCC ivdep
  for (int64_t x = lo; x < hi; ++x)
    out[x] = base[x * sw];
  for (int64_t kx = 1; kx < kw; ++kx) {
    const float *tap = base + kx * dw;
#pragma GCC ivdep
    for (int64_t x = lo; x < hi; ++x)
      out[x] = combine<Max>(out[x], tap[x * sw]);
  }
  for (int64_t x = hi; x < ow; ++x)
    edge(x);
}

/// Output rows [begin, end) (items of (outer, oh)), each through the row buffer `acc`; one
/// call per thread's chunk, the loops inlined and vectorised for the ISA.
template <bool Max>
TCC_ISA_BODY void poolItemsBody(const PoolGeometry *pg, const float *input, float *output,
                                int64_t begin, int64_t end, float *acc) {
  const PoolGeometry &g = *pg;
  const float identity = Max ? -std::numeric_limits<float>::infinity() : 0.0f;
  const int64_t rowFloats = g.iw * g.inner, outRow = g.ow * g.inner;
  for (int64_t item = begin; item < end; ++item) {
    int64_t a = item / g.oh, y = item % g.oh;
    const float *plane = input + a * g.ih * rowFloats;
    // The window's valid rows, reduced element-wise.
    std::fill(acc, acc + rowFloats, identity);
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      int64_t iy = y * g.sh - g.ph + ky * g.dh;
      if (iy >= 0 && iy < g.ih)
        reduceRowBody<Max>(acc, plane + iy * rowFloats, rowFloats);
    }
    // Each output column: the valid columns of the buffer.
    float *out = output + item * outRow;
    if (g.inner == 1) {
      reduceColumnsBody<Max>(out, acc, g.ow, g.iw, g.kw, g.sw, g.pw, g.dw, identity);
      continue;
    }
    for (int64_t x = 0; x < g.ow; ++x) {
      float *o = out + x * g.inner;
      std::fill(o, o + g.inner, identity);
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        int64_t ix = x * g.sw - g.pw + kx * g.dw;
        if (ix >= 0 && ix < g.iw)
          reduceRowBody<Max>(o, acc + ix * g.inner, g.inner);
      }
    }
  }
}
TCC_ISA_CLONES(poolMaxItems, poolItemsBody<true>)
TCC_ISA_CLONES(poolSumItems, poolItemsBody<false>)

} // namespace

void runPool(const PoolGeometry &g, const float *input, float *output, int numThreads) {
  if (g.outer == 0 || g.oh == 0 || g.ow == 0 || g.inner == 0)
    return;
  const int64_t rowFloats = g.iw * g.inner;
  parallelFor(numThreads, g.outer * g.oh, rowFloats * g.kh + g.ow * g.inner * g.kw,
              [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buffer;
    buffer.resize((size_t)rowFloats);
    if (g.max)
      poolMaxItems(&g, input, output, begin, end, buffer.data());
    else
      poolSumItems(&g, input, output, begin, end, buffer.data());
  });
}

} // namespace tcc::rt
