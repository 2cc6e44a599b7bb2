// SCAFFOLD: replaced by its owner in this session.
#include "tcc/Passes/Passes.h"
#include "tcc/IR/TkDialect.h"

namespace tcc {
#define GEN_PASS_DEF_PLANMEMORY
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

namespace tcc {
namespace {
struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;
  void runOnOperation() override {
    getOperation()->emitError("PlanMemory is not implemented yet");
    signalPassFailure();
  }
};
} // namespace
} // namespace tcc
