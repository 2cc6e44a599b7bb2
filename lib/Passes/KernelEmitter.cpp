//===- KernelEmitter.cpp - Builds tk kernel bodies from fused tcc ops ---------===//
//
// See KernelEmitter.h. Assumes the fusion groups made by -tcc-fuse: a loop group is either
// pointwise (all yields of one shape), or has reductions whose results share one "row" shape R
// (yields are of shape R or are full-shape values containing R's dims), or holds one sequential
// op (cumsum, scatter, dynamic_update_slice) as its only yield. Any group is computed correctly;
// the fusion decisions only affect how much is recomputed.
//
//===----------------------------------------------------------------------===//
#include "KernelEmitter.h"

#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace tcc::fusion;

namespace tcc::kernel {

namespace {

[[noreturn]] void fail(Operation *op, const std::string &message) {
  throw LoweringError{op, message};
}

bool is16BitFloat(Type t) { return t.isF16() || t.isBF16(); }

Type elementTypeOf(Value v) { return tensorType(v).getElementType(); }

/// Makes a scalar attribute of `type` holding `value` (integers: truncated toward zero).
TypedAttr scalarAttr(Type type, double value) {
  if (auto f = dyn_cast<FloatType>(type))
    return FloatAttr::get(f, value);
  if (type.isIndex())
    return IntegerAttr::get(type, (int64_t)value);
  auto it = llvm::cast<IntegerType>(type);
  if (it.getWidth() == 1)
    return IntegerAttr::get(type, APInt(1, value != 0));
  return IntegerAttr::get(type, APInt(it.getWidth(), (int64_t)value, /*isSigned=*/true));
}

} // namespace

KernelEmitter::KernelEmitter(OpBuilder &b, Location loc) : b_(b), loc_(loc) {
  scopes_.emplace_back();
}

void KernelEmitter::withScope(function_ref<void()> fn) {
  scopes_.emplace_back();
  fn();
  scopes_.pop_back();
}

//===--- Scalars --------------------------------------------------------------===//

Value KernelEmitter::constant(Type type, double value) {
  return b_.create<tk::ConstantOp>(loc_, scalarAttr(type, value));
}

Value KernelEmitter::constantIndex(int64_t value) {
  return b_.create<tk::ConstantOp>(loc_, b_.getIndexAttr(value));
}

Value KernelEmitter::identity(ReduceKind kind, Type type) {
  if (kind == ReduceKind::Sum)
    return constant(type, 0);
  if (kind == ReduceKind::Prod)
    return constant(type, 1);
  bool lowest = kind == ReduceKind::Max;
  if (auto f = dyn_cast<FloatType>(type))
    return b_.create<tk::ConstantOp>(
        loc_, FloatAttr::get(f, APFloat::getInf(f.getFloatSemantics(), /*Negative=*/lowest)));
  auto it = llvm::cast<IntegerType>(type);
  unsigned w = it.getWidth();
  APInt v;
  if (w == 1)
    v = APInt(1, lowest ? 0 : 1);
  else if (it.isUnsigned())
    v = lowest ? APInt::getMinValue(w) : APInt::getMaxValue(w);
  else
    v = lowest ? APInt::getSignedMinValue(w) : APInt::getSignedMaxValue(w);
  return b_.create<tk::ConstantOp>(loc_, IntegerAttr::get(type, v));
}

Value KernelEmitter::binary(BinaryKind kind, Value a, Value b) {
  return b_.create<tk::BinaryOp>(loc_, a.getType(), kind, a, b);
}

Value KernelEmitter::compare(CompareKind kind, Value a, Value b) {
  return b_.create<tk::CompareOp>(loc_, b_.getI1Type(), kind, a, b);
}

Value KernelEmitter::select(Value c, Value a, Value b) {
  return b_.create<tk::SelectOp>(loc_, a.getType(), c, a, b);
}

Value KernelEmitter::cast(Value v, Type to) {
  if (v.getType() == to)
    return v;
  // index <-> non-integer goes through i64.
  if (v.getType().isIndex() && !to.isSignlessInteger() && !to.isUnsignedInteger())
    v = b_.create<tk::CastOp>(loc_, b_.getI64Type(), v);
  else if (to.isIndex() && !isa<IntegerType>(v.getType()))
    v = b_.create<tk::CastOp>(loc_, b_.getI64Type(), v);
  else if (v.getType().isIndex() && to.isInteger(1))
    v = b_.create<tk::CastOp>(loc_, b_.getI64Type(), v);
  if (v.getType() == to)
    return v;
  return b_.create<tk::CastOp>(loc_, to, v);
}

//===--- Indices ----------------------------------------------------------------===//

AffineExpr KernelEmitter::newDim(Value indexValue) {
  dims_.push_back(indexValue);
  return getAffineDimExpr(dims_.size() - 1, context());
}

Index KernelEmitter::simplifyIndex(ArrayRef<AffineExpr> idx) {
  return fusion::simplify(idx, dims_.size());
}

AffineExpr KernelEmitter::sizeSymbolDim(unsigned position) {
  if (auto it = sizeDims_.find(position); it != sizeDims_.end())
    return it->second;
  auto kernel = b_.getInsertionBlock()->getParentOp();
  if (!isa<func::FuncOp>(kernel))
    kernel = kernel->getParentOfType<func::FuncOp>();
  auto symbols =
      kernel->getParentOfType<ModuleOp>()->getAttrOfType<DictionaryAttr>(TccDialect::kSymbolsAttrName);
  if (!symbols || position >= symbols.size())
    fail(kernel, "reads a size symbol the module does not declare (internal error)");
  // At the kernel's entry, so that it dominates every loop.
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(&kernel->getRegion(0).front());
  Value size = b_.create<tk::SizeOp>(loc_, symbols.getValue()[position].getName().getValue());
  AffineExpr d = newDim(size);
  sizeDims_[position] = d;
  return d;
}

AffineExpr KernelEmitter::bindSizeSymbols(AffineExpr e) {
  unsigned n = numSymbolsOf(e);
  if (n == 0)
    return e;
  SmallVector<AffineExpr> dims;
  for (unsigned k = 0; k < n; ++k)
    dims.push_back(sizeSymbolDim(k));
  return e.replaceSymbols(dims);
}

AffineExpr KernelEmitter::size(const SymExpr &size) {
  auto module = b_.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  std::optional<AffineExpr> e = sizeExpr(size, module);
  if (!e)
    fail(b_.getInsertionBlock()->getParentOp(),
         "a size (" + size.str() + ") that is a max or min of symbols cannot index a kernel yet");
  return bindSizeSymbols(*e);
}

std::pair<SmallVector<int64_t>, SmallVector<Value>>
KernelEmitter::loopBounds(ArrayRef<SymExpr> shape) {
  SmallVector<int64_t> bounds;
  SmallVector<Value> dynamic;
  for (const SymExpr &d : shape) {
    if (std::optional<int64_t> c = d.constant()) {
      bounds.push_back(*c);
      continue;
    }
    bounds.push_back(ShapedType::kDynamic);
    dynamic.push_back(index(size(d)));
  }
  return {bounds, dynamic};
}

Value KernelEmitter::index(AffineExpr e) {
  e = simplifyIndexExpr(bindSizeSymbols(e), dims_.size());
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return dims_[d.getPosition()];
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    if (Value v = it->indices.lookup(e))
      return v;
  Value result;
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    result = constantIndex(c.getValue());
  } else {
    // Compact the dims the expression uses into the map's inputs: sizes (tk.size values) as
    // its symbols, so that products and divisions by them are valid affine maps.
    llvm::SmallVector<unsigned> used;
    e.walk([&](AffineExpr s) {
      if (auto d = dyn_cast<AffineDimExpr>(s))
        if (!llvm::is_contained(used, d.getPosition()))
          used.push_back(d.getPosition());
    });
    llvm::sort(used);
    auto isSize = [&](unsigned position) {
      return llvm::any_of(sizeDims_, [&](const auto &entry) {
        return llvm::cast<AffineDimExpr>(entry.second).getPosition() == position;
      });
    };
    SmallVector<AffineExpr> replacements(dims_.size(), getAffineConstantExpr(0, context()));
    SmallVector<Value> operands, symbolOperands;
    for (unsigned p : used) {
      if (isSize(p)) {
        replacements[p] = getAffineSymbolExpr(symbolOperands.size(), context());
        symbolOperands.push_back(dims_[p]);
      } else {
        replacements[p] = getAffineDimExpr(operands.size(), context());
        operands.push_back(dims_[p]);
      }
    }
    unsigned numDims = operands.size();
    llvm::append_range(operands, symbolOperands);
    AffineExpr compact = e.replaceDimsAndSymbols(replacements, {});
    AffineMap map = AffineMap::get(numDims, symbolOperands.size(), compact);
    result = b_.create<tk::ApplyOp>(loc_, map, operands);
  }
  scopes_.back().indices[e] = result;
  return result;
}

AffineExpr KernelEmitter::clamp(Value v, int64_t lo, int64_t hi) {
  return clamp(v, getAffineConstantExpr(lo, context()), getAffineConstantExpr(hi, context()));
}

AffineExpr KernelEmitter::clamp(Value v, AffineExpr lo, AffineExpr hi) {
  v = binary(BinaryKind::Max, v, index(lo));
  v = binary(BinaryKind::Min, v, index(hi));
  return newDim(v);
}

AffineExpr KernelEmitter::sizeAtLeast(Operation *op, const SymExpr &n, int64_t minimum,
                                      const char *what) {
  if (std::optional<int64_t> c = n.constant())
    return getAffineConstantExpr(*c, context());
  if (rangeOf(n, symbolRanges(op->getParentOfType<ModuleOp>())).min < minimum)
    fail(op, std::string("has ") + what + " of symbolic size " + n.str() + ", which may be below " +
                 std::to_string(minimum) + " at a size in the compiled ranges (declare ranges "
                 "that keep it at least " + std::to_string(minimum) + ")");
  return size(n);
}

AffineExpr KernelEmitter::normalizedIndex(Value scalar, const SymExpr &dimSize) {
  if (std::optional<int64_t> c = dimSize.constant())
    return normalizedIndex(scalar, *c);
  Value n = index(size(dimSize));
  Value i = cast(scalar, b_.getIndexType());
  Value negative = compare(CompareKind::Lt, i, constantIndex(0));
  i = select(negative, binary(BinaryKind::Add, i, n), i);
  i = binary(BinaryKind::Max, i, constantIndex(0));
  i = binary(BinaryKind::Min, i, binary(BinaryKind::Sub, n, constantIndex(1)));
  return newDim(i);
}

AffineExpr KernelEmitter::normalizedIndex(Value scalar, int64_t dimSize) {
  Value i = cast(scalar, b_.getIndexType());
  Value negative = compare(CompareKind::Lt, i, constantIndex(0));
  i = select(negative, binary(BinaryKind::Add, i, constantIndex(dimSize)), i);
  return clamp(i, 0, std::max<int64_t>(dimSize - 1, 0));
}

Value KernelEmitter::load(Value memref, ArrayRef<AffineExpr> idx) {
  SmallVector<Value> indices;
  for (AffineExpr e : idx)
    indices.push_back(index(e));
  return b_.create<tk::LoadOp>(loc_, memref, indices);
}

void KernelEmitter::store(Value value, Value memref, ArrayRef<AffineExpr> idx) {
  SmallVector<Value> indices;
  for (AffineExpr e : idx)
    indices.push_back(index(e));
  b_.create<tk::StoreOp>(loc_, value, memref, indices);
}

//===--- Loops ----------------------------------------------------------------===//

void KernelEmitter::parallel(ArrayRef<int64_t> shape, function_ref<void(const Index &)> body) {
  parallel(toSymShape(shape), body);
}

void KernelEmitter::parallel(ArrayRef<SymExpr> shape, function_ref<void(const Index &)> body) {
  auto [bounds, dynamic] = loopBounds(shape);
  SmallVector<int64_t> iterated = bounds;
  if (bounds.empty())
    bounds.push_back(1);
  auto par = b_.create<tk::ParallelOp>(loc_, ArrayRef<int64_t>(bounds), dynamic);
  inLoopBody(par.getBody(), bounds.size(), iterated, [&](Block *, const Index &idx) {
    body(idx);
    b_.create<tk::YieldOp>(loc_);
  });
}

void KernelEmitter::inLoopBody(Region &region, size_t numArgs, ArrayRef<int64_t> bounds,
                               function_ref<void(Block *, const Index &)> fn) {
  Block *block = new Block;
  region.push_back(block);
  for (size_t i = 0; i < numArgs; ++i)
    block->addArgument(b_.getIndexType(), loc_);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(block);
  withScope([&] {
    Index idx; // a dim of size 1 is the constant 0
    for (size_t i = 0; i < bounds.size(); ++i)
      idx.push_back(bounds[i] == 1 ? getAffineConstantExpr(0, context())
                                   : newDim(block->getArgument(i)));
    fn(block, idx);
  });
}

Value KernelEmitter::reduce(ReduceKind kind, Type type, ArrayRef<int64_t> bounds,
                            function_ref<Value(const Index &)> body) {
  return reduce(kind, type, toSymShape(bounds), body);
}

Value KernelEmitter::reduce(ReduceKind kind, Type type, ArrayRef<SymExpr> shape,
                            function_ref<Value(const Index &)> body) {
  Type acc = is16BitFloat(type) ? b_.getF32Type() : type;
  auto [bounds, dynamic] = loopBounds(shape);
  auto red = b_.create<tk::ReduceOp>(loc_, acc, kind, bounds, dynamic);
  inLoopBody(red.getBody(), bounds.size(), bounds, [&](Block *, const Index &idx) {
    Value v = cast(body(idx), acc);
    b_.create<tk::YieldOp>(loc_, ValueRange{v});
  });
  return cast(red.getResult(), type);
}

ValueRange KernelEmitter::forLoop(
    int64_t count, ValueRange inits,
    function_ref<SmallVector<Value>(AffineExpr, ValueRange)> body) {
  return forLoop(SymExpr(count), inits, body);
}

ValueRange KernelEmitter::forLoop(
    const SymExpr &count, ValueRange inits,
    function_ref<SmallVector<Value>(AffineExpr, ValueRange)> body) {
  auto [bounds, dynamic] = loopBounds(ArrayRef<SymExpr>{count});
  auto loop = b_.create<tk::ForOp>(loc_, inits.getTypes(), bounds[0],
                                   dynamic.empty() ? Value() : dynamic[0], inits);
  Block *block = new Block;
  loop.getBody().push_back(block);
  block->addArgument(b_.getIndexType(), loc_);
  for (Value v : inits)
    block->addArgument(v.getType(), loc_);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(block);
    withScope([&] {
      AffineExpr i = newDim(block->getArgument(0));
      SmallVector<Value> next = body(i, block->getArguments().drop_front());
      b_.create<tk::YieldOp>(loc_, next);
    });
  }
  return loop.getResults();
}

//===--- Elements ---------------------------------------------------------------===//

Value KernelEmitter::element(Value v, ArrayRef<AffineExpr> rawIdx) {
  Index idx = simplifyIndex(rawIdx);
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = it->elements.find(v);
    if (found == it->elements.end())
      continue;
    for (auto &[key, value] : found->second)
      if (key == idx)
        return value;
  }
  Value result;
  if (Value buffer = buffers_.lookup(v))
    result = load(buffer, idx);
  else
    result = compute(v, idx);
  scopes_.back().elements[v].push_back({idx, result});
  return result;
}

Value KernelEmitter::compute(Value v, ArrayRef<AffineExpr> idx) {
  Operation *op = v.getDefiningOp();
  if (!op)
    throw LoweringError{v.getParentBlock()->getParentOp(),
                        "a fusion input has no buffer (internal error)"};
  MLIRContext *ctx = context();
  auto cst = [&](int64_t c) { return getAffineConstantExpr(c, ctx); };
  Type type = elementTypeOf(v);
  auto remap = [&](unsigned operandNo) {
    std::optional<Index> operandIdx = affineOperandIndex(op, operandNo, idx);
    if (!operandIdx)
      fail(op, "its operand index has no affine form (a symbolic size that is a max or min)");
    return element(op->getOperand(operandNo), *operandIdx);
  };
  bool symbolic = llvm::any_of(op->getOperandTypes(), hasSymbolicDims) ||
                  llvm::any_of(op->getResultTypes(), hasSymbolicDims);
  if (symbolic && !isa<ConstantOp, SymIntsOp, UnaryOp, BinaryOp, CompareOp, SelectOp, CastOp,
                       BitcastOp, BroadcastInDimOp, TransposeOp, SliceOp, ReshapeOp, IotaOp,
                       GatherOp, GatherElementsOp, GatherNDOp, DynamicSliceOp, PadOp, ConcatOp,
                       ReduceOp, ArgReduceOp, MatmulOp, ConvOp, ReduceWindowOp>(op))
    fail(op, "has symbolic dims, which its kernel lowering does not take yet (fix the sizes "
             "with --input-shape)");

  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case<ConstantOp>([&](ConstantOp c) -> Value {
        auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
        if (!dense || !dense.isSplat())
          fail(op, "only splat constants can be computed inside a kernel; others must be fusion "
                   "inputs");
        Attribute a = dense.getSplatValue<Attribute>();
        if (auto b = dyn_cast<BoolAttr>(a))
          a = IntegerAttr::get(type, APInt(1, b.getValue()));
        return b_.create<tk::ConstantOp>(loc_, llvm::cast<TypedAttr>(a));
      })
      .Case<UnaryOp>([&](UnaryOp u) -> Value {
        return b_.create<tk::UnaryOp>(loc_, type, u.getKind(), remap(0));
      })
      .Case<BinaryOp>([&](BinaryOp bin) { return binary(bin.getKind(), remap(0), remap(1)); })
      .Case<CompareOp>([&](CompareOp c) { return compare(c.getKind(), remap(0), remap(1)); })
      .Case<SelectOp>([&](SelectOp) { return select(remap(0), remap(1), remap(2)); })
      .Case<CastOp>([&](CastOp) -> Value {
        return b_.create<tk::CastOp>(loc_, type, remap(0));
      })
      .Case<BitcastOp>([&](BitcastOp) -> Value {
        return b_.create<tk::BitcastOp>(loc_, type, remap(0));
      })
      .Case<BroadcastInDimOp, TransposeOp, SliceOp, ReverseOp, ReshapeOp>(
          [&](Operation *) { return remap(0); })
      .Case<IotaOp>([&](IotaOp i) { return cast(index(idx[i.getDim()]), type); })
      .Case<SymIntsOp>([&](SymIntsOp s) -> Value {
        // The run's value of each size expression: a 0-d one, or a select along the index.
        std::vector<SymExpr> exprs = s.getExprs();
        Value result = cast(index(size(exprs.back())), type);
        for (size_t k = exprs.size() - 1; k-- > 0;) {
          Value here = compare(CompareKind::Eq, index(idx[0]), constantIndex(k));
          result = select(here, cast(index(size(exprs[k])), type), result);
        }
        return result;
      })
      .Case<PadOp>([&](PadOp p) { return computePad(p, idx); })
      .Case<ConcatOp>([&](ConcatOp c) { return computeConcat(c, idx); })
      .Case<GatherOp>([&](GatherOp g) -> Value {
        int64_t axis = g.getAxis(), q = tensorType(g.getIndices()).getRank();
        Value i = element(g.getIndices(), Index(idx.begin() + axis, idx.begin() + axis + q));
        Index xi(idx.begin(), idx.begin() + axis);
        xi.push_back(normalizedIndex(i, symShapeOf(g.getX())[axis]));
        xi.append(idx.begin() + axis + q, idx.end());
        return element(g.getX(), xi);
      })
      .Case<GatherElementsOp>([&](GatherElementsOp g) -> Value {
        Value i = element(g.getIndices(), idx);
        Index xi(idx.begin(), idx.end());
        xi[g.getAxis()] = normalizedIndex(i, symShapeOf(g.getX())[g.getAxis()]);
        return element(g.getX(), xi);
      })
      .Case<GatherNDOp>([&](GatherNDOp g) -> Value {
        SymShape xs = symShapeOf(g.getX());
        ArrayRef<int64_t> is = shapeOf(g.getIndices());
        int64_t q = is.size(), bd = g.getBatchDims(), k = is.back();
        if (ShapedType::isDynamic(k))
          fail(op, "gathers index tuples of symbolic length; their length must be fixed");
        Index xi(idx.begin(), idx.begin() + bd);
        for (int64_t j = 0; j < k; ++j) {
          Index ii(idx.begin(), idx.begin() + (q - 1));
          ii.push_back(cst(j));
          xi.push_back(normalizedIndex(element(g.getIndices(), ii), xs[bd + j]));
        }
        xi.append(idx.begin() + (q - 1), idx.end());
        return element(g.getX(), xi);
      })
      .Case<DynamicSliceOp>([&](DynamicSliceOp d) -> Value {
        SymShape xs = symShapeOf(d.getX());
        ArrayRef<int64_t> sizes = d.getSizes();
        Index xi;
        for (size_t i = 0; i < xs.size(); ++i) {
          Value s = cast(element(d.getStarts()[i], {}), b_.getIndexType());
          sizeAtLeast(d, xs[i], sizes[i], "a sliced dim");
          xi.push_back(clamp(s, cst(0), size(xs[i] - sizes[i])) + idx[i]);
        }
        return element(d.getX(), xi);
      })
      .Case<ReduceOp>([&](ReduceOp r) -> Value {
        SymShape xs = symShapeOf(r.getX());
        ArrayRef<int64_t> dims = r.getDims();
        if (dims.empty())
          return element(r.getX(), idx);
        SymShape bounds;
        for (int64_t d : dims)
          bounds.push_back(xs[d]);
        return reduce(r.getKind(), type, bounds, [&](const Index &inner) {
          Index xi;
          for (size_t d = 0, o = 0, n = 0; d < xs.size(); ++d)
            xi.push_back(llvm::is_contained(dims, (int64_t)d) ? inner[n++] : idx[o++]);
          return element(r.getX(), xi);
        });
      })
      .Case<ArgReduceOp>([&](ArgReduceOp r) -> Value {
        int64_t dim = r.getDim();
        SymExpr n = symShapeOf(r.getX())[dim];
        if (n == SymExpr(0))
          fail(op, "arg_reduce over an empty dim");
        sizeAtLeast(op, n, 1, "a reduced dim");
        auto [bounds, dynamic] = loopBounds(ArrayRef<SymExpr>{n});
        auto ar = b_.create<tk::ArgReduceOp>(loc_, b_.getI64Type(),
                                             r.getIsMax() ? ReduceKind::Max : ReduceKind::Min,
                                             bounds[0], dynamic.empty() ? Value() : dynamic[0],
                                             r.getSelectLastIndex());
        inLoopBody(ar.getBody(), 1, bounds, [&](Block *, const Index &inner) {
          Index xi(idx.begin(), idx.end());
          xi.insert(xi.begin() + dim, inner[0]);
          Value x = element(r.getX(), xi);
          b_.create<tk::YieldOp>(loc_, ValueRange{x});
        });
        return ar.getResult();
      })
      .Case<MatmulOp>([&](MatmulOp m) -> Value {
        SymShape ls = symShapeOf(m.getLhs());
        size_t r = ls.size();
        Type acc = is16BitFloat(type) ? b_.getF32Type() : type;
        return reduce(ReduceKind::Sum, type, ArrayRef<SymExpr>{ls[r - 1]}, [&](const Index &k) {
          Index li(idx.begin(), idx.end()), ri(idx.begin(), idx.end());
          li[r - 1] = k[0];
          ri[r - 2] = k[0];
          Value a = cast(element(m.getLhs(), li), acc), c = cast(element(m.getRhs(), ri), acc);
          return binary(BinaryKind::Mul, a, c);
        });
      })
      .Case<ConvOp>([&](ConvOp c) { return computeConv(c, idx); })
      .Case<ReduceWindowOp>([&](ReduceWindowOp r) { return computeReduceWindow(r, idx); })
      .Default([&](Operation *) -> Value {
        fail(op, "is not computed element by element; it must be the root of its own fusion");
      });
}

Value KernelEmitter::computePad(PadOp p, ArrayRef<AffineExpr> idx) {
  SymShape xs = symShapeOf(p.getX());
  ArrayRef<int64_t> low = p.getLow();
  AffineExpr zero = getAffineConstantExpr(0, context());
  Index xi;
  Value inside;
  for (size_t d = 0; d < xs.size(); ++d) {
    AffineExpr j = idx[d] - low[d];
    bool padded = low[d] != 0 || p.getHigh()[d] != 0;
    if (!padded || xs[d] == SymExpr(0)) {
      xi.push_back(j);
      continue;
    }
    AffineExpr n = sizeAtLeast(p, xs[d], p.getMode() == PadMode::Reflect ? std::max(low[d], p.getHigh()[d]) + 1 : 1,
                               "a padded dim");
    switch (p.getMode()) {
    case PadMode::Constant: {
      Value jv = index(j);
      Value ok = b_.create<tk::BinaryOp>(
          loc_, b_.getI1Type(), BinaryKind::And, compare(CompareKind::Ge, jv, constantIndex(0)),
          compare(CompareKind::Lt, jv, index(n)));
      inside = inside ? binary(BinaryKind::And, inside, ok) : ok;
      xi.push_back(clamp(jv, zero, n - 1));
      break;
    }
    case PadMode::Edge:
      xi.push_back(clamp(index(j), zero, n - 1));
      break;
    case PadMode::Wrap:
      xi.push_back(j % n);
      break;
    case PadMode::Reflect: {
      // |j|, then mirrored at n - 1: min(|j|, 2(n-1) - |j|), clamped for safety.
      Value a = binary(BinaryKind::Max, index(j), index(-j));
      AffineExpr ad = newDim(a);
      Value m = binary(BinaryKind::Min, a, index((n - 1) * 2 - ad));
      xi.push_back(clamp(m, zero, n - 1));
      break;
    }
    }
  }
  Value x = element(p.getX(), xi);
  if (!inside)
    return x;
  return select(inside, x, element(p.getValue(), {}));
}

Value KernelEmitter::computeConcat(ConcatOp c, ArrayRef<AffineExpr> idx) {
  int64_t axis = c.getAxis();
  // The inputs that are not empty, each with its offset and length along the axis (sizes as
  // index expressions: symbolic lengths must be at least 1 everywhere in the ranges).
  SmallVector<AffineExpr> offsets, lengths;
  SmallVector<Value> inputs;
  SymExpr offset = 0;
  for (Value in : c.getInputs()) {
    SymExpr n = symShapeOf(in)[axis];
    if (n != SymExpr(0)) {
      offsets.push_back(size(offset));
      lengths.push_back(sizeAtLeast(c, n, 1, "an input"));
      inputs.push_back(in);
    }
    offset += n;
  }
  Value result;
  for (size_t k = inputs.size(); k-- > 0;) {
    Index xi(idx.begin(), idx.end());
    AffineExpr j = idx[axis] - offsets[k];
    if (inputs.size() > 1)
      j = clamp(index(j), getAffineConstantExpr(0, context()), lengths[k] - 1);
    xi[axis] = j;
    Value x = element(inputs[k], xi);
    if (!result) {
      result = x;
      continue;
    }
    Value before = compare(CompareKind::Lt, index(idx[axis]), index(offsets[k + 1]));
    result = select(before, x, result);
  }
  return result;
}

Value KernelEmitter::computeConv(ConvOp c, ArrayRef<AffineExpr> idx) {
  if (c.getChannelsLast())
    throw LoweringError{c, "a channels_last convolution is a library call, not a kernel"};
  if (hasSymbolicDims(c.getWeight().getType()))
    fail(c, "has a weight of symbolic size; only the input's batch and spatial dims may be "
            "symbolic");
  SymShape xs = symShapeOf(c.getInput());
  ArrayRef<int64_t> ws = shapeOf(c.getWeight());
  size_t spatial = xs.size() - 2;
  int64_t groups = c.getGroups(), cPerGroup = ws[1], oPerGroup = ws[0] / groups;
  Type type = elementTypeOf(c.getResult());
  Type acc = is16BitFloat(type) ? b_.getF32Type() : type;
  SmallVector<int64_t> bounds{cPerGroup};
  for (size_t d = 0; d < spatial; ++d)
    bounds.push_back(ws[2 + d]);
  return reduce(ReduceKind::Sum, type, bounds, [&](const Index &r) {
    Index xi{idx[0], idx[1].floorDiv(oPerGroup) * cPerGroup + r[0]};
    Index wi{idx[1], r[0]};
    Value valid;
    for (size_t d = 0; d < spatial; ++d) {
      int64_t L = c.getLhsDilation()[d];
      AffineExpr n = sizeAtLeast(c, xs[2 + d], 1, "a spatial dim");
      // Position in the dilated, padded input.
      AffineExpr p = idx[2 + d] * c.getStrides()[d] + r[1 + d] * c.getRhsDilation()[d] -
                     c.getPadLow()[d];
      Value pv = index(p);
      Value ok = binary(BinaryKind::And, compare(CompareKind::Ge, pv, constantIndex(0)),
                        compare(CompareKind::Lt, pv, index((n - 1) * L + 1)));
      if (L != 1)
        ok = binary(BinaryKind::And, ok,
                    compare(CompareKind::Eq, index(p % L), constantIndex(0)));
      valid = valid ? binary(BinaryKind::And, valid, ok) : ok;
      xi.push_back(clamp(index(L == 1 ? p : p.floorDiv(L)), getAffineConstantExpr(0, context()),
                         n - 1));
      wi.push_back(r[1 + d]);
    }
    Value x = cast(element(c.getInput(), xi), acc), w = cast(element(c.getWeight(), wi), acc);
    Value prod = binary(BinaryKind::Mul, x, w);
    return valid ? select(valid, prod, constant(acc, 0)) : prod;
  });
}

Value KernelEmitter::computeReduceWindow(ReduceWindowOp r, ArrayRef<AffineExpr> idx) {
  SymShape xs = symShapeOf(r.getX());
  ArrayRef<int64_t> window = r.getWindow();
  Type type = elementTypeOf(r.getResult());
  Type acc = is16BitFloat(type) ? b_.getF32Type() : type;
  return reduce(r.getKind(), type, window, [&](const Index &w) {
    Index xi;
    Value valid;
    for (size_t d = 0; d < xs.size(); ++d) {
      AffineExpr p = idx[d] * r.getStrides()[d] + w[d] * r.getDilations()[d] - r.getPadLow()[d];
      bool mayLeave = r.getPadLow()[d] != 0 || r.getPadHigh()[d] != 0;
      if (!mayLeave) {
        xi.push_back(p);
        continue;
      }
      Value pv = index(p);
      Value n = index(size(xs[d]));
      Value ok = binary(BinaryKind::And, compare(CompareKind::Ge, pv, constantIndex(0)),
                        compare(CompareKind::Lt, pv, n));
      valid = valid ? binary(BinaryKind::And, valid, ok) : ok;
      Value last = binary(BinaryKind::Max, binary(BinaryKind::Sub, n, constantIndex(1)),
                          constantIndex(0));
      xi.push_back(newDim(binary(BinaryKind::Min, binary(BinaryKind::Max, pv, constantIndex(0)),
                                 last)));
    }
    Value x = cast(element(r.getX(), xi), acc);
    return valid ? select(valid, x, identity(r.getKind(), acc)) : x;
  });
}

//===--- Kernel skeletons -------------------------------------------------------===//

namespace {

/// Finds, for a full-shape value `y` of a row group with row shape `rows`, which of its dims
/// are the row dims: the index at which it reads a reduction result of the group, when that is
/// a projection; else the first dims whose sizes match.
std::optional<SmallVector<int64_t>> rowDimsOf(Value y, ArrayRef<SymExpr> rows, Block &body) {
  SymShape space = symShapeOf(y);
  MLIRContext *ctx = y.getContext();
  llvm::DenseSet<Value> visited;
  std::optional<SmallVector<int64_t>> found;
  std::function<void(Value, Index)> walk = [&](Value v, Index idx) {
    if (found || !visited.insert(v).second)
      return;
    Operation *op = v.getDefiningOp();
    if (!op || op->getBlock() != &body)
      return;
    if (isa<ReduceOp, ArgReduceOp>(op)) {
      if (symShapeOf(v) == SymShape(rows))
        found = asProjection(idx, space, rows);
      return;
    }
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (auto sub = affineOperandIndex(op, i, idx))
        walk(op->getOperand(i), *sub);
  };
  walk(y, spaceIndex(ctx, space));
  if (found)
    return found;
  // Greedy: the first dims matching the row sizes, in order.
  SmallVector<int64_t> dims;
  size_t s = 0;
  for (const SymExpr &r : rows) {
    if (r == SymExpr(1)) {
      dims.push_back(-1);
      continue;
    }
    while (s < space.size() && space[s] != r)
      ++s;
    if (s == space.size())
      return std::nullopt;
    dims.push_back(s++);
  }
  return dims;
}

void buildCumsum(KernelEmitter &e, CumsumOp c, Value out) {
  SymShape xs = symShapeOf(c.getX());
  int64_t dim = c.getDim();
  AffineExpr n = e.size(xs[dim]);
  SymShape outer = xs;
  outer.erase(outer.begin() + dim);
  Type type = elementTypeOf(c.getResult());
  Type acc = is16BitFloat(type) ? e.builder().getF32Type() : type;
  e.parallel(outer, [&](const Index &o) {
    e.forLoop(xs[dim], {e.constant(acc, 0)}, [&](AffineExpr k, ValueRange carried) {
      Index xi(o.begin(), o.end());
      xi.insert(xi.begin() + dim, c.getReverse() ? (n - 1) - k : k);
      Value x = e.cast(e.element(c.getX(), xi), acc);
      Value next = e.binary(BinaryKind::Add, carried[0], x);
      e.store(e.cast(c.getExclusive() ? carried[0] : next, type), out, xi);
      return SmallVector<Value>{next};
    });
  });
}

/// Combines an existing element with an update per the scatter reduction.
Value combine(KernelEmitter &e, ScatterReduction r, Value old, Value update) {
  switch (r) {
  case ScatterReduction::None: return update;
  case ScatterReduction::Add: return e.binary(BinaryKind::Add, old, update);
  case ScatterReduction::Mul: return e.binary(BinaryKind::Mul, old, update);
  case ScatterReduction::Max: return e.binary(BinaryKind::Max, old, update);
  case ScatterReduction::Min: return e.binary(BinaryKind::Min, old, update);
  }
  return update;
}

/// `out` already holds x (copied by the program): updates are applied in order.
void buildScatterElements(KernelEmitter &e, ScatterElementsOp s, Value out) {
  SymShape is = symShapeOf(s.getIndices()), xs = symShapeOf(s.getX());
  int64_t axis = s.getAxis();
  SymShape outer = is;
  outer.erase(outer.begin() + axis);
  // Updates to one line along `axis` may collide: that line is walked sequentially.
  e.parallel(outer, [&](const Index &o) {
    e.forLoop(is[axis], {}, [&](AffineExpr k, ValueRange) {
      Index ui(o.begin(), o.end());
      ui.insert(ui.begin() + axis, k);
      Index xi(ui);
      xi[axis] = e.normalizedIndex(e.element(s.getIndices(), ui), xs[axis]);
      Value update = e.element(s.getUpdates(), ui);
      Value old = s.getReduction() == ScatterReduction::None ? Value() : e.load(out, xi);
      e.store(combine(e, s.getReduction(), old, update), out, xi);
      return SmallVector<Value>{};
    });
  });
}

void buildScatterND(KernelEmitter &e, ScatterNDOp s, Value out) {
  SymShape is = symShapeOf(s.getIndices()), xs = symShapeOf(s.getX());
  int64_t q = is.size(), k = *is.back().constant();
  SymShape tupleShape(is.begin(), is.end() - 1);
  SymExpr tuples = productOf(tupleShape);
  SymShape chunk(xs.begin() + k, xs.end());
  MLIRContext *ctx = e.context();
  auto module = s->getParentOfType<ModuleOp>();
  e.parallel(chunk, [&](const Index &c) {
    e.forLoop(tuples, {}, [&](AffineExpr t, ValueRange) {
      // The tuple's position in the indices' leading dims.
      std::optional<Index> ti = reshapeIndex(SymShape{tuples}, {t}, tupleShape, module);
      if (!ti)
        fail(s, "its index tuples' shape " + shapeString(tupleShape) +
                    " has a size with no index-expression form");
      Index xi;
      for (int64_t j = 0; j < k; ++j) {
        Index ii(*ti);
        ii.push_back(getAffineConstantExpr(j, ctx));
        xi.push_back(e.normalizedIndex(e.element(s.getIndices(), ii), xs[j]));
      }
      xi.append(c.begin(), c.end());
      Index ui(*ti);
      ui.append(c.begin(), c.end());
      Value update = e.element(s.getUpdates(), ui);
      Value old = s.getReduction() == ScatterReduction::None ? Value() : e.load(out, xi);
      e.store(combine(e, s.getReduction(), old, update), out, xi);
      return SmallVector<Value>{};
    });
  });
  (void)q;
}

void buildDynamicUpdateSlice(KernelEmitter &e, DynamicUpdateSliceOp d, Value out) {
  SymShape xs = symShapeOf(d.getX()), us = symShapeOf(d.getUpdate());
  SymbolRanges ranges = symbolRanges(d->getParentOfType<ModuleOp>());
  for (size_t i = 0; i < xs.size(); ++i)
    if (rangeOf(xs[i] - us[i], ranges).min < 0)
      fail(d, "its update's dim " + std::to_string(i) + " (" + us[i].str() +
                  ") may exceed the data's (" + xs[i].str() + ") at a size in the compiled "
                  "ranges");
  e.parallel(us, [&](const Index &u) {
    Index xi;
    for (size_t i = 0; i < xs.size(); ++i) {
      Value s = e.cast(e.element(d.getStarts()[i], {}), e.builder().getIndexType());
      xi.push_back(e.clamp(s, getAffineConstantExpr(0, e.context()), e.size(xs[i] - us[i])) + u[i]);
    }
    e.store(e.element(d.getUpdate(), u), out, xi);
  });
}

/// Whether the concat `c` computed in a kernel is worth a loop per input (each output element
/// then computes its own input's element only, instead of every input's and a chain of
/// selects): along an outer dim always; along the innermost dim when every input is at least
/// 16 elements long there (shorter inner loops would cost more than the selects save).
bool worthLoopPerInput(ConcatOp c) {
  int64_t axis = c.getAxis();
  if (c.getInputs().size() < 2)
    return false;
  if (axis + 1 < tensorType(c.getResult()).getRank())
    return true;
  return llvm::all_of(c.getInputs(), [&](Value in) {
    SymExpr n = symShapeOf(in)[axis];
    return n.constant().value_or(0) >= 16;
  });
}

/// Stores `v` (`shape`) into `out` at `offsets` from its origin: a concat computed in the
/// kernel as one loop per input (recursively: regions of regions), anything else as one loop.
void storeConcatPieces(KernelEmitter &e, const llvm::DenseMap<Value, Value> &buffers, Value v,
                       Value out, const SymShape &shape, const SymShape &offsets) {
  auto concat = dyn_cast_or_null<ConcatOp>(v.getDefiningOp());
  if (concat && !buffers.count(v) && worthLoopPerInput(concat)) {
    int64_t axis = concat.getAxis();
    SymShape pieceShape = shape, pieceOffsets = offsets;
    for (Value in : concat.getInputs()) {
      pieceShape[axis] = symShapeOf(in)[axis];
      if (pieceShape[axis] != SymExpr(0))
        storeConcatPieces(e, buffers, in, out, pieceShape, pieceOffsets);
      pieceOffsets[axis] = pieceOffsets[axis] + pieceShape[axis];
    }
    return;
  }
  e.parallel(shape, [&](const Index &idx) {
    Index at(idx.begin(), idx.end());
    for (size_t d = 0; d < at.size(); ++d)
      at[d] = at[d] + e.size(offsets[d]);
    e.store(e.element(v, idx), out, at);
  });
}

} // namespace

void buildKernelBody(OpBuilder &b, Location loc, Block &body,
                     const llvm::DenseMap<Value, Value> &buffers, ArrayRef<Value> outputs,
                     bool splitConcats) {
  KernelEmitter e(b, loc);
  for (auto &[tensor, memref] : buffers)
    e.bindBuffer(tensor, memref);
  auto yields = body.getTerminator()->getOperands();

  // A sequential op is the only yield of its group.
  for (Operation &op : body) {
    if (!isa<CumsumOp, ScatterElementsOp, ScatterNDOp, DynamicUpdateSliceOp>(op))
      continue;
    if (yields.size() != 1 || yields[0] != op.getResult(0))
      fail(&op, "must be the only result of its fusion");
    llvm::TypeSwitch<Operation *>(&op)
        .Case<CumsumOp>([&](CumsumOp c) { buildCumsum(e, c, outputs[0]); })
        .Case<ScatterElementsOp>([&](ScatterElementsOp s) { buildScatterElements(e, s, outputs[0]); })
        .Case<ScatterNDOp>([&](ScatterNDOp s) { buildScatterND(e, s, outputs[0]); })
        .Case<DynamicUpdateSliceOp>(
            [&](DynamicUpdateSliceOp d) { buildDynamicUpdateSlice(e, d, outputs[0]); });
    return;
  }

  // Row reductions of the group: the last one's result shape is the row space.
  SmallVector<Operation *> reductions;
  for (Operation &op : body)
    if (isa<ReduceOp, ArgReduceOp>(op) && !buffers.count(op.getResult(0)))
      reductions.push_back(&op);

  SmallVector<size_t> stored;
  for (size_t i = 0; i < yields.size(); ++i)
    if (outputs[i])
      stored.push_back(i);
  if (stored.empty())
    return;

  if (reductions.empty()) {
    SymShape shape = symShapeOf(yields[stored[0]]);
    for (size_t i : stored)
      if (symShapeOf(yields[i]) != shape)
        fail(body.getParentOp(), "pointwise fusion results must all have one shape");
    if (splitConcats && stored.size() == 1) {
      storeConcatPieces(e, buffers, yields[stored[0]], outputs[stored[0]], shape,
                        SymShape(shape.size(), SymExpr(0)));
      return;
    }
    e.parallel(shape, [&](const Index &idx) {
      for (size_t i : stored)
        e.store(e.element(yields[i], idx), outputs[i], idx);
    });
    return;
  }

  SymShape rows = symShapeOf(reductions.back()->getResult(0));
  // Full-shape yields, grouped by (shape, row dims) to share an inner loop.
  struct Inner {
    SymShape shape;
    SmallVector<int64_t> rowDims;
    SmallVector<size_t> yields;
  };
  SmallVector<Inner> inners;
  SmallVector<size_t> rowYields;
  for (size_t i : stored) {
    if (symShapeOf(yields[i]) == rows) {
      rowYields.push_back(i);
      continue;
    }
    auto dims = rowDimsOf(yields[i], rows, body);
    if (!dims)
      fail(yields[i].getDefiningOp() ? yields[i].getDefiningOp() : body.getParentOp(),
           "fusion result does not contain the row dims of the fusion's reductions");
    SymShape shape = symShapeOf(yields[i]);
    auto it = llvm::find_if(inners, [&](const Inner &in) {
      return in.shape == shape && in.rowDims == *dims;
    });
    if (it == inners.end()) {
      inners.push_back({shape, *dims, {}});
      it = std::prev(inners.end());
    }
    it->yields.push_back(i);
  }

  e.parallel(rows, [&](const Index &row) {
    // Each reduction at the current row, once; consumers then find it memoised.
    for (Operation *r : reductions)
      if (symShapeOf(r->getResult(0)) == rows)
        e.element(r->getResult(0), row);
    for (const Inner &in : inners) {
      SymShape innerShape;
      SmallVector<bool> isRow(in.shape.size(), false);
      for (int64_t d : in.rowDims)
        if (d >= 0)
          isRow[d] = true;
      for (size_t d = 0; d < in.shape.size(); ++d)
        if (!isRow[d])
          innerShape.push_back(in.shape[d]);
      e.parallel(innerShape, [&](const Index &inner) {
        Index full(in.shape.size(), getAffineConstantExpr(0, e.context()));
        for (size_t k = 0; k < in.rowDims.size(); ++k)
          if (in.rowDims[k] >= 0)
            full[in.rowDims[k]] = row[k];
        for (size_t d = 0, n = 0; d < in.shape.size(); ++d)
          if (!isRow[d])
            full[d] = inner[n++];
        for (size_t i : in.yields)
          e.store(e.element(yields[i], full), outputs[i], full);
      });
    }
    for (size_t i : rowYields)
      e.store(e.element(yields[i], row), outputs[i], row);
  });
}

void hoistLoopInvariants(Operation *kernel) {
  SmallVector<Operation *> loops;
  kernel->walk<WalkOrder::PostOrder>([&](Operation *op) {
    if (isa<tk::ParallelOp, tk::ReduceOp, tk::ArgReduceOp, tk::ForOp>(op))
      loops.push_back(op);
  });
  for (Operation *loop : loops) {
    // Kernel bodies stay one loop nest: nothing moves above the outermost loop.
    if (!isa<tk::ParallelOp, tk::ReduceOp, tk::ArgReduceOp, tk::ForOp>(loop->getParentOp()))
      continue;
    bool runs = true;
    if (auto p = dyn_cast<tk::ParallelOp>(loop))
      runs = llvm::all_of(p.getBounds(), [](int64_t b) { return b > 0; });
    else if (auto r = dyn_cast<tk::ReduceOp>(loop))
      runs = llvm::all_of(r.getBounds(), [](int64_t b) { return b > 0; });
    else if (auto f = dyn_cast<tk::ForOp>(loop))
      runs = f.getCount() > 0;
    llvm::DenseSet<Value> written;
    loop->walk([&](tk::StoreOp s) { written.insert(s.getMemref()); });
    Block &body = loop->getRegion(0).front();
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      bool invariant = llvm::all_of(op.getOperands(), [&](Value v) {
        return !loop->isAncestor(v.getParentBlock()->getParentOp());
      });
      if (!invariant || op.getNumRegions() != 0)
        continue;
      bool hoist = false;
      if (auto b = dyn_cast<tk::BinaryOp>(op))
        // Integer division may trap: only where it ran anyway.
        hoist = runs || isa<FloatType>(b.getType()) ||
                (b.getKind() != BinaryKind::Div && b.getKind() != BinaryKind::Rem);
      else if (auto l = dyn_cast<tk::LoadOp>(op))
        hoist = runs && !written.contains(l.getMemref());
      else
        hoist = isa<tk::ConstantOp, tk::UnaryOp, tk::CompareOp, tk::SelectOp, tk::CastOp,
                    tk::ApplyOp>(op);
      if (hoist)
        op.moveBefore(loop);
    }
  }
}

} // namespace tcc::kernel
