//===- Remat.cpp - Activation checkpointing on a training step ------------===//
//
// -tcc-remat (Passes.td). A training step is one block: the forward ops the loss is computed
// from, then the backward ops autodiff appended after the loss, then the optimizer. Every
// forward value a later op reads (a saved activation) lives from its forward op to its last
// backward use, and at the loss all of them are live together: that sum is the step's
// activation memory.
//
// Recomputing a saved value just before its first backward use ends the original's life in
// the forward pass; the copy lives only through the backward ops that read it. A copy's
// operands are recomputed in turn, back to values that stay saved (the roots): the outputs of
// ops that are not recomputed, the function's arguments and constants. Cheap ops (pointwise,
// data movement, casts, reductions, gathers) are recomputed; matrix products, convolutions and
// attention are kept (Inductor's default policy): fusion then folds most copies into the
// backward kernels that read them. Copies are shared: a value recomputed for one backward use
// serves the later ones.
//
// With a budget those kept values exceed, the expensive ops are recomputed too, a block at a
// time: only block boundaries are kept (values everything later depends on through them alone:
// a transformer's residual stream between blocks), every k-th one for the smallest k whose
// estimate fits (the boundaries plus one stretch's activations). Recomputation stops at the
// boundaries, so a block's copies are made at the start of its backward pass and die with it;
// letting chains run through the whole forward pass instead made every copy at the start of
// the backward pass, all live at once (measured: no smaller than keeping them).
//
// Ops with regions or side effects are never recomputed (nor are collectives); dropout's masks
// are pure functions of the step's rng key, so their copies draw the same bits.
//
//===----------------------------------------------------------------------===//
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Passes/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <functional>

namespace tcc {
#define GEN_PASS_DEF_REMAT
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

/// Recomputed whenever the backward pass reads them: O(size) work.
bool isCheap(Operation *op) {
  return isa<UnaryOp, BinaryOp, CompareOp, SelectOp, CastOp, BitcastOp, ReshapeOp, TransposeOp,
             BroadcastInDimOp, SliceOp, ReverseOp, ConcatOp, PadOp, IotaOp, DynamicSliceOp,
             GatherOp, GatherElementsOp, GatherNDOp, ReduceOp, ArgReduceOp>(op);
}

/// The forward part of a training step and what the backward part reads from it.
class StepAnalysis {
public:
  StepAnalysis(func::FuncOp f, int64_t lossResult) : block_(f.getBody().front()) {
    Operation *ret = block_.getTerminator();
    int64_t n = ret->getNumOperands();
    int64_t index = lossResult < 0 ? n + lossResult : lossResult;
    if (index < 0 || index >= n)
      return;
    Value loss = ret->getOperand(index);
    lossOp_ = loss.getDefiningOp();
    if (!lossOp_ || lossOp_->getBlock() != &block_)
      return;
    size_t i = 0;
    for (Operation &op : block_)
      position_[&op] = i++;
    SetVector<Operation *> slice;
    BackwardSliceOptions options;
    options.inclusive = true;
    getBackwardSlice(lossOp_, &slice, options);
    for (Operation *op : slice)
      if (op->getBlock() == &block_)
        forward_.insert(op);
    // Saved: forward results read by an op after the loss (the terminator excepted: returned
    // values are outputs whatever happens; constants live with the program, not the step).
    for (Operation &op : block_) {
      if (!forward_.count(&op) || isa<ConstantOp>(op))
        continue;
      for (Value r : op.getResults())
        if (!backwardUsers(r).empty())
          saved_.insert(r);
    }
  }

  bool valid() const { return lossOp_ != nullptr; }
  bool isForward(Operation *op) const { return forward_.count(op); }
  const SetVector<Value> &saved() const { return saved_; }

  /// Users of `v` after the loss, in block order (the terminator excepted).
  SmallVector<Operation *> backwardUsers(Value v) const {
    SmallVector<Operation *> users;
    size_t lossAt = position_.lookup(lossOp_);
    for (Operation *user : v.getUsers()) {
      Operation *top = block_.findAncestorOpInBlock(*user);
      if (!top || top == block_.getTerminator() || forward_.count(top))
        continue;
      auto at = position_.find(top);
      if (at != position_.end() && at->second > lossAt)
        users.push_back(user);
    }
    llvm::sort(users, [&](Operation *a, Operation *b) {
      return position_.lookup(block_.findAncestorOpInBlock(*a)) <
             position_.lookup(block_.findAncestorOpInBlock(*b));
    });
    return users;
  }

  size_t positionOf(Operation *op) const {
    return position_.lookup(block_.findAncestorOpInBlock(*op));
  }

  /// The block boundaries of the forward pass: forward values v such that, between v's op and
  /// the next forward op, v is the only forward value still to be read (everything after
  /// depends on what came before through v alone, as a residual stream between transformer
  /// blocks), in forward order. Arguments and constants are not counted.
  SmallVector<Value> cuts() const {
    SmallVector<Operation *> ops;
    for (Operation &op : block_)
      if (forward_.count(&op))
        ops.push_back(&op);
    llvm::DenseMap<Operation *, size_t> at;
    for (size_t i = 0; i < ops.size(); ++i)
      at[ops[i]] = i;
    // live[i]: values defined at or before op i and read by a forward op after it.
    std::vector<SmallVector<Value>> ends(ops.size() + 1);
    llvm::SetVector<Value> live;
    SmallVector<Value> out;
    for (size_t i = 0; i < ops.size(); ++i) {
      for (Value v : ends[i])
        live.remove(v);
      if (isa<ConstantOp>(ops[i]))
        continue;
      for (Value r : ops[i]->getResults()) {
        size_t last = i;
        for (Operation *user : r.getUsers()) {
          Operation *top = block_.findAncestorOpInBlock(*user);
          if (top && forward_.count(top))
            last = std::max(last, at.lookup(top));
        }
        if (last > i) {
          live.insert(r);
          ends[last].push_back(r);
        }
      }
      if (live.size() == 1 && i + 1 < ops.size())
        out.push_back(live.front());
    }
    return out;
  }

private:
  Block &block_;
  Operation *lossOp_ = nullptr;
  llvm::DenseMap<Operation *, size_t> position_;
  llvm::DenseSet<Operation *> forward_;
  SetVector<Value> saved_;
};

struct RematPass : impl::RematBase<RematPass> {
  using RematBase::RematBase;

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (f.getBody().getBlocks().size() != 1)
      return;
    StepAnalysis step(f, lossResult);
    if (!step.valid() || step.saved().empty())
      return;

    // Checkpoints (budget mode): the only forward values kept; everything else is recomputed
    // from them, a block at a time.
    llvm::DenseSet<Value> checkpoints;
    bool blocks = false;
    auto recomputable = [&](Operation *op) {
      // Never: ops with regions or effects, constants, and collectives (a copy would
      // communicate again on every rank).
      if (!op || !step.isForward(op) || op->getNumRegions() || !isMemoryEffectFree(op) ||
          isa<ConstantOp, AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp, BroadcastOp,
              SendOp, RecvOp>(op))
        return false;
      if (!blocks)
        return isCheap(op);
      return llvm::none_of(op->getResults(), [&](Value r) { return checkpoints.count(r); });
    };
    // The values recomputation starts from (kept for the backward pass), and their bytes.
    auto roots = [&]() {
      llvm::DenseSet<Value> visited;
      uint64_t bytes = 0;
      std::function<void(Value)> visit = [&](Value v) {
        if (!visited.insert(v).second)
          return;
        Operation *def = v.getDefiningOp();
        if (!def || !step.isForward(def) || isa<ConstantOp>(def))
          return;
        if (!recomputable(def)) {
          bytes += CoreBuilder::bytesOf(v);
          return;
        }
        for (Value operand : def->getOperands())
          visit(operand);
      };
      for (Value v : step.saved())
        visit(v);
      return bytes;
    };
    uint64_t before = 0;
    for (Value v : step.saved())
      before += CoreBuilder::bytesOf(v);
    if (budget >= 0 && roots() > (uint64_t)budget) {
      // Recomputing the cheap ops is not enough: keep only block boundaries, every `stride`-th
      // one (from the last: the first blocks' backward runs last), the densest set that fits.
      SmallVector<Value> cuts = step.cuts();
      uint64_t best = UINT64_MAX;
      int64_t bestStride = 0;
      for (int64_t stride = 1; stride <= (int64_t)cuts.size(); ++stride) {
        checkpoints.clear();
        for (int64_t i = (int64_t)cuts.size() - 1; i >= 0; i -= stride)
          checkpoints.insert(cuts[i]);
        blocks = true;
        // A block's recomputed values are live through its backward pass: the largest block's
        // saved activations count with the checkpoints.
        uint64_t kept = roots(), largest = before / (cuts.size() / stride + 1);
        if (kept + largest < best) {
          best = kept + largest;
          bestStride = stride;
        }
        if (kept + largest <= (uint64_t)budget)
          break;
      }
      checkpoints.clear();
      blocks = bestStride > 0;
      for (int64_t i = (int64_t)cuts.size() - 1; blocks && i >= 0; i -= bestStride)
        checkpoints.insert(cuts[i]);
      if (explain && blocks)
        f.emitRemark("remat: ") << cuts.size() << " block boundaries, 1 in " << bestStride
                                << " kept, the blocks between them recomputed (budget "
                                << (int64_t)budget << " bytes)";
    }

    // Recompute: each saved value just before its first backward use; copies shared.
    llvm::DenseMap<Value, Value> copies;
    std::function<Value(Value, OpBuilder &)> copyOf = [&](Value v, OpBuilder &b) -> Value {
      Operation *def = v.getDefiningOp();
      if (!recomputable(def))
        return v;
      if (Value known = copies.lookup(v))
        return known;
      IRMapping map;
      for (Value operand : def->getOperands())
        map.map(operand, copyOf(operand, b));
      Operation *copy = b.clone(*def, map);
      copy->setAttr(TccDialect::kRecomputedAttrName, b.getUnitAttr());
      for (auto [original, result] : llvm::zip(def->getResults(), copy->getResults()))
        copies[original] = result;
      return copies.lookup(v);
    };
    SmallVector<std::pair<size_t, Value>> order;
    for (Value v : step.saved())
      order.push_back({step.positionOf(step.backwardUsers(v).front()), v});
    llvm::stable_sort(order, [](auto &a, auto &b) { return a.first < b.first; });
    for (auto [at, v] : order) {
      if (!recomputable(v.getDefiningOp())) {
        if (explain)
          v.getDefiningOp()->emitRemark("remat: kept for the backward pass (")
              << CoreBuilder::bytesOf(v) << " bytes)";
        continue;
      }
      SmallVector<Operation *> users = step.backwardUsers(v);
      OpBuilder b(block(users.front()));
      Value copy = copyOf(v, b);
      for (Operation *user : users)
        user->replaceUsesOfWith(v, copy);
      if (explain)
        v.getDefiningOp()->emitRemark("remat: recomputed before its first backward use (")
            << CoreBuilder::bytesOf(v) << " bytes)";
    }
    if (explain)
      f.emitRemark("remat: saved activations ") << before << " bytes -> "
                                                << savedActivationBytes(f, lossResult) << " bytes";
  }

  /// The op of the function's block that holds `op` (the insertion point before it).
  Operation *block(Operation *op) {
    return getOperation().getBody().front().findAncestorOpInBlock(*op);
  }
};

} // namespace

uint64_t savedActivationBytes(func::FuncOp f, int64_t lossResult) {
  if (f.getBody().getBlocks().size() != 1)
    return 0;
  StepAnalysis step(f, lossResult);
  uint64_t bytes = 0;
  for (Value v : step.saved())
    bytes += CoreBuilder::bytesOf(v);
  return bytes;
}

} // namespace tcc
