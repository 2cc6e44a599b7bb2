//===- CudaLibraryKernels.cpp - CUDA kernels for tk.conv and tk.topk ------===//
//
// Generated, shape-specialised CUDA for the ops the CPU backend hands to libtccrt's library
// (see CudaLibraryKernels.h and lib/Codegen/README.md, "Convolution and top-k on CUDA").
//
// Convolution, per group g (GEMM M = out channels per group, N = batch * output pixels,
// K = in channels per group * kernel taps):
//   y[b, g*OCg + m, p] = sum_k w[g*OCg + m, k] * B[k, (b, p)],
//   B[(c, t), (b, p)] = x[b, g*ICg + c, p * stride - pad_low + t * dilation] (0 outside).
//  * implicit GEMM: BM x BN output tiles (blocks of 256 threads, a TM x TN register micro-tile
//    each), K in steps of BK = 8 through two shared-memory buffers: the next step's A
//    (weights) and B (gathered from the input, padding as zeros) are loaded into registers
//    while the current step is multiplied, then stored into the other buffer (one barrier per
//    step). A is stored transposed (As[k][m], rows padded by 4 floats so the
//    transposing stores hit 32 different banks), B as Bs[k][n]; the micro-tile reads them as
//    16-byte vectors, each thread's 4-float groups 16 bytes apart from its neighbours' (a
//    thread with TM/TN = 8 takes two groups half a tile apart), so the vector reads are
//    conflict-free. Tiles are dealt out grid-stride, M tiles fastest (consecutive blocks
//    gather the same input columns while they are in L2).
//  * direct (depthwise: one input channel per group, more than one group, at most 8 output
//    channels per group): one thread per output element, looping over the taps; the GEMM
//    would be M = out channels per group (usually 1) by K = taps (9 for 3x3), a tile at most
//    1/2 full (1/16 for the usual multiplier 1) with little to reuse.
// Top-k: one block per (outer, inner) line, grid-stride over lines. Elements are compared as
// order-preserving unsigned keys (NaN above +inf, -0 == +0, inverted for smallest) with the
// index as tie-break, and bitonic-sorted in shared memory in chunks of up to 2048:
//  * a line that fits one chunk is sorted once and its first k written;
//  * longer lines with k <= 512: the best k so far stay sorted at the front of the chunk;
//    elements that beat the k-th best are appended behind them (a shared-memory atomic
//    counter), and the chunk is sorted only when they fill it (rarely, after the first
//    sort, unless the line is ordered against the selection);
//  * longer lines with larger k: chunk after chunk is sorted and merged with the best so far,
//    which live sorted in the outputs themselves (a merge-path merge written from the last
//    position down, so it can run in place).
//
//===----------------------------------------------------------------------===//

#include "tcc/Codegen/CudaLibraryKernels.h"

#include "LibraryKernelUtils.h"

#include "tcc/Codegen/ScalarEmitter.h"
#include "tcc/IR/SymbolicShape.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Support/SymbolBinding.h"
#include "tcc/Support/Tensor.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>

using namespace mlir;
using namespace tcc;
using namespace tcc::codegen;
using namespace tcc::codegen::detail;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

int64_t product(llvm::ArrayRef<int64_t> v) {
  int64_t p = 1;
  for (int64_t x : v)
    p *= x;
  return p;
}

constexpr int64_t kInt32Limit = (int64_t(1) << 31) - 1;
constexpr uint32_t kMaxGrid = 4096;

/// A kernel of `threads`-thread blocks over `blocks` blocks' worth of work (the grid is capped
/// at kMaxGrid: the kernels loop grid-stride over the rest).
CudaKernel makeKernel(const std::string &name, std::string source, const std::string &strategy,
                      int64_t blocks, int64_t threads) {
  CudaKernel k;
  k.name = name;
  k.source = std::move(source);
  k.strategy = strategy;
  k.launch.grid = {(uint32_t)std::clamp<int64_t>(blocks, 1, kMaxGrid), 1, 1};
  k.launch.block = {(uint32_t)threads, 1, 1};
  return k;
}

//===--- Convolution ------------------------------------------------------===//

struct ConvShape {
  // Symbolic programs: batch, in and out (and the sizes derived from them) are the largest
  // over the symbols' ranges (tiles, index widths); the kernel reads the run's values.
  int64_t batch, inChannels, outChannels, groups, groupIn, groupOut;
  std::vector<int64_t> in, kernel, out, strides, padLow, padHigh, dilations;
  std::vector<int64_t> lhsDilations; // input dilation (transposed convolution), 1 = none
  int64_t inSize, kernelSize, outSize;
  // The sizes the kernel's code reads: literals, or (symbolic) locals the prologue declares
  // from the kernel's symbols argument.
  bool symbolic = false;
  std::string batchText, inSizeText, outSizeText;
  std::vector<std::string> inText, outText, inStrideText; // per spatial dim
  std::string prologue;
  std::string batchShown;                       // the sizes as described (expressions)
  std::vector<std::string> inShown, outShown;
  SymExpr batchSym, outSizeSym; // the run's batch and output pixels (grid work)
};

ConvShape convShape(tk::ConvOp op) {
  const std::string name = "tk.conv";
  auto module = op->getParentOfType<ModuleOp>();
  SymbolRanges ranges = module ? symbolRanges(module) : SymbolRanges{};
  SymShape xDims, yDims;
  std::vector<int64_t> x = largestDims(name, op.getInput(), "input", ranges, xDims),
                       w = shapeOf(name, op.getWeight(), "weight"),
                       y = largestDims(name, op.getOutput(), "output", ranges, yDims);
  size_t rank = x.size();
  if (rank < 3 || w.size() != rank || y.size() != rank)
    throw Error(name + ": input" + list(x) + ", weight" + list(w) + " and output" + list(y) +
                " must have the same rank, at least 3");
  for (Value v : {op.getInput(), op.getWeight(), op.getOutput()})
    if (!cast<MemRefType>(v.getType()).getElementType().isF32())
      throw Error(name + ": CUDA convolutions are f32; got " +
                  typeString(cast<MemRefType>(v.getType()).getElementType()));
  ConvShape s;
  size_t spatial = rank - 2;
  s.strides.assign(op.getStrides().begin(), op.getStrides().end());
  s.padLow.assign(op.getPadLow().begin(), op.getPadLow().end());
  s.padHigh.assign(op.getPadHigh().begin(), op.getPadHigh().end());
  s.dilations.assign(op.getDilations().begin(), op.getDilations().end());
  llvm::SmallVector<int64_t> lhsDilations = op.getLhsDilationPerDim();
  s.lhsDilations.assign(lhsDilations.begin(), lhsDilations.end());
  if (s.strides.size() != spatial || s.padLow.size() != spatial ||
      s.padHigh.size() != spatial || s.dilations.size() != spatial)
    throw Error(name + ": strides, pad_low, pad_high and dilations need one entry per spatial "
                "dim (" + str(spatial) + ")");
  s.batch = x[0];
  s.inChannels = x[1];
  s.outChannels = w[0];
  s.groups = (int64_t)op.getGroups();
  if (s.groups < 1 || s.inChannels != w[1] * s.groups || s.outChannels % s.groups != 0 ||
      y[1] != s.outChannels || y[0] != s.batch)
    throw Error(name + ": channel counts do not agree with groups = " + str(s.groups) +
                ": input" + list(x) + ", weight" + list(w) + ", output" + list(y));
  bool xSymbolic = !cast<MemRefType>(op.getInput().getType()).hasStaticShape(),
       ySymbolic = !cast<MemRefType>(op.getOutput().getType()).hasStaticShape();
  s.symbolic = xSymbolic || ySymbolic;
  if (s.symbolic && (!xSymbolic || !ySymbolic || xDims[1] != SymExpr(x[1]) ||
                     yDims[1] != SymExpr(y[1])))
    throw Error(name + ": symbolic channel counts (input " + shapeString(xDims) + ", output " +
                shapeString(yDims) + "); the CUDA convolution kernels take symbolic batch and "
                "spatial sizes only");
  for (size_t d = 0; d < spatial; ++d)
    if (w[d + 2] < 1 || s.strides[d] < 1 || s.dilations[d] < 1 || s.lhsDilations[d] < 1)
      throw Error(name + ": kernel dims, strides and dilations must be >= 1; got weight" +
                  list(w) + ", strides" + list(s.strides) + ", dilations" + list(s.dilations));
  for (size_t d = 0; d < spatial && !s.symbolic; ++d) { // (symbolic: the verifier's rule)
    int64_t k = w[d + 2], st = s.strides[d], dil = s.dilations[d], ld = s.lhsDilations[d];
    __int128 dilatedIn = x[d + 2] == 0 ? 0 : (__int128)(x[d + 2] - 1) * ld + 1;
    __int128 padded = dilatedIn + s.padLow[d] + s.padHigh[d];
    __int128 span = (__int128)(k - 1) * dil + 1;
    int64_t expected = padded < span ? 0 : (int64_t)((padded - span) / st + 1);
    if (y[d + 2] != expected)
      throw Error(name + ": output spatial dim " + str(d) + " is " + str(y[d + 2]) +
                  ", the convolution of input" + list(x) + " with weight" + list(w) +
                  " gives " + str(expected));
  }
  s.in.assign(x.begin() + 2, x.end());
  s.kernel.assign(w.begin() + 2, w.end());
  s.out.assign(y.begin() + 2, y.end());
  s.inSize = product(s.in);
  s.kernelSize = product(s.kernel);
  s.outSize = product(s.out);
  s.groupIn = s.inChannels / s.groups;
  s.groupOut = s.outChannels / s.groups;

  // The sizes as the code reads them.
  s.batchShown = xDims[0].str();
  for (size_t d = 0; d < spatial; ++d) {
    s.inShown.push_back(xDims[d + 2].str());
    s.outShown.push_back(yDims[d + 2].str());
  }
  if (!s.symbolic) {
    s.batchText = str(s.batch);
    s.inSizeText = str(s.inSize);
    s.outSizeText = str(s.outSize);
    s.batchSym = SymExpr(s.batch);
    s.outSizeSym = SymExpr(s.outSize);
    int64_t stride = 1;
    s.inStrideText.assign(spatial, "");
    for (size_t d = spatial; d-- > 0;) {
      s.inText.insert(s.inText.begin(), str(s.in[d]));
      s.outText.insert(s.outText.begin(), str(s.out[d]));
      s.inStrideText[d] = str(stride);
      stride *= s.in[d];
    }
    return s;
  }
  // Locals of the run's sizes, from the symbol values (ScalarEmitter's size expressions).
  s.prologue = ScalarEmitter::symbolLocals(op->getParentOfType<func::FuncOp>(), "tcc_symbols");
  auto declare = [&](const std::string &local, const SymExpr &e) {
    s.prologue += "  const I " + local + " = (I)" + ScalarEmitter::sizeExpr(e) + ";\n";
    return local;
  };
  s.batchSym = xDims[0];
  s.batchText = declare("tcc_batch", xDims[0]);
  SymExpr inSize(1), outSize(1);
  s.inStrideText.assign(spatial, "");
  for (size_t d = spatial; d-- > 0;) {
    s.inStrideText[d] = declare("tcc_in_stride" + str(d), inSize);
    s.inText.insert(s.inText.begin(), declare("tcc_in" + str(d), xDims[d + 2]));
    s.outText.insert(s.outText.begin(), declare("tcc_out" + str(d), yDims[d + 2]));
    inSize *= xDims[d + 2];
    outSize *= yDims[d + 2];
  }
  s.inSizeText = declare("tcc_in_size", inSize);
  s.outSizeText = declare("tcc_out_size", outSize);
  s.outSizeSym = outSize;
  return s;
}

std::string describe(const ConvShape &s) {
  // Symbolic sizes by their expressions: equal kernels hash equally.
  return "x=[" + s.batchShown + "," + str(s.inChannels) + "]" + textList(s.inShown) + " w=[" +
         str(s.outChannels) + "," + str(s.groupIn) + "]" + list(s.kernel) + " y=" +
         textList(s.outShown) + " strides=" + list(s.strides) + " pad_low=" + list(s.padLow) +
         " pad_high=" + list(s.padHigh) + " dilations=" + list(s.dilations) +
         " groups=" + str(s.groups) +
         (llvm::all_of(s.lhsDilations, [](int64_t d) { return d == 1; })
              ? ""
              : " lhs_dilation=" + list(s.lhsDilations));
}

/// Reading the input at coordinate `q` (an expression: a position in the dilated input) of
/// spatial dim d: the condition that an input element is there, and its index. With an input
/// dilation s, only multiples of s hold one (a negative q fails the unsigned compare).
std::pair<std::string, std::string> dilatedInput(const ConvShape &s, size_t d,
                                                 const std::string &q, const std::string &U) {
  int64_t ld = s.lhsDilations[d];
  std::string bound = s.symbolic ? "(" + U + ")" + s.inText[d] : s.inText[d] + "u";
  if (ld == 1)
    return {"(" + U + ")" + q + " < " + bound, q};
  std::string index = "(" + q + " / " + str(ld) + ")";
  return {q + " % " + str(ld) + " == 0 && (" + U + ")" + index + " < " + bound, index};
}

/// Lines that split the output pixel `p` (an expression) into coordinates and set
/// `<prefix>o<d>` = the first input coordinate of each spatial dim.
std::string originCode(const ConvShape &s, const std::string &p, const std::string &prefix,
                       const std::string &indent, const std::string &I) {
  std::string code;
  size_t spatial = s.out.size();
  std::string rest = p;
  for (size_t d = spatial; d-- > 0;) {
    std::string coord = d == 0 ? rest : "(" + rest + " % " + s.outText[d] + ")";
    code += indent + "const " + I + " " + prefix + "o" + str(d) + " = " + coord + " * " +
            str(s.strides[d]) + " - (" + str(s.padLow[d]) + ");\n";
    if (d > 0) {
      std::string next = prefix + "q" + str(d);
      code += indent + "const " + I + " " + next + " = " + rest + " / " + s.outText[d] + ";\n";
      rest = next;
    }
  }
  return code;
}

/// "int" when every offset and coordinate the kernels compute fits in 31 bits, else
/// "long long".
std::string indexType(const ConvShape &s) {
  __int128 biggest = std::max({s.batch * s.inChannels * s.inSize,
                               s.batch * s.outChannels * s.outSize,
                               s.outChannels * s.groupIn * s.kernelSize,
                               s.batch * s.outSize});
  for (size_t d = 0; d < s.in.size(); ++d) {
    __int128 reach = (__int128)s.strides[d] * s.out[d] + std::abs(s.padLow[d]) +
                     std::abs(s.padHigh[d]) + (__int128)s.dilations[d] * s.kernel[d] +
                     (__int128)s.in[d] * s.lhsDilations[d];
    biggest = std::max(biggest, reach);
  }
  return biggest < kInt32Limit ? "int" : "long long";
}

/// The unsigned type of index type `I`: bounds checks are one unsigned compare (a negative
/// coordinate wraps above the bound).
std::string unsignedOf(const std::string &I) {
  return I == "int" ? "unsigned" : "unsigned long long";
}

/// The prelude, a comment naming the convolution (and `note`: further comment lines, each
/// starting with a newline), and the opening of the kernel `name` with `launchBounds` (empty:
/// none).
std::string convHead(const std::string &name, const std::string &desc, const std::string &note,
                     const std::string &launchBounds, bool symbolic = false) {
  return ScalarEmitter(Target::Cuda).prelude() + "\n// tk.conv " + desc + note +
         "\nTCC_EXPORT void " + (launchBounds.empty() ? "" : launchBounds + " ") + name +
         "(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y" +
         (symbolic ? ", const int64_t *__restrict__ tcc_symbols" : "") + ") {\n";
}

/// A kernel that does nothing (its output has no elements).
CudaKernel emptyConv(const std::string &name, const std::string &desc) {
  return makeKernel(name,
                    convHead(name, desc, "", "") +
                        "  // nothing to compute: the output has no elements\n}\n",
                    "empty", 1, 32);
}

struct GemmTiles {
  int bm, bn, tm, tn;
  static constexpr int bk = 8, threads = 256;
};

GemmTiles chooseTiles(const ConvShape &s) {
  int64_t m = s.groupOut, n = s.batch * s.outSize;
  // 128 x 128 tiles with 8 x 8 micro-tiles do twice the FMAs per shared-memory read of
  // 64 x 64 with 4 x 4; worth it when the channels fill the tile and there are still tiles
  // enough for a full wave of a large GPU (132 SMs, 2 blocks each).
  auto tiles = [&](int64_t bm, int64_t bn) {
    return s.groups * ((m + bm - 1) / bm) * ((n + bn - 1) / bn);
  };
  if (m >= 96 && tiles(128, 128) >= 264)
    return {128, 128, 8, 8};
  // Otherwise 4096-element tiles as tall as the group's channels need.
  if (m > 32)
    return {64, 64, 4, 4};
  if (m > 16)
    return {32, 128, 4, 4};
  return {16, 256, 4, 4};
}

/// Row (or column) of micro-tile element `i` of thread `t` in a tile of extent `tile` with
/// `per` elements per thread: groups of 4 consecutive elements, a thread's groups half a tile
/// apart.
std::string microIndex(int per, int tile, const std::string &t, int i) {
  if (per == 4)
    return t + " * 4 + " + str(i);
  return str((i / 4) * (tile / 2)) + " + " + t + " * 4 + " + str(i % 4);
}

CudaKernel emitGemmConv(const ConvShape &s, const std::string &name, const std::string &desc) {
  GemmTiles t = chooseTiles(s);
  const int bk = GemmTiles::bk, threads = GemmTiles::threads;
  int64_t M = s.groupOut, NC = s.batch * s.outSize, K = s.groupIn * s.kernelSize;
  int64_t tilesM = (M + t.bm - 1) / t.bm, tilesN = (NC + t.bn - 1) / t.bn;
  int64_t tiles = s.groups * tilesM * tilesN;
  std::string I = indexType(s), U = unsignedOf(I);
  int aPer = std::max(1, t.bm * bk / threads), bPer = bk * t.bn / threads;
  bool aGuard = t.bm * bk < threads; // fewer A elements than threads
  int rowStep = threads / t.bn;      // rows of Bs one pass of the block loads
  size_t spatial = s.in.size();

  std::string strategy = "implicit-gemm " + str(t.bm) + "x" + str(t.bn) + "x" + str(bk) +
                         " micro " + str(t.tm) + "x" + str(t.tn);
  // At least 2 blocks per SM (<= 128 registers) for the 4 x 4 micro-tiles: without the
  // minimum, ptxas for sm_90 picks 80 registers and spills some of the 16 x 256 tiles'
  // gathers. The 8 x 8 micro-tiles need more than 128.
  std::string src =
      convHead(name, desc,
               "\n// " + strategy + ": GEMM M=" + str(M) + " N=" + str(NC) + " K=" + str(K) +
                   " per group, " + str(tiles) + " tiles",
               "__launch_bounds__(" + str(threads) + ", " + (t.tm == 8 ? "1" : "2") + ")",
               s.symbolic);
  src += "  typedef " + I + " I;\n";
  src += s.prologue;
  src += "  constexpr int BM = " + str(t.bm) + ", BN = " + str(t.bn) + ", BK = " + str(bk) +
         ", TM = " + str(t.tm) + ", TN = " + str(t.tn) + ", THREADS = " + str(threads) + ";\n";
  src += "  constexpr I M = " + str(M) + ", K = " + str(K) + ", TILES_M = " + str(tilesM) + ";\n";
  if (s.symbolic) {
    src += "  const I NC = " + s.batchText + " * " + s.outSizeText + ";\n";
    src += "  const I TILES_N = (NC + BN - 1) / BN;\n";
    src += "  const long long TILES = (long long)" + str(s.groups * tilesM) + " * TILES_N;\n";
  } else {
    src += "  constexpr I NC = " + str(NC) + ", TILES_N = " + str(tilesN) + ";\n";
    src += "  constexpr long long TILES = " + str(tiles) + "LL;\n";
  }
  src += "  __shared__ __align__(16) float As[2][BK][BM + 4]; // A transposed, rows padded\n";
  src += "  __shared__ __align__(16) float Bs[2][BK][BN];\n";
  src += "  const int tid = threadIdx.x;\n";
  src += "  const int tx = tid % (BN / TN), ty = tid / (BN / TN);\n";
  src += "  const int bcol = tid % BN, brow = tid / BN; // this thread's B loads\n";
  src += "  for (long long tile = blockIdx.x; tile < TILES; tile += gridDim.x) {\n";
  src += "    const I mt = (I)(tile % TILES_M);\n";
  src += "    const I nt = (I)((tile / TILES_M) % TILES_N);\n";
  src += "    const I g = (I)(tile / (TILES_M * TILES_N));\n";
  src += "    const I m0 = mt * BM, n0 = nt * BN;\n";
  src += "    const float *wg = w + g * (M * K);\n";
  // The B column this thread gathers: its image and the first input coordinate of each dim.
  src += "    const I bn = n0 + bcol;\n";
  src += "    const bool bnOk = bn < NC;\n";
  src += "    const I bnc = bnOk ? bn : 0;\n";
  src += "    const I bimg = bnc / " + s.outSizeText + ", bpix = bnc % " + s.outSizeText + ";\n";
  src += originCode(s, "bpix", "b", "    ", I);
  src += "    const float *xg = x + (bimg * " + str(s.inChannels) + " + g * " + str(s.groupIn) +
         ") * (I)" + s.inSizeText + ";\n";
  src += "    float ra[" + str(aPer) + "], rb[" + str(bPer) + "];\n";
  src += "    float acc[TM][TN];\n";
  src += "#pragma unroll\n    for (int i = 0; i < TM; ++i)\n#pragma unroll\n"
         "      for (int j = 0; j < TN; ++j)\n        acc[i][j] = 0.0f;\n";

  // Loads of one K step starting at `k0` into ra/rb.
  auto loads = [&](const std::string &k0, const std::string &ind) {
    std::string c;
    c += ind + "#pragma unroll\n";
    c += ind + "for (int e = 0; e < " + str(aPer) + "; ++e) {\n";
    c += ind + "  const int lin = tid + e * THREADS;\n";
    c += ind + "  const I am = m0 + lin / BK, ak = " + k0 + " + lin % BK;\n";
    c += ind + "  ra[e] = " + (aGuard ? "lin < BM * BK && " : "") +
         "am < M && ak < K ? wg[am * K + ak] : 0.0f;\n";
    c += ind + "}\n";
    c += ind + "#pragma unroll\n";
    c += ind + "for (int e = 0; e < " + str(bPer) + "; ++e) {\n";
    c += ind + "  const I bk = " + k0 + " + brow + e * " + str(rowStep) + ";\n";
    c += ind + "  const I tap = bk % " + str(s.kernelSize) + ", ch = bk / " +
         str(s.kernelSize) + ";\n";
    std::string inside = "bnOk && bk < K", offset = "ch * (I)" + s.inSizeText;
    std::string rest = "tap";
    for (size_t d = spatial; d-- > 0;) {
      std::string kd = d == 0 ? rest : "(" + rest + " % " + str(s.kernel[d]) + ")";
      c += ind + "  const I i" + str(d) + " = bo" + str(d) + " + " + kd + " * " +
           str(s.dilations[d]) + ";\n";
      if (d > 0) {
        c += ind + "  const I tq" + str(d) + " = " + rest + " / " + str(s.kernel[d]) + ";\n";
        rest = "tq" + str(d);
      }
      auto [valid, index] = dilatedInput(s, d, "i" + str(d), U);
      inside += " && " + valid;
      offset += " + " + index + (s.inStrideText[d] == "1" ? "" : " * " + s.inStrideText[d]);
    }
    c += ind + "  rb[e] = " + inside + " ? xg[" + offset + "] : 0.0f;\n";
    c += ind + "}\n";
    return c;
  };

  // Shared-memory stores of ra/rb into buffer `buf`.
  auto stores = [&](const std::string &buf, const std::string &ind) {
    std::string c;
    c += ind + "#pragma unroll\n";
    c += ind + "for (int e = 0; e < " + str(aPer) + "; ++e) {\n";
    c += ind + "  const int lin = tid + e * THREADS;\n";
    if (aGuard)
      c += ind + "  if (lin < BM * BK)\n  ";
    c += ind + "  As[" + buf + "][lin % BK][lin / BK] = ra[e];\n";
    c += ind + "}\n";
    c += ind + "#pragma unroll\n";
    c += ind + "for (int e = 0; e < " + str(bPer) + "; ++e)\n";
    c += ind + "  Bs[" + buf + "][brow + e * " + str(rowStep) + "][bcol] = rb[e];\n";
    return c;
  };
  // Double-buffered K loop, one barrier per step: step s multiplies buffer s % 2 while the
  // next step's loads (issued before the multiply) are stored into the other buffer, which
  // every thread finished reading before the previous step's barrier.
  src += loads("0", "    ");
  src += stores("0", "    ");
  src += "    __syncthreads();\n";
  src += "    int buf = 0;\n";
  src += "    for (I k0 = 0; k0 < K; k0 += BK) {\n";
  src += "      const bool more = k0 + BK < K;\n";
  src += "      if (more) {\n";
  src += loads("(k0 + BK)", "        ");
  src += "      }\n";
  src += "#pragma unroll\n";
  src += "      for (int kk = 0; kk < BK; ++kk) {\n";
  src += "        float a[TM], b[TN];\n";
  // The thread's micro-tile row (column) of As (Bs) into a (b), as 16-byte vectors.
  auto vectorReads = [&](const char *from, const char *to, int per, int tile,
                         const char *thread) {
    for (int i = 0; i < per; i += 4) {
      src += "        {\n          const tcc_vec<float, 4> v = *(const tcc_vec<float, 4> *)&" +
             std::string(from) + "[buf][kk][" + microIndex(per, tile, thread, i) + "];\n";
      for (int q = 0; q < 4; ++q)
        src += "          " + std::string(to) + "[" + str(i + q) + "] = v.v[" + str(q) + "];\n";
      src += "        }\n";
    }
  };
  vectorReads("As", "a", t.tm, t.bm, "ty");
  vectorReads("Bs", "b", t.tn, t.bn, "tx");
  src += "#pragma unroll\n        for (int i = 0; i < TM; ++i)\n#pragma unroll\n"
         "          for (int j = 0; j < TN; ++j)\n"
         "            acc[i][j] = fmaf(a[i], b[j], acc[i][j]);\n";
  src += "      }\n";
  src += "      if (more) {\n";
  src += stores("buf ^ 1", "        ");
  src += "      }\n";
  src += "      buf ^= 1;\n";
  src += "      __syncthreads();\n";
  src += "    }\n";
  // Stores: y[b, g*OCg + m, p].
  src += "#pragma unroll\n";
  src += "    for (int j = 0; j < TN; ++j) {\n";
  src += "      const I n = n0 + " +
         (t.tn == 4 ? std::string("tx * 4 + j")
                    : "(j / 4) * (BN / 2) + tx * 4 + (j % 4)") + ";\n";
  src += "      if (n >= NC)\n        continue;\n";
  src += "      const I img = n / " + s.outSizeText + ", pix = n % " + s.outSizeText + ";\n";
  src += "      float *yc = y + (img * " + str(s.outChannels) + " + g * M) * (I)" +
         s.outSizeText + " + pix;\n";
  src += "#pragma unroll\n";
  src += "      for (int i = 0; i < TM; ++i) {\n";
  src += "        const I m = m0 + " +
         (t.tm == 4 ? std::string("ty * 4 + i")
                    : "(i / 4) * (BM / 2) + ty * 4 + (i % 4)") + ";\n";
  src += "        if (m < M)\n";
  src += "          yc[m * (I)" + s.outSizeText + "] = acc[i][j];\n";
  src += "      }\n";
  src += "    }\n";
  src += "  }\n";
  src += "}\n";

  CudaKernel k = makeKernel(name, std::move(src), strategy, tiles, threads);
  if (s.symbolic) {
    k.launch.gridWork =
        (SymExpr(s.groups * tilesM) * SymExpr::ceilDiv(s.batchSym * s.outSizeSym, SymExpr(t.bn)))
            .str();
    k.launch.workPerBlock = 1;
    k.launch.symbolsArgument = true;
  }
  return k;
}

CudaKernel emitDirectConv(const ConvShape &s, const std::string &name, const std::string &desc) {
  const int threads = 256;
  int64_t total = s.batch * s.outChannels * s.outSize;
  std::string I = indexType(s), U = unsignedOf(I);
  size_t spatial = s.in.size();

  std::string strategy = "direct (depthwise)";
  std::string src =
      convHead(name, desc,
               "\n// " + strategy + ": one thread per output element, the taps in registers' reach",
               "__launch_bounds__(" + str(threads) + ")", s.symbolic);
  src += "  typedef " + I + " I;\n";
  src += s.prologue;
  if (s.symbolic)
    src += "  const long long TOTAL = (long long)" + s.batchText + " * " +
           str(s.outChannels) + " * " + s.outSizeText + ";\n";
  else
    src += "  constexpr long long TOTAL = " + str(total) + "LL;\n";
  src += "  for (long long e = (long long)blockIdx.x * " + str(threads) +
         " + threadIdx.x; e < TOTAL; e += (long long)gridDim.x * " + str(threads) + ") {\n";
  src += "    const I pix = (I)(e % " + s.outSizeText + ");\n";
  src += "    const I oc = (I)((e / " + s.outSizeText + ") % " + str(s.outChannels) + ");\n";
  src += "    const I img = (I)(e / ((long long)" + s.outSizeText + " * " + str(s.outChannels) +
         "));\n";
  src += originCode(s, "pix", "", "    ", I);
  // groupIn == 1: the input channel is the group's.
  src += "    const float *xc = x + (img * " + str(s.inChannels) + " + oc / " +
         str(s.groupOut) + ") * (I)" + s.inSizeText + ";\n";
  src += "    const float *wc = w + oc * " + str(s.kernelSize) + ";\n";
  src += "    float acc = 0.0f;\n";
  std::string ind = "    ", offset, tap;
  for (size_t d = 0; d < spatial; ++d) {
    std::string k = "k" + str(d), i = "i" + str(d);
    // Up to 64 taps from this dim inwards unroll fully (the tap offsets become constants);
    // beyond, the innermost loop unrolls by 4 and outer ones not at all.
    int64_t inward = product(llvm::ArrayRef(s.kernel).drop_front(d));
    src += ind + (inward <= 64 ? "#pragma unroll\n"
                  : d + 1 == spatial ? "#pragma unroll 4\n"
                                     : "#pragma unroll 1\n");
    src += ind + "for (int " + k + " = 0; " + k + " < " + str(s.kernel[d]) + "; ++" + k +
           ") {\n";
    ind += "  ";
    src += ind + "const I " + i + " = o" + str(d) + " + " + k + " * " + str(s.dilations[d]) +
           ";\n";
    auto [valid, index] = dilatedInput(s, d, i, U);
    src += ind + "if (!(" + valid + "))\n" + ind + "  continue;\n";
    offset += (d ? " + " : "") + index +
              (s.inStrideText[d] == "1" ? "" : " * " + s.inStrideText[d]);
    tap = d == 0 ? k : "(" + tap + ") * " + str(s.kernel[d]) + " + " + k;
  }
  src += ind + "acc = fmaf(__ldg(wc + " + tap + "), __ldg(xc + " + offset + "), acc);\n";
  for (size_t d = spatial; d-- > 0;) {
    ind.resize(ind.size() - 2);
    src += ind + "}\n";
  }
  src += "    y[e] = acc;\n";
  src += "  }\n";
  src += "}\n";

  CudaKernel k = makeKernel(name, std::move(src), strategy, (total + threads - 1) / threads, threads);
  if (s.symbolic) {
    k.launch.gridWork = (s.batchSym * SymExpr(s.outChannels) * s.outSizeSym).str();
    k.launch.workPerBlock = threads;
    k.launch.symbolsArgument = true;
  }
  return k;
}

//===--- Top-k ------------------------------------------------------------===//

/// The body of `tcc_topk_key`: maps an element (`v`, storage type) to an unsigned key whose
/// order is the top-k order for `largest` (NaN above +inf, -0 equal to +0).
std::string keyBody(Type e, bool largest, std::string &keyType) {
  std::string k;
  auto floatKey = [&](const std::string &bits, const std::string &width) {
    std::string sign = width == "32" ? "0x80000000u" : "0x8000000000000000ull";
    std::string mag = width == "32" ? "0x7FFFFFFFu" : "0x7FFFFFFFFFFFFFFFull";
    std::string inf = width == "32" ? "0x7F800000u" : "0x7FF0000000000000ull";
    return "  const " + keyType + " b = " + bits + ";\n" +
           "  // NaN: the largest key; -0 and +0: one key; negatives: bits inverted.\n"
           "  const " + keyType + " k = (b & " + mag + ") > " + inf + " ? ~(" + keyType +
           ")0 : (b & " + mag + ") == 0 ? " + sign + " : (b & " + sign + ") ? ~b : (b | " +
           sign + ");\n";
  };
  if (e.isF16() || e.isBF16() || e.isF32()) {
    keyType = "uint32_t";
    std::string f = e.isF32() ? "v" : e.isF16() ? "tcc_f16_to_f32(v)" : "tcc_bf16_to_f32(v)";
    k = floatKey("tcc_bits_f32(" + f + ")", "32");
  } else if (e.isF64()) {
    keyType = "uint64_t";
    k = floatKey("tcc_bits_f64(v)", "64");
  } else if (auto i = dyn_cast<IntegerType>(e)) {
    unsigned width = i.getWidth();
    if (width != 1 && width != 8 && width != 16 && width != 32 && width != 64)
      throw Error("tk.topk: unsupported element type " + typeString(e));
    keyType = width == 64 ? "uint64_t" : "uint32_t";
    if (width == 1 || i.isUnsigned())
      k = "  const " + keyType + " k = (" + keyType + ")v;\n";
    else if (width == 64)
      k = "  const uint64_t k = (uint64_t)v ^ 0x8000000000000000ull;\n";
    else
      k = "  const uint32_t k = (uint32_t)(int32_t)v ^ 0x80000000u;\n";
  } else {
    throw Error("tk.topk: unsupported element type " + typeString(e));
  }
  return k + (largest ? "  return k;\n" : "  return ~k; // smallest first\n");
}

} // namespace

CudaKernel tcc::codegen::emitCudaConv(tk::ConvOp op) {
  if (op.hasEpilogue()) // the CUDA target keeps a convolution's epilogue in a kernel of its own
    throw Error("tk.conv: the CUDA convolution kernels take no epilogue (bias, residual, clamp)");
  if (op.getChannelsLast())
    throw Error("tk.conv: the CUDA convolution kernels take channels-first tensors");
  ConvShape s = convShape(op);
  // Depthwise (one input channel per group) with a channel multiplier of at most 8: the
  // direct kernel (see the file comment). More output channels per input channel reuse each
  // gathered input enough for the GEMM's tiles to pay.
  bool direct = s.groupIn == 1 && s.groups > 1 && s.groupOut <= 8;
  std::string desc = describe(s);
  std::string name = hashName("conv", std::string(direct ? "direct " : "gemm ") + desc);
  if (!s.symbolic && s.batch * s.outChannels * s.outSize == 0)
    return emptyConv(name, desc);
  return direct ? emitDirectConv(s, name, desc) : emitGemmConv(s, name, desc);
}

CudaKernel tcc::codegen::emitCudaTopK(tk::TopKOp op) {
  const std::string opName = "tk.topk";
  auto module = op->getParentOfType<ModuleOp>();
  SymbolRanges ranges = module ? symbolRanges(module) : SymbolRanges{};
  // Symbolic programs: the sizes below are the largest over the ranges (chunk, plan, index
  // width); the kernel reads the run's values.
  SymShape xDims, vDims, iDims;
  std::vector<int64_t> x = largestDims(opName, op.getInput(), "input", ranges, xDims),
                       v = largestDims(opName, op.getValues(), "values", ranges, vDims),
                       ix = largestDims(opName, op.getIndices(), "indices", ranges, iDims);
  bool symbolic = false;
  for (Value buffer : {op.getInput(), op.getValues(), op.getIndices()})
    symbolic = symbolic || !cast<MemRefType>(buffer.getType()).hasStaticShape();
  Type e = cast<MemRefType>(op.getInput().getType()).getElementType();
  int64_t dim = (int64_t)op.getDim(), rank = (int64_t)x.size();
  if (dim < 0 || dim >= rank)
    throw Error(opName + ": dim " + str(dim) + " is out of range for input" + list(x));
  bool shapeOk = (int64_t)v.size() == rank && v == ix && v[dim] <= x[dim] &&
                 cast<MemRefType>(op.getValues().getType()).getElementType() == e &&
                 cast<MemRefType>(op.getIndices().getType()).getElementType().isInteger(64);
  for (int64_t d = 0; shapeOk && d < rank; ++d)
    shapeOk = d == dim || v[d] == x[d];
  if (symbolic && shapeOk) {
    shapeOk = vDims == iDims;
    for (int64_t d = 0; shapeOk && d < rank; ++d)
      shapeOk = d == dim || vDims[d] == xDims[d];
  }
  if (!shapeOk)
    throw Error(opName + ": values" + list(v) + " and i64 indices" + list(ix) +
                " must be the input's type and shape" + list(x) + " with k <= " +
                str(x[dim]) + " along dim " + str(dim));
  bool largest = op.getLargest();
  int64_t outer = product(llvm::ArrayRef(x).take_front(dim)), size = x[dim],
          inner = product(llvm::ArrayRef(x).drop_front(dim + 1)), k = v[dim];
  int64_t rows = outer * inner;

  ScalarEmitter scalars(Target::Cuda);
  std::string T = scalars.storageType(e);
  std::string keyType;
  std::string keyCode = keyBody(e, largest, keyType);
  std::string idxType = size < (int64_t(1) << 32) - 1 ? "uint32_t" : "uint64_t";
  constexpr int64_t kMaxChunk = 2048;
  int64_t chunk = 1;
  while (chunk < std::min(size, kMaxChunk))
    chunk *= 2;
  int64_t threads = std::clamp<int64_t>(chunk / 2, 32, 512);
  // One chunk: sort it, write its first k. Longer lines with k <= chunk / 4: filter against
  // the k-th best so far into shared memory, sorting only when the candidates fill it. Longer
  // lines with larger k: sort chunk by chunk, merging into the outputs.
  enum class Plan { OneChunk, Filter, Merge };
  Plan plan = size <= chunk ? Plan::OneChunk : k <= chunk / 4 ? Plan::Filter : Plan::Merge;

  std::string desc = "input " + typeString(e) + symList(xDims) + " dim=" + str(dim) +
                     " k=" + vDims[dim].str() +
                     (largest ? " largest" : " smallest");
  std::string name = hashName("topk", desc);
  std::string strategy =
      !symbolic && (rows == 0 || k == 0) ? "empty"
      : plan == Plan::OneChunk ? "block per line, one bitonic sort of " + str(chunk)
      : plan == Plan::Filter ? "block per line, threshold filter into bitonic sorts of " +
                                   str(chunk)
                             : "block per line, bitonic chunks of " + str(chunk) +
                                   " merged in place";
  std::string keyFn = name + "_key";
  std::string src = scalars.prelude();
  src += "\n// tk.topk " + desc + "\n// " + strategy + "\n";
  src += "TCC_FN " + keyType + " " + keyFn + "(" + T + " v) {\n" + keyCode + "}\n";
  src += "TCC_EXPORT void __launch_bounds__(" + str(threads) + ") " + name + "(const " + T +
         " *__restrict__ x, " + T + " *__restrict__ values, int64_t *__restrict__ indices" +
         (symbolic ? ", const int64_t *__restrict__ tcc_symbols" : "") + ") {\n";

  // Bitonic sort of keys/ids[0, S), best first: (key descending, index ascending). Ends with
  // a barrier.
  auto sort = [&](const std::string &ind) {
    std::string c;
    c += ind + "for (unsigned span = 2; span <= S; span <<= 1)\n";
    c += ind + "  for (unsigned half = span >> 1; half > 0; half >>= 1) {\n";
    c += ind + "    for (unsigned q = tid; q < S / 2; q += THREADS) {\n";
    c += ind + "      const unsigned a = 2 * half * (q / half) + q % half, b = a + half;\n";
    c += ind + "      const Key ka = keys[a], kb = keys[b];\n";
    c += ind + "      const Idx ia = ids[a], ib = ids[b];\n";
    c += ind + "      const bool bFirst = kb > ka || (kb == ka && ib < ia);\n";
    c += ind + "      if (bFirst == ((a & span) == 0)) {\n";
    c += ind + "        keys[a] = kb, keys[b] = ka;\n";
    c += ind + "        ids[a] = ib, ids[b] = ia;\n";
    c += ind + "      }\n";
    c += ind + "    }\n";
    c += ind + "    __syncthreads();\n";
    c += ind + "  }\n";
    return c;
  };
  // Pads keys/ids at from, from + THREADS, ... below `end` with entries that sort last.
  auto pad = [](const std::string &ind, const std::string &from, const std::string &end,
                const std::string &note) {
    return ind + "for (unsigned e = " + from + "; e < " + end + "; e += THREADS) {\n" + ind +
           "  keys[e] = 0;\n" + ind + "  ids[e] = ~(Idx)0;" + note + "\n" + ind + "}\n";
  };
  // Reads the merge's candidates: ka/ia from the best so far at `a`, kb from the chunk at `b`.
  auto readPair = [&](const std::string &ind, const std::string &a, const std::string &b) {
    return ind + "const Key ka = " + keyFn + "(vr[" + a + " * INNER]);\n" + ind +
           "const long long ia = ir[" + a + " * INNER];\n" + ind + "const Key kb = keys[" + b +
           "];\n";
  };
  // Writes keys/ids[0, K) (sorted) to the outputs.
  auto writeBest = [](const std::string &ind) {
    return ind + "for (long long j = tid; j < K; j += THREADS) {\n" + ind +
           "  vr[j * INNER] = xr[(long long)ids[j] * INNER];\n" + ind +
           "  ir[j * INNER] = (int64_t)ids[j];\n" + ind + "}\n";
  };

  SymExpr rowsSym;
  if (!symbolic && (rows == 0 || k == 0)) {
    src += "  // nothing to compute: no lines, or k = 0\n}\n";
  } else {
    src += "  typedef " + keyType + " Key;\n";
    src += "  typedef " + idxType + " Idx;\n";
    if (symbolic) {
      SymShape xs(xDims);
      SymExpr outerSym = productOf(SymShape(xs.begin(), xs.begin() + dim)),
              innerSym = productOf(SymShape(xs.begin() + dim + 1, xs.end()));
      rowsSym = outerSym * innerSym;
      src += ScalarEmitter::symbolLocals(op->getParentOfType<func::FuncOp>(), "tcc_symbols");
      src += "  const long long ROWS = " + ScalarEmitter::sizeExpr(rowsSym) +
             ", SIZE = " + ScalarEmitter::sizeExpr(xDims[dim]) +
             ", INNER = " + ScalarEmitter::sizeExpr(innerSym) +
             ", K = " + ScalarEmitter::sizeExpr(vDims[dim]) + ";\n";
    } else {
      src += "  constexpr long long ROWS = " + str(rows) + "LL, SIZE = " + str(size) +
             "LL, INNER = " + str(inner) + "LL, K = " + str(k) + "LL;\n";
    }
    src += "  constexpr unsigned S = " + str(chunk) + ", THREADS = " + str(threads) + ";\n";
    src += "  __shared__ Key keys[S];\n";
    src += "  __shared__ Idx ids[S];\n";
    if (plan == Plan::Filter)
      src += "  __shared__ unsigned fill; // candidates in keys/ids[K, K + fill)\n";
    src += "  const unsigned tid = threadIdx.x;\n";
    src += "  for (long long row = blockIdx.x; row < ROWS; row += gridDim.x) {\n";
    src += "    const long long o = row / INNER, i = row % INNER;\n";
    src += "    const " + T + " *xr = x + o * SIZE * INNER + i; // element j at xr[j * INNER]\n";
    src += "    " + T + " *vr = values + o * K * INNER + i;\n";
    src += "    int64_t *ir = indices + o * K * INNER + i;\n";
    if (plan == Plan::Filter) {
      // keys/ids[0, K): the best so far, sorted (padding where fewer than K were seen);
      // [K, S): candidates, appended in any order (the sort's order is total, so the result
      // does not depend on the order of the atomics).
      src += pad("    ", "tid", "K", " // padding sorts last");
      src += "    if (tid == 0)\n      fill = 0;\n";
      src += "    long long have = 0; // real elements among the best K\n";
      src += "    Key kthKey = 0;     // the K-th best so far, once have == K\n";
      src += "    for (long long base = 0;; base += THREADS) {\n";
      src += "      __syncthreads();\n";
      src += "      const unsigned n = fill;\n";
      src += "      __syncthreads(); // every thread read fill before anyone changes it\n";
      src += "      const bool last = base >= SIZE;\n";
      src += "      if (n + THREADS > S - K || (last && n > 0)) {\n";
      src += pad("        ", "(unsigned)K + n + tid", "S", "");
      src += "        if (tid == 0)\n          fill = 0;\n";
      src += "        __syncthreads();\n";
      src += sort("        ");
      src += "        have = have + n < K ? have + n : K;\n";
      src += "        kthKey = keys[K - 1];\n";
      src += "      }\n";
      src += "      if (last)\n        break;\n";
      src += "      const long long j = base + tid;\n";
      src += "      if (j < SIZE) {\n";
      src += "        const Key key = " + keyFn + "(xr[j * INNER]);\n";
      // Lines are read in index order, so an element equal to the K-th best comes after it.
      src += "        if (have < K || key > kthKey) {\n";
      src += "          const unsigned at = (unsigned)K + atomicAdd(&fill, 1u);\n";
      src += "          keys[at] = key;\n";
      src += "          ids[at] = (Idx)j;\n";
      src += "        }\n";
      src += "      }\n";
      src += "    }\n";
      src += writeBest("    ");
      src += "    __syncthreads(); // the next line reuses keys/ids\n";
    } else {
      if (plan == Plan::Merge)
        src += "    long long cur = 0; // the best so far, sorted, in vr/ir[0, cur)\n";
      src += "    for (long long c0 = 0; c0 < SIZE; c0 += S) {\n";
      src += "      const long long len = SIZE - c0 < (long long)S ? SIZE - c0 : (long long)S;\n";
      src += "      for (unsigned e = tid; e < S; e += THREADS) {\n";
      src += "        const bool real = e < len;\n";
      src += "        keys[e] = real ? " + keyFn + "(xr[(c0 + e) * INNER]) : (Key)0;\n";
      src += "        ids[e] = real ? (Idx)(c0 + e) : ~(Idx)0; // padding sorts last\n";
      src += "      }\n";
      src += "      __syncthreads();\n";
      src += sort("      ");
      if (plan == Plan::OneChunk) {
        src += writeBest("      ");
      } else {
        // Merge path: result[j] = the j-th of (vr/ir[0, cur)) merged with (keys/ids[0, lenB));
        // every read of the old best is at a position <= j, so rounds from the top down, each
        // reading before it writes, merge in place.
        src += "      const long long lenB = len < K ? len : K;\n";
        src += "      const long long total = cur + lenB < K ? cur + lenB : K;\n";
        src += "      for (long long hi = total; hi > 0; hi -= THREADS) {\n";
        src += "        const long long j = hi - 1 - (long long)tid;\n";
        src += "        " + T + " val = 0;\n";
        src += "        long long id = 0;\n";
        src += "        if (j >= 0) {\n";
        src += "          long long lo = j - lenB > 0 ? j - lenB : 0, up = j < cur ? j : cur;\n";
        src += "          while (lo < up) {\n";
        src += "            const long long mid = (lo + up) / 2;\n";
        src += readPair("            ", "mid", "j - 1 - mid");
        src += "            const long long ib = (long long)ids[j - 1 - mid];\n";
        src += "            if (ka > kb || (ka == kb && ia < ib))\n";
        src += "              lo = mid + 1;\n";
        src += "            else\n";
        src += "              up = mid;\n";
        src += "          }\n";
        src += "          const long long fromB = j - lo;\n";
        src += "          bool takeA = lo < cur;\n";
        src += "          if (takeA && fromB < lenB) {\n";
        src += readPair("            ", "lo", "fromB");
        src += "            takeA = ka > kb || (ka == kb && ia < (long long)ids[fromB]);\n";
        src += "          }\n";
        src += "          if (takeA) {\n";
        src += "            val = vr[lo * INNER];\n";
        src += "            id = ir[lo * INNER];\n";
        src += "          } else {\n";
        src += "            id = (long long)ids[fromB];\n";
        src += "            val = xr[id * INNER];\n";
        src += "          }\n";
        src += "        }\n";
        src += "        __syncthreads();\n";
        src += "        if (j >= 0) {\n";
        src += "          vr[j * INNER] = val;\n";
        src += "          ir[j * INNER] = (int64_t)id;\n";
        src += "        }\n";
        src += "      }\n";
        src += "      cur = total;\n";
      }
      src += "      __syncthreads(); // the next chunk reuses keys/ids; its merge reads vr/ir\n";
      src += "    }\n";
    }
    src += "  }\n";
    src += "}\n";
  }

  CudaKernel kernel = makeKernel(name, std::move(src), strategy, rows, threads);
  if (symbolic) {
    kernel.launch.gridWork = rowsSym.str();
    kernel.launch.workPerBlock = 1;
    kernel.launch.symbolsArgument = true;
  }
  return kernel;
}
