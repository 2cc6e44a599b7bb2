//===- FusionUtils.cpp - Op classes and index maps shared by fusion and lowering --===//
//
// See FusionUtils.h. Everything here is a pure function of an op's types and attributes.
//
//===----------------------------------------------------------------------===//
#include "FusionUtils.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Support/PoolShapes.h"

#include <cstring>

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstring>

using namespace mlir;

namespace tcc::fusion {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }
ArrayRef<int64_t> shapeOf(Value v) { return tensorType(v).getShape(); }
SymShape symShapeOf(Value v) { return symbolicShape(v.getType()); }

std::optional<AffineExpr> sizeExpr(const SymExpr &size, ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  if (std::optional<int64_t> c = size.constant())
    return getAffineConstantExpr(*c, ctx);
  using Kind = SymExpr::AtomKind;
  AffineExpr sum = getAffineConstantExpr(0, ctx);
  for (const SymExpr::TermView &term : size.terms()) {
    AffineExpr t = getAffineConstantExpr(term.coeff, ctx);
    for (const auto &[atom, power] : term.factors) {
      AffineExpr a;
      if (atom.kind == Kind::Symbol) {
        int64_t pos = tk::symbolPosition(module, atom.name);
        if (pos < 0)
          return std::nullopt;
        a = getAffineSymbolExpr(pos, ctx);
      } else {
        std::optional<AffineExpr> x = sizeExpr(atom.operands[0], module),
                                  y = sizeExpr(atom.operands[1], module);
        if (!x || !y)
          return std::nullopt;
        switch (atom.kind) {
        case Kind::FloorDiv: a = x->floorDiv(*y); break;
        case Kind::CeilDiv: a = x->ceilDiv(*y); break;
        case Kind::Mod: a = *x % *y; break;
        default: return std::nullopt; // max, min
        }
      }
      for (int64_t p = 0; p < power; ++p)
        t = t * a;
    }
    sum = sum + t;
  }
  return sum;
}

Index spaceIndex(MLIRContext *ctx, ArrayRef<SymExpr> shape) {
  Index idx;
  for (unsigned i = 0; i < shape.size(); ++i)
    idx.push_back(shape[i] == SymExpr(1) ? getAffineConstantExpr(0, ctx)
                                         : getAffineDimExpr(i, ctx));
  return idx;
}

std::optional<SmallVector<int64_t>> asProjection(ArrayRef<AffineExpr> index,
                                                 ArrayRef<SymExpr> space,
                                                 ArrayRef<SymExpr> target) {
  if (index.size() != target.size())
    return std::nullopt;
  SmallVector<int64_t> dims;
  for (size_t i = 0; i < index.size(); ++i) {
    if (auto c = dyn_cast<AffineConstantExpr>(index[i]);
        c && c.getValue() == 0 && target[i] == SymExpr(1)) {
      dims.push_back(-1);
      continue;
    }
    auto d = dyn_cast<AffineDimExpr>(index[i]);
    if (!d || d.getPosition() >= space.size() || space[d.getPosition()] != target[i])
      return std::nullopt;
    if (!dims.empty() && llvm::any_of(dims, [&](int64_t p) { return p >= (int64_t)d.getPosition(); }))
      return std::nullopt;
    dims.push_back(d.getPosition());
  }
  return dims;
}

bool isLibraryMatmul(MatmulOp op) {
  Type e = tensorType(op.getResult()).getElementType();
  return e.isF32() || e.isF64() || e.isF16() || e.isBF16();
}

bool isLibraryConv(ConvOp op, Target target) {
  Type e = tensorType(op.getResult()).getElementType();
  return e.isF32() || (target == Target::Cpu && (e.isF16() || e.isBF16()));
}

bool isLibraryPool(ReduceWindowOp op, Target target) {
  auto type = tensorType(op.getResult());
  if (target != Target::Cpu || !type.getElementType().isF32() || type.getRank() != 4 ||
      (op.getKind() != ReduceKind::Max && op.getKind() != ReduceKind::Sum))
    return false;
  bool paddedOrOverlapping = false;
  for (int64_t d = 0; d < 4; ++d)
    paddedOrOverlapping |= op.getPadLow()[d] || op.getPadHigh()[d] ||
                           (op.getWindow()[d] - 1) * op.getDilations()[d] + 1 > op.getStrides()[d];
  // Disjoint windows without padding stay loop kernels: their loads are affine (vectorised)
  // and the producers' pointwise chain fuses into them (read once, never written).
  return paddedOrOverlapping &&
         poolsAdjacentDims(pooledDims(op.getWindow(), op.getStrides(), op.getPadLow(),
                                      op.getPadHigh(), op.getDilations()));
}

bool isCopyConcat(ConcatOp op) {
  // Its slabs' offsets are fixed at compile time: symbolic concats are loops.
  if (op.getInputs().size() <= kMaxSelectConcatInputs || hasSymbolicDims(op.getResult().getType()))
    return false;
  ArrayRef<int64_t> shape = shapeOf(op.getResult());
  return llvm::all_of(shape.take_front(op.getAxis()), [](int64_t d) { return d == 1; });
}

DenseElementsAttr constantVectorAlong(DenseElementsAttr c, int64_t dim) {
  auto type = c.getType();
  if (dim < 0 || dim >= type.getRank())
    return {};
  int64_t n = type.getDimSize(dim);
  auto vectorType = RankedTensorType::get({n}, type.getElementType());
  if (c.isSplat())
    return DenseElementsAttr::get(vectorType, c.getSplatValue<Attribute>());
  int64_t inner = 1; // elements between consecutive indices along dim
  for (int64_t d = dim + 1; d < type.getRank(); ++d)
    inner *= type.getDimSize(d);
  ArrayRef<char> raw = c.getRawData();
  int64_t count = type.getNumElements();
  if (count == 0 || raw.size() % count != 0)
    return {};
  size_t bytes = raw.size() / count; // packed element size (no i1 here: float constants)
  std::vector<char> vector(n * bytes);
  for (int64_t i = 0; i < count; ++i) {
    int64_t k = i / inner % n;
    const char *e = raw.data() + i * bytes;
    if (i / inner < n) // the first occurrence of k: every leading index 0
      std::memcpy(vector.data() + k * bytes, e, bytes);
    else if (std::memcmp(vector.data() + k * bytes, e, bytes) != 0)
      return {};
  }
  return DenseElementsAttr::getFromRawBuffer(vectorType, vector);
}

std::optional<double> splatFloatValue(Value v) {
  while (true) {
    if (auto b = v.getDefiningOp<BroadcastInDimOp>())
      v = b.getX();
    else if (auto r = v.getDefiningOp<ReshapeOp>())
      v = r.getX();
    else
      break;
  }
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  APFloat value = attr.getSplatValue<APFloat>();
  bool losesInfo;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &losesInfo);
  return value.convertToDouble();
}

OpClass classify(Operation *op, Target target) {
  return llvm::TypeSwitch<Operation *, OpClass>(op)
      .Case<ConstantOp>([](auto) { return OpClass::Constant; })
      .Case<ConcatOp>([](ConcatOp c) {
        return isCopyConcat(c) ? OpClass::WholeBuffer : OpClass::Pointwise;
      })
      .Case<UnaryOp, BinaryOp, CompareOp, SelectOp, CastOp, BitcastOp, ReshapeOp, TransposeOp,
            BroadcastInDimOp, SliceOp, ReverseOp, PadOp, IotaOp, DynamicSliceOp,
            GatherOp, GatherElementsOp, GatherNDOp>([](auto) { return OpClass::Pointwise; })
      .Case<ReduceOp, ArgReduceOp>([](auto) { return OpClass::Reduction; })
      .Case<MatmulOp>([](MatmulOp m) {
        return isLibraryMatmul(m) ? OpClass::Library : OpClass::LoopRoot;
      })
      .Case<ConvOp>([&](ConvOp c) {
        return isLibraryConv(c, target) ? OpClass::Library : OpClass::LoopRoot;
      })
      .Case<ReduceWindowOp>([&](ReduceWindowOp w) {
        return isLibraryPool(w, target) ? OpClass::Library : OpClass::LoopRoot;
      })
      .Case<CumsumOp, ScatterElementsOp, ScatterNDOp, DynamicUpdateSliceOp>(
          [](auto) { return OpClass::Sequential; })
      .Case<TopKOp, AttentionOp, AttentionGradOp, AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp, BroadcastOp,
            SendOp, RecvOp>(
          [](auto) { return OpClass::WholeBuffer; })
      .Default([](Operation *) { return OpClass::Control; });
}

bool isLastTwoSwap(ArrayRef<int64_t> perm) {
  int64_t r = perm.size();
  if (r < 2 || perm[r - 1] != r - 2 || perm[r - 2] != r - 1)
    return false;
  for (int64_t i = 0; i < r - 2; ++i)
    if (perm[i] != i)
      return false;
  return true;
}

bool isGemmAbsorbable(Operation *op) {
  if (auto t = dyn_cast_or_null<TransposeOp>(op))
    return isLastTwoSwap(t.getPerm());
  if (auto b = dyn_cast_or_null<BroadcastInDimOp>(op)) {
    ArrayRef<int64_t> in = shapeOf(b.getX()), out = shapeOf(b.getResult());
    int64_t ri = in.size(), ro = out.size();
    if (ri < 2)
      return false;
    // Trailing, in order: operand dim i is result dim ro - ri + i.
    for (int64_t i = 0; i < ri; ++i)
      if (b.getDims()[i] != ro - ri + i)
        return false;
    if (in[ri - 1] != out[ro - 1] || in[ri - 2] != out[ro - 2])
      return false;
    for (int64_t i = 0; i < ri - 2; ++i)
      if (in[i] != 1 && in[i] != out[ro - ri + i])
        return false;
    return true;
  }
  return false;
}

Index identityIndex(MLIRContext *ctx, unsigned rank) {
  Index idx;
  for (unsigned i = 0; i < rank; ++i)
    idx.push_back(getAffineDimExpr(i, ctx));
  return idx;
}

Index spaceIndex(MLIRContext *ctx, ArrayRef<int64_t> shape) {
  Index idx;
  for (unsigned i = 0; i < shape.size(); ++i)
    idx.push_back(shape[i] == 1 ? getAffineConstantExpr(0, ctx) : getAffineDimExpr(i, ctx));
  return idx;
}

/// One more than the highest position of an `Id` (AffineDimExpr or AffineSymbolExpr) in `exprs`.
template <class Id> static unsigned countOf(ArrayRef<AffineExpr> exprs) {
  unsigned n = 0;
  for (AffineExpr e : exprs)
    e.walk([&](AffineExpr s) {
      if (auto id = dyn_cast<Id>(s))
        n = std::max(n, id.getPosition() + 1);
    });
  return n;
}
static unsigned numDimsOf(ArrayRef<AffineExpr> exprs) { return countOf<AffineDimExpr>(exprs); }
unsigned numSymbolsOf(ArrayRef<AffineExpr> exprs) { return countOf<AffineSymbolExpr>(exprs); }

AffineExpr simplifyIndexExpr(AffineExpr e, unsigned numDims) {
  return simplifyAffineExpr(e, numDims, numSymbolsOf(e));
}

Index simplify(ArrayRef<AffineExpr> index, unsigned numDims) {
  Index out;
  for (AffineExpr e : index)
    out.push_back(simplifyIndexExpr(e, numDims));
  return out;
}

Index reshapeIndex(ArrayRef<int64_t> resultShape, ArrayRef<AffineExpr> resultIndex,
                   ArrayRef<int64_t> operandShape, MLIRContext *ctx) {
  AffineExpr zero = getAffineConstantExpr(0, ctx);
  Index out(operandShape.size(), zero);
  int64_t total = 1;
  for (int64_t s : resultShape)
    total *= s;
  if (total == 0)
    return out;
  // Dims of size > 1 on both sides, grouped into runs with equal products.
  SmallVector<unsigned> rd, od;
  for (unsigned i = 0; i < resultShape.size(); ++i)
    if (resultShape[i] != 1)
      rd.push_back(i);
  for (unsigned i = 0; i < operandShape.size(); ++i)
    if (operandShape[i] != 1)
      od.push_back(i);
  size_t ri = 0, oi = 0;
  while (ri < rd.size() && oi < od.size()) {
    size_t rEnd = ri + 1, oEnd = oi + 1;
    int64_t rp = resultShape[rd[ri]], op = operandShape[od[oi]];
    while (rp != op) {
      if (rp < op)
        rp *= resultShape[rd[rEnd++]];
      else
        op *= operandShape[od[oEnd++]];
    }
    if (rEnd - ri == 1 && oEnd - oi == 1) {
      out[od[oi]] = resultIndex[rd[ri]];
    } else {
      AffineExpr linear = zero;
      int64_t stride = 1;
      for (size_t k = rEnd; k-- > ri;) {
        linear = linear + resultIndex[rd[k]] * stride;
        stride *= resultShape[rd[k]];
      }
      stride = 1;
      for (size_t k = oEnd; k-- > oi;) {
        AffineExpr e = stride == 1 ? linear : linear.floorDiv(stride);
        if (k != oi)
          e = e % operandShape[od[k]];
        out[od[k]] = e;
        stride *= operandShape[od[k]];
      }
    }
    ri = rEnd;
    oi = oEnd;
  }
  return simplify(out, numDimsOf(resultIndex));
}

std::optional<Index> reshapeIndex(ArrayRef<SymExpr> resultShape, ArrayRef<AffineExpr> resultIndex,
                                  ArrayRef<SymExpr> operandShape, ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  std::optional<SmallVector<int64_t>> rs = staticDims(resultShape), os = staticDims(operandShape);
  if (rs && os)
    return reshapeIndex(*rs, resultIndex, *os, ctx);
  AffineExpr zero = getAffineConstantExpr(0, ctx);
  Index out(operandShape.size(), zero);
  SmallVector<unsigned> rd, od; // dims not statically 1
  for (unsigned i = 0; i < resultShape.size(); ++i)
    if (resultShape[i] != SymExpr(1))
      rd.push_back(i);
  for (unsigned i = 0; i < operandShape.size(); ++i)
    if (operandShape[i] != SymExpr(1))
      od.push_back(i);
  // Groups of dims with equal products: extend the side whose product divides the other's;
  // when neither does, the rest is one group (correct, with more index arithmetic).
  size_t ri = 0, oi = 0;
  while (ri < rd.size() && oi < od.size()) {
    size_t rEnd = ri + 1, oEnd = oi + 1;
    SymExpr rp = resultShape[rd[ri]], op = operandShape[od[oi]];
    while (rp != op) {
      bool rDividesO = SymExpr::divideExactly(op, rp).has_value() && rEnd < rd.size();
      bool oDividesR = SymExpr::divideExactly(rp, op).has_value() && oEnd < od.size();
      if (rDividesO) {
        rp *= resultShape[rd[rEnd++]];
      } else if (oDividesR) {
        op *= operandShape[od[oEnd++]];
      } else {
        rEnd = rd.size();
        oEnd = od.size();
        break;
      }
    }
    auto extent = [&](const SymExpr &e) { return sizeExpr(e, module); };
    if (rEnd - ri == 1 && oEnd - oi == 1) {
      out[od[oi]] = resultIndex[rd[ri]];
    } else {
      AffineExpr linear = zero, stride = getAffineConstantExpr(1, ctx);
      for (size_t k = rEnd; k-- > ri;) {
        std::optional<AffineExpr> n = extent(resultShape[rd[k]]);
        if (!n)
          return std::nullopt;
        linear = linear + resultIndex[rd[k]] * stride;
        stride = stride * *n;
      }
      stride = getAffineConstantExpr(1, ctx);
      for (size_t k = oEnd; k-- > oi;) {
        std::optional<AffineExpr> n = extent(operandShape[od[k]]);
        if (!n)
          return std::nullopt;
        AffineExpr e = stride == getAffineConstantExpr(1, ctx) ? linear : linear.floorDiv(stride);
        if (k != oi)
          e = e % *n;
        out[od[k]] = e;
        stride = stride * *n;
      }
    }
    ri = rEnd;
    oi = oEnd;
  }
  return simplify(out, numDimsOf(resultIndex));
}

std::optional<Index> affineOperandIndex(Operation *op, unsigned operandNo,
                                        ArrayRef<AffineExpr> idx) {
  MLIRContext *ctx = op->getContext();
  auto cst = [&](int64_t v) { return getAffineConstantExpr(v, ctx); };
  unsigned nd = numDimsOf(idx);
  return llvm::TypeSwitch<Operation *, std::optional<Index>>(op)
      .Case<UnaryOp, BinaryOp, CompareOp, SelectOp, CastOp, BitcastOp>(
          [&](auto) { return Index(idx.begin(), idx.end()); })
      .Case<BroadcastInDimOp>([&](BroadcastInDimOp b) -> std::optional<Index> {
        SymShape in = symShapeOf(b.getX());
        Index out;
        for (size_t i = 0; i < in.size(); ++i)
          out.push_back(in[i] == SymExpr(1) ? cst(0) : idx[b.getDims()[i]]);
        return out;
      })
      .Case<TransposeOp>([&](TransposeOp t) -> std::optional<Index> {
        Index out(idx.size(), cst(0));
        for (size_t i = 0; i < idx.size(); ++i)
          out[t.getPerm()[i]] = idx[i];
        return out;
      })
      .Case<SliceOp>([&](SliceOp s) -> std::optional<Index> {
        Index out;
        for (size_t i = 0; i < idx.size(); ++i)
          out.push_back(simplifyIndexExpr(idx[i] * s.getStride()[i] + s.getStart()[i], nd));
        return out;
      })
      .Case<ReverseOp>([&](ReverseOp r) -> std::optional<Index> {
        Index out(idx.begin(), idx.end());
        if (hasSymbolicDims(r.getX().getType()))
          return std::nullopt;
        ArrayRef<int64_t> shape = shapeOf(r.getX());
        for (int64_t d : r.getDims())
          out[d] = simplifyIndexExpr(cst(shape[d] - 1) - idx[d], nd);
        return out;
      })
      .Case<ReshapeOp>([&](ReshapeOp r) -> std::optional<Index> {
        if (hasSymbolicDims(r.getX().getType()) || hasSymbolicDims(r.getResult().getType()))
          return reshapeIndex(symShapeOf(r.getResult()), idx, symShapeOf(r.getX()),
                              op->getParentOfType<ModuleOp>());
        return reshapeIndex(shapeOf(r.getResult()), idx, shapeOf(r.getX()), ctx);
      })
      .Case<GatherOp>([&](GatherOp g) -> std::optional<Index> {
        if (operandNo != 1)
          return std::nullopt;
        int64_t axis = g.getAxis(), q = tensorType(g.getIndices()).getRank();
        return Index(idx.begin() + axis, idx.begin() + axis + q);
      })
      .Case<GatherElementsOp>([&](GatherElementsOp) -> std::optional<Index> {
        if (operandNo != 1)
          return std::nullopt;
        return Index(idx.begin(), idx.end());
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<SmallVector<int64_t>> asProjection(ArrayRef<AffineExpr> index,
                                                 ArrayRef<int64_t> space,
                                                 ArrayRef<int64_t> target) {
  if (index.size() != target.size())
    return std::nullopt;
  SmallVector<int64_t> dims;
  for (size_t i = 0; i < index.size(); ++i) {
    if (auto c = dyn_cast<AffineConstantExpr>(index[i]); c && c.getValue() == 0 && target[i] == 1) {
      dims.push_back(-1); // a size-1 dim of the target, indexed by 0: no dim of the space
      continue;
    }
    auto d = dyn_cast<AffineDimExpr>(index[i]);
    if (!d || d.getPosition() >= space.size() || space[d.getPosition()] != target[i])
      return std::nullopt;
    for (int64_t prev : dims)
      if (prev >= (int64_t)d.getPosition())
        return std::nullopt;
    dims.push_back(d.getPosition());
  }
  return dims;
}

} // namespace tcc::fusion
