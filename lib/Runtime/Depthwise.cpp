//===- Depthwise.cpp - Direct 2-D convolution for groups of one input channel ===//
#include "Depthwise.h"
#include "IsaClones.h"
#include "Parallel.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tcc::rt {
namespace {

/// Flat loop step: the loops below run over a multiple of this many elements (buffers have
/// the slack), so the vectorised loop needs no scalar tail.
constexpr int64_t kStep = 16;
/// Output rows per block: about this many floats of the flat buffer.
constexpr int64_t kBlockFloats = 2048;

/// o[i] = sum of the nine taps w[t] * p[t][i], i in [0, n), n a multiple of kStep. Cloned for
/// AVX-512 and AVX2 (the runtime is built for the baseline ISA).
TCC_ISA_BODY void
nineTapsBody(float *__restrict o, int64_t n, const float *__restrict p0, const float *__restrict p1,
         const float *__restrict p2, const float *__restrict p3, const float *__restrict p4,
         const float *__restrict p5, const float *__restrict p6, const float *__restrict p7,
         const float *__restrict p8, const float *__restrict w) {
  float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7],
        w8 = w[8];
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i)
    o[i] = ((w0 * p0[i] + w1 * p1[i]) + (w2 * p2[i] + w3 * p3[i])) +
           ((w4 * p4[i] + w5 * p5[i]) + (w6 * p6[i] + w7 * p7[i])) + w8 * p8[i];
}
TCC_ISA_CLONES(nineTaps, nineTapsBody)

/// o[i] (+)= w * p[i], i in [0, n).
TCC_ISA_BODY void
oneTapBody(float *__restrict o, int64_t n, const float *__restrict p, float w, bool accumulate) {
  if (accumulate) {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i)
      o[i] += w * p[i];
  } else {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i)
      o[i] = w * p[i];
  }
}
TCC_ISA_CLONES(oneTap, oneTapBody)

/// Rows [r0, r1) of an output plane from the flat buffer (row length v).
TCC_ISA_BODY void
copyRowsBody(float *__restrict out, const float *__restrict flat, int64_t rows, int64_t ow,
         int64_t v) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out + r * ow, flat + r * v, sizeof(float) * ow);
}
TCC_ISA_CLONES(copyRows, copyRowsBody)

/// copyRows with the epilogue of one channel (ConvEpilogue::apply, vectorised): + *bias (null:
/// none), + residual (its rows at out's positions; null: none), then the clamp to [lo, hi].
TCC_ISA_BODY void
copyRowsEpilogueBody(float *__restrict out, const float *__restrict flat, int64_t rows,
                     int64_t ow, int64_t v, const float *bias, const float *__restrict residual,
                     bool clamp, float lo, float hi) {
  const float b = bias ? *bias : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    float *o = out + r * ow;
    const float *f = flat + r * v, *res = residual ? residual + r * ow : nullptr;
#pragma GCC ivdep
    for (int64_t i = 0; i < ow; ++i) {
      float x = f[i];
      if (bias)
        x += b;
      if (res)
        x += res[i];
      if (clamp) {
        x = lo > x ? lo : x;
        x = hi < x ? hi : x;
      }
      o[i] = x;
    }
  }
}
TCC_ISA_CLONES(copyRowsEpilogue, copyRowsEpilogueBody)

/// Phase rows of one phase: padded input rows a, a + sh, ...; columns [c0, c1) of each are in
/// bounds and read input column c * sw + colShift.
struct Phase {
  bool used = false;
  int64_t r0 = 0, r1 = 0, rowShift = 0; // valid phase rows; input row = R * sh + rowShift
  int64_t c0 = 0, c1 = 0, colShift = 0;
};

TCC_ISA_BODY void
fillPhaseBody(float *__restrict dst, const float *__restrict in, const Phase &ph, int64_t v,
          int64_t sh, int64_t sw, int64_t iw) {
  int64_t count = ph.c1 - ph.c0;
  for (int64_t r = ph.r0; r < ph.r1; ++r) {
    const float *src = in + (r * sh + ph.rowShift) * iw + ph.c0 * sw + ph.colShift;
    float *d = dst + r * v + ph.c0;
    if (sw == 1) {
      std::memcpy(d, src, sizeof(float) * count);
    } else if (sw == 2) {
#pragma GCC ivdep
      for (int64_t c = 0; c < count; ++c)
        d[c] = src[2 * c];
    } else {
      for (int64_t c = 0; c < count; ++c)
        d[c] = src[c * sw];
    }
  }
}
TCC_ISA_CLONES(fillPhase, fillPhaseBody)

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

} // namespace

void runDepthwise2dPhased(const ConvGeometry &g, const float *input, const float *weight,
                          float *output, int numThreads, const ConvEpilogue *epilogue) {
  const int64_t ih = g.inSpatial[0], iw = g.inSpatial[1], kh = g.kernel[0], kw = g.kernel[1];
  const int64_t oh = g.outSpatial[0], ow = g.outSpatial[1], sh = g.strides[0], sw = g.strides[1];
  const int64_t dh = g.dilations[0], dw = g.dilations[1], ph = g.padLow[0], pw = g.padLow[1];
  const int64_t taps = kh * kw;
  // Phase planes: PR rows of V floats (plus slack for the flat loop's overrun).
  const int64_t v = ow + (kw - 1) * dw / sw, phaseRows = oh + (kh - 1) * dh / sh;
  const int64_t flat = (oh * v + kStep - 1) / kStep * kStep;
  const int64_t blockRows = std::max<int64_t>(1, kBlockFloats / v);
  const int64_t phaseSize = ((phaseRows + 1) * v + 2 * kStep + 15) / 16 * 16;
  std::vector<Phase> phases((size_t)(sh * sw));
  std::vector<int64_t> tapPhase((size_t)taps), tapOffset((size_t)taps);
  for (int64_t y = 0; y < kh; ++y)
    for (int64_t x = 0; x < kw; ++x) {
      int64_t a = y * dh % sh, b = x * dw % sw, t = y * kw + x;
      tapPhase[t] = a * sw + b;
      tapOffset[t] = (y * dh / sh) * v + x * dw / sw;
      phases[tapPhase[t]].used = true;
    }
  for (int64_t a = 0; a < sh; ++a)
    for (int64_t b = 0; b < sw; ++b) {
      Phase &p = phases[a * sw + b];
      // Phase row R reads input row R * sh + a - ph; column C reads C * sw + b - pw.
      p.rowShift = a - ph;
      p.r0 = std::clamp<int64_t>(ceilDiv(-p.rowShift, sh), 0, phaseRows);
      p.r1 = std::clamp<int64_t>(floorDiv(ih - 1 - p.rowShift, sh) + 1, p.r0, phaseRows);
      p.colShift = b - pw;
      p.c0 = std::clamp<int64_t>(ceilDiv(-p.colShift, sw), 0, v);
      p.c1 = std::clamp<int64_t>(floorDiv(iw - 1 - p.colShift, sw) + 1, p.c0, v);
    }
  const int64_t scratchFloats = (int64_t)phases.size() * phaseSize + flat;
  // A plane's cost: its taps plus the bytes it moves (the fills dominate small planes).
  parallelFor(numThreads, g.batch * g.outChannels,
              g.outSize * taps + (int64_t)sizeof(float) * (g.inSize + 2 * g.outSize),
              [&](int64_t begin, int64_t end) {
    // Per thread, kept across calls. Zeroed once per call: the padding (outside every phase's
    // valid rectangle, the same for every plane) stays zero.
    static thread_local std::vector<float> scratch;
    if ((int64_t)scratch.size() < scratchFloats)
      scratch.resize((size_t)scratchFloats);
    std::memset(scratch.data(), 0, sizeof(float) * (size_t)scratchFloats);
    float *base = scratch.data(), *tmp = base + phases.size() * phaseSize;
    const float *filled = nullptr;
    std::vector<const float *> ptr((size_t)taps);
    for (int64_t t = 0; t < taps; ++t)
      ptr[t] = base + tapPhase[t] * phaseSize + tapOffset[t];
    for (int64_t item = begin; item < end; ++item) {
      int64_t n = item / g.outChannels, oc = item % g.outChannels, ic = oc / g.groupOut;
      const float *in = input + (n * g.inChannels + ic) * g.inSize;
      if (in != filled) { // channel multipliers > 1 reuse the phases
        for (size_t q = 0; q < phases.size(); ++q)
          if (phases[q].used)
            fillPhase(base + q * phaseSize, in, phases[q], v, sh, sw, iw);
        filled = in;
      }
      const float *w = weight + oc * g.kernelSize;
      // Blocks of output rows, so that the flat buffer stays in L1 between the taps' loop
      // and the copy out.
      for (int64_t r0 = 0; r0 < oh; r0 += blockRows) {
        int64_t rows = std::min(blockRows, oh - r0), n = (rows * v + kStep - 1) / kStep * kStep;
        int64_t at = r0 * v;
        if (taps == 9) {
          nineTaps(tmp, n, ptr[0] + at, ptr[1] + at, ptr[2] + at, ptr[3] + at, ptr[4] + at,
                   ptr[5] + at, ptr[6] + at, ptr[7] + at, ptr[8] + at, w);
        } else {
          for (int64_t t = 0; t < taps; ++t)
            oneTap(tmp, n, ptr[t] + at, w[t], t > 0);
        }
        float *out = output + item * g.outSize + r0 * ow;
        if (!epilogue)
          copyRows(out, tmp, rows, ow, v);
        else {
          copyRowsEpilogue(out, tmp, rows, ow, v, epilogue->bias ? epilogue->bias + oc : nullptr,
                           epilogue->residual ? epilogue->residual + (out - output) : nullptr,
                           epilogue->clamp, epilogue->lo, epilogue->hi);
          activateRows(epilogue->activation, out, rows, ow, ow);
        }
      }
    }
  });
}

} // namespace tcc::rt
