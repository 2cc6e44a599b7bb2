//===- GemmEpilogue.h - What each target's GEMM library computes after the product -===//
//
// THE one table of GEMM epilogues: which element-wise work after a matrix product the GEMM
// library of a target computes itself (tk.gemm's `alpha`, `bias`, `activation`), and the
// matcher that finds that work in the graph. -tcc-fuse consults it on the graph to build its
// groups (and to explain them), -tcc-lower-to-kernels on each fusion's body to fill tk.gemm: the
// same function on what fusion grouped (the lowering alone decides what tk.gemm computes, so a
// mismatch can only cost an explanation, never correctness).
//
// A library GEMM computes  c = act(alpha * op(a) x op(b) + beta * c + bias)  where bias is a
// vector with one value per column of c (the same for every row and every batch). What fuses:
//
//   target  library    element types  alpha  bias  relu  gelu_tanh  gelu_erf
//   cpu     tcc sgemm  f32            yes    yes   yes   yes        yes
//   cpu     OpenBLAS   f64            -      -     -     -          -
//   cuda    cuBLASLt   f32, f64       yes    yes   yes   yes        -
//
// (libtccrt's sgemm, lib/Runtime/Sgemm.h, adds the bias and applies ReLU to each tile as it
// stores it, and a GELU to each row panel's block while it is in cache (lib/Runtime/
// Activation.h, the generated kernels' vectorised erf and tanh): a transformer's first FFN
// product and its GELU in one pass over the output instead of a second kernel that reads and
// writes it again. Measured on Zen 5: the erf's own work dominates, so ViT-S's fc1 costs what
// the GEMM and its 0.17 ms kernel did; Whisper's 1500-row fc1 is 5% faster. f64 products go
// to OpenBLAS, which could take alpha too; their epilogues stay in kernels.)
//
// In the graph (the importer's decompositions, frontend/onnx/ops/):
//   alpha     y * a, a * y or y / d with splat constants (ONNX Gemm's alpha != 1, attention's
//             scaling; 1 / d is exact for powers of two, else within an ulp of the division);
//   bias      y + B or B + y, B read at [col] only: an [N] vector (ONNX Gemm's C of shape [N] or
//             [1, N], PyTorch's Linear bias) broadcast over rows and batch dims, of y's element
//             type, held in its own buffer (a fusion input); or a constant that holds one
//             vector in every row (what constant folding makes of a broadcast initializer) or
//             one value everywhere;
//   relu      max(x, 0) or max(0, x) (ONNX Relu);
//   gelu_tanh 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x^3))) with the products
//             and sums in any order (ONNX Gelu approximate="tanh", PyTorch's decomposed
//             gelu(approximate="tanh"); x^3 may be pow(x, 3)); constants within 1e-6 relative;
//   gelu_erf  0.5 * x * (1 + erf(x / sqrt(2))) with the products and sums in any order and
//             x / sqrt(2) also as x * (1 / sqrt(2)) (ONNX Gelu's default, PyTorch's nn.GELU() as
//             exported: Div, Erf, Add, Mul, Mul); the runtime computes torch's order,
//             x * (erf(x / 1.41421356) + 1) * 0.5, so another order is within an ulp or two.
// in this order: alpha, bias, then at most one activation (cuBLASLt's alpha and its RELU, GELU,
// RELU_BIAS, GELU_BIAS epilogues). The rest of an epilogue stays in a generated kernel that
// reads what the GEMM wrote.
//
// Deliberately not fused:
//  * erf GELU on CUDA (ONNX Gelu's default, PyTorch's nn.GELU()): CUBLASLT_EPILOGUE_GELU is the
//    tanh approximation. NVIDIA's cuBLASLt documentation only says "x := GELU(x)"; the PyTorch op that
//    dispatches to it (aten._addmm_activation with use_gelu, CUBLASLT_EPILOGUE_GELU_BIAS) is
//    defined by its decomposition as gelu(approximate="tanh") on CUDA, and XLA names the same
//    epilogue "BiasThenGeLUApproximate". The two GELUs differ by up to ~4.7e-4, too much to swap.
//  * A bias that varies along rows or batches ([M, N], [B, 1, N]): cuBLASLt's bias is one vector
//    per column (a batch stride exists, but the artifact's Gemm has no field for it), so batched
//    GEMMs fuse a bias only when it is the same for every batch.
//  * A bias of another element type or reached through any computation in the kernel (a cast;
//    ONNX Gemm's beta != 1 on an input C): cuBLASLt takes a plain vector of the output's type.
//    (A constant C scaled by beta is folded into a constant and fuses.)
//  * Any value of the chain that is also read elsewhere (the product before its bias, say): the
//    library does not store it, so the chain stops before it.
//  * f16/bf16 products: tk.gemm takes f32 and f64 only (other matmuls are loop kernels).
//
// Not measured yet (no GPU in the sessions that wrote this): whether cuBLASLt's fused f32
// epilogue kernels beat its plain GEMM plus the generated epilogue kernel, and that f64 GEMMs
// find an algorithm with every epilogue (the runtime fails at load, naming the step, if not).
// The table is the one switch to change either decision.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/TccDialect.h"
#include "tcc/IR/TkDialect.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>

namespace tcc {

/// The device the passes compile for (their `target` option).
enum class Target { Cpu, Cuda };

/// "cpu" / "cuda"; std::nullopt for anything else.
std::optional<Target> parseTarget(llvm::StringRef name);
llvm::StringRef targetName(Target target);

/// One row of the table above.
struct GemmEpilogueSupport {
  llvm::StringRef library; // "tcc sgemm", "OpenBLAS", "cuBLASLt"
  bool alpha = false;
  bool bias = false;
  bool relu = false;
  bool geluTanh = false;
  bool geluErf = false;
  bool any() const { return alpha || bias || relu || geluTanh || geluErf; }
};

/// What `target`'s GEMM library fuses for products of `elementType`.
GemmEpilogueSupport gemmEpilogueSupport(Target target, mlir::Type elementType);

/// The part of a matmul's consumers that the library computes.
struct GemmEpilogue {
  /// The product's scale (tk.gemm's alpha), when `scaled` (a scale op is part of the chain).
  double alpha = 1.0;
  bool scaled = false;
  /// The value holding the bias (null: none). Not one of `ops`: a fusion input, a function
  /// argument, another kernel's result or a constant. Unless `biasConstant` is set, its N
  /// elements in row-major order are the bias (view its buffer as [N]).
  mlir::Value bias;
  /// When `bias` is a constant: the [N] vector (the lowering makes a constant buffer of it).
  mlir::DenseElementsAttr biasConstant;
  tk::GemmActivation activation = tk::GemmActivation::None;
  /// What the GEMM computes with this epilogue: the last value of the chain (the matmul's own
  /// result when nothing fused). Only this value of the chain may be read by other ops.
  mlir::Value result;
  /// The ops the library computes (the scale, the bias add, the activation's ops), in order.
  llvm::SmallVector<mlir::Operation *> ops;
  /// Why the chain stops where it does, when something follows it that looks like an epilogue
  /// (a bias of the wrong shape, an erf GELU, ...); empty otherwise.
  std::string stop;

  bool empty() const { return ops.empty(); }
  /// "bias", "relu", "alpha+bias+gelu_tanh", ...
  std::string describe() const;
};

/// A convolution's epilogue (tk.conv's bias, residual, clamp_min/max), computed by libtccrt's
/// convolutions on the CPU as they write their output (lib/Runtime/CpuLibrary.h,
/// ConvEpilogue): f32 convolutions only; CUDA convolutions are generated kernels whose
/// epilogue stays a kernel of its own. What fuses, in this order:
///   bias      y + B or B + y, B read at the output channel alone (ONNX Conv's bias [C_out]
///             broadcast as [1, C, 1, 1], a folded BatchNormalization's shift), a fusion input,
///             or a constant;
///   residual  y + R or R + y, R a tensor of y's type read at the same element from outside
///             the kernel (ResNet's and MobileNetV2's skip connections);
///   clamp     max(y, lo) and/or min(y, hi) with splat constants, lo <= hi (ONNX Relu, Clip,
///             ReLU6);
///   activation  y * sigmoid(y) (SiLU, Swish) or y * min(max(a * y + b, 0), 1) with splat a and
///             b (ONNX HardSwish, hard sigmoid times its input: MobileNetV3).
/// Each value of the chain but its result must be read only by the chain's own ops.
struct ConvEpilogue {
  mlir::Value bias;                     // null: none (see GemmEpilogue::bias; [C_out])
  mlir::DenseElementsAttr biasConstant; // when bias is a constant: the [C_out] vector
  mlir::Value residual;                 // null: none
  std::optional<double> clampMin, clampMax;
  std::string activation; // "" (none), "silu" or "hard_swish"
  double activationAlpha = 0.0, activationBeta = 0.0; // hard_swish's gate a * y + b
  mlir::Value result; // the chain's last value (the convolution's own result if nothing fused)
  llvm::SmallVector<mlir::Operation *> ops;
  std::string stop; // why the chain stops where it does (when an add could not fuse)

  bool empty() const { return ops.empty(); }
  /// "bias", "bias+residual+clamp", ...
  std::string describe() const;
};

/// Whether `target`'s convolution library computes epilogues for `elementType` convolutions.
bool convEpilogueSupported(Target target, mlir::Type elementType);

/// The longest prefix of the element-wise work on `conv`'s result that `target`'s convolution
/// computes (see ConvEpilogue), with matchGemmEpilogue's `inKernel` and `outside`.
ConvEpilogue matchConvEpilogue(ConvOp conv, Target target,
                               llvm::function_ref<bool(mlir::Operation *)> inKernel,
                               llvm::function_ref<mlir::Value(mlir::Value)> outside = {});

/// The longest prefix of the element-wise work on `matmul`'s result that `target`'s library
/// computes (see the table above). `inKernel(op)` says whether an op may be computed with the
/// GEMM: fusion looks at the graph (any pointwise op), the lowering at one fusion's body. Every
/// value of the chain but its result must be read only by the chain's own ops. `outside` maps
/// a value the kernel reads from outside to the graph's value (a fusion's block argument to
/// its operand), so that constants are seen; none at the graph level.
GemmEpilogue matchGemmEpilogue(MatmulOp matmul, Target target,
                               llvm::function_ref<bool(mlir::Operation *)> inKernel,
                               llvm::function_ref<mlir::Value(mlir::Value)> outside = {});

} // namespace tcc
