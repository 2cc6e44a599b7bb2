//===- SgemmAvx512.cpp - Sgemm microkernels for AVX-512 (14 x 32 tile) -----===//
//
// Compiled with -mavx512f -mfma (CMakeLists.txt) and only called when the CPU reports AVX-512F
// (Sgemm.cpp). 14 rows x 2 zmm of 16 columns: 28 accumulators, 2 registers of B, broadcasts of
// A. The column edge is masked loads and stores; panels ending in <= 16 columns use the
// one-zmm kernels.
#include "SgemmKernels.h"

#if defined(__x86_64__)
#include "SgemmAvx512Vec.h"

namespace tcc::rt {
namespace {

struct Vec : Avx512Vec {
  static __m512 dot(__m512 a, __m512 b, __m512 c) { return fma(a, b, c); }
};

} // namespace
} // namespace tcc::rt

#include "SgemmKernelTemplate.h"

namespace tcc::rt {
namespace {
constexpr SgemmKernelFamily kFamily = makeFamily<14, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14>();
} // namespace

const SgemmKernelFamily *sgemmAvx512Kernels() { return &kFamily; }

} // namespace tcc::rt
#else
namespace tcc::rt {
const SgemmKernelFamily *sgemmAvx512Kernels() { return nullptr; }
} // namespace tcc::rt
#endif
