//===- FusionUtils.h - Op classes and index maps shared by fusion and lowering ----===//
//
// What -tcc-fuse and -tcc-lower-to-kernels both need to know about a tcc op:
//  * its class for fusion (pointwise index remap, reduction, library call, ...), and
//  * for the ops whose operand elements are affine functions of the result element (elementwise,
//    broadcast_in_dim, transpose, slice, reverse, reshape, and the index operand of gathers), the
//    operand index as AffineExprs of the result index. Fusion composes these to decide whether a
//    consumer reads a reduction "at the same row"; the kernel lowering uses the very same
//    function to compute load indices, so the two can never disagree.
//
// Index expressions are AffineExprs over dims (no symbols); reshapes are decomposed into groups
// of dims with equal element counts, and dims of size 1 are indexed by the constant 0, so that
// keepdims reshapes and broadcasts compose into plain dim expressions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/SymbolicShape.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Passes/GemmEpilogue.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/Operation.h"

#include <optional>

namespace tcc::fusion {

enum class OpClass {
  Constant,   // tcc.constant: never in a group (splats are cloned into the groups using them)
  Pointwise,  // computes an element from a few operand elements: inlined into consumers
  Reduction,  // tcc.reduce, tcc.arg_reduce: a loop group of its own, fuses by rows
  Library,    // f16/bf16/f32/f64 matmul, f32 conv (CPU: also f16/bf16): an extern group (+ epilogue)
  LoopRoot,   // elements computed by an inner reduction (reduce_window, other matmul/conv)
  Sequential, // cumsum, scatter_elements, scatter_nd, dynamic_update_slice
  WholeBuffer, // whole buffers, no epilogue (extern): top-k, collectives, copy concats
  Control,    // tcc.if, tcc.loop, tcc.fusion
};

OpClass classify(mlir::Operation *op, Target target);

/// The value of `v` when it is a splat float constant (possibly reshaped or broadcast).
std::optional<double> splatFloatValue(mlir::Value v);

/// If the constant `c` (rank >= 1) holds values that vary along `dim` alone (a per-channel
/// vector broadcast and folded into a full tensor, or a splat): that [c.shape[dim]] vector;
/// else null.
mlir::DenseElementsAttr constantVectorAlong(mlir::DenseElementsAttr c, int64_t dim);
/// Matmuls the targets' GEMM libraries run: f16, bf16, f32 and f64 (16-bit ones with f32
/// accumulation: cuBLASLt, libtccrt's gemm16); the others (integers) are generated loops.
bool isLibraryMatmul(MatmulOp op);
/// Convolutions the target's library runs: f32 (CPU: im2col + sgemm, Winograd, depthwise; CUDA:
/// the generated convolution kernels), and on the CPU f16/bf16 (libtccrt's runConv16).
bool isLibraryConv(ConvOp op, Target target);
/// Whether `target`'s library pools it (tk.pool, the CPU runtime's runPool): an f32 max or
/// sum window reduction of rank 4 over at most two adjacent dims, padded or with overlapping
/// windows (a generated kernel would clamp and select per tap, or recompute its producers).
bool isLibraryPool(ReduceWindowOp op, Target target);

/// A concat computed in a kernel reads every input for each element (a select chain), so one
/// of many inputs (the steps of an unrolled recurrence) costs that many loads per element.
/// Above this many inputs, a concat whose inputs are contiguous slabs of the result (every dim
/// before the axis is 1) is instead one copy per materialised input into its slab.
constexpr size_t kMaxSelectConcatInputs = 16;
bool isCopyConcat(ConcatOp op);

/// Whether `perm` swaps the last two dims and keeps the others (a matrix transpose per batch).
bool isLastTwoSwap(llvm::ArrayRef<int64_t> perm);

/// For a matmul operand: is `op` (the operand's producer) a transpose of the last two dims or a
/// broadcast over leading batch dims that tk.gemm can absorb (trans_a/trans_b, batch-1 views)?
bool isGemmAbsorbable(mlir::Operation *op);

using Index = llvm::SmallVector<mlir::AffineExpr, 4>;

/// The index expressions of the identity on `rank` dims.
Index identityIndex(mlir::MLIRContext *ctx, unsigned rank);

/// The index of an element of a space of shape `shape`: dim i, or 0 where the size is 1.
Index spaceIndex(mlir::MLIRContext *ctx, llvm::ArrayRef<int64_t> shape);

/// Operand `operandNo` of `op` is read at an affine function of the result index: returns it.
/// std::nullopt when the read is data dependent or clamped (pad, concat, gather data, ...).
std::optional<Index> affineOperandIndex(mlir::Operation *op, unsigned operandNo,
                                        llvm::ArrayRef<mlir::AffineExpr> resultIndex);

/// The operand index of a reshape from `operandShape` to `resultShape` at `resultIndex`.
Index reshapeIndex(llvm::ArrayRef<int64_t> resultShape, llvm::ArrayRef<mlir::AffineExpr> resultIndex,
                   llvm::ArrayRef<int64_t> operandShape, mlir::MLIRContext *ctx);

/// One more than the highest size-symbol position in `exprs` (0 when there is none).
unsigned numSymbolsOf(llvm::ArrayRef<mlir::AffineExpr> exprs);
/// Simplifies an index expression over `numDims` dims (and any size symbols).
mlir::AffineExpr simplifyIndexExpr(mlir::AffineExpr e, unsigned numDims);
/// Simplifies every expression.
Index simplify(llvm::ArrayRef<mlir::AffineExpr> index, unsigned numDims);

/// If `index` (over dims of a space of shape `space`) is a projection onto an increasing subset
/// of those dims whose sizes are `target`, returns those dims (-1 for a target dim of size 1
/// indexed by the constant 0).
std::optional<llvm::SmallVector<int64_t>> asProjection(llvm::ArrayRef<mlir::AffineExpr> index,
                                                       llvm::ArrayRef<int64_t> space,
                                                       llvm::ArrayRef<int64_t> target);

mlir::RankedTensorType tensorType(mlir::Value v);
llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);

// ---- Symbolic dims ----
// A symbolic size in an index expression is a polynomial (floordiv, ceildiv, mod) of affine
// symbols: s<k> is the size symbol at position k of the module's `tcc.symbols` (the kernel
// lowering binds it to the run's value, tk.size). max/min sizes have no such form.

/// The dims of `v`'s type, symbolic ones included.
SymShape symShapeOf(mlir::Value v);
/// `size` as an index expression over the module's size symbols (see above); nullopt for
/// max/min.
std::optional<mlir::AffineExpr> sizeExpr(const SymExpr &size, mlir::ModuleOp module);
/// The index of an element of a space with symbolic dims (0 where the size is 1).
Index spaceIndex(mlir::MLIRContext *ctx, llvm::ArrayRef<SymExpr> shape);
/// reshapeIndex over symbolic shapes (the module gives the symbols' positions); nullopt when
/// a size has no index-expression form.
std::optional<Index> reshapeIndex(llvm::ArrayRef<SymExpr> resultShape,
                                  llvm::ArrayRef<mlir::AffineExpr> resultIndex,
                                  llvm::ArrayRef<SymExpr> operandShape, mlir::ModuleOp module);
/// asProjection over symbolic shapes.
std::optional<llvm::SmallVector<int64_t>> asProjection(llvm::ArrayRef<mlir::AffineExpr> index,
                                                       llvm::ArrayRef<SymExpr> space,
                                                       llvm::ArrayRef<SymExpr> target);

} // namespace tcc::fusion
