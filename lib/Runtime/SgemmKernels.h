//===- SgemmKernels.h - The microkernel families of Sgemm.h ----------------===//
//
// Included by the per-ISA kernel files, which are compiled with their own -m flags: this header
// must stay free of anything that instantiates inline code (no standard library templates), so
// that no AVX-512 copy of a shared inline function can reach the rest of the library.
#pragma once

#include "Activation.h"

#include <cstdint>

namespace tcc::rt {

/// What is applied to each element (i, j) of C as its tile is stored for the last time, after
/// alpha and beta, in this order: + bias[j] (one value per column; null: none), + rowBias[i]
/// (one value per row: a convolution's per-channel bias), + residual[i * ldResidual + j] (a
/// tensor of C's shape, e.g. a residual connection; it must not overlap C), then, when clamp,
/// max(x, lo) and min(x, hi) (ReLU: lo = 0, hi = +inf; ReLU6: 0, 6). A NaN stays NaN. In a
/// microkernel's call the pointers are at the tile's first column, row and element.
struct SgemmEpilogue {
  const float *bias = nullptr;
  const float *rowBias = nullptr;
  const float *residual = nullptr;
  int64_t ldResidual = 0;
  bool clamp = false;
  float lo = 0.0f, hi = 0.0f;
  // Last (Activation.h): applied by sgemm() to each finished tile while it is in cache, after
  // the microkernel stored it; the microkernels themselves ignore it.
  Activation activation;
};

/// The microkernel interface (one per family and row count 1..MR): C[0:rows, 0:cols] =
/// alpha * sum_p a[p*MR + i] * b[p*ldb + j] + beta * C, cols <= NR; beta == 0 does not read C.
/// b is a packed panel (ldb = NR) or, for few rows, B itself (NR readable columns per row).
/// `epilogue` (null: none; its bias points at the tile's first column) follows.
using SgemmMicroKernel = void (*)(int64_t k, const float *a, const float *b, int64_t ldb,
                                  float *c, int64_t ldc, int64_t cols, float alpha, float beta,
                                  const SgemmEpilogue *epilogue);
/// One row of C (a batch-1 layer) over up to 4 packed panels of B at once, `panelStride`
/// floats apart: C[0, 0:cols] as the microkernel computes it, cols <= 4 * NR. A's row is
/// a[p * aStep] (a packed panel: aStep = MR; the row in place: 1). Reading several panels at
/// once keeps several memory streams in flight; a GEMV is bound by reading B.
using SgemmRowKernel = void (*)(int64_t k, const float *a, int64_t aStep, const float *b,
                                int64_t panelStride, float *c, int64_t cols, float alpha,
                                float beta, const SgemmEpilogue *epilogue);
/// The microkernel over A in place (not packed, not transposed): row i of the tile at
/// a + i * lda, k contiguous; otherwise SgemmMicroKernel's contract.
using SgemmInPlaceAKernel = void (*)(int64_t k, const float *a, int64_t lda, const float *b,
                                     int64_t ldb, float *c, int64_t ldc, int64_t cols,
                                     float alpha, float beta, const SgemmEpilogue *epilogue);
struct SgemmKernelFamily {
  int mr, nr;
  int narrowCols;              // columns of the narrow kernels (0: none)
  SgemmMicroKernel byRows[32]; // byRows[r - 1] computes r rows, up to nr columns
  SgemmMicroKernel narrow[32]; // the same for up to narrowCols columns (a panel's last ones)
  SgemmRowKernel rowPanels[4]; // rowPanels[p - 1]: one row over p panels (null: none)
  SgemmInPlaceAKernel inPlaceA[32];       // byRows over A in place (null: none)
  SgemmInPlaceAKernel inPlaceANarrow[32]; // narrow over A in place (null: none)
  SgemmMicroKernel streamingA[32];       // byRows, prefetching the next A panel (null: none)
  SgemmMicroKernel streamingANarrow[32]; // narrow, prefetching the next A panel (null: none)
  SgemmMicroKernel streamingB[32];       // byRows, prefetching the next B panel (null: none)
  SgemmMicroKernel streamingBNarrow[32]; // narrow, prefetching the next B panel (null: none)
};
/// The families compiled into the library (with their own instruction-set flags).
const SgemmKernelFamily *sgemmAvx2Kernels();   // null where not built (non-x86)
const SgemmKernelFamily *sgemmAvx512Kernels(); // null where not built (non-x86)
/// AVX-512's tile over panels of bf16 pairs (SgemmAvx512Bf16.cpp); null where not built.
const SgemmKernelFamily *sgemmAvx512Bf16Kernels();
/// AMX's 32 x 32 tile over row-major A panels and B panels of bf16 pairs (SgemmAmx.cpp), with
/// the tile instructions or (emulated) C++ in their place; null where not built.
const SgemmKernelFamily *sgemmAmxKernels(bool emulated);
} // namespace tcc::rt
