//===- Activation.cpp - The activations libtccrt applies in GEMM and convolution tiles ===//
#include "Activation.h"
#include "CpuMath.h"
#include "IsaClones.h"

namespace tcc::rt {
namespace {

/// The activation on 16 consecutive floats: a fixed trip count, so the loop is whole vectors
/// (one AVX-512 register, two AVX2 ones) with no scalar remainder.
constexpr int64_t kBlock = 16;
TCC_ISA_BODY void activateBlock(const Activation &a, float *__restrict x) {
  if (a.kind == ActivationKind::Silu) {
    for (int64_t i = 0; i < kBlock; ++i)
      x[i] = x[i] * cpumath::tcc_sigmoidf(x[i]);
  } else if (a.kind == ActivationKind::GeluErf) {
    for (int64_t i = 0; i < kBlock; ++i)
      x[i] = x[i] * (cpumath::tcc_erff(x[i] / 1.41421356f) + 1.0f) * 0.5f;
  } else if (a.kind == ActivationKind::GeluTanh) {
    for (int64_t i = 0; i < kBlock; ++i) {
      const float inner = 0.797884561f * (x[i] + 0.044715f * (x[i] * x[i] * x[i]));
      x[i] = 0.5f * x[i] * (1.0f + cpumath::tcc_tanhf(inner));
    }
  } else {
    for (int64_t i = 0; i < kBlock; ++i) {
      // min(max(gate, 0), 1) with NaN kept (tcc_max and tcc_min of the generated kernels):
      // maxps and minps (these comparisons) return 0 and 1 for NaN, so one select puts it
      // back. Fewer operations than the ordered maxOrNaN and minOrNaN.
      const float gate = x[i] * a.alpha + a.beta;
      float clamped = gate > 0.0f ? gate : 0.0f;
      clamped = clamped < 1.0f ? clamped : 1.0f;
      x[i] = x[i] * (gate != gate ? gate : clamped);
    }
  }
}

/// n consecutive floats: whole blocks in place, the tail through a block-sized copy (a row of a
/// 14x14 map is 14 floats: scalar remainders would cost more than the vector work).
TCC_ISA_BODY void activateRange(const Activation &a, float *x, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    activateBlock(a, x + i);
  if (i < n) {
    float tail[kBlock] = {};
    __builtin_memcpy(tail, x + i, sizeof(float) * (size_t)(n - i));
    activateBlock(a, tail);
    __builtin_memcpy(x + i, tail, sizeof(float) * (size_t)(n - i));
  }
}

TCC_ISA_BODY void activateRowsBody(Activation a, float *x, int64_t rows, int64_t cols,
                                   int64_t ld) {
  if (ld == cols) // contiguous rows: one range
    return activateRange(a, x, rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    activateRange(a, x + r * ld, cols);
}
TCC_ISA_CLONES(activateRowsIsa, activateRowsBody)

} // namespace

void activateRows(const Activation &a, float *x, int64_t rows, int64_t cols, int64_t ld) {
  if (a.kind != ActivationKind::None && rows > 0 && cols > 0)
    activateRowsIsa(a, x, rows, cols, ld);
}

} // namespace tcc::rt
