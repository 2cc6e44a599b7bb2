//===- Activation.cpp - The activations libtccrt applies in convolution tiles --------===//
#include "Activation.h"
#include "CpuMath.h"
#include "IsaClones.h"

namespace tcc::rt {
namespace {

// tcc_max / tcc_min of the generated kernels: NaN propagates.
TCC_ISA_BODY float maxOrNaN(float a, float b) {
  const float larger = a < b ? b : a;
  const float orNaN = b != b ? b : larger;
  return a != a ? a : orNaN;
}
TCC_ISA_BODY float minOrNaN(float a, float b) {
  const float smaller = b < a ? b : a;
  const float orNaN = b != b ? b : smaller;
  return a != a ? a : orNaN;
}

TCC_ISA_BODY void activateRowsBody(Activation a, float *x, int64_t rows, int64_t cols,
                                   int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    float *row = x + r * ld;
    if (a.kind == ActivationKind::Silu) {
#pragma GCC ivdep
      for (int64_t i = 0; i < cols; ++i)
        row[i] = row[i] * cpumath::tcc_sigmoidf(row[i]);
    } else if (a.kind == ActivationKind::HardSwish) {
#pragma GCC ivdep
      for (int64_t i = 0; i < cols; ++i) {
        const float gate = row[i] * a.alpha + a.beta;
        row[i] = row[i] * minOrNaN(maxOrNaN(gate, 0.0f), 1.0f);
      }
    }
  }
}
TCC_ISA_CLONES(activateRowsIsa, activateRowsBody)

} // namespace

void activateRows(const Activation &a, float *x, int64_t rows, int64_t cols, int64_t ld) {
  if (a.kind != ActivationKind::None && rows > 0 && cols > 0)
    activateRowsIsa(a, x, rows, cols, ld);
}

} // namespace tcc::rt
