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

constexpr int kNumDTypes = TCCRT_F64 + 1;

inline bool isValidDType(unsigned d) { return d < (unsigned)kNumDTypes; }

inline size_t dtypeSize(tccrt_dtype d) {
  static constexpr size_t sizes[kNumDTypes] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};
  return isValidDType(d) ? sizes[d] : 0;
}

inline const char *dtypeName(tccrt_dtype d) {
  static constexpr const char *names[kNumDTypes] = {"bool", "i8",  "i16", "i32", "i64",
                                                    "u8",   "u16", "u32", "u64", "f16",
                                                    "bf16", "f32", "f64"};
  return isValidDType(d) ? names[d] : "<invalid dtype>";
}

/// IEEE binary16 bits to float (exact, including subnormals, infinities and NaN).
inline float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else { // subnormal: normalise
    int shift = 0;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    bits = sign | ((uint32_t)(113 - shift) << 23) | (mantissa << 13);
  }
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

} // namespace tcc::rt
