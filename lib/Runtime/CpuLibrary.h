//===- CpuLibrary.h - The runtime's CPU library calls: gemm, conv, topk ---===//
//
// The semantics of tk.gemm, tk.conv and tk.topk on contiguous row-major host buffers. Each op has
// a Geometry, made (and checked) once when an artifact is loaded: make*Geometry throws
// tcc::rt::Error naming the inconsistency, so the run functions never see bad shapes.
//
// f32 GEMMs and convolutions go to libtccrt's own sgemm (Sgemm.h: microkernels chosen by CPU
// features), a convolution as im2col into a workspace + sgemm (a 1x1 stride-1 unpadded one is a
// plain GEMM; the im2col copies follow a plan made once per convolution: long runs of an input
// row copied, short ones gathered); f64 GEMMs go to OpenBLAS. Operands that are program
// constants (weights) are packed for the sgemm once and kept by the step. `numThreads` bounds
// every helper thread.
#pragma once

#include "Sgemm.h"

#include <memory>
#include "tcc/Runtime/tccrt.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tcc::rt {

using Shape = std::vector<int64_t>;

//===--- GEMM -------------------------------------------------------------===//

struct GemmGeometry {
  tccrt_dtype dtype = TCCRT_F32; // f16, bf16, f32 or f64
  bool transA = false, transB = false;
  double alpha = 1.0, beta = 0.0;
  int64_t m = 0, n = 0, k = 0;
  Shape batch;                   // c's batch dims
  Shape aBatchStrides, bBatchStrides; // in matrices; 0 where a/b broadcast
  int64_t numBatches = 1;
};

/// Constant operands packed for sgemm (one per distinct matrix), kept across runs by a step.
/// They are reused only while the operand is a program constant at the same address.
class Im2col; // CpuLibrary.cpp

struct PackedOperand {
  std::vector<SgemmPacked> matrices;
  const void *source = nullptr;
  /// runConv16's f32 copy of 16-bit weights it runs on runConv, and runConv's packing of it.
  std::vector<float> widened;
  std::shared_ptr<PackedOperand> widenedPacking;
  /// Weights rearranged for a kernel that reads them in another order (channels-last
  /// depthwise: [tap][channel]).
  std::vector<float> reordered;
  /// runConv's im2col plan (where each column of each tile reads), kept while the geometry and
  /// the tiles stay the same.
  std::shared_ptr<const Im2col> im2col;
};

/// Empties `cache` unless it holds what was packed, for this process's kernels, from the
/// constant at `source`; returns whether it did (its contents must then be made again). A
/// non-constant operand empties it every time (it is packed on every call).
bool resetIfStale(PackedOperand &cache, const void *source, bool isConstant, SgemmIsa isa);

/// Checks tk.gemm's shape rules (same rank >= 2, one dtype f16/bf16/f32/f64, matrix dims agree, batch
/// dims of a and b equal to c's or 1).
GemmGeometry makeGemmGeometry(tccrt_dtype dtype, const Shape &a, const Shape &b, const Shape &c,
                              bool transA, bool transB, double alpha, double beta);
/// `packedA`/`packedB` (optional) keep the packed forms of a and b across runs when
/// `aIsConstant`/`bIsConstant` (not f64). `epilogue` (f32 only: a bias of n values added to
/// every row of every batch, then ReLU) is applied as each tile of c is stored.
void runGemm(const GemmGeometry &g, const void *a, const void *b, void *c, int numThreads,
             PackedOperand *packedA = nullptr, bool aIsConstant = false,
             PackedOperand *packedB = nullptr, bool bIsConstant = false,
             const SgemmEpilogue *epilogue = nullptr);

//===--- Convolution ------------------------------------------------------===//

struct ConvGeometry {
  int64_t batch = 0, inChannels = 0, outChannels = 0, groups = 1;
  Shape inSpatial, kernel, outSpatial, strides, padLow, padHigh, dilations;
  Shape lhsDilations;      // input dilation per spatial dim (1: none)
  bool transposed = false; // some lhs dilation > 1: GEMM + col2im (TransposedConv.h)
  int64_t transposedTile = 0; // input pixels per col2im tile
  int64_t inSize = 0, kernelSize = 0, outSize = 0; // elements per channel / per filter tap set
  int64_t groupIn = 0, groupOut = 0;               // channels per group
  int64_t rows = 0;                                // groupIn * kernelSize: the im2col rows
  bool pointwise = false;                          // 1x1, stride 1, no padding: plain GEMM
  int64_t columnTile = 0;                          // output columns per im2col tile
  // Winograd F(m x m, 3 x 3) (Winograd.h): m (2 or 4; 0 = not used) and tiles per work item.
  int64_t winogradTile = 0, winogradBlock = 0;
  size_t workspaceBytes = 0;
  tccrt_dtype dtype = TCCRT_F32; // f32, or f16/bf16 (runConv16)
  // Input and output hold the channel dim last ([N, S..., C]); the fields above describe the
  // channels-first convolution (ChannelsLast.h). f32 only.
  bool channelsLast = false;
};

/// Whether convolutions of geometries `a` and `b` pack (Winograd: transform) their weights the
/// same way, so that one's cached weights (PackedOperand) serve the other: the geometries are
/// equal but for the batch size, which no weight layout depends on. (A symbolic program keeps a
/// convolution's cached weights across bindings of its sizes when this holds.)
bool sameWeightPacking(const ConvGeometry &a, const ConvGeometry &b);

/// What a convolution applies to each output element (image n, channel c, position p) as it
/// writes it, in this order (tk.conv's epilogue): + bias[c], + residual[(n, c, p)] (a tensor of
/// the output's shape, e.g. a residual connection), then, when clamp, max(x, lo) and
/// min(x, hi) (ReLU: 0, +inf; ReLU6: 0, 6); NaN stays NaN; then the activation (Activation.h:
/// SiLU, hard swish), which each path applies to its output tile while it is in cache
/// (activateRows). f32 convolutions only.
struct ConvEpilogue {
  const float *bias = nullptr;
  const float *residual = nullptr;
  bool clamp = false;
  float lo = 0.0f, hi = 0.0f;
  Activation activation;

  bool any() const {
    return bias || residual || clamp || activation.kind != ActivationKind::None;
  }
  /// The epilogue but the activation on one element of channel c whose residual is
  /// residualAt[0] (when any).
  float apply(float x, int64_t c, const float *residualAt) const {
    if (bias)
      x += bias[c];
    if (residual)
      x += *residualAt;
    if (clamp) { // as maxps/minps (the sgemm's tiles): NaN stays NaN
      x = lo > x ? lo : x;
      x = hi < x ? hi : x;
    }
    return x;
  }
};

/// Checks tk.conv's rules (f32, f16 or bf16: `dtype`; same rank >= 3, one stride/pad/dilation per spatial dim,
/// strides and dilations >= 1, kernel dims >= 1, channels agree with groups, the output shape
/// is what tcc.conv infers; negative pads allowed). `lhsDilation` empty: 1 in every dim.
ConvGeometry makeConvGeometry(const Shape &input, const Shape &weight, const Shape &output,
                              const Shape &strides, const Shape &padLow, const Shape &padHigh,
                              const Shape &dilations, int64_t groups,
                              const Shape &lhsDilation = {}, tccrt_dtype dtype = TCCRT_F32);
/// Convolutions over a dilated input (lhs_dilation > 1) are one GEMM per input tile + col2im
/// (TransposedConv.h).
/// `workspace` holds numThreads x g.workspaceBytes (64-byte aligned); unused when pointwise.
/// The weights, packed for the sgemm (per group; Winograd: transformed, per group and transform
/// position), live in `cache` (a local one when null) and are reused across calls when
/// `weightIsConstant` (a program constant at the same address). 3x3 stride-1 2-D convolutions
/// with enough channels take the Winograd path (Winograd.h).
/// 2-D convolutions whose groups have one input channel (depthwise) are direct loops
/// (Depthwise.h). One thread: im2col tiles + sgemm. More: each thread takes whole (image, group, column tile)
/// items, im2col + a single-threaded sgemm on its own workspace. Pointwise convs are one
/// threaded sgemm.
/// `epilogue` (null: none) is applied as each path writes its output: in the sgemm's tiles
/// (im2col, 1x1), in the Winograd output transform and the depthwise row copy; after col2im
/// (transposed). Its residual may overlap the output (it is then read first).
void runConv(const ConvGeometry &g, const float *input, const float *weight, float *output,
             float *workspace, int numThreads, PackedOperand *cache = nullptr,
             bool weightIsConstant = false, const ConvEpilogue *epilogue = nullptr);
/// runConv for f16/bf16 tensors (g.dtype; f32 sums, the output rounded once): im2col and
/// pointwise convolutions are 16-bit GEMMs (gemm16: AVX512-BF16 for bf16 where the CPU has it),
/// their weights packed once as runConv's; transposed and depthwise ones are widened to f32
/// and run by runConv (correct, not faster). No Winograd: a bf16 GEMM of the im2col matrix
/// does the 3x3 convolutions' work at twice the f32 rate.
void runConv16(const ConvGeometry &g, const uint16_t *input, const uint16_t *weight,
               uint16_t *output, void *workspace, int numThreads, PackedOperand *cache,
               bool weightIsConstant);

//===--- Pooling ----------------------------------------------------------===//

/// A window reduction (tk.pool: max or sum, padding contributing the identity) over two
/// adjacent dims of a rank-4 f32 tensor seen as [outer, H, W, inner]: NCHW pooling (outer =
/// N * C, inner = 1) or NHWC (outer = N, inner = C). The other dims have window 1, stride 1,
/// no padding.
struct PoolGeometry {
  bool max = true;
  int64_t outer = 0, inner = 1;
  int64_t ih = 0, iw = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

/// Checks tk.pool's rules (f32, rank 4, per-dim attributes, pooled dims adjacent, output
/// shape as reduce_window infers it); throws Error naming what is wrong.
PoolGeometry makePoolGeometry(tccrt_dtype dtype, const Shape &input, const Shape &output,
                              bool max, const Shape &window, const Shape &strides,
                              const Shape &padLow, const Shape &padHigh, const Shape &dilations);
/// The pooling: per output row, the window's rows reduced into a row buffer, then its columns;
/// a NaN in a max window gives NaN.
void runPool(const PoolGeometry &g, const float *input, float *output, int numThreads);

//===--- Top-k ------------------------------------------------------------===//

struct TopKGeometry {
  tccrt_dtype dtype = TCCRT_F32;
  bool largest = true;
  int64_t outer = 1, size = 0, inner = 1, k = 0;
};

/// Checks tk.topk's rules: dim in range, values of the input's dtype and indices i64 of one
/// shape, equal to the input's except along dim, where it is k <= the input's size.
TopKGeometry makeTopKGeometry(tccrt_dtype inputType, const Shape &input, tccrt_dtype valuesType,
                              const Shape &values, tccrt_dtype indicesType, const Shape &indices,
                              int64_t dim, bool largest);
/// Sorted top k (ties: the lower index first; NaN above +inf, i.e. first when largest and
/// last when smallest), as the reference kernel.
void runTopK(const TopKGeometry &g, const void *input, void *values, int64_t *indices);

} // namespace tcc::rt
