//===- KernelEmitter.h - Builds tk kernel bodies from fused tcc ops ----------===//
//
// The kernel half of -tcc-lower-to-kernels. A KernelEmitter builds, at an OpBuilder's insertion
// point inside a kernel function, the scalar tk ops computing one element of a tcc value:
// `element(v, I)` is THE table "how to compute element I of op X", used for every op of every
// kernel (elementwise ops map 1:1 onto tk.unary/binary/..., layout ops remap the index,
// gathers/pads/concats compute clamped indices and select, reductions and the loop forms of
// matmul/conv/reduce_window open a tk.reduce). Values bound to buffers (the fusion's inputs, a
// library call's output) are loaded.
//
// Indices are AffineExprs over "index dims": the loop induction variables and any computed
// index values (gathered indices, clamps) registered with newDim(). Loads compose them into one
// simplified tk.apply per subscript. Dims of size 1 are indexed by the constant 0. Results are
// memoised per (value, index) and loop scope, so a value read twice at the same element (a
// softmax's max) is computed once, and DAGs do not blow up.
//
// The kernel skeletons (a loop group with rows, cumsum, scatters, ...) are in buildKernelBody.
// Errors throw LoweringError (caught by the pass and reported on the op).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "FusionUtils.h"

#include "tcc/IR/TkDialect.h"

#include "mlir/IR/Builders.h"

#include <string>

namespace tcc::kernel {

struct LoweringError {
  mlir::Operation *op;
  std::string message;
};

using fusion::Index;

class KernelEmitter {
public:
  KernelEmitter(mlir::OpBuilder &b, mlir::Location loc);

  /// `tensor` (a fusion block argument or a value computed by a library call) is held in the
  /// kernel buffer `memref`: its elements are loaded.
  void bindBuffer(mlir::Value tensor, mlir::Value memref) { buffers_[tensor] = memref; }

  /// Element `idx` of the tcc value `v`, as a scalar, emitted at the insertion point.
  mlir::Value element(mlir::Value v, llvm::ArrayRef<mlir::AffineExpr> idx);

  // ---- Loop skeleton ----
  /// tk.parallel over `shape` (a rank-0 shape runs once); `body` gets the element index.
  void parallel(llvm::ArrayRef<int64_t> shape, llvm::function_ref<void(const Index &)> body);
  /// ... over a shape with symbolic dims (their bounds are read from the run's symbol values).
  void parallel(llvm::ArrayRef<SymExpr> shape, llvm::function_ref<void(const Index &)> body);
  /// tk.reduce of `kind` over `bounds` of the values `body` returns (type `type`); 16-bit floats
  /// accumulate in f32, like the reference kernels, and are rounded once.
  mlir::Value reduce(ReduceKind kind, mlir::Type type, llvm::ArrayRef<int64_t> bounds,
                     llvm::function_ref<mlir::Value(const Index &)> body);
  mlir::Value reduce(ReduceKind kind, mlir::Type type, llvm::ArrayRef<SymExpr> bounds,
                     llvm::function_ref<mlir::Value(const Index &)> body);
  /// tk.for 0..count-1 with carried scalars; `body(i, carried)` returns the next ones.
  mlir::ValueRange forLoop(const SymExpr &count, mlir::ValueRange inits,
                           llvm::function_ref<llvm::SmallVector<mlir::Value>(
                               mlir::AffineExpr, mlir::ValueRange)> body);
  mlir::ValueRange forLoop(int64_t count, mlir::ValueRange inits,
                           llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::AffineExpr,
                                                                             mlir::ValueRange)>
                               body);

  // ---- Memory and indices ----
  mlir::Value load(mlir::Value memref, llvm::ArrayRef<mlir::AffineExpr> idx);
  void store(mlir::Value value, mlir::Value memref, llvm::ArrayRef<mlir::AffineExpr> idx);
  /// The index value of `e` (one tk.apply, or a loop variable, or a constant).
  mlir::Value index(mlir::AffineExpr e);
  /// Registers a computed index value as a new dim usable in index expressions.
  mlir::AffineExpr newDim(mlir::Value indexValue);
  /// clamp(e, lo, hi) as a new dim (only the bounds that can be exceeded are applied).
  mlir::AffineExpr clamp(mlir::Value v, int64_t lo, int64_t hi);
  mlir::AffineExpr clamp(mlir::Value v, mlir::AffineExpr lo, mlir::AffineExpr hi);
  /// The size `n` of something of `op` (`what`: "an input", ...) as an index expression, where a
  /// symbolic one must be at least `minimum` (>= 1: clamps into [0, n - 1] then stay in bounds)
  /// at every size in the module's ranges; reported otherwise.
  mlir::AffineExpr sizeAtLeast(mlir::Operation *op, const SymExpr &n, int64_t minimum,
                               const char *what);
  /// An integer element of an index tensor as an index, negative values counted from the end
  /// (+ dimSize), clamped into [0, dimSize).
  mlir::AffineExpr normalizedIndex(mlir::Value scalar, int64_t dimSize);
  mlir::AffineExpr normalizedIndex(mlir::Value scalar, const SymExpr &dimSize);

  // ---- Symbolic sizes ----
  /// A size as an index expression over dims: its size symbols become dims bound to tk.size
  /// values made once per kernel at its entry.
  mlir::AffineExpr size(const SymExpr &size);
  /// Replaces the size symbols (s<k>, see FusionUtils.h) of an index expression by those dims.
  mlir::AffineExpr bindSizeSymbols(mlir::AffineExpr e);

  // ---- Scalars ----
  mlir::Value constant(mlir::Type type, double value);
  mlir::Value constantIndex(int64_t value);
  /// The identity of a reduction kind for `type` (0, 1, lowest, highest).
  mlir::Value identity(ReduceKind kind, mlir::Type type);
  mlir::Value binary(BinaryKind kind, mlir::Value a, mlir::Value b);
  mlir::Value compare(CompareKind kind, mlir::Value a, mlir::Value b);
  mlir::Value select(mlir::Value c, mlir::Value a, mlir::Value b);
  mlir::Value cast(mlir::Value v, mlir::Type to);

  mlir::OpBuilder &builder() { return b_; }
  mlir::Location loc() const { return loc_; }
  mlir::MLIRContext *context() { return b_.getContext(); }

  /// Runs `fn` with a fresh memo scope (for code emitted into a new block).
  void withScope(llvm::function_ref<void()> fn);
  /// Adds the body block of a tk loop to `region` (`numArgs` index arguments, the first
  /// bounds.size() of them iterating over `bounds`) and runs `fn` inside it in a fresh scope,
  /// with the index expressions of `bounds` (dims of size 1 are the constant 0).
  void inLoopBody(mlir::Region &region, size_t numArgs, llvm::ArrayRef<int64_t> bounds,
                  llvm::function_ref<void(mlir::Block *, const Index &)> fn);

private:
  mlir::Value compute(mlir::Value v, llvm::ArrayRef<mlir::AffineExpr> idx);
  mlir::Value computePad(PadOp op, llvm::ArrayRef<mlir::AffineExpr> idx);
  mlir::Value computeConcat(ConcatOp op, llvm::ArrayRef<mlir::AffineExpr> idx);
  mlir::Value computeConv(ConvOp op, llvm::ArrayRef<mlir::AffineExpr> idx);
  mlir::Value computeReduceWindow(ReduceWindowOp op, llvm::ArrayRef<mlir::AffineExpr> idx);
  Index simplifyIndex(llvm::ArrayRef<mlir::AffineExpr> idx);
  mlir::AffineExpr sizeSymbolDim(unsigned position);
  /// Static bounds (kDynamic where symbolic) and the values of the symbolic ones.
  std::pair<llvm::SmallVector<int64_t>, llvm::SmallVector<mlir::Value>>
  loopBounds(llvm::ArrayRef<SymExpr> shape);

  struct Scope {
    llvm::DenseMap<mlir::Value, llvm::SmallVector<std::pair<Index, mlir::Value>, 1>> elements;
    llvm::DenseMap<mlir::AffineExpr, mlir::Value> indices;
  };

  mlir::OpBuilder &b_;
  mlir::Location loc_;
  llvm::DenseMap<mlir::Value, mlir::Value> buffers_;
  llvm::SmallVector<mlir::Value> dims_;
  llvm::DenseMap<unsigned, mlir::AffineExpr> sizeDims_; // size symbol position -> its dim
  llvm::SmallVector<Scope> scopes_;
};

/// Fills the body of a kernel for a loop fusion `body` (the fusion's block) whose values in
/// `buffers` (block arguments, possibly a library result) are held in kernel buffers and whose
/// yielded values go to `outputs` (one kernel buffer per yield). Builds at `b`'s insertion point.
/// splitConcats (CPU kernels): a pointwise group whose one result is a concat stores it with
/// one loop per input (CUDA kernels want one outer loop, and keep the selects).
void buildKernelBody(mlir::OpBuilder &b, mlir::Location loc, mlir::Block &body,
                     const llvm::DenseMap<mlir::Value, mlir::Value> &buffers,
                     llvm::ArrayRef<mlir::Value> outputs, bool splitConcats);

/// Moves loop-invariant scalar ops (and loads of buffers the loop does not write, when it runs
/// at least once) out of the tk loops of `kernel`, innermost first.
void hoistLoopInvariants(mlir::Operation *kernel);

} // namespace tcc::kernel
