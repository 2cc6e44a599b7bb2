//===- DedupKernels.cpp - One tk kernel for each distinct body -------------------===//
//
// -tcc-dedup-kernels: kernels (func.func with tk.kernel) whose generic printed form is the same
// once the symbol name is left out are one kernel. The first in module order stays; launches
// of the others call it and the others are erased. Locations are not printed, so kernels built
// for different model nodes still merge; the launches keep theirs.
//
//===----------------------------------------------------------------------===//
#include "tcc/IR/TkDialect.h"
#include "tcc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc {
#define GEN_PASS_DEF_DEDUPKERNELS
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

/// The kernel in generic form (its type, attributes and body; no locations) with its symbol
/// name left out.
std::string kernelKey(func::FuncOp kernel) {
  std::string text;
  llvm::raw_string_ostream os(text);
  kernel->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope());
  std::string name = "\"" + kernel.getSymName().str() + "\"";
  if (size_t at = text.find(name); at != std::string::npos)
    text.replace(at, name.size(), "\"\"");
  return text;
}

struct DedupKernelsPass : impl::DedupKernelsBase<DedupKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringMap<func::FuncOp> first;
    SmallVector<func::FuncOp> duplicates;
    for (auto kernel : module.getOps<func::FuncOp>()) {
      if (!tk::isKernel(kernel))
        continue;
      auto [it, inserted] = first.try_emplace(kernelKey(kernel), kernel);
      if (inserted)
        continue;
      if (failed(SymbolTable::replaceAllSymbolUses(kernel, it->second.getSymNameAttr(), module))) {
        kernel.emitError("cannot redirect the launches of a duplicate kernel");
        return signalPassFailure();
      }
      duplicates.push_back(kernel);
    }
    for (func::FuncOp kernel : duplicates)
      kernel.erase();
  }
};

} // namespace
} // namespace tcc
