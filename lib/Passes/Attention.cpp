//===- Attention.cpp - Recognising and decomposing tcc.attention ----------------===//
//
// -tcc-recognize-attention finds, in a graph function, every
//     matmul(softmax(scores), v)
// whose scores are a chain over matmul(q', k'^T) of: scalar multiplications or divisions (on
// the product, or on q' and k'^T before it, as torch's SDPA export scales both), at most one
// boolean mask (tcc.select with a splat fill on either side: masked_fill exports as
// Where(mask, fill, x)) and at most one additive bias. Heads split by reshape/transpose stay
// outside; k'^T may be a transpose of the last two dims (absorbed) or any value (a transpose
// is inserted); keys and values repeated for grouped-query attention (unsqueeze, expand,
// reshape: a broadcast_in_dim + reshape) are read unrepeated. A mask or bias that is the
// upper-left causal triangle (a constant, or iota comparisons) becomes `causal`. The softmax
// is the frontend's (max-shifted, reduce sum, div) or unshifted; every intermediate value must
// be used only inside the pattern. Each match becomes one tcc.attention.
//
// -tcc-decompose-attention writes each tcc.attention back as core ops (tcc/IR/Attention.h),
// except the ones the `target`'s fused kernel runs: the CPU runtime's (f32), CUDA's generated
// one (f16/bf16, head dims multiples of 16 up to 128).
//
//===----------------------------------------------------------------------===//
#include "FusionUtils.h"

#include "tcc/IR/Attention.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Passes/Passes.h"
#include "tcc/Support/AttentionShapes.h"

#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <limits>

namespace tcc {
#define GEN_PASS_DEF_RECOGNIZEATTENTION
#define GEN_PASS_DEF_DECOMPOSEATTENTION
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc::fusion;

namespace tcc {
namespace {

/// Masked scores at or below this are taken for -inf: they underflow exp() after the max shift.
/// It is f16's lowest finite value, which exporters use as a finite -inf in f16 models
/// (finfo(float16).min); f32's and bf16's are -3.4e38.
constexpr double kMaskedBelow = -65504.0;

/// `v` with reshapes and broadcasts that only add or remove unit dims looked through.
Value throughUnitDims(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    Value x;
    if (auto r = dyn_cast<ReshapeOp>(op))
      x = r.getX();
    else if (auto b = dyn_cast<BroadcastInDimOp>(op))
      x = b.getX();
    else
      break;
    auto dropUnits = [](SymShape s) {
      llvm::erase(s, SymExpr(1));
      return s;
    };
    if (dropUnits(symShapeOf(x)) != dropUnits(symShapeOf(v)))
      break;
    v = x;
  }
  return v;
}

/// A tensor that broadcasts (dims of size 1) to `scores`, from `v`, which is broadcast to it:
/// the broadcast's operand, reshaped to the scores' rank where it had fewer dims.
Value unbroadcastOperand(OpBuilder &builder, Location loc, Value v, ArrayRef<SymExpr> scores) {
  auto b = v.getDefiningOp<BroadcastInDimOp>();
  if (!b)
    return v;
  ArrayRef<int64_t> dims = b.getDims();
  SymShape in = symShapeOf(b.getX()), shape(scores.size(), SymExpr(1));
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0 && dims[i] <= dims[i - 1])
      return v;
    if (in[i] != SymExpr(1) && in[i] != scores[dims[i]])
      return v;
    shape[dims[i]] = in[i];
  }
  if (shape == in)
    return b.getX();
  auto type = tensorTypeWithDims(shape, CoreBuilder::elementTypeOf(v));
  return builder.create<ReshapeOp>(loc, type, b.getX());
}

/// The elements of `v` when it is a tcc.constant (dense or a resource blob).
std::optional<Tensor> constantValues(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  return tensorFromAttr(c.getValue());
}

/// Whether the integer constant or iota `x` counts 0, 1, .. along its one dim of size > 1 (an
/// iota along a dim: whatever the other sizes): that dim.
std::optional<int64_t> countingDim(Value x) {
  if (auto iota = x.getDefiningOp<IotaOp>())
    return (int64_t)iota.getDim();
  std::optional<Tensor> values = constantValues(x);
  if (!values || !isa<IntegerType>(CoreBuilder::elementTypeOf(x)))
    return std::nullopt;
  ArrayRef<int64_t> shape = shapeOf(x);
  std::optional<int64_t> dim;
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
    if (shape[d] != 1) {
      if (dim)
        return std::nullopt;
      dim = d;
    }
  for (int64_t i = 0; i < values->numElements(); ++i)
    if (values->getInt(i) != i)
      return std::nullopt;
  return dim ? dim : std::optional<int64_t>(0);
}

/// If `v` (rank r) is a count 0, 1, .. along one of its dims (an iota or a constant range,
/// possibly broadcast), that dim.
std::optional<int64_t> iotaDim(Value v, int64_t r) {
  if (CoreBuilder::rankOf(v) != r)
    return std::nullopt;
  if (auto b = v.getDefiningOp<BroadcastInDimOp>()) {
    std::optional<int64_t> dim = countingDim(b.getX());
    if (!dim)
      return std::nullopt;
    return b.getDims()[*dim];
  }
  return countingDim(v);
}

/// Whether `v` ends in [Lq, Lk] for scores [.., Lq, Lk].
bool isTriangleShape(Value v, ArrayRef<SymExpr> scores) {
  SymShape shape = symShapeOf(v);
  return shape.size() >= 2 && ArrayRef<SymExpr>(shape).take_back(2) == scores.take_back(2);
}

/// The tensor whose upper-left corner (in its last two dims) `v` is: `v` with slices from 0 by
/// 1 and gathers of the counts 0, 1, .. along those dims looked through. GPT-2's export takes
/// its causal mask so from a constant triangle of the longest sequence
/// (bias[:, :, :seq, :seq]), which with a symbolic seq imports as two gathers of iotas.
Value upperLeftCornerOf(Value v) {
  int64_t r = CoreBuilder::rankOf(v);
  while (Operation *op = v.getDefiningOp()) {
    if (auto g = dyn_cast<GatherOp>(op)) {
      std::optional<int64_t> counted = iotaDim(g.getIndices(), 1);
      if (g.getAxis() < r - 2 || !counted || *counted != 0)
        break;
      // The count must stay within the gathered dim at every size in the ranges: beyond it
      // the gather reads clamped rows, which are no corner (and the model is out of its
      // range there: onnxruntime rejects such indices).
      SymExpr count = symShapeOf(g.getIndices())[0], size = symShapeOf(g.getX())[g.getAxis()];
      if (count != size &&
          rangeOf(size - count, symbolRanges(op->getParentOfType<ModuleOp>())).min < 0)
        break;
      v = g.getX();
    } else if (auto slice = dyn_cast<SliceOp>(op)) {
      if (!llvm::all_of(slice.getStart(), [](int64_t x) { return x == 0; }) ||
          !llvm::all_of(slice.getStride(), [](int64_t x) { return x == 1; }))
        break;
      v = slice.getX();
    } else {
      break;
    }
  }
  return v;
}

/// ci*i + cj*j + c0 over a score's row i and column j.
struct RowColumnLinear {
  int64_t ci = 0, cj = 0, c0 = 0;
  RowColumnLinear operator+(const RowColumnLinear &o) const { return {ci + o.ci, cj + o.cj, c0 + o.c0}; }
  RowColumnLinear operator-(const RowColumnLinear &o) const { return {ci - o.ci, cj - o.cj, c0 - o.c0}; }
  RowColumnLinear operator-() const { return {-ci, -cj, -c0}; }
  RowColumnLinear operator*(int64_t k) const { return {ci * k, cj * k, c0 * k}; }
  bool isConstant() const { return ci == 0 && cj == 0; }
};

/// A predicate over (i, j): always true, always false, or linear >= 0.
struct RowColumnPredicate {
  enum Kind { True, False, AtLeastZero } kind = True;
  RowColumnLinear linear;
  RowColumnPredicate negated() const {
    if (kind != AtLeastZero)
      return {kind == True ? False : True, {}};
    // not(l >= 0) <=> -l - 1 >= 0 over the integers.
    return {AtLeastZero, -linear - RowColumnLinear{0, 0, 1}};
  }
};

/// Reads integer and boolean tensors that depend on nothing but a score's row and column: the
/// way exporters build causal masks (tril/triu of ones, arange comparisons) before constant
/// folding, or where symbolic sizes keep them from folding. `iDim` and `jDim` are the value's
/// dims that the scores' row and column dims map to (-1 where it has none).
class RowColumnAnalysis {
public:
  std::optional<RowColumnLinear> linear(Value v, int64_t iDim, int64_t jDim, int depth = 0) {
    if (depth > kMaxDepth || !isa<IntegerType>(CoreBuilder::elementTypeOf(v)))
      return std::nullopt;
    if (std::optional<int64_t> counted = iotaDim(v, CoreBuilder::rankOf(v))) {
      if (*counted == iDim)
        return RowColumnLinear{1, 0, 0};
      if (*counted == jDim)
        return RowColumnLinear{0, 1, 0};
      return std::nullopt;
    }
    if (auto b = v.getDefiningOp<BroadcastInDimOp>()) {
      auto [xi, xj] = operandDims(b, iDim, jDim);
      return linear(b.getX(), xi, xj, depth + 1);
    }
    if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
      auto dims = operandDims(reshape, iDim, jDim);
      return dims ? linear(reshape.getX(), dims->first, dims->second, depth + 1) : std::nullopt;
    }
    if (std::optional<Tensor> c = splatValues(v))
      return RowColumnLinear{0, 0, c->getInt(0)};
    auto bin = v.getDefiningOp<BinaryOp>();
    if (!bin)
      return std::nullopt;
    auto a = linear(bin.getLhs(), iDim, jDim, depth + 1),
         b = linear(bin.getRhs(), iDim, jDim, depth + 1);
    if (!a || !b)
      return std::nullopt;
    switch (bin.getKind()) {
    case BinaryKind::Add:
      return *a + *b;
    case BinaryKind::Sub:
      return *a - *b;
    case BinaryKind::Mul:
      if (b->isConstant())
        return *a * b->c0;
      if (a->isConstant())
        return *b * a->c0;
      return std::nullopt;
    default:
      return std::nullopt;
    }
  }

  std::optional<RowColumnPredicate> predicate(Value v, int64_t iDim, int64_t jDim,
                                              int depth = 0) {
    if (depth > kMaxDepth || !CoreBuilder::elementTypeOf(v).isInteger(1))
      return std::nullopt;
    if (std::optional<Tensor> c = splatValues(v))
      return RowColumnPredicate{c->getInt(0) ? RowColumnPredicate::True : RowColumnPredicate::False, {}};
    Operation *op = v.getDefiningOp();
    if (!op)
      return std::nullopt;
    if (auto b = dyn_cast<BroadcastInDimOp>(op)) {
      auto [xi, xj] = operandDims(b, iDim, jDim);
      return predicate(b.getX(), xi, xj, depth + 1);
    }
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      auto dims = operandDims(reshape, iDim, jDim);
      return dims ? predicate(reshape.getX(), dims->first, dims->second, depth + 1) : std::nullopt;
    }
    if (auto u = dyn_cast<UnaryOp>(op); u && u.getKind() == UnaryKind::Not) {
      auto x = predicate(u.getX(), iDim, jDim, depth + 1);
      return x ? std::optional(x->negated()) : std::nullopt;
    }
    if (auto sel = dyn_cast<SelectOp>(op)) {
      auto c = predicate(sel.getCond(), iDim, jDim, depth + 1),
           t = predicate(sel.getOnTrue(), iDim, jDim, depth + 1),
           f = predicate(sel.getOnFalse(), iDim, jDim, depth + 1);
      if (!c || !t || !f || t->kind == RowColumnPredicate::AtLeastZero ||
          f->kind == RowColumnPredicate::AtLeastZero)
        return std::nullopt;
      if (t->kind == f->kind)
        return t;
      return t->kind == RowColumnPredicate::True ? c : c->negated();
    }
    if (auto bin = dyn_cast<BinaryOp>(op);
        bin && (bin.getKind() == BinaryKind::And || bin.getKind() == BinaryKind::Or)) {
      auto a = predicate(bin.getLhs(), iDim, jDim, depth + 1),
           b = predicate(bin.getRhs(), iDim, jDim, depth + 1);
      if (!a || !b)
        return std::nullopt;
      // x and true = x, x and false = false; or: the other way round. Two inequalities: no.
      auto absorbing = bin.getKind() == BinaryKind::And ? RowColumnPredicate::False
                                                        : RowColumnPredicate::True;
      if (a->kind == absorbing || b->kind == absorbing)
        return RowColumnPredicate{absorbing, {}};
      if (a->kind != RowColumnPredicate::AtLeastZero)
        return b;
      if (b->kind != RowColumnPredicate::AtLeastZero)
        return a;
      return std::nullopt;
    }
    auto cmp = dyn_cast<CompareOp>(op);
    if (!cmp)
      return std::nullopt;
    auto a = linear(cmp.getLhs(), iDim, jDim, depth + 1),
         b = linear(cmp.getRhs(), iDim, jDim, depth + 1);
    if (!a || !b)
      return std::nullopt;
    RowColumnLinear aMinusB = *a - *b, one{0, 0, 1};
    switch (cmp.getKind()) {
    case CompareKind::Ge: // a - b >= 0
      return RowColumnPredicate{RowColumnPredicate::AtLeastZero, aMinusB};
    case CompareKind::Gt: // a - b - 1 >= 0
      return RowColumnPredicate{RowColumnPredicate::AtLeastZero, aMinusB - one};
    case CompareKind::Le: // b - a >= 0
      return RowColumnPredicate{RowColumnPredicate::AtLeastZero, -aMinusB};
    case CompareKind::Lt: // b - a - 1 >= 0
      return RowColumnPredicate{RowColumnPredicate::AtLeastZero, -aMinusB - one};
    default:
      return std::nullopt;
    }
  }

private:
  static constexpr int kMaxDepth = 16;

  /// The dims of a broadcast's operand that its result's dims iDim and jDim come from.
  static std::pair<int64_t, int64_t> operandDims(BroadcastInDimOp b, int64_t iDim, int64_t jDim) {
    int64_t xi = -1, xj = -1;
    for (auto [t, d] : llvm::enumerate(b.getDims())) {
      xi = d == iDim ? (int64_t)t : xi;
      xj = d == jDim ? (int64_t)t : xj;
    }
    return {xi, xj};
  }

  /// The same for a reshape that only adds or removes dims of size 1 (nullopt for another, or
  /// where iDim or jDim is of size 1).
  static std::optional<std::pair<int64_t, int64_t>> operandDims(ReshapeOp reshape, int64_t iDim,
                                                                int64_t jDim) {
    auto nonUnit = [](const SymShape &shape) {
      SmallVector<int64_t> dims;
      for (auto [d, size] : llvm::enumerate(shape))
        if (size != SymExpr(1))
          dims.push_back(d);
      return dims;
    };
    SymShape in = symShapeOf(reshape.getX()), out = symShapeOf(reshape.getResult());
    SmallVector<int64_t> inDims = nonUnit(in), outDims = nonUnit(out);
    if (inDims.size() != outDims.size())
      return std::nullopt;
    for (size_t t = 0; t < inDims.size(); ++t)
      if (in[inDims[t]] != out[outDims[t]])
        return std::nullopt;
    auto map = [&](int64_t d) -> std::optional<int64_t> {
      if (d < 0)
        return -1;
      auto it = llvm::find(outDims, d);
      if (it == outDims.end())
        return std::nullopt;
      return inDims[it - outDims.begin()];
    };
    std::optional<int64_t> xi = map(iDim), xj = map(jDim);
    if (!xi || !xj)
      return std::nullopt;
    return std::pair{*xi, *xj};
  }

  /// The value of a splat constant (a constant, maybe broadcast) as a one-element tensor.
  static std::optional<Tensor> splatValues(Value v) {
    while (auto b = v.getDefiningOp<BroadcastInDimOp>())
      v = b.getX();
    std::optional<Tensor> c = constantValues(v);
    if (!c || c->numElements() < 1)
      return std::nullopt;
    for (int64_t i = 1; i < c->numElements(); ++i)
      if (c->getInt(i) != c->getInt(0))
        return std::nullopt;
    return c;
  }
};

/// Whether `keep` (i1, [.., Lq, Lk] for scores [.., Lq, Lk]) is true exactly where j <= i in
/// every [Lq, Lk] slice.
bool isCausalKeep(Value keep, ArrayRef<SymExpr> scores) {
  if (!isTriangleShape(keep, scores))
    return false;
  int64_t r = CoreBuilder::rankOf(keep);
  // A computed predicate k (i - j) + c >= 0 with 0 <= c < k (k > 0): i - j >= 0 over the
  // integers.
  if (auto p = RowColumnAnalysis().predicate(keep, r - 2, r - 1)) {
    const RowColumnLinear &l = p->linear;
    return p->kind == RowColumnPredicate::AtLeastZero && l.ci > 0 && l.cj == -l.ci &&
           l.c0 >= 0 && l.c0 < l.ci;
  }
  // A constant triangle, or the upper-left corner of one (which is one too).
  Value triangle = upperLeftCornerOf(keep);
  std::optional<Tensor> values = constantValues(triangle);
  if (!values)
    return false;
  ArrayRef<int64_t> shape = shapeOf(triangle);
  int64_t lk = shape.back(), slice = lk * shape[r - 2];
  for (int64_t i = 0; i < values->numElements(); ++i)
    if ((values->getInt(i) != 0) != (i % lk <= i % slice / lk))
      return false;
  return true;
}

/// Whether `bias` is a constant [.., Lq, Lk] (or the upper-left corner of one) that is, in
/// every [Lq, Lk] slice, 0 where j <= i and -inf (or below kMaskedBelow) above.
bool isCausalBias(Value bias, ArrayRef<SymExpr> scores) {
  if (!isTriangleShape(bias, scores))
    return false;
  Value triangle = upperLeftCornerOf(bias);
  std::optional<Tensor> values = constantValues(triangle);
  if (!values)
    return false;
  ArrayRef<int64_t> shape = shapeOf(triangle);
  int64_t lk = shape.back(), slice = lk * shape[shape.size() - 2];
  for (int64_t i = 0; i < values->numElements(); ++i) {
    double x = values->getDouble(i);
    if (i % lk <= i % slice / lk ? x != 0 : !(x <= kMaskedBelow))
      return false;
  }
  return true;
}

/// One match, built up from the softmax backwards.
struct Match {
  llvm::SetVector<Operation *> ops; // the ops the attention op replaces
  Value q, kT, v;                   // kT: k'^T as the product reads it
  Value mask, bias;
  double scale = 1, maskedValue = -std::numeric_limits<double>::infinity();
  bool invertMask = false; // the select keeps the score where `mask` is false
};

class Recognizer {
public:
  Recognizer(func::FuncOp f, bool explain) : f_(f), explain_(explain) {}

  void run() {
    SmallVector<MatmulOp> candidates;
    f_.walk([&](MatmulOp m) { candidates.push_back(m); });
    // A rewrite erases only producers of its product, which come earlier in the walk; the
    // set guards against visiting an erased one all the same.
    for (MatmulOp m : candidates)
      if (!erased_.contains(m))
        tryRewrite(m);
  }

private:
  /// Adds the op defining `v` to the match when it exists and returns it.
  template <class Op> Op take(Match &match, Value v) {
    auto op = v.getDefiningOp<Op>();
    if (op)
      match.ops.insert(op);
    return op;
  }

  /// If `v` (of the scores' shape [B..., Lq, Lk]) reads, through reshapes and broadcasts, the
  /// element (b..., i) of a row value (shape [B..., Lq], or [B..., Lq, 1]) at every
  /// (b..., i, j): that row value, with the reshapes and broadcasts added to the match.
  Value rowSource(Match &match, Value v) {
    SymShape space = symShapeOf(v);
    int64_t r = space.size();
    Index index = spaceIndex(v.getContext(), space);
    SmallVector<Operation *> chain;
    while (Operation *op = v.getDefiningOp()) {
      if (!isa<ReshapeOp, BroadcastInDimOp>(op))
        break;
      std::optional<Index> in = affineOperandIndex(op, 0, index);
      if (!in)
        return {};
      index = simplify(*in, r);
      chain.push_back(op);
      v = op->getOperand(0);
    }
    SymShape base = symShapeOf(v);
    int64_t br = base.size();
    if (br != r - 1 && !(br == r && base.back() == SymExpr(1)))
      return {};
    auto proj = asProjection(index, space, base);
    if (!proj)
      return {};
    for (int64_t t = 0; t < br; ++t)
      if (t < r - 1 ? !((*proj)[t] == t || ((*proj)[t] == -1 && base[t] == SymExpr(1))) : (*proj)[t] != -1)
        return {};
    match.ops.insert(chain.begin(), chain.end());
    return v;
  }

  /// p = softmax(s) along the last dim: returns s.
  Value matchSoftmax(Match &match, Value p) {
    int64_t r = CoreBuilder::rankOf(p);
    auto isRowReduce = [&](Value v, ReduceKind kind, Value of) {
      auto red = v ? v.getDefiningOp<ReduceOp>() : ReduceOp();
      return red && red.getKind() == kind && red.getX() == of &&
             red.getDims() == ArrayRef<int64_t>{r - 1};
    };
    auto div = take<BinaryOp>(match, p);
    if (!div || div.getKind() != BinaryKind::Div)
      return {};
    Value e = div.getLhs(), sum = rowSource(match, div.getRhs());
    if (!isRowReduce(sum, ReduceKind::Sum, e))
      return {};
    match.ops.insert(sum.getDefiningOp());
    auto exp = take<UnaryOp>(match, e);
    if (!exp || exp.getKind() != UnaryKind::Exp)
      return {};
    Value shifted = exp.getX();
    auto sub = shifted.getDefiningOp<BinaryOp>();
    if (!sub || sub.getKind() != BinaryKind::Sub)
      return shifted; // unshifted
    Value s = sub.getLhs(), shift = rowSource(match, sub.getRhs());
    if (!shift)
      return {};
    // The frontend's guard: select(the max is finite, max, 0), over the row shape. Any row
    // constant gives the same softmax; only the maximum keeps it from overflowing.
    if (auto sel = shift.getDefiningOp<SelectOp>()) {
      auto zero = splatFloatValue(sel.getOnFalse());
      if (!zero || *zero != 0)
        return {};
      if (Operation *guard = sel.getCond().getDefiningOp()) {
        match.ops.insert(guard);
        for (Value operand : guard->getOperands())
          if (Operation *def = operand.getDefiningOp(); def && !isa<ConstantOp>(def))
            match.ops.insert(def);
      }
      match.ops.insert(sel);
      Value onTrue = sel.getOnTrue();
      while (auto reshape = onTrue.getDefiningOp<ReshapeOp>()) { // the keepdims reshape
        match.ops.insert(reshape);
        onTrue = reshape.getX();
      }
      shift = onTrue;
    }
    if (!isRowReduce(shift, ReduceKind::Max, s))
      return {};
    match.ops.insert(sub);
    match.ops.insert(shift.getDefiningOp());
    return s;
  }

  /// Walks the score chain from the softmax input to the q k^T product.
  bool matchScores(Match &match, Value s, OpBuilder &builder) {
    SymShape scores = symShapeOf(s);
    bool selectAfterBias = false, sawSelect = false;
    while (true) {
      Operation *op = s.getDefiningOp();
      if (!op)
        return false;
      if (auto m = dyn_cast<MatmulOp>(op)) {
        match.ops.insert(m);
        match.q = m.getLhs();
        match.kT = m.getRhs();
        break;
      }
      if (Value unscaled = peelScale(match, s); unscaled != s) {
        s = unscaled;
        continue;
      }
      if (auto bin = dyn_cast<BinaryOp>(op)) {
        if (bin.getKind() != BinaryKind::Add || match.bias || match.scale != 1)
          return false;
        // The scores are the operand that continues the chain.
        bool lhsIsScores = leadsToProduct(bin.getLhs()), rhsIsScores = leadsToProduct(bin.getRhs());
        if (lhsIsScores == rhsIsScores)
          return false;
        s = lhsIsScores ? bin.getLhs() : bin.getRhs();
        match.bias = unbroadcastOperand(builder, bin.getLoc(),
                                        lhsIsScores ? bin.getRhs() : bin.getLhs(), scores);
        selectAfterBias = sawSelect;
        match.ops.insert(bin);
        continue;
      }
      // A scale met before (applied after) a mask or bias would scale it too: not matched.
      if (auto sel = dyn_cast<SelectOp>(op); sel && !match.mask && match.scale == 1) {
        std::optional<double> fillTrue = splatFloatValue(sel.getOnTrue()),
                              fillFalse = splatFloatValue(sel.getOnFalse());
        if (fillFalse && !fillTrue) {
          match.maskedValue = *fillFalse;
          s = sel.getOnTrue();
        } else if (fillTrue && !fillFalse) {
          match.maskedValue = *fillTrue;
          match.invertMask = true;
          s = sel.getOnFalse();
        } else {
          return false;
        }
        match.mask = unbroadcastOperand(builder, sel.getLoc(), sel.getCond(), scores);
        match.ops.insert(sel);
        sawSelect = true;
        continue;
      }
      return false;
    }
    // where(m, s + bias, c) is where(m, s, c) + bias only when c is -inf.
    if (selectAfterBias && !std::isinf(match.maskedValue))
      return false;
    return true;
  }

  /// Whether `v` reaches a matmul through the ops a score chain may have (bounded).
  bool leadsToProduct(Value v, int depth = 0) {
    Operation *op = v.getDefiningOp();
    if (!op || depth > 8)
      return false;
    if (isa<MatmulOp>(op))
      return true;
    if (auto bin = dyn_cast<BinaryOp>(op))
      return leadsToProduct(bin.getLhs(), depth + 1) || leadsToProduct(bin.getRhs(), depth + 1);
    if (auto sel = dyn_cast<SelectOp>(op))
      return leadsToProduct(sel.getOnTrue(), depth + 1) || leadsToProduct(sel.getOnFalse(), depth + 1);
    return false;
  }

  /// Peels scalar multiplications and divisions off a product operand into the scale.
  Value peelScale(Match &match, Value x) {
    while (auto bin = x.getDefiningOp<BinaryOp>()) {
      std::optional<double> lhs = splatFloatValue(bin.getLhs()), rhs = splatFloatValue(bin.getRhs());
      if (bin.getKind() == BinaryKind::Mul && rhs) {
        match.scale *= *rhs;
        x = bin.getLhs();
      } else if (bin.getKind() == BinaryKind::Mul && lhs) {
        match.scale *= *lhs;
        x = bin.getRhs();
      } else if (bin.getKind() == BinaryKind::Div && rhs) {
        match.scale /= *rhs;
        x = bin.getLhs();
      } else {
        break;
      }
      match.ops.insert(bin);
    }
    return x;
  }

  /// Keys or values repeated to the query heads (broadcast_in_dim, maybe with a reshape that
  /// merges the repeat into the head dim): the unrepeated tensor, else `kv`.
  Value unrepeat(Match &match, OpBuilder &builder, Value kv) {
    SymShape shape = symShapeOf(kv);
    int64_t r = shape.size();
    if (auto b = kv.getDefiningOp<BroadcastInDimOp>()) {
      // Same rank, batch dims broadcast from 1.
      SymShape in = symShapeOf(b.getX());
      if ((int64_t)in.size() == r && llvm::equal(b.getDims(), llvm::seq<int64_t>(0, r)) &&
          ArrayRef<SymExpr>(in).take_back(2) == ArrayRef<SymExpr>(shape).take_back(2)) {
        match.ops.insert(b);
        return b.getX();
      }
      return kv;
    }
    auto reshape = kv.getDefiningOp<ReshapeOp>();
    if (!reshape)
      return kv;
    auto b = reshape.getX().getDefiningOp<BroadcastInDimOp>();
    if (!b)
      return kv;
    SymShape wide = symShapeOf(b.getResult());
    if ((int64_t)wide.size() != r + 1)
      return kv;
    // [.., H', g, L, X] -> [.., H' g, L, X] at some batch dim h.
    for (int64_t h = 0; h + 2 < r; ++h) {
      SymShape merged = wide;
      merged[h] *= merged[h + 1];
      merged.erase(merged.begin() + h + 1);
      if (merged != shape)
        continue;
      // The broadcast's operand must have the repeat dim h+1 absent or 1, every other dim whole.
      SymShape want = wide;
      want[h + 1] = 1;
      Value x = b.getX();
      SymShape in = symShapeOf(x);
      ArrayRef<int64_t> dims = b.getDims();
      SymShape mapped(r + 1, SymExpr(1));
      bool ok = llvm::is_sorted(dims);
      for (size_t i = 0; ok && i < dims.size(); ++i)
        mapped[dims[i]] = in[i];
      if (!ok || mapped != want)
        return kv;
      match.ops.insert(reshape);
      match.ops.insert(b);
      SymShape unrepeated = wide;
      unrepeated.erase(unrepeated.begin() + h + 1);
      auto type = tensorTypeWithDims(unrepeated, CoreBuilder::elementTypeOf(kv));
      return builder.create<ReshapeOp>(kv.getLoc(), type, x);
    }
    return kv;
  }

  /// Erases the ops of `worklist` that are trivially dead, and then the producers that only
  /// they used, transitively.
  void eraseDead(SmallVector<Operation *> worklist) {
    llvm::SmallPtrSet<Operation *, 16> erased;
    llvm::SetVector<Operation *> pending(worklist.begin(), worklist.end());
    bool progress = true;
    while (progress) {
      progress = false;
      for (Operation *op : pending.takeVector()) {
        if (erased.contains(op))
          continue;
        if (!isOpTriviallyDead(op)) {
          pending.insert(op); // its users may still go
          continue;
        }
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp())
            pending.insert(def);
        erased.insert(op);
        erased_.insert(op);
        op->erase();
        progress = true;
      }
    }
  }

  /// Every matched op's results are used only by matched ops (or, for the last, by anyone).
  static bool selfContained(const Match &match, Operation *last) {
    for (Operation *op : match.ops) {
      if (op == last)
        continue;
      for (Operation *user : op->getUsers())
        if (!match.ops.contains(user))
          return false;
    }
    return true;
  }

  /// Whether q, k, v, the mask and the bias have tcc.attention's types (its shape rules:
  /// tcc/Support/AttentionShapes.h).
  static bool valid(Value q, Value k, Value v, Value mask, Value bias) {
    Type et = CoreBuilder::elementTypeOf(q);
    if (!isa<FloatType>(et) || CoreBuilder::elementTypeOf(k) != et ||
        CoreBuilder::elementTypeOf(v) != et || (bias && CoreBuilder::elementTypeOf(bias) != et))
      return false;
    SymShape maskShape = mask ? symShapeOf(mask) : SymShape(),
             biasShape = bias ? symShapeOf(bias) : SymShape(), out;
    return attentionShapeError(symShapeOf(q), symShapeOf(k), symShapeOf(v),
                               mask ? &maskShape : nullptr, bias ? &biasShape : nullptr, out)
        .empty();
  }

  void tryRewrite(MatmulOp pv) {
    if (CoreBuilder::rankOf(pv.getResult()) < 3)
      return;
    Match match;
    match.ops.insert(pv);
    // Ops made while matching (reshapes of masks, unrepeated k/v) are erased again when the
    // match fails, or when the attention op does not use them.
    struct Recorder : OpBuilder::Listener {
      SmallVector<Operation *> created;
      void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
        created.push_back(op);
      }
    } recorder;
    OpBuilder builder(pv);
    builder.setListener(&recorder);
    auto cleanUp = [&] { eraseDead(recorder.created); };
    // Once a softmax feeds the product, a failed match is worth a remark: it looked like
    // attention.
    auto notAttention = [&](const Twine &why) {
      if (explain_)
        pv.emitRemark() << "attention: not fused into one op: " << why;
      cleanUp();
    };
    Value s = matchSoftmax(match, pv.getLhs());
    if (!s)
      return cleanUp();
    if (!matchScores(match, s, builder))
      return notAttention("the softmax's input is not scale * q k^T with at most one boolean "
                          "mask and one additive bias (a scale after a mask or bias, a finite "
                          "fill selected after the bias, or another op)");
    if (!selfContained(match, pv))
      return notAttention("an intermediate (the scores or the probabilities) is used outside "
                          "the pattern");
    Value q = peelScale(match, match.q), kT = peelScale(match, match.kT);
    int64_t r = CoreBuilder::rankOf(q);
    Value k;
    if (auto t = kT.getDefiningOp<TransposeOp>(); t && isLastTwoSwap(t.getPerm())) {
      match.ops.insert(t);
      k = peelScale(match, t.getX());
    } else {
      SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, r));
      std::swap(swap[r - 1], swap[r - 2]);
      CoreBuilder b(builder, pv.getLoc());
      k = b.transpose(kT, swap);
    }
    k = unrepeat(match, builder, k);
    Value v = unrepeat(match, builder, pv.getRhs());
    // The peeled scalings and unrepeats must not be shared with other users either.
    if (!selfContained(match, pv))
      return notAttention("a scaled or repeated q, k or v is used outside the pattern");
    if (!valid(q, k, v, match.mask, match.bias))
      return notAttention("q, k, v, the mask or the bias do not have attention's shapes and "
                          "types");
    SymShape scores = symShapeOf(q);
    scores.back() = symShapeOf(k)[r - 2];
    CoreBuilder b(builder, pv.getLoc());
    Value mask = match.mask;
    if (mask && match.invertMask)
      mask = b.unary(UnaryKind::Not, mask);
    bool causal = false;
    if (mask && match.maskedValue <= kMaskedBelow && isCausalKeep(throughUnitDims(mask), scores)) {
      causal = true;
      mask = {};
    }
    Value bias = match.bias;
    if (bias && isCausalBias(throughUnitDims(bias), scores)) {
      causal = true;
      bias = {};
    }
    auto attention = builder.create<AttentionOp>(
        pv.getLoc(), pv.getType(), q, k, v, mask, bias, builder.getF64FloatAttr(match.scale),
        causal ? builder.getUnitAttr() : UnitAttr(), builder.getF64FloatAttr(match.maskedValue));
    pv.getResult().replaceAllUsesWith(attention.getResult());
    if (explain_) {
      SymShape qs = symShapeOf(q), ks = symShapeOf(k);
      std::string what;
      for (size_t d = 0; d + 2 < qs.size(); ++d)
        if (qs[d] != ks[d])
          what += ", " + SymExpr::divideExactly(qs[d], ks[d])->str() +
                  " query heads per key/value head (dim " + std::to_string(d) + ")";
      attention.emitRemark() << "attention: one op for " << match.ops.size() << " ops, "
                             << scores[r - 2].str() << " x " << scores[r - 1].str() << " scores"
                             << (causal ? ", causal" : "") << (mask ? ", boolean mask" : "")
                             << (bias ? ", additive bias" : "") << what;
    }
    // The matched ops, then whatever only they used (broadcasts of the mask and bias, the
    // softmax's constants, a causal mask's computation).
    eraseDead(SmallVector<Operation *>(match.ops.begin(), match.ops.end()));
    cleanUp();
  }

  func::FuncOp f_;
  bool explain_;
  llvm::SmallPtrSet<Operation *, 32> erased_; // for skipping candidates; never dereferenced
};

struct RecognizeAttentionPass : impl::RecognizeAttentionBase<RecognizeAttentionPass> {
  using RecognizeAttentionBase::RecognizeAttentionBase;
  void runOnOperation() override { recognizeAttention(getOperation(), explain); }
};

struct DecomposeAttentionPass : impl::DecomposeAttentionBase<DecomposeAttentionPass> {
  using DecomposeAttentionBase::DecomposeAttentionBase;
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) {
      if (!hasFusedAttentionKernel(op, CoreBuilder::elementTypeOf(op.getQ()), target))
        ops.push_back(op);
    });
    for (AttentionOp op : ops) {
      OpBuilder builder(op);
      CoreBuilder b(builder, op.getLoc());
      op.getResult().replaceAllUsesWith(buildAttentionCore(b, op).result);
      op.erase();
    }
    SmallVector<AttentionGradOp> grads;
    getOperation().walk([&](AttentionGradOp op) {
      if (!hasFusedAttentionGradKernel(op, target))
        grads.push_back(op);
    });
    for (AttentionGradOp op : grads)
      decomposeAttentionGrad(op);
  }
};

} // namespace

void recognizeAttention(func::FuncOp f, bool explain) { Recognizer(f, explain).run(); }

/// Whether the CPU runtime's attention kernels (forward and backward) take attention in
/// `elementType` with `bias` (may be null): f32, or bf16 with an f32 bias (their scores are f32).
static bool cpuAttentionKernelTakes(Type elementType, Value bias) {
  return elementType.isF32() ||
         (elementType.isBF16() && (!bias || CoreBuilder::elementTypeOf(bias).isF32()));
}

/// Whether CUDA's generated attention kernels (forward and backward) take attention in
/// `elementType` over q, v and `bias` (may be null): f16 or bf16, static head dims the kernels
/// are built for, a bias in f32 or in the element type. Symbolic batch and sequence lengths
/// are read at run time.
static bool cudaAttentionKernelsTake(Type elementType, Value q, Value v, Value bias) {
  if (bias && CoreBuilder::elementTypeOf(bias) != elementType &&
      !CoreBuilder::elementTypeOf(bias).isF32())
    return false;
  for (Value x : {q, v})
    if (ShapedType::isDynamic(cast<RankedTensorType>(x.getType()).getShape().back()))
      return false;
  std::string type;
  llvm::raw_string_ostream(type) << elementType;
  return cudaAttentionKernelRefusal(type, cast<RankedTensorType>(q.getType()).getShape().back(),
                                    cast<RankedTensorType>(v.getType()).getShape().back())
      .empty();
}

bool hasFusedAttentionGradKernel(AttentionGradOp op, llvm::StringRef target) {
  Type elementType = CoreBuilder::elementTypeOf(op.getQ());
  if (target == "cpu")
    return cpuAttentionKernelTakes(elementType, op.getBias());
  return target == "cuda" &&
         cudaAttentionKernelsTake(elementType, op.getQ(), op.getV(), op.getBias());
}

bool hasFusedAttentionKernel(AttentionOp op, Type elementType, llvm::StringRef target) {
  if (target == "cpu")
    return cpuAttentionKernelTakes(elementType, op.getBias());
  return target == "cuda" &&
         cudaAttentionKernelsTake(elementType, op.getQ(), op.getV(), op.getBias());
}

} // namespace tcc
