// SCAFFOLD: replaced by its owner in this session.
#include "tcc/Passes/Passes.h"
#include "tcc/IR/TkDialect.h"

namespace tcc {
#define GEN_PASS_DEF_EMITCPP
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

namespace tcc {
namespace {
struct EmitCppPass : impl::EmitCppBase<EmitCppPass> {
  using EmitCppBase::EmitCppBase;
  void runOnOperation() override {
    getOperation()->emitError("EmitCpp is not implemented yet");
    signalPassFailure();
  }
};
} // namespace
} // namespace tcc
