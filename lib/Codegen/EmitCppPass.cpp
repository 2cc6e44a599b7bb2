//===- EmitCppPass.cpp - -tcc-emit-cpp: print the C++ of each tk kernel ---===//
//
// For inspection and lit tests: prints `// ---- kernel NAME ----` and the translation unit
// emitCpuKernel makes for every tk.kernel function in the module, leaving the module as is.
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/CppEmitter.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Passes/Passes.h"
#include "tcc/Support/Tensor.h"

#include "llvm/Support/raw_ostream.h"

namespace tcc {
#define GEN_PASS_DEF_EMITCPP
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

namespace tcc {
namespace {
struct EmitCppPass : impl::EmitCppBase<EmitCppPass> {
  using EmitCppBase::EmitCppBase;
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<mlir::func::FuncOp>()) {
      if (!tk::isKernel(fn))
        continue;
      try {
        std::string source = codegen::emitCpuKernel(fn);
        llvm::outs() << "// ---- kernel " << fn.getSymName() << " ----\n" << source;
      } catch (const Error &e) {
        fn.emitError() << e.what();
        signalPassFailure();
      }
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
} // namespace tcc
