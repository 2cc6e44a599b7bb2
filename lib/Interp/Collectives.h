//===- Collectives.h - The interpreter's semantics of collective ops ----------===//
#pragma once

#include "tcc/Interp/Interpreter.h"

namespace tcc {

/// "'tcc.op' at loc(...)": how interpreter errors name an op (Interpreter.cpp).
std::string describeOp(mlir::Operation *op);

/// Whether the interpreter evaluates `op` with evaluateCollective (collectives, axis_index).
bool needsTransport(mlir::Operation *op);

/// Evaluates a collective (or axis_index) on this rank's operands through `transport` (null:
/// only groups of one rank are allowed). Throws tcc::Error.
std::vector<Tensor> evaluateCollective(mlir::Operation *op, const std::vector<Tensor> &operands,
                                       CollectiveTransport *transport);

} // namespace tcc
