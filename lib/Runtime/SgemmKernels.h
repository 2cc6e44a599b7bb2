//===- SgemmKernels.h - The microkernel families of Sgemm.h ----------------===//
//
// Included by the per-ISA kernel files, which are compiled with their own -m flags: this header
// must stay free of anything that instantiates inline code (no standard library templates), so
// that no AVX-512 copy of a shared inline function can reach the rest of the library.
#pragma once

#include <cstdint>

namespace tcc::rt {

/// The microkernel interface (one per family and row count 1..MR): C[0:rows, 0:cols] =
/// alpha * sum_p a[p*MR + i] * b[p*ldb + j] + beta * C, cols <= NR; beta == 0 does not read C.
/// b is a packed panel (ldb = NR) or, for few rows, B itself (NR readable columns per row).
using SgemmMicroKernel = void (*)(int64_t k, const float *a, const float *b, int64_t ldb,
                                  float *c, int64_t ldc, int64_t cols, float alpha, float beta);
struct SgemmKernelFamily {
  int mr, nr;
  SgemmMicroKernel byRows[16]; // byRows[r - 1] computes r rows
};
/// The families compiled into the library (with their own instruction-set flags).
const SgemmKernelFamily &sgemmGenericKernels();
const SgemmKernelFamily *sgemmAvx2Kernels();   // null where not built (non-x86)
const SgemmKernelFamily *sgemmAvx512Kernels(); // null where not built (non-x86)

} // namespace tcc::rt
