//===- TccOps.cpp - Verifiers, result-type inference and folders ------------===//
//
// Each core op states its invariants here once: the result type is inferred from operands and
// attributes where it can be (and the generated verifier checks it), otherwise a verifier
// checks the given result type. Folders are the cheap algebraic identities; evaluating ops on
// constants is the constant-folding pass's job (it uses the reference kernels).
//
//===----------------------------------------------------------------------===//
#include "tcc/IR/TccDialect.h"
#include "tcc/Support/AttentionShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace tcc;

namespace {

RankedTensorType tensorTypeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Formats a list of integers as "[a, b, c]" for diagnostics.
std::string listToString(ArrayRef<int64_t> values) {
  std::string s = "[";
  llvm::interleave(values, [&](int64_t v) { s += std::to_string(v); }, [&] { s += ", "; });
  return s + "]";
}

/// Checks that `dims` are valid, unique dims of a rank-`rank` tensor.
LogicalResult checkDims(std::optional<Location> loc, ArrayRef<int64_t> dims, int64_t rank,
                        StringRef what, bool sorted = false) {
  llvm::SmallSet<int64_t, 8> seen;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d < 0 || d >= rank)
      return emitOptionalError(loc, what, " ", d, " is out of range for rank ", rank);
    if (!seen.insert(d).second)
      return emitOptionalError(loc, what, " ", d, " appears twice");
    if (sorted && i > 0 && dims[i - 1] > d)
      return emitOptionalError(loc, what, " must be sorted, got ", listToString(dims));
  }
  return success();
}

LogicalResult checkSize(std::optional<Location> loc, ArrayRef<int64_t> attr, int64_t rank,
                        StringRef name) {
  if ((int64_t)attr.size() != rank)
    return emitOptionalError(loc, name, " has ", attr.size(), " entries, expected ", rank);
  return success();
}

bool isFloatTensor(Type t) { return isa<FloatType>(getElementTypeOrSelf(t)); }
bool isBoolTensor(Type t) { return getElementTypeOrSelf(t).isInteger(1); }
bool isUnsignedTensor(Type t) { return getElementTypeOrSelf(t).isUnsignedInteger(); }

DenseElementsAttr constantOf(Attribute a) { return dyn_cast_if_present<DenseElementsAttr>(a); }

// Shape functions compute over SymExpr, which throws std::overflow_error when sizes pass int64
// (a corrupt model); MLIR's parser and verifier call them without exception handling, so each
// one that does arithmetic catches it and reports "sizes out of range".

/// `type` with its dims replaced (element type kept).
RankedTensorType withDims(RankedTensorType type, ArrayRef<SymExpr> dims) {
  return tensorTypeWithDims(dims, type.getElementType());
}

/// Symbolic dims reach only ops whose shape functions are written over SymExpr; the others
/// (their sizes are attributes, or they have no symbolic kernels yet) refuse them.
LogicalResult requireStaticShapes(std::optional<Location> loc, StringRef op, ValueRange values) {
  for (Value v : values)
    if (hasSymbolicDims(v.getType()))
      return emitOptionalError(loc, op, " does not take symbolic dims yet, got ", v.getType(),
                               ": fix the model's sizes (tcc compile --input-shape)");
  return success();
}

} // namespace

//===--- constant -----------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto type = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type)
    return emitOptionalError(loc, "constant value must be a ranked tensor");
  types.push_back(type);
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===--- sym_ints -----------------------------------------------------------===//

LogicalResult SymIntsOp::verify() {
  auto t = getType();
  if (!t.hasStaticShape() || t.getRank() > 1)
    return emitOpError("result must be a static 0-d or 1-d tensor, got ") << t;
  if ((int64_t)getValues().size() != t.getNumElements())
    return emitOpError("has ") << getValues().size() << " values for " << t.getNumElements()
                               << " elements";
  for (Attribute a : getValues()) {
    std::string error;
    if (!SymExpr::parse(cast<StringAttr>(a).getValue(), &error))
      return emitOpError("value '") << cast<StringAttr>(a).getValue() << "': " << error;
  }
  return success();
}

std::vector<SymExpr> SymIntsOp::getExprs() {
  std::vector<SymExpr> out;
  for (Attribute a : getValues())
    out.push_back(*SymExpr::parse(cast<StringAttr>(a).getValue()));
  return out;
}

//===--- unary / binary / compare / select / cast -------------------------------===//

LogicalResult UnaryOp::verify() {
  Type t = getX().getType();
  switch (getKind()) {
  case UnaryKind::Not:
    if (isFloatTensor(t))
      return emitOpError("'not' needs a bool or integer operand");
    return success();
  case UnaryKind::Neg:
  case UnaryKind::Abs:
  case UnaryKind::Sign:
    if (isBoolTensor(t))
      return emitOpError("'") << stringifyUnaryKind(getKind()) << "' needs a numeric operand";
    return success();
  default:
    if (!isFloatTensor(t))
      return emitOpError("'") << stringifyUnaryKind(getKind()) << "' needs a float operand";
    return success();
  }
}

LogicalResult BinaryOp::verify() {
  Type t = getLhs().getType();
  switch (getKind()) {
  case BinaryKind::And:
  case BinaryKind::Or:
  case BinaryKind::Xor:
    if (isFloatTensor(t))
      return emitOpError("'") << stringifyBinaryKind(getKind()) << "' needs bool or integer operands";
    return success();
  case BinaryKind::ShiftLeft:
  case BinaryKind::ShiftRight:
    if (!isUnsignedTensor(t))
      return emitOpError("shifts need unsigned integer operands");
    return success();
  default:
    if (isBoolTensor(t))
      return emitOpError("'") << stringifyBinaryKind(getKind()) << "' needs numeric operands";
    return success();
  }
}

OpFoldResult BinaryOp::fold(FoldAdaptor adaptor) {
  // x + 0, x - 0, x * 1 and x / 1 for splat constants.
  auto rhs = constantOf(adaptor.getRhs());
  if (!rhs || !rhs.isSplat())
    return {};
  // Floats compare bitwise: x + (-0.0) is x, but x + 0.0 turns -0.0 into +0.0.
  auto isSplatOf = [&](double v) {
    Type e = rhs.getElementType();
    if (auto f = dyn_cast<FloatType>(e)) {
      APFloat want(v);
      bool lost;
      want.convert(f.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      return rhs.getSplatValue<APFloat>().bitwiseIsEqual(want);
    }
    if (e.isInteger(1))
      return false;
    return rhs.getSplatValue<APInt>().getSExtValue() == (int64_t)v;
  };
  switch (getKind()) {
  case BinaryKind::Add:
    if (isSplatOf(-0.0))
      return getLhs();
    break;
  case BinaryKind::Sub:
    if (isSplatOf(0.0))
      return getLhs();
    break;
  case BinaryKind::Mul:
  case BinaryKind::Div:
    if (isSplatOf(1.0))
      return getLhs();
    break;
  default:
    break;
  }
  return {};
}

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(withElementType(tensorTypeOf(adaptor.getLhs()), IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto c = tensorTypeOf(adaptor.getCond()), a = tensorTypeOf(adaptor.getOnTrue()),
       b = tensorTypeOf(adaptor.getOnFalse());
  if (a != b)
    return emitOptionalError(loc, "select branches differ in type: ", a, " vs ", b);
  if (symbolicShape(c) != symbolicShape(a))
    return emitOptionalError(loc, "select condition shape ", c, " differs from ", a);
  types.push_back(a);
  return success();
}

LogicalResult CastOp::verify() {
  if (symbolicShape(getX()) != symbolicShape(getType()))
    return emitOpError("changes the shape from ") << getX().getType() << " to " << getType();
  return success();
}

LogicalResult BitcastOp::verify() {
  if (symbolicShape(getX()) != symbolicShape(getType()))
    return emitOpError("changes the shape from ") << getX().getType() << " to " << getType();
  auto storageBits = [](Type t) {
    unsigned w = t.getIntOrFloatBitWidth();
    return w == 1 ? 8u : w;
  };
  Type from = tensorTypeOf(getX()).getElementType(), to = getType().getElementType();
  if (storageBits(from) != storageBits(to))
    return emitOpError("needs element types of one width, got ") << from << " (" << storageBits(from)
           << " bits) and " << to << " (" << storageBits(to) << " bits)";
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getX().getType() == getType())
    return getX();
  return {};
}

//===--- layout ------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  try {
    auto in = tensorTypeOf(getX());
    if (in.getElementType() != getType().getElementType())
      return emitOpError("changes the element type");
    SymExpr from = productOf(symbolicShape(in)), to = productOf(symbolicShape(getType()));
    if (from != to)
      return emitOpError("changes the element count from ") << from.str() << " to " << to.str();
    return success();
  } catch (const std::exception &e) {
    return emitOpError("sizes out of range: ") << e.what();
  }
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  if (auto c = constantOf(adaptor.getX()))
    return c.reshape(getType());
  // reshape(reshape(x)) -> reshape(x)
  if (auto inner = getX().getDefiningOp<ReshapeOp>()) {
    getXMutable().assign(inner.getX());
    return getResult();
  }
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  try {
    auto t = tensorTypeOf(adaptor.getX());
    ArrayRef<int64_t> perm = adaptor.getPerm();
    if (failed(checkSize(loc, perm, t.getRank(), "perm")) ||
        failed(checkDims(loc, perm, t.getRank(), "perm entry")))
      return failure();
    SymShape dims = symbolicShape(t), shape;
    for (int64_t p : perm)
      shape.push_back(dims[p]);
    types.push_back(withDims(t, shape));
    return success();
  } catch (const std::exception &e) {
    return emitOptionalError(loc, "sizes out of range: ", e.what());
  }
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  if (llvm::equal(getPerm(), llvm::seq<int64_t>(0, getPerm().size())))
    return getX();
  return {};
}

LogicalResult BroadcastInDimOp::verify() {
  try {
    auto in = tensorTypeOf(getX());
    auto out = getType();
    if (in.getElementType() != out.getElementType())
      return emitOpError("changes the element type");
    ArrayRef<int64_t> dims = getDims();
    SymShape inDims = symbolicShape(in), outDims = symbolicShape(out);
    if ((int64_t)dims.size() != in.getRank())
      return emitOpError("dims has ") << dims.size() << " entries, expected " << in.getRank();
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0 || dims[i] >= out.getRank())
        return emitOpError("dims entry ") << dims[i] << " is out of range for rank " << out.getRank();
      if (i > 0 && dims[i] <= dims[i - 1])
        return emitOpError("dims must be strictly increasing");
      const SymExpr &inSize = inDims[i], &outSize = outDims[dims[i]];
      if (inSize != 1 && inSize != outSize)
        return emitOpError("operand dim ") << i << " of size " << inSize.str()
                                           << " cannot broadcast to size " << outSize.str();
    }
    return success();
  } catch (const std::exception &e) {
    return emitOpError("sizes out of range: ") << e.what();
  }
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  if (auto c = constantOf(adaptor.getX()); c && c.isSplat())
    return SplatElementsAttr::get(getType(), c.getSplatValue<Attribute>());
  return {};
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  try {
    auto t = tensorTypeOf(adaptor.getX());
    int64_t rank = t.getRank();
    if (failed(checkSize(loc, adaptor.getStart(), rank, "start")) ||
        failed(checkSize(loc, adaptor.getLimit(), rank, "limit")) ||
        failed(checkSize(loc, adaptor.getStride(), rank, "stride")))
      return failure();
    SymShape dims = symbolicShape(t), shape;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t start = adaptor.getStart()[d], limit = adaptor.getLimit()[d],
              stride = adaptor.getStride()[d];
      if (stride < 1)
        return emitOptionalError(loc, "stride must be >= 1, got ", stride, " in dim ", d);
      if (!dims[d].isConstant()) {
        // A symbolic dim is taken whole: its limit attribute is -1 (its size is not a number).
        if (start != 0 || limit != -1 || stride != 1)
          return emitOptionalError(loc, "symbolic dim ", d, " (", dims[d].str(),
                                   ") must be sliced whole (start 0, limit -1, stride 1)");
        shape.push_back(dims[d]);
        continue;
      }
      if (start < 0 || limit > t.getDimSize(d) || start > limit)
        return emitOptionalError(loc, "slice [", start, ", ", limit, ") is out of range for dim ", d,
                                 " of size ", t.getDimSize(d));
      shape.push_back((limit - start + stride - 1) / stride);
    }
    types.push_back(withDims(t, shape));
    return success();
  } catch (const std::exception &e) {
    return emitOptionalError(loc, "sizes out of range: ", e.what());
  }
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getX().getType() == getType() && llvm::all_of(getStride(), [](int64_t s) { return s == 1; }))
    return getX();
  return {};
}

LogicalResult ReverseOp::verify() {
  return checkDims(getLoc(), getDims(), tensorTypeOf(getX()).getRank(), "dims entry");
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  try {
    if (adaptor.getInputs().empty())
      return emitOptionalError(loc, "concat needs at least one input");
    auto first = tensorTypeOf(adaptor.getInputs().front());
    int64_t axis = adaptor.getAxis();
    if (axis < 0 || axis >= first.getRank())
      return emitOptionalError(loc, "axis ", axis, " is out of range for rank ", first.getRank());
    SymShape firstDims = symbolicShape(first), shape = firstDims;
    shape[axis] = 0;
    for (Value v : adaptor.getInputs()) {
      auto t = tensorTypeOf(v);
      if (t.getElementType() != first.getElementType() || t.getRank() != first.getRank())
        return emitOptionalError(loc, "concat inputs differ in element type or rank: ", first,
                                 " vs ", t);
      SymShape dims = symbolicShape(t);
      for (int64_t d = 0; d < t.getRank(); ++d)
        if (d != axis && dims[d] != firstDims[d])
          return emitOptionalError(loc, "concat inputs differ in dim ", d, ": ", first, " vs ", t);
      shape[axis] += dims[axis];
    }
    types.push_back(withDims(first, shape));
    return success();
  } catch (const std::exception &e) {
    return emitOptionalError(loc, "sizes out of range: ", e.what());
  }
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  try {
    auto t = tensorTypeOf(adaptor.getX());
    auto v = tensorTypeOf(adaptor.getValue());
    if (v.getRank() != 0 || v.getElementType() != t.getElementType())
      return emitOptionalError(loc, "padding value must be a 0-d tensor of ", t.getElementType());
    if (failed(checkSize(loc, adaptor.getLow(), t.getRank(), "low")) ||
        failed(checkSize(loc, adaptor.getHigh(), t.getRank(), "high")))
      return failure();
    SymShape dims = symbolicShape(t), shape;
    for (int64_t d = 0; d < t.getRank(); ++d) {
      int64_t lo = adaptor.getLow()[d], hi = adaptor.getHigh()[d], size = t.getDimSize(d);
      if (lo < 0 || hi < 0)
        return emitOptionalError(loc, "padding must be >= 0, got ", lo, " and ", hi, " in dim ", d);
      if (!dims[d].isConstant()) {
        // Edge, wrap and reflect padding need the dim non-empty (reflect: larger than the
        // padding) at every size: the kernel lowering checks that against the symbols' ranges.
        shape.push_back(dims[d] + lo + hi);
        continue;
      }
      if (adaptor.getMode() == PadMode::Reflect && (lo >= size || hi >= size) && (lo || hi))
        return emitOptionalError(loc, "reflect padding ", lo, "/", hi, " needs a dim larger than it, dim ",
                                 d, " has size ", size);
      if ((adaptor.getMode() == PadMode::Edge || adaptor.getMode() == PadMode::Wrap) && size == 0 &&
          (lo || hi))
        return emitOptionalError(loc, "cannot pad an empty dim ", d, " in edge or wrap mode");
      shape.push_back(size + lo + hi);
    }
    types.push_back(withDims(t, shape));
    return success();
  } catch (const std::exception &e) {
    return emitOptionalError(loc, "sizes out of range: ", e.what());
  }
}

LogicalResult IotaOp::verify() {
  int64_t dim = getDim(); // I64Attr getters return uint64_t
  if (dim < 0 || dim >= getType().getRank())
    return emitOpError("dim ") << dim << " is out of range for rank " << getType().getRank();
  if (isBoolTensor(getType()))
    return emitOpError("needs a numeric result type");
  return success();
}

LogicalResult DynamicSliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto t = tensorTypeOf(adaptor.getX());
  if ((int64_t)adaptor.getStarts().size() != t.getRank())
    return emitOptionalError(loc, "needs ", t.getRank(), " start indices, got ",
                             adaptor.getStarts().size());
  if (failed(checkSize(loc, adaptor.getSizes(), t.getRank(), "sizes")))
    return failure();
  // A symbolic dim must hold the slice at every size: the kernel lowering checks that against
  // the symbols' ranges.
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (adaptor.getSizes()[d] < 0 ||
        (!t.isDynamicDim(d) && adaptor.getSizes()[d] > t.getDimSize(d)))
      return emitOptionalError(loc, "slice size ", adaptor.getSizes()[d], " does not fit dim ", d,
                               " of size ", t.getDimSize(d));
  types.push_back(RankedTensorType::get(adaptor.getSizes(), t.getElementType()));
  return success();
}

LogicalResult DynamicUpdateSliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type> &types) {
  auto t = tensorTypeOf(adaptor.getX());
  auto u = tensorTypeOf(adaptor.getUpdate());
  if ((int64_t)adaptor.getStarts().size() != t.getRank())
    return emitOptionalError(loc, "needs ", t.getRank(), " start indices, got ",
                             adaptor.getStarts().size());
  if (u.getRank() != t.getRank() || u.getElementType() != t.getElementType())
    return emitOptionalError(loc, "update ", u, " does not match ", t);
  // Symbolic dims must hold the update at every size: the kernel lowering checks the ranges.
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (!t.isDynamicDim(d) && !u.isDynamicDim(d) && u.getDimSize(d) > t.getDimSize(d))
      return emitOptionalError(loc, "update ", u, " does not fit in ", t);
  types.push_back(t);
  return success();
}

//===--- indexing -----------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  try {
    auto t = tensorTypeOf(adaptor.getX());
    auto idx = tensorTypeOf(adaptor.getIndices());
    int64_t axis = adaptor.getAxis();
    if (axis < 0 || axis >= t.getRank())
      return emitOptionalError(loc, "axis ", axis, " is out of range for rank ", t.getRank());
    SymShape dims = symbolicShape(t), indexDims = symbolicShape(idx);
    SymShape shape(dims.begin(), dims.begin() + axis);
    shape.insert(shape.end(), indexDims.begin(), indexDims.end());
    shape.insert(shape.end(), dims.begin() + axis + 1, dims.end());
    types.push_back(withDims(t, shape));
    return success();
  } catch (const std::exception &e) {
    return emitOptionalError(loc, "sizes out of range: ", e.what());
  }
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto t = tensorTypeOf(adaptor.getX());
  auto idx = tensorTypeOf(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= t.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ", t.getRank());
  if (idx.getRank() != t.getRank())
    return emitOptionalError(loc, "indices rank ", idx.getRank(), " differs from data rank ",
                             t.getRank());
  types.push_back(withDims(t, symbolicShape(idx)));
  return success();
}

LogicalResult GatherNDOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto t = tensorTypeOf(adaptor.getX());
  auto idx = tensorTypeOf(adaptor.getIndices());
  int64_t b = adaptor.getBatchDims();
  if (idx.getRank() < 1)
    return emitOptionalError(loc, "indices must have rank >= 1");
  if (idx.isDynamicDim(idx.getRank() - 1))
    return emitOptionalError(loc, "the index depth (the indices' last dim) must be fixed, got ",
                             idx);
  int64_t k = idx.getShape().back();
  if (b < 0 || b >= std::min(t.getRank(), idx.getRank()))
    return emitOptionalError(loc, "batch_dims ", b, " is out of range");
  if (k < 1 || b + k > t.getRank())
    return emitOptionalError(loc, "index depth ", k, " does not fit data rank ", t.getRank(),
                             " with ", b, " batch dims");
  SymShape dims = symbolicShape(t), indexDims = symbolicShape(idx);
  for (int64_t d = 0; d < b; ++d)
    if (dims[d] != indexDims[d])
      return emitOptionalError(loc, "batch dim ", d, " differs between data and indices");
  SymShape shape(indexDims.begin(), indexDims.end() - 1);
  shape.insert(shape.end(), dims.begin() + b + k, dims.end());
  types.push_back(withDims(t, shape));
  return success();
}

LogicalResult ScatterElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                  Adaptor adaptor,
                                                  SmallVectorImpl<Type> &types) {
  auto t = tensorTypeOf(adaptor.getX());
  auto idx = tensorTypeOf(adaptor.getIndices());
  auto upd = tensorTypeOf(adaptor.getUpdates());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= t.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ", t.getRank());
  if (symbolicShape(idx) != symbolicShape(upd) || idx.getRank() != t.getRank())
    return emitOptionalError(loc, "indices ", idx, " and updates ", upd,
                             " must have one shape of the data's rank");
  if (upd.getElementType() != t.getElementType())
    return emitOptionalError(loc, "updates element type differs from the data's");
  types.push_back(t);
  return success();
}

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto t = tensorTypeOf(adaptor.getX());
  auto idx = tensorTypeOf(adaptor.getIndices());
  auto upd = tensorTypeOf(adaptor.getUpdates());
  if (idx.getRank() >= 1 && idx.isDynamicDim(idx.getRank() - 1))
    return emitOptionalError(loc, "the index depth (the indices' last dim) must be fixed, got ",
                             idx);
  if (idx.getRank() < 1 || idx.getShape().back() < 0 || idx.getShape().back() > t.getRank())
    return emitOptionalError(loc, "index depth does not fit data rank ", t.getRank());
  SymShape dims = symbolicShape(t), indexDims = symbolicShape(idx);
  SymShape expected(indexDims.begin(), indexDims.end() - 1);
  expected.insert(expected.end(), dims.begin() + idx.getShape().back(), dims.end());
  if (symbolicShape(upd) != expected || upd.getElementType() != t.getElementType())
    return emitOptionalError(loc, "updates ", upd, " do not match the expected shape [",
                             llvm::join(llvm::map_range(expected, [](const SymExpr &d) {
                                          return d.str();
                                        }), ", "), "]");
  types.push_back(t);
  return success();
}

//===--- reductions and scans -----------------------------------------------===//

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  try {
    auto t = tensorTypeOf(adaptor.getX());
    if (failed(checkDims(loc, adaptor.getDims(), t.getRank(), "dims entry", /*sorted=*/true)))
      return failure();
    SymShape dims = symbolicShape(t), shape;
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (!llvm::is_contained(adaptor.getDims(), d))
        shape.push_back(dims[d]);
    types.push_back(withDims(t, shape));
    return success();
  } catch (const std::exception &e) {
    return emitOptionalError(loc, "sizes out of range: ", e.what());
  }
}

LogicalResult ArgReduceOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto t = tensorTypeOf(adaptor.getX());
  int64_t dim = adaptor.getDim();
  if (dim < 0 || dim >= t.getRank())
    return emitOptionalError(loc, "dim ", dim, " is out of range for rank ", t.getRank());
  if (t.getDimSize(dim) == 0)
    return emitOptionalError(loc, "cannot take the arg max/min of an empty dim");
  SymShape shape = symbolicShape(t);
  shape.erase(shape.begin() + dim);
  types.push_back(tensorTypeWithDims(shape, IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult CumsumOp::verify() {
  int64_t dim = getDim();
  if (dim < 0 || dim >= tensorTypeOf(getX()).getRank())
    return emitOpError("dim ") << dim << " is out of range";
  if (isBoolTensor(getX().getType()))
    return emitOpError("needs a numeric operand");
  return success();
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto t = tensorTypeOf(adaptor.getX());
  int64_t dim = adaptor.getDim(), k = adaptor.getK();
  if (dim < 0 || dim >= t.getRank())
    return emitOptionalError(loc, "dim ", dim, " is out of range for rank ", t.getRank());
  // A symbolic dim must hold k at every size: the importer checks that against the ranges.
  if (k < 0 || (!t.isDynamicDim(dim) && k > t.getDimSize(dim)))
    return emitOptionalError(loc, "k = ", k, " is out of range for a dim of size ", t.getDimSize(dim));
  SymShape shape = symbolicShape(t);
  shape[dim] = k;
  types.push_back(withDims(t, shape));
  types.push_back(tensorTypeWithDims(shape, IntegerType::get(ctx, 64)));
  return success();
}

//===--- linear algebra and windows ------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  try {
    auto a = tensorTypeOf(adaptor.getLhs()), b = tensorTypeOf(adaptor.getRhs());
    if (a.getElementType() != b.getElementType())
      return emitOptionalError(loc, "matmul operands differ in element type: ", a, " vs ", b);
    if (a.getRank() < 2 || a.getRank() != b.getRank())
      return emitOptionalError(loc, "matmul operands need one rank >= 2, got ", a, " and ", b);
    int64_t r = a.getRank();
    SymShape ad = symbolicShape(a), bd = symbolicShape(b);
    if (!std::equal(ad.begin(), ad.end() - 2, bd.begin()))
      return emitOptionalError(loc, "matmul batch dims differ: ", a, " vs ", b);
    if (ad[r - 1] != bd[r - 2])
      return emitOptionalError(loc, "matmul contraction dims differ: ", a, " vs ", b);
    SymShape shape(ad.begin(), ad.end() - 1);
    shape.push_back(bd[r - 1]);
    types.push_back(withDims(a, shape));
    return success();
  } catch (const std::exception &e) {
    return emitOptionalError(loc, "sizes out of range: ", e.what());
  }
}

/// tcc.attention's result type (q's batch and rows, v's head dim), or a failure.
static LogicalResult inferAttentionResult(std::optional<Location> loc, Value qv, Value kv,
                                          Value vv, Value maskv, Value biasv,
                                          SmallVectorImpl<Type> &types) {
  auto q = tensorTypeOf(qv), k = tensorTypeOf(kv), v = tensorTypeOf(vv);
  Type et = q.getElementType();
  if (!isa<FloatType>(et) || k.getElementType() != et || v.getElementType() != et)
    return emitOptionalError(loc, "attention needs q, k and v of one float type, got ", q, ", ",
                             k, ", ", v);
  if (biasv) {
    Type bt = tensorTypeOf(biasv).getElementType();
    if (bt != et && !(bt.isF32() && et.getIntOrFloatBitWidth() == 16))
      return emitOptionalError(loc, "attention bias must be of q's type ", et,
                               " (or f32 when q is 16-bit), got ", bt);
  }
  SymShape mask = maskv ? symbolicShape(maskv) : SymShape(),
           bias = biasv ? symbolicShape(biasv) : SymShape(), out;
  std::string error = attentionShapeError(symbolicShape(q), symbolicShape(k), symbolicShape(v),
                                          maskv ? &mask : nullptr, biasv ? &bias : nullptr, out);
  if (!error.empty())
    return emitOptionalError(loc, "attention: ", error);
  types.push_back(withDims(q, out));
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferAttentionResult(loc, adaptor.getQ(), adaptor.getK(), adaptor.getV(),
                              adaptor.getMask(), adaptor.getBias(), types);
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &types) {
  SmallVector<Type, 1> forward;
  if (failed(inferAttentionResult(loc, adaptor.getQ(), adaptor.getK(), adaptor.getV(),
                                  adaptor.getMask(), adaptor.getBias(), forward)))
    return failure();
  auto want = cast<RankedTensorType>(forward[0]);
  for (Value x : {adaptor.getOutput(), adaptor.getGrad()})
    if (tensorTypeOf(x).getShape() != want.getShape() ||
        tensorTypeOf(x).getElementType() != want.getElementType())
      return emitOptionalError(loc, "attention_grad's output and grad must be the attention's ",
                               "result type ", forward[0], ", got ", x.getType());
  for (Value x : {adaptor.getQ(), adaptor.getK(), adaptor.getV()})
    types.push_back(x.getType());
  return success();
}

/// Output size of one windowed dim: input `size` dilated by `lhsDil`, padded by lo/hi,
/// windowed by `window` elements dilated by `rhsDil`, with `stride`.
SmallVector<int64_t> tcc::channelsLastShape(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s{shape[0]};
  s.append(shape.begin() + 2, shape.end());
  s.push_back(shape[1]);
  return s;
}

SmallVector<int64_t> tcc::channelsFirstShape(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s{shape[0], shape.back()};
  s.append(shape.begin() + 1, shape.end() - 1);
  return s;
}

static int64_t windowedSize(int64_t size, int64_t lhsDil, int64_t lo, int64_t hi, int64_t window,
                            int64_t rhsDil, int64_t stride) {
  int64_t dilatedIn = size == 0 ? 0 : (size - 1) * lhsDil + 1;
  int64_t padded = dilatedIn + lo + hi;
  int64_t span = (window - 1) * rhsDil + 1;
  if (padded < span)
    return 0;
  return (padded - span) / stride + 1;
}

/// windowedSize of a symbolic size (a window larger than the padded input then gives a
/// negative size, which binding the symbols rejects).
static SymExpr windowedSize(const SymExpr &size, int64_t lhsDil, int64_t lo, int64_t hi,
                            int64_t window, int64_t rhsDil, int64_t stride) {
  if (std::optional<int64_t> c = size.constant())
    return windowedSize(*c, lhsDil, lo, hi, window, rhsDil, stride);
  SymExpr padded = (size - 1) * lhsDil + 1 + lo + hi;
  int64_t span = (window - 1) * rhsDil + 1;
  return SymExpr::floorDiv(padded - span, stride) + 1;
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  try {
    if (failed(requireStaticShapes(loc, "tcc.conv (weight)", {adaptor.getWeight()})))
      return failure();
    auto in = tensorTypeOf(adaptor.getInput()), w = tensorTypeOf(adaptor.getWeight());
    if (in.getRank() < 3 || in.getRank() != w.getRank())
      return emitOptionalError(loc, "conv needs input and weight of one rank >= 3, got ", in,
                               " and ", w);
    const bool last = adaptor.getChannelsLast();
    // [N, C, S...] (the view the checks below read); N and S may be symbolic, C may not.
    SymShape inDims = symbolicShape(in);
    if (last) {
      SymShape first{inDims[0], inDims.back()};
      first.insert(first.end(), inDims.begin() + 1, inDims.end() - 1);
      inDims = first;
    }
    if (!inDims[1].isConstant())
      return emitOptionalError(loc, "conv input channels must be static, got ", inDims[1].str());
    SmallVector<int64_t> viewShape;
    for (const SymExpr &d : inDims)
      viewShape.push_back(d.constant() ? *d.constant() : 1);
    in = RankedTensorType::get(viewShape, in.getElementType());
    if (in.getElementType() != w.getElementType())
      return emitOptionalError(loc, "conv input and weight differ in element type");
    int64_t spatial = in.getRank() - 2, groups = adaptor.getGroups();
    for (auto [attr, name] : {std::pair{adaptor.getStrides(), "strides"},
                              {adaptor.getPadLow(), "pad_low"}, {adaptor.getPadHigh(), "pad_high"},
                              {adaptor.getLhsDilation(), "lhs_dilation"},
                              {adaptor.getRhsDilation(), "rhs_dilation"}})
      if (failed(checkSize(loc, attr, spatial, name)))
        return failure();
    if (groups < 1 || in.getDimSize(1) % groups || w.getDimSize(0) % groups)
      return emitOptionalError(loc, "groups = ", groups, " must divide the input channels (",
                               in.getDimSize(1), ") and output channels (", w.getDimSize(0), ")");
    if (w.getDimSize(1) * groups != in.getDimSize(1))
      return emitOptionalError(loc, "weight has ", w.getDimSize(1), " input channels per group, the input ",
                               in.getDimSize(1), " channels in ", groups, " groups");
    SymShape shape{inDims[0], w.getDimSize(0)};
    for (int64_t d = 0; d < spatial; ++d) {
      int64_t s = adaptor.getStrides()[d], ld = adaptor.getLhsDilation()[d],
              rd = adaptor.getRhsDilation()[d];
      if (s < 1 || ld < 1 || rd < 1)
        return emitOptionalError(loc, "strides and dilations must be >= 1");
      shape.push_back(windowedSize(inDims[d + 2], ld, adaptor.getPadLow()[d],
                                   adaptor.getPadHigh()[d], w.getDimSize(d + 2), rd, s));
    }
    if (last) {
      SymShape cl{shape[0]};
      cl.insert(cl.end(), shape.begin() + 2, shape.end());
      cl.push_back(shape[1]);
      shape = cl;
    }
    types.push_back(tensorTypeWithDims(shape, in.getElementType()));
    return success();
  } catch (const std::exception &e) {
    return emitOptionalError(loc, "sizes out of range: ", e.what());
  }
}

LogicalResult ReduceWindowOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &types) {
  try {
    auto t = tensorTypeOf(adaptor.getX());
    SymShape dims = symbolicShape(t);
    int64_t rank = t.getRank();
    for (auto [attr, name] : {std::pair{adaptor.getWindow(), "window"},
                              {adaptor.getStrides(), "strides"}, {adaptor.getPadLow(), "pad_low"},
                              {adaptor.getPadHigh(), "pad_high"},
                              {adaptor.getDilations(), "dilations"}})
      if (failed(checkSize(loc, attr, rank, name)))
        return failure();
    SymShape shape;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t w = adaptor.getWindow()[d], s = adaptor.getStrides()[d], dil = adaptor.getDilations()[d];
      if (w < 1 || s < 1 || dil < 1)
        return emitOptionalError(loc, "window, strides and dilations must be >= 1");
      if (adaptor.getPadLow()[d] < 0 || adaptor.getPadHigh()[d] < 0)
        return emitOptionalError(loc, "padding must be >= 0");
      shape.push_back(windowedSize(dims[d], 1, adaptor.getPadLow()[d], adaptor.getPadHigh()[d],
                                   w, dil, s));
    }
    types.push_back(withDims(t, shape));
    return success();
  } catch (const std::exception &e) {
    return emitOptionalError(loc, "sizes out of range: ", e.what());
  }
}

//===--- control flow ---------------------------------------------------------===//

/// Checks that `region`'s yield gives values of `types`.
static LogicalResult verifyYield(Operation *op, Region &region, TypeRange types, StringRef what) {
  // Runs before the block itself is verified: it may be empty or lack a terminator.
  Block &block = region.front();
  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(block.back());
  if (!yield)
    return op->emitOpError(what) << " must end with tcc.yield";
  if (yield.getValues().getTypes() != types) {
    auto diag = op->emitOpError(what) << " yields (";
    llvm::interleaveComma(yield.getValues().getTypes(), diag);
    diag << "), expected (";
    llvm::interleaveComma(types, diag);
    return diag << ")";
  }
  return success();
}

LogicalResult IfOp::verify() {
  if (failed(verifyYield(*this, getThenRegion(), getResultTypes(), "then region")))
    return failure();
  return verifyYield(*this, getElseRegion(), getResultTypes(), "else region");
}

LogicalResult LoopOp::verify() {
  Block &body = getBody().front();
  size_t numCarried = getInits().size();
  if (getNumResults() < numCarried)
    return emitOpError("has fewer results than carried values");
  // Body arguments: (iteration, cond, carried...).
  SmallVector<Type> argTypes{getMaxTrip().getType(), getCond().getType()};
  llvm::append_range(argTypes, getInits().getTypes());
  if (body.getArgumentTypes() != TypeRange(argTypes))
    return emitOpError("body arguments must be (tensor<i64>, tensor<i1>, carried types...)");
  for (size_t i = 0; i < numCarried; ++i)
    if (getResult(i).getType() != getInits()[i].getType())
      return emitOpError("result ") << i << " type differs from its initial value's";
  // Yield: (cond, carried..., scan elements...); scan results stack them on a new leading dim.
  SmallVector<Type> yieldTypes{getCond().getType()};
  llvm::append_range(yieldTypes, getInits().getTypes());
  for (Value scan : getResults().drop_front(numCarried)) {
    auto t = tensorTypeOf(scan);
    if (t.getRank() < 1)
      return emitOpError("scan results need a leading iteration dim");
    SymShape dims = symbolicShape(t);
    yieldTypes.push_back(withDims(t, SymShape(dims.begin() + 1, dims.end())));
  }
  return verifyYield(*this, getBody(), yieldTypes, "body");
}

LogicalResult FusionOp::verify() {
  if (getKind() != "loop" && getKind() != "extern")
    return emitOpError("kind must be 'loop' or 'extern', got '") << getKind() << "'";
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("body arguments must match the inputs' types");
  return verifyYield(*this, getBody(), getResultTypes(), "body");
}

#define GET_OP_CLASSES
#include "tcc/IR/TccOps.cpp.inc"
