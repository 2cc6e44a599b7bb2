//===- TkEnums.td - Enums of the tk dialect -------------------------------===//
//
// Kept apart from TkOps.td so that -gen-enum-decls on this file emits only the tk enums (the
// graph dialect's enums, which TkOps.td includes, are generated from TccOps.td).
//
//===----------------------------------------------------------------------===//
#ifndef TCC_TK_ENUMS_TD
#define TCC_TK_ENUMS_TD

include "mlir/IR/EnumAttr.td"

// What tk.gemm applies to each element after the bias (cuBLASLt's epilogues; which target fuses
// which is stated once, in tcc/Passes/GemmEpilogue.h). Values match the artifact's
// GemmActivation (include/tcc/Runtime/artifact.fbs).
//   none:      x
//   relu:      max(x, 0)
//   gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (NOT the erf GELU)
//   gelu_erf:  x (erf(x / sqrt(2)) + 1) / 2                      (the exact GELU)
def Tk_GemmActivation : I32EnumAttr<"GemmActivation", "activation applied by a library GEMM", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Relu", 1, "relu">,
    I32EnumAttrCase<"GeluTanh", 2, "gelu_tanh">,
    I32EnumAttrCase<"GeluErf", 3, "gelu_erf">]> {
  let cppNamespace = "::tcc::tk";
}

#endif // TCC_TK_ENUMS_TD
