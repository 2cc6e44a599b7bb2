//===- Sgemm.h - libtccrt's own f32 GEMM, dispatched on CPU features -------===//
//
// C = alpha * op(A) op(B) + beta * C on row-major f32 matrices, with microkernels chosen by what
// the CPU reports (cpuid), never by a table of CPU models: AVX-512 (14x32 register tile), AVX2 +
// FMA (6x16), or portable C++ (4x16) on anything else. The design is the usual one of BLIS and
// GotoBLAS: both operands are packed into panels the microkernel reads contiguously (A in
// panels of MR rows, B in panels of NR columns, both in blocks of KC along k), the B block of a
// task stays in L2 while the A micro-panel stays in L1. Packing may be done once, ahead of time,
// for an operand that does not change (a weight): see packSgemmA/packSgemmB.
//
// Threads: the output is cut into (column block, row range) tasks run by parallelFor on the
// runtime's one OpenMP pool. Each element of C is summed by one thread in a fixed order, so the
// result does not depend on the thread count.
//
// $TCC_GEMM_ISA (generic, avx2, avx512) forces a kernel family no wider than the CPU supports
// (tests use it to cover every family on one machine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "SgemmKernels.h"

namespace tcc::rt {

/// A microkernel family: its register tile and the instructions it needs.
enum class SgemmIsa { Generic, Avx2, Avx512 };

/// The family this process uses: the widest one the CPU supports, capped by $TCC_GEMM_ISA.
SgemmIsa sgemmIsa();
/// "generic", "avx2" or "avx512".
const char *sgemmIsaName(SgemmIsa isa);
/// Whether the CPU (and OS) can run the family.
bool sgemmIsaSupported(SgemmIsa isa);
/// The family's register tile height (MR): callers that choose their own row blocks make them
/// multiples of it, so no microkernel call is a partial one.
int sgemmTileRows(SgemmIsa isa);

/// An operand in the layout the microkernels read: for each block of KC along k, the panels of
/// `panel` rows of A (or columns of B), each panel kc x panel floats, zero-padded at the edge.
/// Made for one kernel family (its MR or NR); sgemm repacks one made for another.
struct SgemmPacked {
  SgemmIsa isa = SgemmIsa::Generic;
  bool isA = false;
  int64_t outer = 0; // rows of op(A) (m) or columns of op(B) (n)
  int64_t k = 0;
  int64_t panel = 0; // MR or NR
  int64_t kc = 0;    // the k block
  std::unique_ptr<float[], void (*)(void *)> data{nullptr, nullptr};

  /// Offset of the panel holding row/column `outer0` (a multiple of `panel`) in the k block
  /// starting at k0 (a multiple of kc).
  const float *at(int64_t k0, int64_t outer0) const;
  /// Where element (o, p) lives (o: row of op(A) / column of op(B); p: the k index), in floats
  /// from data: for code that writes an operand straight into this layout.
  int64_t offset(int64_t o, int64_t p) const;
};

/// Floats a packed operand of outer x k takes for `isa`.
size_t sgemmPackedFloats(SgemmIsa isa, bool isA, int64_t outer, int64_t k);
/// The packed layout over caller memory (not owned, not filled: the caller writes each element
/// at offset(o, p)). The padding of the last panel is never stored to C, so it need not be set.
SgemmPacked sgemmPackedView(SgemmIsa isa, bool isA, int64_t outer, int64_t k, float *storage);

/// Packs op(A) (m x k; A is m x k with row stride lda, or k x m when transA) for `isa`.
SgemmPacked packSgemmA(SgemmIsa isa, bool transA, int64_t m, int64_t k, const float *a,
                       int64_t lda, int numThreads = 1);
/// Packs op(B) (k x n; B is k x n with row stride ldb, or n x k when transB) for `isa`.
SgemmPacked packSgemmB(SgemmIsa isa, bool transB, int64_t k, int64_t n, const float *b,
                       int64_t ldb, int numThreads = 1);

/// C (m x n, row stride ldc) = act(alpha * op(A) op(B) + beta * C + bias). beta == 0 never
/// reads C (NaN in C does not propagate). `packedA`/`packedB`, when given, replace a/b (which
/// may then be null) if they were packed for sgemmIsa() with these sizes; otherwise a/b are
/// packed here. `epilogue` (bias: n values, one per column; relu) is applied to each tile of C
/// as the kernel stores it for the last time, while it is in registers: no second pass over C.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
           int64_t ldc, int numThreads, const SgemmPacked *packedA = nullptr,
           const SgemmPacked *packedB = nullptr, const SgemmEpilogue *epilogue = nullptr);

} // namespace tcc::rt
