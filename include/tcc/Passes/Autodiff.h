//===- Autodiff.h - Reverse-mode differentiation of tcc graph functions ---===//
//
// Reverse mode over the graph dialect: the backward graph is built from the vector-Jacobian
// product (VJP) each core op declares through tcc::DifferentiableOpInterface (TccInterfaces.td).
// Only "active" ops are differentiated: those that depend on a value in `wrt` and that the loss
// depends on. Piecewise-constant ops (compare, arg_reduce, floor, round, sign, casts to integer
// types, iota) contribute no gradient. An active op without a VJP for an active operand (e.g.
// tcc.loop, scatter with a max reduction) is an error reported at the op, naming its ONNX node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LogicalResult.h"

namespace tcc {

/// Builds, at `b`'s insertion point (after every op that the loss depends on), the gradient
/// of the 0-d floating-point `loss` with respect to each value of `wrt` (block arguments or
/// op results of the same function). Returns one gradient per `wrt` value, of its type; values
/// the loss does not depend on get a zero constant. On failure an error has been emitted at the
/// offending op (its location names the ONNX node) and nothing usable is returned.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildGradients(mlir::OpBuilder &b, mlir::Value loss, mlir::ArrayRef<mlir::Value> wrt);

} // namespace tcc
