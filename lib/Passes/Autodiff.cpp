//===- Autodiff.cpp - Reverse-mode differentiation of tcc graphs -------------===//
//
// buildGradients walks the ops of the loss's block backwards from the loss, calling each active
// op's vector-Jacobian product (DifferentiableOpInterface, lib/IR/TccGradients.cpp) and summing
// the adjoints of values with several uses. An op is active when one of its float results
// depends on a `wrt` value (varied) and the loss depends on it (useful); only active operands'
// adjoints are built. Ops with regions are opaque: their results are varied if anything they
// use, inside the regions too, is.
//
// -tcc-autodiff (for lit tests) appends to each func returning one 0-d float the gradients with
// respect to its float arguments.
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Autodiff.h"
#include "tcc/IR/Attention.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/Sharding.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Passes/Passes.h"
#include "tcc/Support/Tensor.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace tcc {
#define GEN_PASS_DEF_AUTODIFF
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {

namespace {

bool isFloat(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

/// Calls f on every value `op` reads: its operands and, for ops with regions, the values
/// defined above that its regions use.
template <class F> void forEachUsedValue(Operation *op, F &&f) {
  for (Value v : op->getOperands())
    f(v);
  if (op->getNumRegions() == 0)
    return;
  op->walk([&](Operation *inner) {
    if (inner == op)
      return;
    for (Value v : inner->getOperands())
      if (!op->isAncestor(v.getParentBlock()->getParentOp()))
        f(v);
  });
}

} // namespace

FailureOr<SmallVector<Value>> buildGradients(OpBuilder &b, Value loss, ArrayRef<Value> wrt) {
  auto lossType = dyn_cast<RankedTensorType>(loss.getType());
  if (!lossType || lossType.getRank() != 0 || !isa<FloatType>(lossType.getElementType()))
    return emitError(loss.getLoc(), "autodiff: the loss must be a 0-d float tensor, got ")
           << loss.getType();
  Block *block = loss.getParentBlock();
  Operation *lossOp = loss.getDefiningOp();

  // Varied: float values that depend on a wrt value.
  llvm::DenseSet<Value> varied;
  for (Value w : wrt)
    if (isFloat(w))
      varied.insert(w);
  for (Operation &op : *block) {
    if (lossOp && lossOp->isBeforeInBlock(&op))
      break;
    // What a recv brings in may depend on the peer's wrt values.
    bool depends = isa<RecvOp>(op);
    forEachUsedValue(&op, [&](Value v) { depends |= varied.contains(v); });
    if (depends)
      for (Value r : op.getResults())
        if (isFloat(r))
          varied.insert(r);
  }

  // Useful: values the loss depends on (within the block, walking back from the loss).
  llvm::DenseSet<Value> useful{loss};
  llvm::SmallVector<Operation *> active; // in reverse program order
  if (lossOp)
    for (Operation *op = lossOp; op; op = op->getPrevNode()) {
      // A send feeds the peer's computation, whose loss counts too (the SPMD reading of
      // collectives' gradients, TccOps.td).
      bool send = isa<SendOp>(op);
      bool used = send || llvm::any_of(op->getResults(), [&](Value r) { return useful.contains(r); });
      if (!used)
        continue;
      forEachUsedValue(op, [&](Value v) { useful.insert(v); });
      if (send ? varied.contains(op->getOperand(0))
               : llvm::any_of(op->getResults(),
                              [&](Value r) { return useful.contains(r) && varied.contains(r); }))
        active.push_back(op);
    }

  // A gradient differentiated again (second order) through tcc.attention_grad: that op is
  // differentiated as its decomposition (tcc/IR/Attention.h), written in its place first.
  SmallVector<AttentionGradOp> activeGrads;
  for (Operation *op : active)
    if (auto g = dyn_cast<AttentionGradOp>(op))
      activeGrads.push_back(g);
  if (!activeGrads.empty()) {
    for (AttentionGradOp g : activeGrads)
      decomposeAttentionGrad(g);
    return buildGradients(b, loss, wrt);
  }

  // Every backward op is inserted at b's insertion point, so they form one run of ops ending
  // there: on failure that run is erased again.
  Block *insertBlock = b.getInsertionBlock();
  Block::iterator insertPoint = b.getInsertionPoint();
  Operation *before = insertPoint == insertBlock->begin() ? nullptr : &*std::prev(insertPoint);
  auto fail = [&]() -> FailureOr<SmallVector<Value>> {
    Block::iterator first = before ? std::next(before->getIterator()) : insertBlock->begin();
    SmallVector<Operation *> created;
    for (auto it = first; it != b.getInsertionPoint(); ++it)
      created.push_back(&*it);
    for (Operation *op : llvm::reverse(created)) {
      op->dropAllUses();
      op->erase();
    }
    return failure();
  };

  // Adjoints, accumulated over uses.
  llvm::DenseMap<Value, Value> adjoint;
  adjoint[loss] = CoreBuilder(b, loss.getLoc()).splat(lossType, 1.0);
  for (Operation *op : active) {
    SmallVector<Value> resultAdjoints;
    bool any = false;
    for (Value r : op->getResults()) {
      resultAdjoints.push_back(adjoint.lookup(r));
      any |= (bool)resultAdjoints.back();
    }
    // Every rank of a group takes part in a collective's backward, zero adjoint or not.
    if (!any && !isCollective(op))
      continue;
    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    if (!diff || op->getNumRegions()) {
      op->emitOpError("has no gradient: ")
          << (op->getNumRegions()
                  ? "ops with regions (tcc.if, tcc.loop, tcc.fusion) are not differentiated"
                  : "it declares no vector-Jacobian product");
      return fail();
    }
    SmallVector<bool> wanted;
    for (Value v : op->getOperands())
      wanted.push_back(varied.contains(v) && useful.contains(v));
    SmallVector<Value> operandAdjoints;
    Operation *lastBefore = b.getInsertionPoint() == insertBlock->begin()
                                ? nullptr
                                : &*std::prev(b.getInsertionPoint());
    try {
      if (failed(diff.buildVjp(b, resultAdjoints, wanted, operandAdjoints)))
        return fail();
    } catch (const Error &e) {
      op->emitOpError("gradient construction failed: ") << e.what();
      return fail();
    }
    // Pipeline stages: the ops of a micro-batch forward op's product run on its stage.
    if (auto index = op->getAttrOfType<IntegerAttr>(TccDialect::kForwardIndexAttrName)) {
      Attribute microBatch = op->getAttr(TccDialect::kMicroBatchAttrName);
      for (auto it = lastBefore ? std::next(lastBefore->getIterator()) : insertBlock->begin();
           it != b.getInsertionPoint(); ++it) {
        it->setAttr(TccDialect::kBackwardOfAttrName, index);
        if (microBatch)
          it->setAttr(TccDialect::kMicroBatchAttrName, microBatch);
      }
    }
    CoreBuilder cb(b, op->getLoc());
    for (auto [operand, adj] : llvm::zip(op->getOperands(), operandAdjoints)) {
      if (!adj)
        continue;
      Value &acc = adjoint[operand];
      if (!acc) {
        acc = adj;
        continue;
      }
      acc = cb.add(acc, adj);
      // Pipeline stages: a sum of adjoints of a micro-batch forward value belongs to the
      // product of the op that made it.
      if (Operation *def = operand.getDefiningOp())
        if (auto index = def->getAttrOfType<IntegerAttr>(TccDialect::kForwardIndexAttrName)) {
          acc.getDefiningOp()->setAttr(TccDialect::kBackwardOfAttrName, index);
          if (Attribute m = def->getAttr(TccDialect::kMicroBatchAttrName))
            acc.getDefiningOp()->setAttr(TccDialect::kMicroBatchAttrName, m);
        }
    }
  }

  SmallVector<Value> grads;
  for (Value w : wrt) {
    Value g = adjoint.lookup(w);
    grads.push_back(g ? g : CoreBuilder(b, w.getLoc()).splatLike(w, 0.0));
  }
  return grads;
}

namespace {

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    for (auto func : llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>())) {
      if (func.isExternal() || func.getNumResults() != 1)
        continue;
      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      Value loss = ret.getOperand(0);
      auto t = dyn_cast<RankedTensorType>(loss.getType());
      if (!t || t.getRank() != 0 || !isa<FloatType>(t.getElementType()))
        continue;
      SmallVector<Value> wrt;
      for (BlockArgument a : func.getArguments())
        if (isFloat(a))
          wrt.push_back(a);
      OpBuilder b(ret);
      auto grads = buildGradients(b, loss, wrt);
      if (failed(grads))
        return signalPassFailure();
      SmallVector<Value> results{loss};
      llvm::append_range(results, *grads);
      b.create<func::ReturnOp>(ret.getLoc(), results);
      ret.erase();
      func.setFunctionType(
          b.getFunctionType(func.getArgumentTypes(), ValueRange(results).getTypes()));
    }
  }
};

} // namespace

} // namespace tcc
