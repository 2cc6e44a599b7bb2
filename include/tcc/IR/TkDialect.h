//===- TkDialect.h - The tk dialect: kernel IR and compiled programs ------===//
#pragma once

#include "tcc/IR/TccDialect.h" // the shared enums (UnaryKind, BinaryKind, ...)
#include "tcc/IR/SymbolicShape.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace tcc::tk {
/// Whether `type` is a tk buffer: static dims, or `?` dims whose sizes a #tcc.dims memory space
/// gives (canonical expressions, one per `?`).
bool isBufferType(mlir::MemRefType type);
} // namespace tcc::tk

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
/// On each tk.alloc of a program with symbolic buffers: [first, last] positions of its
/// lifetime in the program, with which libtccrt places the buffers again at each binding.
inline constexpr llvm::StringLiteral kLifetimeAttr = "tk.lifetime";
/// Alignment of arena offsets and constants, in bytes.
inline constexpr int64_t kBufferAlignment = 64;

inline bool isKernel(mlir::func::FuncOp f) { return f->hasAttr(kKernelAttr); }
inline bool isProgram(mlir::func::FuncOp f) { return f->hasAttr(kProgramAttr); }

/// Bytes of a static-shape memref (elements * element bytes; i1 takes one byte).
int64_t bufferBytes(mlir::MemRefType type);
/// Bytes of one element of a buffer (i1 takes one byte).
int64_t elementBytes(mlir::Type elementType);

/// Symbolic buffers. A kernel function's argument carrying this unit attribute is the i64
/// buffer of the run's symbol values (one per entry of the module's `tcc.symbols`, in order).
inline constexpr llvm::StringLiteral kSymbolsArgAttr = "tk.symbols";
/// The dims of a buffer (static ones constant).
SymShape bufferDims(mlir::MemRefType type);
/// The buffer type of `dims` (`?` + #tcc.dims where not constant).
mlir::MemRefType bufferType(llvm::ArrayRef<SymExpr> dims, mlir::Type elementType);
/// The buffer type of a tcc tensor type (its dims, symbolic ones included).
mlir::MemRefType bufferType(mlir::RankedTensorType tensor);
/// The bytes of a buffer as an expression of the size symbols.
SymExpr bufferBytesExpr(mlir::MemRefType type);
/// Position of `name` in the module's `tcc.symbols` (the index into the symbols buffer), or -1.
int64_t symbolPosition(mlir::ModuleOp module, llvm::StringRef name);
/// The kernel argument marked tk.symbols, or null.
mlir::BlockArgument symbolsArgument(mlir::func::FuncOp kernel);

} // namespace tcc::tk
