//===- SgemmAvx512Bf16.cpp - bf16 GEMM microkernels for AVX512-BF16 --------===//
//
// Compiled with -mavx512f -mfma -mavx512bf16 (CMakeLists.txt) and only called when the CPU
// reports AVX512-BF16 (Sgemm.cpp). The f32 kernels' 14 x 32 tile, over panels whose 32-bit
// elements are pairs of bf16 values consecutive along k (gemm16's packing): one VDPBF16PS per
// accumulator multiplies a broadcast pair of A by the 16 pairs of a B vector and adds both
// products to f32 sums, two k steps per instruction. The epilogue (alpha, beta, bias, ReLU) is
// the f32 kernels' on the f32 accumulators.
#include "SgemmKernels.h"

#if defined(__x86_64__)
#include "SgemmAvx512Vec.h"

namespace tcc::rt {
namespace {

struct Vec : Avx512Vec {
  /// c + a.lo * b.lo + a.hi * b.hi per 32-bit lane, a and b holding bf16 pairs.
  static __m512 dot(__m512 a, __m512 b, __m512 c) {
    return _mm512_dpbf16_ps(c, (__m512bh)_mm512_castps_si512(a),
                            (__m512bh)_mm512_castps_si512(b));
  }
};

} // namespace
} // namespace tcc::rt

#include "SgemmKernelTemplate.h"

namespace tcc::rt {
namespace {
/// The pair family without the in-place A kernels: its A is packed in pairs along k.
constexpr SgemmKernelFamily pairsOnly(SgemmKernelFamily f) {
  for (int r = 0; r < 32; ++r)
    f.inPlaceA[r] = f.inPlaceANarrow[r] = nullptr;
  return f;
}
constexpr SgemmKernelFamily kFamily =
    pairsOnly(makeFamily<14, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14>());
} // namespace

const SgemmKernelFamily *sgemmAvx512Bf16Kernels() { return &kFamily; }

} // namespace tcc::rt
#else
namespace tcc::rt {
const SgemmKernelFamily *sgemmAvx512Bf16Kernels() { return nullptr; }
} // namespace tcc::rt
#endif
