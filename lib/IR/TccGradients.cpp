//===- TccGradients.cpp - Vector-Jacobian products of the core ops -------------===//
//
// DifferentiableOpInterface::buildVjp for every differentiable core op: given the adjoints of an
// op's results, build the adjoints of its operands out of plain core ops (tcc::CoreBuilder), at
// the builder's insertion point and with the op's location (so backward ops name the ONNX node
// of the forward op). The semantics differentiated are those of the reference kernels
// (tcc/Interp/Kernels.h). Conventions:
//  - A null result adjoint is zero; a null operand adjoint means "no gradient" (not wanted, an
//    index operand, or identically zero). Zeros are only materialised where a rule needs a
//    tensor to write into.
//  - At kinks the rules pick what PyTorch does: |x|' = sign(x) (0 at 0); ties of max/min split
//    the gradient equally; max pooling sends it to the first maximum of a window in scan order.
//  - Only float operands get adjoints (integers and bools are piecewise constant).
//  - Extremes are found by equality with the result, so a NaN maximum/minimum (of reduce,
//    reduce_window or binary max/min) passes no gradient, where PyTorch passes it to the NaN.
//  - Products (reduce and reduce_window prod) never divide by zero: with one zero in a group
//    the zero gets the product of the others, with more every element gets 0.
//  - Scatter with reduction None: overwritten elements of x and updates that a later duplicate
//    index overwrote get no gradient (the last write wins, as in the reference kernel).
//
//===----------------------------------------------------------------------===//
#include "tcc/IR/Attention.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Support/Tensor.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <functional>
#include <numeric>

using namespace mlir;

namespace tcc {

#include "tcc/IR/TccInterfaces.cpp.inc"

namespace {

bool isFloat(Value v) { return isa<FloatType>(CoreBuilder::elementTypeOf(v)); }

int64_t product(ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<int64_t>());
}

/// The inverse of a permutation.
SmallVector<int64_t> inversePermutation(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[perm[i]] = i;
  return inv;
}

/// Shared plumbing of one VJP: the builder (at the forward op's location), the result adjoints
/// and the operand adjoints being built.
class Vjp {
public:
  Vjp(OpBuilder &builder, Operation *op, ArrayRef<Value> resultAdjoints, ArrayRef<bool> wanted,
      SmallVectorImpl<Value> &operandAdjoints)
      : b(builder, op->getLoc()), op(op), resultAdjoints(resultAdjoints), wanted(wanted),
        out(operandAdjoints) {
    out.assign(op->getNumOperands(), Value());
  }

  /// The adjoint of result i (null = zero).
  Value g(unsigned i = 0) const { return i < resultAdjoints.size() ? resultAdjoints[i] : Value(); }
  /// Whether operand i's adjoint should be built: wanted, float, and some result adjoint is
  /// non-zero.
  bool want(unsigned i) const {
    return i < wanted.size() && wanted[i] && isFloat(op->getOperand(i)) &&
           llvm::any_of(resultAdjoints, [](Value v) { return (bool)v; });
  }
  void set(unsigned i, Value adjoint) {
    if (adjoint && adjoint.getType() != op->getOperand(i).getType())
      throw Error("the adjoint of operand " + std::to_string(i) + " has the wrong type");
    out[i] = adjoint;
  }
  /// Fails with a diagnostic at the op if operand i is wanted (its gradient has no rule).
  LogicalResult noRuleFor(unsigned i, const Twine &reason) {
    if (!want(i))
      return success();
    return op->emitOpError("has no gradient: ") << reason;
  }

  // ---- helpers shared by several rules ----
  /// A transpose, or a reshape when it only moves dims of size 1 (no data movement).
  Value permute(Value x, ArrayRef<int64_t> perm) {
    ArrayRef<int64_t> shape = CoreBuilder::shapeOf(x);
    SmallVector<int64_t> moved, permuted;
    for (int64_t p : perm) {
      permuted.push_back(shape[p]);
      if (shape[p] != 1)
        moved.push_back(p);
    }
    if (llvm::is_sorted(moved))
      return b.reshape(x, permuted);
    return b.transpose(x, perm);
  }
  Value zerosLike(Value v) { return b.splatLike(v, 0.0); }
  Value zeros(RankedTensorType t) { return b.splat(t, 0.0); }
  Value scalar(Value like, double v) { return b.scalarLike(like, v); }
  Value neg(Value x) { return b.unary(UnaryKind::Neg, x); }

  /// Sums `grad` (shaped like broadcast_in_dim's result) back onto its operand type.
  Value unbroadcast(Value grad, RankedTensorType xType, ArrayRef<int64_t> dims) {
    ArrayRef<int64_t> outShape = CoreBuilder::shapeOf(grad);
    SmallVector<int64_t> sumDims;
    for (int64_t d = 0; d < (int64_t)outShape.size(); ++d) {
      auto it = llvm::find(dims, d);
      if (it == dims.end() || (xType.getDimSize(it - dims.begin()) == 1 && outShape[d] != 1))
        sumDims.push_back(d);
    }
    if (!sumDims.empty())
      grad = b.reduce(ReduceKind::Sum, grad, sumDims, /*keepDims=*/false);
    return b.reshape(grad, xType.getShape());
  }

  /// Broadcasts `v` (x's shape with `reduced` dims removed) back to x's type.
  Value broadcastBack(Value v, RankedTensorType xType, ArrayRef<int64_t> reduced) {
    if (reduced.empty())
      return v;
    SmallVector<int64_t> kept;
    for (int64_t d = 0; d < xType.getRank(); ++d)
      if (!llvm::is_contained(reduced, d))
        kept.push_back(d);
    return b.createTyped<BroadcastInDimOp>(RankedTensorType::get(xType.getShape(),
                                                                 CoreBuilder::elementTypeOf(v)),
                                           v, kept);
  }

  /// Zero padding by per-dim low/high (>= 0).
  Value padZeros(Value x, ArrayRef<int64_t> low, ArrayRef<int64_t> high) {
    if (llvm::all_of(low, [](int64_t v) { return v == 0; }) &&
        llvm::all_of(high, [](int64_t v) { return v == 0; }))
      return x;
    return b.create<PadOp>(x, scalar(x, 0), low, high, PadMode::Constant);
  }
  Value padDim(Value x, int64_t dim, int64_t low, int64_t high) {
    SmallVector<int64_t> lo(CoreBuilder::rankOf(x), 0), hi(CoreBuilder::rankOf(x), 0);
    lo[dim] = low;
    hi[dim] = high;
    return padZeros(x, lo, hi);
  }

  /// The adjoint of a strided slice: `grad` placed at start + i * stride in a zero tensor of
  /// `shape` (pads, and for strides a reshape that interleaves zeros).
  Value unslice(Value grad, ArrayRef<int64_t> shape, ArrayRef<int64_t> start,
                ArrayRef<int64_t> stride) {
    SmallVector<int64_t> gShape(CoreBuilder::shapeOf(grad));
    if (llvm::is_contained(gShape, 0))
      return zeros(b.tensorType(shape, CoreBuilder::elementTypeOf(grad)));
    int64_t rank = shape.size();
    SmallVector<int64_t> low(rank), high(rank);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t n = gShape[d], s = stride[d];
      if (s > 1 && n > 1) {
        // [.., n, ..] -> [.., n, 1, ..] -> pad to [.., n, s, ..] -> [.., n*s, ..] -> first (n-1)s+1.
        SmallVector<int64_t> split(CoreBuilder::shapeOf(grad));
        split.insert(split.begin() + d + 1, 1);
        Value v = padDim(b.reshape(grad, split), d + 1, 0, s - 1);
        SmallVector<int64_t> merged(CoreBuilder::shapeOf(grad));
        merged[d] = n * s;
        grad = b.sliceDim(b.reshape(v, merged), d, 0, (n - 1) * s + 1);
      }
      low[d] = start[d];
      high[d] = shape[d] - start[d] - ((n - 1) * s + 1);
    }
    return padZeros(grad, low, high);
  }

  CoreBuilder b;
  Operation *op;

private:
  ArrayRef<Value> resultAdjoints;
  ArrayRef<bool> wanted;
  SmallVectorImpl<Value> &out;
};

/// Adds `v` into an optional accumulator.
Value accumulate(CoreBuilder &b, Value acc, Value v) { return acc ? b.add(acc, v) : v; }

} // namespace

//===--- elementwise ---------------------------------------------------------===//

LogicalResult UnaryOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!v.want(0))
    return success();
  CoreBuilder &b = v.b;
  Value g = v.g(), x = getX(), y = getResult();
  auto one = [&] { return v.scalar(x, 1.0); };
  auto sq = [&](Value a) { return b.mul(a, a); };
  Value dx;
  switch (getKind()) {
  case UnaryKind::Neg: dx = v.neg(g); break;
  case UnaryKind::Abs: dx = b.mul(g, b.unary(UnaryKind::Sign, x)); break;
  case UnaryKind::Exp: dx = b.mul(g, y); break;
  case UnaryKind::Log: dx = b.div(g, x); break;
  case UnaryKind::Sqrt: dx = b.div(b.mul(g, v.scalar(x, 0.5)), y); break;
  // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
  case UnaryKind::Rsqrt: dx = b.mul(b.mul(g, v.scalar(x, -0.5)), b.mul(y, sq(y))); break;
  case UnaryKind::Reciprocal: dx = v.neg(b.mul(g, sq(y))); break;
  case UnaryKind::Sin: dx = b.mul(g, b.unary(UnaryKind::Cos, x)); break;
  case UnaryKind::Cos: dx = v.neg(b.mul(g, b.unary(UnaryKind::Sin, x))); break;
  case UnaryKind::Tan: dx = b.mul(g, b.add(one(), sq(y))); break;
  case UnaryKind::Asin:
    dx = b.mul(g, b.unary(UnaryKind::Rsqrt, b.sub(one(), sq(x))));
    break;
  case UnaryKind::Acos:
    dx = v.neg(b.mul(g, b.unary(UnaryKind::Rsqrt, b.sub(one(), sq(x)))));
    break;
  case UnaryKind::Atan: dx = b.div(g, b.add(one(), sq(x))); break;
  case UnaryKind::Sinh: dx = b.mul(g, b.unary(UnaryKind::Cosh, x)); break;
  case UnaryKind::Cosh: dx = b.mul(g, b.unary(UnaryKind::Sinh, x)); break;
  case UnaryKind::Tanh: dx = b.mul(g, b.sub(one(), sq(y))); break;
  case UnaryKind::Asinh:
    dx = b.mul(g, b.unary(UnaryKind::Rsqrt, b.add(sq(x), one())));
    break;
  case UnaryKind::Acosh:
    dx = b.mul(g, b.unary(UnaryKind::Rsqrt, b.sub(sq(x), one())));
    break;
  case UnaryKind::Atanh: dx = b.div(g, b.sub(one(), sq(x))); break;
  case UnaryKind::Erf: {
    Value e = b.unary(UnaryKind::Exp, v.neg(sq(x)));
    dx = b.mul(g, b.mul(e, v.scalar(x, 2.0 / std::sqrt(M_PI))));
    break;
  }
  case UnaryKind::Sigmoid: dx = b.mul(g, b.mul(y, b.sub(one(), y))); break;
  case UnaryKind::Floor:
  case UnaryKind::Ceil:
  case UnaryKind::Round:
  case UnaryKind::Sign:
  case UnaryKind::Not:
    break; // piecewise constant
  }
  v.set(0, dx);
  return success();
}

LogicalResult BinaryOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                 ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  bool wx = v.want(0), wy = v.want(1);
  if (!wx && !wy)
    return success();
  CoreBuilder &b = v.b;
  Value g = v.g(), x = getLhs(), y = getRhs(), z = getResult();
  switch (getKind()) {
  case BinaryKind::Add:
    v.set(0, wx ? g : Value());
    v.set(1, wy ? g : Value());
    break;
  case BinaryKind::Sub:
    v.set(0, wx ? g : Value());
    v.set(1, wy ? v.neg(g) : Value());
    break;
  case BinaryKind::Mul:
    v.set(0, wx ? b.mul(g, y) : Value());
    v.set(1, wy ? b.mul(g, x) : Value());
    break;
  case BinaryKind::Div: {
    // z = x / y: dz/dx = 1/y, dz/dy = -x/y^2 = -z/y.
    Value gOverY = b.div(g, y);
    v.set(0, wx ? gOverY : Value());
    v.set(1, wy ? v.neg(b.mul(gOverY, z)) : Value());
    break;
  }
  case BinaryKind::Rem:
    // fmod: z = x - trunc(x/y) * y, and trunc(x/y) = (x - z) / y exactly where it is smooth.
    v.set(0, wx ? g : Value());
    v.set(1, wy ? v.neg(b.mul(g, b.div(b.sub(x, z), y))) : Value());
    break;
  case BinaryKind::Pow: {
    // As PyTorch: d/dx = y x^(y-1), taken as 0 where y == 0; d/dy = z log(x), taken as 0 where
    // x == 0 and y >= 0 (the limit from the right).
    if (wx) {
      Value d = b.mul(y, b.binary(BinaryKind::Pow, x, b.sub(y, v.scalar(y, 1))));
      d = b.select(b.compare(CompareKind::Eq, y, v.scalar(y, 0)), v.scalar(d, 0), d);
      v.set(0, b.mul(g, d));
    }
    if (wy) {
      Value d = b.mul(z, b.unary(UnaryKind::Log, x));
      Value limit = b.binary(BinaryKind::And, b.compare(CompareKind::Eq, x, v.scalar(x, 0)),
                             b.compare(CompareKind::Ge, y, v.scalar(y, 0)));
      d = b.select(limit, v.scalar(d, 0), d);
      v.set(1, b.mul(g, d));
    }
    break;
  }
  case BinaryKind::Max:
  case BinaryKind::Min: {
    // The winner takes the gradient; on ties each side gets half (as torch.maximum).
    CompareKind wins = getKind() == BinaryKind::Max ? CompareKind::Gt : CompareKind::Lt;
    Value share = b.select(b.compare(CompareKind::Eq, x, y), v.scalar(g, 0.5), v.scalar(g, 0));
    share = b.select(b.compare(wins, x, y), v.scalar(g, 1), share);
    Value gx = b.mul(g, share);
    v.set(0, wx ? gx : Value());
    v.set(1, wy ? b.sub(g, gx) : Value());
    break;
  }
  default:
    break; // logical and bitwise kinds: no float operands
  }
  return success();
}

LogicalResult SelectOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                 ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!v.want(1) && !v.want(2))
    return success();
  Value g = v.g(), zero = v.scalar(g, 0);
  if (v.want(1))
    v.set(1, v.b.select(getCond(), g, zero));
  if (v.want(2))
    v.set(2, v.b.select(getCond(), zero, g));
  return success();
}

LogicalResult CastOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                               ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  // Only float -> float casts carry a gradient; a cast to an integer type has no float result.
  if (v.want(0) && isFloat(getResult()))
    v.set(0, v.b.cast(v.g(), CoreBuilder::elementTypeOf(getX())));
  return success();
}

//===--- layout ------------------------------------------------------------===//

LogicalResult ReshapeOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                  ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (v.want(0))
    v.set(0, v.b.reshape(v.g(), CoreBuilder::shapeOf(getX())));
  return success();
}

LogicalResult TransposeOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (v.want(0))
    v.set(0, v.permute(v.g(), inversePermutation(getPerm())));
  return success();
}

LogicalResult BroadcastInDimOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                         ArrayRef<bool> wanted,
                                         SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (v.want(0))
    v.set(0, v.unbroadcast(v.g(), CoreBuilder::typeOf(getX()), getDims()));
  return success();
}

LogicalResult SliceOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (v.want(0))
    v.set(0, v.unslice(v.g(), CoreBuilder::shapeOf(getX()), getStart(), getStride()));
  return success();
}

LogicalResult ReverseOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                  ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (v.want(0))
    v.set(0, v.b.createTyped<ReverseOp>(v.g().getType(), v.g(), getDims()));
  return success();
}

LogicalResult ConcatOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                 ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  int64_t axis = getAxis(), offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = CoreBuilder::shapeOf(input)[axis];
    if (v.want(i))
      v.set(i, v.b.sliceDim(v.g(), axis, offset, offset + size));
    offset += size;
  }
  return success();
}

LogicalResult PadOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                              ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  CoreBuilder &b = v.b;
  Value g = v.g();
  ArrayRef<int64_t> shape = CoreBuilder::shapeOf(getX()), low = getLow(), high = getHigh();
  int64_t rank = shape.size();
  // The interior (where x lands) as a slice of the result.
  auto interior = [&](Value t) {
    SmallVector<int64_t> limit(rank), one(rank, 1);
    for (int64_t d = 0; d < rank; ++d)
      limit[d] = low[d] + shape[d];
    return b.create<SliceOp>(t, low, limit, one);
  };
  if (getMode() == PadMode::Constant) {
    Value gx = interior(g);
    if (v.want(0))
      v.set(0, gx);
    if (v.want(1)) {
      // Every result element outside the interior is the padding value.
      SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, rank));
      v.set(1, b.sub(b.reduce(ReduceKind::Sum, g, all, false),
                     b.reduce(ReduceKind::Sum, gx, all, false)));
    }
    return success();
  }
  if (!v.want(0))
    return success(); // the value operand is unused by the other modes
  // Reflect, edge and wrap pad each dim independently: result index i along d reads x at
  // source(i). Undo one dim at a time: the adjoint along d sums runs of the result onto x,
  // each run a slice that maps to x contiguously (reversed for reflect, collapsed for edge).
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = shape[d], lo = low[d], hi = high[d];
    if (!lo && !hi)
      continue;
    Value acc = b.sliceDim(g, d, lo, lo + n);
    // Adds result[start, start+len) along d onto x[to, to+len) (reversed: x[to+len-1 .. to]).
    auto place = [&](int64_t start, int64_t len, int64_t to, bool reversed) {
      Value s = b.sliceDim(g, d, start, start + len);
      if (reversed)
        s = b.createTyped<ReverseOp>(s.getType(), s, SmallVector<int64_t>{d});
      acc = b.add(acc, v.padDim(s, d, to, n - to - len));
    };
    // Adds result[start, start+len) along d, summed, onto x[to].
    auto collapse = [&](int64_t start, int64_t len, int64_t to) {
      Value s = b.reduce(ReduceKind::Sum, b.sliceDim(g, d, start, start + len), {d}, true);
      acc = b.add(acc, v.padDim(s, d, to, n - to - 1));
    };
    switch (getMode()) {
    case PadMode::Reflect:
      // result[lo-1-k] = x[1+k], result[lo+n+k] = x[n-2-k]
      if (lo)
        place(0, lo, 1, true);
      if (hi)
        place(lo + n, hi, n - 1 - hi, true);
      break;
    case PadMode::Edge:
      if (lo)
        collapse(0, lo, 0);
      if (hi)
        collapse(lo + n, hi, n - 1);
      break;
    case PadMode::Wrap: {
      // result[i] = x[(i - lo) mod n]: runs end where the source wraps around.
      auto runs = [&](int64_t from, int64_t to) {
        for (int64_t i = from; i < to;) {
          int64_t src = ((i - lo) % n + n) % n, len = std::min(n - src, to - i);
          place(i, len, src, false);
          i += len;
        }
      };
      runs(0, lo);
      runs(lo + n, lo + n + hi);
      break;
    }
    case PadMode::Constant:
      break;
    }
    g = acc;
  }
  v.set(0, g);
  return success();
}

LogicalResult DynamicSliceOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  // The update is clamped exactly as the slice was, so it lands where the slice read.
  if (v.want(0))
    v.set(0, v.b.create<DynamicUpdateSliceOp>(v.zerosLike(getX()), v.g(), getStarts()));
  return success();
}

LogicalResult DynamicUpdateSliceOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                             ArrayRef<bool> wanted,
                                             SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  Value g = v.g();
  if (v.want(0))
    v.set(0, v.b.create<DynamicUpdateSliceOp>(g, v.zerosLike(getUpdate()), getStarts()));
  if (v.want(1))
    v.set(1, v.b.create<DynamicSliceOp>(g, getStarts(), CoreBuilder::shapeOf(getUpdate())));
  return success();
}

//===--- indexing -----------------------------------------------------------===//

LogicalResult GatherOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                 ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!v.want(0))
    return success();
  CoreBuilder &b = v.b;
  // View x as [outer, A, inner] and the adjoint as [outer, I, inner]; scatter-add rows of the
  // adjoint, taken axis-major, at the indices.
  ArrayRef<int64_t> xShape = CoreBuilder::shapeOf(getX());
  int64_t axis = getAxis();
  int64_t outer = product(xShape.take_front(axis)), A = xShape[axis],
          inner = product(xShape.drop_front(axis + 1)),
          I = product(CoreBuilder::shapeOf(getIndices()));
  Value idx = b.reshape(getIndices(), {I, 1});
  Value updates = v.permute(b.reshape(v.g(), {outer, I, inner}), {1, 0, 2});
  Value zeros = v.zeros(b.tensorType({A, outer, inner}, CoreBuilder::elementTypeOf(getX())));
  Value gx = b.create<ScatterNDOp>(zeros, idx, updates, ScatterReduction::Add);
  v.set(0, b.reshape(v.permute(gx, {1, 0, 2}), xShape));
  return success();
}

LogicalResult GatherElementsOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                         ArrayRef<bool> wanted,
                                         SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (v.want(0))
    v.set(0, v.b.create<ScatterElementsOp>(v.zerosLike(getX()), getIndices(), v.g(), getAxis(),
                                           ScatterReduction::Add));
  return success();
}

/// Index tuples of a gather_nd/scatter_nd with `batchDims` leading batch dims rewritten to
/// address x reshaped to [prod(batch dims), rest...]: the flat batch number is prepended.
static Value flattenBatchIndices(CoreBuilder &b, Value indices, ArrayRef<int64_t> xShape,
                                 int64_t batchDims) {
  ArrayRef<int64_t> idxShape = CoreBuilder::shapeOf(indices);
  SmallVector<int64_t> tupleShape(idxShape.drop_back());
  Type i64 = b.builder().getI64Type();
  Value batch;
  int64_t stride = 1;
  for (int64_t d = batchDims - 1; d >= 0; --d) {
    Value term = b.mul(b.iota(tupleShape, i64, d), b.constantI64({stride}, {}));
    batch = batch ? b.add(batch, term) : term;
    stride *= xShape[d];
  }
  tupleShape.push_back(1);
  return b.concat({b.reshape(batch, tupleShape), b.cast(indices, i64)}, idxShape.size() - 1);
}

LogicalResult GatherNDOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                   ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!v.want(0))
    return success();
  CoreBuilder &b = v.b;
  ArrayRef<int64_t> xShape = CoreBuilder::shapeOf(getX());
  int64_t batchDims = getBatchDims();
  Value indices = getIndices();
  SmallVector<int64_t> flatShape(xShape);
  if (batchDims > 0) {
    indices = flattenBatchIndices(b, indices, xShape, batchDims);
    flatShape.assign(1, product(xShape.take_front(batchDims)));
    llvm::append_range(flatShape, xShape.drop_front(batchDims));
  }
  Value zeros = v.zeros(b.tensorType(flatShape, CoreBuilder::elementTypeOf(getX())));
  Value gx = b.create<ScatterNDOp>(zeros, indices, v.g(), ScatterReduction::Add);
  v.set(0, b.reshape(gx, xShape));
  return success();
}

/// For scatter with reduction None: which updates survive (the last write to an element wins,
/// as in the reference kernel). `scatter(t)` scatters a same-shaped tensor as the updates
/// into `into`; `gather(t)` reads an x-shaped tensor back at the update positions. Returns an
/// i1 tensor shaped like the updates.
template <class Scatter, class Gather>
static Value survivingUpdates(CoreBuilder &b, Value x, Value updates, Scatter scatter,
                              Gather gather, ArrayRef<int64_t> idShape) {
  Type i64 = b.builder().getI64Type();
  ArrayRef<int64_t> uShape = CoreBuilder::shapeOf(updates);
  // Each update gets a distinct id (constant along the trailing dims of a scatter_nd slice:
  // one write of a tuple covers them all).
  Value ids = b.reshape(b.iota({product(idShape)}, i64, 0), idShape);
  if (idShape != uShape)
    ids = b.createTyped<BroadcastInDimOp>(
        b.tensorType(uShape, i64), ids, llvm::to_vector(llvm::seq<int64_t>(0, idShape.size())));
  Value winners = scatter(b.splat(b.tensorType(CoreBuilder::shapeOf(x), i64), -1), ids);
  return b.compare(CompareKind::Eq, gather(winners), ids);
}

LogicalResult ScatterElementsOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                          ArrayRef<bool> wanted,
                                          SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  CoreBuilder &b = v.b;
  ScatterReduction r = getReduction();
  if (r != ScatterReduction::None && r != ScatterReduction::Add) {
    std::string reason =
        "scatter_elements with a " + stringifyScatterReduction(r).str() + " reduction";
    if (failed(v.noRuleFor(0, reason)) || failed(v.noRuleFor(2, reason)))
      return failure();
    return success();
  }
  Value g = v.g(), indices = getIndices();
  int64_t axis = getAxis();
  auto gatherAt = [&](Value t) { return b.create<GatherElementsOp>(t, indices, axis); };
  if (r == ScatterReduction::Add) {
    if (v.want(0))
      v.set(0, g);
    if (v.want(2))
      v.set(2, gatherAt(g));
    return success();
  }
  // None: overwritten elements of x get nothing; only the surviving write of each element
  // gets the adjoint.
  if (v.want(0))
    v.set(0, b.create<ScatterElementsOp>(g, indices, v.zerosLike(getUpdates()), axis,
                                         ScatterReduction::None));
  if (v.want(2)) {
    Value alive = survivingUpdates(
        b, getX(), getUpdates(),
        [&](Value into, Value ids) {
          return b.create<ScatterElementsOp>(into, indices, ids, axis, ScatterReduction::None);
        },
        gatherAt, CoreBuilder::shapeOf(getUpdates()));
    v.set(2, b.select(alive, gatherAt(g), v.scalar(g, 0)));
  }
  return success();
}

LogicalResult ScatterNDOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  CoreBuilder &b = v.b;
  ScatterReduction r = getReduction();
  if (r != ScatterReduction::None && r != ScatterReduction::Add) {
    std::string reason = "scatter_nd with a " + stringifyScatterReduction(r).str() + " reduction";
    if (failed(v.noRuleFor(0, reason)) || failed(v.noRuleFor(2, reason)))
      return failure();
    return success();
  }
  Value g = v.g(), indices = getIndices(), x = getX();
  ArrayRef<int64_t> idxShape = CoreBuilder::shapeOf(indices);
  ArrayRef<int64_t> tupleShape = idxShape.drop_back();
  ArrayRef<int64_t> xShape = CoreBuilder::shapeOf(x);
  int64_t depth = idxShape.back();
  // Reads an x-shaped tensor at the update positions. Tuples of length 0 address all of x
  // (gather_nd needs at least one index per tuple).
  auto gatherAt = [&](Value t) -> Value {
    if (depth == 0) {
      SmallVector<int64_t> uShape(tupleShape);
      llvm::append_range(uShape, xShape);
      SmallVector<int64_t> dims = llvm::to_vector(
          llvm::seq<int64_t>(tupleShape.size(), tupleShape.size() + xShape.size()));
      return b.createTyped<BroadcastInDimOp>(b.tensorType(uShape, CoreBuilder::elementTypeOf(t)),
                                             t, dims);
    }
    return b.create<GatherNDOp>(t, indices, 0);
  };
  if (r == ScatterReduction::Add) {
    if (v.want(0))
      v.set(0, g);
    if (v.want(2))
      v.set(2, gatherAt(g));
    return success();
  }
  if (v.want(0))
    v.set(0, b.create<ScatterNDOp>(g, indices, v.zerosLike(getUpdates()), ScatterReduction::None));
  if (v.want(2)) {
    Value alive = survivingUpdates(
        b, x, getUpdates(),
        [&](Value into, Value ids) {
          return b.create<ScatterNDOp>(into, indices, ids, ScatterReduction::None);
        },
        gatherAt, tupleShape);
    v.set(2, b.select(alive, gatherAt(g), v.scalar(g, 0)));
  }
  return success();
}

//===--- reductions and scans -----------------------------------------------===//

LogicalResult ReduceOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                 ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!v.want(0))
    return success();
  CoreBuilder &b = v.b;
  Value x = getX(), y = getResult();
  auto xType = CoreBuilder::typeOf(x);
  ArrayRef<int64_t> dims = getDims();
  Value g = v.g();
  auto back = [&](Value t) { return v.broadcastBack(t, xType, dims); };
  switch (getKind()) {
  case ReduceKind::Sum:
    v.set(0, back(g));
    break;
  case ReduceKind::Max:
  case ReduceKind::Min: {
    // Elements equal to the extreme share its adjoint equally.
    Value hit = b.compare(CompareKind::Eq, x, back(y));
    Value count = b.reduce(ReduceKind::Sum, b.cast(hit, xType.getElementType()), dims, false);
    v.set(0, b.select(hit, back(b.div(g, count)), v.scalar(x, 0)));
    break;
  }
  case ReduceKind::Prod: {
    // d/dx_i prod = product of the other elements, computed without dividing by zero: with no
    // zero in the group it is y / x_i; with exactly one zero, the zero element gets the product
    // of the non-zero ones and the rest 0; with more zeros everything is 0.
    Value zero = v.scalar(x, 0), one = v.scalar(x, 1);
    Value isZero = b.compare(CompareKind::Eq, x, zero);
    Value zeros = back(b.reduce(ReduceKind::Sum, b.cast(isZero, xType.getElementType()), dims, false));
    Value nonZeroProd = back(b.reduce(ReduceKind::Prod, b.select(isZero, one, x), dims, false));
    Value lone = b.binary(BinaryKind::And, isZero, b.compare(CompareKind::Eq, zeros, one));
    Value others = b.select(b.compare(CompareKind::Eq, zeros, zero), b.div(nonZeroProd, x),
                            b.select(lone, nonZeroProd, zero));
    v.set(0, b.mul(back(g), others));
    break;
  }
  }
  return success();
}

LogicalResult CumsumOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                 ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  // x_j feeds every y_i at or after it in scan order (strictly after when exclusive): the
  // adjoint is the same scan run the other way.
  if (v.want(0)) {
    auto op = v.b.createTyped<CumsumOp>(v.g().getType(), v.g(), (uint64_t)getDim(),
                                        getExclusive(), !getReverse());
    v.set(0, op);
  }
  return success();
}

LogicalResult TopKOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                               ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  // Only the values carry a gradient; they go back to where they were taken from.
  if (v.want(0) && v.g(0))
    v.set(0, v.b.create<ScatterElementsOp>(v.zerosLike(getX()), getIndices(), v.g(0), getDim(),
                                           ScatterReduction::Add));
  return success();
}

//===--- linear algebra and windows ------------------------------------------===//

LogicalResult MatmulOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                 ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  CoreBuilder &b = v.b;
  int64_t rank = CoreBuilder::rankOf(getLhs());
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(swap[rank - 1], swap[rank - 2]);
  Value g = v.g();
  if (v.want(0))
    v.set(0, b.create<MatmulOp>(g, v.permute(getRhs(), swap)));
  if (v.want(1))
    v.set(1, b.create<MatmulOp>(v.permute(getLhs(), swap), g));
  return success();
}

/// The gradients of q, k and v are one tcc.attention_grad (fused where the target has a
/// kernel, else decomposed by -tcc-decompose-attention). A differentiated bias needs the
/// scores' gradient itself: then the rule is written in core ops (buildAttentionGradCore).
LogicalResult AttentionOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                    ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  unsigned biasIndex = getMask() ? 4 : 3;
  bool wantBias = getBias() && v.want(biasIndex);
  if (!v.want(0) && !v.want(1) && !v.want(2) && !wantBias)
    return success();
  CoreBuilder &b = v.b;
  if (!wantBias) {
    Type placeholder = NoneType::get(getContext());
    Operation *grad = b.inferResultTypes(builder.create<AttentionGradOp>(
        b.location(), TypeRange{placeholder, placeholder, placeholder}, getQ(), getK(), getV(),
        getResult(), v.g(), getMask(), getBias(), getScaleAttr(), getCausalAttr(),
        getMaskedValueAttr()));
    for (unsigned i = 0; i < 3; ++i)
      if (v.want(i))
        v.set(i, grad->getResult(i));
    return success();
  }
  AttentionGrads grads = buildAttentionGradCore(b, attentionOperands(*this), v.g(), v.want(0),
                                                v.want(1), v.want(2), /*wantScores=*/true);
  v.set(0, grads.q);
  v.set(1, grads.k);
  v.set(2, grads.v);
  auto biasType = cast<RankedTensorType>(getBias().getType());
  int64_t r = CoreBuilder::rankOf(getQ());
  Value scores = grads.scores; // in q's type; an f32 bias of a 16-bit attention gets f32
  if (CoreBuilder::elementTypeOf(scores) != biasType.getElementType())
    scores = b.cast(scores, biasType.getElementType());
  v.set(biasIndex, v.unbroadcast(scores, biasType, llvm::to_vector(llvm::seq<int64_t>(0, r))));
  return success();
}

LogicalResult ConvOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                               ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  if (getChannelsLast())
    return emitOpError("a channels_last convolution (made by the layout pass, after autodiff) "
                       "has no gradient rule");
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  bool wantInput = v.want(0), wantWeight = v.want(1);
  if (!wantInput && !wantWeight)
    return success();
  CoreBuilder &b = v.b;
  Value x = getInput(), w = getWeight(), g = v.g();
  ArrayRef<int64_t> xShape = CoreBuilder::shapeOf(x), wShape = CoreBuilder::shapeOf(w),
                    gShape = CoreBuilder::shapeOf(g);
  int64_t rank = xShape.size(), spatial = rank - 2, groups = getGroups();
  int64_t N = xShape[0], C = xShape[1], O = wShape[0];
  if (llvm::is_contained(gShape, 0) || llvm::is_contained(xShape, 0)) {
    // An empty result reads nothing.
    v.set(0, wantInput ? v.zerosLike(x) : Value());
    v.set(1, wantWeight ? v.zerosLike(w) : Value());
    return success();
  }
  ArrayRef<int64_t> strides = getStrides(), padLow = getPadLow(), padHigh = getPadHigh(),
                    lhsDil = getLhsDilation(), rhsDil = getRhsDilation();
  SmallVector<int64_t> spatialDims = llvm::to_vector(llvm::seq<int64_t>(2, rank));
  auto withSpatial = [&](std::initializer_list<int64_t> lead, ArrayRef<int64_t> rest) {
    SmallVector<int64_t> s(lead);
    llvm::append_range(s, rest);
    return s;
  };
  auto permWith = [&](std::initializer_list<int64_t> lead) {
    SmallVector<int64_t> p(lead);
    for (int64_t d = (int64_t)lead.size(); d < (int64_t)lead.size() + spatial; ++d)
      p.push_back(d);
    return p;
  };

  if (wantInput) {
    // Per spatial dim the forward reads the dilated, padded input at q*s + k*rd. Its adjoint at
    // input position i (dilated position lo + i*ld) is a full correlation of the adjoint,
    // dilated by s, with the reversed kernel dilated by rd: a conv with lhs_dilation s, stride
    // ld (picking the non-hole positions) and padding that aligns output i with lo + i*ld.
    SmallVector<int64_t> low(spatial), high(spatial);
    for (int64_t d = 0; d < spatial; ++d) {
      int64_t in = xShape[d + 2], k = wShape[d + 2], out = gShape[d + 2];
      int64_t span = (k - 1) * rhsDil[d] + 1, dilatedG = (out - 1) * strides[d] + 1;
      low[d] = (k - 1) * rhsDil[d] - padLow[d];
      high[d] = (in - 1) * lhsDil[d] + span - dilatedG - low[d];
    }
    // Weight [O, C/g, K...] -> [C, O/g, K...] per group, kernel reversed.
    Value wt = b.reshape(w, withSpatial({groups, O / groups, C / groups}, wShape.drop_front(2)));
    wt = v.permute(wt, permWith({0, 2, 1}));
    wt = b.reshape(wt, withSpatial({C, O / groups}, wShape.drop_front(2)));
    wt = b.createTyped<ReverseOp>(wt.getType(), wt, spatialDims);
    Value gx = b.create<ConvOp>(g, wt, /*strides=*/lhsDil, low, high, /*lhs_dilation=*/strides,
                                /*rhs_dilation=*/rhsDil, groups);
    v.set(0, gx);
  }
  if (wantWeight) {
    // gw[o, c, k] = sum_{n, q} g[n, o, q] * in[n, c, q*s + k*rd]: a conv over the input with
    // the batch as channels and the adjoint as kernel; output position k moves by rd (stride),
    // kernel taps q by s (rhs dilation). Groups: batch = C/g, channels = (group, n).
    Value in = b.reshape(x, withSpatial({N, groups, C / groups}, xShape.drop_front(2)));
    in = v.permute(in, permWith({2, 1, 0}));
    in = b.reshape(in, withSpatial({C / groups, groups * N}, xShape.drop_front(2)));
    Value kernel = v.permute(g, permWith({1, 0}));
    SmallVector<int64_t> high(spatial);
    for (int64_t d = 0; d < spatial; ++d) {
      int64_t inSize = xShape[d + 2], k = wShape[d + 2], out = gShape[d + 2];
      int64_t padded = (inSize - 1) * lhsDil[d] + 1 + padLow[d] + padHigh[d];
      // Trailing positions the forward never reached would make extra outputs: crop them.
      int64_t excess = (padded - (out - 1) * strides[d] - 1) - (k - 1) * rhsDil[d];
      high[d] = padHigh[d] - excess;
    }
    Value gw = b.create<ConvOp>(in, kernel, /*strides=*/rhsDil, padLow, high, lhsDil,
                                /*rhs_dilation=*/strides, groups);
    v.set(1, v.permute(gw, permWith({1, 0})));
  }
  return success();
}

LogicalResult ReduceWindowOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!v.want(0))
    return success();
  CoreBuilder &b = v.b;
  Value x = getX(), y = getResult(), g = v.g();
  ArrayRef<int64_t> xShape = CoreBuilder::shapeOf(x), yShape = CoreBuilder::shapeOf(y);
  ArrayRef<int64_t> window = getWindow(), strides = getStrides(), padLow = getPadLow(),
                    padHigh = getPadHigh(), dilations = getDilations();
  int64_t rank = xShape.size();
  if (llvm::is_contained(yShape, 0) || llvm::is_contained(xShape, 0)) {
    v.set(0, v.zerosLike(x));
    return success();
  }
  ReduceKind kind = getKind();
  Type elem = CoreBuilder::elementTypeOf(x);
  double identity = kind == ReduceKind::Sum    ? 0.0
                    : kind == ReduceKind::Prod ? 1.0
                    : kind == ReduceKind::Max  ? CoreBuilder::lowestValue(elem)
                                               : CoreBuilder::highestValue(elem);
  // The window is unrolled into its taps: tap k reads the padded input as a strided slice
  // (start k*dilation, stride `strides`) shaped like the result; its adjoint goes back through
  // the slice. Taps are visited in scan order (row-major over the window).
  Value padded = x;
  SmallVector<int64_t> paddedShape(xShape);
  bool anyPad = false;
  for (int64_t d = 0; d < rank; ++d) {
    paddedShape[d] += padLow[d] + padHigh[d];
    anyPad |= padLow[d] || padHigh[d];
  }
  auto readsPadded = [&] {
    if (anyPad && padded == x)
      padded = b.create<PadOp>(x, v.scalar(x, identity), padLow, padHigh, PadMode::Constant);
    return padded;
  };
  // Counts and products over the window, for Prod (the same window attributes).
  Value zeroCount, nonZeroProd;
  if (kind == ReduceKind::Prod) {
    Value isZero = b.compare(CompareKind::Eq, x, v.scalar(x, 0));
    zeroCount = b.create<ReduceWindowOp>(ReduceKind::Sum, b.cast(isZero, elem), window, strides,
                                         padLow, padHigh, dilations);
    nonZeroProd = b.create<ReduceWindowOp>(ReduceKind::Prod,
                                           b.select(isZero, v.scalar(x, 1), x), window, strides,
                                           padLow, padHigh, dilations);
  }
  // Windows that tile the input (stride = window, or a single window, and no dilation: the
  // usual and the global pooling) do not overlap: the taps' adjoints interleave into
  // [O0, w0, O1, w1, ...] rather than being summed.
  bool tiles = llvm::all_of(llvm::seq<int64_t>(0, rank), [&](int64_t d) {
    return (strides[d] == window[d] || yShape[d] == 1) && dilations[d] == 1;
  });
  SmallVector<Value> contributions; // per tap, when the windows tile
  Value taken; // Max/Min: windows whose first extreme has been found
  Value acc;
  int64_t taps = product(window);
  for (int64_t t = 0; t < taps; ++t) {
    SmallVector<int64_t> start(rank), limit(rank);
    for (int64_t d = rank - 1, rest = t; d >= 0; --d) {
      int64_t k = rest % window[d];
      rest /= window[d];
      start[d] = k * dilations[d];
      limit[d] = start[d] + (yShape[d] - 1) * strides[d] + 1;
    }
    auto tapOf = [&] { return b.create<SliceOp>(readsPadded(), start, limit, strides); };
    Value contribution;
    switch (kind) {
    case ReduceKind::Sum:
      contribution = g;
      break;
    case ReduceKind::Max:
    case ReduceKind::Min: {
      Value hit = b.compare(CompareKind::Eq, tapOf(), y);
      Value first = taken ? b.binary(BinaryKind::And, hit, b.unary(UnaryKind::Not, taken)) : hit;
      if (t + 1 < taps)
        taken = taken ? b.binary(BinaryKind::Or, taken, hit) : hit;
      contribution = b.select(first, g, v.scalar(g, 0));
      break;
    }
    case ReduceKind::Prod: {
      Value xk = tapOf(), zero = v.scalar(x, 0), one = v.scalar(x, 1);
      Value lone = b.binary(BinaryKind::And, b.compare(CompareKind::Eq, xk, zero),
                            b.compare(CompareKind::Eq, zeroCount, one));
      Value others = b.select(b.compare(CompareKind::Eq, zeroCount, zero),
                              b.div(nonZeroProd, xk), b.select(lone, nonZeroProd, zero));
      contribution = b.mul(g, others);
      break;
    }
    }
    if (tiles)
      contributions.push_back(contribution);
    else
      acc = accumulate(b, acc, v.unslice(contribution, paddedShape, start, strides));
  }
  if (tiles) {
    SmallVector<int64_t> interleaved, full, merged, padHigh(rank, 0);
    for (int64_t d = 0; d < rank; ++d) {
      interleaved.append({yShape[d], 1});
      full.append({yShape[d], window[d]});
      merged.push_back(yShape[d] * window[d]);
      padHigh[d] = paddedShape[d] - merged[d];
    }
    // Tap t is row-major over the window: concatenate along w0, then w1 within, ...
    std::function<Value(int64_t, int64_t)> assemble = [&](int64_t d, int64_t base) -> Value {
      if (d == rank)
        return b.reshape(contributions[base], interleaved);
      SmallVector<Value> parts;
      for (int64_t k = 0; k < window[d]; ++k)
        parts.push_back(assemble(d + 1, base * window[d] + k));
      return b.concat(parts, 2 * d + 1);
    };
    Value tiled = kind == ReduceKind::Sum ? b.broadcastTo(b.reshape(g, interleaved), full)
                                          : assemble(0, 0);
    acc = v.padZeros(b.reshape(tiled, merged), SmallVector<int64_t>(rank, 0), padHigh);
  }
  if (anyPad) {
    SmallVector<int64_t> limit(rank), one(rank, 1);
    for (int64_t d = 0; d < rank; ++d)
      limit[d] = padLow[d] + xShape[d];
    acc = b.create<SliceOp>(acc, padLow, limit, one);
  }
  v.set(0, acc);
  return success();
}

} // namespace tcc

//===--- Collectives: each VJP is the collective's linear transpose (see TccOps.td) ---===//

namespace tcc {
namespace {

/// The adjoint of result 0, zeros where autodiff passed none: every rank of a group must take
/// part in the backward collective, whether or not its own adjoint happens to be zero.
Value adjointOrZeros(Vjp &v, Operation *op) {
  Value g = v.g();
  return g ? g : v.b.splatLike(op->getResult(0), 0.0);
}

/// Ranks holding the extreme (`hit`) share the summed adjoint `total` equally.
Value shareAmongHits(CoreBuilder &b, Value hit, Value total, ArrayAttr axes, Type element) {
  Value count = b.createTyped<AllReduceOp>(total.getType(), CollectiveReduceKind::Sum,
                                           b.cast(hit, element), axes);
  return b.select(hit, b.div(total, count), b.splatLike(total, 0.0));
}

bool wantsOperand(ArrayRef<bool> wanted, Operation *op) {
  return !wanted.empty() && wanted[0] && isa<FloatType>(CoreBuilder::elementTypeOf(op->getOperand(0)));
}

} // namespace

LogicalResult AllReduceOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                    ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!wantsOperand(wanted, *this))
    return success();
  CoreBuilder &b = v.b;
  Value g = adjointOrZeros(v, *this);
  Type type = getType();
  switch (getKind()) {
  case CollectiveReduceKind::Sum:
  case CollectiveReduceKind::Avg:
    v.set(0, b.createTyped<AllReduceOp>(type, getKind(), g, getAxes()));
    break;
  case CollectiveReduceKind::Max:
  case CollectiveReduceKind::Min: {
    Value total = b.createTyped<AllReduceOp>(type, CollectiveReduceKind::Sum, g, getAxes());
    Value hit = b.compare(CompareKind::Eq, getX(), getResult());
    v.set(0, shareAmongHits(b, hit, total, getAxes(), CoreBuilder::elementTypeOf(g)));
    break;
  }
  }
  return success();
}

LogicalResult AllGatherOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                    ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!wantsOperand(wanted, *this))
    return success();
  v.set(0, v.b.createTyped<ReduceScatterOp>(getX().getType(), CollectiveReduceKind::Sum,
                                            adjointOrZeros(v, *this), getDim(), getAxes()));
  return success();
}

LogicalResult ReduceScatterOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                        ArrayRef<bool> wanted,
                                        SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!wantsOperand(wanted, *this))
    return success();
  CoreBuilder &b = v.b;
  Type xType = getX().getType();
  auto gather = [&](Value t) { return b.createTyped<AllGatherOp>(xType, t, getDim(), getAxes()); };
  Value g = gather(adjointOrZeros(v, *this));
  switch (getKind()) {
  case CollectiveReduceKind::Sum:
    v.set(0, g);
    break;
  case CollectiveReduceKind::Avg:
    v.set(0, b.div(g, b.scalarLike(g, (double)getGroupSize())));
    break;
  case CollectiveReduceKind::Max:
  case CollectiveReduceKind::Min: {
    Value hit = b.compare(CompareKind::Eq, getX(), gather(getResult()));
    v.set(0, shareAmongHits(b, hit, g, getAxes(), CoreBuilder::elementTypeOf(g)));
    break;
  }
  }
  return success();
}

LogicalResult AllToAllOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                   ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!wantsOperand(wanted, *this))
    return success();
  v.set(0, v.b.createTyped<AllToAllOp>(getX().getType(), adjointOrZeros(v, *this),
                                       getConcatDim(), getSplitDim(), getAxes()));
  return success();
}

LogicalResult BroadcastOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                                    ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!wantsOperand(wanted, *this))
    return success();
  // Only the root's x reaches the results: it gets the sum of every rank's adjoint.
  CoreBuilder &b = v.b;
  Value total = b.createTyped<AllReduceOp>(getType(), CollectiveReduceKind::Sum,
                                           adjointOrZeros(v, *this), getAxes());
  Value position = b.createTyped<AxisIndexOp>(b.tensorType({}, b.builder().getI64Type()), getAxes());
  Value isRoot = b.compare(CompareKind::Eq, position,
                           b.constantI64({(int64_t)getRoot()}, {}));
  v.set(0, b.select(isRoot, total, b.splatLike(total, 0.0)));
  return success();
}

LogicalResult SendOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                               ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!wantsOperand(wanted, *this))
    return success();
  // The peer's recv sends its adjoint back (RecvOp::buildVjp).
  v.set(0, v.b.createTyped<RecvOp>(getX().getType(), getPeer(), getAxis(), getTag()));
  return success();
}

LogicalResult RecvOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultAdjoints,
                               ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandAdjoints) {
  Vjp v(builder, *this, resultAdjoints, wanted, operandAdjoints);
  if (!isa<FloatType>(CoreBuilder::elementTypeOf(getResult())))
    return success();
  v.b.builder().create<SendOp>(getLoc(), adjointOrZeros(v, *this), getPeer(), getAxis(), getTag());
  return success();
}

} // namespace tcc
