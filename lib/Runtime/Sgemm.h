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
// 16-bit operands (gemm16: bf16 or f16 A and B, f32 accumulation and C) run on the same
// blocking and threading. bf16 operands are packed as pairs of values consecutive along k. Where
// the CPU has AMX (AMX-TILE and AMX-BF16, and the OS grants the tile state), the amx family
// multiplies 32 x 32 tiles of C by TDPBF16PS (SgemmAmx.cpp: 16 pairs along k per instruction;
// A panels row-major and k padded to whole tiles); else, with AVX512-BF16, the avx512bf16
// family by VDPBF16PS (two k steps per instruction). Otherwise (f16, or a CPU without either)
// they are converted to f32 while packed and run on the f32 family: correct on any CPU, half
// the bytes read from memory.
//
// $TCC_GEMM_ISA (generic, avx2, avx512, avx512bf16, amx) forces a kernel family no wider than
// the CPU supports (tests use it to cover every family on one machine). amx-emulated, which is
// never chosen otherwise, runs the amx family's packing, blocking and store-out with the tile
// instructions emulated in C++: how the amx code is tested on CPUs without AMX (it needs
// AVX512-BF16, for its store-out).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "SgemmKernels.h"

namespace tcc::rt {

/// A microkernel family: its register tile and the instructions it needs. Avx512Bf16, Amx and
/// AmxEmulated read panels of bf16 pairs (gemm16 only); the others read f32 panels.
enum class SgemmIsa { Generic, Avx2, Avx512, Avx512Bf16, Amx, AmxEmulated };

/// The f32 family this process uses: the widest one the CPU supports, capped by $TCC_GEMM_ISA.
SgemmIsa sgemmIsa();
/// "generic", "avx2", "avx512", "avx512bf16", "amx" or "amx-emulated".
const char *sgemmIsaName(SgemmIsa isa);
/// Whether the CPU (and OS) can run the family.
bool sgemmIsaSupported(SgemmIsa isa);
/// The family's register tile height (MR): callers that choose their own row blocks make them
/// multiples of it, so no microkernel call is a partial one.
int sgemmTileRows(SgemmIsa isa);
/// Its register tile width (NR): the column panels of a packed B.
int sgemmTileColumns(SgemmIsa isa);

/// Whether sgemm packs a non-transposed B it is given unpacked for a product with m rows of
/// op(A) (with few rows it reads B in place): callers that make B themselves write it packed
/// (sgemmPackedView) only then.
bool sgemmPacksB(int64_t m);

/// An operand in the layout the microkernels read: for each block of KC along k, the panels of
/// `panel` rows of A (or columns of B), each panel kc x panel floats, zero-padded at the edge.
/// Made for one kernel family (its MR or NR); sgemm repacks one made for another.
struct SgemmPacked {
  SgemmIsa isa = SgemmIsa::Generic;
  bool isA = false;
  int64_t outer = 0; // rows of op(A) (m) or columns of op(B) (n)
  int64_t k = 0;     // along k, in panel elements (pair families: pairs, (k + 1) / 2; amx:
                     // rounded up to whole tiles of 16 pairs)
  int64_t depth = 0; // k in values of the operand it was packed from (k for f32 panels)
  int64_t panel = 0; // MR or NR
  int64_t kc = 0;    // the k block
  // Packed just before its products (attention's key and value blocks), so in cache. By
  // default a caller's packed operand is a constant weight, read from memory once a run, whose
  // next panel the kernels prefetch while they compute one; on an operand in cache the
  // prefetches only cost (12 heads of 128 x 128 attention: 3%).
  bool inCache = false;
  std::unique_ptr<float[], void (*)(void *)> data{nullptr, nullptr};

  /// Offset of the panel holding row/column `outer0` (a multiple of `panel`) in the k block
  /// starting at k0 (a multiple of kc).
  const float *at(int64_t k0, int64_t outer0) const;
  /// Where element (o, p) lives (o: row of op(A) / column of op(B); p: the k index), in floats
  /// from data: for code that writes an operand straight into this layout (the f32 families'
  /// k-major panels; not the amx family's row-major A panels).
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

/// The 16-bit element types of gemm16 (stored as their bits).
enum class Half16 { BF16, F16 };

/// The family gemm16 uses for `type`: for bf16 the widest pair family the CPU has (Amx, else
/// Avx512Bf16, as $TCC_GEMM_ISA allows), otherwise sgemmIsa() on operands converted to f32.
SgemmIsa gemm16Isa(Half16 type);
/// Packs 16-bit op(A) (m x k) or op(B) (k x n) for gemm16Isa(type), as packSgemmA/B do.
SgemmPacked packGemm16A(Half16 type, bool transA, int64_t m, int64_t k, const uint16_t *a,
                        int64_t lda, int numThreads = 1);
SgemmPacked packGemm16B(Half16 type, bool transB, int64_t k, int64_t n, const uint16_t *b,
                        int64_t ldb, int numThreads = 1);
/// sgemm's contract for 16-bit A and B: C (f32) = act(alpha * op(A) op(B) + beta * C + bias),
/// products summed in f32. `packedA`/`packedB` are used when packed by packGemm16A/B for this
/// type on gemm16Isa(type) with these sizes.
void gemm16(Half16 type, bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
            const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, float beta, float *c,
            int64_t ldc, int numThreads, const SgemmPacked *packedA = nullptr,
            const SgemmPacked *packedB = nullptr, const SgemmEpilogue *epilogue = nullptr);

} // namespace tcc::rt
