//===- Activation.cpp - The activations libtccrt applies in GEMM and convolution tiles ===//
#include "Activation.h"
#include "CpuMathAvx512.h"
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

/// SiLU in place on `rows` rows of `cols` floats, `ld` apart: 4 vectors at a time, then one,
/// a row's last partial one masked. Whole vectors are loaded unmasked: a masked load of what
/// a store has just written (a convolution's output vector) is not forwarded from the store
/// on a Zen 5, and waited about 50 cycles a vector.
[[gnu::target("avx512f")]] void siluRowsAvx512(float *x, int64_t rows, int64_t cols,
                                               int64_t ld) {
  constexpr int U = 4;
  if (ld == cols) { // contiguous rows: one range
    cols *= rows;
    rows = 1;
  }
  for (int64_t r = 0; r < rows; ++r, x += ld) {
    int64_t i = 0;
    for (; i + 16 * U <= cols; i += 16 * U) {
      __m512 v[U];
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u)
        v[u] = _mm512_loadu_ps(x + i + 16 * u);
      siluVectors<U>(v);
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u)
        _mm512_storeu_ps(x + i + 16 * u, v[u]);
    }
    for (; i + 16 <= cols; i += 16) {
      __m512 v[1] = {_mm512_loadu_ps(x + i)};
      siluVectors<1>(v);
      _mm512_storeu_ps(x + i, v[0]);
    }
    if (i < cols) {
      const __mmask16 m = (__mmask16)((1u << (cols - i)) - 1);
      __m512 v[1] = {_mm512_maskz_loadu_ps(m, x + i)};
      siluVectors<1>(v);
      _mm512_mask_storeu_ps(x + i, m, v[0]);
    }
  }
}

} // namespace

void activateRows(const Activation &a, float *x, int64_t rows, int64_t cols, int64_t ld) {
  if (a.kind == ActivationKind::None || rows <= 0 || cols <= 0)
    return;
  if (a.kind == ActivationKind::Silu && sgemmIsa() == SgemmIsa::Avx512)
    return siluRowsAvx512(x, rows, cols, ld);
  activateRowsIsa(a, x, rows, cols, ld);
}

} // namespace tcc::rt
