//===- ChannelsLast.cpp - Convolutions on [N, S..., C] tensors --------------===//
//
// See ChannelsLast.h.
//
//===----------------------------------------------------------------------===//
#include "ChannelsLast.h"

#include "CpuMathAvx512.h"

#include "IsaClones.h"
#include "Parallel.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace tcc::rt {
namespace {

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
  for (int64_t r = 0; r < rows; ++r) {
    epilogueRow(out + r * channels, channels, e->bias,
                e->residual ? e->residual + (firstRow + r) * channels : nullptr, e->clamp, e->lo,
                e->hi);
    activateRows(e->activation, out + r * channels, 1, channels, channels);
  }
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
    tile.activation = epilogue->activation;
  }
  sgemm(false, true, rows, n, k, 1.0f, input, k, nullptr, k, 0.0f, output, n, numThreads,
        nullptr, &cache->matrices[0], &tile);
}

/// One output row (image n, row y) of a channels-last depthwise convolution: every position
/// and channel, a vector of channels at a time in one accumulator over the taps (one load of
/// the input and one of the weights per multiply-add), then the epilogue, stored once.
struct DepthwiseRow {
  const float *in;   // the image [ih][iw][C]
  const float *w;    // [tap][C]
  float *out;        // the row [ow][C]
  const float *residual; // the row's residual, or null
  const float *bias; // [C] or null
  bool clamp;
  float lo, hi;
  int64_t C, ih, iw, ow, y, kh, kw, sh, sw, dh, dw, ph, pw;
};

/// to[0, n) = from[0, n) for n < 16, by fixed-size copies of 8, 4, 2 and 1 floats.
TCC_ISA_BODY void copyPart(float *to, const float *from, int64_t n) {
  int64_t i = 0;
  if (n & 8) {
    __builtin_memcpy(to, from, 8 * sizeof(float));
    i += 8;
  }
  if (n & 4) {
    __builtin_memcpy(to + i, from + i, 4 * sizeof(float));
    i += 4;
  }
  if (n & 2) {
    __builtin_memcpy(to + i, from + i, 2 * sizeof(float));
    i += 2;
  }
  if (n & 1)
    to[i] = from[i];
}

/// An accumulator vector with the epilogue applied: + bias (a whole vector), + residual (its
/// first n lanes), then clamped as ConvEpilogue::apply (NaN stays NaN). Null: none.
template <class V>
TCC_ISA_BODY V epilogueVector(V y, const float *bias, const float *residual, int64_t n,
                              bool clamp, float lo, float hi) {
  constexpr int L = sizeof(V) / sizeof(float);
  V b = {};
  if (bias) {
    __builtin_memcpy(&b, bias, sizeof(V));
    y += b;
  }
  if (residual) {
    if (n == L)
      __builtin_memcpy(&b, residual, sizeof(V));
    else
      copyPart(reinterpret_cast<float *>(&b), residual, n);
    y += b;
  }
  if (clamp) {
    V vlo = y - y + lo, vhi = y - y + hi;
    y = vlo > y ? vlo : y;
    y = vhi < y ? vhi : y;
  }
  return y;
}

/// Stores channels [c, c + NV lanes(V)) of the NX output columns from x: the sums `acc` with
/// the row's epilogue.
template <class V, int NX, int NV>
TCC_ISA_BODY void storeDepthwise(const DepthwiseRow &r, int64_t x, int64_t c,
                                 const V (&acc)[NX][NV]) {
  constexpr int L = sizeof(V) / sizeof(float);
  const int64_t C = r.C;
#pragma GCC unroll 8
  for (int p = 0; p < NX; ++p) {
    float *o = r.out + (x + p) * C + c;
    const float *res = r.residual ? r.residual + (x + p) * C + c : nullptr;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      V y = epilogueVector(acc[p][v], r.bias ? r.bias + c + L * v : nullptr,
                           res ? res + L * v : nullptr, L, r.clamp, r.lo, r.hi);
      __builtin_memcpy(o + L * v, &y, sizeof(V));
    }
  }
}

/// Channels [c0, C) of the n output columns from x, one at a time (the channels past the
/// last whole vector); taps outside the input are skipped.
TCC_ISA_BODY void depthwiseLastChannels(const DepthwiseRow &r, int64_t x, int64_t n,
                                        int64_t c0) {
  const int64_t C = r.C;
  for (int64_t c = c0; c < C; ++c)
    for (int64_t p = 0; p < n; ++p) {
      const int64_t x0 = (x + p) * r.sw - r.pw;
      float acc = 0.0f;
      for (int64_t ky = 0; ky < r.kh; ++ky) {
        const int64_t iy = r.y * r.sh - r.ph + ky * r.dh;
        if (iy < 0 || iy >= r.ih)
          continue;
        for (int64_t kx = 0; kx < r.kw; ++kx) {
          const int64_t ix = x0 + kx * r.dw;
          if (ix >= 0 && ix < r.iw)
            acc += r.in[(iy * r.iw + ix) * C + c] * r.w[(ky * r.kw + kx) * C + c];
        }
      }
      const float *res = r.residual ? r.residual + (x + p) * C : nullptr;
      ConvEpilogue e{r.bias, res, r.clamp, r.lo, r.hi};
      r.out[(x + p) * C + c] = e.apply(acc, c, res ? res + c : nullptr);
    }
}

/// Channels [c, c + NV lanes(V)) of the NX output columns x, x + 1, ... (all with the taps
/// [kxLo, kxHi) inside the row): NX * NV independent accumulators (a chain of one vector's
/// taps alone would wait on the multiply-add latency), each weight vector loaded once for the
/// NX columns; V is the ISA's register (TCC_ISA_CLONES_VECTOR), the channels past the last
/// whole register in narrower vectors.
template <class V, int NX, int NV>
TCC_ISA_BODY void depthwiseBlock(const DepthwiseRow &r, int64_t x, int64_t kxLo, int64_t kxHi,
                                 int64_t c) {
  constexpr int L = sizeof(V) / sizeof(float);
  const int64_t C = r.C, step = r.sw * C; // from one output column's input to the next's
  const int64_t x0 = x * r.sw - r.pw;
  V acc[NX][NV] = {};
  for (int64_t ky = 0; ky < r.kh; ++ky) {
    const int64_t iy = r.y * r.sh - r.ph + ky * r.dh;
    if (iy < 0 || iy >= r.ih)
      continue;
    const float *row = r.in + (iy * r.iw + x0) * C + c;
    const float *wrow = r.w + ky * r.kw * C + c;
    for (int64_t kx = kxLo; kx < kxHi; ++kx) {
      V b[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        __builtin_memcpy(&b[v], wrow + kx * C + L * v, sizeof(V));
#pragma GCC unroll 4
      for (int p = 0; p < NX; ++p)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
          V a;
          __builtin_memcpy(&a, row + kx * r.dw * C + p * step + L * v, sizeof(V));
          acc[p][v] += a * b[v];
        }
    }
  }
  storeDepthwise<V, NX, NV>(r, x, c, acc);
}

/// Every channel of the NX output columns from x (taps [kxLo, kxHi) inside the row for each).
template <class V, int NX>
TCC_ISA_BODY void depthwiseColumns(const DepthwiseRow &r, int64_t x, int64_t kxLo,
                                   int64_t kxHi) {
  constexpr int L = sizeof(V) / sizeof(float);
  const int64_t C = r.C;
  int64_t c = 0;
  if (NX == 1)
    for (; c + 4 * L <= C; c += 4 * L)
      depthwiseBlock<V, 1, 4>(r, x, kxLo, kxHi, c);
  for (; c + 2 * L <= C; c += 2 * L)
    depthwiseBlock<V, NX, 2>(r, x, kxLo, kxHi, c);
  for (; c + L <= C; c += L)
    depthwiseBlock<V, NX, 1>(r, x, kxLo, kxHi, c);
  if constexpr (L > 8)
    for (; c + 8 <= C; c += 8)
      depthwiseBlock<IsaVec8, NX, 1>(r, x, kxLo, kxHi, c);
  if constexpr (L > 4)
    for (; c + 4 <= C; c += 4)
      depthwiseBlock<IsaVec4, NX, 1>(r, x, kxLo, kxHi, c);
  depthwiseLastChannels(r, x, NX, c);
}

/// Whether output columns [x, x + n) of row `r` (DepthwiseRow, DenseRow) read only inside the
/// input row, every tap of each.
template <class Row> bool columnsInside(const Row &r, int64_t x, int64_t n) {
  return x + n <= r.ow && x * r.sw - r.pw >= 0 &&
         (x + n - 1) * r.sw - r.pw + (r.kw - 1) * r.dw < r.iw;
}

/// The square depthwise path's helpers: AVX-512 only, inlined into depthwiseSquareRows.
#define TCC_AVX512_BODY static inline __attribute__((always_inline, target("avx512f")))

/// A KxK filter's channels [c, c + lanes(V)) for one output row, in registers for the whole
/// row: the epilogue's vectors, a 3x3 filter's nine weight vectors (larger filters' are read
/// from L1, `w`), the input rows its filter rows read (null: outside the image, skipped) and
/// the row's fields the blocks use (copies: stores to the output cannot change them, so they
/// are not reloaded after each).
template <class V, int K> struct DepthwiseSquareChannels {
  V w3[K == 3 ? 9 : 1];
  const float *w; // [tap][C] from channel c
  V bias, lo, hi;
  bool hasBias, clamp;
  Activation activation;
  bool activateInRegisters; // 16-channel vectors and an activation activateVectors computes
  const float *rows[K];
  const float *residual; // channel c of the row's first position, or null
  float *out;            // likewise
  int64_t C, iw, pw;
};

/// The NX output columns from x of a KxK filter at column stride S: each filter row's
/// (NX - 1) S + K input vectors are loaded once and serve every column and tap that reads
/// them (where depthwiseBlock loads one for each multiply-add). Edge: input columns outside
/// the row (the padding) read as zeros. Then the epilogue (+ bias, + residual, clamp:
/// epilogueVector's), the activation (16-channel vectors: in registers, where
/// activatesVectors) and the stores.
template <class V, int K, int S, int NX, bool Edge>
TCC_AVX512_BODY void depthwiseSquareBlock(const DepthwiseSquareChannels<V, K> &k, int64_t x) {
  constexpr int NI = (NX - 1) * S + K; // input columns read
  const int64_t C = k.C, x0 = x * S - k.pw;
  V acc[NX] = {};
#pragma GCC unroll 7
  for (int ky = 0; ky < K; ++ky) {
    if (!k.rows[ky])
      continue;
    // One pointer stepped by C: GCC otherwise keeps each column's offset in a register of
    // its own, and with 8 columns (up to 21 input columns) spills them.
    const float *at = k.rows[ky] + x0 * C;
    V in[NI];
#pragma GCC unroll 32
    for (int i = 0; i < NI; ++i) {
      if (Edge && (x0 + i < 0 || x0 + i >= k.iw))
        in[i] = V{};
      else
        __builtin_memcpy(&in[i], at, sizeof(V));
      at += C;
      asm("" : "+r"(at)); // opaque: the next column from this one, not from the first
    }
    const float *w = k.w + ky * K * C;
#pragma GCC unroll 7
    for (int kx = 0; kx < K; ++kx) {
      V b;
      if constexpr (K == 3) {
        b = k.w3[ky * 3 + kx];
      } else {
        __builtin_memcpy(&b, w, sizeof(V));
        w += C;
        asm("" : "+r"(w));
      }
#pragma GCC unroll 8
      for (int p = 0; p < NX; ++p)
        acc[p] += in[p * S + kx] * b;
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < NX; ++p) {
    V &y = acc[p];
    if (k.hasBias)
      y += k.bias;
    if (k.residual) {
      V res;
      __builtin_memcpy(&res, k.residual + (x + p) * C, sizeof(V));
      y += res;
    }
    if (k.clamp) {
      y = k.lo > y ? k.lo : y;
      y = k.hi < y ? k.hi : y;
    }
  }
  if constexpr (sizeof(V) == 64)
    if (k.activateInRegisters) // the NX vectors' activations interleaved
      activateVectors<NX>(k.activation, reinterpret_cast<__m512 *>(acc));
#pragma GCC unroll 8
  for (int p = 0; p < NX; ++p)
    __builtin_memcpy(k.out + (x + p) * C, &acc[p], sizeof(V));
}

/// The NX columns from x by depthwiseSquareBlock, reading the padding as zeros unless they
/// read only inside the row.
template <class V, int K, int S, int NX>
TCC_AVX512_BODY void depthwiseSquareGroup(const DepthwiseRow &r,
                                       const DepthwiseSquareChannels<V, K> &k, int64_t x) {
  if (columnsInside(r, x, NX))
    depthwiseSquareBlock<V, K, S, NX, false>(k, x);
  else
    depthwiseSquareBlock<V, K, S, NX, true>(k, x);
}

/// The widest group of columns: its inputs, sums and a weight vector (a 3x3 filter's nine)
/// fit in 32 registers.
constexpr int depthwiseSquareWidest(int K, int S) { return K == 3 && S == 2 ? 6 : 8; }

/// The NX columns from x, NX in [1, Widest].
template <class V, int K, int S>
TCC_AVX512_BODY void depthwiseSquareColumns(const DepthwiseRow &r,
                                         const DepthwiseSquareChannels<V, K> &k, int64_t x,
                                         int64_t n) {
  constexpr int Widest = depthwiseSquareWidest(K, S);
  switch (n) {
  case 8:
    if constexpr (Widest >= 8)
      return depthwiseSquareGroup<V, K, S, 8>(r, k, x);
    break;
  case 7:
    if constexpr (Widest >= 7)
      return depthwiseSquareGroup<V, K, S, 7>(r, k, x);
    break;
  case 6: return depthwiseSquareGroup<V, K, S, 6>(r, k, x);
  case 5: return depthwiseSquareGroup<V, K, S, 5>(r, k, x);
  case 4: return depthwiseSquareGroup<V, K, S, 4>(r, k, x);
  case 3: return depthwiseSquareGroup<V, K, S, 3>(r, k, x);
  case 2: return depthwiseSquareGroup<V, K, S, 2>(r, k, x);
  default: return depthwiseSquareGroup<V, K, S, 1>(r, k, x);
  }
}

/// One output row's columns for channels [c, c + lanes(V)): 16-channel vectors in the fewest
/// groups of at most the widest, of sizes that differ by at most one (7 columns one group of
/// 7, 14 two of 7, where 8, 4, 2, 1 would make three and three groups, each with its edge
/// tests); narrower vectors (a channel tail) the widest, then 4, 2 and 1 columns.
template <class V, int K, int S>
TCC_AVX512_BODY void depthwiseSquareRow(const DepthwiseRow &r,
                                     const DepthwiseSquareChannels<V, K> &k) {
  constexpr int Widest = depthwiseSquareWidest(K, S);
  if constexpr (sizeof(V) == 64) {
    const int64_t groups = (r.ow + Widest - 1) / Widest, base = r.ow / groups;
    const int64_t wider = r.ow % groups; // the first `wider` groups take base + 1 columns
    for (int64_t i = 0, x = 0; i < groups; ++i) {
      const int64_t n = base + (i < wider);
      depthwiseSquareColumns<V, K, S>(r, k, x, n);
      x += n;
    }
  } else {
    for (int64_t x = 0; x < r.ow;) {
      const int64_t left = r.ow - x;
      const int64_t n = left >= Widest ? Widest : left >= 4 ? 4 : left >= 2 ? 2 : 1;
      depthwiseSquareColumns<V, K, S>(r, k, x, n);
      x += n;
    }
  }
}

/// Channels [c, c + lanes(V)) of output rows [y0, y1) of a KxK filter at column stride S
/// (`r` is the image's first row): the weights (3x3) and the epilogue's vectors loaded once,
/// then each row's columns (depthwiseSquareRow; the activation in registers, or on the row's
/// vectors just stored). Rows in the inner loop: the K input rows a row reads for these channels (under 11
/// KiB for 56 columns and K = 3) stay in L1 for the next output rows, where a whole row's
/// channels (32 KiB for 144 channels) would not.
template <class V, int K, int S>
TCC_AVX512_BODY void depthwiseSquareChannels(const DepthwiseRow &r, int64_t c, int64_t y0,
                                          int64_t y1, const Activation &activation) {
  constexpr int L = sizeof(V) / sizeof(float);
  const int64_t C = r.C;
  DepthwiseSquareChannels<V, K> k;
  if constexpr (K == 3)
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t)
      __builtin_memcpy(&k.w3[t], r.w + t * C + c, sizeof(V));
  k.w = r.w + c;
  k.hasBias = r.bias;
  k.bias = V{};
  if (r.bias)
    __builtin_memcpy(&k.bias, r.bias + c, sizeof(V));
  k.clamp = r.clamp;
  k.lo = r.lo - V{};
  k.hi = r.hi - V{};
  k.activation = activation;
  k.activateInRegisters = L == 16 && activatesVectors(activation);
  k.C = C;
  k.iw = r.iw;
  k.pw = r.pw;
  for (int64_t y = y0; y < y1; ++y) {
    for (int ky = 0; ky < K; ++ky) {
      const int64_t iy = y * r.sh - r.ph + ky * r.dh;
      k.rows[ky] = iy >= 0 && iy < r.ih ? r.in + iy * r.iw * C + c : nullptr;
    }
    k.residual = r.residual ? r.residual + y * r.ow * C + c : nullptr;
    k.out = r.out + y * r.ow * C + c;
    depthwiseSquareRow<V, K, S>(r, k);
    if (!k.activateInRegisters)
      activateRows(activation, k.out, r.ow, L, C);
  }
}

/// Output rows [y0, y1) of one image (`r`: its first row) of a KxK filter at column stride S
/// (any row stride and dilation), channels [c0, c1) (c0 a multiple of 16) a vector at a time:
/// 16 (AVX-512: 32 registers hold a group's inputs, sums and weights), then 8 and 4, the rest
/// one by one (only in the last channels: c1 == C).
template <int K, int S>
__attribute__((target("avx512f"), noinline)) void
depthwiseSquareRows(const DepthwiseRow &r, int64_t c0, int64_t c1, int64_t y0, int64_t y1,
                    const Activation &activation) {
  int64_t c = c0;
  for (; c + 16 <= c1; c += 16)
    depthwiseSquareChannels<IsaVec16, K, S>(r, c, y0, y1, activation);
  for (; c + 8 <= c1; c += 8)
    depthwiseSquareChannels<IsaVec8, K, S>(r, c, y0, y1, activation);
  for (; c + 4 <= c1; c += 4)
    depthwiseSquareChannels<IsaVec4, K, S>(r, c, y0, y1, activation);
  if (c == c1)
    return;
  for (int64_t y = y0; y < y1; ++y) {
    DepthwiseRow row = r;
    row.y = y;
    row.out = r.out + y * r.ow * r.C;
    row.residual = r.residual ? r.residual + y * r.ow * r.C : nullptr;
    depthwiseLastChannels(row, 0, r.ow, c); // c1 == C: the channels past the last vector
    activateRows(activation, row.out + c, r.ow, c1 - c, r.C);
  }
}

/// depthwiseSquareRows for the filter and stride, or null where there is none: AVX-512,
/// square 3x3, 5x5 and 7x7 filters, column stride 1 or 2 (7x7: 1), no column dilation.
using DepthwiseSquareRowsFn = void (*)(const DepthwiseRow &, int64_t, int64_t, int64_t,
                                       int64_t, const Activation &);
DepthwiseSquareRowsFn depthwiseSquareRowsFor(const ConvGeometry &g) {
  if (sgemmIsa() != SgemmIsa::Avx512 || g.kernel[0] != g.kernel[1] || g.dilations[1] != 1)
    return nullptr;
  const int64_t k = g.kernel[1], s = g.strides[1];
  if (k == 3 && (s == 1 || s == 2))
    return s == 1 ? depthwiseSquareRows<3, 1> : depthwiseSquareRows<3, 2>;
  if (k == 5 && (s == 1 || s == 2))
    return s == 1 ? depthwiseSquareRows<5, 1> : depthwiseSquareRows<5, 2>;
  if (k == 7 && s == 1)
    return depthwiseSquareRows<7, 1>;
  return nullptr;
}

/// One output row's columns of a channels-last convolution row `r` (DepthwiseRow, DenseRow):
/// runs of `wide` columns whose taps are all inside the input row, else of `narrow`, else one
/// column with its taps clipped to [kxLo, kxHi): run(x, n, kxLo, kxHi) with n = wide, narrow
/// or 1.
template <class Row, class Run>
TCC_ISA_BODY void forEachColumnRun(const Row &r, int64_t wide, int64_t narrow, const Run &run) {
  auto inside = [&](int64_t x, int64_t n) { return columnsInside(r, x, n); };
  for (int64_t x = 0; x < r.ow;) {
    if (inside(x, wide)) {
      run(x, wide, 0, r.kw);
      x += wide;
    } else if (inside(x, narrow)) {
      run(x, narrow, 0, r.kw);
      x += narrow;
    } else {
      const int64_t x0 = x * r.sw - r.pw;
      int64_t kxLo = 0, kxHi = r.kw; // kx with 0 <= x0 + kx * dw < iw
      while (kxLo < kxHi && x0 + kxLo * r.dw < 0)
        ++kxLo;
      while (kxHi > kxLo && x0 + (kxHi - 1) * r.dw >= r.iw)
        --kxHi;
      run(x, 1, kxLo, kxHi);
      ++x;
    }
  }
}

template <class V> TCC_ISA_BODY void depthwiseRowBody(const DepthwiseRow &r) {
  // Columns whose taps are all inside the row go 4 (else 2) at a time: each weight vector
  // loaded serves several columns, and there are more accumulators in flight.
  forEachColumnRun(r, 4, 2, [&](int64_t x, int64_t n, int64_t kxLo, int64_t kxHi) TCC_ISA_LAMBDA {
    if (n == 4)
      depthwiseColumns<V, 4>(r, x, kxLo, kxHi);
    else if (n == 2)
      depthwiseColumns<V, 2>(r, x, kxLo, kxHi);
    else
      depthwiseColumns<V, 1>(r, x, kxLo, kxHi);
  });
}
TCC_ISA_CLONES_VECTOR(depthwiseRow, depthwiseRowBody)

void depthwise(const ConvGeometry &g, const float *input, const float *weight, float *output,
               int numThreads, PackedOperand *cache, bool weightIsConstant,
               const ConvEpilogue *epilogue) {
  const int64_t C = g.outChannels, ih = g.inSpatial[0], iw = g.inSpatial[1];
  const int64_t kh = g.kernel[0], kw = g.kernel[1], oh = g.outSpatial[0], ow = g.outSpatial[1];
  const int64_t taps = kh * kw;
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
  // Output row y of image n (its input image, output and residual rows, the epilogue).
  auto rowOf = [&](int64_t n, int64_t y) {
    const int64_t at = (n * oh + y) * ow * C;
    return DepthwiseRow{input + n * ih * iw * C,
                        w.data(),
                        output + at,
                        epilogue && epilogue->residual ? epilogue->residual + at : nullptr,
                        epilogue ? epilogue->bias : nullptr,
                        epilogue && epilogue->clamp,
                        epilogue ? epilogue->lo : 0.0f,
                        epilogue ? epilogue->hi : 0.0f,
                        C, ih, iw, ow, y, kh, kw, g.strides[0], g.strides[1],
                        g.dilations[0], g.dilations[1], g.padLow[0], g.padLow[1]};
  };
  if (const DepthwiseSquareRowsFn rows = depthwiseSquareRowsFor(g)) {
    // Items: (image, 16 channels, band of rows): on one thread whole images; on more, bands
    // enough for 8 items a thread, which parallelFor's contiguous chunks share out evenly
    // (9 slices of 144 channels alone would split 5 / 4 over two threads).
    const int64_t slices = (C + 15) / 16;
    const int64_t bands =
        numThreads > 1 ? std::clamp<int64_t>((8 * numThreads + g.batch * slices - 1) /
                                                 (g.batch * slices), 1, oh)
                       : 1;
    const Activation activation = epilogue ? epilogue->activation : Activation{};
    parallelFor(numThreads, g.batch * slices * bands, oh * ow * taps * 16 / bands,
                [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t n = item / (slices * bands), slice = item / bands % slices,
                      band = item % bands;
        const int64_t c0 = 16 * slice, c1 = std::min(C, c0 + 16);
        const int64_t y0 = oh * band / bands, y1 = oh * (band + 1) / bands;
        rows(rowOf(n, 0), c0, c1, y0, y1, activation);
      }
    });
    return;
  }
  // Items: output rows (image, oh); each writes its ow x C outputs once.
  parallelFor(numThreads, g.batch * oh, ow * taps * C, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      depthwiseRow(rowOf(item / oh, item % oh));
      if (epilogue)
        activateRows(epilogue->activation, output + item * ow * C, 1, ow * C, ow * C);
    }
  });
}

/// One output row (image n, row y) of a channels-last dense 2-D convolution with few input
/// values per output (DenseDirect): the output channels in vectors, the reduction over (tap,
/// input channel) read in place, one broadcast input value per pixel and step.
struct DenseRow {
  const float *in;       // the image [ih][iw][C]
  const float *w;        // [ky][kx][c][Kp]: output channels padded to whole vectors with zeros
  float *out;            // the row [ow][K]
  const float *residual; // the row's residual [ow][K], or null
  const float *bias;     // [Kp] (zeros past K) or null
  bool clamp;
  float lo, hi;
  int64_t C, K, Kp, ih, iw, ow, y, kh, kw, sh, sw, dh, dw, ph, pw;
};

/// Output channels [k, k + 16 NV) of the NX output columns from x, whose taps [kxLo, kxHi) are
/// inside the row: NX x NV accumulators over every (ky, kx, c); each step loads NV weight
/// vectors and broadcasts one input value per column. Without dilation along the row, a row of
/// taps is one run of (kxHi - kxLo) x C values, contiguous in the input and in the weights.
/// The epilogue follows in registers; a block past the last output channel stores only the
/// channels that exist. Each (NX, NV) is its own function (TCC_ISA_CLONES): inlined into one
/// row loop, GCC's register allocation spilled accumulators.
template <class V, int NX, int NV>
TCC_ISA_BODY void denseBlockBody(const DenseRow *rp, int64_t x, int64_t kxLo, int64_t kxHi,
                                 int64_t k, std::integral_constant<int, NX>,
                                 std::integral_constant<int, NV>) {
  constexpr int L = sizeof(V) / sizeof(float);
  const DenseRow &r = *rp;
  const int64_t C = r.C, Kp = r.Kp, step = r.sw * C;
  const int64_t x0 = x * r.sw - r.pw;
  const bool oneRun = r.dw == 1;
  const int64_t run = oneRun ? (kxHi - kxLo) * C : C, runs = oneRun ? 1 : kxHi - kxLo;
  V acc[NX][NV] = {};
  for (int64_t ky = 0; ky < r.kh; ++ky) {
    const int64_t iy = r.y * r.sh - r.ph + ky * r.dh;
    if (iy < 0 || iy >= r.ih)
      continue;
    for (int64_t i = 0; i < runs; ++i) {
      const int64_t kx = kxLo + i;
      const float *in = r.in + (iy * r.iw + x0 + kx * r.dw) * C;
      const float *w = r.w + (ky * r.kw + kx) * C * Kp + k;
      for (int64_t j = 0; j < run; ++j, w += Kp) {
        V b[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
          __builtin_memcpy(&b[v], w + L * v, sizeof(V));
#pragma GCC unroll 24
        for (int p = 0; p < NX; ++p) {
          const float a = in[p * step + j];
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v)
            acc[p][v] += a * b[v];
        }
      }
    }
  }
  const int64_t K = r.K;
#pragma GCC unroll 24
  for (int p = 0; p < NX; ++p) {
    float *o = r.out + (x + p) * K + k;
    const float *res = r.residual ? r.residual + (x + p) * K + k : nullptr;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const int64_t n = std::min<int64_t>(L, K - k - L * v); // channels of this vector
      if (n <= 0)
        continue;
      // (Written out, not epilogueVector: with the helper GCC allocated the main loop's
      // registers worse, the 7x7 stem 2.46 -> 3.0 ms.)
      V y = acc[p][v], b = {};
      if (r.bias) {
        __builtin_memcpy(&b, r.bias + k + L * v, sizeof(V));
        y += b;
      }
      if (res) {
        if (n == L)
          __builtin_memcpy(&b, res + L * v, sizeof(V));
        else
          copyPart(reinterpret_cast<float *>(&b), res + L * v, n);
        y += b;
      }
      if (r.clamp) { // as ConvEpilogue::apply: NaN stays NaN
        V lo = y - y + r.lo, hi = y - y + r.hi;
        y = lo > y ? lo : y;
        y = hi < y ? hi : y;
      }
      // A vector past the last channel is stored whole when what it writes past the pixel's
      // channels is the next column's, stored later by this block (which holds all of its
      // channels; and no residual there is still to be read, which may be the output
      // itself); else only its channels.
      if (n == L || (p + 1 < NX && !res && k == 0 && L * NV >= r.Kp))
        __builtin_memcpy(o + L * v, &y, sizeof(V));
      else
        copyPart(o + L * v, reinterpret_cast<const float *>(&y), n);
    }
  }
}
TCC_ISA_CLONES_VECTOR(denseBlockAt, denseBlockBody)

template <int NX, int NV>
void denseBlock(const DenseRow &r, int64_t x, int64_t kxLo, int64_t kxHi, int64_t k) {
  denseBlockAt(&r, x, kxLo, kxHi, k, std::integral_constant<int, NX>(),
               std::integral_constant<int, NV>());
}

/// Every output channel of the columns [x, x + W) in blocks of 4, 2 and 1 registers of L
/// lanes (the ISA's), with as many columns per block as keep about 24 accumulators (32
/// registers: AVX-512; W = 24) or 12 (16 registers: AVX2, SSE2; W = 12); edge columns (W = 4,
/// 1) in blocks of one register.
template <int W>
void denseColumns(const DenseRow &r, int64_t x, int64_t kxLo, int64_t kxHi, int64_t L) {
  int64_t k = 0;
  if (W == 24) {
    for (; k + 4 * L <= r.Kp; k += 4 * L)
      for (int64_t p = 0; p < W; p += 6)
        denseBlock<6, 4>(r, x + p, kxLo, kxHi, k);
    for (; k + 2 * L <= r.Kp; k += 2 * L)
      for (int64_t p = 0; p < W; p += 12)
        denseBlock<12, 2>(r, x + p, kxLo, kxHi, k);
  } else if (W == 12) {
    for (; k + 4 * L <= r.Kp; k += 4 * L)
      for (int64_t p = 0; p < W; p += 3)
        denseBlock<3, 4>(r, x + p, kxLo, kxHi, k);
    for (; k + 2 * L <= r.Kp; k += 2 * L)
      for (int64_t p = 0; p < W; p += 6)
        denseBlock<6, 2>(r, x + p, kxLo, kxHi, k);
  }
  for (; k < r.Kp; k += L)
    denseBlock<W, 1>(r, x, kxLo, kxHi, k);
}

/// The columns of one output row: W at a time where every tap is inside the row, else 4, else
/// one (with its taps clipped).
template <int W> void denseRowColumns(const DenseRow &r, int64_t L) {
  forEachColumnRun(r, W, 4, [&](int64_t x, int64_t n, int64_t kxLo, int64_t kxHi) {
    if (n == W)
      denseColumns<W>(r, x, kxLo, kxHi, L);
    else if (n == 4)
      denseColumns<4>(r, x, kxLo, kxHi, L);
    else
      denseColumns<1>(r, x, kxLo, kxHi, L);
  });
}

void denseRow(const DenseRow &r) {
  const int64_t L = isaVectorLanes();
  if (L == 16)
    denseRowColumns<24>(r, L);
  else
    denseRowColumns<12>(r, L);
}

/// A dense (one group) 2-D convolution whose filters are small (kDenseDirectMaxReduction
/// values or fewer per output: a network's stem on 3 input channels): the output channels-last
/// by a direct register-tiled loop over the input in place, weights rearranged once to
/// [ky][kx][c][K rounded up to 16]. The channels-first im2col GEMM of such a filter has a short
/// k and spends its time in im2col and the C tile stores.
void denseDirect(const ConvGeometry &g, const float *input, const float *weight, float *output,
                 int numThreads, PackedOperand *cache, bool weightIsConstant,
                 const ConvEpilogue *epilogue) {
  const int64_t C = g.inChannels, K = g.outChannels, Kp = (K + 15) / 16 * 16;
  const int64_t ih = g.inSpatial[0], iw = g.inSpatial[1], kh = g.kernel[0], kw = g.kernel[1];
  const int64_t oh = g.outSpatial[0], ow = g.outSpatial[1], taps = kh * kw;
  PackedOperand local;
  if (!cache)
    cache = &local;
  std::vector<float> &w = cache->reordered; // [tap][c][Kp]
  if (resetIfStale(*cache, weight, weightIsConstant, sgemmIsa()) || w.empty()) {
    w.assign((size_t)(taps * C * Kp), 0.0f);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t t = 0; t < taps; ++t)
          w[(t * C + c) * Kp + k] = weight[(k * C + c) * taps + t];
  }
  std::vector<float> bias; // padded with zeros to Kp: read in whole vectors
  if (epilogue && epilogue->bias) {
    bias.assign((size_t)Kp, 0.0f);
    std::copy(epilogue->bias, epilogue->bias + K, bias.begin());
  }
  parallelFor(numThreads, g.batch * oh, ow * taps * C * Kp, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / oh;
      DenseRow r{input + n * ih * iw * C,
                 w.data(),
                 output + item * ow * K,
                 epilogue && epilogue->residual ? epilogue->residual + item * ow * K : nullptr,
                 bias.empty() ? nullptr : bias.data(),
                 epilogue && epilogue->clamp,
                 epilogue ? epilogue->lo : 0.0f,
                 epilogue ? epilogue->hi : 0.0f,
                 C, K, Kp, ih, iw, ow, item % oh, kh, kw, g.strides[0], g.strides[1],
                 g.dilations[0], g.dilations[1], g.padLow[0], g.padLow[1]};
      denseRow(r);
      if (epilogue)
        activateRows(epilogue->activation, output + item * ow * K, 1, ow * K, ow * K);
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
  switch (channelsLastPath(g)) {
  case ChannelsLastPath::Pointwise:
    return pointwise(g, input, weight, output, numThreads, cache, weightIsConstant, epilogue);
  case ChannelsLastPath::Depthwise:
    return depthwise(g, input, weight, output, numThreads, cache, weightIsConstant, epilogue);
  case ChannelsLastPath::DenseDirect:
    return denseDirect(g, input, weight, output, numThreads, cache, weightIsConstant, epilogue);
  case ChannelsLastPath::ThroughChannelsFirst:
    return throughChannelsFirst(g, input, weight, output, workspace, numThreads, cache,
                                weightIsConstant, epilogue);
  }
}

ChannelsLastPath channelsLastPath(const ConvGeometry &g) {
  if (g.pointwise && g.groups == 1 && g.inChannels > 0)
    return ChannelsLastPath::Pointwise;
  if (g.kernel.size() == 2 && g.groupIn == 1 && g.groupOut == 1 && !g.transposed)
    return ChannelsLastPath::Depthwise;
  if (g.kernel.size() == 2 && g.groups == 1 && !g.transposed &&
      g.rows <= kDenseDirectMaxReduction)
    return ChannelsLastPath::DenseDirect;
  return ChannelsLastPath::ThroughChannelsFirst;
}

const char *channelsLastPathName(ChannelsLastPath path) {
  switch (path) {
  case ChannelsLastPath::Pointwise:
    return "1x1 gemm";
  case ChannelsLastPath::Depthwise:
    return "depthwise";
  case ChannelsLastPath::DenseDirect:
    return "direct";
  case ChannelsLastPath::ThroughChannelsFirst:
    return "via channels-first";
  }
  return "?";
}

} // namespace tcc::rt
