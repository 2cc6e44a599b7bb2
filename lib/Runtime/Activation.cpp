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

// The GELUs on U AVX-512 vectors, bit for bit activateBlock's (CpuMathF32.inc's tcc_erff and
// tcc_tanhf, the same operations in the same order; this file is compiled without
// contraction, so no multiply and add below is fused unless written as one), each stage over
// the U vectors in turn so that their long dependency chains (two polynomials, an exp, a
// division) overlap. GCC's code for the portable definitions ran at about two operations a
// cycle on a Zen 5, waiting on those chains.

// GCC 12 warns that the intrinsics' own _mm512_undefined_ps() may be used uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/// |x| and the sign bit of x.
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 absVector(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MAX)));
}
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 withSignOf(__m512 m, __m512 s) {
  return _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(m),
      _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32(INT32_MIN))));
}
/// p(w) by Horner from the highest coefficient: p = c[0] w + c[1], then p w + c[i].
template <int N>
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 hornerVector(const float (&c)[N],
                                                                        __m512 w) {
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(c[0]), w, _mm512_set1_ps(c[1]));
#pragma GCC unroll 16
  for (int i = 2; i < N; ++i)
    p = _mm512_fmadd_ps(p, w, _mm512_set1_ps(c[i]));
  return p;
}

/// tcc_erff on U vectors in place.
template <int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void erfVectors(__m512 *x) {
  static constexpr float small[] = {0x1.4f3dfep-14f, -0x1.a60230p-11f, 0x1.5449a2p-8f,
                                    -0x1.b80116p-6f, 0x1.ce2d64p-4f,   -0x1.812740p-2f,
                                    0x1.06eba8p-3f};
  static constexpr float big[] = {0x1.49a0d6p-6f, -0x1.a768a2p-7f, -0x1.78ba30p-6f,
                                  0x1.93820ep-5f, -0x1.bbef2cp-5f, 0x1.e42ed0p-6f,
                                  0x1.51064ep-5f, -0x1.679704p-3f, 0x1.905e16p-2f,
                                  0x1.2f65fcp-2f};
  const __m512 bend = _mm512_set1_ps(0.921875f);
  __m512 a[U], lo[U], ac[U], t[U], e[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    a[u] = absVector(x[u]);
    lo[u] = _mm512_fmadd_ps(x[u], hornerVector(small, _mm512_mul_ps(x[u], x[u])), x[u]);
    // a clamped to [0.921875, 4]: maxps and minps keep a NaN second operand
    ac[u] = _mm512_min_ps(_mm512_set1_ps(4.0f), _mm512_max_ps(bend, a[u]));
    t[u] = _mm512_sub_ps(_mm512_div_ps(_mm512_set1_ps(1.0f), ac[u]), _mm512_set1_ps(0.6f));
    e[u] = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(ac[u], ac[u])),
                                                _mm512_set1_epi32(INT32_MIN))); // -(ac ac)
  }
  expNonpositiveVectors<U>(e);
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    const __m512 hi =
        withSignOf(_mm512_fnmadd_ps(e[u], hornerVector(big, t[u]), _mm512_set1_ps(1.0f)), x[u]);
    const __m512 y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a[u], bend, _CMP_LT_OQ), hi, lo[u]);
    x[u] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x[u], x[u], _CMP_UNORD_Q), y, x[u]);
  }
}

/// tcc_expf on U vectors in place: clamped to 89 above (NaN kept), then
/// expNonpositiveVectors (its vscalefps rounds once, which is also the portable code's
/// rounding for positive arguments: there its first power-of-two product is exact), and
/// tcc_expf's NaN select.
template <int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void expVectors(__m512 *x) {
  __m512 y[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    y[u] = _mm512_min_ps(_mm512_set1_ps(89.0f), x[u]);
  expNonpositiveVectors<U>(y);
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    x[u] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x[u], x[u], _CMP_UNORD_Q), y[u], x[u]);
}

/// tcc_tanhf on U vectors in place.
template <int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void tanhVectors(__m512 *x) {
  static constexpr float small[] = {0x1.1a31e8p-9f, -0x1.0c60aap-7f, 0x1.63a588p-6f,
                                    -0x1.b9f18ap-5f, 0x1.11107ap-3f, -0x1.555554p-2f};
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 a[U], lo[U], e[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    a[u] = absVector(x[u]);
    const __m512 w = _mm512_mul_ps(x[u], x[u]);
    lo[u] = _mm512_fmadd_ps(_mm512_mul_ps(x[u], w), hornerVector(small, w), x[u]);
    const __m512 ac = _mm512_min_ps(_mm512_set1_ps(10.0f), a[u]); // a > 10 ? 10 : a
    e[u] = _mm512_add_ps(ac, ac);
  }
  expVectors<U>(e);
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    const __m512 hi = withSignOf(
        _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e[u], one))), x[u]);
    const __m512 y =
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a[u], _mm512_set1_ps(0.625f), _CMP_LT_OQ), hi,
                             lo[u]);
    x[u] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x[u], x[u], _CMP_UNORD_Q), y, x[u]);
  }
}

/// activateBlock's GELUs on U vectors in place: x (erf(x / 1.41421356) + 1) 0.5 and
/// 0.5 x (1 + tanh(0.797884561 (x + 0.044715 x^3))), rounded step by step as there.
template <ActivationKind K, int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void geluVectors(__m512 *v) {
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  __m512 g[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    if constexpr (K == ActivationKind::GeluErf)
      g[u] = _mm512_div_ps(v[u], _mm512_set1_ps(1.41421356f));
    else
      g[u] = _mm512_mul_ps(
          _mm512_set1_ps(0.797884561f),
          _mm512_add_ps(v[u], _mm512_mul_ps(_mm512_set1_ps(0.044715f),
                                            _mm512_mul_ps(_mm512_mul_ps(v[u], v[u]), v[u]))));
  if constexpr (K == ActivationKind::GeluErf)
    erfVectors<U>(g);
  else
    tanhVectors<U>(g);
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    if constexpr (K == ActivationKind::GeluErf)
      v[u] = _mm512_mul_ps(_mm512_mul_ps(v[u], _mm512_add_ps(g[u], one)), half);
    else
      v[u] = _mm512_mul_ps(_mm512_mul_ps(half, v[u]), _mm512_add_ps(one, g[u]));
}

/// Activation K on U vectors in place.
template <ActivationKind K, int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void activateVectorsOf(__m512 *v) {
  if constexpr (K == ActivationKind::Silu)
    siluVectors<U>(v);
  else
    geluVectors<K, U>(v);
}

/// Activation K (SiLU or a GELU) in place on `rows` rows of `cols` floats, `ld` apart, on
/// AVX-512: 4 vectors at a time, then one, a row's last partial one masked. Whole vectors are
/// loaded unmasked: a masked load of what a store has just written (a convolution's output
/// vector) is not forwarded from the store on a Zen 5, and waited about 50 cycles a vector.
/// Measured there, per 16 values: SiLU 12.5 -> 8 cycles.
template <ActivationKind K>
[[gnu::target("avx512f")]] void activateRowsAvx512(float *x, int64_t rows, int64_t cols,
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
      activateVectorsOf<K, U>(v);
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u)
        _mm512_storeu_ps(x + i + 16 * u, v[u]);
    }
    for (; i + 16 <= cols; i += 16) {
      __m512 v[1] = {_mm512_loadu_ps(x + i)};
      activateVectorsOf<K, 1>(v);
      _mm512_storeu_ps(x + i, v[0]);
    }
    if (i < cols) {
      const __mmask16 m = (__mmask16)((1u << (cols - i)) - 1);
      __m512 v[1] = {_mm512_maskz_loadu_ps(m, x + i)};
      activateVectorsOf<K, 1>(v);
      _mm512_mask_storeu_ps(x + i, m, v[0]);
    }
  }
}

#pragma GCC diagnostic pop

} // namespace

void activateRows(const Activation &a, float *x, int64_t rows, int64_t cols, int64_t ld) {
  if (a.kind == ActivationKind::None || rows <= 0 || cols <= 0)
    return;
  if (sgemmIsa() == SgemmIsa::Avx512) {
    switch (a.kind) {
    case ActivationKind::Silu:
      return activateRowsAvx512<ActivationKind::Silu>(x, rows, cols, ld);
    case ActivationKind::GeluErf:
      return activateRowsAvx512<ActivationKind::GeluErf>(x, rows, cols, ld);
    case ActivationKind::GeluTanh:
      return activateRowsAvx512<ActivationKind::GeluTanh>(x, rows, cols, ld);
    default:
      break;
    }
  }
  activateRowsIsa(a, x, rows, cols, ld);
}

} // namespace tcc::rt
