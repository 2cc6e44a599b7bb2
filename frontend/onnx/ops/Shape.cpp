//===- Shape.cpp - ONNX shape, layout and indexing ops -> tcc ---------------===//
//
// Layout ops (Reshape, Flatten, (Un)Squeeze, Transpose, Concat, Split, Slice, Pad, Tile,
// Expand, DepthToSpace, SpaceToDepth) map to tcc.reshape/transpose/slice/reverse/pad/concat/
// broadcast_in_dim with compile-time shapes; indexing ops (Gather*, Scatter*) to their core
// ops after normalizing negative indices; mask-like generators (OneHot, EyeLike, Trilu) to
// comparisons of tcc.iota; Shape/Size/ConstantOfShape/Range to constants (or iota); the ops
// whose output shape depends on data (NonZero, Compress, Unique) are evaluated at compile time.
//
//===----------------------------------------------------------------------===//
#include "../NodeContext.h"

#include "tcc/Interp/Interpreter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace mlir;

namespace tcc::onnx_import {
namespace {

using Shape64 = SmallVector<int64_t>;

Shape64 shapeVec(Value v) {
  auto s = CoreBuilder::shapeOf(v);
  return Shape64(s.begin(), s.end());
}


std::string listStr(ArrayRef<int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// Index tensors as the core ops take them (signless i32/i64): other integer types become i64.
Value asIndex(NodeContext &n, Value idx) {
  Type e = CoreBuilder::elementTypeOf(idx);
  if (e.isSignlessInteger(32) || e.isSignlessInteger(64))
    return idx;
  if (!isa<IntegerType>(e) || e.isInteger(1))
    n.fail("indices must be an integer tensor");
  return n.b().cast(idx, n.b().builder().getI64Type());
}

/// ONNX negative indices count from the end: select(idx < 0, idx + size, idx). `sizes` is
/// broadcast against idx (a 0-d size, or one size per entry of the last dim for *ND ops).
Value wrapNegative(NodeContext &n, Value idx, ArrayRef<SymExpr> sizes, ArrayRef<int64_t> sizesShape) {
  CoreBuilder &b = n.b();
  idx = asIndex(n, idx);
  Value size = b.cast(b.symInts(sizes, sizesShape), CoreBuilder::elementTypeOf(idx));
  Value neg = b.compare(CompareKind::Lt, idx, b.scalarLike(idx, 0));
  return b.select(neg, b.add(idx, size), idx);
}

Value wrapNegative(NodeContext &n, Value idx, const SymExpr &size) {
  return wrapNegative(n, idx, ArrayRef<SymExpr>(size), {});
}

/// The sizes of the leading dims of `data` that the last dim of an *ND index tensor indexes.
Value wrapNegativeND(NodeContext &n, Value data, Value idx, int64_t batchDims) {
  if (CoreBuilder::rankOf(idx) < 1)
    n.fail("indices must have rank >= 1");
  std::optional<int64_t> depthOrNone = CoreBuilder::dimsOf(idx).back().constant();
  if (!depthOrNone)
    n.fail("the index depth (the indices' last dim) must be fixed, got " +
           shapeString(CoreBuilder::dimsOf(idx)));
  int64_t depth = *depthOrNone;
  SymShape shape = CoreBuilder::dimsOf(data);
  if (batchDims < 0 || depth < 1 || batchDims + depth > (int64_t)shape.size())
    n.fail("index depth " + std::to_string(depth) + " does not fit data of rank " +
           std::to_string(shape.size()) + " with " + std::to_string(batchDims) + " batch dims");
  SymShape sizes(shape.begin() + batchDims, shape.begin() + batchDims + depth);
  return wrapNegative(n, idx, sizes, {depth});
}

/// Value x reshaped to 0-d (it must have one element).
Value asScalar(NodeContext &n, Value x, const std::string &what) {
  if (dimsProduct(CoreBuilder::shapeOf(x)) != 1)
    n.fail(what + " must have exactly one element");
  return n.b().reshape(x, {});
}

/// A single number from a compile-time scalar (or 1-element) input.
Tensor requireScalar(NodeContext &n, size_t i, const std::string &what) {
  Tensor t = n.requireConstantInput(i, what);
  if (t.numElements() != 1)
    n.fail(what + " must have exactly one element, got shape " + shapeToString(t.shape()));
  return t;
}

// ---- Trivial ops --------------------------------------------------------------------------

void lowerIdentity(NodeContext &n) { n.setOutput(0, n.input(0)); }

void lowerConstant(NodeContext &n) {
  if (n.numInputs() != 0)
    n.fail("Constant takes no inputs");
  for (const char *unsupported : {"sparse_value", "value_string", "value_strings"})
    if (n.hasAttr(unsupported))
      n.fail(std::string("attribute '") + unsupported + "' is not supported (" +
             (std::string(unsupported) == "sparse_value" ? "sparse tensors" : "strings") +
             " have no tcc element type)");
  Tensor t;
  if (n.hasAttr("value")) {
    t = n.attrTensor("value");
  } else if (n.hasAttr("value_float")) {
    t = Tensor::scalar<float>((float)n.attrFloat("value_float", 0));
  } else if (n.hasAttr("value_floats")) {
    auto v = n.attrFloats("value_floats");
    t = Tensor::fromVector<float>({(int64_t)v.size()}, v);
  } else if (n.hasAttr("value_int")) {
    t = Tensor::scalar<int64_t>(n.attrInt("value_int", 0));
  } else if (n.hasAttr("value_ints")) {
    auto v = n.attrInts("value_ints");
    t = Tensor::fromVector<int64_t>({(int64_t)v.size()}, v);
  } else {
    n.fail("needs one of the attributes value, value_float(s), value_int(s)");
  }
  n.setOutput(0, n.constant(t));
}

void lowerShape(NodeContext &n) {
  SymShape shape = n.inputDims(0);
  int64_t rank = shape.size();
  // Opset 15: start/end select a clamped sub-range of the dims (negative counts from the end).
  auto clampDim = [&](int64_t d) { return std::clamp(d < 0 ? d + rank : d, (int64_t)0, rank); };
  int64_t start = clampDim(n.attrInt("start", 0)), end = clampDim(n.attrInt("end", rank));
  SymShape dims(shape.begin() + start, shape.begin() + std::max(start, end));
  n.setOutput(0, n.b().symInts(dims, {(int64_t)dims.size()}));
}

void lowerSize(NodeContext &n) {
  SymShape dims = n.inputDims(0);
  if (auto constant = staticDims(dims)) // overflow-checked
    n.setOutput(0, n.b().constantI64({dimsProduct(*constant)}, {}));
  else
    n.setOutput(0, n.b().symInts({productOf(dims)}, {}));
}

void lowerConstantOfShape(NodeContext &n) {
  SymShape dims = n.requireDims(0, "the shape");
  for (const SymExpr &d : dims)
    if (d.constant() && *d.constant() < 0)
      n.fail("shape " + shapeString(dims) + " has a negative dim");
  Tensor value = n.hasAttr("value") ? n.attrTensor("value") : Tensor::scalar<float>(0.0f);
  if (value.numElements() != 1)
    n.fail("attribute 'value' must have exactly one element");
  // A splat of the value's single element (never materialized, however large the shape).
  DenseElementsAttr element = attrFromTensor(n.context(), value);
  Type elementType = element.getType().getElementType();
  if (auto constant = staticDims(dims)) {
    auto type = n.b().tensorType(*constant, elementType);
    n.setOutput(0, n.b().constant(DenseElementsAttr::get(type, element.getValues<Attribute>()[0])));
    return;
  }
  // Symbolic dims: a 0-d constant broadcast to them.
  Value scalar = n.b().constant(
      DenseElementsAttr::get(n.b().tensorType(ArrayRef<int64_t>{}, elementType),
                             element.getValues<Attribute>()[0]));
  n.setOutput(0, n.b().broadcastToDims(scalar, dims));
}

// ---- Reshapes --------------------------------------------------------------------------------

void lowerReshape(NodeContext &n) {
  Value x = n.input(0);
  SymShape in = n.inputDims(0), spec;
  if (n.opset() < 5) {
    std::vector<int64_t> attr = n.attrInts("shape");
    spec.assign(attr.begin(), attr.end());
  } else {
    spec = n.requireDims(1, "the shape");
  }
  bool allowZero = n.attrInt("allowzero", 0) != 0;
  // 0 copies the input dim (unless allowzero), -1 is inferred from the element count.
  SymShape out;
  int64_t inferred = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    SymExpr d = spec[i];
    std::optional<int64_t> c = d.constant();
    if (c && *c == 0 && !allowZero) {
      if (i >= in.size())
        n.fail("shape " + shapeString(spec) + " copies dim " + std::to_string(i) +
               ", which the rank-" + std::to_string(in.size()) + " input lacks");
      d = in[i];
    } else if (c && *c == -1) {
      if (inferred >= 0)
        n.fail("shape " + shapeString(spec) + " has more than one -1");
      inferred = i;
    } else if (c && *c < 0) {
      n.fail("shape " + shapeString(spec) + " has an invalid dim " + std::to_string(*c));
    }
    out.push_back(d);
  }
  if (auto staticIn = staticDims(in))
    (void)dimsProduct(*staticIn); // overflow-checked
  SymExpr total = productOf(in);
  if (inferred >= 0) {
    out[inferred] = 1;
    SymExpr known = productOf(out);
    std::optional<SymExpr> quotient = known == 0 ? std::nullopt
                                                 : SymExpr::divideExactly(total, known);
    if (!quotient)
      n.fail("cannot infer the -1 in shape " + shapeString(spec) + " for an input of shape " +
             shapeString(in));
    out[inferred] = *quotient;
  }
  if (auto staticOut = staticDims(out))
    (void)dimsProduct(*staticOut);
  if (productOf(out) != total)
    n.fail("cannot reshape " + shapeString(in) + " to " + shapeString(spec));
  n.setOutput(0, n.b().reshapeToDims(x, out));
}

void lowerFlatten(NodeContext &n) {
  Value x = n.input(0);
  SymShape in = n.inputDims(0);
  int64_t rank = in.size(), axis = n.attrInt("axis", 1);
  if (axis < -rank || axis > rank)
    n.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0)
    axis += rank;
  if (auto dims = staticDims(in)) {
    ArrayRef<int64_t> d(*dims);
    n.setOutput(0, n.b().reshape(x, {dimsProduct(d.take_front(axis)), dimsProduct(d.drop_front(axis))}));
    return;
  }
  n.setOutput(0, n.b().reshapeToDims(x, SymShape{productOf(SymShape(in.begin(), in.begin() + axis)),
                                           productOf(SymShape(in.begin() + axis, in.end()))}));
}

/// The axes of (Un)Squeeze: an attribute before opset 13, an optional input from 13.
std::optional<std::vector<int64_t>> squeezeAxes(NodeContext &n) {
  if (n.opset() < 13)
    return n.hasAttr("axes") ? std::optional(n.attrInts("axes")) : std::nullopt;
  return n.hasInput(1) ? std::optional(n.requireInts(1, "axes")) : std::nullopt;
}

void lowerSqueeze(NodeContext &n) {
  Value x = n.input(0);
  SymShape in = n.inputDims(0);
  auto axes = squeezeAxes(n);
  Shape64 drop;
  if (axes) {
    drop = n.normalizeAxes(*axes, in.size());
    for (int64_t d : drop)
      if (in[d] != 1)
        n.fail("cannot squeeze dim " + std::to_string(d) + " of size " + in[d].str());
  } else {
    // A symbolic dim is kept (it is 1 only for some sizes).
    for (int64_t d = 0; d < (int64_t)in.size(); ++d)
      if (in[d] == 1)
        drop.push_back(d);
  }
  SymShape out;
  for (int64_t d = 0; d < (int64_t)in.size(); ++d)
    if (!llvm::is_contained(drop, d))
      out.push_back(in[d]);
  n.setOutput(0, n.b().reshapeToDims(x, out));
}

void lowerUnsqueeze(NodeContext &n) {
  Value x = n.input(0);
  SymShape in = n.inputDims(0);
  auto axes = squeezeAxes(n);
  if (!axes)
    n.fail("axes are required");
  // Axes refer to the output's dims.
  int64_t outRank = in.size() + axes->size();
  Shape64 add = n.normalizeAxes(*axes, outRank);
  SymShape out;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d)
    out.push_back(llvm::is_contained(add, d) ? SymExpr(1) : in[next++]);
  n.setOutput(0, n.b().reshapeToDims(x, out));
}

void lowerTranspose(NodeContext &n) {
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  Shape64 perm(rank);
  for (int64_t i = 0; i < rank; ++i)
    perm[i] = rank - 1 - i;
  if (n.hasAttr("perm")) {
    auto p = n.attrInts("perm");
    perm.assign(p.begin(), p.end());
  }
  Shape64 sorted(perm);
  llvm::sort(sorted);
  if ((int64_t)perm.size() != rank || !llvm::equal(sorted, llvm::seq<int64_t>(0, rank)))
    n.fail("perm " + listStr(perm) + " is not a permutation of the " + std::to_string(rank) +
           " dims");
  n.setOutput(0, n.b().transpose(x, perm));
}

/// DepthToSpace: [N, C, H, W] -> 6-d split of C -> transpose -> [N, C/b², H*b, W*b].
/// DCR splits C as (b, b, C'), CRD as (C', b, b).
void lowerDepthToSpace(NodeContext &n) {
  Value x = n.input(0);
  Shape64 s = shapeVec(x);
  int64_t bs = n.requireAttrInt("blocksize");
  std::string mode = n.attrString("mode", "DCR");
  if (s.size() != 4)
    n.fail("input must be 4-d [N, C, H, W]");
  if (bs < 1 || s[1] % (bs * bs) != 0)
    n.fail("channels (" + std::to_string(s[1]) + ") must be divisible by blocksize² (" +
           std::to_string(bs) + "²)");
  int64_t c = s[1] / (bs * bs);
  CoreBuilder &b = n.b();
  Value t;
  if (mode == "DCR")
    t = b.transpose(b.reshape(x, {s[0], bs, bs, c, s[2], s[3]}), {0, 3, 4, 1, 5, 2});
  else if (mode == "CRD")
    t = b.transpose(b.reshape(x, {s[0], c, bs, bs, s[2], s[3]}), {0, 1, 4, 2, 5, 3});
  else
    n.fail("mode must be DCR or CRD, got '" + mode + "'");
  n.setOutput(0, b.reshape(t, {s[0], c, s[2] * bs, s[3] * bs}));
}

/// SpaceToDepth: [N, C, H, W] -> [N, C, H/b, b, W/b, b] -> (N, b, b, C, H/b, W/b) -> merge;
/// mode CRD (opset 25) orders the channels (C, b, b) instead.
void lowerSpaceToDepth(NodeContext &n) {
  Value x = n.input(0);
  Shape64 s = shapeVec(x);
  int64_t bs = n.requireAttrInt("blocksize");
  if (s.size() != 4)
    n.fail("input must be 4-d [N, C, H, W]");
  if (bs < 1 || s[2] % bs != 0 || s[3] % bs != 0)
    n.fail("spatial dims " + listStr({s[2], s[3]}) + " must be divisible by blocksize " +
           std::to_string(bs));
  CoreBuilder &b = n.b();
  std::string mode = n.attrString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    n.fail("mode must be DCR or CRD, got '" + mode + "'");
  Value t = b.reshape(x, {s[0], s[1], s[2] / bs, bs, s[3] / bs, bs});
  t = mode == "DCR" ? b.transpose(t, {0, 3, 5, 1, 2, 4}) : b.transpose(t, {0, 1, 3, 5, 2, 4});
  n.setOutput(0, b.reshape(t, {s[0], s[1] * bs * bs, s[2] / bs, s[3] / bs}));
}

// ---- Concatenation, splitting, slicing -------------------------------------------------------

void lowerConcat(NodeContext &n) {
  SmallVector<Value> xs;
  for (size_t i = 0; i < n.numInputs(); ++i)
    if (n.hasInput(i))
      xs.push_back(n.input(i));
  if (xs.empty())
    n.fail("needs at least one input");
  int64_t axis = n.normalizeAxis(n.requireAttrInt("axis"), CoreBuilder::rankOf(xs[0]));
  n.setOutput(0, n.b().concat(xs, axis));
}

/// Split: the sizes come from the `split` attribute (< 13), the split input (>= 13), or are
/// equal parts (num_outputs from 18, else the output count; from 18 the last may be smaller).
void lowerSplit(NodeContext &n) {
  Value x = n.input(0);
  SymShape in = n.inputDims(0);
  int64_t axis = n.normalizeAxis(n.attrInt("axis", 0), in.size());
  if (!in[axis].isConstant())
    n.fail("cannot split symbolic dim " + std::to_string(axis) + " (" + in[axis].str() +
           ") yet");
  int64_t dim = *in[axis].constant();
  std::vector<int64_t> sizes;
  if (n.opset() < 13 && n.hasAttr("split")) {
    sizes = n.attrInts("split");
  } else if (n.opset() >= 13 && n.hasInput(1)) {
    sizes = n.requireInts(1, "split");
  } else {
    int64_t parts = n.opset() >= 18 && n.hasAttr("num_outputs") ? n.attrInt("num_outputs", 0)
                                                                : (int64_t)n.numOutputs();
    if (parts < 1)
      n.fail("needs at least one output");
    int64_t chunk = (dim + parts - 1) / parts;
    int64_t last = dim - chunk * (parts - 1);
    if (last < 0 || (n.opset() < 18 && last != chunk))
      n.fail("dim " + std::to_string(dim) + " cannot be split into " + std::to_string(parts) +
             (n.opset() < 18 ? " equal" : "") + " chunks");
    sizes.assign(parts - 1, chunk);
    sizes.push_back(last);
  }
  if (sizes.size() != n.numOutputs())
    n.fail("split " + listStr(sizes) + " has " + std::to_string(sizes.size()) +
           " entries but the node has " + std::to_string(n.numOutputs()) + " outputs");
  if (llvm::any_of(sizes, [](int64_t s) { return s < 0; }) ||
      std::accumulate(sizes.begin(), sizes.end(), (int64_t)0) != dim)
    n.fail("split " + listStr(sizes) + " does not partition dim " + std::to_string(axis) +
           " of size " + std::to_string(dim));
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (n.hasOutput(i))
      n.setOutput(i, n.b().sliceDim(x, axis, start, start + sizes[i]));
    start += sizes[i];
  }
}

/// x clamped to [0, size], the clamps the symbols' ranges decide left out.
SymExpr clampToSize(NodeContext &n, const SymExpr &x, const SymExpr &size) {
  const SymbolRanges &ranges = n.symbolRanges();
  SymExpr r = x;
  if (rangeOf(size - r, ranges).max <= 0)
    r = size;
  else if (rangeOf(size - r, ranges).min < 0)
    r = SymExpr::min(r, size);
  if (rangeOf(r, ranges).max <= 0)
    return 0;
  if (rangeOf(r, ranges).min < 0)
    r = SymExpr::max(r, 0);
  return r;
}

/// Slice of a tensor with symbolic dims, or with bounds computed from them (x[:, -1:],
/// buffer[:, :, :seq, :seq], x.flip(1)). A static dim with constant bounds and a positive step
/// is a tcc.slice; any other sliced dim a gather of start + step * iota(count).
void lowerSymbolicSlice(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  std::vector<SymExpr> starts = n.requireDims(1, "starts"), ends = n.requireDims(2, "ends");
  std::vector<int64_t> axes, steps;
  if (n.hasInput(3))
    axes = n.requireInts(3, "axes");
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  steps = n.hasInput(4) ? n.requireInts(4, "steps") : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    n.fail("starts, ends, axes and steps must have the same length");
  Shape64 dims = n.normalizeAxes(axes, rank);
  const SymbolRanges &ranges = n.symbolRanges();
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i], step = steps[i];
    if (step == 0)
      n.fail("steps must not be 0");
    SymExpr size = CoreBuilder::dimsOf(x)[d];
    // Negative bounds count from the end: the sign must be known.
    auto fromEnd = [&](const SymExpr &v, const char *what) -> SymExpr {
      SymbolRange r = rangeOf(v, ranges);
      if (r.min >= 0)
        return v;
      if (r.max < 0)
        return v + size;
      n.fail(std::string(what) + " " + v.str() + " may be negative or not: not supported");
    };
    // Python's clamping: into [0, size] for a positive step; into [-1, size - 1] for a
    // negative one (exporters write INT64_MIN/MAX for "past the end": no arithmetic on those).
    constexpr int64_t kFar = int64_t(1) << 62;
    auto clamped = [&](const SymExpr &v, const char *what) -> SymExpr {
      std::optional<int64_t> c = v.constant();
      if (step > 0)
        return c && *c >= kFar ? size : c && *c <= -kFar ? SymExpr(0)
                                                          : clampToSize(n, fromEnd(v, what), size);
      if (c && *c >= kFar)
        return size - 1;
      if (c && *c <= -kFar)
        return SymExpr(-1);
      return clampToSize(n, fromEnd(v, what) + 1, size) - 1;
    };
    SymExpr start = clamped(starts[i], "start"), end = clamped(ends[i], "end");
    auto s = start.constant(), e = end.constant(), sz = size.constant();
    if (s && e && sz && step > 0) {
      x = b.sliceDim(x, d, *s, std::max(*s, *e), step);
      continue;
    }
    SymExpr count = step > 0 ? SymExpr::ceilDiv(end - start, step)
                             : SymExpr::ceilDiv(start - end, -step);
    if (rangeOf(count, ranges).min < 0)
      count = SymExpr::max(count, 0);
    Type i64 = b.builder().getI64Type();
    Value index = b.iotaOfDims({count}, i64, 0);
    if (step != 1)
      index = b.mul(index, b.constantI64({step}, {}));
    if (start != 0)
      index = b.add(index, b.symInts({start}, {}));
    x = b.create<GatherOp>(x, index, d);
  }
  n.setOutput(0, x);
}

/// Slice: per axis, starts/ends are clamped like Python slicing. Positive steps map to a
/// strided tcc.slice; negative steps reverse the dim and slice the mirrored range.
void lowerSlice(NodeContext &n) {
  Value x = n.input(0);
  if (n.opset() >= 10 &&
      (n.input(1).getDefiningOp<SymIntsOp>() || n.input(2).getDefiningOp<SymIntsOp>()))
    return lowerSymbolicSlice(n);
  // Symbolic dims are kept whole here (limit -1); slicing one is lowerSymbolicSlice's.
  SymShape symbolic = n.inputDims(0);
  Shape64 shape;
  for (const SymExpr &d : symbolic)
    shape.push_back(d.constant() ? *d.constant() : -1);
  int64_t rank = shape.size();
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset() < 10) {
    starts = n.attrInts("starts");
    ends = n.attrInts("ends");
    axes = n.attrInts("axes");
  } else {
    starts = n.requireInts(1, "starts");
    ends = n.requireInts(2, "ends");
    if (n.hasInput(3))
      axes = n.requireInts(3, "axes");
    if (n.hasInput(4))
      steps = n.requireInts(4, "steps");
  }
  if (axes.empty() && !(n.opset() >= 10 && n.hasInput(3)))
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    n.fail("starts, ends, axes and steps must have the same length");
  Shape64 dims = n.normalizeAxes(axes, rank);

  Shape64 start(rank, 0), limit(shape), stride(rank, 1), reversed;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i], size = shape[d], step = steps[i];
    if (size < 0) {
      if (n.opset() < 10)
        n.fail("cannot slice symbolic dim " + std::to_string(d) + " (" + symbolic[d].str() +
               ") before opset 10");
      return lowerSymbolicSlice(n);
    }
    int64_t s = starts[i] < 0 ? starts[i] + size : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + size : ends[i];
    if (step == 0)
      n.fail("steps must be nonzero");
    if (step > 0) {
      s = std::clamp(s, (int64_t)0, size);
      e = std::clamp(e, (int64_t)0, size);
      start[d] = s;
      limit[d] = std::max(s, e);
      stride[d] = step;
      continue;
    }
    // Negative step: elements s, s+step, ... > e. In the reversed dim, element i sits at
    // size-1-i, so they are size-1-s, size-1-s+|step|, ...
    reversed.push_back(d);
    int64_t count = 0;
    if (size > 0) {
      s = std::clamp(s, (int64_t)0, size - 1);
      e = std::clamp(e, (int64_t)-1, size - 1);
      count = s > e ? (s - e - step - 1) / -step : 0;
    }
    int64_t rs = size > 0 ? size - 1 - s : 0;
    start[d] = rs;
    limit[d] = count ? rs + (count - 1) * -step + 1 : rs;
    stride[d] = -step;
  }
  CoreBuilder &b = n.b();
  if (!reversed.empty()) {
    llvm::sort(reversed);
    x = b.createTyped<ReverseOp>(x.getType(), x, reversed);
  }
  if (start != Shape64(rank, 0) || limit != shape || stride != Shape64(rank, 1))
    x = b.create<SliceOp>(x, start, limit, stride);
  n.setOutput(0, x);
}

/// Pad: negative pads crop (a slice first), the rest is one tcc.pad.
/// CenterCropPad (opset 18): along each axis, crops the centred target size out of a larger dim
/// (the extra element of an odd difference at the end) or pads a smaller one with zeros
/// around it (likewise).
void lowerCenterCropPad(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  std::vector<int64_t> target = n.requireInts(1, "shape");
  std::vector<int64_t> axes = n.attrInts("axes");
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  if (axes.size() != target.size())
    n.fail("shape has " + std::to_string(target.size()) + " sizes for " +
           std::to_string(axes.size()) + " axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = n.normalizeAxis(axes[i], rank), want = target[i];
    int64_t dim = CoreBuilder::shapeOf(x)[axis];
    if (want < 0)
      n.fail("shape has a negative size " + std::to_string(want));
    if (want < dim) {
      int64_t start = (dim - want) / 2;
      x = b.sliceDim(x, axis, start, start + want);
    } else if (want > dim) {
      int64_t low = (want - dim) / 2, high = want - dim - low;
      SmallVector<Value> parts;
      auto zeros = [&](int64_t count) {
        SmallVector<int64_t> s(CoreBuilder::shapeOf(x));
        s[axis] = count;
        return b.splat(RankedTensorType::get(s, CoreBuilder::elementTypeOf(x)), 0);
      };
      if (low)
        parts.push_back(zeros(low));
      parts.push_back(x);
      if (high)
        parts.push_back(zeros(high));
      x = b.concat(parts, axis);
    }
  }
  n.setOutput(0, x);
}

void lowerPad(NodeContext &n) {
  Value x = n.input(0);
  SymShape dims = CoreBuilder::dimsOf(x);
  int64_t rank = dims.size();
  CoreBuilder &b = n.b();
  std::string modeName = n.attrString("mode", "constant");
  PadMode mode;
  if (modeName == "constant")
    mode = PadMode::Constant;
  else if (modeName == "reflect")
    mode = PadMode::Reflect;
  else if (modeName == "edge")
    mode = PadMode::Edge;
  else if (modeName == "wrap")
    mode = PadMode::Wrap;
  else
    n.fail("mode must be constant, reflect, edge or wrap, got '" + modeName + "'");

  std::vector<int64_t> pads = n.opset() < 11 ? n.attrInts(n.hasAttr("pads") ? "pads" : "paddings")
                                             : n.requireInts(1, "pads");
  Shape64 axes;
  if (n.opset() >= 18 && n.hasInput(3))
    axes = n.normalizeAxes(n.requireInts(3, "axes"), rank);
  else
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  int64_t count = axes.size();
  if ((int64_t)pads.size() != 2 * count)
    n.fail("pads " + listStr(pads) + " must have 2 entries per padded axis (" +
           std::to_string(count) + " axes)");

  Value value = b.scalarLike(x, 0);
  if (n.opset() < 11) {
    value = b.scalarLike(x, n.attrFloat("value", 0.0));
  } else if (mode == PadMode::Constant && n.hasInput(2)) {
    value = asScalar(n, n.input(2), "constant_value");
    if (CoreBuilder::elementTypeOf(value) != CoreBuilder::elementTypeOf(x))
      n.fail("constant_value must have the data's element type");
  }

  // A symbolic dim is sliced whole (limit -1); negative pads crop fixed dims only.
  Shape64 low(rank, 0), high(rank, 0), cropStart(rank, 0), whole(rank, -1);
  for (int64_t d = 0; d < rank; ++d)
    whole[d] = dims[d].constant().value_or(-1);
  Shape64 cropLimit = whole;
  for (int64_t i = 0; i < count; ++i) {
    int64_t d = axes[i], lo = pads[i], hi = pads[count + i];
    low[d] = std::max(lo, (int64_t)0);
    high[d] = std::max(hi, (int64_t)0);
    if (lo >= 0 && hi >= 0)
      continue;
    if (!dims[d].isConstant())
      n.fail("negative pads " + std::to_string(lo) + "/" + std::to_string(hi) +
             " would crop dim " + std::to_string(d) + ", whose size " + dims[d].str() +
             " is symbolic: fix it with --input-shape");
    cropStart[d] = std::max(-lo, (int64_t)0);
    cropLimit[d] = whole[d] - std::max(-hi, (int64_t)0);
    if (cropStart[d] > cropLimit[d])
      n.fail("negative pads " + std::to_string(lo) + "/" + std::to_string(hi) +
             " crop more than dim " + std::to_string(d) + " of size " + std::to_string(whole[d]));
  }
  if (cropStart != Shape64(rank, 0) || cropLimit != whole)
    x = b.create<SliceOp>(x, cropStart, cropLimit, Shape64(rank, 1));
  if (low != Shape64(rank, 0) || high != Shape64(rank, 0))
    x = b.create<PadOp>(x, value, low, high, mode);
  n.setOutput(0, x);
}

/// Tile: x [d0, d1, ...] viewed as [1, d0, 1, d1, ...], broadcast to [r0, d0, r1, d1, ...],
/// then merged to [r0*d0, r1*d1, ...].
void lowerTile(NodeContext &n) {
  Value x = n.input(0);
  Shape64 in = shapeVec(x);
  std::vector<int64_t> repeats = n.requireInts(1, "repeats");
  if (repeats.size() != in.size())
    n.fail("repeats " + listStr(repeats) + " must have one entry per input dim (" +
           std::to_string(in.size()) + ")");
  Shape64 view, wide, out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (repeats[d] < 0)
      n.fail("repeats " + listStr(repeats) + " has a negative entry");
    view.append({1, in[d]});
    wide.append({repeats[d], in[d]});
    out.push_back(repeats[d] * in[d]);
  }
  CoreBuilder &b = n.b();
  n.setOutput(0, b.reshape(b.broadcastTo(b.reshape(x, view), wide), out));
}

void lowerExpand(NodeContext &n) {
  Value x = n.input(0);
  SymShape shape = n.requireDims(1, "the shape");
  auto out = CoreBuilder::broadcastDims(n.inputDims(0), shape);
  if (failed(out))
    n.fail("cannot broadcast " + shapeString(n.inputDims(0)) + " to " + shapeString(shape));
  n.setOutput(0, n.b().broadcastToDims(x, *out));
}

// ---- Gather and scatter ----------------------------------------------------------------------

void lowerGather(NodeContext &n) {
  Value x = n.input(0);
  int64_t axis = n.normalizeAxis(n.attrInt("axis", 0), CoreBuilder::rankOf(x));
  Value idx = wrapNegative(n, n.input(1), n.inputDims(0)[axis]);
  n.setOutput(0, n.b().create<GatherOp>(x, idx, axis));
}

void lowerGatherElements(NodeContext &n) {
  Value x = n.input(0);
  int64_t axis = n.normalizeAxis(n.attrInt("axis", 0), CoreBuilder::rankOf(x));
  Value idx = wrapNegative(n, n.input(1), n.inputDims(0)[axis]);
  n.setOutput(0, n.b().create<GatherElementsOp>(x, idx, axis));
}

void lowerGatherND(NodeContext &n) {
  Value x = n.input(0);
  int64_t batchDims = n.attrInt("batch_dims", 0);
  Value idx = wrapNegativeND(n, x, n.input(1), batchDims);
  n.setOutput(0, n.b().create<GatherNDOp>(x, idx, batchDims));
}

ScatterReduction scatterReduction(NodeContext &n) {
  std::string r = n.attrString("reduction", "none");
  if (r == "none")
    return ScatterReduction::None;
  if (r == "add")
    return ScatterReduction::Add;
  if (r == "mul")
    return ScatterReduction::Mul;
  if (r == "max")
    return ScatterReduction::Max;
  if (r == "min")
    return ScatterReduction::Min;
  n.fail("reduction must be none, add, mul, max or min, got '" + r + "'");
}

/// ScatterElements and its deprecated alias Scatter (which has no reduction).
void lowerScatterElements(NodeContext &n) {
  Value x = n.input(0);
  int64_t axis = n.normalizeAxis(n.attrInt("axis", 0), CoreBuilder::rankOf(x));
  Value idx = wrapNegative(n, n.input(1), n.inputDims(0)[axis]);
  n.setOutput(0, n.b().create<ScatterElementsOp>(x, idx, n.input(2), axis, scatterReduction(n)));
}

void lowerScatterND(NodeContext &n) {
  Value x = n.input(0);
  Value idx = wrapNegativeND(n, x, n.input(1), 0);
  n.setOutput(0, n.b().create<ScatterNDOp>(x, idx, n.input(2), scatterReduction(n)));
}

/// ReverseSequence: gather_elements along the time axis with index
/// t < len[b] ? len[b] - 1 - t : t.
void lowerReverseSequence(NodeContext &n) {
  Value x = n.input(0);
  Shape64 shape = shapeVec(x);
  int64_t rank = shape.size();
  if (rank < 2)
    n.fail("input must have rank >= 2");
  int64_t batchAxis = n.normalizeAxis(n.attrInt("batch_axis", 1), rank);
  int64_t timeAxis = n.normalizeAxis(n.attrInt("time_axis", 0), rank);
  if (batchAxis == timeAxis)
    n.fail("batch_axis and time_axis must differ");
  CoreBuilder &b = n.b();
  Value lens = b.cast(n.input(1), b.builder().getI64Type());
  if (CoreBuilder::shapeOf(lens) != ArrayRef<int64_t>{shape[batchAxis]})
    n.fail("sequence_lens must have shape [" + std::to_string(shape[batchAxis]) + "]");
  Shape64 lensShape(rank, 1);
  lensShape[batchAxis] = shape[batchAxis];
  lens = b.broadcastTo(b.reshape(lens, lensShape), shape);
  Value t = b.iota(shape, b.builder().getI64Type(), timeAxis);
  Value reversed = b.sub(b.sub(lens, b.scalarLike(lens, 1)), t);
  Value idx = b.select(b.compare(CompareKind::Lt, t, lens), reversed, t);
  n.setOutput(0, b.create<GatherElementsOp>(x, idx, timeAxis));
}

// ---- Generators ------------------------------------------------------------------------------

/// Range: n = max(ceil((limit - start) / delta), 0) elements, iota * delta + start.
/// Range whose limit is a size symbol's expression (torch's arange(x.shape[1])): integer start
/// and delta must be constants.
void lowerSymbolicRange(NodeContext &n) {
  std::vector<SymExpr> limit = n.requireDims(1, "limit");
  std::vector<int64_t> start = n.requireInts(0, "start (the output size depends on it)"),
                       delta = n.requireInts(2, "delta (the output size depends on it)");
  if (limit.size() != 1 || start.size() != 1 || delta.size() != 1)
    n.fail("start, limit and delta must be scalars");
  if (delta[0] == 0)
    n.fail("delta must be nonzero");
  SymExpr count = delta[0] > 0 ? SymExpr::ceilDiv(limit[0] - start[0], delta[0])
                               : SymExpr::ceilDiv(start[0] - limit[0], -delta[0]);
  if (rangeOf(count, n.symbolRanges()).min < 0) // an empty range, for some sizes
    count = SymExpr::max(count, 0);
  CoreBuilder &b = n.b();
  Value s = b.reshape(n.input(0), {}), d = b.reshape(n.input(2), {});
  Value iota = b.iotaOfDims({count}, CoreBuilder::elementTypeOf(s), 0);
  n.setOutput(0, b.add(b.mul(iota, d), s));
}

void lowerRange(NodeContext &n) {
  if (n.input(1).getDefiningOp<SymIntsOp>())
    return lowerSymbolicRange(n);
  Tensor start = requireScalar(n, 0, "start (the output size depends on it)");
  Tensor limit = requireScalar(n, 1, "limit (the output size depends on it)");
  Tensor delta = requireScalar(n, 2, "delta (the output size depends on it)");
  int64_t count;
  if (isFloat(start.dtype())) {
    double s = start.getDouble(0), l = limit.getDouble(0), d = delta.getDouble(0);
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
      n.fail("start, limit and delta must be finite and delta nonzero");
    double steps = std::max(std::ceil((l - s) / d), 0.0);
    if (steps > (double)(1LL << 40))
      n.fail("the range has too many elements (" + std::to_string(steps) + ")");
    count = (int64_t)steps;
  } else {
    int64_t s = start.getInt(0), l = limit.getInt(0), d = delta.getInt(0);
    if (d == 0)
      n.fail("delta must be nonzero");
    int64_t span = l - s;
    count = span / d + ((span % d != 0) && ((span < 0) == (d < 0)));
    count = std::max(count, (int64_t)0);
    if (count > (1LL << 40))
      n.fail("the range has too many elements (" + std::to_string(count) + ")");
  }
  CoreBuilder &b = n.b();
  Value s = b.reshape(n.input(0), {}), d = b.reshape(n.input(2), {});
  Value iota = b.iota({count}, CoreBuilder::elementTypeOf(s), 0);
  n.setOutput(0, b.add(b.mul(iota, d), s));
}

/// OneHot: select(iota_axis == index (negative ones wrapped by depth), on, off).
void lowerOneHot(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value indices = n.input(0);
  Shape64 in = shapeVec(indices);
  Tensor depthT = requireScalar(n, 1, "depth (the output size depends on it)");
  int64_t depth = isFloat(depthT.dtype()) ? (int64_t)depthT.getDouble(0) : depthT.getInt(0);
  if (depth < 1)
    n.fail("depth must be positive, got " + std::to_string(depth));
  Value values = n.input(2);
  if (dimsProduct(CoreBuilder::shapeOf(values)) != 2)
    n.fail("values must have two elements [off_value, on_value]");
  values = b.reshape(values, {2});
  int64_t axis = n.normalizeAxis(n.attrInt("axis", -1), in.size() + 1);

  Value idx = b.cast(indices, b.builder().getI64Type());
  idx = b.select(b.compare(CompareKind::Lt, idx, b.scalarLike(idx, 0)),
                 b.add(idx, b.scalarLike(idx, depth)), idx);
  Shape64 out(in), withOne(in);
  out.insert(out.begin() + axis, depth);
  withOne.insert(withOne.begin() + axis, 1);
  Value hot = b.compare(CompareKind::Eq, b.iota(out, b.builder().getI64Type(), axis),
                        b.reshape(idx, withOne));
  Value off = b.reshape(b.sliceDim(values, 0, 0, 1), {});
  Value on = b.reshape(b.sliceDim(values, 0, 1, 2), {});
  n.setOutput(0, b.select(hot, on, off));
}

/// col - row for a [rows, cols] grid.
Value diagonalOffset(CoreBuilder &b, const SymExpr &rows, const SymExpr &cols) {
  Type i64 = b.builder().getI64Type();
  return b.sub(b.iotaOfDims({rows, cols}, i64, 1), b.iotaOfDims({rows, cols}, i64, 0));
}

void lowerEyeLike(NodeContext &n) {
  Shape64 s = shapeVec(n.input(0));
  if (s.size() != 2)
    n.fail("input must be 2-d");
  Type elem = n.hasAttr("dtype") ? n.elementType((int32_t)n.attrInt("dtype", 0)) : n.inputElementType(0);
  CoreBuilder &b = n.b();
  Value diff = diagonalOffset(b, s[0], s[1]);
  Value eye = b.compare(CompareKind::Eq, diff, b.scalarLike(diff, n.attrInt("k", 0)));
  n.setOutput(0, b.cast(eye, elem));
}

/// Trilu: keep x where col - row >= k (upper) or <= k (lower) in the last two dims, else 0.
void lowerTrilu(NodeContext &n) {
  Value x = n.input(0);
  SymShape s = n.inputDims(0);
  if (s.size() < 2)
    n.fail("input must have rank >= 2");
  int64_t k = 0;
  if (n.hasInput(1))
    k = requireScalar(n, 1, "k").getInt(0);
  CoreBuilder &b = n.b();
  Value diff = diagonalOffset(b, s[s.size() - 2], s.back());
  Value keep = b.compare(n.attrInt("upper", 1) ? CompareKind::Ge : CompareKind::Le, diff,
                         b.scalarLike(diff, k));
  n.setOutput(0, b.select(keep, x, b.scalarLike(x, 0)));
}

// ---- Data-dependent shapes (evaluated at compile time) --------------------------------------

bool isNonzero(const Tensor &t, int64_t i) {
  return visitDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return (ComputeType<T>)t.data<T>()[i] != (ComputeType<T>)0;
  });
}

/// NonZero: [rank, count] i64 coordinates of the nonzero elements, in row-major order.
void lowerNonZero(NodeContext &n) {
  Tensor x = n.requireConstantInput(0, "the input (the output size depends on its values)");
  Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
  Shape strides = stridesOf(shape);
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numElements(); ++i)
    if (isNonzero(x, i))
      hits.push_back(i);
  int64_t rank = shape.size(), count = hits.size();
  std::vector<int64_t> coords(rank * count);
  for (int64_t j = 0; j < count; ++j)
    for (int64_t d = 0; d < rank; ++d)
      coords[d * count + j] = hits[j] / strides[d] % shape[d];
  n.setOutput(0, n.b().constantI64(coords, {rank, count}));
}

/// Compress: gather of the positions where the (compile-time) condition holds.
void lowerCompress(NodeContext &n) {
  Value x = n.input(0);
  Tensor cond = n.requireConstantInput(1, "condition (the output size depends on it)");
  if (cond.rank() != 1)
    n.fail("condition must be 1-d");
  CoreBuilder &b = n.b();
  int64_t axis = 0;
  if (n.hasAttr("axis"))
    axis = n.normalizeAxis(n.attrInt("axis", 0), CoreBuilder::rankOf(x));
  else
    x = b.reshape(x, {dimsProduct(CoreBuilder::shapeOf(x))});
  int64_t dim = CoreBuilder::shapeOf(x)[axis];
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numElements(); ++i)
    if (isNonzero(cond, i)) {
      if (i >= dim)
        n.fail("condition selects index " + std::to_string(i) + " beyond the dim size " +
               std::to_string(dim));
      keep.push_back(i);
    }
  n.setOutput(0, b.create<GatherOp>(x, b.constantI64(keep, {(int64_t)keep.size()}), axis));
}

/// Three-way comparison of elements i and j of t (numeric order).
int compareElements(const Tensor &t, int64_t i, int64_t j) {
  return visitDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto a = (ComputeType<T>)t.data<T>()[i], c = (ComputeType<T>)t.data<T>()[j];
    return a < c ? -1 : (c < a ? 1 : 0);
  });
}

/// Unique: the distinct slices along `axis` (elements without an axis), computed at compile
/// time. Y is a gather of the first occurrences; indices, inverse_indices and counts are
/// constants. Sorted order is lexicographic over a slice's elements, as numpy.unique.
void lowerUnique(NodeContext &n) {
  Value x = n.input(0);
  Tensor t = n.requireConstantInput(0, "the input (the output size depends on its values)");
  CoreBuilder &b = n.b();
  int64_t axis = 0;
  if (n.hasAttr("axis")) {
    axis = n.normalizeAxis(n.attrInt("axis", 0), t.rank());
  } else {
    x = b.reshape(x, {t.numElements()});
    t = t.reshaped({t.numElements()});
  }
  // Slice r consists of the elements (o, r, i) for o over the outer dims and i the inner ones.
  int64_t rows = t.dim(axis);
  int64_t outer = dimsProduct(ArrayRef<int64_t>(t.shape()).take_front(axis));
  int64_t inner = dimsProduct(ArrayRef<int64_t>(t.shape()).drop_front(axis + 1));
  auto compareRows = [&](int64_t r1, int64_t r2) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        if (int c = compareElements(t, (o * rows + r1) * inner + i, (o * rows + r2) * inner + i))
          return c;
    return 0;
  };
  std::vector<int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t c) { return compareRows(a, c) < 0; });
  // Groups of equal rows in sorted order; each group's first member is its first occurrence.
  std::vector<int64_t> first, counts, groupOf(rows);
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compareRows(order[k - 1], order[k]) != 0) {
      first.push_back(order[k]);
      counts.push_back(0);
    }
    groupOf[order[k]] = first.size() - 1;
    ++counts.back();
  }
  int64_t unique = first.size();
  // Output position of each group: sorted order, or order of first occurrence.
  std::vector<int64_t> position(unique);
  std::iota(position.begin(), position.end(), 0);
  if (!n.attrInt("sorted", 1)) {
    std::vector<int64_t> byFirst(unique);
    std::iota(byFirst.begin(), byFirst.end(), 0);
    llvm::sort(byFirst, [&](int64_t a, int64_t c) { return first[a] < first[c]; });
    for (int64_t p = 0; p < unique; ++p)
      position[byFirst[p]] = p;
  }
  std::vector<int64_t> indices(unique), outCounts(unique), inverse(rows);
  for (int64_t g = 0; g < unique; ++g) {
    indices[position[g]] = first[g];
    outCounts[position[g]] = counts[g];
  }
  for (int64_t r = 0; r < rows; ++r)
    inverse[r] = position[groupOf[r]];
  if (n.hasOutput(0))
    n.setOutput(0, b.create<GatherOp>(x, b.constantI64(indices, {unique}), axis));
  if (n.hasOutput(1))
    n.setOutput(1, b.constantI64(indices, {unique}));
  if (n.hasOutput(2))
    n.setOutput(2, b.constantI64(inverse, {rows}));
  if (n.hasOutput(3))
    n.setOutput(3, b.constantI64(outCounts, {unique}));
}

// ---- Dropout ----------------------------------------------------------------------------------
//
// The counter-based generator of training-mode Dropout (ImportOptions::training), written in
// core ops only, so the interpreter and every backend run it with nothing of their own. All
// arithmetic is on ui64 and wraps. mix() is splitmix64's finaliser:
//
//   mix(z) = z3,  z1 = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9,
//                 z2 = (z1 ^ (z1 >> 27)) * 0x94D049BB133111EB,  z3 = z2 ^ (z2 >> 31)
//
// A Dropout node with stream number s (1, 2, ... for the dropping Dropouts in import order) and
// the 0-d key k (@main's last argument; the runtime derives it from the seed and the micro-step)
// draws, for element i of its input in row-major order,
//
//   seed = mix(k ^ (s * 0xD1B54A32D192ED03))
//   u_i  = f32(mix(seed + (i + 1) * 0x9E3779B97F4A7C15) >> 40) * 2^-24      (in [0, 1))
//
// (u_i is the (i+1)-th output of splitmix64 started at `seed`, its top 24 bits, converted exactly).
// (For micro-batch m of a pipelined step, i counts on from m times the input's elements:
// ImportOptions::microBatch. Where its rows are blocks of the data-parallel ranks' rows,
// ImportOptions::microBatchShards, each row's i is that of its row in the whole batch.)
// keep_i = u_i >= f32(ratio); y_i = x_i * (keep_i ? 1 / (1 - ratio) : 0) (as PyTorch, a dropped
// inf or NaN gives NaN); the mask output is keep.

/// splitmix64's finaliser on a ui64 tensor (see above).
Value splitmixFinalize(NodeContext &n, Value z) {
  CoreBuilder &b = n.b();
  auto u64 = [&](uint64_t v) { return n.constant(Tensor::scalar<uint64_t>(v)); };
  auto xorShift = [&](Value v, uint64_t shift) {
    return b.binary(BinaryKind::Xor, v, b.binary(BinaryKind::ShiftRight, v, u64(shift)));
  };
  z = b.mul(xorShift(z, 30), u64(0xBF58476D1CE4E5B9ULL));
  z = b.mul(xorShift(z, 27), u64(0x94D049BB133111EBULL));
  return xorShift(z, 31);
}

/// Training mode: keep_i = u_i >= ratio with u_i from the generator above, shaped like `x`.
Value dropoutKeepMask(NodeContext &n, Value x, double ratio) {
  CoreBuilder &b = n.b();
  auto u64 = [&](uint64_t v) { return n.constant(Tensor::scalar<uint64_t>(v)); };
  Type u64Type = b.builder().getIntegerType(64, /*isSigned=*/false);
  uint64_t stream = n.nextRngStream();
  Value seed = splitmixFinalize(
      n, b.binary(BinaryKind::Xor, n.rngKey(), u64(stream * 0xD1B54A32D192ED03ULL)));
  // i + 1 as a sum of per-dim iotas times strides: each iota is a small constant of one dim,
  // so constant folding cannot materialize the whole index tensor.
  ArrayRef<int64_t> shape = CoreBuilder::shapeOf(x);
  int64_t elements = 1;
  for (int64_t d : shape)
    elements *= d;
  Value counter = u64(1 + static_cast<uint64_t>(n.microBatch() * elements));
  int64_t shards = n.microBatchShards();
  bool rowsOfShards = shards > 1 && !shape.empty() && shape[0] % shards == 0;
  if (rowsOfShards) {
    // Row q of this micro-batch is row (q / b) * M * b + m * b + q % b of the whole batch (b
    // rows a block, M micro-batches): i = that row's first element + the rest's offset.
    int64_t rows = shape[0] / shards, perRow = elements / shape[0];
    int64_t microBatches = n.microBatches();
    counter = u64(1 + static_cast<uint64_t>(n.microBatch() * rows * perRow));
    std::vector<uint64_t> rowStart(shape[0]);
    for (int64_t q = 0; q < shape[0]; ++q)
      rowStart[q] = static_cast<uint64_t>(((q / rows) * microBatches * rows + q % rows) * perRow);
    SmallVector<int64_t> alongRows(shape.size(), 1);
    alongRows[0] = shape[0];
    counter = b.add(counter, n.constant(Tensor::fromVector<uint64_t>(
                                 Shape(alongRows.begin(), alongRows.end()), rowStart)));
  }
  int64_t stride = 1;
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    if (rowsOfShards && d == 0)
      break; // counted above
    if (shape[d] != 1) {
      SmallVector<int64_t> alongD(shape.size(), 1);
      alongD[d] = shape[d];
      Value index = b.iota(alongD, u64Type, d);
      counter = b.add(counter, stride == 1 ? index : b.mul(index, u64((uint64_t)stride)));
    }
    stride *= shape[d];
  }
  counter = b.broadcastTo(counter, shape);
  Value bits = splitmixFinalize(n, b.add(seed, b.mul(counter, u64(0x9E3779B97F4A7C15ULL))));
  bits = b.binary(BinaryKind::ShiftRight, bits, u64(40));
  Value uniform = b.mul(b.cast(bits, b.builder().getF32Type()),
                        n.constant(Tensor::scalar<float>(std::ldexp(1.0f, -24))));
  return b.compare(CompareKind::Ge, uniform,
                   n.constant(Tensor::scalar<float>(static_cast<float>(ratio))));
}

/// Inference (and ratio 0): output = input, mask all true. Training mode (ImportOptions::training)
/// drops with the generator above whatever the node's training_mode input says; otherwise a
/// training_mode that is a constant true with ratio > 0 is an error. Before opset 7, is_test is
/// ignored: such models are imported for inference.
void lowerDropout(NodeContext &n) {
  Value x = n.input(0);
  CoreBuilder &b = n.b();
  // The ratio is an attribute before opset 12, input 1 (a constant) from it; 0.5 by default.
  // Inference never reads it, so a ratio computed at run time is fine there.
  auto ratioOf = [&] {
    if (n.opset() < 12)
      return n.attrFloat("ratio", 0.5);
    return n.hasInput(1) ? requireScalar(n, 1, "ratio").getDouble(0) : 0.5;
  };
  double ratio = 0;
  if (n.training()) {
    ratio = ratioOf();
  } else if (n.opset() >= 12 && n.hasInput(2) &&
             isNonzero(requireScalar(n, 2, "training_mode"), 0) && ratioOf() != 0) {
    n.fail("training-mode Dropout with ratio " + std::to_string(ratioOf()) +
           " > 0 drops random elements, which tcc does only when importing for training");
  }
  bool drops = ratio != 0;
  // The mask is bool from opset 10, the data type before.
  Type maskType = n.opset() >= 10 ? b.builder().getI1Type() : CoreBuilder::elementTypeOf(x);
  if (!drops) {
    n.setOutput(0, x);
    if (n.hasOutput(1))
      n.setOutput(1, b.splat(b.tensorType(CoreBuilder::shapeOf(x), maskType), 1));
    return;
  }
  if (!(ratio > 0 && ratio < 1))
    n.fail("training-mode Dropout needs a ratio in [0, 1), got " + std::to_string(ratio));
  if (!isa<FloatType>(CoreBuilder::elementTypeOf(x)))
    n.fail("training-mode Dropout needs a floating-point input");
  Value keep = dropoutKeepMask(n, x, ratio);
  // y = x * (keep ? 1/(1-ratio) : 0): a multiply by a mask, whose gradient is the same multiply.
  Value scale = b.select(keep, b.scalarLike(x, 1.0 / (1.0 - ratio)), b.scalarLike(x, 0));
  n.setOutput(0, b.mul(x, scale));
  if (n.hasOutput(1))
    n.setOutput(1, b.cast(keep, maskType));
}

/// ai.onnx.ml ArrayFeatureExtractor: the elements of x's last axis at the given indices
/// ([..., len(indices)]; a 1-d x gives [1, len(indices)]).
void lowerArrayFeatureExtractor(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), indices = n.input(1);
  if (CoreBuilder::rankOf(x) == 0)
    n.fail("X must have rank >= 1");
  if (CoreBuilder::rankOf(x) == 1)
    x = b.reshape(x, {1, CoreBuilder::shapeOf(x)[0]});
  int64_t count = CoreBuilder::typeOf(indices).getNumElements();
  Value flat = b.reshape(indices, {count});
  n.setOutput(0, b.create<GatherOp>(x, flat, CoreBuilder::rankOf(x) - 1));
}

} // namespace

Value repeatInterleave(CoreBuilder &b, Value x, int64_t axis, int64_t reps) {
  SmallVector<int64_t> shape(CoreBuilder::shapeOf(x)), split = shape, repeated = shape;
  split.insert(split.begin() + axis + 1, 1);
  repeated.insert(repeated.begin() + axis + 1, reps);
  shape[axis] *= reps;
  return b.reshape(b.broadcastTo(b.reshape(x, split), repeated), shape);
}

void registerShapeOps(OpRegistry &r) {
  r.add("ArrayFeatureExtractor", lowerArrayFeatureExtractor, "ai.onnx.ml");
  r.add("Identity", lowerIdentity);
  r.add("Constant", lowerConstant);
  r.add("Shape", lowerShape);
  r.add("Size", lowerSize);
  r.add("ConstantOfShape", lowerConstantOfShape);
  r.add("Reshape", lowerReshape);
  r.add("Flatten", lowerFlatten);
  r.add("Squeeze", lowerSqueeze);
  r.add("Unsqueeze", lowerUnsqueeze);
  r.add("Transpose", lowerTranspose);
  r.add("DepthToSpace", lowerDepthToSpace);
  r.add("SpaceToDepth", lowerSpaceToDepth);
  r.add("Concat", lowerConcat);
  r.add("Split", lowerSplit);
  r.add("Slice", lowerSlice);
  r.add("Pad", lowerPad);
  r.add("CenterCropPad", lowerCenterCropPad);
  r.add("Tile", lowerTile);
  r.add("Expand", lowerExpand);
  r.add("Gather", lowerGather);
  r.add("GatherElements", lowerGatherElements);
  r.add("GatherND", lowerGatherND);
  r.add("ScatterElements", lowerScatterElements);
  r.add("Scatter", lowerScatterElements);
  r.add("ScatterND", lowerScatterND);
  r.add("ReverseSequence", lowerReverseSequence);
  r.add("Range", lowerRange);
  r.add("OneHot", lowerOneHot);
  r.add("EyeLike", lowerEyeLike);
  r.add("Trilu", lowerTrilu);
  r.add("NonZero", lowerNonZero);
  r.add("Compress", lowerCompress);
  r.add("Unique", lowerUnique);
  r.add("Dropout", lowerDropout);
}

} // namespace tcc::onnx_import
