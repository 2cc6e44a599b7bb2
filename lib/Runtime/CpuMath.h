//===- CpuMath.h - f32 transcendentals for libtccrt's own loops ---------------===//
//
// The generated CPU kernels' branch-free exp/log/tanh/erf/sigmoid (include/tcc/Support/
// CpuMathF32.inc: one source for both), so the runtime's loops that call them vectorise and
// round exactly as a generated kernel would.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace tcc::rt::cpumath {

#define TCC_FN static inline __attribute__((always_inline))
TCC_FN uint32_t tcc_bits_f32(float f) { return __builtin_bit_cast(uint32_t, f); }
TCC_FN float tcc_f32_from_bits(uint32_t u) { return __builtin_bit_cast(float, u); }
#include "tcc/Support/CpuMathF32.inc"
#undef TCC_FN

} // namespace tcc::rt::cpumath
