//===- NN.cpp - ONNX convolution, pooling, resampling and signal ops -> tcc ----===//
//
// Convolutions map to tcc.conv (transposed convolution as a conv over the stride-dilated input
// with the flipped, channel-swapped kernel); pools to tcc.reduce_window (averages divide by a
// compile-time count tensor); resampling ops (Resize, Upsample) to per-axis tcc.gather with
// compile-time index/weight tables; GridSample and RoiAlign compute their data-dependent
// sample positions with elementwise ops and read them with tcc.gather_elements; DFT and STFT
// are matmuls with compile-time cos/sin matrices. NonMaxSuppression and the window/mel
// generators are evaluated at compile time.
//
//===----------------------------------------------------------------------===//
#include "../NodeContext.h"

#include "tcc/Interp/Interpreter.h"
#include "tcc/Interp/Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;

namespace tcc::onnx_import {
namespace {

// ---- Small helpers ----------------------------------------------------------------------

Type elemOf(Value v) { return CoreBuilder::elementTypeOf(v); }
bool isFloatValue(Value v) { return isa<FloatType>(elemOf(v)); }
SmallVector<int64_t> shapeVec(Value v) {
  auto s = CoreBuilder::shapeOf(v);
  return SmallVector<int64_t>(s.begin(), s.end());
}

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// A constant tensor of element type `elem` holding `values` (row-major, of `shape`).
Value constFloats(NodeContext &n, Type elem, ArrayRef<int64_t> shape,
                  const std::vector<double> &values) {
  Tensor t = Tensor::fromVector<double>(Shape(shape.begin(), shape.end()), values);
  return n.constant(kernels::cast(t, dtypeFromType(elem)));
}

/// Shape [1, ..., len, ..., 1] of rank `rank` with `len` at `axis`: a per-axis table that
/// broadcasts over everything else.
SmallVector<int64_t> axisShape(int64_t rank, int64_t axis, int64_t len) {
  SmallVector<int64_t> s(rank, 1);
  s[axis] = len;
  return s;
}

/// x[..., i] along the last dim, with that dim removed.
Value takeLast(CoreBuilder &b, Value x, int64_t i) {
  int64_t r = CoreBuilder::rankOf(x);
  SmallVector<int64_t> s = shapeVec(x);
  s.pop_back();
  return b.reshape(b.sliceDim(x, r - 1, i, i + 1), s);
}

/// Stacks same-shaped values along a new last dim.
Value stackLast(CoreBuilder &b, ArrayRef<Value> xs) {
  SmallVector<Value> parts;
  for (Value x : xs) {
    SmallVector<int64_t> s = shapeVec(x);
    s.push_back(1);
    parts.push_back(b.reshape(x, s));
  }
  return b.concat(parts, CoreBuilder::rankOf(xs.front()));
}

/// Reads an attribute with one entry per spatial dim, each >= minimum.
std::vector<int64_t> spatialAttr(NodeContext &n, const std::string &name, size_t count,
                                 int64_t fallback, int64_t minimum) {
  std::vector<int64_t> v = n.attrInts(name, std::vector<int64_t>(count, fallback));
  if (v.size() != count)
    n.fail("attribute '" + name + "' must have " + std::to_string(count) + " values, got " +
           std::to_string(v.size()));
  for (int64_t x : v)
    if (x < minimum)
      n.fail("attribute '" + name + "' values must be >= " + std::to_string(minimum) + ", got " +
             std::to_string(x));
  return v;
}

// ---- Window geometry (Conv and pools) --------------------------------------------------

/// Strides, dilations, padding and output size of a windowed op over the spatial dims.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, padLow, padHigh, out;
  /// Extra high padding a floor-mode window op needs to produce `out` (ceil_mode).
  std::vector<int64_t> extraHigh;
};

/// Reads strides / dilations / pads / auto_pad for input spatial dims `in` and `kernel`, and
/// computes the output size (rounding up with ceil_mode, where windows starting in the
/// high padding are dropped, as PyTorch does).
Window windowGeometry(NodeContext &n, ArrayRef<int64_t> in, std::vector<int64_t> kernel,
                      bool ceilMode) {
  size_t r = in.size();
  Window w;
  w.kernel = std::move(kernel);
  w.strides = spatialAttr(n, "strides", r, 1, 1);
  w.dilations = spatialAttr(n, "dilations", r, 1, 1);
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  std::vector<int64_t> pads(2 * r, 0);
  if (autoPad == "NOTSET" || autoPad.empty())
    pads = spatialAttr(n, "pads", 2 * r, 0, 0);
  else if (autoPad != "VALID" && autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    n.fail("unknown auto_pad '" + autoPad + "'");
  for (size_t d = 0; d < r; ++d) {
    int64_t k = w.kernel[d], s = w.strides[d];
    int64_t eff = (k - 1) * w.dilations[d] + 1;
    int64_t low = pads[d], high = pads[d + r];
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t total = std::max<int64_t>(0, (ceilDiv(in[d], s) - 1) * s + eff - in[d]);
      low = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      high = total - low;
    }
    int64_t span = in[d] + low + high - eff;
    if (span < 0)
      n.fail("the window (" + std::to_string(eff) + ") is larger than the padded input (" +
             std::to_string(in[d] + low + high) + ") in spatial dim " + std::to_string(d));
    int64_t out = (ceilMode ? ceilDiv(span, s) : span / s) + 1;
    if (ceilMode && out > 1 && (out - 1) * s >= in[d] + low)
      --out;
    w.padLow.push_back(low);
    w.padHigh.push_back(high);
    w.out.push_back(out);
    w.extraHigh.push_back(std::max<int64_t>(0, (out - 1) * s + eff - (in[d] + low + high)));
  }
  return w;
}

/// windowGeometry over spatial dims that may be symbolic. The padding of a symbolic dim must not
/// depend on its size: explicit pads (or VALID), or stride 1 under auto_pad SAME or ceil_mode.
/// `out` is left empty: the ops infer their (symbolic) result dims.
Window windowGeometry(NodeContext &n, ArrayRef<SymExpr> in, std::vector<int64_t> kernel,
                      bool ceilMode) {
  if (auto fixed = staticDims(in))
    return windowGeometry(n, *fixed, std::move(kernel), ceilMode);
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  bool sizeDependent = ceilMode || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  std::vector<int64_t> strides = spatialAttr(n, "strides", in.size(), 1, 1);
  // Padding independent of the size: computed for a stand-in size, which the window fits.
  SmallVector<int64_t> standIn;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d].isConstant()) {
      standIn.push_back(*in[d].constant());
      continue;
    }
    if (sizeDependent && strides[d] != 1)
      n.fail("spatial dim " + std::to_string(d) + " is symbolic (" + in[d].str() +
             "): its padding under auto_pad " + autoPad + (ceilMode ? " with ceil_mode" : "") +
             " and stride " + std::to_string(strides[d]) + " depends on its size, which is "
             "not supported yet");
    standIn.push_back(int64_t(1) << 30);
  }
  Window w = windowGeometry(n, standIn, std::move(kernel), ceilMode);
  w.out.clear();
  return w;
}

/// The kernel_shape attribute of a pool over `r` spatial dims.
std::vector<int64_t> poolKernel(NodeContext &n, size_t r) {
  if (!n.hasAttr("kernel_shape"))
    n.fail("required attribute 'kernel_shape' is missing");
  return spatialAttr(n, "kernel_shape", r, 1, 1);
}

/// The spatial dims of a pool or conv input [N, C, S...].
SmallVector<int64_t> spatialDims(NodeContext &n, size_t input) {
  int64_t rank = n.inputRank(input);
  if (rank < 3)
    n.fail("expects an input [N, C, D1, ...] with at least one spatial dim, got rank " +
           std::to_string(rank));
  auto s = n.inputShape(input);
  return SmallVector<int64_t>(s.begin() + 2, s.end());
}

/// The spatial dims of a pool or conv input [N, C, S...], symbolic ones included.
SymShape spatialSymDims(NodeContext &n, size_t input) {
  int64_t rank = n.inputRank(input);
  if (rank < 3)
    n.fail("expects an input [N, C, D1, ...] with at least one spatial dim, got rank " +
           std::to_string(rank));
  SymShape s = n.inputDims(input);
  return SymShape(s.begin() + 2, s.end());
}

/// tcc.reduce_window over the spatial dims of x [N, C, S...] with window geometry `w`.
Value poolWindow(CoreBuilder &b, ReduceKind kind, Value x, const Window &w) {
  std::vector<int64_t> window{1, 1}, strides{1, 1}, low{0, 0}, high{0, 0}, dil{1, 1};
  for (size_t d = 0; d < w.kernel.size(); ++d) {
    window.push_back(w.kernel[d]);
    strides.push_back(w.strides[d]);
    low.push_back(w.padLow[d]);
    high.push_back(w.padHigh[d] + w.extraHigh[d]);
    dil.push_back(w.dilations[d]);
  }
  return b.create<ReduceWindowOp>(kind, x, window, strides, low, high, dil);
}

// ---- Convolutions ------------------------------------------------------------------------

/// Adds bias [M] to y [N, M, S...] along the channel dim.
Value addChannelBias(CoreBuilder &b, Value y, Value bias) {
  int64_t rank = CoreBuilder::rankOf(y);
  return b.add(y, b.reshape(bias, axisShape(rank, 1, CoreBuilder::shapeOf(bias)[0])));
  // (shapeOf: a bias has static dims; y's may be symbolic, the add broadcasts.)
}

/// Checks x [N, C, S...] and w [M, C/group, K...] and returns the convolution geometry.
Window convGeometry(NodeContext &n, Value x, Value w, int64_t group) {
  SymShape in = spatialSymDims(n, 0);
  SymShape xd = CoreBuilder::dimsOf(x);
  auto ws = CoreBuilder::shapeOf(w);
  if (ws.size() != xd.size())
    n.fail("weight rank " + std::to_string(ws.size()) + " does not match input rank " +
           std::to_string(xd.size()));
  if (!xd[1].isConstant())
    n.fail("the input channels must be static, got " + xd[1].str());
  SmallVector<int64_t> xs{1, *xd[1].constant()};
  if (group < 1 || xs[1] % group || ws[0] % group || ws[1] * group != xs[1])
    n.fail("input channels " + std::to_string(xs[1]) + ", weight " +
           shapeToString(Shape(ws.begin(), ws.end())) + " and group " + std::to_string(group) +
           " do not match");
  std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  if (n.hasAttr("kernel_shape") && n.attrInts("kernel_shape") != kernel)
    n.fail("kernel_shape does not match the weight shape");
  return windowGeometry(n, in, kernel, false);
}

Value emitConv(CoreBuilder &b, Value x, Value w, const Window &g, int64_t group) {
  std::vector<int64_t> ones(g.kernel.size(), 1);
  return b.create<ConvOp>(x, w, g.strides, g.padLow, g.padHigh, ones, g.dilations, group);
}

void lowerConv(NodeContext &n) {
  Value x = n.input(0), w = n.input(1);
  int64_t group = n.attrInt("group", 1);
  Window g = convGeometry(n, x, w, group);
  Value y = emitConv(n.b(), x, w, g, group);
  if (n.hasInput(2))
    y = addChannelBias(n.b(), y, n.input(2));
  n.setOutput(0, y);
}

/// x - zero_point in i32 (zero_point a scalar or, when perChannelDim >= 0, a 1-d tensor
/// indexed along that dim).
Value subtractZeroPoint(NodeContext &n, Value x, size_t zpInput, int64_t perChannelDim) {
  CoreBuilder &b = n.b();
  Type i32 = b.builder().getI32Type();
  Value xi = b.cast(x, i32);
  if (!n.hasInput(zpInput))
    return xi;
  Value zp = b.cast(n.input(zpInput), i32);
  auto zs = CoreBuilder::shapeOf(zp);
  int64_t count = 1;
  for (int64_t d : zs)
    count *= d;
  if (count == 1)
    return b.sub(xi, b.reshape(zp, {}));
  if (perChannelDim < 0 || zs.size() != 1 || zs[0] != CoreBuilder::shapeOf(x)[perChannelDim])
    n.fail("zero point of shape " + shapeToString(Shape(zs.begin(), zs.end())) +
           " must be a scalar or one value per output channel");
  return b.sub(xi, b.reshape(zp, axisShape(CoreBuilder::rankOf(x), perChannelDim, zs[0])));
}

// ConvInteger: (x - x_zero_point) * (w - w_zero_point) accumulated in i32.
void lowerConvInteger(NodeContext &n) {
  Value x = n.input(0), w = n.input(1);
  int64_t group = n.attrInt("group", 1);
  Window g = convGeometry(n, x, w, group);
  Value xi = subtractZeroPoint(n, x, 2, -1), wi = subtractZeroPoint(n, w, 3, 0);
  n.setOutput(0, emitConv(n.b(), xi, wi, g, group));
}

// QLinearConv: the i32 conv of the zero-point-shifted operands (+ i32 bias), rescaled by
// x_scale * w_scale / y_scale, rounded half to even, shifted by y_zero_point, saturated.
void lowerQLinearConv(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), w = n.input(3);
  int64_t group = n.attrInt("group", 1);
  Window g = convGeometry(n, x, w, group);
  Value acc = emitConv(b, subtractZeroPoint(n, x, 2, -1), subtractZeroPoint(n, w, 5, 0), g, group);
  if (n.hasInput(8))
    acc = addChannelBias(b, acc, b.cast(n.input(8), b.builder().getI32Type()));
  Type f32 = b.builder().getF32Type();
  int64_t rank = CoreBuilder::rankOf(acc);
  Value wScale = b.cast(n.input(4), f32);
  int64_t wsCount = 1;
  for (int64_t d : CoreBuilder::shapeOf(wScale))
    wsCount *= d;
  wScale = wsCount == 1 ? b.reshape(wScale, {}) : b.reshape(wScale, axisShape(rank, 1, wsCount));
  Value scale = b.div(b.mul(b.reshape(b.cast(n.input(1), f32), {}), wScale),
                      b.reshape(b.cast(n.input(6), f32), {}));
  Value y = b.unary(UnaryKind::Round, b.mul(b.cast(acc, f32), scale));
  Type outType = elemOf(n.input(7));
  y = b.add(y, b.reshape(b.cast(n.input(7), f32), {}));
  n.setOutput(0, b.saturatingCast(y, outType));
}

// ConvTranspose: a conv over the input dilated by the strides (lhs_dilation), with the kernel
// flipped spatially and its in/out channels swapped per group, padded by
// dilation*(k-1) - pad on each side (plus output_padding at the end).
void lowerConvTranspose(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), w = n.input(1);
  // Symbolic batch and spatial dims are fine with explicit pads; output_shape and SAME padding
  // need the spatial sizes.
  SymShape inDims = spatialSymDims(n, 0);
  size_t r = inDims.size();
  std::optional<int64_t> channels = n.inputDims(0)[1].constant();
  if (!channels)
    n.fail("input channels " + n.inputDims(0)[1].str() + " are symbolic: fix them");
  SmallVector<int64_t> xs{0, *channels};
  SmallVector<int64_t> ws = shapeVec(w);
  int64_t group = n.attrInt("group", 1);
  if (ws.size() != r + 2)
    n.fail("weight rank does not match input rank");
  if (group < 1 || xs[1] % group || ws[0] != xs[1])
    n.fail("input channels " + std::to_string(xs[1]) + ", weight " +
           shapeToString(Shape(ws.begin(), ws.end())) + " and group " + std::to_string(group) +
           " do not match");
  int64_t inPerGroup = xs[1] / group, outPerGroup = ws[1], outChannels = ws[1] * group;
  std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  if (n.hasAttr("kernel_shape") && n.attrInts("kernel_shape") != kernel)
    n.fail("kernel_shape does not match the weight shape");
  std::vector<int64_t> strides = spatialAttr(n, "strides", r, 1, 1);
  std::vector<int64_t> dilations = spatialAttr(n, "dilations", r, 1, 1);
  std::vector<int64_t> outPad = spatialAttr(n, "output_padding", r, 0, 0);
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  if (autoPad.empty())
    autoPad = "NOTSET";
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    n.fail("unknown auto_pad '" + autoPad + "'");

  std::vector<int64_t> outputShape = n.attrInts("output_shape");
  if (outputShape.size() == r + 2)
    outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
  if (!outputShape.empty() && outputShape.size() != r)
    n.fail("output_shape must have one value per spatial dim");
  SmallVector<int64_t> in;
  if (!outputShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")
    in = spatialDims(n, 0); // (a named error for symbolic sides)
  if (outputShape.empty() && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER"))
    for (size_t d = 0; d < r; ++d)
      outputShape.push_back(in[d] * strides[d]);
  std::vector<int64_t> padLow(r), padHigh(r);
  std::vector<int64_t> pads = autoPad == "NOTSET" ? spatialAttr(n, "pads", 2 * r, 0, 0)
                                                  : std::vector<int64_t>(2 * r, 0);
  for (size_t d = 0; d < r; ++d) {
    int64_t eff = (kernel[d] - 1) * dilations[d] + 1;
    if (!outputShape.empty()) {
      // The padding that yields output_shape; the odd unit goes last for SAME_UPPER.
      int64_t total = strides[d] * (in[d] - 1) + outPad[d] + eff - outputShape[d];
      if (autoPad == "SAME_UPPER") {
        padLow[d] = floorDiv(total, 2);
        padHigh[d] = total - padLow[d];
      } else {
        padHigh[d] = floorDiv(total, 2);
        padLow[d] = total - padHigh[d];
      }
    } else {
      padLow[d] = pads[d];
      padHigh[d] = pads[d + r];
    }
  }

  // [C, M/g, K...] -> [g, C/g, M/g, K...] -> [g, M/g, C/g, K...] -> [M, C/g, K...], flipped.
  SmallVector<int64_t> grouped{group, inPerGroup, outPerGroup};
  grouped.append(kernel.begin(), kernel.end());
  SmallVector<int64_t> perm{0, 2, 1};
  SmallVector<int64_t> flipped{outChannels, inPerGroup};
  SmallVector<int64_t> spatialAxes;
  for (size_t d = 0; d < r; ++d) {
    perm.push_back(3 + d);
    flipped.push_back(kernel[d]);
    spatialAxes.push_back(2 + d);
  }
  Value wt = b.reshape(b.transpose(b.reshape(w, grouped), perm), flipped);
  wt = b.createTyped<ReverseOp>(wt.getType(), wt, spatialAxes);

  std::vector<int64_t> low(r), high(r), ones(r, 1);
  for (size_t d = 0; d < r; ++d) {
    int64_t reach = dilations[d] * (kernel[d] - 1);
    low[d] = reach - padLow[d];
    high[d] = reach - padHigh[d] + outPad[d];
    // The smallest input side the ranges allow (a symbolic one) must give an output.
    int64_t smallest = rangeOf(inDims[d], n.symbolRanges()).min;
    int64_t out = strides[d] * (smallest - 1) + outPad[d] + reach + 1 - padLow[d] - padHigh[d];
    if (out < 1)
      n.fail("the output would be empty in spatial dim " + std::to_string(d) +
             (inDims[d].isConstant() ? "" : " at its smallest size " + std::to_string(smallest)));
  }
  Value y = b.create<ConvOp>(x, wt, ones, low, high, strides, dilations, group);
  if (n.hasInput(2))
    y = addChannelBias(b, y, n.input(2));
  n.setOutput(0, y);
}

// ---- Pools ---------------------------------------------------------------------------------

/// How many of the window's taps fall into [lo, hi) along one dim, per output position.
std::vector<double> tapCounts(int64_t out, int64_t k, int64_t s, int64_t dil, int64_t padLow,
                              int64_t lo, int64_t hi) {
  std::vector<double> counts(out);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t j = 0; j < k; ++j) {
      int64_t p = o * s - padLow + j * dil;
      counts[o] += p >= lo && p < hi;
    }
  return counts;
}

// AveragePool: reduce_window sum divided by the number of counted taps per output, a
// compile-time constant (the input-only taps, or with count_include_pad the explicit pads
// too, never the ceil_mode overhang).
void lowerAveragePool(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  SmallVector<int64_t> in = spatialDims(n, 0);
  size_t r = in.size();
  bool ceilMode = n.attrInt("ceil_mode", 0) != 0;
  bool includePad = n.attrInt("count_include_pad", 0) != 0;
  Window w = windowGeometry(n, in, poolKernel(n, r), ceilMode);
  Value sum = poolWindow(b, ReduceKind::Sum, x, w);

  std::vector<double> counts{1};
  for (size_t d = 0; d < r; ++d) {
    int64_t lo = includePad ? -w.padLow[d] : 0, hi = includePad ? in[d] + w.padHigh[d] : in[d];
    std::vector<double> c =
        tapCounts(w.out[d], w.kernel[d], w.strides[d], w.dilations[d], w.padLow[d], lo, hi);
    std::vector<double> next;
    for (double a : counts)
      for (double v : c)
        next.push_back(a * v);
    counts = std::move(next);
  }
  bool uniform = std::all_of(counts.begin(), counts.end(), [&](double c) { return c == counts[0]; });
  Value divisor;
  if (uniform) {
    divisor = b.scalarLike(x, counts[0]);
  } else {
    SmallVector<int64_t> shape{1, 1};
    shape.append(w.out.begin(), w.out.end());
    divisor = constFloats(n, elemOf(x), shape, counts);
  }
  n.setOutput(0, b.div(sum, divisor));
}

/// MaxPool's Indices output: the flat index (row-major over [N, C, S...], or column-major
/// over the spatial dims with storage_order 1) of each window's first maximum. Each kernel
/// tap is a strided slice of the padded input; a running max picks the winner's index from
/// compile-time per-tap index tables.
Value maxPoolIndices(NodeContext &n, Value x, const Window &w, ArrayRef<int64_t> in) {
  CoreBuilder &b = n.b();
  size_t r = in.size();
  int64_t storageOrder = n.attrInt("storage_order", 0);
  auto xs = CoreBuilder::shapeOf(x);
  std::vector<int64_t> low{0, 0}, high{0, 0};
  for (size_t d = 0; d < r; ++d) {
    low.push_back(w.padLow[d]);
    high.push_back(w.padHigh[d] + w.extraHigh[d]);
  }
  bool anyPad = llvm::any_of(low, [](int64_t v) { return v != 0; }) ||
                llvm::any_of(high, [](int64_t v) { return v != 0; });
  Value padded = anyPad ? b.create<PadOp>(x, b.scalarLike(x, CoreBuilder::lowestValue(elemOf(x))), low, high,
                                          PadMode::Constant)
                        : x;
  // Spatial strides of the flat index.
  std::vector<int64_t> place(r);
  int64_t spatialSize = 1;
  for (size_t i = 0; i < r; ++i) {
    size_t d = storageOrder ? i : r - 1 - i;
    place[d] = spatialSize;
    spatialSize *= in[d];
  }
  int64_t outSize = 1;
  for (int64_t o : w.out)
    outSize *= o;
  SmallVector<int64_t> outShape{1, 1};
  outShape.append(w.out.begin(), w.out.end());

  int64_t taps = 1;
  for (int64_t k : w.kernel)
    taps *= k;
  Value best, bestIndex;
  for (int64_t t = 0; t < taps; ++t) {
    // Kernel position of tap t (row-major over the kernel).
    std::vector<int64_t> kpos(r);
    for (int64_t rem = t, d = (int64_t)r - 1; d >= 0; --d) {
      kpos[d] = rem % w.kernel[d];
      rem /= w.kernel[d];
    }
    SmallVector<int64_t> start{0, 0}, limit{xs[0], xs[1]}, stride{1, 1};
    for (size_t d = 0; d < r; ++d) {
      start.push_back(kpos[d] * w.dilations[d]);
      limit.push_back(start.back() + (w.out[d] - 1) * w.strides[d] + 1);
      stride.push_back(w.strides[d]);
    }
    Value values = b.create<SliceOp>(padded, start, limit, stride);
    std::vector<int64_t> index(outSize);
    for (int64_t o = 0; o < outSize; ++o) {
      int64_t flat = 0;
      for (int64_t rem = o, d = (int64_t)r - 1; d >= 0; --d) {
        int64_t p = (rem % w.out[d]) * w.strides[d] - w.padLow[d] + kpos[d] * w.dilations[d];
        rem /= w.out[d];
        flat += std::clamp<int64_t>(p, 0, in[d] - 1) * place[d];
      }
      index[o] = flat;
    }
    Value tapIndex = b.constantI64(index, outShape);
    if (t == 0) {
      best = values;
      bestIndex = b.broadcastTo(tapIndex, shapeVec(values));
      continue;
    }
    Value better = b.compare(CompareKind::Gt, values, best);
    best = b.select(better, values, best);
    bestIndex = b.select(better, tapIndex, bestIndex);
  }
  // Offset of each (n, c) plane.
  if (xs[0] * xs[1] == 1)
    return bestIndex;
  std::vector<int64_t> planes(xs[0] * xs[1]);
  for (size_t i = 0; i < planes.size(); ++i)
    planes[i] = (int64_t)i * spatialSize;
  SmallVector<int64_t> planeShape(r + 2, 1);
  planeShape[0] = xs[0];
  planeShape[1] = xs[1];
  return b.add(bestIndex, b.constantI64(planes, planeShape));
}

void lowerMaxPool(NodeContext &n) {
  Value x = n.input(0);
  SymShape dims = spatialSymDims(n, 0);
  Window w = windowGeometry(n, dims, poolKernel(n, dims.size()), n.attrInt("ceil_mode", 0) != 0);
  n.setOutput(0, poolWindow(n.b(), ReduceKind::Max, x, w));
  if (n.outputUsed(1)) // torch.export writes max_pool2d_with_indices and drops the indices
    n.setOutput(1, maxPoolIndices(n, x, w, spatialDims(n, 0)));
}

/// |x|^p, with the common p exact.
Value absPow(CoreBuilder &b, Value x, double p) {
  if (p == 2)
    return b.mul(x, x);
  Value a = b.unary(UnaryKind::Abs, x);
  return p == 1 ? a : b.binary(BinaryKind::Pow, a, b.scalarLike(a, p));
}

/// s^(1/p), with the common p exact.
Value rootP(CoreBuilder &b, Value s, double p) {
  if (p == 1)
    return s;
  if (p == 2)
    return b.unary(UnaryKind::Sqrt, s);
  return b.binary(BinaryKind::Pow, s, b.scalarLike(s, 1.0 / p));
}

double lpExponent(NodeContext &n) {
  double p = n.attrInt("p", 2);
  if (p <= 0)
    n.fail("p must be positive");
  return p;
}

// LpPool: (sum over the window of |x|^p)^(1/p).
void lowerLpPool(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  SmallVector<int64_t> in = spatialDims(n, 0);
  double p = lpExponent(n);
  Window w = windowGeometry(n, in, poolKernel(n, in.size()), n.attrInt("ceil_mode", 0) != 0);
  n.setOutput(0, rootP(b, poolWindow(b, ReduceKind::Sum, absPow(b, x, p), w), p));
}

SmallVector<int64_t> spatialAxes(NodeContext &n) {
  SymShape in = spatialSymDims(n, 0);
  SmallVector<int64_t> axes;
  for (size_t d = 0; d < in.size(); ++d)
    axes.push_back(2 + d);
  return axes;
}

void lowerGlobalAveragePool(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  SmallVector<int64_t> axes = spatialAxes(n);
  SymShape dims = n.inputDims(0);
  SymExpr count = 1;
  for (int64_t a : axes)
    count = count * dims[a];
  n.setOutput(0, b.div(b.reduce(ReduceKind::Sum, x, axes, true), scalarCount(b, x, count)));
}

void lowerGlobalMaxPool(NodeContext &n) {
  n.setOutput(0, n.b().reduce(ReduceKind::Max, n.input(0), spatialAxes(n), true));
}

void lowerGlobalLpPool(NodeContext &n) {
  CoreBuilder &b = n.b();
  double p = lpExponent(n);
  Value s = b.reduce(ReduceKind::Sum, absPow(b, n.input(0), p), spatialAxes(n), true);
  n.setOutput(0, rootP(b, s, p));
}

// LRN: x / (bias + alpha/size * (sum of x^2 over a window of `size` channels))^beta, the
// channel window sum being a reduce_window over dim 1.
void lowerLRN(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  if (rank < 2)
    n.fail("expects an input [N, C, ...]");
  int64_t size = n.requireAttrInt("size");
  if (size < 1)
    n.fail("size must be >= 1");
  double alpha = n.attrFloat("alpha", 1e-4), beta = n.attrFloat("beta", 0.75);
  double bias = n.attrFloat("bias", 1.0);
  std::vector<int64_t> window(rank, 1), ones(rank, 1), low(rank, 0), high(rank, 0);
  window[1] = size;
  low[1] = (size - 1) / 2;
  high[1] = size - 1 - low[1];
  Value sum = b.create<ReduceWindowOp>(ReduceKind::Sum, b.mul(x, x), window, ones, low, high, ones);
  Value denom = b.add(b.scalarLike(x, bias), b.mul(b.scalarLike(x, alpha / size), sum));
  n.setOutput(0, b.div(x, b.binary(BinaryKind::Pow, denom, b.scalarLike(x, beta))));
}

// MaxUnpool: scatter the values into a zero tensor of the unpooled shape at their flat
// indices. A larger output_shape pads that result at the end of each spatial dim (the
// indices keep referring to the unpooled shape, as the ONNX test data expects).
void lowerMaxUnpool(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), indices = n.input(1);
  SmallVector<int64_t> in = spatialDims(n, 0);
  size_t r = in.size();
  auto xs = CoreBuilder::shapeOf(x);
  if (CoreBuilder::shapeOf(indices) != xs)
    n.fail("indices must have the shape of the input");
  std::vector<int64_t> kernel = poolKernel(n, r);
  std::vector<int64_t> strides = spatialAttr(n, "strides", r, 1, 1);
  std::vector<int64_t> pads = spatialAttr(n, "pads", 2 * r, 0, 0);
  SmallVector<int64_t> shape{xs[0], xs[1]};
  for (size_t d = 0; d < r; ++d) {
    shape.push_back((in[d] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + r]);
    if (shape.back() < 1)
      n.fail("the unpooled output would be empty");
  }
  int64_t total = 1, count = 1;
  for (int64_t d : shape)
    total *= d;
  for (int64_t d : xs)
    count *= d;
  Value zeros = b.splat(b.tensorType({total}, elemOf(x)), 0);
  Value idx = b.reshape(b.cast(indices, b.builder().getI64Type()), {count, 1});
  Value y = b.create<ScatterNDOp>(zeros, idx, b.reshape(x, {count}), ScatterReduction::None);
  y = b.reshape(y, shape);
  if (n.hasInput(2)) {
    std::vector<int64_t> given = n.requireInts(2, "output_shape");
    if (given.size() != xs.size() || given[0] != xs[0] || given[1] != xs[1])
      n.fail("output_shape must be [N, C, spatial...] of the input's N and C");
    std::vector<int64_t> low(xs.size(), 0), high(xs.size(), 0);
    for (size_t d = 2; d < xs.size(); ++d) {
      high[d] = given[d] - shape[d];
      if (high[d] < 0)
        n.fail("output_shape is smaller than the unpooled shape " +
               shapeToString(Shape(shape.begin(), shape.end())));
    }
    y = b.create<PadOp>(y, b.scalarLike(y, 0), low, high, PadMode::Constant);
  }
  n.setOutput(0, y);
}

// ---- Resize / Upsample ----------------------------------------------------------------------

enum class InterpMode { Nearest, Linear, Cubic };

struct ResizeSpec {
  InterpMode mode = InterpMode::Nearest;
  std::string coordMode = "half_pixel";
  /// round_prefer_floor, round_prefer_ceil, floor, ceil, or "simple" (Upsample and
  /// Resize-10: floor when upsampling, ceil when downsampling).
  std::string nearestMode = "round_prefer_floor";
  double cubicA = -0.75;
  bool excludeOutside = false;
  double extrapolation = 0;
  /// Linear and cubic only (opset 18): when downsampling, the filter is stretched by 1/scale
  /// (so every input pixel contributes) and its taps renormalized.
  bool antialias = false;
};

/// The taps of each output position along one axis: out[o] = sum_t w[t][o] * in[idx[t][o]],
/// or the extrapolation value where `outside[o]`.
struct AxisTable {
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<double>> w;
  std::vector<bool> outside;
  bool anyOutside = false;
  bool identity = true;
};

/// The cubic convolution kernel with parameter a at distance x.
double cubicKernel(double a, double x) {
  x = std::fabs(x);
  if (x <= 1)
    return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2)
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

/// The weights of the taps around a source coordinate `ratio` past its left pixel. With
/// antialias the taps (2 / scale for linear, 4 / scale for cubic, when downsampling) sample the
/// kernel stretched by 1 / scale, normalized to sum 1, as ONNX's reference does.
std::vector<double> interpCoeffs(const ResizeSpec &spec, double ratio, double scale) {
  if (spec.antialias) {
    double s = std::min(scale, 1.0);
    double support = spec.mode == InterpMode::Linear ? 1 : 2;
    int64_t start = (int64_t)std::floor(-support / s) + 1, count = 2 - 2 * start;
    std::vector<double> c(count);
    double sum = 0;
    for (int64_t i = 0; i < count; ++i) {
      double x = s * (start + i - ratio);
      c[i] = spec.mode == InterpMode::Linear ? std::clamp(1 - std::fabs(x), 0.0, 1.0)
                                             : cubicKernel(spec.cubicA, x);
      sum += c[i];
    }
    for (double &v : c)
      v /= sum;
    return c;
  }
  if (spec.mode == InterpMode::Linear)
    return {1 - ratio, ratio};
  double a = spec.cubicA, r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
  return {((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a, ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
          ((a + 2) * q - (a + 3)) * q * q + 1, ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a};
}

/// Follows the ONNX reference resize: the source coordinate of each output position, then
/// its nearest pixel or its 2 (linear) / 4 (cubic) neighbours, edge-clamped.
AxisTable resizeAxisTable(NodeContext &n, const ResizeSpec &spec, int64_t inLen, int64_t outLen,
                          double scale, double roiStart, double roiEnd) {
  AxisTable t;
  double outReal = scale * inLen;
  int taps = spec.mode == InterpMode::Nearest ? 1
             : (int)interpCoeffs(spec, 0.5, scale).size(); // 2 / 4, more with antialias
  t.idx.assign(taps, std::vector<int64_t>(outLen));
  t.w.assign(taps, std::vector<double>(outLen));
  t.outside.assign(outLen, false);
  const std::string &cm = spec.coordMode;
  for (int64_t o = 0; o < outLen; ++o) {
    double x;
    if (cm == "half_pixel")
      x = (o + 0.5) / scale - 0.5;
    else if (cm == "pytorch_half_pixel")
      x = outReal == 1 ? -0.5 : (o + 0.5) / scale - 0.5;
    else if (cm == "align_corners")
      x = outReal == 1 ? 0 : o * (inLen - 1) / (outReal - 1);
    else if (cm == "asymmetric")
      x = o / scale;
    else if (cm == "tf_half_pixel_for_nn")
      x = (o + 0.5) / scale;
    else if (cm == "half_pixel_symmetric") // opset 19: the ROI's centre on the output's centre
      x = inLen / 2.0 * (1 - outLen / outReal) + (o + 0.5) / scale - 0.5;
    else if (cm == "tf_crop_and_resize") {
      x = outReal == 1 ? (roiEnd - roiStart) * (inLen - 1) / 2
                       : o * (roiEnd - roiStart) * (inLen - 1) / (outReal - 1);
      x += roiStart * (inLen - 1);
      if (x < 0 || x > inLen - 1) {
        t.outside[o] = t.anyOutside = true;
        t.identity = false;
        continue;
      }
    } else
      n.fail("unknown coordinate_transformation_mode '" + cm + "'");
    if (std::isnan(x))
      n.fail("the resize coordinates are not finite");
    // Far outside the input every tap reads the edge: bound x so the indices stay small.
    x = std::clamp(x, -8.0 - inLen, 8.0 + 2 * inLen);
    double xi = std::floor(x);
    bool integral = x == xi;
    double ratio = integral ? 1 : x - xi;
    auto clampIdx = [&](int64_t i) { return std::clamp<int64_t>(i, 0, inLen - 1); };
    if (spec.mode == InterpMode::Nearest) {
      bool up;
      const std::string &nm = spec.nearestMode;
      if (integral)
        up = false;
      else if (nm == "round_prefer_floor")
        up = ratio > 0.5;
      else if (nm == "round_prefer_ceil")
        up = ratio >= 0.5;
      else if (nm == "floor")
        up = false;
      else if (nm == "ceil")
        up = true;
      else if (nm == "simple")
        up = scale < 1;
      else
        n.fail("unknown nearest_mode '" + nm + "'");
      t.idx[0][o] = clampIdx((int64_t)xi + up);
      t.w[0][o] = 1;
      t.identity &= t.idx[0][o] == o;
      continue;
    }
    // The `taps` nearest pixels (the left ones on ties), as in the reference.
    int64_t first = (int64_t)xi + (integral ? 0 : 1) - taps / 2;
    std::vector<double> c = interpCoeffs(spec, ratio, scale);
    if (spec.excludeOutside) {
      double sum = 0;
      for (int k = 0; k < taps; ++k) {
        if (first + k < 0 || first + k >= inLen)
          c[k] = 0;
        sum += c[k];
      }
      for (double &v : c)
        v = sum != 0 ? v / sum : 0;
    }
    for (int k = 0; k < taps; ++k) {
      t.idx[k][o] = clampIdx(first + k);
      t.w[k][o] = c[k];
      bool trivial = c[k] == 0 || (c[k] == 1 && t.idx[k][o] == o);
      t.identity &= trivial;
    }
  }
  if (outLen != inLen)
    t.identity = false;
  return t;
}

/// Applies one axis table to x (float), with one gather per tap.
Value resizeAlong(NodeContext &n, Value x, int64_t axis, const AxisTable &t, double extrapolation) {
  CoreBuilder &b = n.b();
  int64_t rank = CoreBuilder::rankOf(x);
  int64_t outLen = t.outside.size();
  SmallVector<int64_t> wShape = axisShape(rank, axis, outLen);
  Value y;
  for (size_t k = 0; k < t.idx.size(); ++k) {
    if (std::all_of(t.w[k].begin(), t.w[k].end(), [](double v) { return v == 0; }))
      continue;
    Value g = b.create<GatherOp>(x, b.constantI64(t.idx[k], {outLen}), axis);
    if (!std::all_of(t.w[k].begin(), t.w[k].end(), [](double v) { return v == 1; }))
      g = b.mul(g, constFloats(n, elemOf(x), wShape, t.w[k]));
    y = y ? b.add(y, g) : g;
  }
  if (!y) { // every output extrapolated (or every weight zero)
    SmallVector<int64_t> s = shapeVec(x);
    s[axis] = outLen;
    y = b.splat(b.tensorType(s, elemOf(x)), 0);
  }
  if (t.anyOutside) {
    std::vector<int64_t> mask(t.outside.begin(), t.outside.end());
    Value outside = b.cast(b.constantI64(mask, wShape), b.builder().getI1Type());
    y = b.select(outside, b.scalarLike(y, extrapolation), y);
  }
  return y;
}

/// Resizing of symbolic axis `axis` of x by the integer factor `scale`. With an integer scale
/// the coordinate transformations that do not depend on the length (half_pixel,
/// pytorch_half_pixel, asymmetric, tf_half_pixel_for_nn) repeat with period `scale`: output
/// position o = q * scale + r reads its taps at clamp(q + delta_k[r], 0, L - 1) with weights
/// w_k[r] (nearest: one tap of weight 1; linear: two; cubic: four). The pattern is read off the
/// exact table (resizeAxisTable) of an interior position and must reproduce the tables of every
/// length from 1 to 16, edges included; otherwise (align_corners, exclude_outside) the mode is
/// reported.
Value resizeSymbolicPeriodic(NodeContext &n, Value x, int64_t axis, const ResizeSpec &spec,
                             int64_t scale) {
  SymExpr length = CoreBuilder::dimsOf(x)[axis];
  constexpr int64_t kLearnLength = 8, kLearnAt = 4; // every tap of q = 4 inside [0, 8)
  AxisTable learned = resizeAxisTable(n, spec, kLearnLength, scale * kLearnLength, (double)scale, 0, 1);
  size_t taps = learned.idx.size();
  std::vector<std::vector<int64_t>> delta(taps, std::vector<int64_t>(scale));
  std::vector<std::vector<double>> weight(taps, std::vector<double>(scale));
  for (size_t k = 0; k < taps; ++k)
    for (int64_t r = 0; r < scale; ++r) {
      delta[k][r] = learned.idx[k][kLearnAt * scale + r] - kLearnAt;
      weight[k][r] = learned.w[k][kLearnAt * scale + r];
    }
  bool consistent = !learned.anyOutside;
  for (int64_t len = 1; len <= 16 && consistent; ++len) {
    AxisTable t = resizeAxisTable(n, spec, len, scale * len, (double)scale, 0, 1);
    consistent = !t.anyOutside && t.idx.size() == taps;
    for (int64_t o = 0; o < scale * len && consistent; ++o) {
      int64_t q = o / scale, r = o % scale;
      for (size_t k = 0; k < taps && consistent; ++k)
        consistent = t.idx[k][o] == std::clamp(q + delta[k][r], (int64_t)0, len - 1) &&
                     std::abs(t.w[k][o] - weight[k][r]) <= 1e-12 * (1 + std::abs(weight[k][r]));
    }
  }
  if (!consistent)
    n.fail("resizing symbolic dim " + std::to_string(axis) + " (" + length.str() + ") with mode '" +
           n.attrString("mode", "nearest") + "', coordinate_transformation_mode '" +
           spec.coordMode + "'" +
           (spec.mode == InterpMode::Nearest ? ", nearest_mode '" + spec.nearestMode + "'" : "") +
           (spec.excludeOutside ? " and exclude_outside" : "") +
           " is not a fixed pattern per output position: fix the sizes (tcc compile "
           "--input-shape)");
  CoreBuilder &b = n.b();
  Type i64 = b.builder().getI64Type();
  SymExpr outLength = length * scale;
  Value o = b.iotaOfDims({outLength}, i64, 0);
  Value scales = b.broadcastToDims(b.constantI64({scale}, {}), {outLength});
  Value q = b.div(o, scales);
  Value r = b.sub(o, b.mul(q, scales));
  SymShape weightDims(CoreBuilder::rankOf(x), SymExpr(1));
  weightDims[axis] = outLength;
  Value y;
  for (size_t k = 0; k < taps; ++k) {
    if (llvm::all_of(weight[k], [](double w) { return w == 0; }))
      continue;
    Value index = q;
    if (llvm::any_of(delta[k], [](int64_t v) { return v != 0; })) {
      index = b.add(q, b.create<GatherOp>(b.constantI64(delta[k], {scale}), r, 0));
      index = b.max(index, b.broadcastToDims(b.constantI64({0}, {}), {outLength}));
      index = b.min(index, b.broadcastToDims(b.symInts({length - 1}, {}), {outLength}));
    }
    Value g = b.create<GatherOp>(x, index, axis);
    if (!llvm::all_of(weight[k], [](double w) { return w == 1; })) {
      Value w = b.create<GatherOp>(constFloats(n, elemOf(x), {scale}, weight[k]), r, 0);
      g = b.mul(g, b.reshapeToDims(w, weightDims));
    }
    y = y ? b.add(y, g) : g;
  }
  if (!y)
    n.fail("resizing symbolic dim " + std::to_string(axis) + ": every weight is zero");
  return y;
}

/// Resizes every axis of x to `outShape`, axis by axis, with per-axis `scales` (and, for
/// tf_crop_and_resize, `roi` = starts ++ ends).
Value resizeAll(NodeContext &n, Value x, const ResizeSpec &spec, ArrayRef<int64_t> outShape,
                ArrayRef<double> scales, ArrayRef<double> roi) {
  CoreBuilder &b = n.b();
  Type et = elemOf(x);
  int64_t rank = CoreBuilder::rankOf(x);
  bool integer = !isa<FloatType>(et); // linear/cubic on integers interpolate in f32
  if (integer && spec.mode != InterpMode::Nearest)
    x = b.cast(x, b.builder().getF32Type());
  Value y = x;
  // Axes that shrink first (the later passes then run on less), then the ones that grow from
  // the innermost outward: the innermost axis's taps are gathers across a row, cheapest on the
  // smallest tensor; an outer axis's taps read whole rows contiguously, cheap even at the
  // full output size (and the fusion pass writes each axis's result once when the next axis
  // reads it through several taps).
  SmallVector<int64_t> order;
  for (int64_t d = 0; d < rank; ++d)
    if (outShape[d] < CoreBuilder::shapeOf(x)[d])
      order.push_back(d);
  for (int64_t d = rank; d-- > 0;)
    if (outShape[d] >= CoreBuilder::shapeOf(x)[d])
      order.push_back(d);
  for (int64_t d : order) {
    int64_t inLen = CoreBuilder::shapeOf(x)[d];
    if (outShape[d] < 1)
      n.fail("the output would be empty along axis " + std::to_string(d));
    if (inLen < 1)
      n.fail("cannot resize an empty input");
    double rs = roi.empty() ? 0 : roi[d], re = roi.empty() ? 1 : roi[rank + d];
    // An axis that keeps its size at scale 1 is left alone (only a crop box can move it),
    // as in ONNX Runtime: the reference would shift it for tf_half_pixel_for_nn + ceil.
    if (outShape[d] == inLen && scales[d] == 1 && (spec.coordMode != "tf_crop_and_resize" ||
                                                   (rs == 0 && re == 1)))
      continue;
    AxisTable t = resizeAxisTable(n, spec, inLen, outShape[d], scales[d], rs, re);
    if (!t.identity)
      y = resizeAlong(n, y, d, t, spec.extrapolation);
  }
  if (integer && spec.mode != InterpMode::Nearest) {
    // Back to the integer type truncating (as ONNX Runtime and the numpy reference do).
    y = b.saturatingCast(y, et);
  }
  return y;
}

InterpMode interpMode(NodeContext &n, const std::string &mode) {
  if (mode == "nearest")
    return InterpMode::Nearest;
  if (mode == "linear" || mode == "bilinear" || mode == "trilinear")
    return InterpMode::Linear;
  if (mode == "cubic")
    return InterpMode::Cubic;
  n.fail("unknown mode '" + mode + "'");
}

/// Float values of a compile-time input (scales, roi); empty when the input is absent or empty.
std::vector<double> floatsInput(NodeContext &n, size_t i, const std::string &what) {
  if (!n.hasInput(i))
    return {};
  Tensor t = n.requireConstantInput(i, what);
  std::vector<double> v;
  for (int64_t k = 0; k < t.numElements(); ++k)
    v.push_back(t.getDouble(k));
  return v;
}

/// Resize of a tensor with symbolic dims: by `scales` (sizes would be a fixed output size, a
/// table per input size), axis by axis; a fixed axis as in resizeAll, a symbolic one by an
/// integer factor (the upsampling of FPN, YOLO and segmentation heads: nearest, linear, cubic).
Value resizeSymbolic(NodeContext &n, Value x, const ResizeSpec &spec, ArrayRef<int64_t> axes,
                     ArrayRef<double> scales) {
  // Linear and cubic resizing of integers interpolate in f32 and truncate back (resizeAll).
  Type et = elemOf(x);
  if (!isa<FloatType>(et) && spec.mode != InterpMode::Nearest)
    return n.b().saturatingCast(
        resizeSymbolic(n, n.b().cast(x, n.b().builder().getF32Type()), spec, axes, scales), et);
  if (spec.coordMode == "tf_crop_and_resize")
    n.fail("tf_crop_and_resize of a tensor with symbolic dims: fix the sizes (tcc compile "
           "--input-shape)");
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t d = axes[i];
    double s = scales[i];
    if (!(s > 0))
      n.fail("scales must be positive");
    SymExpr length = CoreBuilder::dimsOf(x)[d];
    if (std::optional<int64_t> len = length.constant()) {
      int64_t out = (int64_t)std::floor(s * *len);
      if (out < 1 || *len < 1)
        n.fail("the output would be empty along axis " + std::to_string(d));
      if (out == *len && s == 1)
        continue;
      AxisTable t = resizeAxisTable(n, spec, *len, out, s, 0, 1);
      if (!t.identity)
        x = resizeAlong(n, x, d, t, spec.extrapolation);
      continue;
    }
    if (s == 1)
      continue;
    if (s != std::floor(s))
      n.fail("resizing symbolic dim " + std::to_string(d) + " (" + length.str() +
             ") takes an integer scale (got " + std::to_string(s) +
             "): fix the sizes (tcc compile --input-shape)");
    x = resizeSymbolicPeriodic(n, x, d, spec, (int64_t)s);
  }
  return x;
}

void lowerResize(NodeContext &n) {
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  ResizeSpec spec;
  spec.mode = interpMode(n, n.attrString("mode", "nearest"));
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (n.opset() < 11) {
    spec.coordMode = "asymmetric";
    spec.nearestMode = "simple";
    scales = floatsInput(n, 1, "scales");
  } else {
    spec.coordMode = n.attrString("coordinate_transformation_mode", "half_pixel");
    spec.nearestMode = n.attrString("nearest_mode", "round_prefer_floor");
    spec.cubicA = n.attrFloat("cubic_coeff_a", -0.75);
    spec.excludeOutside = n.attrInt("exclude_outside", 0) != 0;
    spec.extrapolation = n.attrFloat("extrapolation_value", 0.0);
    if (spec.coordMode == "tf_crop_and_resize")
      roi = floatsInput(n, 1, "roi");
    scales = floatsInput(n, 2, "scales");
    if (n.hasInput(3)) {
      Tensor t = n.requireConstantInput(3, "sizes");
      if (t.numElements() > 0)
        sizes = n.requireInts(3, "sizes");
    }
  }
  spec.antialias = n.attrInt("antialias", 0) != 0;
  if (spec.antialias && spec.mode == InterpMode::Nearest)
    n.fail("antialias applies to the linear and cubic modes only");
  // opset 18: `axes` selects which dims scales/sizes/roi describe.
  std::vector<int64_t> axes = n.attrInts("axes");
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  for (int64_t &a : axes)
    a = n.normalizeAxis(a, rank);
  size_t na = axes.size();
  if (!scales.empty() && !sizes.empty())
    n.fail("only one of scales and sizes may be given");
  if (scales.empty() && sizes.empty())
    n.fail("one of scales and sizes must be given");
  if (!roi.empty() && roi.size() != 2 * na)
    n.fail("roi must have 2 values per resized axis");
  if (hasSymbolicDims(x.getType())) {
    if (scales.empty())
      n.fail("sizes give a fixed output size, which a tensor with symbolic dims (" +
             shapeString(CoreBuilder::dimsOf(x)) + ") reaches by a different table at each "
             "size: fix the sizes (tcc compile --input-shape), or resize by scales");
    if (scales.size() != na)
      n.fail("scales must have one value per resized axis");
    return n.setOutput(0, resizeSymbolic(n, x, spec, axes, scales));
  }
  auto in = CoreBuilder::shapeOf(x);

  std::vector<double> fullScales(rank, 1.0), fullRoi;
  SmallVector<int64_t> outShape(in.begin(), in.end());
  if (!roi.empty()) {
    fullRoi.assign(2 * rank, 0);
    for (int64_t d = 0; d < rank; ++d)
      fullRoi[rank + d] = 1;
    for (size_t i = 0; i < na; ++i) {
      fullRoi[axes[i]] = roi[i];
      fullRoi[rank + axes[i]] = roi[na + i];
    }
  }
  if (!scales.empty()) {
    if (scales.size() != na)
      n.fail("scales must have one value per resized axis");
    for (size_t i = 0; i < na; ++i) {
      if (!(scales[i] > 0))
        n.fail("scales must be positive");
      fullScales[axes[i]] = scales[i];
      outShape[axes[i]] = (int64_t)std::floor(scales[i] * in[axes[i]]);
    }
  } else {
    if (sizes.size() != na)
      n.fail("sizes must have one value per resized axis");
    std::string policy = n.attrString("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) {
        outShape[axes[i]] = sizes[i];
        fullScales[axes[i]] = (double)sizes[i] / in[axes[i]];
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double s = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0;
      for (size_t i = 0; i < na; ++i) {
        double si = (double)sizes[i] / in[axes[i]];
        s = policy == "not_larger" ? std::min(s, si) : std::max(s, si);
      }
      for (size_t i = 0; i < na; ++i) {
        fullScales[axes[i]] = s;
        outShape[axes[i]] = (int64_t)std::round(s * in[axes[i]]);
      }
    } else {
      n.fail("unknown keep_aspect_ratio_policy '" + policy + "'");
    }
  }
  n.setOutput(0, resizeAll(n, x, spec, outShape, fullScales, fullRoi));
}

// Upsample (deprecated): Resize with asymmetric coordinates.
void lowerUpsample(NodeContext &n) {
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  auto in = CoreBuilder::shapeOf(x);
  ResizeSpec spec;
  spec.mode = interpMode(n, n.attrString("mode", "nearest"));
  spec.coordMode = "asymmetric";
  spec.nearestMode = "simple";
  std::vector<double> scales;
  if (n.opset() < 9) {
    for (float f : n.attrFloats("scales"))
      scales.push_back(f);
  } else {
    scales = floatsInput(n, 1, "scales");
  }
  if ((int64_t)scales.size() != rank)
    n.fail("scales must have one value per dim");
  SmallVector<int64_t> outShape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!(scales[d] > 0))
      n.fail("scales must be positive");
    outShape.push_back((int64_t)std::floor(scales[d] * in[d]));
  }
  n.setOutput(0, resizeAll(n, x, spec, outShape, scales, {}));
}

// ---- CausalConvWithState -----------------------------------------------------------------------

/// CausalConvWithState (opset 27; the short convolution of Mamba-style and gated-delta blocks):
/// input [B, C, L], depthwise weight [C, 1, k]; the input is prefixed with past_state [B, C, k-1]
/// (zeros when absent), convolved (valid, groups = C) with the optional bias, then optionally
/// SiLU. Outputs the result [B, C, L] and the last k-1 positions of the prefixed input.
void lowerCausalConvWithState(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), w = n.input(1);
  if (!isFloatValue(x) || elemOf(w) != elemOf(x))
    n.fail("input and weight must be floating-point tensors of one type");
  SmallVector<int64_t> xs = shapeVec(x), ws = shapeVec(w);
  if (xs.size() != 3 || ws.size() != 3 || ws[0] != xs[1] || ws[1] != 1 || ws[2] < 1)
    n.fail("input must be [B, C, L] and weight [C, 1, k] (depthwise), got " +
           shapeToString(Shape(xs.begin(), xs.end())) + " and " +
           shapeToString(Shape(ws.begin(), ws.end())));
  std::string activation = n.attrString("activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish")
    n.fail("activation must be none, silu or swish, got '" + activation + "'");
  const int64_t batch = xs[0], channels = xs[1], length = xs[2], k = ws[2];
  Value padded = x;
  if (k > 1) {
    Value past = n.hasInput(3) ? n.input(3)
                               : b.splat(b.tensorType({batch, channels, k - 1}, elemOf(x)), 0.0);
    if (shapeVec(past) != SmallVector<int64_t>{batch, channels, k - 1} || elemOf(past) != elemOf(x))
      n.fail("past_state must be [B, C, k - 1] of the input's type");
    padded = b.concat({past, x}, 2);
  }
  Value y = b.create<ConvOp>(padded, w, SmallVector<int64_t>{1}, SmallVector<int64_t>{0},
                             SmallVector<int64_t>{0}, SmallVector<int64_t>{1},
                             SmallVector<int64_t>{1}, channels);
  if (n.hasInput(2))
    y = addChannelBias(b, y, n.input(2));
  if (activation != "none")
    y = b.mul(y, b.unary(UnaryKind::Sigmoid, y));
  n.setOutput(0, y);
  if (n.hasOutput(1))
    n.setOutput(1, b.sliceDim(padded, 2, length, length + k - 1));
}

// ---- AffineGrid ------------------------------------------------------------------------------

/// AffineGrid (opset 20; PyTorch's affine_grid): the sampling grid [N, (D,) H, W, r] of theta
/// [N, r, r+1] applied to the normalized coordinates of every output position, (x, y[, z], 1)
/// with x along W: -1 + (2i + 1) / S, or -1 + 2i / (S - 1) with align_corners. The homogeneous
/// coordinates are a compile-time table (size is a constant); one batched matmul applies theta.
void lowerAffineGrid(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value theta = n.input(0);
  if (!isFloatValue(theta))
    n.fail("theta must be a floating-point tensor");
  std::vector<int64_t> size = n.requireInts(1, "size");
  if (size.size() != 4 && size.size() != 5)
    n.fail("size must be [N, C, H, W] or [N, C, D, H, W], got " + std::to_string(size.size()) +
           " values");
  const int64_t r = (int64_t)size.size() - 2, batch = size[0];
  if (shapeVec(theta) != SmallVector<int64_t>{batch, r, r + 1})
    n.fail("theta must have shape " + std::to_string(batch) + "x" + std::to_string(r) + "x" +
           std::to_string(r + 1) + " for that size");
  for (int64_t d = 2; d < (int64_t)size.size(); ++d)
    if (size[d] <= 0)
      n.fail("spatial sizes must be positive");
  bool align = n.attrInt("align_corners", 0) != 0;
  auto coordinate = [&](int64_t i, int64_t extent) {
    if (align)
      return extent == 1 ? -1.0 : -1.0 + i * (2.0 / (extent - 1));
    double step = 2.0 / extent;
    return -1.0 + step / 2 + i * step;
  };
  std::vector<int64_t> spatial(size.begin() + 2, size.end());
  int64_t points = 1;
  for (int64_t e : spatial)
    points *= e;
  std::vector<double> homogeneous;
  homogeneous.reserve(points * (r + 1));
  std::vector<int64_t> index(r, 0); // (d,) h, w of the current point, row-major
  for (int64_t p = 0; p < points; ++p) {
    for (int64_t k = r - 1; k >= 0; --k) // x (last spatial dim) first
      homogeneous.push_back(coordinate(index[k], spatial[k]));
    homogeneous.push_back(1.0);
    for (int64_t k = r - 1; k >= 0 && ++index[k] == spatial[k]; --k)
      index[k] = 0;
  }
  Value base = constFloats(n, elemOf(theta), {points, r + 1}, homogeneous);
  Value grid = b.matmul(b.broadcastTo(base, {batch, points, r + 1}), b.transpose(theta, {0, 2, 1}));
  SmallVector<int64_t> outShape{batch};
  outShape.append(spatial.begin(), spatial.end());
  outShape.push_back(r);
  n.setOutput(0, b.reshape(grid, outShape));
}

// ---- Col2Im -----------------------------------------------------------------------------------

/// Col2Im (opset 18; PyTorch's fold): input [N, C * prod(block), L] holds L sliding blocks;
/// each image element is the sum of the block elements that cover it. Which column of which
/// block offset covers an element is a compile-time table, so the sum is a gather_elements over
/// the columns ([N, C, K, L] -> [N, C, K, P], K block offsets, P image elements), masked where
/// an offset does not cover the element, reduced over K.
void lowerCol2Im(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  std::vector<int64_t> image = n.requireInts(1, "image_shape");
  std::vector<int64_t> block = n.requireInts(2, "block_shape");
  const int64_t r = (int64_t)image.size();
  if (r == 0 || (int64_t)block.size() != r)
    n.fail("image_shape and block_shape must have the same positive length");
  SmallVector<int64_t> xs = shapeVec(x);
  if (xs.size() != 3)
    n.fail("input must be [N, C * prod(block_shape), L]");
  int64_t kernel = 1, points = 1, columns = 1;
  for (int64_t d = 0; d < r; ++d) {
    if (image[d] <= 0 || block[d] <= 0)
      n.fail("image and block sizes must be positive");
    kernel *= block[d];
    points *= image[d];
  }
  // The sliding blocks: a window of `block` over the padded image (strides, dilations, pads).
  Window g = windowGeometry(n, image, block, false);
  const std::vector<int64_t> &blocks = g.out, &strides = g.strides, &dilations = g.dilations,
                             &padLow = g.padLow;
  for (int64_t count : blocks)
    columns *= count;
  if (xs[1] % kernel != 0 || xs[2] != columns)
    n.fail("input must have C * " + std::to_string(kernel) + " rows and " +
           std::to_string(columns) + " columns (the sliding blocks), got " +
           std::to_string(xs[1]) + "x" + std::to_string(xs[2]));
  const int64_t batch = xs[0], channels = xs[1] / kernel;
  // For block offset k and image element p: the column whose block puts offset k on p.
  auto unravel = [](int64_t i, const std::vector<int64_t> &dims, std::vector<int64_t> &out) {
    for (int64_t d = (int64_t)dims.size() - 1; d >= 0; --d) {
      out[d] = i % dims[d];
      i /= dims[d];
    }
  };
  std::vector<int64_t> column(kernel * points, 0), covers(kernel * points, 0), offset(r), pos(r);
  for (int64_t k = 0; k < kernel; ++k) {
    unravel(k, block, offset);
    for (int64_t p = 0; p < points; ++p) {
      unravel(p, image, pos);
      int64_t col = 0;
      bool ok = true;
      for (int64_t d = 0; d < r && ok; ++d) {
        int64_t start = pos[d] + padLow[d] - offset[d] * dilations[d]; // block start, padded
        ok = start >= 0 && start % strides[d] == 0 && start / strides[d] < blocks[d];
        col = col * blocks[d] + (ok ? start / strides[d] : 0);
      }
      column[k * points + p] = ok ? col : 0;
      covers[k * points + p] = ok;
    }
  }
  SmallVector<int64_t> full{batch, channels, kernel, points};
  Value cols = b.reshape(x, {batch, channels, kernel, columns});
  Value index = b.broadcastTo(b.constantI64(column, {1, 1, kernel, points}), full);
  Value taken = b.create<GatherElementsOp>(cols, index, 3);
  Value mask = b.broadcastTo(
      b.cast(b.constantI64(covers, {1, 1, kernel, points}), b.builder().getI1Type()), full);
  Value sum = b.reduce(ReduceKind::Sum, b.select(mask, taken, b.splatLike(taken, 0)), {2},
                       /*keepDims=*/false);
  SmallVector<int64_t> outShape{batch, channels};
  outShape.append(image.begin(), image.end());
  n.setOutput(0, b.reshape(sum, outShape));
}

// ---- GridSample ------------------------------------------------------------------------------

/// PyTorch's reflect_coordinates: folds x into [twiceLow/2, twiceHigh/2] by reflection.
Value reflectCoords(CoreBuilder &b, Value x, double twiceLow, double twiceHigh) {
  if (twiceLow == twiceHigh)
    return b.splatLike(x, 0);
  double lo = twiceLow / 2, span = (twiceHigh - twiceLow) / 2;
  Value a = b.unary(UnaryKind::Abs, b.sub(x, b.scalarLike(x, lo)));
  Value extra = b.binary(BinaryKind::Rem, a, b.scalarLike(x, span));
  Value flips = b.unary(UnaryKind::Floor, b.div(a, b.scalarLike(x, span)));
  Value even = b.compare(CompareKind::Eq, b.binary(BinaryKind::Rem, flips, b.scalarLike(x, 2)),
                         b.scalarLike(x, 0));
  return b.select(even, b.add(extra, b.scalarLike(x, lo)),
                  b.sub(b.scalarLike(x, span + lo), extra));
}

Value clipCoords(CoreBuilder &b, Value x, int64_t size) {
  return b.min(b.max(x, b.scalarLike(x, 0)), b.scalarLike(x, size - 1));
}

/// weight * planes[..., c, pixel at `at`] for one tap: `planes` [B..., Cx, prod(size)] (images
/// flattened), `at` per spatial dim and `weight` [B..., Q] (integer-valued float coordinates);
/// taps outside the image read 0. Returns [B..., Cx, Q]. (GridSample, DeformConv.)
Value gatherTap(CoreBuilder &b, Value planes, ArrayRef<Value> at, Value weight,
                ArrayRef<int64_t> size) {
  Type i64 = b.builder().getI64Type();
  Value valid, index;
  for (size_t d = 0; d < size.size(); ++d) {
    Value in = b.binary(BinaryKind::And, b.compare(CompareKind::Ge, at[d], b.scalarLike(at[d], 0)),
                        b.compare(CompareKind::Le, at[d], b.scalarLike(at[d], size[d] - 1)));
    valid = valid ? b.binary(BinaryKind::And, valid, in) : in;
    Value i = b.cast(clipCoords(b, at[d], size[d]), i64);
    index = index ? b.add(b.mul(index, b.scalarLike(index, size[d])), i) : i;
  }
  weight = b.select(valid, weight, b.splatLike(weight, 0));
  SmallVector<int64_t> ps = shapeVec(planes), qs = shapeVec(weight), oneRow = qs;
  oneRow.insert(oneRow.end() - 1, 1); // [B..., 1, Q]
  SmallVector<int64_t> all = oneRow;
  all[all.size() - 2] = ps[ps.size() - 2]; // [B..., Cx, Q]
  Value v = b.create<GatherElementsOp>(planes, b.broadcastTo(b.reshape(index, oneRow), all),
                                       (uint64_t)(ps.size() - 1));
  return b.mul(v, b.reshape(weight, oneRow));
}

/// Multilinear interpolation of `planes` (as gatherTap) at float pixel coordinates f[d]
/// ([B..., Q] each): the sum over the 2^r corners of the product of their per-dim weights times
/// the pixel there, corners outside reading 0. (GridSample's bilinear mode, DeformConv.)
Value interpolateLinear(CoreBuilder &b, Value planes, ArrayRef<Value> f, ArrayRef<int64_t> size) {
  const int64_t r = f.size();
  std::vector<Value> lo(r), hi(r), wLo(r), wHi(r);
  for (int64_t d = 0; d < r; ++d) {
    Value one = b.scalarLike(f[d], 1);
    lo[d] = b.unary(UnaryKind::Floor, f[d]);
    hi[d] = b.add(lo[d], one);
    wHi[d] = b.sub(f[d], lo[d]);
    wLo[d] = b.sub(one, wHi[d]);
  }
  Value result;
  for (int64_t corner = 0; corner < (1 << r); ++corner) {
    std::vector<Value> at(r);
    Value w;
    for (int64_t d = 0; d < r; ++d) {
      bool up = (corner >> (r - 1 - d)) & 1;
      at[d] = up ? hi[d] : lo[d];
      w = w ? b.mul(w, up ? wHi[d] : wLo[d]) : (up ? wHi[d] : wLo[d]);
    }
    Value v = gatherTap(b, planes, at, w, size);
    result = result ? b.add(result, v) : v;
  }
  return result;
}

/// Applies the border / reflection padding mode to a pixel coordinate.
Value padCoords(CoreBuilder &b, Value x, int64_t size, const std::string &padding, bool align) {
  if (padding == "border")
    return clipCoords(b, x, size);
  if (padding == "reflection") {
    x = align ? reflectCoords(b, x, 0, 2.0 * (size - 1)) : reflectCoords(b, x, -1, 2.0 * size - 1);
    return clipCoords(b, x, size);
  }
  return x;
}

// GridSample (PyTorch grid_sample semantics): unnormalize the grid to pixel coordinates,
// apply the padding mode, then read 1 (nearest), 4 (bilinear) or 16 (bicubic) taps per output
// with gather_elements over the flattened image, weighting out-of-bounds taps by zero.
void lowerGridSample(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), grid = n.input(1);
  const int64_t rank = CoreBuilder::rankOf(x), r = rank - 2; // spatial dims (2 or 3)
  if ((rank != 4 && rank != 5) || CoreBuilder::rankOf(grid) != rank)
    n.fail("input must be [N, C, H, W] with grid [N, H_out, W_out, 2], or [N, C, D, H, W] with "
           "grid [N, D_out, H_out, W_out, 3]");
  if (!isFloatValue(x))
    n.fail("input must be a float tensor");
  SmallVector<int64_t> xs = shapeVec(x), gs = shapeVec(grid);
  const int64_t N = xs[0], C = xs[1];
  SmallVector<int64_t> size(xs.begin() + 2, xs.end()), outSpatial(gs.begin() + 1, gs.end() - 1);
  if (gs[0] != N || gs.back() != r)
    n.fail("grid must be [N, spatial out..., " + std::to_string(r) + "]");
  int64_t S = 1, points = 1;
  for (int64_t d : outSpatial)
    S *= d;
  for (int64_t d : size)
    points *= d;
  std::string mode = n.attrString("mode", "bilinear");
  std::string padding = n.attrString("padding_mode", "zeros");
  bool align = n.attrInt("align_corners", 0) != 0;
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    n.fail("unknown padding_mode '" + padding + "'");
  grid = b.cast(grid, elemOf(x));
  auto unnormalize = [&](Value g, int64_t extent) {
    Value one = b.scalarLike(g, 1);
    if (align)
      return b.mul(b.add(g, one), b.scalarLike(g, (extent - 1) / 2.0));
    return b.div(b.sub(b.mul(b.add(g, one), b.scalarLike(g, extent)), one), b.scalarLike(g, 2));
  };
  // f[d] [N, S]: the pixel coordinate along spatial dim d (grid component r-1-d: x is along the
  // last).
  std::vector<Value> f(r);
  for (int64_t d = 0; d < r; ++d)
    f[d] = b.reshape(unnormalize(takeLast(b, b.sliceDim(grid, rank - 1, r - 1 - d, r - d), 0),
                                 size[d]),
                     {N, S});

  Value flat = b.reshape(x, {N, C, points});
  Value result;
  auto addTap = [&](ArrayRef<Value> at, Value w) {
    Value v = gatherTap(b, flat, at, w, size);
    result = result ? b.add(result, v) : v;
  };

  if (mode == "linear") // opset 20 name
    mode = "bilinear";
  if (mode == "nearest" || mode == "bilinear") {
    for (int64_t d = 0; d < r; ++d)
      f[d] = padCoords(b, f[d], size[d], padding, align);
    if (mode == "nearest") {
      std::vector<Value> at(r);
      for (int64_t d = 0; d < r; ++d)
        at[d] = b.unary(UnaryKind::Round, f[d]);
      addTap(at, b.splatLike(f[0], 1));
    } else {
      result = interpolateLinear(b, flat, f, size);
    }
  } else if (mode == "bicubic" || mode == "cubic") {
    if (r != 2)
      n.fail("cubic mode takes 4-D input [N, C, H, W] only");
    // Cubic convolution (A = -0.75) over the 4x4 neighbourhood; padding applies per tap.
    const double A = -0.75;
    auto coeffs = [&](Value t) {
      auto c1 = [&](Value v) { // ((A + 2) v - (A + 3)) v^2 + 1
        Value p = b.sub(b.mul(b.scalarLike(v, A + 2), v), b.scalarLike(v, A + 3));
        return b.add(b.mul(b.mul(p, v), v), b.scalarLike(v, 1));
      };
      auto c2 = [&](Value v) { // ((A v - 5A) v + 8A) v - 4A
        Value p = b.sub(b.mul(b.scalarLike(v, A), v), b.scalarLike(v, 5 * A));
        p = b.add(b.mul(p, v), b.scalarLike(v, 8 * A));
        return b.sub(b.mul(p, v), b.scalarLike(v, 4 * A));
      };
      Value one = b.scalarLike(t, 1), u = b.sub(one, t);
      return std::array<Value, 4>{c2(b.add(t, one)), c1(t), c1(u), c2(b.add(u, one))};
    };
    Value fy = f[0], fx = f[1];
    int64_t H = size[0], W = size[1];
    Value x0 = b.unary(UnaryKind::Floor, fx), y0 = b.unary(UnaryKind::Floor, fy);
    auto cx = coeffs(b.sub(fx, x0)), cy = coeffs(b.sub(fy, y0));
    for (int j = 0; j < 4; ++j) {
      Value iy = padCoords(b, b.add(y0, b.scalarLike(y0, j - 1)), H, padding, align);
      iy = b.unary(UnaryKind::Floor, iy); // PyTorch truncates; coordinates are >= 0 here or invalid
      for (int i = 0; i < 4; ++i) {
        Value ix = padCoords(b, b.add(x0, b.scalarLike(x0, i - 1)), W, padding, align);
        ix = b.unary(UnaryKind::Floor, ix);
        addTap({iy, ix}, b.mul(cx[i], cy[j]));
      }
    }
  } else {
    n.fail("unknown mode '" + mode + "'");
  }
  SmallVector<int64_t> outShape{N, C};
  outShape.append(outSpatial.begin(), outSpatial.end());
  n.setOutput(0, b.reshape(result, outShape));
}

// ---- RoiAlign ----------------------------------------------------------------------------------

// RoiAlign (the ONNX Runtime / Caffe2 algorithm): per roi and output bin, a grid of sample
// points, each bilinearly interpolated from 4 pixels; the bin's value is their mean (avg) or
// the max over samples of the max weighted pixel (max). Sample coordinates are computed
// from the rois with elementwise ops; the pixels are read with gather_elements. The sample
// grid size is static unless sampling_ratio is 0 (adaptive), where the rois must be known
// at compile time.
void lowerRoiAlign(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), rois = n.input(1), batchIdx = n.input(2);
  if (CoreBuilder::rankOf(x) != 4)
    n.fail("expects an input [N, C, H, W]");
  if (!isFloatValue(x))
    n.fail("input must be a float tensor");
  auto xs = CoreBuilder::shapeOf(x), rs = CoreBuilder::shapeOf(rois);
  if (rs.size() != 2 || rs[1] != 4)
    n.fail("rois must be [num_rois, 4]");
  if (CoreBuilder::shapeOf(batchIdx) != ArrayRef<int64_t>{rs[0]})
    n.fail("batch_indices must be [num_rois]");
  int64_t C = xs[1], H = xs[2], W = xs[3], R = rs[0];
  int64_t PH = n.attrInt("output_height", 1), PW = n.attrInt("output_width", 1);
  int64_t ratio = n.attrInt("sampling_ratio", 0);
  double spatialScale = n.attrFloat("spatial_scale", 1.0);
  std::string mode = n.attrString("mode", "avg");
  std::string ctm = n.opset() >= 16 ? n.attrString("coordinate_transformation_mode", "half_pixel")
                                    : "output_half_pixel";
  if (PH < 1 || PW < 1 || ratio < 0)
    n.fail("output_height/output_width must be >= 1 and sampling_ratio >= 0");
  if (mode != "avg" && mode != "max")
    n.fail("unknown mode '" + mode + "'");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    n.fail("unknown coordinate_transformation_mode '" + ctm + "'");
  bool halfPixel = ctm == "half_pixel";
  if (R == 0) {
    n.setOutput(0, b.splat(b.tensorType({0, C, PH, PW}, elemOf(x)), 0));
    return;
  }
  Type et = elemOf(x);
  rois = b.cast(rois, et);
  double offset = halfPixel ? 0.5 : 0;
  auto coord = [&](int64_t i) { // rois[:, i] * scale - offset, as [R, 1, 1]
    Value c = b.reshape(b.sliceDim(rois, 1, i, i + 1), {R, 1, 1});
    return b.sub(b.mul(c, b.scalarLike(c, spatialScale)), b.scalarLike(c, offset));
  };
  Value x1 = coord(0), y1 = coord(1), x2 = coord(2), y2 = coord(3);
  Value roiW = b.sub(x2, x1), roiH = b.sub(y2, y1);
  if (!halfPixel) {
    roiW = b.max(roiW, b.scalarLike(roiW, 1));
    roiH = b.max(roiH, b.scalarLike(roiH, 1));
  }

  // Sample grid sizes: static, or per roi from compile-time rois.
  std::vector<int64_t> gridH(R, ratio), gridW(R, ratio);
  if (ratio == 0) {
    Tensor r = n.requireConstantInput(1, "rois (with sampling_ratio 0 the number of sample "
                                         "points depends on them)");
    for (int64_t i = 0; i < R; ++i) {
      float v[4];
      for (int k = 0; k < 4; ++k)
        v[k] = (float)r.getDouble(i * 4 + k) * (float)spatialScale - (float)offset;
      float h = v[3] - v[1], w = v[2] - v[0];
      if (!halfPixel) {
        h = std::max(h, 1.0f);
        w = std::max(w, 1.0f);
      }
      gridH[i] = (int64_t)std::ceil(h / PH);
      gridW[i] = (int64_t)std::ceil(w / PW);
    }
  }
  int64_t GH = std::max<int64_t>(1, *std::max_element(gridH.begin(), gridH.end()));
  int64_t GW = std::max<int64_t>(1, *std::max_element(gridW.begin(), gridW.end()));
  bool adaptive = ratio == 0;

  // Sample coordinates along one axis: start + p*bin + (g + 0.5)*bin/grid, as [R, P, G], with
  // the ORT bilinear rules turned into (low, high) pixel indices and weights.
  struct AxisSamples {
    Value low, high; // i64 [R, P, G]
    Value wLow, wHigh;
  };
  auto samples = [&](Value start, Value len, int64_t P, int64_t G, const std::vector<int64_t> &grid,
                     int64_t size) {
    Value bin = b.div(len, b.scalarLike(len, P));
    std::vector<double> pIdx(P), gOff(G), gCount(R), gValid(R * G);
    for (int64_t p = 0; p < P; ++p)
      pIdx[p] = p;
    for (int64_t g = 0; g < G; ++g)
      gOff[g] = g + 0.5;
    for (int64_t r = 0; r < R; ++r) {
      gCount[r] = std::max<int64_t>(grid[r], 1);
      for (int64_t g = 0; g < G; ++g)
        gValid[r * G + g] = g < grid[r];
    }
    Value step = b.div(bin, adaptive ? constFloats(n, et, {R, 1, 1}, gCount) : b.scalarLike(bin, G));
    Value pos = b.add(b.add(start, b.mul(bin, constFloats(n, et, {1, P, 1}, pIdx))),
                      b.mul(step, constFloats(n, et, {1, 1, G}, gOff)));
    Value invalid = b.binary(BinaryKind::Or, b.compare(CompareKind::Lt, pos, b.scalarLike(pos, -1)),
                             b.compare(CompareKind::Gt, pos, b.scalarLike(pos, size)));
    Value p0 = b.max(pos, b.scalarLike(pos, 0));
    Value lo = b.unary(UnaryKind::Floor, p0);
    Value atEnd = b.compare(CompareKind::Ge, lo, b.scalarLike(lo, size - 1));
    Value last = b.splatLike(lo, size - 1);
    lo = b.select(atEnd, last, lo);
    Value hi = b.select(atEnd, last, b.add(lo, b.scalarLike(lo, 1)));
    Value l = b.select(atEnd, b.splatLike(p0, 0), b.sub(p0, lo));
    Value h = b.sub(b.scalarLike(l, 1), l);
    Value zero = b.splatLike(l, 0);
    if (adaptive) // samples beyond this roi's grid weigh nothing
      invalid = b.binary(BinaryKind::Or, invalid,
                         b.broadcastTo(b.compare(CompareKind::Eq, constFloats(n, et, {R, 1, G}, gValid),
                                                 b.scalarLike(l, 0)),
                                       {R, P, G}));
    Type i64 = b.builder().getI64Type();
    return AxisSamples{b.cast(lo, i64), b.cast(hi, i64), b.select(invalid, zero, h),
                       b.select(invalid, zero, l)};
  };
  AxisSamples ys = samples(y1, roiH, PH, GH, gridH, H);
  AxisSamples xsm = samples(x1, roiW, PW, GW, gridW, W);

  // Combine to [R, PH, PW, GH, GW] per tap, stacked on a last dim of 4 taps.
  SmallVector<int64_t> full{R, PH, PW, GH, GW};
  auto yView = [&](Value v) { return b.broadcastTo(b.reshape(v, {R, PH, 1, GH, 1}), full); };
  auto xView = [&](Value v) { return b.broadcastTo(b.reshape(v, {R, 1, PW, 1, GW}), full); };
  Value wStride = b.scalarLike(ys.low, W);
  SmallVector<Value> idx, wts;
  for (auto [yi, wy] : {std::pair{ys.low, ys.wLow}, std::pair{ys.high, ys.wHigh}})
    for (auto [xi, wx] : {std::pair{xsm.low, xsm.wLow}, std::pair{xsm.high, xsm.wHigh}}) {
      idx.push_back(b.add(b.mul(yView(yi), wStride), xView(xi)));
      wts.push_back(b.mul(yView(wy), xView(wx)));
    }
  int64_t S = PH * PW * GH * GW * 4;
  Value index = b.broadcastTo(b.reshape(stackLast(b, idx), {R, 1, S}), {R, C, S});
  Value weight = b.reshape(stackLast(b, wts), {R, 1, S});
  Value planes = b.reshape(b.create<GatherOp>(x, b.cast(batchIdx, b.builder().getI64Type()), 0),
                           {R, C, H * W});
  Value vals = b.mul(b.create<GatherElementsOp>(planes, index, 2), weight);
  vals = b.reshape(vals, {R, C, PH, PW, GH * GW, 4});
  Value y;
  if (mode == "avg") {
    std::vector<double> counts(R);
    for (int64_t r = 0; r < R; ++r)
      counts[r] = std::max<int64_t>(gridH[r] * gridW[r], 1);
    Value sum = b.reduce(ReduceKind::Sum, vals, {4, 5}, false);
    y = b.div(sum, adaptive ? constFloats(n, et, {R, 1, 1, 1}, counts)
                            : b.scalarLike(sum, (double)GH * GW));
  } else {
    Value m = b.reduce(ReduceKind::Max, vals, {5}, false); // [R, C, PH, PW, GH*GW]
    if (adaptive) {
      std::vector<double> valid(R * GH * GW);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < GH; ++i)
          for (int64_t j = 0; j < GW; ++j)
            valid[(r * GH + i) * GW + j] = i < gridH[r] && j < gridW[r];
      Value mask = b.compare(CompareKind::Ne, constFloats(n, et, {R, 1, 1, 1, GH * GW}, valid),
                             b.scalarLike(m, 0));
      m = b.select(mask, m, b.splatLike(m, CoreBuilder::lowestValue(et)));
    }
    y = b.reduce(ReduceKind::Max, m, {4}, false);
  }
  n.setOutput(0, y);
}

// ---- NonMaxSuppression (compile time) -------------------------------------------------------

struct Box {
  float x0, y0, x1, y1; // min/max corners
};

Box boxAt(const Tensor &boxes, int64_t offset, bool centerPoint) {
  float v[4];
  for (int k = 0; k < 4; ++k)
    v[k] = (float)boxes.getDouble(offset + k);
  if (centerPoint) // [x_center, y_center, width, height]
    return {v[0] - v[2] / 2, v[1] - v[3] / 2, v[0] + v[2] / 2, v[1] + v[3] / 2};
  // [y1, x1, y2, x2], either diagonal
  return {std::min(v[1], v[3]), std::min(v[0], v[2]), std::max(v[1], v[3]), std::max(v[0], v[2])};
}

bool suppresses(const Box &a, const Box &c, float iouThreshold) {
  float ix0 = std::max(a.x0, c.x0), iy0 = std::max(a.y0, c.y0);
  float ix1 = std::min(a.x1, c.x1), iy1 = std::min(a.y1, c.y1);
  if (ix1 <= ix0 || iy1 <= iy0)
    return false;
  float areaA = (a.x1 - a.x0) * (a.y1 - a.y0), areaC = (c.x1 - c.x0) * (c.y1 - c.y0);
  if (areaA <= 0 || areaC <= 0)
    return false;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float uni = areaA + areaC - inter;
  return uni > 0 && inter / uni > iouThreshold;
}

// NonMaxSuppression: its output shape depends on the data, so it is evaluated at compile time
// (greedy per batch and class, highest score first, ties by lower index).
void lowerNonMaxSuppression(NodeContext &n) {
  Tensor boxes = n.requireConstantInput(0, "boxes (the output size depends on them)");
  Tensor scores = n.requireConstantInput(1, "scores (the output size depends on them)");
  if (boxes.rank() != 3 || boxes.dim(2) != 4)
    n.fail("boxes must be [num_batches, spatial_dimension, 4]");
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
    n.fail("scores must be [num_batches, num_classes, spatial_dimension]");
  int64_t maxOut = 0;
  if (n.hasInput(2)) {
    std::vector<int64_t> v = n.requireInts(2, "max_output_boxes_per_class");
    if (!v.empty())
      maxOut = v[0];
  }
  float iouThreshold = 0;
  bool hasScoreThreshold = n.hasInput(4);
  float scoreThreshold = 0;
  if (n.hasInput(3)) {
    Tensor t = n.requireConstantInput(3, "iou_threshold");
    if (t.numElements() > 0)
      iouThreshold = (float)t.getDouble(0);
  }
  if (hasScoreThreshold) {
    Tensor t = n.requireConstantInput(4, "score_threshold");
    hasScoreThreshold = t.numElements() > 0;
    if (hasScoreThreshold)
      scoreThreshold = (float)t.getDouble(0);
  }
  bool centerPoint = n.attrInt("center_point_box", 0) != 0;
  int64_t B = boxes.dim(0), K = scores.dim(1), S = boxes.dim(1);
  std::vector<int64_t> selected;
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t c = 0; c < K && maxOut > 0; ++c) {
      std::vector<std::pair<float, int64_t>> order;
      for (int64_t i = 0; i < S; ++i) {
        float s = (float)scores.getDouble((bi * K + c) * S + i);
        if (!hasScoreThreshold || s > scoreThreshold)
          order.push_back({s, i});
      }
      std::stable_sort(order.begin(), order.end(),
                       [](const auto &a, const auto &c) { return a.first > c.first; });
      std::vector<Box> kept;
      for (auto &[score, i] : order) {
        if ((int64_t)kept.size() >= maxOut)
          break;
        Box box = boxAt(boxes, (bi * S + i) * 4, centerPoint);
        if (std::any_of(kept.begin(), kept.end(),
                        [&](const Box &k) { return suppresses(k, box, iouThreshold); }))
          continue;
        kept.push_back(box);
        selected.insert(selected.end(), {bi, c, i});
      }
    }
  Tensor out = Tensor::fromVector<int64_t>({(int64_t)selected.size() / 3, 3}, selected);
  n.setOutput(0, n.constant(out));
}

// ---- DeformConv --------------------------------------------------------------------------------

/// DeformConv (opset 19; torchvision's deform_conv2d, 2-d): each kernel tap of each output
/// position reads the input bilinearly at its regular place moved by a learned offset (per
/// offset group; corners outside the image read 0), scaled by the optional mask; the sampled
/// columns [N, C * kH * kW, oH * oW] then meet the weights in one grouped matmul, plus the bias.
void lowerDeformConv(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), w = n.input(1), offset = n.input(2);
  if (!isFloatValue(x) || elemOf(w) != elemOf(x) || elemOf(offset) != elemOf(x))
    n.fail("X, W and offset must be floating-point tensors of one type");
  SmallVector<int64_t> xs = shapeVec(x), ws = shapeVec(w), os = shapeVec(offset);
  if (xs.size() != 4 || ws.size() != 4 || os.size() != 4)
    n.fail("only 2-d deformable convolution is supported: X [N, C, H, W], W [oC, C/group, kH, "
           "kW], offset [N, offset_group * 2 * kH * kW, oH, oW]");
  const int64_t N = xs[0], C = xs[1], H = xs[2], Wd = xs[3], oC = ws[0], kH = ws[2], kW = ws[3];
  const int64_t group = n.attrInt("group", 1), offsetGroup = n.attrInt("offset_group", 1);
  Window g = convGeometry(n, x, w, group); // channels against group, strides, pads, output
  if (offsetGroup < 1 || C % offsetGroup)
    n.fail("channels and offset_group do not match");
  const int64_t oH = g.out[0], oW = g.out[1];
  const int64_t K = kH * kW, P = oH * oW, G = offsetGroup, Cg = C / G;
  if (os[0] != N || os[1] != G * 2 * K || os[2] != oH || os[3] != oW)
    n.fail("offset must be [N, offset_group * 2 * kH * kW, oH, oW] = [" + std::to_string(N) +
           ", " + std::to_string(G * 2 * K) + ", " + std::to_string(oH) + ", " +
           std::to_string(oW) + "]");
  // The regular sampling places [K, P] of every tap at every output position.
  std::vector<double> baseY(K * P), baseX(K * P);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t p = 0; p < P; ++p) {
      baseY[k * P + p] = -g.padLow[0] + g.strides[0] * (p / oW) + g.dilations[0] * (k / kW);
      baseX[k * P + p] = -g.padLow[1] + g.strides[1] * (p % oW) + g.dilations[1] * (k % kW);
    }
  Type et = elemOf(x);
  Value off = b.reshape(offset, {N, G, K, 2, P});
  auto part = [&](int64_t i) { return b.reshape(b.sliceDim(off, 3, i, i + 1), {N, G, K * P}); };
  Value py = b.add(part(0), constFloats(n, et, {1, 1, K * P}, baseY));
  Value px = b.add(part(1), constFloats(n, et, {1, 1, K * P}, baseX));
  Value cols = interpolateLinear(b, b.reshape(x, {N, G, Cg, H * Wd}), {py, px}, {H, Wd});
  if (n.hasInput(4)) {
    Value mask = n.input(4);
    if (shapeVec(mask) != SmallVector<int64_t>{N, G * K, oH, oW} || elemOf(mask) != et)
      n.fail("mask must be [N, offset_group * kH * kW, oH, oW] of X's type");
    cols = b.mul(cols, b.reshape(mask, {N, G, 1, K * P}));
  }
  // [N, G, Cg, K, P] is [N, C, K, P]: per conv group, (C / group) * K rows against the weights.
  const int64_t Ci = C / group, oCi = oC / group;
  Value columns = b.reshape(cols, {N, group, Ci * K, P});
  Value weights = b.broadcastTo(b.reshape(w, {1, group, oCi, Ci * K}), {N, group, oCi, Ci * K});
  Value y = b.reshape(b.matmul(weights, columns), {N, oC, oH, oW});
  if (n.hasInput(3))
    y = addChannelBias(b, y, n.input(3));
  n.setOutput(0, y);
}

// ---- DFT / STFT -------------------------------------------------------------------------------

/// DFT along `axis` of the complex signal re + i*im (im may be null), zero-padded or truncated
/// to `len` points, keeping the first `bins` outputs: two matmuls per part with compile-time
/// cos/sin matrices. Returns {re, im}, with the axis of size `bins`.
std::pair<Value, Value> dftAlong(NodeContext &n, Value re, Value im, int64_t axis, int64_t len,
                                 int64_t bins, bool inverse) {
  CoreBuilder &b = n.b();
  int64_t rank = CoreBuilder::rankOf(re);
  SmallVector<int64_t> perm, inversePerm(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  for (int64_t d = 0; d < rank; ++d)
    inversePerm[perm[d]] = d;
  int64_t L = CoreBuilder::shapeOf(re)[axis];
  SmallVector<int64_t> moved;
  int64_t rows = 1;
  for (int64_t d : perm)
    moved.push_back(CoreBuilder::shapeOf(re)[d]);
  for (int64_t d = 0; d + 1 < rank; ++d)
    rows *= moved[d];
  auto flat = [&](Value v) { return b.reshape(b.transpose(v, perm), {rows, L}); };

  std::vector<double> cosT(L * bins, 0), sinT(L * bins, 0);
  double scale = inverse ? 1.0 / len : 1.0, sign = inverse ? 1 : -1;
  for (int64_t j = 0; j < std::min(L, len); ++j)
    for (int64_t k = 0; k < bins; ++k) {
      double theta = 2 * M_PI * (double)((j * k) % len) / len;
      cosT[j * bins + k] = std::cos(theta) * scale;
      sinT[j * bins + k] = sign * std::sin(theta) * scale;
    }
  Type et = elemOf(re);
  Value cosM = constFloats(n, et, {L, bins}, cosT), sinM = constFloats(n, et, {L, bins}, sinT);
  Value fr = flat(re);
  Value outRe = b.matmul(fr, cosM), outIm = b.matmul(fr, sinM);
  if (im) {
    Value fi = flat(im);
    outRe = b.sub(outRe, b.matmul(fi, sinM));
    outIm = b.add(outIm, b.matmul(fi, cosM));
  }
  moved.back() = bins;
  auto back = [&](Value v) { return b.transpose(b.reshape(v, moved), inversePerm); };
  return {back(outRe), back(outIm)};
}

// DFT: input [..., 1 | 2] (real or complex on the last dim), output [..., 2].
void lowerDFT(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  if (rank < 2 || (CoreBuilder::shapeOf(x).back() != 1 && CoreBuilder::shapeOf(x).back() != 2))
    n.fail("expects an input [..., 1] (real) or [..., 2] (complex)");
  if (!isFloatValue(x))
    n.fail("input must be a float tensor");
  int64_t axis = n.attrInt("axis", 1);
  if (n.opset() >= 20) {
    axis = -2;
    if (n.hasInput(2))
      axis = n.requireInts(2, "axis").at(0);
  }
  axis = n.normalizeAxis(axis, rank);
  if (axis == rank - 1)
    n.fail("axis must not be the last (real/imaginary) dim");
  bool inverse = n.attrInt("inverse", 0) != 0, onesided = n.attrInt("onesided", 0) != 0;
  const int64_t points = CoreBuilder::shapeOf(x)[axis];
  // An inverse of a one-sided spectrum (irfft) has 2 (points - 1) samples by default.
  int64_t len = inverse && onesided ? 2 * (points - 1) : points;
  if (n.hasInput(1)) {
    std::vector<int64_t> v = n.requireInts(1, "dft_length");
    if (v.size() != 1 || v[0] < 1)
      n.fail("dft_length must be a positive scalar");
    len = v[0];
  }
  if (len < 1)
    n.fail("the transform needs at least one point");
  bool complex = CoreBuilder::shapeOf(x).back() == 2;
  Value re = takeLast(b, x, 0), im = complex ? takeLast(b, x, 1) : Value();
  if (inverse && onesided) {
    // irfft: the one-sided bins 0..len/2 stand for the whole Hermitian spectrum. Weighting bin
    // k by 2 (1 for bin 0 and, len even, bin len/2; 0 past len/2) makes the real part of the
    // plain inverse DFT of the weighted bins the real signal (imaginary parts of bins 0 and
    // len/2 drop out, as in numpy's irfft); the output is real, [..., len, 1].
    std::vector<double> weight(points);
    for (int64_t k = 0; k < points; ++k)
      weight[k] = k > len / 2 ? 0.0 : (k == 0 || 2 * k == len) ? 1.0 : 2.0;
    SmallVector<int64_t> along(CoreBuilder::rankOf(re), 1);
    along[axis] = points;
    Value w = constFloats(n, elemOf(re), along, weight);
    auto [yr, yi] = dftAlong(n, b.mul(re, w), im ? b.mul(im, w) : Value(), axis, len, len, true);
    (void)yi;
    n.setOutput(0, stackLast(b, {yr}));
    return;
  }
  auto [yr, yi] = dftAlong(n, re, im, axis, len, onesided ? len / 2 + 1 : len, inverse);
  n.setOutput(0, stackLast(b, {yr, yi}));
}

// STFT: frames gathered with a compile-time index table, multiplied by the window, then a
// DFT along the frame.
void lowerSTFT(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  auto xs = CoreBuilder::shapeOf(x);
  if (xs.size() != 3 || (xs[2] != 1 && xs[2] != 2))
    n.fail("expects a signal [batch, length, 1 | 2]");
  if (!isFloatValue(x))
    n.fail("signal must be a float tensor");
  std::vector<int64_t> stepV = n.requireInts(1, "frame_step");
  if (stepV.size() != 1 || stepV[0] < 1)
    n.fail("frame_step must be a positive scalar");
  int64_t step = stepV[0], frameLen = -1;
  if (n.hasInput(3)) {
    std::vector<int64_t> v = n.requireInts(3, "frame_length");
    if (v.size() != 1 || v[0] < 1)
      n.fail("frame_length must be a positive scalar");
    frameLen = v[0];
  }
  Value window;
  if (n.hasInput(2)) {
    window = n.input(2);
    if (CoreBuilder::rankOf(window) != 1)
      n.fail("window must be 1-D");
    int64_t wl = CoreBuilder::shapeOf(window)[0];
    if (frameLen >= 0 && wl != frameLen)
      n.fail("window length does not match frame_length");
    frameLen = wl;
  }
  if (frameLen < 0)
    n.fail("one of window and frame_length must be given");
  if (frameLen > xs[1])
    n.fail("frame_length is longer than the signal");
  int64_t frames = (xs[1] - frameLen) / step + 1;
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < frameLen; ++j)
      idx.push_back(f * step + j);
  Value framesV = b.create<GatherOp>(x, b.constantI64(idx, {frames, frameLen}), 1);
  if (window)
    framesV = b.mul(framesV, b.reshape(b.cast(window, elemOf(x)), {1, 1, frameLen, 1}));
  bool onesided = n.attrInt("onesided", 1) != 0;
  Value re = takeLast(b, framesV, 0), im = xs[2] == 2 ? takeLast(b, framesV, 1) : Value();
  auto [yr, yi] = dftAlong(n, re, im, 2, frameLen, onesided ? frameLen / 2 + 1 : frameLen, false);
  n.setOutput(0, stackLast(b, {yr, yi}));
}

// ---- Window and mel generators (compile time) -----------------------------------------------

Type outputDataType(NodeContext &n) {
  return n.elementType((int32_t)n.attrInt("output_datatype", onnx::TensorProto_DataType_FLOAT));
}

/// Hann / Hamming / Blackman: sum_k a_k cos(2 pi k i / N) with N = size (periodic) or size-1.
void addCosineWindow(OpRegistry &r, const std::string &op, std::vector<double> coeffs) {
  r.add(op, [coeffs](NodeContext &n) {
    std::vector<int64_t> sizeV = n.requireInts(0, "size");
    if (sizeV.size() != 1 || sizeV[0] < 0)
      n.fail("size must be a non-negative scalar");
    int64_t size = sizeV[0];
    double N = n.attrInt("periodic", 1) ? size : size - 1;
    std::vector<double> values(size);
    for (int64_t i = 0; i < size; ++i) {
      double angle = N > 0 ? 2 * M_PI * i / N : 0;
      for (size_t k = 0; k < coeffs.size(); ++k)
        values[i] += coeffs[k] * std::cos(angle * k);
    }
    n.setOutput(0, constFloats(n, outputDataType(n), {size}, values));
  });
}

// MelWeightMatrix: triangular filters between mel-spaced bins, as in the ONNX reference.
void lowerMelWeightMatrix(NodeContext &n) {
  auto scalarInt = [&](size_t i, const char *what) {
    std::vector<int64_t> v = n.requireInts(i, what);
    if (v.size() != 1)
      n.fail(std::string(what) + " must be a scalar");
    return v[0];
  };
  auto scalarFloat = [&](size_t i, const char *what) {
    Tensor t = n.requireConstantInput(i, what);
    if (t.numElements() != 1)
      n.fail(std::string(what) + " must be a scalar");
    return t.getDouble(0);
  };
  int64_t melBins = scalarInt(0, "num_mel_bins"), dftLen = scalarInt(1, "dft_length");
  int64_t rate = scalarInt(2, "sample_rate");
  double lowHz = scalarFloat(3, "lower_edge_hertz"), highHz = scalarFloat(4, "upper_edge_hertz");
  if (melBins < 1 || dftLen < 1 || rate < 1)
    n.fail("num_mel_bins, dft_length and sample_rate must be positive");
  int64_t specBins = dftLen / 2 + 1;
  auto toMel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  double lowMel = toMel(lowHz), highMel = toMel(highHz);
  double melStep = (highMel - lowMel) / (melBins + 2);
  std::vector<int64_t> bins(melBins + 2);
  for (int64_t i = 0; i < melBins + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (i * melStep + lowMel) / 2595) - 1);
    bins[i] = (int64_t)std::floor((dftLen + 1) * hz / rate);
  }
  std::vector<double> out(specBins * melBins, 0);
  auto set = [&](int64_t j, int64_t i, double v) {
    if (j < 0 || j >= specBins)
      n.fail("a mel filter falls outside the spectrogram bins");
    out[j * melBins + i] = v;
  };
  for (int64_t i = 0; i < melBins; ++i) {
    int64_t lo = bins[i], center = bins[i + 1], hi = bins[i + 2];
    if (center == lo)
      set(center, i, 1);
    else
      for (int64_t j = lo; j <= center; ++j)
        set(j, i, double(j - lo) / double(center - lo));
    if (hi > center)
      for (int64_t j = center; j < hi; ++j)
        set(j, i, double(hi - j) / double(hi - center));
  }
  n.setOutput(0, constFloats(n, outputDataType(n), {specBins, melBins}, out));
}

} // namespace

void registerNNOps(OpRegistry &r) {
  r.add("Conv", lowerConv);
  r.add("ConvInteger", lowerConvInteger);
  r.add("QLinearConv", lowerQLinearConv);
  r.add("ConvTranspose", lowerConvTranspose);
  r.add("AveragePool", lowerAveragePool);
  r.add("MaxPool", lowerMaxPool);
  r.add("LpPool", lowerLpPool);
  r.add("GlobalAveragePool", lowerGlobalAveragePool);
  r.add("GlobalMaxPool", lowerGlobalMaxPool);
  r.add("GlobalLpPool", lowerGlobalLpPool);
  r.add("LRN", lowerLRN);
  r.add("MaxUnpool", lowerMaxUnpool);
  r.add("Resize", lowerResize);
  r.add("Upsample", lowerUpsample);
  r.add("GridSample", lowerGridSample);
  r.add("AffineGrid", lowerAffineGrid);
  r.add("Col2Im", lowerCol2Im);
  r.add("CausalConvWithState", lowerCausalConvWithState);
  r.add("DeformConv", lowerDeformConv);
  r.add("RoiAlign", lowerRoiAlign);
  r.add("NonMaxSuppression", lowerNonMaxSuppression);
  r.add("DFT", lowerDFT);
  r.add("STFT", lowerSTFT);
  addCosineWindow(r, "HannWindow", {0.5, -0.5});
  addCosineWindow(r, "HammingWindow", {25.0 / 46, -21.0 / 46});
  addCosineWindow(r, "BlackmanWindow", {0.42, -0.5, 0.08});
  r.add("MelWeightMatrix", lowerMelWeightMatrix);
}

} // namespace tcc::onnx_import
