//===- Attention.cpp - tcc.attention in core ops ------------------------------===//
#include "tcc/IR/Attention.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace mlir;

namespace tcc {

namespace {

/// [B0, B1, .., L, X] viewed as [B'0, g0, B'1, g1, .., L, X] (g_d = B_d / B'_d) and back.
SymShape groupedShape(ArrayRef<SymExpr> kvShape, ArrayRef<SymExpr> qBatch) {
  SymShape shape;
  for (size_t d = 0; d < qBatch.size(); ++d) {
    shape.push_back(kvShape[d]);
    // The shape rules (AttentionShapes.h) made sure that B'_d divides B_d.
    shape.push_back(SymExpr::divideExactly(qBatch[d], kvShape[d]).value_or(SymExpr(0)));
  }
  shape.insert(shape.end(), kvShape.end() - 2, kvShape.end());
  return shape;
}

} // namespace

Value expandToQueryBatch(CoreBuilder &b, Value kv, ArrayRef<SymExpr> qBatch) {
  SymShape shape = CoreBuilder::dimsOf(kv);
  if (ArrayRef<SymExpr>(shape).drop_back(2) == qBatch)
    return kv;
  SymShape grouped = groupedShape(shape, qBatch), ones = grouped;
  for (size_t d = 0; d < qBatch.size(); ++d)
    ones[2 * d + 1] = 1;
  SymShape full(qBatch.begin(), qBatch.end());
  full.insert(full.end(), shape.end() - 2, shape.end());
  return b.reshapeToDims(b.broadcastToDims(b.reshapeToDims(kv, ones), grouped), full);
}

Value sumToKeyBatch(CoreBuilder &b, Value grad, ArrayRef<SymExpr> kvShape) {
  SymShape shape = CoreBuilder::dimsOf(grad);
  if (ArrayRef<SymExpr>(shape) == kvShape)
    return grad;
  SymShape grouped = groupedShape(kvShape, ArrayRef<SymExpr>(shape).drop_back(2));
  SmallVector<int64_t> dims;
  for (size_t d = 0; d + 2 < shape.size(); ++d)
    dims.push_back(2 * d + 1);
  return b.reduce(ReduceKind::Sum, b.reshapeToDims(grad, grouped), dims, /*keepDims=*/false);
}

template <class Op> static AttentionOperands operandsOf(Op op) {
  return {op.getQ(),
          op.getK(),
          op.getV(),
          op.getMask(),
          op.getBias(),
          op.getScale().convertToDouble(),
          op.getMaskedValue().convertToDouble(),
          op.getCausal()};
}

AttentionOperands attentionOperands(AttentionOp op) { return operandsOf(op); }
AttentionOperands attentionOperands(AttentionGradOp op) { return operandsOf(op); }

/// x [..., A, B] as [..., B, A]: a reshape when A or B is 1 (no data moves), else a transpose.
static Value swapLastTwo(CoreBuilder &b, Value x) {
  SmallVector<int64_t> shape(CoreBuilder::shapeOf(x));
  int64_t r = shape.size();
  if (shape[r - 1] == 1 || shape[r - 2] == 1) {
    std::swap(shape[r - 1], shape[r - 2]);
    return b.reshape(x, shape);
  }
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, r));
  std::swap(swap[r - 1], swap[r - 2]);
  return b.transpose(x, swap);
}

/// A 16-bit attention's operands in f32: its decomposition computes in f32 (scores, softmax and
/// sums, as the fused kernels do), only its results are 16-bit. Null when `a` is not 16-bit.
static std::optional<AttentionOperands> inF32(CoreBuilder &b, const AttentionOperands &a) {
  Type et = CoreBuilder::elementTypeOf(a.q);
  if (!isa<FloatType>(et) || et.getIntOrFloatBitWidth() != 16)
    return std::nullopt;
  Type f32 = b.builder().getF32Type();
  AttentionOperands wide = a;
  for (Value *x : {&wide.q, &wide.k, &wide.v, &wide.bias})
    if (*x && CoreBuilder::elementTypeOf(*x) != f32)
      *x = b.cast(*x, f32);
  return wide;
}

AttentionCore buildAttentionCore(CoreBuilder &b, const AttentionOperands &a) {
  if (std::optional<AttentionOperands> wide = inF32(b, a)) {
    AttentionCore c = buildAttentionCore(b, *wide);
    c.result = b.cast(c.result, CoreBuilder::elementTypeOf(a.q));
    return c;
  }
  Value q = a.q;
  SymShape qShape = CoreBuilder::dimsOf(q);
  int64_t r = qShape.size();
  ArrayRef<SymExpr> qBatch = ArrayRef<SymExpr>(qShape).drop_back(2);
  AttentionCore c;
  c.k = expandToQueryBatch(b, a.k, qBatch);
  c.v = expandToQueryBatch(b, a.v, qBatch);
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, r));
  std::swap(swap[r - 1], swap[r - 2]);
  Value s = b.create<MatmulOp>(q, b.transpose(c.k, swap));
  SymShape scores = CoreBuilder::dimsOf(s);
  s = b.mul(s, b.splatLike(s, a.scale));
  double inf = std::numeric_limits<double>::infinity();
  if (a.causal) {
    Type i64 = b.builder().getI64Type();
    c.keep = b.compare(CompareKind::Le, b.iotaOfDims(scores, i64, r - 1),
                       b.iotaOfDims(scores, i64, r - 2));
    s = b.select(c.keep, s, b.splatLike(s, -inf));
  }
  if (Value mask = a.mask) {
    Value m = b.broadcastToDims(mask, scores);
    s = b.select(m, s, b.splatLike(s, a.maskedValue));
    c.keep = c.keep ? b.binary(BinaryKind::And, c.keep, m) : m;
  }
  if (Value bias = a.bias)
    s = b.add(s, b.broadcastToDims(bias, scores));
  // The frontend's softmax (frontend/onnx/ops/Reduction.cpp): shifted by the row maximum when
  // it is finite (x - x == 0), not shifted otherwise.
  Value m = b.reduce(ReduceKind::Max, s, {r - 1}, /*keepDims=*/true);
  Value finite = b.compare(CompareKind::Eq, b.sub(m, m), b.splatLike(m, 0));
  Value e = b.unary(UnaryKind::Exp, b.sub(s, b.select(finite, m, b.splatLike(m, 0))));
  c.probs = b.div(e, b.reduce(ReduceKind::Sum, e, {r - 1}, /*keepDims=*/true));
  c.result = b.create<MatmulOp>(c.probs, c.v);
  return c;
}

// dv = p^T g, ds = p (g v^T - rowsum), zeroed where causal or the mask replaced the score,
// dq = scale ds k, dk = scale ds^T q; key/value gradients summed over the query heads of
// their group.
AttentionGrads buildAttentionGradCore(CoreBuilder &b, const AttentionOperands &a, Value g,
                                      bool wantQ, bool wantK, bool wantV, bool wantScores) {
  AttentionGrads out;
  if (!wantQ && !wantK && !wantV && !wantScores)
    return out;
  if (std::optional<AttentionOperands> wide = inF32(b, a)) {
    out = buildAttentionGradCore(b, *wide, b.cast(g, b.builder().getF32Type()), wantQ, wantK,
                                 wantV, wantScores);
    Type et = CoreBuilder::elementTypeOf(a.q);
    for (Value *x : {&out.q, &out.k, &out.v}) // the scores' gradient stays f32 (a bias's)
      if (*x)
        *x = b.cast(*x, et);
    return out;
  }
  AttentionCore c = buildAttentionCore(b, a);
  int64_t r = CoreBuilder::rankOf(a.q);
  if (wantV)
    out.v = sumToKeyBatch(b, b.create<MatmulOp>(swapLastTwo(b, c.probs), g),
                          CoreBuilder::dimsOf(a.v));
  if (!wantQ && !wantK && !wantScores)
    return out;
  Value dp = b.create<MatmulOp>(g, swapLastTwo(b, c.v));
  Value rowDot = b.reduce(ReduceKind::Sum, b.mul(dp, c.probs), {r - 1}, /*keepDims=*/true);
  Value ds = b.mul(c.probs, b.sub(dp, rowDot));
  if (wantScores)
    out.scores = ds;
  if (c.keep)
    ds = b.select(c.keep, ds, b.splatLike(ds, 0.0));
  Value scale = b.scalarLike(ds, a.scale);
  if (wantQ)
    out.q = b.mul(b.create<MatmulOp>(ds, c.k), scale);
  if (wantK)
    out.k = sumToKeyBatch(b, b.mul(b.create<MatmulOp>(swapLastTwo(b, ds), a.q), scale),
                          CoreBuilder::dimsOf(a.k));
  return out;
}

void decomposeAttentionGrad(AttentionGradOp op) {
  OpBuilder builder(op);
  CoreBuilder b(builder, op.getLoc());
  AttentionGrads g = buildAttentionGradCore(b, attentionOperands(op), op.getGrad(),
                                            !op.getGradQ().use_empty(), !op.getGradK().use_empty(),
                                            !op.getGradV().use_empty(), /*wantScores=*/false);
  Value values[] = {g.q, g.k, g.v};
  for (auto [result, value] : llvm::zip(op->getResults(), values))
    if (value)
      result.replaceAllUsesWith(value);
  op.erase();
}

} // namespace tcc
