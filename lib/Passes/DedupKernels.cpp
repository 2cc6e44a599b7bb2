//===- DedupKernels.cpp - One tk kernel for each distinct body -------------------===//
//
// -tcc-dedup-kernels: kernels (func.func with tk.kernel) with the same attributes (the symbol
// name aside) and equivalent bodies (OperationEquivalence, locations ignored) are one kernel.
// Candidates are found by a structural hash; the first in module order stays, launches of the
// others call it and the others are erased. Kernels built for different model nodes still
// merge; the launches keep their locations.
//
//===----------------------------------------------------------------------===//
#include "tcc/IR/TkDialect.h"
#include "tcc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/DenseMap.h"

namespace tcc {
#define GEN_PASS_DEF_DEDUPKERNELS
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

/// The kernel's attributes but its symbol name (its type, tk.kernel, argument attributes).
DictionaryAttr attributesButName(func::FuncOp kernel) {
  NamedAttrList attrs(kernel->getAttrDictionary());
  attrs.erase(SymbolTable::getSymbolAttrName());
  return attrs.getDictionary(kernel.getContext());
}

/// A hash of what makes two kernels the same: attributes and the ops of the body (names,
/// attributes, types; not which values they use, which isRegionEquivalentTo checks).
llvm::hash_code kernelHash(func::FuncOp kernel) {
  llvm::hash_code h = hash_value(attributesButName(kernel));
  kernel.getBody().walk([&](Operation *op) {
    h = llvm::hash_combine(h, OperationEquivalence::computeHash(
                                  op, OperationEquivalence::ignoreHashValue,
                                  OperationEquivalence::ignoreHashValue,
                                  OperationEquivalence::IgnoreLocations));
  });
  return h;
}

bool sameKernel(func::FuncOp a, func::FuncOp b) {
  return attributesButName(a) == attributesButName(b) &&
         OperationEquivalence::isRegionEquivalentTo(&a.getBody(), &b.getBody(),
                                                    OperationEquivalence::IgnoreLocations);
}

struct DedupKernelsPass : impl::DedupKernelsBase<DedupKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::DenseMap<llvm::hash_code, SmallVector<func::FuncOp, 1>> kept;
    llvm::DenseMap<StringAttr, FlatSymbolRefAttr> replacement; // duplicate -> kept kernel
    SmallVector<func::FuncOp> duplicates;
    for (auto kernel : module.getOps<func::FuncOp>()) {
      if (!tk::isKernel(kernel))
        continue;
      SmallVector<func::FuncOp, 1> &candidates = kept[kernelHash(kernel)];
      auto same = llvm::find_if(candidates, [&](func::FuncOp k) { return sameKernel(k, kernel); });
      if (same == candidates.end()) {
        candidates.push_back(kernel);
        continue;
      }
      replacement[kernel.getSymNameAttr()] = FlatSymbolRefAttr::get(same->getSymNameAttr());
      duplicates.push_back(kernel);
    }
    // One walk redirects every launch (a walk per duplicate would be quadratic).
    module.walk([&](tk::LaunchOp launch) {
      if (auto to = replacement.lookup(launch.getCalleeAttr().getAttr()))
        launch.setCalleeAttr(to);
    });
    for (func::FuncOp kernel : duplicates)
      kernel.erase();
  }
};

} // namespace
} // namespace tcc
