//===- SinkReshapes.cpp - Element-wise ops read the reshape's source ------------===//
//
// An exporter reshapes a value and then applies element-wise ops to it: HF GPT-2's Conv1D
// computes x @ W on [tokens, d] and views the product as [1, tokens, d] before its tanh GELU.
// A reshape changes no element's position in memory (row-major), so an element-wise op of
// reshaped operands equals the reshape of the op on their sources. This pass rewrites
//     y = reshape(x) ; z = op(y, splat c)    into    z' = op(x, splat c') ; z = reshape(z')
// for unary, binary, compare, select and cast ops whose operands are reshapes of values of one
// shape, splat constants or broadcasts of a scalar (each re-made at that shape), at least one
// of them a reshape; op by op in program order, so a chain moves its reshape to its end. Then
// the matrix product's epilogue (lib/Passes/GemmEpilogue.cpp) sees the GELU applied to its own
// output, and the reshape pair between two products folds away. Left alone: symbolic shapes, broadcast operands (a bias
// vector), reshapes of different source shapes.
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Passes.h"
#include "tcc/IR/SymbolicShape.h"
#include "tcc/IR/TccDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

namespace tcc {
#define GEN_PASS_DEF_SINKRESHAPES
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

/// A broadcast of a rank-0 value (the ONNX importer's scalar constants), else null.
BroadcastInDimOp scalarBroadcast(Value v) {
  auto b = v.getDefiningOp<BroadcastInDimOp>();
  return b && cast<RankedTensorType>(b.getX().getType()).getRank() == 0 ? b : nullptr;
}

/// The common source shape of `op`'s reshaped operands when every operand is a reshape of a
/// value of that shape, a splat constant or a scalar's broadcast, at least one a reshape; else
/// nothing.
std::optional<SmallVector<int64_t>> sinkableSourceShape(Operation *op) {
  std::optional<SmallVector<int64_t>> shape;
  for (Value v : op->getOperands()) {
    if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
      auto source = cast<RankedTensorType>(reshape.getX().getType());
      if (hasSymbolicDims(source) || (shape && ArrayRef<int64_t>(*shape) != source.getShape()))
        return std::nullopt;
      shape = SmallVector<int64_t>(source.getShape());
      continue;
    }
    DenseElementsAttr splat;
    if (!scalarBroadcast(v) && !(matchPattern(v, m_Constant(&splat)) && splat.isSplat()))
      return std::nullopt;
  }
  return shape;
}

struct SinkReshapesPass : impl::SinkReshapesBase<SinkReshapesPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<UnaryOp, BinaryOp, CompareOp, SelectOp, CastOp>(op) && op->getNumResults() == 1 &&
          !hasSymbolicDims(op->getResult(0).getType()))
        ops.push_back(op);
    });
    for (Operation *op : ops) { // program order: a chain's reshape moves down op by op
      std::optional<SmallVector<int64_t>> shape = sinkableSourceShape(op);
      if (!shape)
        continue;
      OpBuilder b(op);
      IRMapping map;
      for (Value v : op->getOperands()) {
        if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
          map.map(v, reshape.getX());
          continue;
        }
        auto type = RankedTensorType::get(
            *shape, cast<RankedTensorType>(v.getType()).getElementType());
        if (BroadcastInDimOp scalar = scalarBroadcast(v)) {
          map.map(v, b.create<BroadcastInDimOp>(op->getLoc(), type, scalar.getX(),
                                                b.getDenseI64ArrayAttr({})));
          continue;
        }
        DenseElementsAttr splat;
        matchPattern(v, m_Constant(&splat));
        map.map(v, b.create<ConstantOp>(op->getLoc(), splat.resizeSplat(type)));
      }
      Operation *moved = b.clone(*op, map);
      auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
      moved->getResult(0).setType(RankedTensorType::get(*shape, resultType.getElementType()));
      Value reshaped = b.create<ReshapeOp>(op->getLoc(), resultType, moved->getResult(0));
      op->getResult(0).replaceAllUsesWith(reshaped);
      SmallVector<Value> operands(op->getOperands());
      op->erase();
      for (Value v : operands) // a reshape, splat or broadcast nothing else reads
        if (Operation *def = v.getDefiningOp(); def && def->use_empty())
          def->erase();
    }
    // reshape(reshape(x)) to x's own type: x (ReshapeOp::fold).
    getOperation().walk([&](ReshapeOp reshape) {
      auto inner = reshape.getX().getDefiningOp<ReshapeOp>();
      if (!inner || inner.getX().getType() != reshape.getType())
        return;
      reshape.getResult().replaceAllUsesWith(inner.getX());
      reshape.erase();
      if (inner->use_empty())
        inner.erase();
    });
  }
};

} // namespace
} // namespace tcc
