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

#include "tcc/IR/SymbolicShape.h" // hasValidDims, which the type constraints call


#define GET_OP_CLASSES
#include "tcc/IR/TccOps.h.inc"

namespace tcc {
/// [N, C, S...] -> [N, S..., C] (a channels_last tcc.conv's input and result shapes).
llvm::SmallVector<int64_t> channelsLastShape(llvm::ArrayRef<int64_t> shape);
/// [N, S..., C] -> [N, C, S...].
llvm::SmallVector<int64_t> channelsFirstShape(llvm::ArrayRef<int64_t> shape);
} // namespace tcc
