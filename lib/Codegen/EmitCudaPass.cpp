//===- EmitCudaPass.cpp - -tcc-emit-cuda: print the CUDA source of each kernel ---===//
//
// For inspection and lit tests: prints `// ---- kernel NAME ----`, a `// launch:` line (grid,
// block, dynamic shared bytes, strategy) and the translation unit emitCudaKernel makes for
// every tk.kernel function in the module, leaving the module as is. Argument alignments come
// from the module's tk.launch ops (cudaArgumentAlignments).
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/CudaEmitter.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Passes/Passes.h"
#include "tcc/Support/Tensor.h"

#include "llvm/Support/raw_ostream.h"

namespace tcc {
#define GEN_PASS_DEF_EMITCUDA
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

namespace tcc {
namespace {
struct EmitCudaPass : impl::EmitCudaBase<EmitCudaPass> {
  using EmitCudaBase::EmitCudaBase;
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<mlir::func::FuncOp>()) {
      if (!tk::isKernel(fn))
        continue;
      try {
        codegen::CudaEmitOptions options;
        options.argAlignment = codegen::cudaArgumentAlignments(fn);
        codegen::CudaKernel k = codegen::emitCudaKernel(fn, options);
        const codegen::CudaLaunchConfig &l = k.launch;
        llvm::outs() << "// ---- kernel " << fn.getSymName() << " ----\n"
                     << "// launch: grid [" << l.grid[0] << ", " << l.grid[1] << ", " << l.grid[2]
                     << "] block [" << l.block[0] << ", " << l.block[1] << ", " << l.block[2]
                     << "] shared " << l.sharedBytes << " strategy " << k.strategy << "\n"
                     << k.source;
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
