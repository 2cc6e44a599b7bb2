//===- CpuMathAvx512.h - CpuMath.h's functions on AVX-512 registers --------===//
//
// exp of non-positive arguments, SiLU and hard swish on __m512 vectors, bit for bit what the
// portable code computes on every ISA (CpuMathF32.inc's tcc_exp_nonpositive and tcc_sigmoidf,
// Activation.h's definitions), in fewer instructions than GCC makes of the portable code: for
// loops that apply them to values in registers (attention's softmax, channels-last depthwise
// sums) and for activateRows's own AVX-512 SiLU. Callers are compiled for AVX-512F (target
// attribute) and run only where sgemmIsa() is Avx512.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "Activation.h"
#include "CpuMath.h"

#include <immintrin.h>

#include <cstdint>

namespace tcc::rt {

// GCC 12 warns that the intrinsics' own _mm512_undefined_ps() may be used uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/// e^x in place on U vectors of x <= 0 (or NaN), bit for bit tcc_exp_nonpositive: the same
/// clamp at tcc_exp_lowest (one maxps, which keeps a NaN second operand), reduction and
/// polynomial, and 2^k applied by vscalefps (one rounding, as the portable code's exact scaling
/// and rounding multiply); U vectors a step, stage by stage, so that their dependency chains
/// overlap. vscalefps also scales by positive k exactly as tcc_expf does: Activation.cpp's
/// expVectors is this on arguments clamped to 89.
template <int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void expNonpositiveVectors(__m512 *x) {
  using namespace cpumath;
  const __m512 round = _mm512_set1_ps(tcc_exp_round);
  __m512 c[U], kf[U], r[U], p[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    c[u] = _mm512_max_ps(_mm512_set1_ps(tcc_exp_lowest), x[u]);
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    kf[u] = _mm512_sub_ps(_mm512_fmadd_ps(c[u], _mm512_set1_ps(tcc_exp_log2e), round), round);
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    r[u] = _mm512_fnmadd_ps(kf[u], _mm512_set1_ps(tcc_exp_ln2_lo),
                            _mm512_fnmadd_ps(kf[u], _mm512_set1_ps(tcc_exp_ln2_hi), c[u]));
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    p[u] = _mm512_fmadd_ps(_mm512_set1_ps(tcc_exp_p4), r[u], _mm512_set1_ps(tcc_exp_p3));
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    p[u] = _mm512_fmadd_ps(p[u], r[u], _mm512_set1_ps(tcc_exp_p2));
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    p[u] = _mm512_fmadd_ps(p[u], r[u], _mm512_set1_ps(tcc_exp_p1));
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    p[u] = _mm512_fmadd_ps(p[u], r[u], _mm512_set1_ps(tcc_exp_p0));
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) // 2^k (1 + r + r^2 P(r))
    x[u] = _mm512_scalef_ps(_mm512_add_ps(_mm512_set1_ps(1.0f),
                                          _mm512_fmadd_ps(_mm512_mul_ps(r[u], r[u]), p[u], r[u])),
                            kf[u]);
}

/// SiLU on U vectors: x * tcc_sigmoidf(x), bit for bit (every one of the 2^32 inputs compared
/// when this was written; Sgemm.SiluIsXTimesTccSigmoidBitForBit samples them): e^-|x| by
/// expNonpositiveVectors, the numerator's select a masked move. Measured on a Zen 5: 12.5 -> 8
/// cycles per 16 values (U = 4) against GCC's code for the portable definition.
template <int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void siluVectors(__m512 *v) {
  const __m512i sign = _mm512_set1_epi32(INT32_MIN);
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 e[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) // -|x|
    e[u] = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v[u]), sign));
  expNonpositiveVectors<U>(e);
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    const __mmask16 negative = _mm512_cmp_ps_mask(v[u], _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 sigmoid =
        _mm512_div_ps(_mm512_mask_mov_ps(one, negative, e[u]), _mm512_add_ps(one, e[u]));
    v[u] = _mm512_mul_ps(v[u], sigmoid);
  }
}

/// Hard swish on U vectors: x * min(max(alpha x + beta, 0), 1), the product and the sum each
/// rounded, a NaN gate kept (activateBlock's).
template <int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void hardSwishVectors(const Activation &a,
                                                                         __m512 *v) {
  const __m512 alpha = _mm512_set1_ps(a.alpha), beta = _mm512_set1_ps(a.beta);
  // Rounding given explicitly: a plain multiply and add would be fused where the includer
  // allows contraction (-ffp-contract=fast), one rounding instead of two.
  constexpr int nearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    const __m512 gate =
        _mm512_add_round_ps(_mm512_mul_round_ps(v[u], alpha, nearest), beta, nearest);
    // maxps / minps return their second operand (0, 1) for a NaN gate; the select puts it back
    const __m512 clamped =
        _mm512_min_ps(_mm512_max_ps(gate, _mm512_setzero_ps()), _mm512_set1_ps(1.0f));
    const __mmask16 nan = _mm512_cmp_ps_mask(gate, gate, _CMP_UNORD_Q);
    v[u] = _mm512_mul_ps(v[u], _mm512_mask_mov_ps(clamped, nan, gate));
  }
}

/// Whether activateVectors computes `a` (else the caller uses activateRows).
inline bool activatesVectors(const Activation &a) {
  return a.kind == ActivationKind::Silu || a.kind == ActivationKind::HardSwish;
}

/// `a` (activatesVectors) on U vectors in place.
template <int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void activateVectors(const Activation &a,
                                                                        __m512 *v) {
  if (a.kind == ActivationKind::Silu)
    siluVectors<U>(v);
  else
    hardSwishVectors<U>(a, v);
}

#pragma GCC diagnostic pop

} // namespace tcc::rt
