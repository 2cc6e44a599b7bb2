//===- Activation.h - The activations libtccrt applies in GEMM and convolution tiles ===//
//
// After a convolution's bias, residual and clamp (CpuLibrary.h, ConvEpilogue), each output tile
// may take one more element-wise function while it is in cache, computed as the graph's ops
// would be (the generated kernels' sigmoid, NaN-propagating max and min):
//   Silu       x * sigmoid(x)                                  (SiLU / Swish: EfficientNet, YOLO)
//   HardSwish  x * min(max(alpha * x + beta, 0), 1)            (MobileNetV3: alpha 1/6, beta 1/2)
//   GeluErf    x * (erf(x / sqrt(2)) + 1) * 0.5                (BERT, ViT, Whisper: torch's GELU
//                                                               as exported, op for op)
//   GeluTanh   0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))   (GPT-2's gelu_new)
// The GEMMs take them too (a transformer's first FFN product and its GELU in one pass).
//
// Plain data only: SgemmKernels.h includes this, and it must stay free of inline code.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace tcc::rt {

enum class ActivationKind : uint8_t {
  None = 0,
  Silu = 1,
  HardSwish = 2,
  GeluErf = 3,
  GeluTanh = 4
};

struct Activation {
  ActivationKind kind = ActivationKind::None;
  float alpha = 0.0f, beta = 0.0f; // HardSwish's gate: alpha * x + beta
};

/// The activation over `rows` rows of `cols` floats, `ld` apart, in place (vectorised per ISA;
/// nothing for ActivationKind::None).
void activateRows(const Activation &a, float *x, int64_t rows, int64_t cols, int64_t ld);

} // namespace tcc::rt
