//===- TccInterfaces.td - Op interfaces of the tcc dialect -------------------===//
#ifndef TCC_INTERFACES_TD
#define TCC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::tcc";
  let description = [{
    An op with a vector-Jacobian product (VJP): reverse-mode autodiff (tcc/Passes/Autodiff.h)
    builds the backward graph from it. The rules live in lib/IR/TccGradients.cpp and are written
    with tcc::CoreBuilder, so the backward graph is made of plain core ops.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at `builder`'s insertion point, the adjoint of each operand from the adjoints of
        the op's results. `resultAdjoints` has one entry per result, of the result's type; a
        null Value means zero. `wanted` has one entry per operand: only adjoints of wanted
        operands are built. On success `operandAdjoints` holds one entry per operand, of the
        operand's type, null where there is no gradient (not wanted, not differentiable such
        as an index operand, or identically zero). Fails, after emitting an error at the op,
        when a wanted operand has no gradient rule (e.g. scatter with a max reduction).
        CoreBuilder errors (tcc::Error) may propagate to the caller.
      }], "::mlir::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultAdjoints,
           "::llvm::ArrayRef<bool>":$wanted,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandAdjoints)>
  ];
}

#endif // TCC_INTERFACES_TD
