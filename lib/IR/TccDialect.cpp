//===- TccDialect.cpp - Dialect registration ------------------------------===//
#include "tcc/IR/TccDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tcc;

#include "tcc/IR/TccDialect.cpp.inc"
#include "tcc/IR/TccEnums.cpp.inc"


void TccDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "tcc/IR/TccOps.cpp.inc"
      >();
}

Operation *TccDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                           Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}
