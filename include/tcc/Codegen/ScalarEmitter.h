//===- ScalarEmitter.h - tk scalar ops as C expressions (CPU and CUDA) ----===//
//
// The part of code generation both emitters share: C types of tk scalars, literals, one C
// expression per scalar op (constant, unary, binary, compare, select, cast, apply), load
// address linearisation, reduction identities and combiners, and the prelude of helper
// functions these expressions call. Everything a target changes (16-bit float conversions,
// math function names, function qualifiers) is decided here from `Target`; the loop skeletons
// (OpenMP loops on the CPU, grids and blocks on CUDA) live in the emitters.
//
// Values are computed in their "compute type" (float for f16/bf16, bool for i1, int64_t for
// index) and kept in memory in their "storage type" (uint16_t bits for f16/bf16, uint8_t for
// i1). An expression whose result is f16/bf16 is rounded once (round-to-nearest-even), like the
// reference kernels. Integer arithmetic wraps; integer division or remainder by zero gives 0.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/TccDialect.h"
#include "tcc/Support/SymExpr.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <map>
#include <string>
#include <vector>

namespace tcc::codegen {

enum class Target { Cpu, Cuda };

/// The MLIR spelling of `type` (`f32`, `memref<4x8xf32>`), for messages and comments in
/// emitted code.
std::string typeString(mlir::Type type);

class ScalarEmitter {
public:
  explicit ScalarEmitter(Target target) : target(target) {}

  Target getTarget() const { return target; }

  /// Helper functions (bit casts, f16/bf16 conversions, wrapping and safe integer arithmetic,
  /// saturating casts, NaN-propagating max/min, affine division). Include-guarded, so several
  /// emitted translation units may be concatenated into one.
  std::string prelude() const;

  /// C type a value of `type` is computed in (float for f16/bf16, bool for i1, int64_t for
  /// index). Throws tcc::Error for types tk does not compute with.
  std::string computeType(mlir::Type type) const;
  /// C type of one element of `type` in memory (uint16_t for f16/bf16, uint8_t for i1).
  std::string storageType(mlir::Type type) const;

  // ---- Names -------------------------------------------------------------------------------

  /// A fresh local name `<prefix><n>`.
  std::string fresh(llvm::StringRef prefix);
  /// Binds `value` to a C name (a local, a loop index, or a literal).
  void bind(mlir::Value value, std::string name) { names[value] = std::move(name); }
  /// The C name or literal bound to `value`; throws if none.
  const std::string &name(mlir::Value value) const;
  bool isBound(mlir::Value value) const { return names.count(value) != 0; }

  // ---- Expressions -------------------------------------------------------------------------

  /// The literal of a tk.constant value (already in the compute type).
  std::string literal(mlir::TypedAttr value) const;
  /// The expression of a scalar op's single result from its operands' names: tk.constant,
  /// tk.unary, tk.binary, tk.compare, tk.select, tk.cast, tk.apply. Results of type f16/bf16
  /// are rounded. Throws tcc::Error naming the op if it cannot be emitted.
  std::string expression(mlir::Operation *op) const;
  /// True for the ops `expression` handles.
  static bool isScalarOp(mlir::Operation *op);

  /// Row-major linear offset of `indices` into a buffer of `type`, e.g. `i0 * 64 + i1` (for a
  /// buffer with symbolic dims, strides are expressions of the symbol locals: `i0 * tcc_sym_seq`).
  std::string linearIndex(mlir::MemRefType type, mlir::ValueRange indices) const;
  /// A size expression as int64_t C++ over the kernel's symbol locals (symbolLocal).
  static std::string sizeExpr(const SymExpr &e);
  /// The local holding the run's value of the size symbol `name`.
  static std::string symbolLocal(llvm::StringRef name) { return "tcc_sym_" + name.str(); }
  /// Lines declaring one const local (symbolLocal) per size symbol of `kernel`'s module, read
  /// from `symbolsPointer` (the kernel's tk.symbols argument), indented by two spaces; throws
  /// when the module declares no symbols.
  static std::string symbolLocals(mlir::func::FuncOp kernel, const std::string &symbolsPointer);
  /// A size expression as a name to use in loops: a number, a symbol's local, or a local made
  /// once per kernel (sizeDeclarations: the loop emitter declares them at the kernel's entry, so
  /// that strides are not recomputed per element).
  std::string sizeLocal(const SymExpr &e) const;
  /// `const int64_t tcc_size<k> = ...;` for every local sizeLocal made, in order.
  const std::vector<std::string> &sizeDeclarations() const { return sizeDeclarations_; }
  /// The compute-type value of the element `pointer[offset]` of a buffer with `elementType`.
  std::string loadValue(mlir::Type elementType, const std::string &element) const;
  /// The storage-type value written for the compute-type value `value`.
  std::string storeValue(mlir::Type elementType, const std::string &value) const;

  /// An affine expression over int64_t operands, with floordiv/mod/ceildiv rounding like MLIR
  /// (toward -inf; mod is non-negative for a positive divisor).
  std::string affine(mlir::AffineExpr expr, llvm::ArrayRef<std::string> dims,
                     llvm::ArrayRef<std::string> symbols) const;

  // ---- Reductions --------------------------------------------------------------------------

  /// C type a reduction of `kind` over `type` accumulates in: the compute type, except wrapping
  /// unsigned types for integer sums and products (no signed overflow).
  std::string accumulatorType(tcc::ReduceKind kind, mlir::Type type) const;
  /// The identity of `kind` on `type` as an accumulator literal.
  std::string reduceIdentity(tcc::ReduceKind kind, mlir::Type type) const;
  /// `acc` combined with the compute-type value `value` (for max/min on floats this ignores
  /// NaN; callers track NaN separately, see `isNaNExpr`).
  std::string reduceCombine(tcc::ReduceKind kind, mlir::Type type, const std::string &acc,
                            const std::string &value) const;
  /// The result-type value of a finished accumulator (rounds f16/bf16, narrows integers).
  std::string reduceResult(tcc::ReduceKind kind, mlir::Type type, const std::string &acc) const;
  /// True where max/min must track NaN beside the accumulator (float types).
  static bool reductionTracksNaN(tcc::ReduceKind kind, mlir::Type type);
  /// `value != value` for float types.
  std::string isNaNExpr(const std::string &value) const { return "(" + value + " != " + value + ")"; }
  /// A quiet NaN in the compute type of `type`.
  std::string quietNaN(mlir::Type type) const;

  /// For tk.arg_reduce: true when `a` is strictly more extreme than `b` (NaN beats all).
  std::string moreExtreme(mlir::Type type, bool largest, const std::string &a,
                          const std::string &b) const;
  /// For tk.arg_reduce walking positions in increasing order: true when `candidate` (at a later
  /// position) replaces `best`: it is more extreme or, with `selectLast` (select_last_index),
  /// not less extreme.
  std::string argReplaces(mlir::Type type, bool largest, bool selectLast,
                          const std::string &candidate, const std::string &best) const {
    return selectLast ? "!" + moreExtreme(type, largest, best, candidate)
                      : moreExtreme(type, largest, candidate, best);
  }

private:
  std::string mathFn(llvm::StringRef name, mlir::Type computeIn) const;
  std::string roundTo(mlir::Type type, const std::string &floatValue) const;
  std::string unaryExpr(tcc::UnaryKind kind, mlir::Type type, const std::string &x) const;
  std::string maxMinOfConstant(mlir::Operation *binary) const;
  std::string binaryExpr(tcc::BinaryKind kind, mlir::Type type, const std::string &a,
                         const std::string &b) const;
  std::string castExpr(mlir::Type from, mlir::Type to, const std::string &x) const;
  std::string floatLiteral(double value, bool isDouble) const;

  Target target;
  llvm::DenseMap<mlir::Value, std::string> names;
  mutable std::map<std::string, std::string> sizeLocals_; // expression text -> local
  mutable std::vector<std::string> sizeDeclarations_;
  std::map<std::string, unsigned> counters;
};

} // namespace tcc::codegen
