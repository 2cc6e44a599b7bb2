// SCAFFOLD: replaced by its owner in this session.
#include "tcc/Passes/Passes.h"
#include "tcc/IR/TkDialect.h"

namespace tcc {
#define GEN_PASS_DEF_FUSE
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

namespace tcc {
namespace {
struct FusePass : impl::FuseBase<FusePass> {
  using FuseBase::FuseBase;
  void runOnOperation() override {
    getOperation()->emitError("Fuse is not implemented yet");
    signalPassFailure();
  }
};
} // namespace
} // namespace tcc
