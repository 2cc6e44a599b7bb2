//===- DType.h - Element types of the runtime: sizes, names, f16/bf16 -----===//
//
// The runtime's element types are tccrt_dtype (same numbering as the artifact schema and
// tcc::DType). Helpers to size and name them and to widen the 16-bit floats to float.
#pragma once

#include "tcc/Runtime/tccrt.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tcc::rt {

constexpr int kNumDTypes = TCCRT_I2 + 1;

inline bool isValidDType(unsigned d) { return d < (unsigned)kNumDTypes; }

inline size_t dtypeSize(tccrt_dtype d) {
  static constexpr size_t sizes[kNumDTypes] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2,
                                                4, 8, 1, 1, 1, 1, 1, 1, 1, 1};
  return isValidDType(d) ? sizes[d] : 0;
}

inline const char *dtypeName(tccrt_dtype d) {
  static constexpr const char *names[kNumDTypes] = {"bool", "i8",  "i16", "i32", "i64",
                                                    "u8",   "u16", "u32", "u64", "f16",
                                                    "bf16", "f32", "f64", "f8E4M3FN",
                                                    "f8E4M3FNUZ", "f8E5M2", "f8E5M2FNUZ",
                                                    "u4", "i4", "u2", "i2"};
  return isValidDType(d) ? names[d] : "<invalid dtype>";
}

/// IEEE binary16 bits to float (exact, including subnormals, infinities and NaN). Branch-free,
/// so that loops of it vectorise: the exponent and mantissa bits shifted into a float's place
/// make a float 2^-112 times the value (subnormals included: a float subnormal then), and the
/// multiplication rescales it exactly; infinities and NaNs (exponent 31) are set apart.
inline float halfToFloat(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, magnitude = h & 0x7fffu;
  const uint32_t shifted = magnitude << 13;
  float scaled;
  std::memcpy(&scaled, &shifted, 4);
  scaled *= 0x1p112f;
  uint32_t bits;
  std::memcpy(&bits, &scaled, 4);
  bits = magnitude >= 0x7c00u ? 0x7f800000u | shifted : bits;
  bits |= sign;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// bfloat16 bits to float (exact).
inline float bfloat16ToFloat(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// float to bfloat16 bits, rounded to nearest even; NaN stays NaN (quiet).
inline uint16_t floatToBfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// float to IEEE binary16 bits, rounded to nearest even (overflow to infinity, subnormals
/// rounded by a float addition); NaN stays NaN (quiet).
inline uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x47800000u) // >= 2^16, infinity or NaN
    return sign | (uint16_t)(ax > 0x7f800000u ? 0x7e00u | ((ax >> 13) & 0x3ffu) : 0x7c00u);
  if (ax < 0x38800000u) { // below 2^-14: adding 0.5 rounds it at the subnormal's last bit
    float a;
    std::memcpy(&a, &ax, 4);
    a += 0.5f;
    uint32_t b;
    std::memcpy(&b, &a, 4);
    return sign | (uint16_t)(b - 0x3f000000u);
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  return sign | (uint16_t)((ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13);
}

} // namespace tcc::rt
