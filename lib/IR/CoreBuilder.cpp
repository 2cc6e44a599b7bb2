//===- CoreBuilder.cpp - Convenience construction of tcc core ops ---------===//
#include "tcc/IR/CoreBuilder.h"
#include "tcc/Support/Tensor.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;

namespace tcc {

RankedTensorType CoreBuilder::typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

ArrayRef<int64_t> CoreBuilder::shapeOf(Value v) {
  RankedTensorType t = typeOf(v);
  if (!t.hasStaticShape())
    throw Error("this does not take symbolic dims yet (got " + shapeString(symbolicShape(t)) +
                "): fix the model's sizes (tcc compile --input-shape)");
  return t.getShape();
}

RankedTensorType CoreBuilder::tensorType(ArrayRef<int64_t> shape, Type elementType) {
  return RankedTensorType::get(shape, elementType);
}



/// Collects the diagnostics emitted while it lives, to rethrow them as tcc::Error.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext *ctx)
      : handler(ctx, [this](Diagnostic &d) {
          if (!text.empty())
            text += "; ";
          text += d.str();
          return success();
        }) {}
  std::string text;

private:
  ScopedDiagnosticHandler handler;
};

static std::string opName(Operation *op) { return op->getName().getStringRef().str(); }

Operation *CoreBuilder::inferResultTypes(Operation *op) {
  auto iface = llvm::cast<InferTypeOpInterface>(op);
  SmallVector<Type> types;
  DiagnosticCollector diags(op->getContext());
  if (failed(iface.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                    op->getAttrDictionary(), op->getPropertiesStorage(),
                                    op->getRegions(), types))) {
    std::string name = opName(op);
    op->erase();
    throw Error(name + ": " + (diags.text.empty() ? "invalid operands" : diags.text));
  }
  for (auto [result, type] : llvm::zip(op->getResults(), types))
    result.setType(type);
  verifyOrThrow(op);
  return op;
}

void CoreBuilder::verifyOrThrow(Operation *op) {
  DiagnosticCollector diags(op->getContext());
  if (failed(mlir::verify(op, /*verifyRecursively=*/false))) {
    std::string name = opName(op);
    op->erase();
    throw Error(name + ": " + diags.text);
  }
}

// ---- Constants ----

Value CoreBuilder::constant(DenseElementsAttr value) {
  return b.create<ConstantOp>(loc, value.getType(), value);
}

Value CoreBuilder::splat(RankedTensorType type, double value) {
  if (hasSymbolicDims(type)) // a constant has a size: a 0-d one, broadcast
    return broadcastToDims(splat(RankedTensorType::get({}, type.getElementType()), value),
                           symbolicShape(type));
  Type e = type.getElementType();
  Attribute element;
  if (auto f = dyn_cast<FloatType>(e)) {
    element = b.getFloatAttr(f, value);
  } else if (e.isInteger(1)) {
    element = b.getIntegerAttr(e, APInt(1, value != 0));
  } else {
    // Saturated into the type's range (NaN: 0): a double outside it, +-inf say (an old Clip's
    // default bounds on an integer input, which the importer's fuzzer reached), has no value.
    auto i = llvm::cast<IntegerType>(e);
    unsigned w = i.getWidth();
    APInt bits;
    if (std::isnan(value))
      bits = APInt(w, 0);
    else if (i.isUnsigned())
      bits = value <= 0 ? APInt(w, 0)
             : value >= std::ldexp(1.0, (int)w) ? APInt::getMaxValue(w)
                                                : APInt(w, (uint64_t)value);
    else
      bits = value < -std::ldexp(1.0, (int)w - 1)  ? APInt::getSignedMinValue(w)
             : value >= std::ldexp(1.0, (int)w - 1) ? APInt::getSignedMaxValue(w)
                                                    : APInt(w, (int64_t)value, /*isSigned=*/true);
    element = b.getIntegerAttr(e, bits);
  }
  return constant(SplatElementsAttr::get(type, element));
}

Value CoreBuilder::scalarLike(Value like, double value) {
  return splat(tensorType({}, elementTypeOf(like)), value);
}

Value CoreBuilder::splatLike(Value like, double value) { return splat(typeOf(like), value); }

Value CoreBuilder::constantI64(ArrayRef<int64_t> values, ArrayRef<int64_t> shape) {
  auto type = tensorType(shape, b.getI64Type());
  return constant(DenseElementsAttr::get(type, values));
}

Value CoreBuilder::symInts(ArrayRef<SymExpr> values, ArrayRef<int64_t> shape) {
  if (auto constants = staticDims(values))
    return constantI64(*constants, shape);
  std::vector<std::string> texts;
  for (const SymExpr &e : values)
    texts.push_back(e.str());
  SmallVector<StringRef> refs(texts.begin(), texts.end());
  return createTyped<SymIntsOp>(tensorType(shape, b.getI64Type()), b.getStrArrayAttr(refs));
}

// ---- Elementwise ----

FailureOr<SmallVector<int64_t>> CoreBuilder::broadcastShapes(ArrayRef<int64_t> a,
                                                             ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}

FailureOr<SymShape> CoreBuilder::broadcastDims(ArrayRef<SymExpr> a, ArrayRef<SymExpr> b) {
  size_t rank = std::max(a.size(), b.size());
  SymShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    SymExpr da = i < rank - a.size() ? SymExpr(1) : a[i - (rank - a.size())];
    SymExpr db = i < rank - b.size() ? SymExpr(1) : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}

SmallVector<Value> CoreBuilder::broadcastAll(ArrayRef<Value> values) {
  SymShape shape;
  for (Value v : values) {
    auto s = broadcastDims(shape, dimsOf(v));
    if (failed(s))
      throw Error("shapes " + shapeString(shape) + " and " + shapeString(dimsOf(v)) +
                  " cannot be broadcast together");
    shape = *s;
  }
  SmallVector<Value> out;
  for (Value v : values)
    out.push_back(broadcastToDims(v, shape));
  return out;
}

Value CoreBuilder::unary(UnaryKind kind, Value x) {
  return createTyped<UnaryOp>(x.getType(), kind, x);
}

Value CoreBuilder::binary(BinaryKind kind, Value lhs, Value rhs) {
  auto v = broadcastAll({lhs, rhs});
  if (elementTypeOf(v[0]) != elementTypeOf(v[1]))
    throw Error("binary operands differ in element type");
  return createTyped<BinaryOp>(v[0].getType(), kind, v[0], v[1]);
}

Value CoreBuilder::compare(CompareKind kind, Value lhs, Value rhs) {
  auto v = broadcastAll({lhs, rhs});
  if (elementTypeOf(v[0]) != elementTypeOf(v[1]))
    throw Error("compared operands differ in element type");
  return create<CompareOp>(kind, v[0], v[1]);
}

Value CoreBuilder::select(Value cond, Value a, Value bv) {
  auto v = broadcastAll({cond, a, bv});
  return create<SelectOp>(v[0], v[1], v[2]);
}

Value CoreBuilder::cast(Value x, Type elementType) {
  if (elementTypeOf(x) == elementType)
    return x;
  return createTyped<CastOp>(withElementType(typeOf(x), elementType), x);
}

Value CoreBuilder::saturatingCast(Value x, Type to) {
  Value clamped = max(x, scalarLike(x, lowestValue(to)));
  return cast(min(clamped, scalarLike(x, highestValue(to))), to);
}

double CoreBuilder::lowestValue(Type t) {
  if (isa<FloatType>(t))
    return -std::numeric_limits<double>::infinity();
  auto i = llvm::cast<IntegerType>(t);
  if (i.getWidth() == 1 || i.isUnsigned())
    return 0;
  return -std::ldexp(1.0, (int)i.getWidth() - 1);
}

double CoreBuilder::highestValue(Type t) {
  if (isa<FloatType>(t))
    return std::numeric_limits<double>::infinity();
  auto i = llvm::cast<IntegerType>(t);
  if (i.getWidth() == 1)
    return 1;
  return i.isUnsigned() ? std::ldexp(1.0, (int)i.getWidth()) - 1
                        : std::ldexp(1.0, (int)i.getWidth() - 1) - 1;
}

// ---- Shapes ----

Value CoreBuilder::broadcastTo(Value x, ArrayRef<int64_t> shape) {
  return broadcastToDims(x, toSymShape(shape));
}

Value CoreBuilder::broadcastToDims(Value x, ArrayRef<SymExpr> shape) {
  SymShape in = dimsOf(x);
  if (llvm::equal(in, shape))
    return x;
  if (in.size() > shape.size())
    throw Error("cannot broadcast a rank-" + std::to_string(in.size()) + " value to rank " +
                std::to_string(shape.size()));
  int64_t offset = shape.size() - in.size();
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < (int64_t)in.size(); ++i) {
    if (in[i] != 1 && in[i] != shape[offset + i])
      throw Error("cannot broadcast " + shapeString(in) + " to " + shapeString(shape));
    dims.push_back(offset + i);
  }
  return createTyped<BroadcastInDimOp>(tensorTypeWithDims(shape, elementTypeOf(x)), x, dims);
}

Value CoreBuilder::reshape(Value x, ArrayRef<int64_t> shape) {
  return reshapeToDims(x, toSymShape(shape));
}

Value CoreBuilder::reshapeToDims(Value x, ArrayRef<SymExpr> dims) {
  if (llvm::equal(dimsOf(x), dims))
    return x;
  return createTyped<ReshapeOp>(tensorTypeWithDims(dims, elementTypeOf(x)), x);
}

Value CoreBuilder::transpose(Value x, ArrayRef<int64_t> perm) {
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return x;
  return create<TransposeOp>(x, perm);
}

Value CoreBuilder::sliceDim(Value x, int64_t dim, int64_t start, int64_t limit, int64_t stride) {
  int64_t rank = rankOf(x);
  ArrayRef<int64_t> sizes = typeOf(x).getShape();
  SmallVector<int64_t> starts(rank, 0), limits(sizes), strides(rank, 1);
  for (int64_t &l : limits)
    if (ShapedType::isDynamic(l))
      l = -1; // a symbolic dim is sliced whole
  if (ShapedType::isDynamic(sizes[dim]))
    throw Error("cannot slice symbolic dim " + std::to_string(dim) + " (" +
                dimsOf(x)[dim].str() + ") at fixed bounds");
  starts[dim] = start;
  limits[dim] = limit;
  strides[dim] = stride;
  if (start == 0 && limit == sizes[dim] && stride == 1)
    return x;
  return create<SliceOp>(x, starts, limits, strides);
}

Value CoreBuilder::concat(ValueRange xs, int64_t axis) {
  if (xs.size() == 1)
    return xs.front();
  return create<ConcatOp>(xs, axis);
}

Value CoreBuilder::iota(ArrayRef<int64_t> shape, Type elementType, int64_t dim) {
  return iotaOfDims(toSymShape(shape), elementType, dim);
}

Value CoreBuilder::iotaOfDims(ArrayRef<SymExpr> dims, Type elementType, int64_t dim) {
  return createTyped<IotaOp>(tensorTypeWithDims(dims, elementType), (uint64_t)dim);
}

// ---- Reductions and products ----

Value CoreBuilder::reduce(ReduceKind kind, Value x, ArrayRef<int64_t> dims, bool keepDims) {
  SmallVector<int64_t> sorted(dims);
  llvm::sort(sorted);
  Value r = create<ReduceOp>(kind, x, sorted);
  if (!keepDims)
    return r;
  SymShape shape = dimsOf(x);
  for (int64_t d : sorted)
    shape[d] = 1;
  return reshapeToDims(r, shape);
}

Value CoreBuilder::matmul(Value a, Value bv) {
  bool aVector = rankOf(a) == 1, bVector = rankOf(bv) == 1;
  if (aVector)
    a = reshapeToDims(a, SymShape{1, dimsOf(a)[0]});
  if (bVector)
    bv = reshapeToDims(bv, SymShape{dimsOf(bv)[0], 1});
  SymShape sa = dimsOf(a), sb = dimsOf(bv);
  auto batch = broadcastDims(ArrayRef<SymExpr>(sa).drop_back(2),
                             ArrayRef<SymExpr>(sb).drop_back(2));
  if (failed(batch))
    throw Error("matmul batch dims cannot be broadcast together");
  SymShape fa(*batch), fb(*batch);
  fa.insert(fa.end(), {sa[sa.size() - 2], sa.back()});
  fb.insert(fb.end(), {sb[sb.size() - 2], sb.back()});
  Value r = create<MatmulOp>(broadcastToDims(a, fa), broadcastToDims(bv, fb));
  SymShape shape(*batch);
  if (!aVector)
    shape.push_back(sa[sa.size() - 2]);
  if (!bVector)
    shape.push_back(sb.back());
  return reshapeToDims(r, shape);
}

std::pair<Value, Value> CoreBuilder::topk(Value x, int64_t dim, int64_t k, bool largest) {
  Type placeholder = NoneType::get(context());
  Operation *op = inferResultTypes(
      b.create<TopKOp>(loc, placeholder, placeholder, x, dim, k, largest));
  return {op->getResult(0), op->getResult(1)};
}

} // namespace tcc
