//===- TkDialect.h - The tk dialect: kernel IR and compiled programs ------===//
#pragma once

#include "tcc/IR/TccDialect.h" // the shared enums (UnaryKind, BinaryKind, ...)

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "tcc/IR/TkDialect.h.inc"
#include "tcc/IR/TkEnums.h.inc"

#define GET_OP_CLASSES
#include "tcc/IR/TkOps.h.inc"

namespace tcc::tk {

/// Attribute names on func.func: a kernel, a program, and the program's metadata.
inline constexpr llvm::StringLiteral kKernelAttr = "tk.kernel";
inline constexpr llvm::StringLiteral kProgramAttr = "tk.program";
/// i64: number of leading program arguments that are graph inputs (the rest are outputs).
inline constexpr llvm::StringLiteral kNumInputsAttr = "tk.num_inputs";
/// array of strings: graph input names, then graph output names.
inline constexpr llvm::StringLiteral kArgNamesAttr = "tk.arg_names";
/// i64: arena size in bytes (set by -tcc-plan-memory).
inline constexpr llvm::StringLiteral kArenaBytesAttr = "tk.arena_bytes";
/// Alignment of arena offsets and constants, in bytes.
inline constexpr int64_t kBufferAlignment = 64;

inline bool isKernel(mlir::func::FuncOp f) { return f->hasAttr(kKernelAttr); }
inline bool isProgram(mlir::func::FuncOp f) { return f->hasAttr(kProgramAttr); }

/// Bytes of a static-shape memref (elements * element bytes; i1 takes one byte).
int64_t bufferBytes(mlir::MemRefType type);

} // namespace tcc::tk
