//===- Winograd.cpp - Winograd F(m x m, 3 x 3) 2-D convolution on the CPU -===//
//
// Per (image, group, block of output tiles): the input tiles are transformed channel by channel
// into V[xi][ic][tile] (xi the (m+2)^2 transform positions), one sgemm per xi
// gives M[xi][oc][tile] = U[xi][oc][ic] x V[xi][ic][tile], and the output transform writes the
// m x m tiles, clipped at the border. The transforms run on whole rows of the block's tiles
// (tiles innermost, contiguous), so the compiler vectorises them; gathering the tiles and
// scattering the results are plain copies. Threads take whole items (each its own workspace);
// a single item (one small image) splits its transforms by channel and shares out its GEMMs
// instead.
#include "Winograd.h"
#include "IsaClones.h"
#include "Parallel.h"
#include "tcc/Support/ConvShapes.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tcc::rt {
namespace {

// Output tile size: F(4x4,3x3) (6x6 input tiles, 36 GEMMs) needs 4x fewer multiplications than
// direct convolution (F(2x2,3x3): 2.25x) and measured 1.4-1.6x faster than F(2x2) on ResNet's 3x3
// layers. Its error is larger but stays well within 1e-4 relative: against a float64 reference
// on uniform random data (inputs in [-1, 1] or [0, 1], weights in [-1, 1] or [-0.05, 0.05]),
// max |error| / max |reference| was 5e-6 .. 1.5e-5 for 64..512 input channels (F(2x2) and
// im2col + sgemm: ~5e-7). The weight transform runs in double; the points 0, +-1, +-2 keep the
// transform entries small. Outputs near zero carry the same absolute error, so elementwise
// relative error can be larger there (as for any reordered float sum).
constexpr int64_t kWorkspaceBudget = 768 << 10; // per-thread V + M + scratch, about L2

// ---- The row transforms: n contiguous values (tiles) per row, rows `xs` / `ys` apart ----------

// B^T of F(2x2,3x3): rows {1,0,-1,0}, {0,1,1,0}, {0,-1,1,0}, {0,1,0,-1}.
TCC_ISA_BODY void
inputRows2Body(const float *__restrict x, int64_t xs, float *__restrict y, int64_t ys, int64_t n) {
#pragma GCC ivdep
  for (int64_t t = 0; t < n; ++t) {
    float x0 = x[t], x1 = x[xs + t], x2 = x[2 * xs + t], x3 = x[3 * xs + t];
    y[t] = x0 - x2;
    y[ys + t] = x1 + x2;
    y[2 * ys + t] = x2 - x1;
    y[3 * ys + t] = x1 - x3;
  }
}
TCC_ISA_CLONES(inputRows2, inputRows2Body)

// A^T of F(2x2,3x3): rows {1,1,1,0}, {0,1,-1,-1}.
TCC_ISA_BODY void
outputRows2Body(const float *__restrict x, int64_t xs, float *__restrict y, int64_t ys, int64_t n) {
#pragma GCC ivdep
  for (int64_t t = 0; t < n; ++t) {
    float x0 = x[t], x1 = x[xs + t], x2 = x[2 * xs + t], x3 = x[3 * xs + t];
    y[t] = x0 + x1 + x2;
    y[ys + t] = x1 - x2 - x3;
  }
}
TCC_ISA_CLONES(outputRows2, outputRows2Body)

// B^T of F(4x4,3x3) (points 0, 1, -1, 2, -2, inf).
TCC_ISA_BODY void
inputRows4Body(const float *__restrict x, int64_t xs, float *__restrict y, int64_t ys, int64_t n) {
#pragma GCC ivdep
  for (int64_t t = 0; t < n; ++t) {
    float x0 = x[t], x1 = x[xs + t], x2 = x[2 * xs + t], x3 = x[3 * xs + t],
          x4 = x[4 * xs + t], x5 = x[5 * xs + t];
    y[t] = 4.0f * x0 - 5.0f * x2 + x4;
    y[ys + t] = x3 + x4 - 4.0f * (x1 + x2);
    y[2 * ys + t] = 4.0f * (x1 - x2) + x4 - x3;
    y[3 * ys + t] = 2.0f * (x3 - x1) + x4 - x2;
    y[4 * ys + t] = 2.0f * (x1 - x3) + x4 - x2;
    y[5 * ys + t] = 4.0f * x1 - 5.0f * x3 + x5;
  }
}
TCC_ISA_CLONES(inputRows4, inputRows4Body)

// A^T of F(4x4,3x3).
TCC_ISA_BODY void
outputRows4Body(const float *__restrict x, int64_t xs, float *__restrict y, int64_t ys, int64_t n) {
#pragma GCC ivdep
  for (int64_t t = 0; t < n; ++t) {
    float x0 = x[t], x1 = x[xs + t], x2 = x[2 * xs + t], x3 = x[3 * xs + t],
          x4 = x[4 * xs + t], x5 = x[5 * xs + t];
    float s12 = x1 + x2, d12 = x1 - x2, s34 = x3 + x4, d34 = x3 - x4;
    y[t] = x0 + s12 + s34;
    y[ys + t] = d12 + 2.0f * d34;
    y[2 * ys + t] = s12 + 4.0f * s34;
    y[3 * ys + t] = d12 + 8.0f * d34 + x5;
  }
}
TCC_ISA_CLONES(outputRows4, outputRows4Body)

// G (alpha x 3) in double, for the weight transform.
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};

struct Tiles {
  int64_t m, alpha, a2, tilesY, tilesX, tiles;
};
Tiles tilesOf(const ConvGeometry &g) {
  Tiles t;
  t.m = g.winogradTile;
  t.alpha = t.m + 2;
  t.a2 = t.alpha * t.alpha;
  t.tilesY = (g.outSpatial[0] + t.m - 1) / t.m;
  t.tilesX = (g.outSpatial[1] + t.m - 1) / t.m;
  t.tiles = t.tilesY * t.tilesX;
  return t;
}

} // namespace

size_t planWinograd(ConvGeometry &g) {
  g.winogradTile = 0;
  g.winogradBlock = 0;
  if (g.outSize == 0)
    return 0;
  // The rule (tcc/Support/ConvShapes.h): F(4x4) on outputs of at least 12 x 12, F(2x2) on 6 x 6
  // to 11 x 11 (512ch @7x7: 4x4 tiles, one 16-column sgemm panel per GEMM, 1.70 -> 0.84 ms on
  // two threads), im2col below (F(2x2) there computes 16 columns in each of 16 GEMMs, im2col 16
  // or 32 in one GEMM over 9x the rows).
  g.winogradTile = winogradTileFor(g.kernel, g.strides, g.dilations, g.groupIn, g.groupOut,
                                   g.outSpatial);
  if (!g.winogradTile)
    return 0;
  Tiles t = tilesOf(g);
  int64_t perTile = t.a2 * (g.groupIn + g.groupOut + 2) * (int64_t)sizeof(float);
  // Blocks of whole 16-column panels of the sgemm (Sgemm.h: 32-column panels, 16 at the edge):
  // 20 tiles would compute 32 columns and store 20.
  int64_t block = std::max<int64_t>(16, kWorkspaceBudget / perTile / 16 * 16);
  g.winogradBlock = std::min(block, t.tiles);
  // V is stored as the sgemm's packed B: its tiles padded to whole panels (at most 32 columns).
  int64_t padded = (g.winogradBlock + 31) / 32 * 32;
  return (size_t)(t.a2 * (g.groupIn * padded + (g.groupOut + 2) * g.winogradBlock) *
                  (int64_t)sizeof(float));
}

size_t winogradWeightFloats(const ConvGeometry &g) {
  int64_t alpha = g.winogradTile + 2;
  return (size_t)(g.groups * alpha * alpha * g.groupOut * g.groupIn);
}

void winogradTransformWeights(const ConvGeometry &g, const float *weight, float *u,
                              int numThreads) {
  int64_t alpha = g.winogradTile + 2, a2 = alpha * alpha;
  const double(*G)[3] = g.winogradTile == 4 ? kG4 : kG2;
  int64_t gi = g.groupIn, go = g.groupOut;
  parallelFor(numThreads, g.outChannels, gi * a2 * 8, [&](int64_t begin, int64_t end) {
    for (int64_t oc = begin; oc < end; ++oc) {
      int64_t grp = oc / go, o = oc % go;
      for (int64_t c = 0; c < gi; ++c) {
        const float *w = weight + (oc * gi + c) * 9;
        double gw[6][3]; // G g
        for (int64_t i = 0; i < alpha; ++i)
          for (int64_t j = 0; j < 3; ++j)
            gw[i][j] = G[i][0] * w[j] + G[i][1] * w[3 + j] + G[i][2] * w[6 + j];
        for (int64_t i = 0; i < alpha; ++i)
          for (int64_t j = 0; j < alpha; ++j) {
            double v = gw[i][0] * G[j][0] + gw[i][1] * G[j][1] + gw[i][2] * G[j][2];
            u[((grp * a2 + i * alpha + j) * go + o) * gi + c] = (float)v;
          }
      }
    }
  });
}

namespace {

/// The per-worker workspace: this worker's V and M (for its item) and scratch d and tmp.
struct Workspace {
  float *base;      // worker 0's
  size_t perWorker; // floats
  float *of(int64_t worker) const { return base + (size_t)worker * perWorker; }
};

/// One item: image plane `in` (groupIn channels), tiles [t0, t0 + nb), into `out` (groupOut
/// channels), on `worker`'s workspace. threads > 1 (an item alone: a single small image) splits
/// its transforms by channel over the threads, each with its own scratch, and gives each
/// thread whole GEMMs.
/// `epilogue` (null: none) is the item's: its bias and residual start at out's first channel.
void winogradItem(const ConvGeometry &g, const Tiles &t, const float *in, const SgemmPacked *u,
                  float *out, int64_t t0, int64_t nb, const Workspace &workspace, int64_t worker,
                  int threads, const ConvEpilogue *epilogue) {
  int64_t m = t.m, alpha = t.alpha, a2 = t.a2, gi = g.groupIn, go = g.groupOut;
  int64_t ih = g.inSpatial[0], iw = g.inSpatial[1], oh = g.outSpatial[0], ow = g.outSpatial[1];
  int64_t ph = g.padLow[0], pw = g.padLow[1];
  // V[xi] (gi x nb) is written straight into the layout of the sgemm's packed B (panels of NR
  // tiles), so the GEMMs read it without a packing pass.
  const SgemmIsa isa = sgemmIsa();
  const int64_t vFloats = (int64_t)sgemmPackedFloats(isa, false, nb, gi);
  float *v = workspace.of(worker); // [a2][packed gi x nb]
  float *mm = v + a2 * vFloats;    // [a2][go][nb]
  int64_t scratchOffset = a2 * vFloats + a2 * go * nb;
  std::vector<SgemmPacked> vPacked;
  vPacked.reserve((size_t)a2);
  for (int64_t xi = 0; xi < a2; ++xi)
    vPacked.push_back(sgemmPackedView(isa, false, nb, gi, v + xi * vFloats));
  const SgemmPacked &layout = vPacked[0];
  const int64_t NR = layout.panel;
  using RowTransform = void (*)(const float *, int64_t, float *, int64_t, int64_t);
  RowTransform rows = m == 4 ? inputRows4<const float *, int64_t, float *, int64_t, int64_t>
                             : inputRows2<const float *, int64_t, float *, int64_t, int64_t>;
  RowTransform outRows = m == 4 ? outputRows4<const float *, int64_t, float *, int64_t, int64_t>
                                : outputRows2<const float *, int64_t, float *, int64_t, int64_t>;
  // Runs body(c0, c1, d, tmp) over [0, count) in chunks; d and tmp ([a2][nb] each: gathered
  // tiles, then the column pass) are the running thread's.
  auto split = [&](int64_t count, auto body) {
    float *d = workspace.of(worker) + scratchOffset;
    if (threads <= 1)
      return body(int64_t(0), count, d, d + a2 * nb);
    int64_t chunks = std::min<int64_t>(count, 4 * threads);
    parallelItems(threads, chunks, [&](int64_t w, int64_t i) {
      float *dw = workspace.of(w) + scratchOffset;
      body(count * i / chunks, count * (i + 1) / chunks, dw, dw + a2 * nb);
    });
  };

  // ---- Input transform ----
  split(gi, [&](int64_t c0, int64_t c1, float *d, float *tmp) {
    for (int64_t c = c0; c < c1; ++c) {
      const float *plane = in + c * g.inSize;
      for (int64_t k = 0; k < nb; ++k) {
        int64_t tile = t0 + k, ty = tile / t.tilesX, tx = tile % t.tilesX;
        int64_t y0 = ty * m - ph, x0 = tx * m - pw;
        if (y0 >= 0 && x0 >= 0 && y0 + alpha <= ih && x0 + alpha <= iw) {
          const float *src = plane + y0 * iw + x0;
          for (int64_t i = 0; i < alpha; ++i)
            for (int64_t j = 0; j < alpha; ++j)
              d[(i * alpha + j) * nb + k] = src[i * iw + j];
        } else {
          for (int64_t i = 0; i < alpha; ++i) {
            int64_t y = y0 + i;
            bool rowOk = y >= 0 && y < ih;
            for (int64_t j = 0; j < alpha; ++j) {
              int64_t x = x0 + j;
              d[(i * alpha + j) * nb + k] =
                  rowOk && x >= 0 && x < iw ? plane[y * iw + x] : 0.0f;
            }
          }
        }
      }
      // tmp[i][j] = sum_k BT[i][k] d[k][j]; then V[i][j] = sum_l tmp[i][l] BT[j][l].
      for (int64_t j = 0; j < alpha; ++j)
        rows(d + j * nb, alpha * nb, tmp + j * nb, alpha * nb, nb);
      for (int64_t i = 0; i < alpha; ++i)
        for (int64_t k0 = 0; k0 < nb; k0 += NR) {
          int64_t width = std::min(NR, nb - k0);
          float *dst = v + i * alpha * vFloats + layout.offset(k0, c);
          rows(tmp + i * alpha * nb + k0, nb, dst, vFloats, width);
          if (width < NR) // the last panel's padding: computed, never stored; keep it finite
            for (int64_t j = 0; j < alpha; ++j)
              std::fill(dst + j * vFloats + width, dst + j * vFloats + NR, 0.0f);
        }
    }
  });

  // ---- The (m+2)^2 GEMMs: with threads, whole GEMMs a thread (16-36 small products; splitting
  // each one over the threads synchronised them 36 times a block) ----
  auto product = [&](int64_t xi) {
    sgemm(false, false, go, nb, gi, 1.0f, nullptr, gi, nullptr, nb, 0.0f, mm + xi * go * nb, nb,
          1, &u[xi], &vPacked[(size_t)xi]);
  };
  if (threads <= 1)
    for (int64_t xi = 0; xi < a2; ++xi)
      product(xi);
  else
    parallelItems(threads, a2, [&](int64_t, int64_t xi) { product(xi); });

  // ---- Output transform ----
  split(go, [&](int64_t o0, int64_t o1, float *d, float *tmp) {
    for (int64_t o = o0; o < o1; ++o) {
      // tmp[r][j] = sum_i AT[r][i] M[i][j]; then Y[r][s] = sum_l tmp[r][l] AT[s][l].
      for (int64_t j = 0; j < alpha; ++j)
        outRows(mm + (j * go + o) * nb, alpha * go * nb, tmp + j * nb, alpha * nb, nb);
      for (int64_t r = 0; r < m; ++r)
        outRows(tmp + r * alpha * nb, nb, d + r * m * nb, nb, nb);
      float *plane = out + o * g.outSize;
      const float *residual = epilogue && epilogue->residual
                                  ? epilogue->residual + o * g.outSize : nullptr;
      for (int64_t k = 0; k < nb; ++k) {
        int64_t tile = t0 + k, ty = tile / t.tilesX, tx = tile % t.tilesX;
        int64_t y0 = ty * m, x0 = tx * m;
        int64_t rowsHere = std::min(m, oh - y0), colsHere = std::min(m, ow - x0);
        for (int64_t r = 0; r < rowsHere; ++r)
          for (int64_t s = 0; s < colsHere; ++s) {
            int64_t at = (y0 + r) * ow + x0 + s;
            float y = d[(r * m + s) * nb + k];
            plane[at] = epilogue ? epilogue->apply(y, o, residual + at) : y;
          }
        if (epilogue)
          activateRows(epilogue->activation, plane + y0 * ow + x0, rowsHere, colsHere, ow);
      }
    }
  });
}

} // namespace

void winogradPackWeights(const ConvGeometry &g, const float *u, std::vector<SgemmPacked> &packed,
                         int numThreads) {
  int64_t alpha = g.winogradTile + 2, a2 = alpha * alpha, gi = g.groupIn, go = g.groupOut;
  packed.clear();
  for (int64_t i = 0; i < g.groups * a2; ++i)
    packed.push_back(packSgemmA(sgemmIsa(), false, go, gi, u + i * go * gi, gi, numThreads));
}

void runWinograd(const ConvGeometry &g, const float *input, const SgemmPacked *packed,
                 float *output, float *workspace, int numThreads, const ConvEpilogue *epilogue) {
  Tiles t = tilesOf(g);
  int64_t images = g.batch * g.groups;
  // Blocks of whole 16-tile units (the sgemm's narrowest panel: a GEMM over fewer tiles costs
  // as much), at most g.winogradBlock tiles (the workspace). Several threads: smaller blocks
  // until every thread has two items, where the units allow.
  int64_t units = (t.tiles + 15) / 16, unitsPerBlock = std::max<int64_t>(1, g.winogradBlock / 16);
  if (numThreads > 1)
    while (unitsPerBlock > 1 &&
           images * ((units + unitsPerBlock - 1) / unitsPerBlock) < 2 * numThreads)
      --unitsPerBlock;
  int64_t block = std::min({t.tiles, unitsPerBlock * 16, g.winogradBlock});
  int64_t blocks = (t.tiles + block - 1) / block;
  int64_t items = images * blocks;
  // One item (a single small image): it takes the threads itself.
  int itemThreads = items == 1 ? numThreads : 1;
  Workspace ws{workspace, g.workspaceBytes / sizeof(float)};
  parallelItems(numThreads, items, [&](int64_t worker, int64_t item) {
    int64_t image = item / blocks, t0 = item % blocks * block;
    int64_t n = image / g.groups, grp = image % g.groups;
    int64_t nb = std::min(block, t.tiles - t0);
    int64_t outAt = (n * g.outChannels + grp * g.groupOut) * g.outSize;
    ConvEpilogue itemEpilogue;
    if (epilogue) { // rebased to the item's first channel
      itemEpilogue = *epilogue;
      if (itemEpilogue.bias)
        itemEpilogue.bias += grp * g.groupOut;
      if (itemEpilogue.residual)
        itemEpilogue.residual += outAt;
    }
    winogradItem(g, t, input + (n * g.inChannels + grp * g.groupIn) * g.inSize,
                 packed + grp * t.a2, output + outAt, t0, nb, ws, worker, itemThreads,
                 epilogue ? &itemEpilogue : nullptr);
  });
}

} // namespace tcc::rt
