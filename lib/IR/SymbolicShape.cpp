//===- SymbolicShape.cpp - Symbolic dims of tcc tensor types --------------===//
#include "tcc/IR/SymbolicShape.h"

#include "tcc/IR/TccDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace tcc {

namespace {

DimsAttr dimsEncoding(RankedTensorType type) {
  return dyn_cast_if_present<DimsAttr>(type.getEncoding());
}

} // namespace

bool hasValidDims(RankedTensorType type) {
  int64_t dynamic = type.getNumDynamicDims();
  auto dims = dimsEncoding(type);
  if (dynamic == 0)
    return !type.getEncoding();
  if (!dims || (int64_t)dims.getExprs().size() != dynamic)
    return false;
  for (StringAttr text : dims.getExprs()) {
    // Canonical text only, so that equal dims make equal types; and never a constant (that
    // dim would be static).
    std::optional<SymExpr> e = SymExpr::parse(text.getValue());
    if (!e || e->str() != text.getValue() || e->isConstant())
      return false;
  }
  return true;
}

bool hasSymbolicDims(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && !t.hasStaticShape();
}

SymShape symbolicShape(Type type) {
  auto t = cast<RankedTensorType>(type);
  SymShape dims;
  dims.reserve(t.getRank());
  auto encoding = dimsEncoding(t);
  size_t next = 0;
  for (int64_t d : t.getShape()) {
    if (!ShapedType::isDynamic(d)) {
      dims.push_back(d);
      continue;
    }
    assert(encoding && next < encoding.getExprs().size() && "a ? dim without #tcc.dims");
    std::optional<SymExpr> e = SymExpr::parse(encoding.getExprs()[next++].getValue());
    assert(e && "#tcc.dims holds an expression that does not parse");
    dims.push_back(*e);
  }
  return dims;
}

SymShape symbolicShape(Value value) { return symbolicShape(value.getType()); }

RankedTensorType tensorTypeWithDims(llvm::ArrayRef<SymExpr> dims, Type elementType) {
  SmallVector<int64_t> shape;
  SmallVector<StringAttr> exprs;
  MLIRContext *ctx = elementType.getContext();
  for (const SymExpr &d : dims) {
    if (std::optional<int64_t> c = d.constant()) {
      assert(*c >= 0 && "a negative dim");
      shape.push_back(*c);
    } else {
      shape.push_back(ShapedType::kDynamic);
      exprs.push_back(StringAttr::get(ctx, d.str()));
    }
  }
  if (exprs.empty())
    return RankedTensorType::get(shape, elementType);
  return RankedTensorType::get(shape, elementType, DimsAttr::get(ctx, exprs));
}

RankedTensorType withElementType(RankedTensorType like, Type elementType) {
  return RankedTensorType::get(like.getShape(), elementType, like.getEncoding());
}

SymShape toSymShape(llvm::ArrayRef<int64_t> dims) { return SymShape(dims.begin(), dims.end()); }

std::optional<SmallVector<int64_t>> staticDims(llvm::ArrayRef<SymExpr> dims) {
  SmallVector<int64_t> out;
  for (const SymExpr &d : dims) {
    std::optional<int64_t> c = d.constant();
    if (!c)
      return std::nullopt;
    out.push_back(*c);
  }
  return out;
}

SymbolRanges symbolRanges(ModuleOp module) {
  SymbolRanges ranges;
  auto dict = module->getAttrOfType<DictionaryAttr>(TccDialect::kSymbolsAttrName);
  if (!dict)
    return ranges;
  for (NamedAttribute entry : dict) {
    auto bounds = dyn_cast<DenseI64ArrayAttr>(entry.getValue());
    SymbolRange range;
    if (bounds && bounds.size() == 2)
      range = {bounds[0], bounds[1]};
    ranges[entry.getName().str()] = range;
  }
  return ranges;
}

void setSymbolRanges(ModuleOp module, const SymbolRanges &ranges) {
  MLIRContext *ctx = module.getContext();
  SmallVector<NamedAttribute> entries;
  for (const auto &[name, range] : ranges)
    entries.emplace_back(StringAttr::get(ctx, name),
                         DenseI64ArrayAttr::get(ctx, {range.min, range.max}));
  if (entries.empty())
    module->removeAttr(TccDialect::kSymbolsAttrName);
  else
    module->setAttr(TccDialect::kSymbolsAttrName, DictionaryAttr::get(ctx, entries));
}

/// The arguments' dims for the standard C++ binder (tcc/Support/SymbolBinding.h), which
/// libtccrt shares: an argument that is not a ranked tensor has no dims to bind.
SymbolBindings bindSymbols(llvm::ArrayRef<Type> argumentTypes, llvm::ArrayRef<Shape> shapes,
                           const SymbolRanges &ranges, llvm::ArrayRef<std::string> inputNames) {
  std::vector<SymShape> dims;
  std::vector<std::vector<int64_t>> sizes;
  for (size_t i = 0; i < argumentTypes.size(); ++i) {
    auto type = dyn_cast<RankedTensorType>(argumentTypes[i]);
    dims.push_back(type ? symbolicShape(type) : SymShape{});
    if (i < shapes.size())
      sizes.push_back(type ? shapes[i] : Shape{});
  }
  for (size_t i = argumentTypes.size(); i < shapes.size(); ++i)
    sizes.push_back(shapes[i]);
  return tcc::bindSymbols(dims, sizes, ranges,
                          std::vector<std::string>(inputNames.begin(), inputNames.end()));
}

Shape concreteShape(Type type, const SymbolBindings &bindings) {
  Shape shape;
  for (const SymExpr &d : symbolicShape(type)) {
    int64_t v = evaluateSym(d, bindings);
    if (v < 0)
      throw Error("dim " + d.str() + " is " + std::to_string(v) + " (negative) for these sizes");
    shape.push_back(v);
  }
  return shape;
}

} // namespace tcc

//===--- Folding shape arithmetic on symbolic sizes -------------------------===//

namespace tcc {

namespace {

/// Integer values of a small constant or a tcc.sym_ints (rank <= 1).
std::optional<std::vector<SymExpr>> intValues(Value v, bool *symbolic) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape() || type.getRank() > 1 || type.getNumElements() > 64)
    return std::nullopt;
  if (auto s = v.getDefiningOp<SymIntsOp>()) {
    *symbolic = true;
    return s.getExprs();
  }
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c || !isa<IntegerType>(type.getElementType()))
    return std::nullopt;
  auto dense = dyn_cast<DenseIntElementsAttr>(c.getValue());
  if (!dense)
    return std::nullopt;
  bool isUnsigned = type.getElementType().isUnsignedInteger();
  std::vector<SymExpr> out;
  for (const APInt &x : dense.getValues<APInt>()) {
    if (isUnsigned && x.getActiveBits() > 63)
      return std::nullopt;
    out.push_back(isUnsigned ? (int64_t)x.getZExtValue() : x.getSExtValue());
  }
  return out;
}

} // namespace

namespace {

/// The comparison's value when the ranges decide it.
std::optional<bool> decide(CompareKind kind, const SymExpr &a, const SymExpr &b,
                           const SymbolRanges &ranges) {
  SymbolRange d = rangeOf(a - b, ranges);
  auto known = [&](bool isTrue, bool isFalse) -> std::optional<bool> {
    if (isTrue)
      return true;
    if (isFalse)
      return false;
    return std::nullopt;
  };
  switch (kind) {
  case CompareKind::Eq: return known(d.min == 0 && d.max == 0, d.min > 0 || d.max < 0);
  case CompareKind::Ne: return known(d.min > 0 || d.max < 0, d.min == 0 && d.max == 0);
  case CompareKind::Lt: return known(d.max < 0, d.min >= 0);
  case CompareKind::Le: return known(d.max <= 0, d.min > 0);
  case CompareKind::Gt: return known(d.min > 0, d.max <= 0);
  case CompareKind::Ge: return known(d.min >= 0, d.max < 0);
  }
  return std::nullopt;
}

std::optional<std::vector<SymExpr>> foldValues(Operation *op, const SymbolRanges &ranges) {
  bool symbolic = false;
  std::vector<std::vector<SymExpr>> in;
  for (Value v : op->getOperands()) {
    auto values = intValues(v, &symbolic);
    if (!values)
      return std::nullopt;
    in.push_back(std::move(*values));
  }
  if (!symbolic)
    return std::nullopt; // constants are foldConstantOp's
  auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (op->getNumResults() != 1 || !resultType || !resultType.hasStaticShape() ||
      resultType.getRank() > 1)
    return std::nullopt;
  size_t n = resultType.getNumElements();
  auto nonNegative = [&](const SymExpr &e) { return rangeOf(e, ranges).min >= 0; };
  auto positive = [&](const SymExpr &e) { return rangeOf(e, ranges).min > 0; };

  if (isa<CastOp, ReshapeOp>(op)) {
    if (isa<CastOp>(op) && !isa<IntegerType>(resultType.getElementType()))
      return std::nullopt;
    return in[0];
  }
  if (isa<BroadcastInDimOp>(op)) {
    if (in[0].size() == n)
      return in[0];
    if (in[0].size() == 1)
      return std::vector<SymExpr>(n, in[0][0]);
    return std::nullopt;
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    std::vector<SymExpr> out;
    for (auto &values : in)
      out.insert(out.end(), values.begin(), values.end());
    return out;
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    std::vector<SymExpr> out;
    for (int64_t i = slice.getStart()[0]; i < slice.getLimit()[0]; i += slice.getStride()[0])
      out.push_back(in[0][i]);
    return out;
  }
  if (auto gather = dyn_cast<GatherOp>(op)) {
    if (gather.getAxis() != 0 || cast<RankedTensorType>(gather.getX().getType()).getRank() != 1)
      return std::nullopt;
    std::vector<SymExpr> out;
    int64_t size = in[0].size();
    for (const SymExpr &index : in[1]) {
      std::optional<int64_t> i = index.constant();
      if (!i || *i < -size || *i >= size)
        return std::nullopt;
      out.push_back(in[0][*i < 0 ? *i + size : *i]);
    }
    return out;
  }
  if (auto unary = dyn_cast<UnaryOp>(op)) {
    if (unary.getKind() != UnaryKind::Neg)
      return std::nullopt;
    std::vector<SymExpr> out;
    for (const SymExpr &e : in[0])
      out.push_back(-e);
    return out;
  }
  if (auto binary = dyn_cast<BinaryOp>(op)) {
    std::vector<SymExpr> out;
    for (size_t i = 0; i < n; ++i) {
      const SymExpr &a = in[0][i], &b = in[1][i];
      switch (binary.getKind()) {
      case BinaryKind::Add: out.push_back(a + b); break;
      case BinaryKind::Sub: out.push_back(a - b); break;
      case BinaryKind::Mul: out.push_back(a * b); break;
      case BinaryKind::Max: out.push_back(SymExpr::max(a, b)); break;
      case BinaryKind::Min: out.push_back(SymExpr::min(a, b)); break;
      case BinaryKind::Div: // tcc's integer division truncates: floor only for these signs
      case BinaryKind::Rem:
        if (!nonNegative(a) || !positive(b))
          return std::nullopt;
        out.push_back(binary.getKind() == BinaryKind::Div ? SymExpr::floorDiv(a, b)
                                                          : SymExpr::mod(a, b));
        break;
      default: return std::nullopt;
      }
    }
    return out;
  }
  if (auto reduce = dyn_cast<ReduceOp>(op)) {
    if (in[0].empty() || reduce.getDims().size() != 1)
      return std::nullopt;
    SymExpr r = in[0][0];
    for (size_t i = 1; i < in[0].size(); ++i) {
      switch (reduce.getKind()) {
      case ReduceKind::Sum: r = r + in[0][i]; break;
      case ReduceKind::Prod: r = r * in[0][i]; break;
      case ReduceKind::Max: r = SymExpr::max(r, in[0][i]); break;
      case ReduceKind::Min: r = SymExpr::min(r, in[0][i]); break;
      }
    }
    return std::vector<SymExpr>{r};
  }
  if (auto compare = dyn_cast<CompareOp>(op)) {
    std::vector<SymExpr> out;
    for (size_t i = 0; i < n; ++i) {
      std::optional<bool> v = decide(compare.getKind(), in[0][i], in[1][i], ranges);
      if (!v)
        return std::nullopt;
      out.push_back(*v ? 1 : 0);
    }
    return out;
  }
  if (isa<SelectOp>(op)) {
    std::vector<SymExpr> out;
    for (size_t i = 0; i < n; ++i) {
      std::optional<int64_t> c = in[0][i].constant();
      if (!c)
        return std::nullopt;
      out.push_back(*c ? in[1][i] : in[2][i]);
    }
    return out;
  }
  return std::nullopt;
}

} // namespace

Value foldSymbolicInts(Operation *op, const SymbolRanges &ranges) {
  if (!isa_and_present<TccDialect>(op->getDialect()) || op->getNumResults() != 1)
    return {};
  std::optional<std::vector<SymExpr>> values;
  try {
    values = foldValues(op, ranges);
  } catch (const std::exception &) {
    return {}; // overflowing constants: left to run time
  }
  if (!values)
    return {};
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  OpBuilder b(op);
  bool allConstant = llvm::all_of(*values, [](const SymExpr &e) { return e.isConstant(); });
  if (allConstant) {
    auto element = cast<IntegerType>(type.getElementType());
    SmallVector<APInt> bits;
    for (const SymExpr &e : *values)
      bits.push_back(APInt(64, *e.constant(), /*isSigned=*/true).trunc(element.getWidth()));
    return b.create<ConstantOp>(op->getLoc(), type, DenseElementsAttr::get(type, bits));
  }
  if (!type.getElementType().isInteger(64))
    return {};
  SmallVector<StringRef> texts;
  std::vector<std::string> strings;
  for (const SymExpr &e : *values)
    strings.push_back(e.str());
  for (const std::string &s : strings)
    texts.push_back(s);
  return b.create<SymIntsOp>(op->getLoc(), type, b.getStrArrayAttr(texts));
}

} // namespace tcc
