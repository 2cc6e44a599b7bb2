// SCAFFOLD: replaced by its owner in this session.
#include "tcc/Passes/Passes.h"
#include "tcc/IR/TkDialect.h"

namespace tcc {
#define GEN_PASS_DEF_LOWERTOKERNELS
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

namespace tcc {
namespace {
struct LowerToKernelsPass : impl::LowerToKernelsBase<LowerToKernelsPass> {
  using LowerToKernelsBase::LowerToKernelsBase;
  void runOnOperation() override {
    getOperation()->emitError("LowerToKernels is not implemented yet");
    signalPassFailure();
  }
};
} // namespace
} // namespace tcc
