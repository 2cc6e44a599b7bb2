//===- PlanMemory.cpp - Place a program's temporaries in one arena --------===//
//
// Every tk.alloc of a tk.program gets a byte offset in one arena; `tk.arena_bytes` on the
// program gives its size. Two buffers may share bytes only if their lifetimes are disjoint.
//
// Lifetime of an alloc: from the alloc to the last op (in program order) that uses it or any
// view of it, inclusive. A launch that reads one buffer and writes another keeps both alive at
// that op, so inputs and outputs of one step never alias.
//
// Placement is "greedy by size" (tcc/Support/ArenaPlacement.h, which libtccrt shares). A
// program with symbolic buffers is planned at every symbol's max; its allocs also keep their
// lifetimes (`tk.lifetime`), with which the runtime places them again at each binding.
//
// Assumes: a program is straight-line (no regions), as -tcc-lower-to-kernels produces.
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Passes.h"
#include "tcc/IR/TkDialect.h"

#include "tcc/Support/ArenaPlacement.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

namespace tcc {
#define GEN_PASS_DEF_PLANMEMORY
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

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
      std::vector<ArenaInterval> intervals;
      std::vector<tk::AllocOp> allocs;
      for (auto alloc : program.getBody().front().getOps<tk::AllocOp>()) {
        ArenaInterval iv;
        std::optional<int64_t> bytes = plannedBytes(alloc);
        if (!bytes)
          return signalPassFailure();
        iv.bytes = std::max<int64_t>(*bytes, 1);
        iv.first = position.lookup(alloc);
        iv.last = lastUse(alloc.getResult(), position);
        intervals.push_back(iv);
        allocs.push_back(alloc);
      }
      int64_t arena = placeInArena(intervals, tk::kBufferAlignment);
      Builder b(program.getContext());
      bool symbolic = !ranges.empty();
      for (size_t i = 0; i < allocs.size(); ++i) {
        allocs[i].setOffsetAttr(b.getI64IntegerAttr(intervals[i].offset));
        if (symbolic)
          allocs[i]->setAttr(tk::kLifetimeAttr,
                             b.getDenseI64ArrayAttr({intervals[i].first, intervals[i].last}));
      }
      program->setAttr(tk::kArenaBytesAttr, b.getI64IntegerAttr(arena));
    }
  }
};

} // namespace
} // namespace tcc
