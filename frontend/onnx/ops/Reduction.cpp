//===- Reduction.cpp - ONNX reductions, normalizations, linear algebra -> tcc ----===//
//
// Reduce* ops map to tcc.reduce with elementwise pre/post steps; ArgMax/ArgMin, CumSum and
// TopK to their core ops; (Log)Softmax/Hardmax to max-shifted reductions along an axis;
// MatMul/Gemm/Einsum to transposes + reshapes + tcc.matmul; the quantized ops to integer
// matmuls with float rescaling; the normalizations to mean/variance reductions.
//
//===----------------------------------------------------------------------===//
#include "../NodeContext.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

using namespace mlir;

namespace tcc::onnx_import {
namespace {

using Shape64 = SmallVector<int64_t>;

bool isFloat(Value v) { return isa<FloatType>(CoreBuilder::elementTypeOf(v)); }


/// All dims of a rank-r value.
Shape64 allDims(int64_t rank) {
  Shape64 dims(rank);
  std::iota(dims.begin(), dims.end(), 0);
  return dims;
}

/// Dims [from, rank).
Shape64 dimsFrom(int64_t from, int64_t rank) {
  Shape64 dims;
  for (int64_t d = from; d < rank; ++d)
    dims.push_back(d);
  return dims;
}

/// Normalizes a list of ONNX axes into sorted dims, failing on duplicates.
Shape64 normalizeAxes(NodeContext &n, ArrayRef<int64_t> axes, int64_t rank) {
  Shape64 out = n.normalizeAxes(axes, rank);
  llvm::sort(out);
  return out;
}

/// The product of x's sizes over dims.
SymExpr countOver(Value x, ArrayRef<int64_t> dims) {
  SymShape sizes = CoreBuilder::dimsOf(x);
  SymExpr count = 1;
  for (int64_t d : dims)
    count = count * sizes[d];
  return count;
}

/// The shape of x with `dims` set to 1 (a keepdims reduction's shape).
SymShape keptShape(Value x, ArrayRef<int64_t> dims) {
  SymShape shape = CoreBuilder::dimsOf(x);
  for (int64_t d : dims)
    shape[d] = 1;
  return shape;
}

/// The shape of x without `dims`.
SymShape droppedShape(Value x, ArrayRef<int64_t> dims) {
  SymShape all = CoreBuilder::dimsOf(x), shape;
  for (int64_t d = 0; d < (int64_t)all.size(); ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(all[d]);
  return shape;
}

} // namespace

// (NodeContext.h)
Value scalarCount(CoreBuilder &b, Value like, const SymExpr &count) {
  if (std::optional<int64_t> c = count.constant())
    return b.scalarLike(like, (double)*c);
  return b.cast(b.symInts({count}, {}), CoreBuilder::elementTypeOf(like));
}

Value meanKeep(CoreBuilder &b, Value x, ArrayRef<int64_t> dims) {
  Value sum = b.reduce(ReduceKind::Sum, x, dims, /*keepDims=*/true);
  return b.div(sum, scalarCount(b, x, countOver(x, dims)));
}

namespace {

/// 1 where v is finite, as i1 (inf - inf and NaN - NaN are NaN).
Value isFinite(CoreBuilder &b, Value v) {
  return b.compare(CompareKind::Eq, b.sub(v, v), b.scalarLike(v, 0));
}

/// max(x) over dims (kept), with non-finite maxima (all -inf, empty sets) replaced by 0 so that
/// subtracting it for numerical stability never produces inf - inf.
Value stableShift(CoreBuilder &b, Value x, ArrayRef<int64_t> dims) {
  Value m = b.reduce(ReduceKind::Max, x, dims, /*keepDims=*/true);
  return b.select(isFinite(b, m), m, b.splatLike(m, 0));
}

/// Reshapes a 1-D per-channel parameter of size C to broadcast along ONNX axis `axis` of a
/// rank-`rank` value ([C] -> [1, .., C, .., 1]); scalars and one-element tensors become 0-d.
Value alongAxis(NodeContext &n, Value p, int64_t axis, int64_t rank) {
  if (CoreBuilder::typeOf(p).getNumElements() == 1)
    return n.b().reshape(p, {});
  if (CoreBuilder::rankOf(p) != 1)
    n.fail("per-axis parameters must be 0-d or 1-d");
  Shape64 shape(rank, 1);
  shape[n.normalizeAxis(axis, rank)] = CoreBuilder::shapeOf(p)[0];
  return n.b().reshape(p, shape);
}

// ---- Reduce* ----

enum class Reduction { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

/// Reduce* ops: axes come from the `axes` attribute, or from input 1 for ReduceSum since
/// opset 13 and the others since 18 (where noop_with_empty_axes also appears). No axes means
/// every axis, or none at all with noop_with_empty_axes (then only the elementwise parts run,
/// e.g. ReduceSumSquare gives x*x). Empty sets reduce to the identity (0, 1, -inf, +inf).
void lowerReduce(NodeContext &n, Reduction kind) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  bool axesFromInput = n.opset() >= (kind == Reduction::Sum ? 13 : 18);
  std::vector<int64_t> axes;
  bool noop = false;
  if (axesFromInput) {
    if (n.hasInput(1))
      axes = n.requireInts(1, "axes");
    noop = n.attrInt("noop_with_empty_axes", 0) != 0;
  } else {
    axes = n.attrInts("axes");
  }
  Shape64 dims = axes.empty() ? (noop ? Shape64{} : allDims(rank)) : normalizeAxes(n, axes, rank);
  bool keep = n.attrInt("keepdims", 1) != 0;

  // Booleans (ReduceMax/Min, opset 20: any/all) reduce as 0/1 bytes.
  bool viaBytes = CoreBuilder::elementTypeOf(x).isInteger(1);
  if (viaBytes && kind != Reduction::Max && kind != Reduction::Min)
    n.fail("boolean inputs are reduced by ReduceMax and ReduceMin only");
  Type resultType = CoreBuilder::elementTypeOf(x);
  if (viaBytes)
    x = b.cast(x, b.builder().getIntegerType(8, /*isSigned=*/false));
  // Ops with logs and roots compute integers in f64 and convert back.
  bool viaFloat = !isFloat(x) && (kind == Reduction::L2 || kind == Reduction::LogSum ||
                                  kind == Reduction::LogSumExp);
  if (viaFloat)
    x = b.cast(x, b.builder().getF64Type());

  Value r;
  switch (kind) {
  case Reduction::Sum:
    r = b.reduce(ReduceKind::Sum, x, dims, keep);
    break;
  case Reduction::Mean: {
    SymExpr count = countOver(x, dims);
    if (count == 0 && !isFloat(x))
      n.fail("the mean of an empty set of integers is undefined");
    r = b.div(b.reduce(ReduceKind::Sum, x, dims, keep), scalarCount(b, x, count));
    break;
  }
  case Reduction::Max:
    r = b.reduce(ReduceKind::Max, x, dims, keep);
    break;
  case Reduction::Min:
    r = b.reduce(ReduceKind::Min, x, dims, keep);
    break;
  case Reduction::Prod:
    r = b.reduce(ReduceKind::Prod, x, dims, keep);
    break;
  case Reduction::L1:
    r = b.reduce(ReduceKind::Sum, b.unary(UnaryKind::Abs, x), dims, keep);
    break;
  case Reduction::L2:
    r = b.unary(UnaryKind::Sqrt, b.reduce(ReduceKind::Sum, b.mul(x, x), dims, keep));
    break;
  case Reduction::SumSquare:
    r = b.reduce(ReduceKind::Sum, b.mul(x, x), dims, keep);
    break;
  case Reduction::LogSum:
    r = b.unary(UnaryKind::Log, b.reduce(ReduceKind::Sum, x, dims, keep));
    break;
  case Reduction::LogSumExp: {
    // log(sum(exp(x - m))) + m with m the (finite) max, so large inputs do not overflow.
    Value m = stableShift(b, x, dims);
    Value sum = b.reduce(ReduceKind::Sum, b.unary(UnaryKind::Exp, b.sub(x, m)), dims, true);
    r = b.add(b.unary(UnaryKind::Log, sum), m);
    if (!keep)
      r = b.reshapeToDims(r, droppedShape(x, dims));
    break;
  }
  }
  n.setOutput(0, viaFloat || viaBytes ? b.cast(r, resultType) : r);
}

// ---- ArgMax / ArgMin, CumSum, TopK ----

void lowerArgReduce(NodeContext &n, bool isMax) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  if (rank == 0)
    n.fail("the input must have rank >= 1");
  int64_t axis = n.normalizeAxis(n.attrInt("axis", 0), rank);
  if (CoreBuilder::dimsOf(x)[axis] == 0)
    n.fail("cannot take the arg" + std::string(isMax ? "max" : "min") + " of an empty axis");
  bool last = n.attrInt("select_last_index", 0) != 0;
  Value r = b.create<ArgReduceOp>(isMax, x, (uint64_t)axis, last);
  if (n.attrInt("keepdims", 1))
    r = b.reshapeToDims(r, keptShape(x, {axis}));
  n.setOutput(0, r);
}

void lowerCumSum(NodeContext &n) {
  Value x = n.input(0);
  std::vector<int64_t> axis = n.requireInts(1, "axis");
  if (axis.size() != 1)
    n.fail("axis must hold exactly one value");
  int64_t dim = n.normalizeAxis(axis[0], CoreBuilder::rankOf(x));
  n.setOutput(0, n.b().create<CumsumOp>(x, (uint64_t)dim, n.attrInt("exclusive", 0) != 0,
                                        n.attrInt("reverse", 0) != 0));
}

/// x shifted by `by` along `dim` (elements move to higher indices), `fill` entering: a pad and
/// a slice.
Value shiftAlong(CoreBuilder &b, Value x, int64_t dim, int64_t by, double fill) {
  int64_t rank = CoreBuilder::rankOf(x), extent = CoreBuilder::shapeOf(x)[dim];
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  low[dim] = by;
  Value padded = b.create<PadOp>(x, b.scalarLike(x, fill), low, high, PadMode::Constant);
  return b.sliceDim(padded, dim, 0, extent);
}

/// CumProd (opset 26): the running product along an axis as a log-depth scan (Hillis-Steele:
/// x *= x shifted by 1, 2, 4... with ones entering), exclusive by a first shift of one, reverse
/// by reversing around it. Integers wrap as in a sequential product; float products associate
/// differently (the reference multiplies left to right), within rounding.
void lowerCumProd(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  std::vector<int64_t> axis = n.requireInts(1, "axis");
  if (axis.size() != 1)
    n.fail("axis must hold exactly one value");
  if (CoreBuilder::elementTypeOf(x).isInteger(1))
    n.fail("the input must be numeric, not bool");
  int64_t dim = n.normalizeAxis(axis[0], CoreBuilder::rankOf(x));
  int64_t extent = CoreBuilder::shapeOf(x)[dim];
  bool reverse = n.attrInt("reverse", 0) != 0;
  auto flip = [&](Value v) {
    return reverse ? b.createTyped<ReverseOp>(v.getType(), v, SmallVector<int64_t>{dim}) : v;
  };
  Value y = flip(x);
  if (n.attrInt("exclusive", 0) != 0 && extent > 0)
    y = shiftAlong(b, y, dim, 1, 1.0);
  for (int64_t by = 1; by < extent; by *= 2)
    y = b.mul(y, shiftAlong(b, y, dim, by, 1.0));
  n.setOutput(0, flip(y));
}

/// TfIdfVectorizer (opset 9; integer tokens): counts, per row of X ([C] or [N, C]), each pool
/// n-gram's occurrences with its items d = 1..max_skip_count+1 apart (unigrams once), then
/// weights them (TF: counts; IDF: weight where present; TFIDF: count x weight; weights default
/// to 1). Per n-gram size n and distance d, every window of X is compared with every pool n-gram
/// of that size at once ([N, windows, n-grams], all n items equal), the matches summed over the
/// windows; a compile-time one-hot matrix places the counts at their ngram_indexes.
void lowerTfIdfVectorizer(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  Type xt = CoreBuilder::elementTypeOf(x);
  if (!xt.isInteger(32) && !xt.isInteger(64))
    n.fail("X must hold int32 or int64 tokens (string pools are not supported)");
  if (n.hasAttr("pool_strings"))
    n.fail("pool_strings is not supported: tcc has no string tensors");
  int64_t rank = CoreBuilder::rankOf(x);
  if (rank != 1 && rank != 2)
    n.fail("X must be [C] or [N, C]");
  std::string mode = n.attrString("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    n.fail("mode must be TF, IDF or TFIDF, got '" + mode + "'");
  const int64_t minGram = n.requireAttrInt("min_gram_length"), maxGram = n.requireAttrInt("max_gram_length");
  const int64_t maxSkip = n.requireAttrInt("max_skip_count");
  std::vector<int64_t> starts = n.attrInts("ngram_counts"), indexes = n.attrInts("ngram_indexes"),
                       pool = n.attrInts("pool_int64s");
  std::vector<float> weights = n.attrFloats("weights");
  if (minGram < 1 || maxGram < minGram || maxSkip < 0)
    n.fail("needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  if (indexes.empty())
    n.fail("ngram_indexes must not be empty");
  const int64_t outSize = *std::max_element(indexes.begin(), indexes.end()) + 1;
  if (!weights.empty() && (int64_t)weights.size() != outSize)
    n.fail("weights must have one value per output (" + std::to_string(outSize) + ")");
  Value rows = rank == 1 ? b.reshape(x, {1, CoreBuilder::shapeOf(x)[0]}) : x;
  rows = b.cast(rows, b.builder().getI64Type());
  const int64_t N = CoreBuilder::shapeOf(rows)[0], C = CoreBuilder::shapeOf(rows)[1];
  Type f32 = b.builder().getF32Type();
  std::vector<Value> counts; // per pool n-gram, in pool order: [N, n-grams of a size]
  int64_t total = 0;         // pool n-grams so far
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t size = i + 1, begin = starts[i];
    const int64_t end = i + 1 < starts.size() ? starts[i + 1] : (int64_t)pool.size();
    if (begin < 0 || end < begin || end > (int64_t)pool.size() || (end - begin) % size)
      n.fail("ngram_counts does not split pool_int64s into whole n-grams");
    const int64_t grams = (end - begin) / size;
    if (grams == 0)
      continue;
    Value count = b.splat(b.tensorType({N, grams}, f32), 0.0);
    if (size >= minGram && size <= maxGram)
      for (int64_t d = 1; d <= (size == 1 ? 1 : maxSkip + 1); ++d) {
        const int64_t windows = C - (size - 1) * d;
        if (windows <= 0)
          break;
        Value match;
        for (int64_t j = 0; j < size; ++j) {
          std::vector<int64_t> item(grams);
          for (int64_t g = 0; g < grams; ++g)
            item[g] = pool[begin + g * size + j];
          Value tokens = b.reshape(b.sliceDim(rows, 1, j * d, j * d + windows), {N, windows, 1});
          Value eq = b.compare(CompareKind::Eq, tokens, b.constantI64(item, {1, 1, grams}));
          match = match ? b.binary(BinaryKind::And, match, eq) : eq;
        }
        count = b.add(count, b.reduce(ReduceKind::Sum, b.cast(match, f32), {1}, false));
      }
    counts.push_back(count);
    total += grams;
  }
  if ((int64_t)indexes.size() != total)
    n.fail("ngram_indexes has " + std::to_string(indexes.size()) + " entries for " +
           std::to_string(total) + " pool n-grams");
  std::vector<float> place(total * outSize, 0.0f);
  for (int64_t g = 0; g < total; ++g) {
    if (indexes[g] < 0)
      n.fail("ngram_indexes must not be negative");
    place[g * outSize + indexes[g]] = 1.0f;
  }
  Value all = counts.size() == 1 ? counts[0] : b.concat(counts, 1);
  Value y = b.matmul(all, n.constant(Tensor::fromVector<float>({total, outSize}, place)));
  if (mode != "TF") {
    std::vector<float> w = weights.empty() ? std::vector<float>(outSize, 1.0f) : weights;
    Value weight = b.broadcastTo(n.constant(Tensor::fromVector<float>({1, outSize}, w)), {N, outSize});
    y = mode == "IDF" ? b.select(b.compare(CompareKind::Gt, y, b.splatLike(y, 0)), weight,
                                 b.splatLike(y, 0))
                      : b.mul(y, weight);
  }
  n.setOutput(0, rank == 1 ? b.reshape(y, {outSize}) : y);
}

/// TopK: k is an attribute before opset 10, input 1 since./// TopK: k is an attribute before opset 10, input 1 since. Results are always sorted (allowed
/// for sorted=0 too).
void lowerTopK(NodeContext &n) {
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  if (rank == 0)
    n.fail("the input must have rank >= 1");
  int64_t axis = n.normalizeAxis(n.attrInt("axis", -1), rank);
  int64_t k;
  if (n.opset() < 10) {
    k = n.requireAttrInt("k");
  } else {
    std::vector<int64_t> ks = n.requireInts(1, "k");
    if (ks.size() != 1)
      n.fail("k must hold exactly one value");
    k = ks[0];
  }
  SymExpr size = CoreBuilder::dimsOf(x)[axis];
  if (k < 0 || (size.isConstant() && k > *size.constant()))
    n.fail("k = " + std::to_string(k) + " is out of range [0, " + size.str() + "]");
  if (!size.isConstant() && rangeOf(size, n.symbolRanges()).min < k)
    n.fail("k = " + std::to_string(k) + " may exceed the axis' size " + size.str() +
           " over the size ranges (" + describeSymbolRanges(n.symbolRanges()) +
           "): declare ranges that keep it at least " + std::to_string(k));
  auto [values, indices] = n.b().topk(x, axis, k, n.attrInt("largest", 1) != 0);
  n.setOutput(0, values);
  if (n.hasOutput(1))
    n.setOutput(1, indices);
}

// ---- Softmax family ----

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

/// softmax(x) = exp(x - max) / sum(exp(x - max)); log-softmax = (x - max) - log(sum(...));
/// hardmax = one-hot of the first argmax. Before opset 13 the input is coerced to 2-D
/// [prod(dims < axis), prod(dims >= axis)] and normalized along the second dim.
void lowerSoftmax(NodeContext &n, SoftmaxKind kind) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  SymShape shape = n.inputDims(0);
  int64_t rank = shape.size();
  bool legacy = n.opset() < 13;
  if (rank == 0)
    n.fail("the input must have rank >= 1");
  int64_t axis = n.normalizeAxis(n.attrInt("axis", legacy ? 1 : -1), rank);
  if (legacy) {
    if (auto s = staticDims(shape))
      (void)dimsProduct(*s); // overflow-checked
    x = b.reshapeToDims(x, SymShape{productOf(SymShape(shape.begin(), shape.begin() + axis)),
                                    productOf(SymShape(shape.begin() + axis, shape.end()))});
    axis = 1;
  }
  if (!isFloat(x))
    n.fail("the input must be a floating-point tensor");
  Value y;
  if (kind == SoftmaxKind::Hardmax) {
    if (CoreBuilder::dimsOf(x)[axis] == 0) {
      y = x;
    } else {
      Value arg = b.create<ArgReduceOp>(true, x, (uint64_t)axis, false);
      arg = b.reshapeToDims(arg, keptShape(x, {axis}));
      Value iota = b.iotaOfDims(CoreBuilder::dimsOf(x), b.builder().getI64Type(), axis);
      y = b.cast(b.compare(CompareKind::Eq, iota, arg), CoreBuilder::elementTypeOf(x));
    }
  } else {
    Value shifted = b.sub(x, stableShift(b, x, {axis}));
    Value e = b.unary(UnaryKind::Exp, shifted);
    Value sum = b.reduce(ReduceKind::Sum, e, {axis}, /*keepDims=*/true);
    y = kind == SoftmaxKind::Softmax ? b.div(e, sum)
                                     : b.sub(shifted, b.unary(UnaryKind::Log, sum));
  }
  n.setOutput(0, b.reshapeToDims(y, shape));
}

// ---- Matrix products ----

void lowerMatMul(NodeContext &n) {
  if (n.inputRank(0) == 0 || n.inputRank(1) == 0)
    n.fail("MatMul operands must have rank >= 1");
  if (n.inputElementType(0) != n.inputElementType(1))
    n.fail("MatMul operands differ in element type");
  n.setOutput(0, n.b().matmul(n.input(0), n.input(1)));
}

/// Y = alpha * op(A) op(B) + beta * C, op = optional transpose, C broadcast to [M, N].
void lowerGemm(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value a = n.input(0), bm = n.input(1);
  if (CoreBuilder::rankOf(a) != 2 || CoreBuilder::rankOf(bm) != 2)
    n.fail("A and B must be 2-D");
  if (n.attrInt("transA", 0))
    a = b.transpose(a, {1, 0});
  if (n.attrInt("transB", 0))
    bm = b.transpose(bm, {1, 0});
  if (CoreBuilder::dimsOf(a)[1] != CoreBuilder::dimsOf(bm)[0])
    n.fail("inner dimensions of A and B do not match");
  Value y = b.create<MatmulOp>(a, bm);
  double alpha = n.attrFloat("alpha", 1.0), beta = n.attrFloat("beta", 1.0);
  if (alpha != 1.0)
    y = b.mul(y, b.scalarLike(y, alpha));
  if (n.hasInput(2)) {
    // C broadcasts unidirectionally to Y's [M, N].
    Value c = b.broadcastToDims(n.input(2), CoreBuilder::dimsOf(y));
    if (beta != 1.0)
      c = b.mul(c, b.scalarLike(c, beta));
    y = b.add(y, c);
  }
  n.setOutput(0, y);
}


// ---- Quantization ----

/// Fails unless `t` is a type quantized values can have.
void checkQuantizedType(NodeContext &n, Type t) {
  auto i = dyn_cast<IntegerType>(t);
  if (isFloat8Type(t))
    return;
  if (!i || i.getWidth() == 1 || i.getWidth() > 32)
    n.fail("quantized type must be a 2-, 4-, 8-, 16- or 32-bit integer or a float8 type");
}

/// saturate(round_half_even(x / scale) + zeroPoint), computed in `scale`'s float type and
/// converted to `to`. scale and zeroPoint already broadcast against x. Into a float8 type there
/// is no rounding to an integer: x / scale + zeroPoint is cast, saturating unless `saturate` is
/// false (ONNX's attribute, float8 only).
Value quantize(NodeContext &n, Value x, Value scale, Value zeroPoint, Type to, bool saturate) {
  CoreBuilder &b = n.b();
  Type ft = CoreBuilder::elementTypeOf(scale);
  checkQuantizedType(n, to);
  Value q = b.div(b.cast(x, ft), scale);
  if (!isFloat8Type(to))
    q = b.unary(UnaryKind::Round, q);
  if (zeroPoint)
    q = b.add(q, b.cast(zeroPoint, ft));
  if (isFloat8Type(to))
    return castMaybeSaturating(b, q, to, saturate);
  return b.saturatingCast(q, to);
}

/// The axis of per-axis scales and zero points (1-D, along `axis`, since opset 13).
int64_t quantAxis(NodeContext &n) { return n.opset() < 13 ? 1 : n.attrInt("axis", 1); }

/// A scale or zero point (input `i`) of QuantizeLinear/DequantizeLinear, shaped to broadcast
/// against x: a scalar, 1-D along the axis, or with `block_size` (opset 21: int4 weights
/// quantized in blocks along one axis) x's shape with ceil(D / block_size) entries along the
/// axis, each repeated block_size times and the last block cut to D.
Value quantParameter(NodeContext &n, size_t i, Value x) {
  CoreBuilder &b = n.b();
  int64_t rank = CoreBuilder::rankOf(x), axis = quantAxis(n);
  int64_t blockSize = n.attrInt("block_size", 0);
  if (blockSize < 0)
    n.fail("block_size must not be negative, got " + std::to_string(blockSize));
  if (blockSize == 0)
    return alongAxis(n, n.input(i), axis, rank);
  axis = n.normalizeAxis(axis, rank);
  Value p = n.input(i);
  Shape64 xs(CoreBuilder::shapeOf(x)), ps(CoreBuilder::shapeOf(p));
  int64_t d = xs[axis], blocks = (d + blockSize - 1) / blockSize;
  Shape64 expected = xs;
  expected[axis] = blocks;
  if (ps != expected)
    n.fail("with block_size " + std::to_string(blockSize) + ", input " + std::to_string(i) +
           " must have shape " + shapeToString(Shape(expected.begin(), expected.end())) + " (x's, with ceil(" + std::to_string(d) +
           " / " + std::to_string(blockSize) + ") along axis " + std::to_string(axis) +
           "), got " + shapeToString(Shape(ps.begin(), ps.end())));
  return b.sliceDim(repeatInterleave(b, p, axis, blockSize), axis, 0, d);
}

void lowerQuantizeLinear(NodeContext &n) {
  Value x = n.input(0);
  Value scale = quantParameter(n, 1, x);
  if (!isFloat(scale))
    n.fail("y_scale must be a floating-point tensor");
  Value zp = n.hasInput(2) ? quantParameter(n, 2, x) : Value();
  Type to = zp ? CoreBuilder::elementTypeOf(zp)
          : n.hasAttr("output_dtype") && n.attrInt("output_dtype", 0) != 0
              ? n.elementType((int32_t)n.attrInt("output_dtype", 0))
              : n.b().builder().getIntegerType(8, false);
  n.setOutput(0, quantize(n, x, scale, zp, to, n.attrInt("saturate", 1) != 0));
}

/// y = (x - zero_point) * scale, the subtraction exact in i32.
void lowerDequantizeLinear(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  Value scale = quantParameter(n, 1, x);
  if (!isFloat(scale))
    n.fail("x_scale must be a floating-point tensor");
  // Integers subtract in i32 (exact); float8 values in the scale's float type.
  Type ft = CoreBuilder::elementTypeOf(scale);
  Type wide = isFloat8Type(CoreBuilder::elementTypeOf(x)) ? ft : b.builder().getI32Type();
  Value v = b.cast(x, wide);
  if (n.hasInput(2))
    v = b.sub(v, b.cast(quantParameter(n, 2, x), wide));
  n.setOutput(0, b.mul(b.cast(v, ft), scale));
}

/// uint8 quantization with range [min(0, min x), max(0, max x)]:
/// scale = range / 255, zero_point = saturate(round(-min / scale)).
void lowerDynamicQuantizeLinear(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  if (!isFloat(x))
    n.fail("the input must be a floating-point tensor");
  Shape64 dims = allDims(CoreBuilder::rankOf(x));
  Value zero = b.scalarLike(x, 0);
  Value lo = b.min(b.reduce(ReduceKind::Min, x, dims, false), zero);
  Value hi = b.max(b.reduce(ReduceKind::Max, x, dims, false), zero);
  Value scale = b.div(b.sub(hi, lo), b.scalarLike(x, 255));
  Type u8 = b.builder().getIntegerType(8, false);
  Value zp = quantize(n, b.unary(UnaryKind::Neg, lo), scale, Value(), u8, true);
  n.setOutput(0, quantize(n, x, scale, zp, u8, true));
  n.setOutput(1, scale);
  n.setOutput(2, zp);
}

/// x - zero_point in i32; a 1-D zero point is per row of A (rowwise) or per column of B.
Value centered(NodeContext &n, size_t xIndex, size_t zpIndex, bool rowwise) {
  CoreBuilder &b = n.b();
  Type i32 = b.builder().getI32Type();
  Value x = b.cast(n.input(xIndex), i32);
  if (!n.hasInput(zpIndex))
    return x;
  Value zp = b.cast(n.input(zpIndex), i32);
  if (CoreBuilder::rankOf(zp) == 1 && rowwise)
    zp = b.reshape(zp, {CoreBuilder::shapeOf(zp)[0], 1});
  return b.sub(x, zp);
}

/// (A - a_zp) x (B - b_zp), accumulated in i32.
void lowerMatMulInteger(NodeContext &n) {
  Value a = centered(n, 0, 2, n.inputRank(0) >= 2), bm = centered(n, 1, 3, false);
  n.setOutput(0, n.b().matmul(a, bm));
}

/// The i32 product of the centered operands, rescaled by a_scale * b_scale / y_scale and
/// requantized with y_zero_point. a's scale may be per row, b's per column.
void lowerQLinearMatMul(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value a = centered(n, 0, 2, n.inputRank(0) >= 2), bm = centered(n, 3, 5, false);
  Value acc = b.matmul(a, bm);
  Value aScale = n.input(1), bScale = n.input(4), yScale = n.input(6);
  if (CoreBuilder::rankOf(aScale) == 1 && n.inputRank(0) >= 2)
    aScale = b.reshape(aScale, {CoreBuilder::shapeOf(aScale)[0], 1});
  Type ft = CoreBuilder::elementTypeOf(yScale);
  Value real = b.mul(b.cast(acc, ft), b.mul(b.cast(aScale, ft), b.cast(bScale, ft)));
  Type to = CoreBuilder::elementTypeOf(n.input(7));
  n.setOutput(0, quantize(n, real, yScale, n.input(7), to, true));
}


// ---- Normalizations ----

/// (x - mean) / sqrt(var + epsilon) * scale + bias, all but x already broadcastable.
Value normalize(CoreBuilder &b, Value x, Value mean, Value var, double epsilon, Value scale,
                Value bias) {
  Value invStd = b.unary(UnaryKind::Rsqrt, b.add(var, b.scalarLike(var, epsilon)));
  return b.add(b.mul(b.mul(b.sub(x, mean), invStd), scale), bias);
}

/// BatchNormalization over [N, C, D...] with per-channel scale, bias, mean and var. Inference
/// uses the given statistics. Training mode (training_mode since 14; before that, asking for
/// the statistics outputs; or importing for training, ImportOptions::training) normalizes with
/// the batch statistics (population variance over all dims but C) and outputs running = given *
/// momentum + batch * (1 - momentum); the legacy 4th/5th outputs are the batch mean and
/// variance. Importing for training, running statistics that are buffers take those values.
void lowerBatchNormalization(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  if (rank < 2)
    n.fail("the input must have rank >= 2 ([N, C, ...])");
  Type t = CoreBuilder::elementTypeOf(x);
  // Per-channel [C] params broadcast as [C, 1, ...]; (spatial=0) [C, D...] ones as they are.
  auto param = [&](size_t i) {
    Value p = b.cast(n.input(i), t);
    if (CoreBuilder::rankOf(p) == 1) {
      Shape64 shape(rank - 1, 1);
      shape[0] = CoreBuilder::shapeOf(p)[0];
      p = b.reshape(p, shape);
    }
    return p;
  };
  Value scale = param(1), bias = param(2), mean = param(3), var = param(4);
  double epsilon = n.attrFloat("epsilon", 1e-5);
  bool training = n.training() ||
                  (n.opset() >= 14 ? n.attrInt("training_mode", 0) != 0
                                   : n.numOutputs() > 1 && (n.opset() >= 7 || !n.attrInt("is_test", 0)));
  if (!training) {
    n.setOutput(0, normalize(b, x, mean, var, epsilon, scale, bias));
    return;
  }
  Shape64 dims = dimsFrom(2, rank);
  dims.insert(dims.begin(), 0);
  Value batchMean = meanKeep(b, x, dims);
  Value centeredX = b.sub(x, batchMean);
  Value batchVar = meanKeep(b, b.mul(centeredX, centeredX), dims);
  n.setOutput(0, normalize(b, x, batchMean, batchVar, epsilon, scale, bias));
  double momentum = n.attrFloat("momentum", 0.9);
  Value m = b.scalarLike(x, momentum), oneMinus = b.scalarLike(x, 1 - momentum);
  Shape64 channels{CoreBuilder::shapeOf(x)[1]};
  // Output `i` and buffer input `input` (when importing for training) take the running value.
  auto running = [&](size_t i, size_t input, Value given, Value batch) {
    bool buffer = n.training() && n.inputIsBuffer(input);
    if (!n.hasOutput(i) && !buffer)
      return;
    Value next = b.cast(b.reshape(b.add(b.mul(given, m), b.mul(batch, oneMinus)),
                                  CoreBuilder::shapeOf(n.input(input))),
                        n.inputElementType(input));
    if (n.hasOutput(i))
      n.setOutput(i, next);
    if (buffer)
      n.updateBuffer(input, next);
  };
  running(1, 3, mean, batchMean);
  running(2, 4, var, batchVar);
  if (n.hasOutput(3))
    n.setOutput(3, b.reshape(batchMean, channels));
  if (n.hasOutput(4))
    n.setOutput(4, b.reshape(batchVar, channels));
}

/// InstanceNormalization: per (N, C) statistics over the spatial dims.
void lowerInstanceNormalization(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  int64_t rank = CoreBuilder::rankOf(x);
  if (rank < 3)
    n.fail("the input must have rank >= 3 ([N, C, D...])");
  Shape64 spatial = dimsFrom(2, rank);
  Value mean = meanKeep(b, x, spatial);
  Value centeredX = b.sub(x, mean);
  Value var = meanKeep(b, b.mul(centeredX, centeredX), spatial);
  Value scale = alongAxis(n, n.input(1), 1, rank), bias = alongAxis(n, n.input(2), 1, rank);
  n.setOutput(0, normalize(b, x, mean, var, n.attrFloat("epsilon", 1e-5), scale, bias));
}

/// GroupNormalization (opset 18; 21 takes scale and bias per channel, 18 per group): statistics
/// per (N, group) over the group's channels and the spatial dims, computed in f32 (stash_type 1).
void lowerGroupNormalization(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  Shape64 shape(CoreBuilder::shapeOf(x));
  int64_t rank = shape.size();
  int64_t groups = n.requireAttrInt("num_groups");
  if (rank < 3)
    n.fail("the input must have rank >= 3 ([N, C, D...])");
  if (groups < 1 || shape[1] % groups)
    n.fail("num_groups " + std::to_string(groups) + " must divide the " +
           std::to_string(shape[1]) + " channels");
  if (n.attrInt("stash_type", 1) != 1)
    n.fail("stash_type must be 1 (float)");
  Type t = CoreBuilder::elementTypeOf(x), f32 = b.builder().getF32Type();
  Shape64 grouped = {shape[0], groups, dimsProduct(ArrayRef<int64_t>(shape).drop_front(1)) / groups};
  Value g = b.cast(b.reshape(x, grouped), f32);
  Value mean = meanKeep(b, g, {2});
  Value centered = b.sub(g, mean);
  Value var = meanKeep(b, b.mul(centered, centered), {2});
  Value normalized = b.reshape(b.div(centered, b.unary(UnaryKind::Sqrt, b.add(var, b.scalarLike(var, n.attrFloat("epsilon", 1e-5))))), shape);
  Value scale = b.cast(n.input(1), f32), bias = b.cast(n.input(2), f32);
  int64_t per = CoreBuilder::typeOf(scale).getNumElements();
  if (per != shape[1] && per != groups)
    n.fail("scale and bias must have one value per channel (opset 21) or per group (opset 18)");
  if (per != shape[1]) { // per group: each group's value for its channels
    Shape64 rep = {groups, shape[1] / groups};
    scale = b.reshape(b.broadcastTo(b.reshape(scale, {groups, 1}), rep), {shape[1]});
    bias = b.reshape(b.broadcastTo(b.reshape(bias, {groups, 1}), rep), {shape[1]});
  }
  Shape64 channel(rank, 1);
  channel[1] = shape[1];
  n.setOutput(0, b.cast(b.add(b.mul(normalized, b.reshape(scale, channel)), b.reshape(bias, channel)), t));
}

/// LpNormalization: x / ||x||_p along axis (p = 1 or 2).
void lowerLpNormalization(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  int64_t axis = n.normalizeAxis(n.attrInt("axis", -1), CoreBuilder::rankOf(x));
  int64_t p = n.attrInt("p", 2);
  Value norm;
  if (p == 1)
    norm = b.reduce(ReduceKind::Sum, b.unary(UnaryKind::Abs, x), {axis}, true);
  else if (p == 2)
    norm = b.unary(UnaryKind::Sqrt, b.reduce(ReduceKind::Sum, b.mul(x, x), {axis}, true));
  else
    n.fail("p must be 1 or 2, got " + std::to_string(p));
  // A zero norm gives zeros, not 0/0 (as ONNX's reference does).
  Value zero = b.compare(CompareKind::Eq, norm, b.splatLike(norm, 0));
  Value safe = b.select(zero, b.splatLike(norm, 1), norm);
  n.setOutput(0, b.select(b.broadcastTo(zero, CoreBuilder::shapeOf(x)), b.splatLike(x, 0),
                          b.div(x, safe)));
}

// ---- Det ----

/// Det of [..., n, n] by Gaussian elimination with partial pivoting, unrolled over the n
/// (static) steps on the flattened batch [B, n, n]: at step k the pivot row (argmax |A[k:, k]|)
/// is swapped into row k by a permutation matmul (flipping the sign when it moves), the
/// pivot multiplies into the determinant, and the rows below are eliminated.
void lowerDet(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  ArrayRef<int64_t> shape = CoreBuilder::shapeOf(x);
  int64_t rank = shape.size();
  if (rank < 2 || shape[rank - 1] != shape[rank - 2])
    n.fail("the input must be [..., n, n]");
  if (!isFloat(x))
    n.fail("the input must be a floating-point tensor");
  int64_t size = shape.back();
  Shape64 batchShape(shape.drop_back(2));
  int64_t batch = dimsProduct(batchShape);
  Value a = b.reshape(x, {batch, size, size});
  Type i64 = b.builder().getI64Type();
  Value rows = b.iota({1, size, 1}, i64, 1);
  Value cols = b.iota({1, 1, size}, i64, 2);
  Value det = b.splat(b.tensorType({batch}, CoreBuilder::elementTypeOf(x)), 1);
  for (int64_t k = 0; k < size; ++k) {
    Value column = b.reshape(b.sliceDim(b.sliceDim(a, 2, k, k + 1), 1, k, size), {batch, size - k});
    Value offset = b.create<ArgReduceOp>(true, b.unary(UnaryKind::Abs, column), (uint64_t)1, false);
    Value pivotRow = b.reshape(b.add(offset, b.scalarLike(offset, (double)k)), {batch, 1, 1});
    // Row i of the permuted matrix reads row src(i): k <-> pivotRow, others stay.
    Value kConst = b.scalarLike(rows, (double)k);
    Value src = b.select(b.compare(CompareKind::Eq, rows, kConst), pivotRow,
                         b.select(b.compare(CompareKind::Eq, rows, pivotRow), kConst, rows));
    Value perm = b.cast(b.compare(CompareKind::Eq, cols, src), CoreBuilder::elementTypeOf(x));
    a = b.create<MatmulOp>(perm, a);
    Value swapped = b.compare(CompareKind::Ne, offset, b.scalarLike(offset, 0));
    det = b.select(swapped, b.unary(UnaryKind::Neg, det), det);
    Value pivot = b.sliceDim(b.sliceDim(a, 1, k, k + 1), 2, k, k + 1); // [B, 1, 1]
    det = b.mul(det, b.reshape(pivot, {batch}));
    if (k + 1 == size)
      break;
    // A zero pivot means a zero determinant; divide by 1 instead to keep NaNs out.
    Value safe = b.select(b.compare(CompareKind::Eq, pivot, b.scalarLike(pivot, 0)),
                          b.splatLike(pivot, 1), pivot);
    Value below = b.sliceDim(a, 1, k + 1, size);                            // [B, n-k-1, n]
    Value factors = b.div(b.sliceDim(below, 2, k, k + 1), safe);             // [B, n-k-1, 1]
    Value pivotRowValues = b.sliceDim(a, 1, k, k + 1);                       // [B, 1, n]
    below = b.sub(below, b.mul(factors, pivotRowValues));
    a = b.concat({b.sliceDim(a, 1, 0, k + 1), below}, 1);
  }
  n.setOutput(0, b.reshape(det, batchShape));
}


// ---- Einsum ----

/// An einsum operand: its value and one label per dim. Letters are labels 0..127 (their
/// character code); the dims covered by "..." get labels 1000 + position, right-aligned so
/// that broadcast ellipsis dims of different operands share labels.
struct EinsumTerm {
  Value value;
  std::vector<int> labels;
};

constexpr int kEllipsisLabel = 1000;

/// Parses one side of the equation ("ab...c") for a value of rank `rank` (-1: the output, whose
/// ellipsis stands for all `ellipsisRank` broadcast dims).
std::vector<int> parseEinsumTerm(NodeContext &n, const std::string &term, int64_t rank,
                                 int64_t ellipsisRank) {
  std::vector<int> labels;
  size_t dots = term.find("...");
  if (dots != std::string::npos && term.find("...", dots + 1) != std::string::npos)
    n.fail("'" + term + "' has more than one ellipsis");
  int64_t letters = (int64_t)term.size() - (dots == std::string::npos ? 0 : 3);
  int64_t spanned = rank < 0 ? ellipsisRank : rank - letters;
  if (dots == std::string::npos ? (rank >= 0 && letters != rank) : spanned < 0)
    n.fail("subscripts '" + term + "' do not match an operand of rank " + std::to_string(rank));
  for (size_t i = 0; i < term.size(); ++i) {
    if (i == dots) {
      for (int64_t j = 0; j < spanned; ++j)
        labels.push_back(kEllipsisLabel + (int)(ellipsisRank - spanned + j));
      i += 2;
    } else if (std::isalpha((unsigned char)term[i])) {
      labels.push_back(term[i]);
    } else {
      n.fail("invalid character '" + std::string(1, term[i]) + "' in the equation");
    }
  }
  return labels;
}

/// Sums out the dims of `t` whose labels are not in `keep`.
void sumOutExcept(CoreBuilder &b, EinsumTerm &t, const std::set<int> &keep) {
  Shape64 dims;
  std::vector<int> labels;
  for (size_t d = 0; d < t.labels.size(); ++d) {
    if (keep.count(t.labels[d]))
      labels.push_back(t.labels[d]);
    else
      dims.push_back(d);
  }
  if (!dims.empty())
    t.value = b.reduce(ReduceKind::Sum, t.value, dims, false);
  t.labels = labels;
}

/// Replaces dims that repeat a label (x[i, i]) by their diagonal: zero the off-diagonal
/// elements, then sum the second dim away.
void takeDiagonals(NodeContext &n, EinsumTerm &t) {
  CoreBuilder &b = n.b();
  for (size_t i = 0; i < t.labels.size(); ++i)
    for (size_t j = i + 1; j < t.labels.size(); ++j) {
      if (t.labels[i] != t.labels[j])
        continue;
      if (CoreBuilder::shapeOf(t.value)[i] != CoreBuilder::shapeOf(t.value)[j])
        n.fail("repeated label '" + std::string(1, (char)t.labels[i]) +
               "' spans dims of different sizes");
      auto shape = CoreBuilder::shapeOf(t.value);
      Type i64 = b.builder().getI64Type();
      Value onDiagonal = b.compare(CompareKind::Eq, b.iota(shape, i64, i), b.iota(shape, i64, j));
      t.value = b.select(onDiagonal, t.value, b.splatLike(t.value, 0));
      t.value = b.reduce(ReduceKind::Sum, t.value, {(int64_t)j}, false);
      t.labels.erase(t.labels.begin() + j);
      --j;
    }
}

/// Contracts two terms, keeping the labels in `keep`: batch labels (in both, kept), contracted
/// labels (in both, not kept) and each side's own labels become [B, M, K] x [B, K, N] for one
/// tcc.matmul. Size-1 dims facing a larger one (broadcast ellipsis dims) are broadcast first.
EinsumTerm contract(CoreBuilder &b, EinsumTerm x, EinsumTerm y, const std::set<int> &keep) {
  std::set<int> inX(x.labels.begin(), x.labels.end()), inY(y.labels.begin(), y.labels.end());
  std::set<int> keepX = keep, keepY = keep;
  keepX.insert(y.labels.begin(), y.labels.end());
  keepY.insert(x.labels.begin(), x.labels.end());
  sumOutExcept(b, x, keepX);
  sumOutExcept(b, y, keepY);

  std::map<int, int64_t> sizes;
  for (EinsumTerm *t : {&x, &y})
    for (size_t d = 0; d < t->labels.size(); ++d)
      sizes[t->labels[d]] = std::max(sizes[t->labels[d]], CoreBuilder::shapeOf(t->value)[d]);
  std::vector<int> batch, contracted, onlyX, onlyY;
  for (int l : x.labels)
    (inY.count(l) ? (keep.count(l) ? batch : contracted) : onlyX).push_back(l);
  for (int l : y.labels)
    if (!inX.count(l))
      onlyY.push_back(l);

  auto arrange = [&](EinsumTerm &t, std::initializer_list<const std::vector<int> *> groups) {
    Shape64 perm, full, flat;
    for (const auto *g : groups) {
      int64_t count = 1;
      for (int l : *g) {
        perm.push_back(std::find(t.labels.begin(), t.labels.end(), l) - t.labels.begin());
        full.push_back(sizes[l]);
        count *= sizes[l];
      }
      flat.push_back(count);
    }
    Value v = b.transpose(t.value, perm);
    return b.reshape(b.broadcastTo(v, full), flat);
  };
  Value lhs = arrange(x, {&batch, &onlyX, &contracted});
  Value rhs = arrange(y, {&batch, &contracted, &onlyY});
  EinsumTerm out;
  out.value = b.create<MatmulOp>(lhs, rhs);
  Shape64 shape;
  for (const auto *g : {&batch, &onlyX, &onlyY})
    for (int l : *g) {
      out.labels.push_back(l);
      shape.push_back(sizes[l]);
    }
  out.value = b.reshape(out.value, shape);
  return out;
}

/// Einsum: diagonals of repeated labels, then a left fold of pairwise contractions (keeping
/// labels the output or later operands need), then a final sum and transpose to the output.
/// Without "->" the output is the ellipsis dims followed by the labels used once, sorted.
void lowerEinsum(NodeContext &n) {
  CoreBuilder &b = n.b();
  std::string eq;
  for (char c : n.attrString("equation", ""))
    if (!std::isspace((unsigned char)c))
      eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (terms.size() != n.numInputs())
    n.fail("the equation has " + std::to_string(terms.size()) + " operands but the node has " +
           std::to_string(n.numInputs()) + " inputs");
  if (n.numInputs() == 0)
    n.fail("Einsum needs at least one input");

  int64_t ellipsisRank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    size_t dots = terms[i].find("...");
    if (dots != std::string::npos)
      ellipsisRank = std::max(ellipsisRank, n.inputRank(i) - (int64_t)(terms[i].size() - 3));
  }
  std::vector<EinsumTerm> operands;
  std::map<int, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    EinsumTerm t{n.input(i), parseEinsumTerm(n, terms[i], n.inputRank(i), ellipsisRank)};
    for (int l : t.labels)
      ++uses[l];
    operands.push_back(t);
  }
  std::vector<int> output;
  if (arrow != std::string::npos) {
    output = parseEinsumTerm(n, eq.substr(arrow + 2), -1, ellipsisRank);
    for (int l : output) {
      if (!uses.count(l))
        n.fail("output label '" + std::string(1, (char)l) + "' appears in no operand");
      if (std::count(output.begin(), output.end(), l) > 1)
        n.fail("output label '" + std::string(1, (char)l) + "' is repeated");
    }
  } else {
    for (int64_t j = 0; j < ellipsisRank; ++j)
      output.push_back(kEllipsisLabel + (int)j);
    for (auto [l, count] : uses) // std::map: ascending character order
      if (l < kEllipsisLabel && count == 1)
        output.push_back(l);
  }

  for (EinsumTerm &t : operands)
    takeDiagonals(n, t);
  for (size_t i = 1; i < operands.size(); ++i)
    if (CoreBuilder::elementTypeOf(operands[i].value) != CoreBuilder::elementTypeOf(operands[0].value))
      n.fail("operands differ in element type");
  EinsumTerm acc = operands[0];
  for (size_t i = 1; i < operands.size(); ++i) {
    std::set<int> keep(output.begin(), output.end());
    for (size_t j = i + 1; j < operands.size(); ++j)
      keep.insert(operands[j].labels.begin(), operands[j].labels.end());
    acc = contract(b, acc, operands[i], keep);
  }
  sumOutExcept(b, acc, std::set<int>(output.begin(), output.end()));
  Shape64 perm;
  for (int l : output)
    perm.push_back(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin());
  n.setOutput(0, b.transpose(acc.value, perm));
}

} // namespace

void registerReductionOps(OpRegistry &r) {
  auto addReduce = [&](const std::string &op, Reduction kind) {
    r.add(op, [kind](NodeContext &n) { lowerReduce(n, kind); });
  };
  addReduce("ReduceSum", Reduction::Sum);
  addReduce("ReduceMean", Reduction::Mean);
  addReduce("ReduceMax", Reduction::Max);
  addReduce("ReduceMin", Reduction::Min);
  addReduce("ReduceProd", Reduction::Prod);
  addReduce("ReduceL1", Reduction::L1);
  addReduce("ReduceL2", Reduction::L2);
  addReduce("ReduceLogSum", Reduction::LogSum);
  addReduce("ReduceLogSumExp", Reduction::LogSumExp);
  addReduce("ReduceSumSquare", Reduction::SumSquare);

  r.add("ArgMax", [](NodeContext &n) { lowerArgReduce(n, true); });
  r.add("ArgMin", [](NodeContext &n) { lowerArgReduce(n, false); });
  r.add("CumSum", lowerCumSum);
  r.add("CumProd", lowerCumProd);
  r.add("TfIdfVectorizer", lowerTfIdfVectorizer);
  r.add("TopK", lowerTopK);

  r.add("Softmax", [](NodeContext &n) { lowerSoftmax(n, SoftmaxKind::Softmax); });
  r.add("LogSoftmax", [](NodeContext &n) { lowerSoftmax(n, SoftmaxKind::LogSoftmax); });
  r.add("Hardmax", [](NodeContext &n) { lowerSoftmax(n, SoftmaxKind::Hardmax); });

  r.add("MatMul", lowerMatMul);
  r.add("Gemm", lowerGemm);
  r.add("Einsum", lowerEinsum);
  r.add("MatMulInteger", lowerMatMulInteger);
  r.add("QLinearMatMul", lowerQLinearMatMul);
  r.add("QuantizeLinear", lowerQuantizeLinear);
  r.add("DequantizeLinear", lowerDequantizeLinear);
  r.add("DynamicQuantizeLinear", lowerDynamicQuantizeLinear);

  r.add("BatchNormalization", lowerBatchNormalization);
  r.add("InstanceNormalization", lowerInstanceNormalization);
  r.add("GroupNormalization", lowerGroupNormalization);
  r.add("LpNormalization", lowerLpNormalization);
  r.add("Det", lowerDet);
}

} // namespace tcc::onnx_import
