//===- PlanMemory.cpp - Place a program's temporaries in one arena --------===//
//
// Every tk.alloc of a tk.program gets a byte offset in one arena; `tk.arena_bytes` on the
// program gives its size. Two buffers may share bytes only if their lifetimes are disjoint.
//
// Lifetime of an alloc: from the alloc to the last op (in program order) that uses it or any
// view of it, inclusive. A launch that reads one buffer and writes another keeps both alive at
// that op, so inputs and outputs of one step never alias.
//
// Placement is "greedy by size" (as in TFLite's arena planner): allocs sorted by decreasing
// size (ties: earlier first), each placed at the lowest 64-byte aligned offset where it
// overlaps no already placed alloc whose lifetime intersects its own.
//
// Assumes: a program is straight-line (no regions), as -tcc-lower-to-kernels produces.
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Passes.h"
#include "tcc/IR/TkDialect.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

namespace tcc {
#define GEN_PASS_DEF_PLANMEMORY
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

struct Interval {
  tk::AllocOp alloc;
  int64_t bytes = 0;
  int64_t first = 0, last = 0; // op positions, inclusive
  int64_t offset = -1;
};

int64_t alignUp(int64_t v) {
  return (v + tk::kBufferAlignment - 1) / tk::kBufferAlignment * tk::kBufferAlignment;
}

/// The last position at which `value` or a view of it is used.
int64_t lastUse(Value value, const llvm::DenseMap<Operation *, int64_t> &position) {
  int64_t last = position.lookup(value.getDefiningOp());
  for (Operation *user : value.getUsers()) {
    last = std::max(last, position.lookup(user));
    if (auto view = dyn_cast<tk::ViewOp>(user))
      last = std::max(last, lastUse(view.getResult(), position));
  }
  return last;
}

/// Greedy-by-size placement; returns the arena size.
int64_t place(std::vector<Interval> &intervals) {
  std::vector<Interval *> order;
  for (auto &iv : intervals)
    order.push_back(&iv);
  std::stable_sort(order.begin(), order.end(),
                   [](const Interval *a, const Interval *b) { return a->bytes > b->bytes; });
  std::vector<Interval *> placed;
  int64_t arena = 0;
  for (Interval *iv : order) {
    // Placed intervals live at the same time as this one, sorted by offset.
    std::vector<Interval *> conflicts;
    for (Interval *p : placed)
      if (p->first <= iv->last && iv->first <= p->last)
        conflicts.push_back(p);
    std::sort(conflicts.begin(), conflicts.end(),
              [](const Interval *a, const Interval *b) { return a->offset < b->offset; });
    int64_t offset = 0;
    for (Interval *c : conflicts) {
      if (offset + iv->bytes <= c->offset)
        break; // fits in the gap before c
      offset = std::max(offset, alignUp(c->offset + c->bytes));
    }
    iv->offset = offset;
    arena = std::max(arena, alignUp(offset + iv->bytes));
    placed.push_back(iv);
  }
  return arena;
}

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    SymbolRanges ranges = symbolRanges(getOperation());
    // A buffer with symbolic dims gets the bytes it needs at every symbol's max: one static
    // plan serves every size the program accepts.
    auto plannedBytes = [&](tk::AllocOp alloc) -> std::optional<int64_t> {
      MemRefType type = alloc.getType();
      if (type.hasStaticShape())
        return tk::bufferBytes(type);
      SymExpr bytes = tk::bufferBytesExpr(type);
      int64_t max = rangeOf(bytes, ranges).max;
      if (max == INT64_MAX || max > (int64_t(1) << 48)) {
        alloc.emitError("a temporary of ")
            << bytes.str() << " bytes has no practical upper bound over the size symbols' "
            << "ranges (" << describeSymbolRanges(ranges)
            << "): declare them, e.g. --input-shape NAME=1..64x16..512";
        return std::nullopt;
      }
      return max;
    };
    for (auto program : getOperation().getOps<func::FuncOp>()) {
      if (!tk::isProgram(program))
        continue;
      if (!program.getBody().hasOneBlock()) {
        program.emitError("tk.program must be a single block to plan its memory");
        return signalPassFailure();
      }
      llvm::DenseMap<Operation *, int64_t> position;
      int64_t n = 0;
      for (Operation &op : program.getBody().front())
        position[&op] = n++;
      std::vector<Interval> intervals;
      for (auto alloc : program.getBody().front().getOps<tk::AllocOp>()) {
        Interval iv;
        iv.alloc = alloc;
        std::optional<int64_t> bytes = plannedBytes(alloc);
        if (!bytes)
          return signalPassFailure();
        iv.bytes = std::max<int64_t>(*bytes, 1);
        iv.first = position.lookup(alloc);
        iv.last = lastUse(alloc.getResult(), position);
        intervals.push_back(iv);
      }
      int64_t arena = place(intervals);
      Builder b(program.getContext());
      for (auto &iv : intervals)
        iv.alloc.setOffsetAttr(b.getI64IntegerAttr(iv.offset));
      program->setAttr(tk::kArenaBytesAttr, b.getI64IntegerAttr(arena));
    }
  }
};

} // namespace
} // namespace tcc
