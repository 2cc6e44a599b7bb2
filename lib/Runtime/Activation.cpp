//===- Activation.cpp - The activations libtccrt applies in GEMM and convolution tiles ===//
#include "Activation.h"
#include "CpuMath.h"
#include "IsaClones.h"

#include <immintrin.h>

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

/// SiLU on U AVX-512 vectors, bit for bit x * tcc_sigmoidf(x) (CpuMathF32.inc's reduction,
/// polynomial and quotient; every one of the 2^32 inputs compared when this was written,
/// Sgemm.SiluIsXTimesTccSigmoidBitForBit samples them), in fewer instructions than GCC makes
/// of the portable code: the clamp at tcc_exp_lowest one maxps (which keeps a NaN second
/// operand), 2^k applied by vscalefps (one rounding, as the portable code's exact scaling and
/// rounding multiply), the numerator's select a masked move; and U vectors a step, stage by
/// stage, so that their dependency chains overlap. Measured on a Zen 5: 12.5 -> 8 cycles per
/// 16 values (U = 4).
// GCC 12 warns that the intrinsics' own _mm512_undefined_ps() may be used uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void siluVectors(__m512 *v) {
  using namespace cpumath;
  const __m512i sign = _mm512_set1_epi32(INT32_MIN);
  const __m512 one = _mm512_set1_ps(1.0f), round = _mm512_set1_ps(tcc_exp_round);
  __m512 c[U], kf[U], r[U], p[U], e[U];
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) // -|x|, clamped
    c[u] = _mm512_max_ps(_mm512_set1_ps(tcc_exp_lowest),
                         _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v[u]), sign)));
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u)
    kf[u] = _mm512_sub_ps(_mm512_fmadd_ps(c[u], _mm512_set1_ps(tcc_exp_log2e), round), round);
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u)
    r[u] = _mm512_fnmadd_ps(kf[u], _mm512_set1_ps(tcc_exp_ln2_lo),
                            _mm512_fnmadd_ps(kf[u], _mm512_set1_ps(tcc_exp_ln2_hi), c[u]));
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u)
    p[u] = _mm512_fmadd_ps(_mm512_set1_ps(tcc_exp_p4), r[u], _mm512_set1_ps(tcc_exp_p3));
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u)
    p[u] = _mm512_fmadd_ps(p[u], r[u], _mm512_set1_ps(tcc_exp_p2));
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u)
    p[u] = _mm512_fmadd_ps(p[u], r[u], _mm512_set1_ps(tcc_exp_p1));
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u)
    p[u] = _mm512_fmadd_ps(p[u], r[u], _mm512_set1_ps(tcc_exp_p0));
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) // e^-|x| = 2^k (1 + r + r^2 P(r))
    e[u] = _mm512_scalef_ps(
        _mm512_add_ps(one, _mm512_fmadd_ps(_mm512_mul_ps(r[u], r[u]), p[u], r[u])), kf[u]);
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    const __mmask16 negative = _mm512_cmp_ps_mask(v[u], _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 sigmoid =
        _mm512_div_ps(_mm512_mask_mov_ps(one, negative, e[u]), _mm512_add_ps(one, e[u]));
    v[u] = _mm512_mul_ps(v[u], sigmoid);
  }
}

/// SiLU on n consecutive floats in place: 4 vectors at a time, then one, the last partial one
/// masked.
[[gnu::target("avx512f")]] void siluAvx512(float *x, int64_t n) {
  constexpr int U = 4;
  int64_t i = 0;
  for (; i + 16 * U <= n; i += 16 * U) {
    __m512 v[U];
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u)
      v[u] = _mm512_loadu_ps(x + i + 16 * u);
    siluVectors<U>(v);
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u)
      _mm512_storeu_ps(x + i + 16 * u, v[u]);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
    __m512 v[1] = {_mm512_maskz_loadu_ps(m, x + i)};
    siluVectors<1>(v);
    _mm512_mask_storeu_ps(x + i, m, v[0]);
  }
}
#pragma GCC diagnostic pop

} // namespace

void activateRows(const Activation &a, float *x, int64_t rows, int64_t cols, int64_t ld) {
  if (a.kind == ActivationKind::None || rows <= 0 || cols <= 0)
    return;
  if (a.kind == ActivationKind::Silu && sgemmIsa() == SgemmIsa::Avx512) {
    if (ld == cols)
      return siluAvx512(x, rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      siluAvx512(x + r * ld, cols);
    return;
  }
  activateRowsIsa(a, x, rows, cols, ld);
}

} // namespace tcc::rt
