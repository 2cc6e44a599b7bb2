//===- Interpreter.h - Reference interpreter for the tcc dialect ----------===//
//
// Evaluates tcc dialect functions on the host, op by op, with the reference kernels. It is the
// oracle every pass and backend is tested against: plain and obviously correct, not fast.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <vector>

namespace mlir::func {
class FuncOp;
}

namespace tcc {

/// Element type <-> DType. Throws tcc::Error for a type the core op set does not use.
DType dtypeFromType(mlir::Type elementType);
mlir::Type typeFromDType(mlir::MLIRContext *ctx, DType dtype);
mlir::RankedTensorType tensorTypeOf(mlir::MLIRContext *ctx, const Tensor &t);

/// Constant attribute <-> Tensor (copies the data).
Tensor tensorFromAttr(mlir::ElementsAttr attr);
mlir::DenseElementsAttr attrFromTensor(mlir::MLIRContext *ctx, const Tensor &t);

/// Evaluates one region-free core op on operand values. Throws tcc::Error.
std::vector<Tensor> evaluateOp(mlir::Operation *op, const std::vector<Tensor> &operands);

/// Runs a function whose body is tcc ops (and func.return). Argument count, shapes and dtypes
/// are checked. Errors are tcc::Error naming the op and its location (the ONNX node).
std::vector<Tensor> runFunction(mlir::func::FuncOp func, const std::vector<Tensor> &args);

} // namespace tcc
