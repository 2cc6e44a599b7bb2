//===- SymbolicShape.h - Symbolic dims of tcc tensor types ----------------===//
//
// A model exported with dynamic axes (batch, sequence length, image size) is compiled once for
// every size: each dynamic dim stays symbolic. In a tcc tensor type a symbolic dim is `?`, and
// the type's #tcc.dims encoding gives its size as an expression (tcc::SymExpr) of the module's
// size symbols, which the `tcc.symbols` module attribute declares with their ranges:
//
//   module attributes {tcc.symbols = {batch = array<i64: 1, 64>, seq = array<i64: 16, 512>}}
//   tensor<?x?x768xf32, #tcc.dims<["batch", "seq"]>>
//
// Shapes are handled as SymShape (one SymExpr per dim, static dims as constants), so one shape
// function serves static and symbolic types alike: symbolicShape() reads a type's dims and
// tensorTypeWithDims() builds the type back (canonical: equal dims give the same type). An
// entry function's arguments have plain symbols, or a*s + b of one symbol, as their symbolic
// dims; running it binds each symbol to the size of the first argument dim that names it
// (solving a*s + b where only such a dim reads it; bindSymbols), checking the declared range
// and that every other use agrees.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/SymExpr.h"
#include "tcc/Support/SymbolBinding.h"
#include "tcc/Support/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include <map>
#include <string>
#include <vector>

namespace tcc {

using SymShape = std::vector<SymExpr>;

/// Whether every `?` dim of `type` has an expression in a #tcc.dims encoding (and a static type
/// has no encoding): the invariant of every tcc tensor type.
bool hasValidDims(mlir::RankedTensorType type);
/// Whether `type` (a ranked tensor) has a symbolic dim.
bool hasSymbolicDims(mlir::Type type);

/// The dims of a ranked tensor type with valid dims.
SymShape symbolicShape(mlir::Type type);
SymShape symbolicShape(mlir::Value value);

/// The tensor type with `dims`: constant dims static, the others `?` in a #tcc.dims encoding.
/// A negative constant dim is a shape-function bug: it asserts.
mlir::RankedTensorType tensorTypeWithDims(llvm::ArrayRef<SymExpr> dims, mlir::Type elementType);
/// `like` with `elementType` (keeping its dims, symbolic ones included).
mlir::RankedTensorType withElementType(mlir::RankedTensorType like, mlir::Type elementType);

SymShape toSymShape(llvm::ArrayRef<int64_t> dims);
/// The static dims when every dim is constant.
std::optional<llvm::SmallVector<int64_t>> staticDims(llvm::ArrayRef<SymExpr> dims);

// SymbolRange(s), SymbolBindings, describeSymbolRanges, rangeOf and evaluateSym are standard
// C++ (tcc/Support/SymbolBinding.h): libtccrt binds the same way.

/// The module's `tcc.symbols` (empty when it has none).
SymbolRanges symbolRanges(mlir::ModuleOp module);
void setSymbolRanges(mlir::ModuleOp module, const SymbolRanges &ranges);

/// Binds the symbols of an entry function's argument types to the sizes of `shapes` (one per
/// argument), checking each against its range in `ranges` and every dim that reads it. Throws
/// tcc::Error naming the input (`inputNames[i]`, or "input i"), the dim and the assumption.
SymbolBindings bindSymbols(llvm::ArrayRef<mlir::Type> argumentTypes,
                           llvm::ArrayRef<Shape> shapes, const SymbolRanges &ranges,
                           llvm::ArrayRef<std::string> inputNames = {});

/// The concrete shape of `type` under `bindings` (tcc::Error when a symbol is unbound or a dim
/// evaluates negative).
Shape concreteShape(mlir::Type type, const SymbolBindings &bindings);

/// Shape arithmetic on symbolic sizes, folded at import: when `op` (a cast, reshape,
/// broadcast, concat, slice, gather, integer +, -, *, floor division of sizes, max, min, neg,
/// sum/product/max/min reduction, or an equality test or select decided by the symbols' ranges)
/// reads only small integer constants and tcc.sym_ints, at least one of them, it is replaced by
/// the tcc.sym_ints (or, when every value turns out constant, the tcc.constant) of its result.
/// Returns the replacement, or null when `op` is not such an op.
mlir::Value foldSymbolicInts(mlir::Operation *op, const SymbolRanges &ranges);

} // namespace tcc
