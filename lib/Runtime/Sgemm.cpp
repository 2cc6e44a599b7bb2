//===- Sgemm.cpp - Packing, blocking, threading and dispatch of Sgemm.h ----===//
#include "Sgemm.h"
#include "DType.h"
#include "HostMemory.h"
#include "Parallel.h"
#include "tcc/Runtime/CpuFeatures.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tcc::rt {
namespace {

//===--- The portable family ----------------------------------------------===//

constexpr int kGenericMR = 4, kGenericNR = 16;

/// The epilogue on element (row, column) of C, in the microkernels' order (SgemmEpilogue).
float applyEpilogue(float r, const SgemmEpilogue *epilogue, int64_t row, int64_t column) {
  if (!epilogue)
    return r;
  if (epilogue->bias)
    r += epilogue->bias[column];
  if (epilogue->rowBias)
    r += epilogue->rowBias[row];
  if (epilogue->residual)
    r += epilogue->residual[row * epilogue->ldResidual + column];
  if (epilogue->clamp) { // as maxps/minps: NaN stays NaN
    r = epilogue->lo > r ? epilogue->lo : r;
    r = epilogue->hi < r ? epilogue->hi : r;
  }
  return r;
}

template <int M>
void genericKernel(int64_t k, const float *a, const float *b, int64_t ldb, float *c,
                   int64_t ldc, int64_t cols, float alpha, float beta,
                   const SgemmEpilogue *epilogue) {
  float acc[M][kGenericNR] = {};
  for (int64_t p = 0; p < k; ++p) {
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < kGenericNR; ++j)
        acc[i][j] += a[i] * b[j];
    a += kGenericMR;
    b += ldb;
  }
  for (int i = 0; i < M; ++i) {
    float *row = c + i * ldc;
    for (int64_t j = 0; j < cols; ++j)
      row[j] = applyEpilogue(alpha * acc[i][j] + (beta != 0.0f ? beta * row[j] : 0.0f),
                             epilogue, i, j);
  }
}

const SgemmKernelFamily kGenericFamily = {
    kGenericMR,
    kGenericNR,
    0,
    {genericKernel<1>, genericKernel<2>, genericKernel<3>, genericKernel<4>},
    {},
    {}};

//===--- Dispatch ---------------------------------------------------------===//

const SgemmKernelFamily &family(SgemmIsa isa) {
  switch (isa) {
  case SgemmIsa::AmxEmulated:
    return *sgemmAmxKernels(true);
  case SgemmIsa::Amx:
    return *sgemmAmxKernels(false);
  case SgemmIsa::Avx512Bf16:
    return *sgemmAvx512Bf16Kernels();
  case SgemmIsa::Avx512:
    return *sgemmAvx512Kernels();
  case SgemmIsa::Avx2:
    return *sgemmAvx2Kernels();
  case SgemmIsa::Generic:
    break;
  }
  return kGenericFamily;
}

constexpr SgemmIsa kAllIsas[] = {SgemmIsa::Generic,    SgemmIsa::Avx2, SgemmIsa::Avx512,
                                 SgemmIsa::Avx512Bf16, SgemmIsa::Amx,  SgemmIsa::AmxEmulated};

/// The widest family the CPU supports (the pair families included; never the emulated one),
/// capped by $TCC_GEMM_ISA, which may also ask for amx-emulated where it is supported.
SgemmIsa widestIsa() {
  static const SgemmIsa widest = [] {
    SgemmIsa best = SgemmIsa::Generic;
    for (SgemmIsa isa : kAllIsas)
      if (isa != SgemmIsa::AmxEmulated && sgemmIsaSupported(isa))
        best = isa;
    if (const char *forced = std::getenv("TCC_GEMM_ISA")) {
      for (SgemmIsa isa : kAllIsas)
        if (std::string(forced) == sgemmIsaName(isa) &&
            (isa <= best || (isa == SgemmIsa::AmxEmulated && sgemmIsaSupported(isa))))
          return isa;
    }
    return best;
  }();
  return widest;
}

/// Whether the family reads panels of bf16 pairs (gemm16's bf16 families).
bool pairPanels(SgemmIsa isa) { return isa >= SgemmIsa::Avx512Bf16; }
/// Whether the family is AMX's: A panels row-major, k padded to whole tiles of 16 pairs.
bool amxPanels(SgemmIsa isa) { return isa == SgemmIsa::Amx || isa == SgemmIsa::AmxEmulated; }

/// Whether Linux lets this process use the AMX tile state (asked once; it is granted per
/// process, and using the tiles without it is SIGILL).
bool amxTileStateGranted() {
#if defined(__linux__) && defined(__x86_64__)
  static const bool granted = [] {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
#else
  return false;
#endif
}

/// The k block: the A micro-panel (kc x MR: 21 KiB for AVX-512) stays in L1 while the kernel
/// walks the B block. Measured on an AMD EPYC (Zen 4) with 1024^3 and 256 x 196 x 2304:
/// kc 192 / 256 / 384 gave 104 / 107 / 109 GFLOP/s (1024^3, both operands prepacked).
constexpr int64_t kKC = 384;
static_assert(kKC % 16 == 0, "the amx family reads k in whole tiles of 16 pairs");
/// Columns of B per task: the kc x kNC block (768 KiB) stays in L2 (1 MiB on Zen 4, 2 MiB on
/// recent Xeons); 256 and 1024 columns measured within 2%.
constexpr int64_t kNC = 512;
/// Up to this many MR-row panels of A (896 rows on AVX-512), a non-transposed B is read in
/// place rather than packed: each of its panels is read at most this many times, from L2 after
/// the first. Measured on a Zen 5 with im2col plans (the copies run long): 64 against 2 made
/// ResNet-50 2-3% faster on 1 thread and 6% on 2, DeepLabV3 7% on 2, the strided and dilated
/// convolution layers 2-15%; transformers within 1.5% (their B is mostly a prepacked weight).
/// On Zen 4, with the earlier per-line im2col, reading every B in place had lost up to 25% on
/// ResNet-like convolutions with 2 threads: re-measure on a new machine.
constexpr int64_t kDirectBMaxPanels = 64;
/// B of at least this many elements (512 KiB) is split over threads even in a small product.
constexpr double kParallelBFloats = 128 * 1024;


/// Packed operands and packing buffers are host memory like any other the runtime holds: they go
/// through its caching allocator (HostMemory.h; 64-byte aligned) and show in its statistics.
float *allocPacked(size_t floats) {
  return static_cast<float *>(hostAllocate(std::max<size_t>(floats, 1) * sizeof(float)));
}

int64_t roundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

/// k in the panel elements of `isa`: pairs (amx: whole tiles of 16 pairs) or values.
int64_t panelK(SgemmIsa isa, int64_t k) {
  if (!pairPanels(isa))
    return k;
  return amxPanels(isa) ? roundUp((k + 1) / 2, 16) : (k + 1) / 2;
}

/// Four floats in an SSE register (GCC's vector extension: shuffles without intrinsics).
typedef float Float4 __attribute__((vector_size(16)));
typedef int Int4 __attribute__((vector_size(16)));

/// Lanes i, j, k, l of the 8 of a and b (GCC's and clang's builtins are spelt differently).
#if defined(__clang__)
#define TCC_SHUFFLE4(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
#define TCC_SHUFFLE4(a, b, i, j, k, l) __builtin_shuffle(a, b, Int4{i, j, k, l})
#endif

/// r[i][j] becomes r[j][i].
inline void transpose4(Float4 (&r)[4]) {
  Float4 t0 = TCC_SHUFFLE4(r[0], r[1], 0, 4, 1, 5); // a0 b0 a1 b1
  Float4 t1 = TCC_SHUFFLE4(r[0], r[1], 2, 6, 3, 7); // a2 b2 a3 b3
  Float4 t2 = TCC_SHUFFLE4(r[2], r[3], 0, 4, 1, 5); // c0 d0 c1 d1
  Float4 t3 = TCC_SHUFFLE4(r[2], r[3], 2, 6, 3, 7); // c2 d2 c3 d3
  r[0] = TCC_SHUFFLE4(t0, t2, 0, 1, 4, 5);
  r[1] = TCC_SHUFFLE4(t0, t2, 2, 3, 6, 7);
  r[2] = TCC_SHUFFLE4(t1, t3, 0, 1, 4, 5);
  r[3] = TCC_SHUFFLE4(t1, t3, 2, 3, 6, 7);
}
#undef TCC_SHUFFLE4

/// Fills packed panels [panel0, panel1) of `into` (sizes from `into`, P its panel width) from
/// the matrix element(o, p) = src[o * outerStride + p * kStride] (o: row of op(A) / column of
/// op(B)). Either stride is 1: the source is read along its rows, so that every line it
/// touches is read whole and in order (the hardware prefetchers follow that).
template <int P>
void packPanelsOf(SgemmPacked &into, const float *src, int64_t outerStride, int64_t kStride,
                  int64_t panel0, int64_t panel1) {
  for (int64_t k0 = 0; k0 < into.k; k0 += into.kc) {
    int64_t kc = std::min(into.kc, into.k - k0);
    if (outerStride == 1) {
      // Each source row (one k) holds P consecutive values of every panel: copy it across.
      for (int64_t p = 0; p < kc; ++p) {
        const float *line = src + (k0 + p) * kStride;
        for (int64_t ip = panel0; ip < panel1; ++ip) {
          float *dst = const_cast<float *>(into.at(k0, ip * P)) + p * P;
          int64_t o0 = ip * P;
          if (o0 + P <= into.outer) {
            for (int o = 0; o < P; ++o)
              dst[o] = line[o0 + o];
          } else {
            for (int o = 0; o < P; ++o)
              dst[o] = o0 + o < into.outer ? line[o0 + o] : 0.0f;
          }
        }
      }
    } else {
      // Transposing: 4 source rows x 4 values of k at a time, transposed in registers (SSE
      // shuffles, on any x86-64) and stored as 4 packed rows of 4 (the per-element copy was
      // 7% of a transformer block, whose activations are A).
      for (int64_t ip = panel0; ip < panel1; ++ip) {
        float *dst = const_cast<float *>(into.at(k0, ip * P));
        int64_t o0 = ip * P, rows = std::min<int64_t>(P, into.outer - o0);
        const float *base = src + o0 * outerStride + k0;
        int64_t p = 0;
        for (; p + 4 <= kc; p += 4) {
#pragma GCC unroll 8
          for (int g = 0; g < P; g += 4) {
            Float4 r[4];
            for (int i = 0; i < 4; ++i) {
              r[i] = Float4{};
              if (g + i < rows)
                std::memcpy(&r[i], base + (g + i) * outerStride + p, sizeof(Float4));
            }
            transpose4(r);
            constexpr int kWhole = 4;
            const int width = P - g < kWhole ? P - g : kWhole; // P = 14, 6: a last pair
            for (int q = 0; q < 4; ++q)
              std::memcpy(dst + (p + q) * P + g, &r[q], sizeof(float) * width);
          }
        }
        for (; p < kc; ++p)
          for (int o = 0; o < P; ++o)
            dst[p * P + o] = o < rows ? base[o * outerStride + p] : 0.0f;
      }
    }
  }
}

void packPanels(SgemmPacked &into, const float *src, int64_t outerStride, int64_t kStride,
                int64_t panel0, int64_t panel1) {
  switch (into.panel) {
#define TCC_PACK_CASE(P)                                                                           \
  case P:                                                                                          \
    return packPanelsOf<P>(into, src, outerStride, kStride, panel0, panel1);
    TCC_PACK_CASE(4)
    TCC_PACK_CASE(6)
    TCC_PACK_CASE(14)
    TCC_PACK_CASE(16)
    TCC_PACK_CASE(32)
#undef TCC_PACK_CASE
  }
}

size_t packedFloats(int64_t outer, int64_t k, int64_t panel) {
  return (size_t)roundUp(std::max<int64_t>(outer, 1), panel) * (size_t)k;
}

/// The layout of an operand for `isa`, over `storage` (not owned) or, when null, new memory.
SgemmPacked layout(SgemmIsa isa, bool isA, int64_t outer, int64_t k, float *storage) {
  const SgemmKernelFamily &f = family(isa);
  SgemmPacked out;
  out.isa = isa;
  out.isA = isA;
  out.outer = outer;
  out.k = k;
  out.depth = k;
  out.panel = isA ? f.mr : f.nr;
  out.kc = kKC;
  if (storage)
    out.data = {storage, [](void *) {}};
  else
    out.data = {allocPacked(packedFloats(outer, k, out.panel)), hostFree};
  return out;
}

/// Packs the matrix element(o, p) = src[o * outerStride + p * kStride] (see packPanels).
SgemmPacked packStrided(SgemmIsa isa, bool isA, int64_t outer, int64_t k, const float *src,
                        int64_t outerStride, int64_t kStride, int numThreads, float *storage) {
  SgemmPacked out = layout(isa, isA, outer, k, storage);
  int64_t panels = (outer + out.panel - 1) / out.panel;
  // Cost per panel: the bytes it reads and writes.
  parallelFor(numThreads, panels, 8 * k * out.panel, [&](int64_t begin, int64_t end) {
    packPanels(out, src, outerStride, kStride, begin, end);
  });
  return out;
}

/// Packs op(A) (m x k) or op(B) (k x n) for `isa`: `outer` is m (A) or n (B), `ld` the stored
/// matrix's row stride, `trans` whether it is stored transposed.
SgemmPacked pack(SgemmIsa isa, bool isA, bool trans, int64_t outer, int64_t k, const float *src,
                 int64_t ld, int numThreads, float *storage) {
  // A (m x k) is stored m x k, or k x m transposed; B (k x n) k x n, or n x k transposed.
  bool outerAlongRows = isA != trans;
  return packStrided(isa, isA, outer, k, src, outerAlongRows ? ld : 1, outerAlongRows ? 1 : ld,
                     numThreads, storage);
}

/// Per-thread packing buffers for operands sgemm packs itself; released above this size.
constexpr size_t kKeepScratchFloats = size_t(4) << 20;
struct Scratch {
  float *data = nullptr;
  size_t floats = 0;
  ~Scratch() { hostFree(data); }
  float *get(size_t n) {
    if (n > floats) {
      hostFree(data);
      data = nullptr;
      floats = 0;
      data = allocPacked(n);
      floats = n;
    }
    return data;
  }
  void trim() {
    if (floats > kKeepScratchFloats) {
      hostFree(data);
      data = nullptr;
      floats = 0;
    }
  }
};

} // namespace

const float *SgemmPacked::at(int64_t k0, int64_t outer0) const {
  int64_t padded = roundUp(std::max<int64_t>(outer, 1), panel);
  int64_t kcLen = std::min(kc, k - k0);
  return data.get() + k0 * padded + (outer0 / panel) * kcLen * panel;
}

const char *sgemmIsaName(SgemmIsa isa) {
  switch (isa) {
  case SgemmIsa::AmxEmulated:
    return "amx-emulated";
  case SgemmIsa::Amx:
    return "amx";
  case SgemmIsa::Avx512Bf16:
    return "avx512bf16";
  case SgemmIsa::Avx512:
    return "avx512";
  case SgemmIsa::Avx2:
    return "avx2";
  case SgemmIsa::Generic:
    break;
  }
  return "generic";
}

bool sgemmIsaSupported(SgemmIsa isa) {
  switch (isa) {
  case SgemmIsa::AmxEmulated: // its store-out is AVX-512 code compiled with AVX512-BF16
    return cpuHasFeature("avx512f") && cpuHasFeature("avx512bf16") && sgemmAmxKernels(true);
  case SgemmIsa::Amx: // the emulated family's needs, and the tiles
    return sgemmIsaSupported(SgemmIsa::AmxEmulated) && cpuHasFeature("amx-tile") &&
           cpuHasFeature("amx-bf16") && sgemmAmxKernels(false) && amxTileStateGranted();
  case SgemmIsa::Avx512Bf16:
    return cpuHasFeature("avx512f") && cpuHasFeature("avx512bf16") && sgemmAvx512Bf16Kernels();
  case SgemmIsa::Avx512: // the CPU first: nothing of those files runs on a CPU without it
    return cpuHasFeature("avx512f") && sgemmAvx512Kernels();
  case SgemmIsa::Avx2:
    return cpuHasFeature("avx2") && cpuHasFeature("fma") && sgemmAvx2Kernels();
  case SgemmIsa::Generic:
    break;
  }
  return true;
}

SgemmIsa sgemmIsa() { return std::min(widestIsa(), SgemmIsa::Avx512); }

int sgemmTileRows(SgemmIsa isa) { return family(isa).mr; }
int sgemmTileColumns(SgemmIsa isa) { return family(isa).nr; }

size_t sgemmPackedFloats(SgemmIsa isa, bool isA, int64_t outer, int64_t k) {
  const SgemmKernelFamily &f = family(isa);
  return packedFloats(outer, k, isA ? f.mr : f.nr);
}

bool sgemmPacksB(int64_t m) {
  const int64_t mr = family(sgemmIsa()).mr;
  return (m + mr - 1) / mr > kDirectBMaxPanels;
}

SgemmPacked sgemmPackedView(SgemmIsa isa, bool isA, int64_t outer, int64_t k, float *storage) {
  return layout(isa, isA, outer, k, storage);
}

int64_t SgemmPacked::offset(int64_t o, int64_t p) const {
  int64_t k0 = p / kc * kc, o0 = o / panel * panel;
  return (at(k0, o0) - data.get()) + (p - k0) * panel + (o - o0);
}

SgemmPacked packSgemmA(SgemmIsa isa, bool transA, int64_t m, int64_t k, const float *a,
                       int64_t lda, int numThreads) {
  return pack(isa, true, transA, m, k, a, lda, numThreads, nullptr);
}

SgemmPacked packSgemmB(SgemmIsa isa, bool transB, int64_t k, int64_t n, const float *b,
                       int64_t ldb, int numThreads) {
  return pack(isa, false, transB, n, k, b, ldb, numThreads, nullptr);
}

namespace {

/// What needs no microkernel: an empty C, and an empty sum (k = 0: C = act(beta * C)); drops an
/// epilogue that does nothing. Returns whether the product is done.
bool doneWithoutKernels(int64_t m, int64_t n, int64_t k, float beta, float *c, int64_t ldc,
                        const SgemmEpilogue *&epilogue) {
  if (m <= 0 || n <= 0)
    return true;
  if (epilogue && !epilogue->bias && !epilogue->rowBias && !epilogue->residual &&
      !epilogue->clamp && epilogue->activation.kind == ActivationKind::None)
    epilogue = nullptr;
  if (k != 0)
    return false;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      c[i * ldc + j] =
          applyEpilogue(beta == 0.0f ? 0.0f : beta * c[i * ldc + j], epilogue, i, j);
  if (epilogue)
    activateRows(epilogue->activation, c, m, n, ldc);
  return true;
}

/// The threads a product is worth: below ~2 MFLOP a second thread costs more than it saves,
/// unless B is large enough that reading it is the work (batch-1 layers: each thread then
/// reads its share of B).
int threadsFor(int64_t m, int64_t n, int64_t k, int numThreads) {
  double flops = 2.0 * (double)m * (double)n * (double)k;
  bool worthThreads = flops >= 2e6 || (double)k * (double)n >= kParallelBFloats;
  return worthThreads ? std::max(numThreads, 1) : 1;
}

/// Whether `p` was packed for `isa` as operand A (or B) of these sizes (depth: k in values,
/// which the pair families' panel length alone does not tell).
bool packedFor(const SgemmPacked *p, SgemmIsa isa, bool isA, int64_t outer, int64_t depth) {
  const SgemmKernelFamily &f = family(isa);
  return p && p->data && p->isa == isa && p->isA == isA && p->outer == outer &&
         p->depth == depth && p->k == panelK(isa, depth) && p->panel == (isA ? f.mr : f.nr) &&
         p->kc == kKC;
}

/// Where the microkernels read B: its packed panels or, with few rows of A and B not
/// transposed, B itself in place (row stride ldb) up to column nDirect, the partial panel
/// after it packed in `edge`.
struct BPanels {
  const SgemmPacked *packed = nullptr;
  bool streamed = false; // a caller's prepacked B (APanels::streamed says why)
  const float *direct = nullptr;
  int64_t ldb = 0, nDirect = 0;
  const SgemmPacked *edge = nullptr;

  const float *at(int64_t k0, int64_t j, int64_t nr, int64_t &stride) const {
    stride = nr;
    if (!direct)
      return packed->at(k0, j);
    if (j >= nDirect)
      return edge->at(k0, j - nDirect);
    stride = ldb;
    return direct + k0 * ldb + j;
  }
};

/// Where the microkernels read A: its packed panels, or (f32 families, A not transposed) A
/// itself in place, row stride lda.
struct APanels {
  const SgemmPacked *packed = nullptr;
  // A caller's prepacked A (constant weights, likely read from memory once a run; not one
  // marked SgemmPacked::inCache): the kernels prefetch each panel's successor (measured on
  // Zen 5: ResNet-50 -10%; on A packed per call, already in cache, the same prefetches cost
  // BERT 9%). A streamed B is prefetched the same way, by the first row panel of each task
  // (the others find it in cache).
  bool streamed = false;
  const float *direct = nullptr;
  int64_t lda = 0;
};

/// How runTiles cuts a product over threads: (columns per block, chunks of row panels), so that
/// there are at least 4 tasks a thread (they balance dynamically) where the sizes allow, with
/// the fewest bytes read: each column block reads all of A (m x k), each row chunk all of B
/// (k x n). Splitting the rows of a 64 x 1024 x 1024 product into 4 chunks had read its 4 MiB
/// of weights 4 times; 8 column blocks read them once (and A, 256 KiB, 8 times). For each count
/// of blocks the narrowest width giving it (the most even blocks); equal bytes go to fewer
/// blocks.
std::pair<int64_t, int64_t> splitForThreads(int64_t m, int64_t n, int64_t k, int64_t MR,
                                            int64_t NR, int threads) {
  const int64_t mPanels = (m + MR - 1) / MR, nPanels = (n + NR - 1) / NR;
  const int64_t wanted = std::min<int64_t>(4 * threads, mPanels * nPanels);
  std::pair<int64_t, int64_t> best{roundUp(kNC, NR), 1};
  double bestBytes = -1;
  for (int64_t nc = roundUp(kNC, NR); nc >= NR; nc -= NR) {
    const int64_t nBlocks = (n + nc - 1) / nc;
    if (nc > NR && (n + nc - NR - 1) / (nc - NR) == nBlocks)
      continue; // a narrower block of the same count: taken at its own step
    const int64_t mChunks = std::min(mPanels, (wanted + nBlocks - 1) / nBlocks);
    double bytes =
        (double)nBlocks * (double)m * (double)k + (double)mChunks * (double)k * (double)n;
    if (bestBytes < 0 || bytes < bestBytes) {
      best = {nc, mChunks};
      bestBytes = bytes;
    }
  }
  return best;
}

/// The blocked product over A and B (k in panel elements), cut into (column block, row range)
/// tasks on `threads` threads; see Sgemm.h.
void runTiles(const SgemmKernelFamily &f, int64_t m, int64_t n, int64_t k, float alpha,
              const APanels &a, const BPanels &b, float beta, float *c, int64_t ldc,
              int threads, const SgemmEpilogue *epilogue) {
  const int64_t MR = f.mr, NR = f.nr;
  const int64_t mPanels = (m + MR - 1) / MR;
  // Tasks: (column block of up to kNC columns, range of MR-row panels).
  int64_t nc = roundUp(kNC, NR), mChunks = 1;
  if (threads > 1 && mPanels < threads) { // few rows: split the columns finer, two blocks a thread
    nc = std::max(NR, std::min(nc, roundUp((n + 2 * threads - 1) / (2 * threads), NR)));
  } else if (threads > 1) {
    std::tie(nc, mChunks) = splitForThreads(m, n, k, MR, NR, threads);
  }
  const int64_t nBlocks = (n + nc - 1) / nc;
  const int64_t tasks = nBlocks * mChunks;
  auto runTask = [&](int64_t task) {
    int64_t nb = task / mChunks, mcIndex = task % mChunks;
    int64_t ip0 = mPanels * mcIndex / mChunks, ip1 = mPanels * (mcIndex + 1) / mChunks;
    int64_t j0 = nb * nc, j1 = std::min(n, j0 + nc);
    for (int64_t k0 = 0; k0 < k; k0 += kKC) {
      int64_t kc = std::min(kKC, k - k0);
      float blockBeta = k0 == 0 ? beta : 1.0f;
      bool last = k0 + kc == k;
      // The last k block stores C for good: it applies the epilogue from row i, column j.
      SgemmEpilogue tile;
      auto tileEpilogue = [&](int64_t i, int64_t j) -> const SgemmEpilogue * {
        if (!last || !epilogue)
          return nullptr;
        tile = *epilogue;
        if (tile.bias)
          tile.bias += j;
        if (tile.rowBias)
          tile.rowBias += i;
        if (tile.residual)
          tile.residual += i * tile.ldResidual + j;
        return &tile;
      };
      for (int64_t ip = ip0; ip < ip1; ++ip) {
        int64_t i0 = ip * MR, rows = std::min(MR, m - i0);
        // A's rows here: a packed panel, or (A in place) its rows from column k0.
        const float *aPanel = a.direct ? a.direct + i0 * a.lda + k0 : a.packed->at(k0, i0);
        if (rows == 1 && !b.direct && f.rowPanels[0]) { // a batch-1 row: 4 panels of B at once
          int64_t panelStride = kc * NR; // consecutive panels of one k block
          for (int64_t j = j0; j < j1; j += 4 * NR) {
            int64_t cols = std::min(4 * NR, j1 - j), panels = (cols + NR - 1) / NR;
            f.rowPanels[panels - 1](kc, aPanel, a.direct ? 1 : MR, b.packed->at(k0, j),
                                    panelStride, c + i0 * ldc + j, cols, alpha, blockBeta,
                                    tileEpilogue(i0, j));
          }
          if (last && epilogue)
            activateRows(epilogue->activation, c + i0 * ldc + j0, 1, j1 - j0, ldc);
          continue;
        }
        for (int64_t j = j0; j < j1; j += NR) {
          int64_t stride, cols = std::min(NR, j1 - j);
          const float *bp = b.at(k0, j, NR, stride);
          const bool narrow = cols <= f.narrowCols;
          // A streamed A's next panel is prefetched by the panel's first tile; a streamed B's
          // next panel by the task's first row panel.
          const bool streamA = a.streamed && j == j0 && f.streamingA[0];
          const bool streamB = b.streamed && ip == ip0 && f.streamingB[0];
          if (a.direct)
            (narrow ? f.inPlaceANarrow : f.inPlaceA)[rows - 1](
                kc, aPanel, a.lda, bp, stride, c + i0 * ldc + j, ldc, cols, alpha, blockBeta,
                tileEpilogue(i0, j));
          else
            (streamA   ? (narrow ? f.streamingANarrow : f.streamingA)
             : streamB ? (narrow ? f.streamingBNarrow : f.streamingB)
             : narrow  ? f.narrow
                       : f.byRows)[rows - 1](kc, aPanel, bp, stride, c + i0 * ldc + j, ldc,
                                             cols, alpha, blockBeta, tileEpilogue(i0, j));
        }
        if (last && epilogue) // the activation on this row panel's block, while it is in cache
          activateRows(epilogue->activation, c + i0 * ldc + j0, rows, j1 - j0, ldc);
      }
    }
  };
  if (threads == 1 || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t)
      runTask(t);
  } else {
    parallelItems(threads, tasks, [&](int64_t, int64_t task) { runTask(task); });
  }
}

thread_local Scratch scratchA, scratchB;

} // namespace

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
           int64_t ldc, int numThreads, const SgemmPacked *packedA, const SgemmPacked *packedB,
           const SgemmEpilogue *epilogue) {
  if (doneWithoutKernels(m, n, k, beta, c, ldc, epilogue))
    return;
  const SgemmIsa isa = sgemmIsa();
  const SgemmKernelFamily &f = family(isa);
  const int64_t MR = f.mr, NR = f.nr;
  const int threads = threadsFor(m, n, k, numThreads);
  SgemmPacked ownA, ownB;
  // With one or two panels of columns, each A micro-panel would be read once or twice: packing
  // A costs more than it saves (a fifth of a 3136 x 24 x 144 product), so the kernels read a
  // non-transposed A in place. So do they a single row (a batch-1 layer), whose packed panel
  // would be MR rows, all but one zeros.
  APanels aPanels;
  if (packedFor(packedA, isa, true, m, k)) {
    aPanels.packed = packedA;
    aPanels.streamed = !packedA->inCache;
  } else if (!transA && (n <= 2 * NR || m == 1) && f.inPlaceA[0]) {
    aPanels.direct = a;
    aPanels.lda = lda;
  } else {
    ownA = pack(isa, true, transA, m, k, a, lda, threads, scratchA.get(packedFloats(m, k, MR)));
    aPanels.packed = &ownA;
  }
  // With up to kDirectBMaxPanels row panels of A, a non-transposed B is read in place (only
  // its last, partial panel is packed: the kernel reads NR columns): a packing pass would cost
  // more than it saves.
  const bool bPacked = packedFor(packedB, isa, false, n, k);
  const bool directB = !bPacked && !transB && !sgemmPacksB(m);
  BPanels panels;
  if (directB) {
    panels.direct = b;
    panels.ldb = ldb;
    panels.nDirect = n / NR * NR;
    if (n > panels.nDirect)
      ownB = pack(isa, false, false, n - panels.nDirect, k, b + panels.nDirect, ldb, 1,
                  scratchB.get(packedFloats(n - panels.nDirect, k, NR)));
    panels.edge = &ownB;
  } else {
    if (!bPacked) {
      ownB = pack(isa, false, transB, n, k, b, ldb, threads,
                  scratchB.get(packedFloats(n, k, NR)));
      packedB = &ownB;
    }
    panels.packed = packedB;
    panels.streamed = bPacked && !packedB->inCache;
  }
  runTiles(f, m, n, k, alpha, aPanels, panels, beta, c, ldc, threads, epilogue);
  scratchA.trim();
  scratchB.trim();
}

//===--- 16-bit operands --------------------------------------------------===//

namespace {

/// Packs panels [panel0, panel1) of `into` from the 16-bit matrix element(o, p) =
/// src[o * outerStride + p * kStride] of k columns: as pairs (p = 2u, 2u + 1 in one 32-bit
/// element u, the first in its low half; past k: zero) for the bf16 pair families, otherwise
/// converted to f32. A panels of the amx family are row-major (element (o, u) of a k block at
/// o * kc + u: a tile row is 16 pairs of one row); every other panel is k-major (u * P + o).
template <int P>
void packPanels16Of(SgemmPacked &into, Half16 type, const uint16_t *src, int64_t outerStride,
                    int64_t kStride, int64_t k, int64_t panel0, int64_t panel1) {
  const bool pairs = pairPanels(into.isa);
  const bool rowMajor = into.isA && amxPanels(into.isa);
  auto value = [&](int64_t o, int64_t u) -> float {
    if (o >= into.outer || (pairs && 2 * u >= k))
      return 0.0f;
    const uint16_t *e = src + o * outerStride;
    if (!pairs) {
      uint16_t bits = e[u * kStride];
      return type == Half16::BF16 ? bfloat16ToFloat(bits) : halfToFloat(bits);
    }
    uint32_t lo = e[2 * u * kStride], hi = 2 * u + 1 < k ? e[(2 * u + 1) * kStride] : 0;
    uint32_t both = lo | hi << 16;
    float f;
    std::memcpy(&f, &both, sizeof f);
    return f;
  };
  for (int64_t k0 = 0; k0 < into.k; k0 += into.kc) {
    int64_t kc = std::min(into.kc, into.k - k0);
    for (int64_t ip = panel0; ip < panel1; ++ip) {
      float *dst = const_cast<float *>(into.at(k0, ip * P));
      int64_t o0 = ip * P;
      if (rowMajor) {
        for (int o = 0; o < P; ++o) {
          float *row = dst + o * kc;
          if (kStride == 1 && o0 + o < into.outer && 2 * (k0 + kc) <= k) // whole pairs
            std::memcpy(row, src + (o0 + o) * outerStride + 2 * k0, sizeof(float) * kc);
          else
            for (int64_t u = 0; u < kc; ++u)
              row[u] = value(o0 + o, k0 + u);
        }
        continue;
      }
      if (pairs && kStride == 1 && o0 + P <= into.outer && 2 * (k0 + kc) <= k) {
        // Whole pairs, adjacent in memory: 8 of them from each of the P rows, then stored
        // as 8 packed rows.
        int64_t u = 0;
        for (; u + 8 <= kc; u += 8) {
          uint32_t tile[8][P];
          for (int o = 0; o < P; ++o) {
            uint32_t row[8];
            std::memcpy(row, src + (o0 + o) * outerStride + 2 * (k0 + u), sizeof row);
            for (int q = 0; q < 8; ++q)
              tile[q][o] = row[q];
          }
          std::memcpy(dst + u * P, tile, sizeof tile);
        }
        for (; u < kc; ++u)
          for (int o = 0; o < P; ++o)
            std::memcpy(dst + u * P + o, src + (o0 + o) * outerStride + 2 * (k0 + u), 4);
        continue;
      }
      if (pairs && outerStride == 1 && o0 + P <= into.outer) {
        // Pairs from two source rows (k = 2u and 2u + 1) interleaved, P columns at a time.
        for (int64_t u = 0; u < kc; ++u) {
          int64_t p0 = 2 * (k0 + u);
          if (p0 >= k) { // padding (amx): zero pairs
            std::memset(dst + u * P, 0, sizeof(float) * P);
            continue;
          }
          const uint16_t *lo = src + p0 * kStride + o0;
          const uint16_t *hi = p0 + 1 < k ? lo + kStride : nullptr;
          uint32_t units[P];
          for (int o = 0; o < P; ++o)
            units[o] = (uint32_t)lo[o] | (hi ? (uint32_t)hi[o] << 16 : 0u);
          std::memcpy(dst + u * P, units, sizeof units);
        }
        continue;
      }
      if (!pairs && o0 + P <= into.outer) { // a whole panel converted, branch-free loops
        auto convert = [&](uint16_t bits) {
          return type == Half16::BF16 ? bfloat16ToFloat(bits) : halfToFloat(bits);
        };
        if (outerStride == 1) {
          for (int64_t u = 0; u < kc; ++u) {
            const uint16_t *line = src + (k0 + u) * kStride + o0;
            for (int o = 0; o < P; ++o)
              dst[u * P + o] = convert(line[o]);
          }
        } else {
          for (int o = 0; o < P; ++o) {
            const uint16_t *row = src + (o0 + o) * outerStride + k0 * kStride;
            for (int64_t u = 0; u < kc; ++u)
              dst[u * P + o] = convert(row[u * kStride]);
          }
        }
        continue;
      }
      if (outerStride == 1) { // along each source row (one k) first
        for (int64_t u = 0; u < kc; ++u)
          for (int o = 0; o < P; ++o)
            dst[u * P + o] = value(o0 + o, k0 + u);
      } else { // along each source row (one row of op(A) / column of op(B)) first
        for (int o = 0; o < P; ++o)
          for (int64_t u = 0; u < kc; ++u)
            dst[u * P + o] = value(o0 + o, k0 + u);
      }
    }
  }
}

SgemmPacked pack16(Half16 type, SgemmIsa isa, bool isA, bool trans, int64_t outer, int64_t k,
                   const uint16_t *src, int64_t ld, int numThreads, Scratch *scratch) {
  int64_t units = panelK(isa, k);
  const SgemmKernelFamily &f = family(isa);
  int64_t panel = isA ? f.mr : f.nr;
  SgemmPacked out = layout(isa, isA, outer, units,
                           scratch ? scratch->get(packedFloats(outer, units, panel)) : nullptr);
  out.depth = k;
  bool outerAlongRows = isA != trans;
  int64_t outerStride = outerAlongRows ? ld : 1, kStride = outerAlongRows ? 1 : ld;
  int64_t panels = (outer + panel - 1) / panel;
  parallelFor(numThreads, panels, 8 * units * panel, [&](int64_t begin, int64_t end) {
    switch (panel) {
#define TCC_PACK16_CASE(P)                                                                         \
  case P:                                                                                          \
    return packPanels16Of<P>(out, type, src, outerStride, kStride, k, begin, end);
      TCC_PACK16_CASE(4)
      TCC_PACK16_CASE(6)
      TCC_PACK16_CASE(14)
      TCC_PACK16_CASE(16)
      TCC_PACK16_CASE(32)
#undef TCC_PACK16_CASE
    }
  });
  return out;
}

} // namespace

SgemmIsa gemm16Isa(Half16 type) {
  return type == Half16::BF16 && pairPanels(widestIsa()) ? widestIsa() : sgemmIsa();
}

SgemmPacked packGemm16A(Half16 type, bool transA, int64_t m, int64_t k, const uint16_t *a,
                        int64_t lda, int numThreads) {
  return pack16(type, gemm16Isa(type), true, transA, m, k, a, lda, numThreads, nullptr);
}

SgemmPacked packGemm16B(Half16 type, bool transB, int64_t k, int64_t n, const uint16_t *b,
                        int64_t ldb, int numThreads) {
  return pack16(type, gemm16Isa(type), false, transB, n, k, b, ldb, numThreads, nullptr);
}

void gemm16(Half16 type, bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
            const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, float beta, float *c,
            int64_t ldc, int numThreads, const SgemmPacked *packedA, const SgemmPacked *packedB,
            const SgemmEpilogue *epilogue) {
  if (doneWithoutKernels(m, n, k, beta, c, ldc, epilogue))
    return;
  const SgemmIsa isa = gemm16Isa(type);
  const int64_t units = panelK(isa, k);
  const int threads = threadsFor(m, n, k, numThreads);
  SgemmPacked ownA, ownB;
  if (!packedFor(packedA, isa, true, m, k)) {
    ownA = pack16(type, isa, true, transA, m, k, a, lda, threads, &scratchA);
    packedA = &ownA;
  }
  if (!packedFor(packedB, isa, false, n, k)) {
    ownB = pack16(type, isa, false, transB, n, k, b, ldb, threads, &scratchB);
    packedB = &ownB;
  }
  BPanels panels;
  panels.packed = packedB;
  panels.streamed = packedB != &ownB && !packedB->inCache;
  APanels aPanels;
  aPanels.packed = packedA;
  aPanels.streamed = packedA != &ownA && !packedA->inCache;
  runTiles(family(isa), m, n, units, alpha, aPanels, panels, beta, c, ldc, threads, epilogue);
  scratchA.trim();
  scratchB.trim();
}

} // namespace tcc::rt
