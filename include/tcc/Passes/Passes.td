//===- Passes.td - tcc graph passes ---------------------------------------===//
#ifndef TCC_PASSES_TD
#define TCC_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldConstants : Pass<"tcc-fold-constants"> {
  let summary = "Evaluates tcc ops whose operands are all constants, with the reference kernels";
  let description = [{
    Replaces each region-free tcc op whose operands are all `tcc.constant` by a constant holding
    its result, computed by the reference kernels (the interpreter's semantics, by construction).
    Ops with a result larger than `max-elements` elements are left alone.
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", /*default=*/"1 << 20",
           "largest result (in elements) to fold">
  ];
}

#endif // TCC_PASSES_TD
