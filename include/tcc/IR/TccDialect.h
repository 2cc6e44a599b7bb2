//===- TccDialect.h - The tcc graph dialect -------------------------------===//
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tcc/IR/TccDialect.h.inc"
#include "tcc/IR/TccEnums.h.inc"
#include "tcc/IR/TccInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tcc/IR/TccAttrs.h.inc"


#define GET_OP_CLASSES
#include "tcc/IR/TccOps.h.inc"
