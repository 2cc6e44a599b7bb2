//===- ScalarPrelude.cpp - Helper functions emitted kernels call ---------===//
//
// The prelude of every emitted translation unit: the same bit-exact helpers for the CPU and
// CUDA (only the function qualifiers, bit casts, clz and the 16-bit float conversions, which
// CUDA does in hardware, differ), so both backends round, wrap and saturate exactly like the
// reference kernels (lib/Interp/KernelsElementwise.cpp).
// The helpers are branch-free where they sit in inner loops (16-bit float conversions,
// max/min, saturating casts), so GCC can vectorise the loops that use them.
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/ScalarEmitter.h"

using namespace tcc::codegen;

/// Target-independent part, written in terms of TCC_FN, tcc_bits_f32/tcc_f32_from_bits,
/// tcc_bits_f64/tcc_f64_from_bits, TCC_CLZLL, TCC_MATH (libm function names) and the four
/// 16-bit conversions (tcc_f16_to_f32, tcc_f32_to_f16, tcc_bf16_to_f32, tcc_f32_to_bf16), which
/// each target defines: in software on the CPU, with the hardware's cvt on CUDA.
static const char *const kCommon16BitHeading = R"cpp(
// ---- 16-bit floats: stored as uint16_t bits, computed in float, rounded to nearest even ----
)cpp";

/// Bit-exact software conversions (NaN payloads kept), vectorisable by GCC.
static const char *const kCpu16BitConversions = R"cpp(TCC_FN float tcc_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  const uint32_t normal = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  const uint32_t special = sign | 0x7F800000u | (mantissa << 13); // inf, NaN (payload kept)
  const uint32_t subnormal = sign | tcc_bits_f32((float)(int32_t)mantissa * 0x1.0p-24f);
  // Masks rather than ?: so GCC does not sink the float multiply into a branch (it may not
  // speculate it under -ftrapping-math), which would stop vectorisation.
  const uint32_t isSub = 0u - (uint32_t)(exponent == 0);
  const uint32_t isSpecial = 0u - (uint32_t)(exponent == 31);
  return tcc_f32_from_bits((subnormal & isSub) | (special & isSpecial) |
                           (normal & ~(isSub | isSpecial)));
}

TCC_FN uint16_t tcc_f32_to_f16(float f) {
  // Branch-free round-to-nearest-even (after Maratyszcza's FP16): scaling by 2^112 * 2^-110
  // and adding a power of two makes the float adder round at the half's precision.
  const uint32_t w = tcc_bits_f32(f);
  const uint32_t absw = w & 0x7FFFFFFFu;
  const uint32_t sign = (w >> 16) & 0x8000u;
  float base = (tcc_f32_from_bits(absw) * 0x1.0p+112f) * 0x1.0p-110f;
  uint32_t bias = (absw << 1) & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  base = tcc_f32_from_bits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = tcc_bits_f32(base);
  const uint32_t nonsign = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
  const uint32_t nan = 0x7E00u | ((absw >> 13) & 0x3FFu); // quiet, top payload bits kept
  return (uint16_t)(sign | (absw > 0x7F800000u ? nan : nonsign));
}

TCC_FN float tcc_bf16_to_f32(uint16_t h) { return tcc_f32_from_bits((uint32_t)h << 16); }

TCC_FN uint16_t tcc_f32_to_bf16(float f) {
  const uint32_t x = tcc_bits_f32(f);
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  return (uint16_t)((x & 0x7FFFFFFFu) > 0x7F800000u ? ((x >> 16) | 0x40u) : rounded);
}
)cpp";

static const char *const kCommonPrelude = R"cpp(
TCC_FN float tcc_round_f16(float f) { return tcc_f16_to_f32(tcc_f32_to_f16(f)); }
TCC_FN float tcc_round_bf16(float f) { return tcc_bf16_to_f32(tcc_f32_to_bf16(f)); }

// ---- float8 (ONNX's E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ): uint8_t bits, computed in float ----
// m mantissa bits, exponent bias, kind 0: E5M2 (infinities, NaNs at the top exponent), 1: FN
// (no infinity; NaN = all exponent and mantissa bits), 2: FNUZ (no infinity, no -0; NaN = 0x80).
// tcc_f32_to_<type> stores a value (E5M2 keeps infinities); tcc_round_<type> is tcc.cast's
// rounding, as tcc::floatToFloat8 (lib/Support/Tensor.cpp): to nearest even, saturating
// (infinities too) to the largest finite value.
TCC_FN float tcc_f8_to_f32(uint8_t b, int m, int bias, int kind) {
  const int e = 7 - m, top = (1 << e) - 1;
  const int exponent = (b >> m) & top, mantissa = b & ((1 << m) - 1);
  const uint32_t sign = (uint32_t)(b & 0x80u) << 24;
  const float scale = tcc_f32_from_bits((uint32_t)(127 + (exponent ? exponent : 1) - bias - m) << 23);
  const float magnitude = (float)(exponent ? (1 << m) + mantissa : mantissa) * scale;
  const bool nan = kind == 2 ? b == 0x80u
                   : kind == 1 ? (b & 0x7Fu) == 0x7Fu
                               : exponent == top && mantissa != 0;
  const bool inf = kind == 0 && exponent == top && mantissa == 0;
  return tcc_f32_from_bits(nan ? 0x7FC00000u | sign
                           : inf ? 0x7F800000u | sign
                                 : tcc_bits_f32(magnitude) | sign);
}

TCC_FN uint8_t tcc_f32_to_f8(float f, int m, int bias, int kind, float maxFinite) {
  const uint32_t w = tcc_bits_f32(f), aw = w & 0x7FFFFFFFu;
  const uint8_t sign = (uint8_t)((w >> 24) & 0x80u);
  if (aw > 0x7F800000u) // NaN
    return kind == 2 ? (uint8_t)0x80u : (uint8_t)(sign | (kind == 1 ? 0x7Fu : 0x7Eu));
  // Round at a's exponent (the smallest normal one for subnormals), by power-of-two scalings.
  const int minExp = 1 - bias;
  int exponent = (int)(aw >> 23) - 127;
  exponent = exponent < minExp ? minExp : exponent;
  const float up = tcc_f32_from_bits((uint32_t)(127 + m - exponent) << 23);
  const float down = tcc_f32_from_bits((uint32_t)(127 - m + exponent) << 23);
  if (kind == 0 && aw == 0x7F800000u)
    return (uint8_t)(sign | 0x7Cu);
  float r = TCC_MATH(nearbyintf)(tcc_f32_from_bits(aw) * up) * down;
  r = r > maxFinite ? maxFinite : r;
  if (r == 0.0f)
    return kind == 2 ? (uint8_t)0 : sign;
  const uint32_t rb = tcc_bits_f32(r);
  const int re = (int)(rb >> 23) - 127;
  if (re < minExp) // subnormal: the multiple of 2^(minExp - m)
    return (uint8_t)(sign | (uint8_t)(r * tcc_f32_from_bits((uint32_t)(127 + m - minExp) << 23)));
  return (uint8_t)(sign | (uint8_t)((re + bias) << m) | (uint8_t)((rb >> (23 - m)) & ((1u << m) - 1)));
}

#define TCC_F8_FNS(NAME, M, BIAS, KIND, MAX)                                                     \
  TCC_FN float tcc_##NAME##_to_f32(uint8_t b) { return tcc_f8_to_f32(b, M, BIAS, KIND); }      \
  TCC_FN uint8_t tcc_f32_to_##NAME(float f) { return tcc_f32_to_f8(f, M, BIAS, KIND, MAX); }    \
  TCC_FN float tcc_round_##NAME(float f) {                                                     \
    const float c = f > MAX ? MAX : f < -MAX ? -MAX : f; /* NaN stays */                       \
    return tcc_##NAME##_to_f32(tcc_f32_to_##NAME(c));                                           \
  }
TCC_F8_FNS(f8e4m3fn, 3, 7, 1, 448.0f)
TCC_F8_FNS(f8e4m3fnuz, 3, 8, 2, 240.0f)
TCC_F8_FNS(f8e5m2, 2, 15, 0, 57344.0f)
TCC_F8_FNS(f8e5m2fnuz, 2, 16, 2, 57344.0f)
#undef TCC_F8_FNS

// tcc.bitcast: the bits of a stored value read as another storage type of its size.
template <class To, class From> TCC_FN To tcc_bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "bitcast between types of different sizes");
  union { From from; To to; } u;
  u.from = v;
  return u.to;
}

// 4- and 2-bit integers: a byte each (sign-extended for the signed ones); conversions wrap.
TCC_FN int8_t tcc_wrap_i4(int64_t v) { return (int8_t)((int8_t)(uint8_t)((uint64_t)v << 4) >> 4); }
TCC_FN uint8_t tcc_wrap_u4(int64_t v) { return (uint8_t)((uint64_t)v & 15u); }
TCC_FN int8_t tcc_wrap_i2(int64_t v) { return (int8_t)((int8_t)(uint8_t)((uint64_t)v << 6) >> 6); }
TCC_FN uint8_t tcc_wrap_u2(int64_t v) { return (uint8_t)((uint64_t)v & 3u); }

// Round-to-odd to float, so that a second rounding to f16/bf16 is correctly rounded.
TCC_FN float tcc_f64_to_f32_rto(double d) {
  const float f = (float)d;
  if (d != d || (double)f == d)
    return f;
  uint32_t bits = tcc_bits_f32(f);
  if (((double)f < 0 ? -(double)f : (double)f) > (d < 0 ? -d : d))
    bits -= 1; // one step toward zero
  return tcc_f32_from_bits(bits | 1u);
}

template <class I> TCC_FN float tcc_int_to_f32_rto(I v) {
  const bool negative = v < (I)0;
  uint64_t magnitude = (uint64_t)v;
  if (negative)
    magnitude = 0 - magnitude;
  float f = (float)magnitude;
  if (magnitude >= (1ull << 24)) {
    const int shift = 64 - TCC_CLZLL(magnitude) - 24;
    uint64_t kept = magnitude >> shift;
    if (magnitude & ((1ull << shift) - 1))
      kept |= 1;
    f = (float)kept * tcc_f32_from_bits((uint32_t)(127 + shift) << 23);
  }
  return negative ? -f : f;
}

// ---- Integers: wrapping arithmetic, division by zero gives 0 ----
template <class T> struct tcc_wrap { typedef T type; };
template <> struct tcc_wrap<int8_t> { typedef uint32_t type; };
template <> struct tcc_wrap<int16_t> { typedef uint32_t type; };
template <> struct tcc_wrap<int32_t> { typedef uint32_t type; };
template <> struct tcc_wrap<int64_t> { typedef uint64_t type; };
template <> struct tcc_wrap<uint8_t> { typedef uint32_t type; };
template <> struct tcc_wrap<uint16_t> { typedef uint32_t type; };

template <class T> TCC_FN T tcc_div(T a, T b) {
  typedef typename tcc_wrap<T>::type U;
  return b == (T)0 ? (T)0 : ((T)-1 < (T)0 && b == (T)-1) ? (T)((U)0 - (U)a) : (T)(a / b);
}

template <class T> TCC_FN T tcc_rem(T a, T b) {
  return b == (T)0 ? (T)0 : ((T)-1 < (T)0 && b == (T)-1) ? (T)0 : (T)(a % b);
}

template <class T> TCC_FN T tcc_ipow(T base, T exponent) {
  typedef typename tcc_wrap<T>::type U;
  if ((T)-1 < (T)0 && exponent < (T)0)
    return base == (T)1 ? (T)1 : base == (T)-1 ? ((exponent & 1) ? (T)-1 : (T)1) : (T)0;
  U result = 1, b = (U)base;
  for (uint64_t e = (uint64_t)exponent; e; e >>= 1) {
    if (e & 1)
      result = (U)(result * b);
    b = (U)(b * b);
  }
  return (T)result;
}

template <class T> TCC_FN T tcc_shl(T x, T y) {
  typedef typename tcc_wrap<T>::type U;
  return y >= (T)(sizeof(T) * 8) ? (T)0 : (T)((U)x << y);
}

template <class T> TCC_FN T tcc_shr(T x, T y) {
  return y >= (T)(sizeof(T) * 8) ? (T)0 : (T)(x >> y);
}

// ---- max/min: NaN propagates (the first NaN operand wins), equal operands give the first ----
// One select on one condition (b when it is larger, or NaN while a is not): three compares and
// a blend where the nested selects had made a dozen mask operations. Both operands are used
// before the select, so GCC cannot sink the computation of `b` into a branch (a sunk f16
// conversion would stop vectorisation).
template <class T> TCC_FN T tcc_max(T a, T b) {
  return (a < b || (b != b && a == a)) ? b : a;
}
template <class T> TCC_FN T tcc_min(T a, T b) {
  return (b < a || (b != b && a == a)) ? b : a;
}

// arg_reduce order: strict "a beats b"; NaN beats everything.
template <class T> TCC_FN bool tcc_more_extreme(T a, T b, bool largest) {
  return (a != a || b != b) ? (a != a && b == b) : largest ? b < a : a < b;
}

// ---- float -> integer: truncate toward zero, saturate, NaN gives 0 ----
// The conversion runs on a value clamped into range and the result is picked with masks, so
// GCC neither sinks a (possibly trapping) conversion into a branch nor stops vectorising.
template <class I, class F> TCC_FN I tcc_sat_cast(F v) {
  const bool isSigned = (I)-1 < (I)0;
  const F half = (F)((uint64_t)1 << (sizeof(I) * 8 - 1));
  const F lo = isSigned ? -half : (F)0;
  const F hi = isSigned ? half : half * (F)2;            // exclusive
  const F below = hi - hi * (F)(sizeof(F) == 4 ? 0x1p-24 : 0x1p-53); // largest F < hi
  const I max = isSigned ? (I)~(I)((uint64_t)1 << (sizeof(I) * 8 - 1)) : (I)~(I)0;
  F c = v < lo ? lo : v;
  c = c > below ? below : c;
  c = v == v ? c : (F)0;
  const I r = (I)c;
  const I big = (I)((I)0 - (I)(v >= hi));
  return (I)((r & (I)~big) | (max & big));
}

// ---- floor/ceil through nearbyint, which GCC vectorises without -fno-trapping-math ----
// floor(x) and ceil(x) have the sign of x (zeros included), hence the copysign.
TCC_FN float tcc_floorf(float x) {
  const float r = TCC_MATH(nearbyintf)(x);
  return TCC_MATH(copysignf)(r > x ? r - 1.0f : r, x);
}
TCC_FN double tcc_floor(double x) {
  const double r = TCC_MATH(nearbyint)(x);
  return TCC_MATH(copysign)(r > x ? r - 1.0 : r, x);
}
TCC_FN float tcc_ceilf(float x) {
  const float r = TCC_MATH(nearbyintf)(x);
  return TCC_MATH(copysignf)(r < x ? r + 1.0f : r, x);
}
TCC_FN double tcc_ceil(double x) {
  const double r = TCC_MATH(nearbyint)(x);
  return TCC_MATH(copysign)(r < x ? r + 1.0 : r, x);
}

// ---- Affine index arithmetic: floordiv/ceildiv round toward -inf/+inf, mod has b's sign ----
TCC_FN int64_t tcc_floordiv(int64_t a, int64_t b) {
  const int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
TCC_FN int64_t tcc_ceildiv(int64_t a, int64_t b) {
  const int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) == (b < 0))) ? q + 1 : q;
}
TCC_FN int64_t tcc_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
)cpp";

static const char *const kCpuPrelude = R"cpp(#ifndef TCC_CPU_PRELUDE
#define TCC_CPU_PRELUDE
// Generated by tcc. Flags: -O3 -march=native -fopenmp -fPIC -std=c++17 -fno-math-errno
// -ffp-contract=off.
#include <omp.h>
#include <stdint.h>

#define TCC_FN static inline __attribute__((always_inline))
#define TCC_CLZLL __builtin_clzll
#define TCC_MATH(f) __builtin_##f
#define TCC_EXPORT extern "C" __attribute__((visibility("default")))

TCC_FN uint32_t tcc_bits_f32(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }
TCC_FN float tcc_f32_from_bits(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
TCC_FN uint64_t tcc_bits_f64(double d) { uint64_t u; __builtin_memcpy(&u, &d, 8); return u; }
TCC_FN double tcc_f64_from_bits(uint64_t u) { double d; __builtin_memcpy(&d, &u, 8); return d; }

// ---- transposing loops' tiles (CpuEmitter's emitTransposeTiles) ----
// GCC's vector extensions: one AVX-512 register, or the widest the target has.
typedef float tcc_v16f __attribute__((vector_size(64)));
typedef int32_t tcc_v16i __attribute__((vector_size(64)));
// Rows r and r + B (r without bit B) exchange the halves that swap bit B of the row index with
// bit B of the column index.
TCC_FN void tcc_transpose16_stage(tcc_v16f *v, int B, const tcc_v16i &lo, const tcc_v16i &hi) {
  for (int r = 0; r < 16; ++r)
    if (!(r & B)) {
      const tcc_v16f a = v[r], b = v[r | B];
      v[r] = __builtin_shuffle(a, b, lo);
      v[r | B] = __builtin_shuffle(a, b, hi);
    }
}
// out[c * ldo + r] = in[16 r + c] for r, c in [0, 16): four stages of two-source shuffles.
TCC_FN void tcc_transpose16(const float *in, float *out, int64_t ldo) {
  tcc_v16f v[16];
  for (int i = 0; i < 16; ++i)
    __builtin_memcpy(&v[i], in + 16 * i, 64);
  tcc_transpose16_stage(v, 1, (tcc_v16i){0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
                        (tcc_v16i){1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31});
  tcc_transpose16_stage(v, 2, (tcc_v16i){0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                        (tcc_v16i){2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31});
  tcc_transpose16_stage(v, 4, (tcc_v16i){0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                        (tcc_v16i){4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31});
  tcc_transpose16_stage(v, 8, (tcc_v16i){0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                        (tcc_v16i){8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
  for (int i = 0; i < 16; ++i)
    __builtin_memcpy(out + i * ldo, &v[i], 64);
}
)cpp";

static const char *const kCudaPrelude = R"cpp(#ifndef TCC_CUDA_PRELUDE
#define TCC_CUDA_PRELUDE
// Generated by tcc for NVRTC.
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

// Not static: NVRTC warns about unused static functions, and drops unused inline ones anyway.
#define TCC_FN __device__ __forceinline__
#define TCC_CLZLL __clzll
#define TCC_MATH(f) f
#define TCC_EXPORT extern "C" __global__

TCC_FN uint32_t tcc_bits_f32(float f) { return __float_as_uint(f); }
TCC_FN float tcc_f32_from_bits(uint32_t u) { return __uint_as_float(u); }
TCC_FN uint64_t tcc_bits_f64(double d) { return (uint64_t)__double_as_longlong(d); }
TCC_FN double tcc_f64_from_bits(uint64_t u) { return __longlong_as_double((long long)u); }

// N elements of T as one aligned access (ld/st.global.v4.u32 for 16 bytes).
template <class T, int N> struct __align__(sizeof(T) * N) tcc_vec { T v[N]; };
)cpp";

/// One cvt instruction each (sm_80+), through inline PTX rather than cuda_fp16.h/cuda_bf16.h,
/// whose inclusion triples NVRTC's time for a small kernel. Rounding is to nearest even with
/// subnormals kept, like the reference; NaNs come out as the canonical NaN (payload dropped).
static const char *const kCuda16BitConversions = R"cpp(TCC_FN float tcc_f16_to_f32(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
TCC_FN uint16_t tcc_f32_to_f16(float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
TCC_FN float tcc_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
TCC_FN uint16_t tcc_f32_to_bf16(float f) {
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
)cpp";

/// CPU only: f32 exp/log/tanh/erf/sigmoid (include/tcc/Support/CpuMathF32.inc, embedded as
/// kCpuMathPrelude at build time).
#include "CpuMathPrelude.h"

std::string ScalarEmitter::prelude() const {
  std::string text = target == Target::Cpu ? kCpuPrelude : kCudaPrelude;
  text += kCommon16BitHeading;
  text += target == Target::Cpu ? kCpu16BitConversions : kCuda16BitConversions;
  text += kCommonPrelude;
  if (target == Target::Cpu)
    text += kCpuMathPrelude;
  text += "#endif\n";
  return text;
}
