//===- CoreBuilder.h - Convenience construction of tcc core ops -----------===//
//
// The one set of helpers every producer of tcc IR uses (the ONNX importer's op lowerings, and
// later autodiff): numpy-style broadcasting onto the explicit-broadcast core ops, constants of a
// value's element type, keepdims reductions, and so on. Each helper emits plain core ops.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/SymbolicShape.h"
#include "tcc/IR/TccDialect.h"

#include "mlir/IR/Builders.h"

namespace tcc {

class CoreBuilder {
public:
  CoreBuilder(mlir::OpBuilder &builder, mlir::Location loc) : b(builder), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  mlir::MLIRContext *context() { return b.getContext(); }

  // ---- Types ----
  static mlir::RankedTensorType typeOf(mlir::Value v);
  /// The static dims; throws tcc::Error for a value with symbolic dims (code that handles them
  /// reads dimsOf instead).
  static llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);
  /// The dims, symbolic ones included (tcc/IR/SymbolicShape.h).
  static SymShape dimsOf(mlir::Value v) { return symbolicShape(v.getType()); }
  static mlir::Type elementTypeOf(mlir::Value v) { return typeOf(v).getElementType(); }
  static int64_t rankOf(mlir::Value v) { return typeOf(v).getRank(); }
  /// The bytes of a statically shaped tensor value (0 for anything else); elements narrower
  /// than a byte (i1) take one each.
  static int64_t bytesOf(mlir::Value v) {
    auto t = mlir::dyn_cast<mlir::RankedTensorType>(v.getType());
    if (!t || !t.hasStaticShape())
      return 0;
    return t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
  }
  mlir::RankedTensorType tensorType(llvm::ArrayRef<int64_t> shape, mlir::Type elementType);

  // ---- Constants ----
  /// A constant of the given type, every element `value` (converted to the element type).
  mlir::Value splat(mlir::RankedTensorType type, double value);
  /// A 0-d constant of `like`'s element type.
  mlir::Value scalarLike(mlir::Value like, double value);
  /// A constant with `like`'s type, every element `value`.
  mlir::Value splatLike(mlir::Value like, double value);
  mlir::Value constantI64(llvm::ArrayRef<int64_t> values, llvm::ArrayRef<int64_t> shape);
  /// An i64 tensor of `values` (rank <= 1): a tcc.constant when all are constant, else a
  /// tcc.sym_ints.
  mlir::Value symInts(llvm::ArrayRef<SymExpr> values, llvm::ArrayRef<int64_t> shape);
  mlir::Value constant(mlir::DenseElementsAttr value);

  // ---- Elementwise, with numpy broadcasting of the operands ----
  mlir::Value unary(UnaryKind kind, mlir::Value x);
  mlir::Value binary(BinaryKind kind, mlir::Value lhs, mlir::Value rhs);
  mlir::Value add(mlir::Value a, mlir::Value b) { return binary(BinaryKind::Add, a, b); }
  mlir::Value sub(mlir::Value a, mlir::Value b) { return binary(BinaryKind::Sub, a, b); }
  mlir::Value mul(mlir::Value a, mlir::Value b) { return binary(BinaryKind::Mul, a, b); }
  mlir::Value div(mlir::Value a, mlir::Value b) { return binary(BinaryKind::Div, a, b); }
  mlir::Value max(mlir::Value a, mlir::Value b) { return binary(BinaryKind::Max, a, b); }
  mlir::Value min(mlir::Value a, mlir::Value b) { return binary(BinaryKind::Min, a, b); }
  mlir::Value compare(CompareKind kind, mlir::Value lhs, mlir::Value rhs);
  /// cond ? a : b, all three broadcast to a common shape.
  mlir::Value select(mlir::Value cond, mlir::Value a, mlir::Value b);
  /// Converts to `elementType` (no-op when it already is).
  mlir::Value cast(mlir::Value x, mlir::Type elementType);
  /// Clamps x to the range of the integer type `to`, then converts (saturating conversion).
  mlir::Value saturatingCast(mlir::Value x, mlir::Type to);
  /// The smallest value of an element type (-inf for floats): the identity of max.
  static double lowestValue(mlir::Type elementType);
  /// The largest value of an element type (+inf for floats): the identity of min.
  static double highestValue(mlir::Type elementType);

  // ---- Shapes ----
  /// The numpy broadcast of two shapes; fails if they are incompatible.
  static mlir::FailureOr<llvm::SmallVector<int64_t>> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                                                     llvm::ArrayRef<int64_t> b);
  /// The same over symbolic dims: a symbolic dim broadcasts against 1 and itself only.
  static mlir::FailureOr<SymShape> broadcastDims(llvm::ArrayRef<SymExpr> a,
                                                 llvm::ArrayRef<SymExpr> b);
  /// Numpy (right-aligned) broadcast of x to `shape` (no-op when equal).
  mlir::Value broadcastTo(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  mlir::Value broadcastToDims(mlir::Value x, llvm::ArrayRef<SymExpr> dims);
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  mlir::Value reshapeToDims(mlir::Value x, llvm::ArrayRef<SymExpr> dims);
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> perm);
  /// Static slice of one dim: [start, limit) step `stride` (>= 1).
  mlir::Value sliceDim(mlir::Value x, int64_t dim, int64_t start, int64_t limit, int64_t stride = 1);
  mlir::Value concat(mlir::ValueRange xs, int64_t axis);
  /// A tensor of `shape` whose elements are their index along `dim` (tcc.iota).
  mlir::Value iota(llvm::ArrayRef<int64_t> shape, mlir::Type elementType, int64_t dim);
  mlir::Value iotaOfDims(llvm::ArrayRef<SymExpr> dims, mlir::Type elementType, int64_t dim);

  // ---- Reductions and products ----
  /// Reduces over dims (any order, duplicates not allowed); keepDims keeps them as size 1.
  mlir::Value reduce(ReduceKind kind, mlir::Value x, llvm::ArrayRef<int64_t> dims, bool keepDims);
  /// numpy matmul semantics: 1-d operands are promoted and the added dim removed, batch dims
  /// broadcast.
  mlir::Value matmul(mlir::Value a, mlir::Value b);

  /// Emits an op whose result types are inferred (InferTypeOpInterface) and returns its first
  /// result. Args are those of the op's builder after the result type. An operand/attribute
  /// combination the op rejects throws tcc::Error with the op's diagnostic, instead of
  /// aborting as MLIR's inferring builders do.
  template <class Op, class... Args> mlir::Value create(Args &&...args) {
    mlir::Type placeholder = mlir::NoneType::get(context());
    return inferResultTypes(b.create<Op>(loc, placeholder, std::forward<Args>(args)...))->getResult(0);
  }
  /// tcc.topk (two results): {values, indices}.
  std::pair<mlir::Value, mlir::Value> topk(mlir::Value x, int64_t dim, int64_t k, bool largest);
  /// Emits an op with the given result type, then verifies it (throws tcc::Error if invalid).
  template <class Op, class... Args> mlir::Value createTyped(mlir::Type type, Args &&...args) {
    mlir::Operation *op = b.create<Op>(loc, type, std::forward<Args>(args)...);
    verifyOrThrow(op);
    return op->getResult(0);
  }

  /// Sets `op`'s result types from its InferTypeOpInterface; erases it and throws on failure.
  mlir::Operation *inferResultTypes(mlir::Operation *op);
  /// Runs `op`'s verifier; erases it and throws tcc::Error with the diagnostic on failure.
  void verifyOrThrow(mlir::Operation *op);

private:
  /// Broadcasts every value to their common shape.
  llvm::SmallVector<mlir::Value> broadcastAll(llvm::ArrayRef<mlir::Value> values);

  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace tcc
