//===- FoldConstants.cpp - Evaluate constant subgraphs at compile time ------===//
//
// Folding uses the reference kernels, so a folded result is exactly what the interpreter would
// have computed at run time. Assumes: static shapes (every tcc op).
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Passes.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Interp/Interpreter.h"

#include "mlir/IR/Builders.h"

namespace tcc {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {

bool foldConstantOp(Operation *op, int64_t maxElements,
                    llvm::function_ref<void(Value, Value)> onReplace) {
  if (!isa_and_present<TccDialect>(op->getDialect()) || isa<ConstantOp>(op) || op->getNumRegions() ||
      op->getNumResults() == 0)
    return false;
  // Values with symbolic dims have no size until a run binds the symbols.
  for (Type t : op->getResultTypes())
    if (hasSymbolicDims(t))
      return false;
  std::vector<Tensor> operands;
  for (Value v : op->getOperands()) {
    auto c = v.getDefiningOp<ConstantOp>();
    if (!c)
      return false;
    // A splat costs nothing in the IR whatever its shape, but folding would materialise it
    // (the importer's fuzzer made one of 2^61 elements from a corrupt LayerNormalization axis).
    if (isa<SplatElementsAttr>(c.getValue()) &&
        cast<RankedTensorType>(c.getType()).getNumElements() > maxElements)
      return false;
  }
  for (Value v : op->getOperands())
    operands.push_back(tensorFromAttr(v.getDefiningOp<ConstantOp>().getValue()));
  // Above the limit, still fold what only rearranges a constant nothing else uses (a weight
  // transposed, flipped or reshaped for its consumer, as ConvTranspose's import does): the
  // folded constant replaces the old one, so constant memory does not grow, and the kernel sees
  // a program constant (packed once) instead of a tensor recomputed on every run.
  // Likewise a conversion to a narrower type (a weight in 16 bits for --precision).
  auto bits = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType().getIntOrFloatBitWidth();
  };
  bool narrows = isa<CastOp>(op) && bits(op->getResult(0)) <= bits(op->getOperand(0));
  bool rearrangesSoleUse = (isa<TransposeOp, ReverseOp, ReshapeOp>(op) || narrows) &&
                           op->getOperand(0).hasOneUse();
  for (Type t : op->getResultTypes())
    if (cast<RankedTensorType>(t).getNumElements() > maxElements && !rearrangesSoleUse)
      return false;
  // Broadcasting a (non-splat) constant only copies it: keep the small constant and the
  // broadcast, which fuses into its users, rather than a large materialized copy.
  if (auto bcast = dyn_cast<BroadcastInDimOp>(op)) {
    auto c = bcast.getX().getDefiningOp<ConstantOp>();
    bool splat = isa<SplatElementsAttr>(c.getValue());
    if (!splat && bcast.getType().getNumElements() > std::max<int64_t>(
                                                        4096, cast<RankedTensorType>(c.getType()).getNumElements()))
      return false;
  }
  std::vector<Tensor> results;
  try {
    results = evaluateOp(op, operands);
  } catch (const Error &) {
    return false;
  }
  OpBuilder builder(op);
  for (auto [result, value] : llvm::zip(op->getResults(), results)) {
    auto folded = builder.create<ConstantOp>(op->getLoc(), attrFromTensor(op->getContext(), value));
    result.replaceAllUsesWith(folded.getResult());
    if (onReplace)
      onReplace(result, folded.getResult());
  }
  op->erase();
  return true;
}

namespace {
struct FoldConstantsPass : impl::FoldConstantsBase<FoldConstantsPass> {
  using FoldConstantsBase::FoldConstantsBase;
  void runOnOperation() override {
    // Operands are defined before their users, so one walk in order folds whole chains.
    SmallVector<Operation *> ops;
    getOperation()->walk<WalkOrder::PreOrder>([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops)
      foldConstantOp(op, maxElements);
  }
};
} // namespace

} // namespace tcc
