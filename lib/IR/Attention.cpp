//===- Attention.cpp - tcc.attention in core ops ------------------------------===//
#include "tcc/IR/Attention.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace tcc {

namespace {

/// [B0, B1, .., L, X] viewed as [B'0, g0, B'1, g1, .., L, X] (g_d = B_d / B'_d) and back.
SmallVector<int64_t> groupedShape(ArrayRef<int64_t> kvShape, ArrayRef<int64_t> qBatch) {
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < qBatch.size(); ++d) {
    shape.push_back(kvShape[d]);
    shape.push_back(kvShape[d] ? qBatch[d] / kvShape[d] : 0);
  }
  shape.append(kvShape.end() - 2, kvShape.end());
  return shape;
}

} // namespace

Value expandToQueryBatch(CoreBuilder &b, Value kv, ArrayRef<int64_t> qBatch) {
  ArrayRef<int64_t> shape = CoreBuilder::shapeOf(kv);
  if (shape.drop_back(2) == qBatch)
    return kv;
  SmallVector<int64_t> grouped = groupedShape(shape, qBatch), ones = grouped;
  for (size_t d = 0; d < qBatch.size(); ++d)
    ones[2 * d + 1] = 1;
  SmallVector<int64_t> full(qBatch);
  full.append(shape.end() - 2, shape.end());
  return b.reshape(b.broadcastTo(b.reshape(kv, ones), grouped), full);
}

Value sumToKeyBatch(CoreBuilder &b, Value grad, ArrayRef<int64_t> kvShape) {
  ArrayRef<int64_t> shape = CoreBuilder::shapeOf(grad);
  if (shape == kvShape)
    return grad;
  SmallVector<int64_t> grouped = groupedShape(kvShape, shape.drop_back(2)), dims;
  for (size_t d = 0; d + 2 < shape.size(); ++d)
    dims.push_back(2 * d + 1);
  return b.reduce(ReduceKind::Sum, b.reshape(grad, grouped), dims, /*keepDims=*/false);
}

AttentionCore buildAttentionCore(CoreBuilder &b, AttentionOp op) {
  Value q = op.getQ();
  ArrayRef<int64_t> qShape = CoreBuilder::shapeOf(q);
  int64_t r = qShape.size();
  AttentionCore c;
  c.k = expandToQueryBatch(b, op.getK(), qShape.drop_back(2));
  c.v = expandToQueryBatch(b, op.getV(), qShape.drop_back(2));
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, r));
  std::swap(swap[r - 1], swap[r - 2]);
  Value s = b.create<MatmulOp>(q, b.transpose(c.k, swap));
  SmallVector<int64_t> scores(CoreBuilder::shapeOf(s));
  s = b.mul(s, b.splatLike(s, op.getScale().convertToDouble()));
  double inf = std::numeric_limits<double>::infinity();
  if (op.getCausal()) {
    Type i64 = b.builder().getI64Type();
    c.keep = b.compare(CompareKind::Le, b.iota(scores, i64, r - 1), b.iota(scores, i64, r - 2));
    s = b.select(c.keep, s, b.splatLike(s, -inf));
  }
  if (Value mask = op.getMask()) {
    Value m = b.broadcastTo(mask, scores);
    s = b.select(m, s, b.splatLike(s, op.getMaskedValue().convertToDouble()));
    c.keep = c.keep ? b.binary(BinaryKind::And, c.keep, m) : m;
  }
  if (Value bias = op.getBias())
    s = b.add(s, b.broadcastTo(bias, scores));
  // The frontend's softmax (frontend/onnx/ops/Reduction.cpp): shifted by the row maximum when
  // it is finite (x - x == 0), not shifted otherwise.
  Value m = b.reduce(ReduceKind::Max, s, {r - 1}, /*keepDims=*/true);
  Value finite = b.compare(CompareKind::Eq, b.sub(m, m), b.splatLike(m, 0));
  Value e = b.unary(UnaryKind::Exp, b.sub(s, b.select(finite, m, b.splatLike(m, 0))));
  c.probs = b.div(e, b.reduce(ReduceKind::Sum, e, {r - 1}, /*keepDims=*/true));
  c.result = b.create<MatmulOp>(c.probs, c.v);
  return c;
}

} // namespace tcc
