//===- tcc-opt.cpp - Runs tcc passes on .mlir files (for lit tests) -------===//
#include "tcc/IR/TccDialect.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<tcc::TccDialect, tcc::tk::TkDialect, mlir::func::FuncDialect,
                  mlir::memref::MemRefDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  tcc::registerTccPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tcc optimizer driver: runs tcc passes on .mlir files\n", registry));
}
