//===- CpuLibrary.cpp - gemm, conv (im2col + sgemm) and topk on the CPU ---===//
//
// f32 products run on Sgemm.h, f16/bf16 GEMMs on its gemm16; f64 GEMMs on OpenBLAS (cblas_dgemm).
#include "CpuLibrary.h"
#include "ChannelsLast.h"
#include "DType.h"
#include "Depthwise.h"
#include "IsaClones.h"
#include "Parallel.h"
#include "Program.h"
#include "TransposedConv.h"
#include "Winograd.h"
#include "tcc/Support/TopKOrder.h"

#include <cblas.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <tuple>
#include <type_traits>

namespace tcc::rt {
namespace {

std::string shapeString(const Shape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// Product of s[begin, end); shapes were checked on load, so their element counts fit.
/// The product of s[begin, end); an Error when it overflows int64 (a shape with a zero dim has
/// no elements, so its buffer checks pass whatever its other dims: the artifact fuzzer's).
int64_t product(const Shape &s, size_t begin = 0, size_t end = SIZE_MAX) {
  end = std::min(end, s.size());
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i)
    if (__builtin_mul_overflow(p, s[i], &p))
      throw Error("the dims of shape" + shapeString(s) + " overflow a 64-bit product");
  return p;
}

void checkBlasDim(const char *op, const char *what, int64_t v) {
  if (v < 0 || v > INT_MAX)
    throw Error(std::string(op) + ": " + what + " = " + std::to_string(v) +
                " does not fit the BLAS's 32-bit integers");
}

/// Largest output-column tile of the im2col workspace: about this many bytes.
constexpr int64_t kWorkspaceBudget = 4 << 20;

} // namespace

namespace {
/// Sets OpenBLAS's thread count (process-wide) if it differs from the last one set.
void setBlasThreads(int numThreads) {
  static std::atomic<int> current{-1};
  if (numThreads < 1)
    numThreads = 1;
  if (current.exchange(numThreads) != numThreads)
    openblas_set_num_threads(numThreads);
}

} // namespace

bool resetIfStale(PackedOperand &cache, const void *source, bool isConstant, SgemmIsa isa) {
  if (isConstant && cache.source == source &&
      (cache.matrices.empty() || cache.matrices[0].isa == isa))
    return false;
  cache.matrices.clear();
  cache.source = isConstant ? source : nullptr;
  return true;
}

namespace {

/// The packed form of matrix `index` (of `count`) of a constant operand, made on first use
/// for the kernel family `isa`; null when the operand is not constant (sgemm packs it on every
/// call).
template <class Make>
const SgemmPacked *packedMatrix(PackedOperand *cache, bool isConstant, const void *source,
                                size_t count, size_t index, SgemmIsa isa, const Make &make) {
  if (!cache || !isConstant)
    return nullptr;
  if (resetIfStale(*cache, source, isConstant, isa) || cache->matrices.size() != count) {
    cache->matrices.clear();
    cache->matrices.resize(count);
  }
  SgemmPacked &p = cache->matrices[index];
  if (!p.data)
    p = make();
  return &p;
}
} // namespace

//===--- GEMM -------------------------------------------------------------===//

GemmGeometry makeGemmGeometry(tccrt_dtype dtype, const Shape &a, const Shape &b, const Shape &c,
                              bool transA, bool transB, double alpha, double beta) {
  const char *op = "gemm";
  GemmGeometry g;
  if (dtype != TCCRT_F16 && dtype != TCCRT_BF16 && dtype != TCCRT_F32 && dtype != TCCRT_F64)
    throw Error(std::string(op) + ": element type must be f16, bf16, f32 or f64, got " +
                dtypeName(dtype));
  size_t r = c.size();
  if (r < 2 || a.size() != r || b.size() != r)
    throw Error(std::string(op) + ": operands must have the same rank, at least 2; got a" +
                shapeString(a) + ", b" + shapeString(b) + ", c" + shapeString(c));
  g.dtype = dtype;
  g.transA = transA;
  g.transB = transB;
  g.alpha = alpha;
  g.beta = beta;
  g.m = a[r - (transA ? 1 : 2)];
  g.k = a[r - (transA ? 2 : 1)];
  int64_t kb = b[r - (transB ? 1 : 2)];
  g.n = b[r - (transB ? 2 : 1)];
  if (kb != g.k || c[r - 2] != g.m || c[r - 1] != g.n)
    throw Error(std::string(op) + ": matrix shapes do not agree: a" + shapeString(a) +
                (transA ? "^T" : "") + " x b" + shapeString(b) + (transB ? "^T" : "") +
                " -> c" + shapeString(c));
  checkBlasDim(op, "M", g.m);
  checkBlasDim(op, "N", g.n);
  checkBlasDim(op, "K", g.k);
  g.batch.assign(c.begin(), c.end() - 2);
  g.aBatchStrides.assign(r - 2, 0);
  g.bBatchStrides.assign(r - 2, 0);
  int64_t aStride = 1, bStride = 1;
  for (size_t i = r - 2; i-- > 0;) {
    if ((a[i] != c[i] && a[i] != 1) || (b[i] != c[i] && b[i] != 1))
      throw Error(std::string(op) + ": batch dim " + std::to_string(i) + " of a" +
                  shapeString(a) + " or b" + shapeString(b) + " does not broadcast to c" +
                  shapeString(c));
    g.aBatchStrides[i] = a[i] == 1 ? 0 : aStride;
    g.bBatchStrides[i] = b[i] == 1 ? 0 : bStride;
    if (__builtin_mul_overflow(aStride, a[i], &aStride) ||
        __builtin_mul_overflow(bStride, b[i], &bStride))
      throw Error(std::string(op) + ": the batch dims of a" + shapeString(a) + " or b" +
                  shapeString(b) + " overflow a 64-bit product");
  }
  g.numBatches = product(g.batch);
  return g;
}

namespace {

/// to[i] = convert(from[i]) for i < n, on up to numThreads threads (convertRange's loop).
template <class From, class To, class Convert>
void convertElements(const From *from, To *to, int64_t n, int numThreads, Convert convert) {
  parallelFor(numThreads, n, (int64_t)(sizeof(From) + sizeof(To)), [&](int64_t begin, int64_t end) {
    convertRange(from + begin, to + begin, end - begin, convert);
  });
}

/// The next batch index (odometer), updating a's and b's matrix offsets.
void nextBatch(const GemmGeometry &g, std::vector<int64_t> &index, int64_t &aOffset,
               int64_t &bOffset) {
  for (size_t d = g.batch.size(); d-- > 0;) {
    ++index[d];
    aOffset += g.aBatchStrides[d];
    bOffset += g.bBatchStrides[d];
    if (index[d] < g.batch[d])
      break;
    aOffset -= g.aBatchStrides[d] * index[d];
    bOffset -= g.bBatchStrides[d] * index[d];
    index[d] = 0;
  }
}

/// Batched products at most this large (multiply-adds) run one batch per thread when there
/// are batches for every thread: each alone is too small to split across threads (a fork and
/// join per product), and the stacked directions of a recurrence ([2, 1, H]·[2, H, 4H] per
/// step) then run side by side, each thread's weights in its own core's cache.
constexpr double kBatchPerThreadMaxProduct = 1 << 22;

bool batchPerThread(const GemmGeometry &g, int numThreads) {
  return numThreads > 1 && g.numBatches >= numThreads && g.numBatches <= 4096 && g.k > 0 &&
         (double)g.m * (double)g.n * (double)g.k <= kBatchPerThreadMaxProduct;
}

template <class T>
void gemmTyped(const GemmGeometry &g, const T *a, const T *b, T *c, int numThreads,
               PackedOperand *packedA, bool aIsConstant, PackedOperand *packedB,
               bool bIsConstant, const SgemmEpilogue *epilogue) {
  int m = (int)g.m, n = (int)g.n, k = (int)g.k;
  int64_t aMatrix = g.m * g.k, bMatrix = g.k * g.n, cMatrix = g.m * g.n;
  size_t rank = g.batch.size();
  std::vector<int64_t> index(rank, 0);
  int64_t aOffset = 0, bOffset = 0;
  // Distinct matrices of a and b: their offsets run over [0, aCount) and [0, bCount).
  size_t aCount = 1, bCount = 1;
  for (size_t d = 0; d < rank; ++d) {
    aCount *= g.aBatchStrides[d] ? (size_t)g.batch[d] : 1;
    bCount *= g.bBatchStrides[d] ? (size_t)g.batch[d] : 1;
  }
  // f32: the packed form of a's (b's) matrix at `offset` when it is constant, else null.
  auto packedF32A = [&](int64_t offset, int lda) {
    return packedMatrix(packedA, aIsConstant, a, aCount, (size_t)offset, sgemmIsa(), [&] {
      return packSgemmA(sgemmIsa(), g.transA, m, k, (const float *)a + offset * aMatrix, lda,
                        numThreads);
    });
  };
  auto packedF32B = [&](int64_t offset, int ldb) {
    return packedMatrix(packedB, bIsConstant, b, bCount, (size_t)offset, sgemmIsa(), [&] {
      return packSgemmB(sgemmIsa(), g.transB, k, n, (const float *)b + offset * bMatrix, ldb,
                        numThreads);
    });
  };
  if constexpr (std::is_same_v<T, float>) {
    if (batchPerThread(g, numThreads)) {
      // Each batch's operands (packed once when constant, before the threads start), then
      // one batch per thread.
      std::vector<const SgemmPacked *> pas(g.numBatches), pbs(g.numBatches);
      std::vector<int64_t> aOffsets(g.numBatches), bOffsets(g.numBatches);
      const int lda = g.transA ? m : k, ldb = g.transB ? k : n;
      for (int64_t batch = 0; batch < g.numBatches; ++batch) {
        aOffsets[batch] = aOffset;
        bOffsets[batch] = bOffset;
        pas[batch] = packedF32A(aOffset, lda);
        pbs[batch] = packedF32B(bOffset, ldb);
        nextBatch(g, index, aOffset, bOffset);
      }
      parallelFor(numThreads, g.numBatches, g.m * g.n * g.k, [&](int64_t begin, int64_t end) {
        for (int64_t batch = begin; batch < end; ++batch)
          sgemm(g.transA, g.transB, m, n, k, (float)g.alpha, a + aOffsets[batch] * aMatrix, lda,
                b + bOffsets[batch] * bMatrix, ldb, (float)g.beta, c + batch * cMatrix, n, 1,
                pas[batch], pbs[batch], epilogue);
      });
      return;
    }
  }
  for (int64_t batch = 0; batch < g.numBatches; ++batch) {
    const T *aBase = a + aOffset * aMatrix;
    const T *bBase = b + bOffset * bMatrix;
    T *cBase = c + batch * cMatrix;
    if (m > 0 && n > 0) {
      // An empty sum: c = beta * c (f16/bf16: gemm16 below does it in f32).
      if (k == 0 && !epilogue && !std::is_same_v<T, uint16_t>) {
        for (int64_t i = 0; i < cMatrix; ++i)
          cBase[i] = g.beta == 0.0 ? T(0) : T(g.beta * cBase[i]);
      } else {
        int lda = g.transA ? m : k, ldb = g.transB ? k : n;
        if constexpr (std::is_same_v<T, float>) {
          const SgemmPacked *pa = packedF32A(aOffset, lda);
          const SgemmPacked *pb = packedF32B(bOffset, ldb);
          sgemm(g.transA, g.transB, m, n, k, (float)g.alpha, aBase, lda, bBase, ldb,
                (float)g.beta, cBase, n, numThreads, pa, pb, epilogue);
        } else if constexpr (std::is_same_v<T, uint16_t>) {
          // f16/bf16: summed in f32 into a float copy of C, rounded once into C.
          const Half16 type = g.dtype == TCCRT_BF16 ? Half16::BF16 : Half16::F16;
          const SgemmIsa isa = gemm16Isa(type);
          const SgemmPacked *pa =
              packedMatrix(packedA, aIsConstant, a, aCount, (size_t)aOffset, isa, [&] {
                return packGemm16A(type, g.transA, m, k, aBase, lda, numThreads);
              });
          const SgemmPacked *pb =
              packedMatrix(packedB, bIsConstant, b, bCount, (size_t)bOffset, isa, [&] {
                return packGemm16B(type, g.transB, k, n, bBase, ldb, numThreads);
              });
          thread_local std::vector<float> wide;
          wide.resize((size_t)cMatrix);
          const bool bf16 = type == Half16::BF16;
          if (g.beta != 0.0)
            convertElements(cBase, wide.data(), cMatrix, numThreads, [bf16](uint16_t x) {
              return bf16 ? bfloat16ToFloat(x) : halfToFloat(x);
            });
          gemm16(type, g.transA, g.transB, m, n, k, (float)g.alpha, aBase, lda, bBase, ldb,
                 (float)g.beta, wide.data(), n, numThreads, pa, pb, epilogue);
          if (bf16)
            convertElements(wide.data(), cBase, cMatrix, numThreads,
                            [](float x) { return floatToBfloat16(x); });
          else
            convertElements(wide.data(), cBase, cMatrix, numThreads,
                            [](float x) { return floatToHalf(x); });
        } else {
          auto ta = g.transA ? CblasTrans : CblasNoTrans;
          auto tb = g.transB ? CblasTrans : CblasNoTrans;
          cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, g.alpha, aBase, lda, bBase, ldb, g.beta,
                      cBase, n);
        }
      }
    }
    nextBatch(g, index, aOffset, bOffset);
  }
}

} // namespace

void runGemm(const GemmGeometry &g, const void *a, const void *b, void *c, int numThreads,
             PackedOperand *packedA, bool aIsConstant, PackedOperand *packedB,
             bool bIsConstant, const SgemmEpilogue *epilogue) {
  // Empty matrices: nothing to compute, however many batches (the artifact fuzzer found a
  // program of 0x0 matrices in 6e12 batches, whose loop ran for hours).
  if (g.m == 0 || g.n == 0)
    return;
  if (g.dtype != TCCRT_F32 && epilogue &&
      (epilogue->bias || epilogue->rowBias || epilogue->residual || epilogue->clamp))
    throw Error("gemm: epilogues are for f32 GEMMs on the CPU, got " +
                std::string(dtypeName(g.dtype)));
  if (g.dtype == TCCRT_F32) {
    gemmTyped(g, static_cast<const float *>(a), static_cast<const float *>(b),
              static_cast<float *>(c), numThreads, packedA, aIsConstant, packedB, bIsConstant,
              epilogue);
  } else if (g.dtype == TCCRT_F16 || g.dtype == TCCRT_BF16) {
    gemmTyped(g, static_cast<const uint16_t *>(a), static_cast<const uint16_t *>(b),
              static_cast<uint16_t *>(c), numThreads, packedA, aIsConstant, packedB, bIsConstant,
              nullptr);
  } else {
    setBlasThreads(numThreads);
    gemmTyped(g, static_cast<const double *>(a), static_cast<const double *>(b),
              static_cast<double *>(c), numThreads, nullptr, false, nullptr, false, nullptr);
  }
}

//===--- Convolution ------------------------------------------------------===//

ConvGeometry makeConvGeometry(const Shape &input, const Shape &weight, const Shape &output,
                              const Shape &strides, const Shape &padLow, const Shape &padHigh,
                              const Shape &dilations, int64_t groups,
                              const Shape &lhsDilation, tccrt_dtype dtype) {
  if (dtype != TCCRT_F32 && dtype != TCCRT_F16 && dtype != TCCRT_BF16)
    throw Error(std::string("conv: element type must be f32, f16 or bf16, got ") +
                dtypeName(dtype));
  const char *op = "conv";
  size_t r = input.size();
  if (r < 3 || weight.size() != r || output.size() != r)
    throw Error(std::string(op) + ": input, weight and output must have the same rank, at least "
                "3; got input" + shapeString(input) + ", weight" + shapeString(weight) +
                ", output" + shapeString(output));
  size_t spatial = r - 2;
  if (strides.size() != spatial || padLow.size() != spatial || padHigh.size() != spatial ||
      dilations.size() != spatial)
    throw Error(std::string(op) + ": strides, pad_low, pad_high and dilations need one entry per "
                "spatial dim (" + std::to_string(spatial) + "); got " +
                std::to_string(strides.size()) + ", " + std::to_string(padLow.size()) + ", " +
                std::to_string(padHigh.size()) + ", " + std::to_string(dilations.size()));
  if (!lhsDilation.empty() && lhsDilation.size() != spatial)
    throw Error(std::string(op) + ": lhs_dilation needs one entry per spatial dim (" +
                std::to_string(spatial) + ") or none; got " + std::to_string(lhsDilation.size()));
  ConvGeometry g;
  g.lhsDilations = lhsDilation.empty() ? Shape(spatial, 1) : lhsDilation;
  g.batch = input[0];
  g.inChannels = input[1];
  g.outChannels = weight[0];
  g.groups = groups;
  // (Divisions, not weight[1] * groups: a damaged artifact's counts may overflow a product.)
  if (groups < 1 || g.inChannels % groups != 0 || g.inChannels / groups != weight[1] ||
      g.outChannels % groups != 0 || output[1] != g.outChannels || output[0] != g.batch)
    throw Error(std::string(op) + ": channel counts do not agree with groups = " +
                std::to_string(groups) + ": input" + shapeString(input) + ", weight" +
                shapeString(weight) + ", output" + shapeString(output));
  constexpr int64_t kLimit = int64_t(1) << 40;
  for (size_t d = 0; d < spatial; ++d) {
    int64_t in = input[d + 2], k = weight[d + 2], s = strides[d], dil = dilations[d];
    int64_t lo = padLow[d], hi = padHigh[d], ld = g.lhsDilations[d];
    if (ld < 1 || ld > kLimit)
      throw Error(std::string(op) + ": lhs_dilation must be in [1, 2^40], got " +
                  std::to_string(ld) + " in spatial dim " + std::to_string(d));
    g.transposed = g.transposed || ld > 1;
    if (k < 1)
      throw Error(std::string(op) + ": kernel dims must be >= 1, got weight" +
                  shapeString(weight));
    if (s < 1 || dil < 1 || s > kLimit || dil > kLimit)
      throw Error(std::string(op) + ": strides and dilations must be in [1, 2^40], got stride " +
                  std::to_string(s) + ", dilation " + std::to_string(dil) + " in spatial dim " +
                  std::to_string(d));
    if (lo < -kLimit || lo > kLimit || hi < -kLimit || hi > kLimit)
      throw Error(std::string(op) + ": pads must be in [-2^40, 2^40], got " +
                  std::to_string(lo) + ", " + std::to_string(hi));
    __int128 dilatedIn = in == 0 ? 0 : (__int128)(in - 1) * ld + 1;
    __int128 padded = dilatedIn + lo + hi, span = (__int128)(k - 1) * dil + 1;
    int64_t expected = padded < span ? 0 : (int64_t)((padded - span) / s + 1);
    if (output[d + 2] != expected)
      throw Error(std::string(op) + ": output spatial dim " + std::to_string(d) + " is " +
                  std::to_string(output[d + 2]) + ", the convolution of input" +
                  shapeString(input) + " with weight" + shapeString(weight) + " gives " +
                  std::to_string(expected));
  }
  g.inSpatial.assign(input.begin() + 2, input.end());
  g.kernel.assign(weight.begin() + 2, weight.end());
  g.outSpatial.assign(output.begin() + 2, output.end());
  g.strides = strides;
  g.padLow = padLow;
  g.padHigh = padHigh;
  g.dilations = dilations;
  g.inSize = product(g.inSpatial);
  g.kernelSize = product(g.kernel);
  g.outSize = product(g.outSpatial);
  g.groupIn = g.inChannels / groups;
  g.groupOut = g.outChannels / groups;
  g.rows = g.groupIn * g.kernelSize;
  g.pointwise = !g.transposed;
  for (size_t d = 0; d < spatial; ++d)
    g.pointwise = g.pointwise && g.kernel[d] == 1 && g.strides[d] == 1 && g.padLow[d] == 0 &&
                  g.padHigh[d] == 0;
  checkBlasDim(op, "output channels per group", g.groupOut);
  checkBlasDim(op, "input channels per group x kernel size", g.rows);
  checkBlasDim(op, "output size", g.outSize);
  if (g.pointwise || g.outSize == 0 || g.rows == 0) {
    g.columnTile = g.outSize;
    g.workspaceBytes = 0;
  } else {
    int64_t tile = kWorkspaceBudget / (g.rows * (int64_t)sizeof(float));
    tile = std::max<int64_t>(tile, 64);
    if (tile >= g.outSize)
      tile = g.outSize;
    else
      tile = std::max<int64_t>(64, tile / 64 * 64);
    g.columnTile = std::min(tile, g.outSize);
    // f32 tiles are written in the sgemm's packed-B layout (whole panels of columns).
    g.workspaceBytes = std::max((size_t)g.rows * (size_t)g.columnTile,
                                sgemmPackedFloats(sgemmIsa(), false, g.columnTile, g.rows)) *
                       sizeof(float);
  }
  g.dtype = dtype;
  if (g.transposed) {
    g.workspaceBytes = (planTransposedConv(g) + 63) / 64 * 64; // col2im replaces im2col
    return g;
  }
  if (dtype != TCCRT_F32)
    return g; // runConv16: no Winograd
  if (size_t winograd = planWinograd(g))
    g.workspaceBytes = (winograd + 63) / 64 * 64; // the Winograd path replaces im2col
  return g;
}

bool sameWeightPacking(const ConvGeometry &a, const ConvGeometry &b) {
  // Every field but batch (a field added to ConvGeometry belongs here too).
  auto fields = [](const ConvGeometry &g) {
    return std::tie(g.inChannels, g.outChannels, g.groups, g.inSpatial, g.kernel, g.outSpatial,
                    g.strides, g.padLow, g.padHigh, g.dilations, g.lhsDilations, g.transposed,
                    g.transposedTile, g.inSize, g.kernelSize, g.outSize, g.groupIn, g.groupOut,
                    g.rows, g.pointwise, g.columnTile, g.winogradTile, g.winogradBlock,
                    g.workspaceBytes, g.dtype, g.channelsLast);
  };
  return fields(a) == fields(b);
}

namespace {

/// dst[i] = index[i] >= 0 ? src[index[i]] : 0 for i < n: one im2col row (or panel) read from an
/// input channel's plane, -1 marking padding. AVX-512 and AVX2 gather 16 or 8 lanes an
/// instruction, masked, so padding never loads.
template <class T, class Index>
void gatherScalar(T *__restrict dst, const T *__restrict src, const Index *__restrict index,
                  int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = index[i] >= 0 ? src[index[i]] : T(0);
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void gatherAvx512(float *dst, const float *src,
                                                     const int32_t *index, int64_t n) {
  const __m512i none = _mm512_set1_epi32(-1);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i at = _mm512_loadu_si512(index + i);
    __mmask16 valid = _mm512_cmpgt_epi32_mask(at, none);
    _mm512_storeu_ps(dst + i, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, at, src, 4));
  }
  if (i < n) {
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    __m512i at = _mm512_mask_loadu_epi32(none, tail, index + i);
    __mmask16 valid = _mm512_cmpgt_epi32_mask(at, none);
    _mm512_mask_storeu_ps(dst + i, tail,
                          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, at, src, 4));
  }
}

__attribute__((target("avx2"))) void gatherAvx2(float *dst, const float *src, const int32_t *index,
                                                int64_t n) {
  const __m256i none = _mm256_set1_epi32(-1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i at = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(index + i));
    __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(at, none));
    _mm256_storeu_ps(dst + i, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), src, at, valid, 4));
  }
  gatherScalar(dst + i, src, index + i, n - i);
}
#endif

template <class T, class Index>
void gather(T *dst, const T *src, const Index *index, int64_t n) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float> && std::is_same_v<Index, int32_t>) {
    static const SgemmIsa isa = sgemmIsa();
    if (isa == SgemmIsa::Avx512)
      return gatherAvx512(dst, src, index, n);
    if (isa == SgemmIsa::Avx2)
      return gatherAvx2(dst, src, index, n);
  }
#endif
  gatherScalar(dst, src, index, n);
}

/// Part of an im2col row: `count` values at `dst` from `src` in an input channel's plane with
/// a stride (src -1: padding, zeros).
struct Im2colRun {
  int64_t src;
  int32_t dst, count, stride;
};
/// A chunk of an im2col row (a packed panel, or a row-major row): runs [first, first + count)
/// of its tile's runs, or (count 0) a gather through its table entries.
struct Im2colChunk {
  int32_t first, count;
};

/// `chunks` chunks of one im2col row, chunk q at dst + q * chunkStride, from `plane`.
template <class T, class Index>
TCC_ISA_BODY void fillChunksBody(T *dst, int64_t chunkStride, int64_t chunks, int64_t chunkWidth,
                                 const T *plane, const Index *table, const Im2colChunk *plan,
                                 const Im2colRun *runs) {
  for (int64_t q = 0; q < chunks; ++q) {
    T *to = dst + q * chunkStride;
    const Im2colChunk chunk = plan[q];
    if (chunk.count == 0) {
      gather(to, plane, table + q * chunkWidth, chunkWidth);
      continue;
    }
    for (int32_t i = chunk.first; i < chunk.first + chunk.count; ++i) {
      const Im2colRun run = runs[i];
      T *__restrict out = to + run.dst;
      if (run.src < 0) {
        for (int32_t j = 0; j < run.count; ++j)
          out[j] = T(0);
        continue;
      }
      const T *__restrict in = plane + run.src;
      if (run.stride == 1)
        for (int32_t j = 0; j < run.count; ++j)
          out[j] = in[j];
      else if (run.stride == 2)
        for (int32_t j = 0; j < run.count; ++j)
          out[j] = in[2 * j];
      else
        for (int32_t j = 0; j < run.count; ++j)
          out[j] = in[(int64_t)j * run.stride];
    }
  }
}
TCC_ISA_CLONES(fillChunks, fillChunksBody)

} // namespace

/// im2col from a plan made once per convolution geometry. For each tile of output columns, a table
/// gives, per kernel position, the element of an input channel's plane that each column reads,
/// or -1 where it reads padding. Row r of a tile's im2col matrix (channel r / kernelSize, kernel
/// position r % kernelSize) reads its channel's plane through its position's table row, chunk by
/// chunk (packed panels, or the whole row): a chunk made of long runs (a 1-D signal, a wide
/// image) is copied run by run; one of many short runs (a small map, its lines cut by panels) is
/// gathered. Any rank, stride, dilation and padding; groups and images share the plan, and
/// runConv keeps it in the launch's cache (a large 3-D map's tiles past kMaxKeptEntries get
/// theirs made per thread, one tile at a time).
class Im2col {
public:
  /// Tiles of `tile` output columns (the last one shorter), written row-major (panel 0) or in
  /// the sgemm's packed-B layout with panels of `panel` columns.
  Im2col(const ConvGeometry &geometry, int64_t tile, int64_t panel)
      : g(geometry), tile(tile), panel(panel), tiles((g.outSize + tile - 1) / tile),
        wide(g.inSize > INT32_MAX), serial(++serials) {
    g.batch = 0; // not part of the plan
    int64_t entries = 0;
    for (int64_t t = 0; t < tiles; ++t)
      entries += g.kernelSize * stride(std::min(tile, g.outSize - t * tile));
    if (entries > kMaxKeptEntries) // a large 3-D map: each tile's plan made where it is filled
      return;
    wide ? keep(plans64) : keep(plans32);
  }

  /// f32 values of the tile starting at j0 straight into `packed` (sgemmPackedView: the
  /// tile's width, k = rows, panels of `panel` columns), so that the sgemm packs nothing. The
  /// last panel's columns past the tile are zeroed (read, never stored).
  void fillPacked(const float *in, const SgemmPacked &packed, int64_t j0) const {
    if (wide)
      return fillPacked(in, packed, planOf(plans64, j0 / tile));
    fillPacked(in, packed, planOf(plans32, j0 / tile));
  }

  /// The tile starting at j0, rows [0, g.rows), row-major (row stride: the tile's width),
  /// from one group's input channels (f32, or 16-bit values as their bits).
  template <class T> void fill(const T *in, T *col, int64_t j0) const {
    if (wide)
      return fill(in, col, planOf(plans64, j0 / tile));
    fill(in, col, planOf(plans32, j0 / tile));
  }

  /// Whether this is the plan of `geometry`'s tiles of `tile` columns in panels of `panel`.
  bool covers(const ConvGeometry &geometry, int64_t tile, int64_t panel) const {
    auto fields = [](const ConvGeometry &c) {
      return std::tie(c.inSpatial, c.kernel, c.outSpatial, c.strides, c.padLow, c.dilations,
                      c.inSize, c.kernelSize, c.outSize, c.rows);
    };
    return this->tile == tile && this->panel == panel && fields(g) == fields(geometry);
  }

private:
  /// A tile's plan: kernelSize table rows of chunks * chunkWidth entries, and per kernel
  /// position its chunks.
  template <class Index> struct Plan {
    int64_t width = 0, chunkWidth = 0, chunks = 0;
    std::vector<Index> table;
    std::vector<Im2colChunk> chunkPlans;
    std::vector<Im2colRun> runs;
  };
  /// Table entries kept for all tiles at most (16 MiB of int32); beyond, per-thread plans of
  /// one tile at a time.
  static constexpr int64_t kMaxKeptEntries = 4 << 20;
  static inline std::atomic<uint64_t> serials{0};

  ConvGeometry g;
  const int64_t tile, panel, tiles;
  const bool wide;       // planes past 2^31 elements: 64-bit table entries
  const uint64_t serial; // names this plan to the per-thread ones
  std::vector<Plan<int32_t>> plans32; // per tile, when kept
  std::vector<Plan<int64_t>> plans64;

  /// A table row's length for a tile of `width` columns: whole panels, or the width.
  int64_t stride(int64_t width) const {
    return panel ? (width + panel - 1) / panel * panel : width;
  }

  template <class Index> void keep(std::vector<Plan<Index>> &plans) const {
    plans.resize((size_t)tiles);
    for (int64_t t = 0; t < tiles; ++t)
      makePlan(t, plans[(size_t)t]);
  }

  /// Tile t's plan: the kept one, or this thread's, made again when it was another's.
  template <class Index>
  const Plan<Index> &planOf(const std::vector<Plan<Index>> &plans, int64_t t) const {
    if (!plans.empty())
      return plans[(size_t)t];
    thread_local Plan<Index> local;
    thread_local std::pair<uint64_t, int64_t> madeFor{0, -1};
    if (madeFor != std::make_pair(serial, t)) {
      local = Plan<Index>();
      makePlan(t, local);
      madeFor = {serial, t};
    }
    return local;
  }

  template <class Index>
  void fillPacked(const float *in, const SgemmPacked &packed, const Plan<Index> &plan) const {
    float *base = packed.data.get();
    const int64_t perPosition = plan.chunks * plan.chunkWidth;
    for (int64_t r = 0; r < g.rows; ++r) {
      int64_t rowBase = packed.offset(0, r), kp = r % g.kernelSize;
      int64_t panelStride = plan.chunks > 1 ? packed.offset(packed.panel, r) - rowBase : 0;
      fillChunks(base + rowBase, panelStride, plan.chunks, plan.chunkWidth,
                 in + r / g.kernelSize * g.inSize, plan.table.data() + kp * perPosition,
                 plan.chunkPlans.data() + kp * plan.chunks, plan.runs.data());
    }
  }

  template <class T, class Index>
  void fill(const T *in, T *col, const Plan<Index> &plan) const {
    for (int64_t r = 0; r < g.rows; ++r) {
      int64_t kp = r % g.kernelSize;
      fillChunks(col + r * plan.width, (int64_t)0, (int64_t)1, plan.width,
                 in + r / g.kernelSize * g.inSize, plan.table.data() + kp * plan.width,
                 plan.chunkPlans.data() + kp, plan.runs.data());
    }
  }

  template <class Index> void makePlan(int64_t t, Plan<Index> &plan) const {
    const size_t spatial = g.kernel.size();
    const int64_t j0 = t * tile;
    plan.width = std::min(tile, g.outSize - j0);
    plan.chunkWidth = panel ? panel : plan.width;
    plan.chunks = (plan.width + plan.chunkWidth - 1) / plan.chunkWidth;
    const int64_t perPosition = plan.chunks * plan.chunkWidth;
    std::vector<int64_t> inStride(spatial, 1);
    for (size_t d = spatial - 1; d-- > 0;)
      inStride[d] = inStride[d + 1] * g.inSpatial[d + 1];
    // Each column's first input coordinate per dim (o * stride - padLow), walked as an odometer.
    std::vector<int64_t> first((size_t)plan.width * spatial), out(spatial);
    for (size_t d = spatial, rest = (size_t)j0; d-- > 0;) {
      out[d] = (int64_t)(rest % (size_t)g.outSpatial[d]);
      rest /= (size_t)g.outSpatial[d];
    }
    for (int64_t o = 0; o < plan.width; ++o) {
      for (size_t d = 0; d < spatial; ++d)
        first[o * spatial + d] = out[d] * g.strides[d] - g.padLow[d];
      for (size_t d = spatial; d-- > 0;) {
        if (++out[d] < g.outSpatial[d])
          break;
        out[d] = 0;
      }
    }
    plan.table.assign((size_t)(g.kernelSize * perPosition), -1);
    std::vector<int64_t> k(spatial, 0);
    for (int64_t kp = 0; kp < g.kernelSize; ++kp) {
      Index *row = plan.table.data() + kp * perPosition;
      for (int64_t o = 0; o < plan.width; ++o) {
        const int64_t *q0 = first.data() + o * spatial;
        int64_t at = 0;
        bool inside = true;
        for (size_t d = 0; d < spatial && inside; ++d) {
          int64_t q = q0[d] + k[d] * g.dilations[d];
          inside = q >= 0 && q < g.inSpatial[d];
          at += q * inStride[d];
        }
        if (inside)
          row[o] = (Index)at;
      }
      for (int64_t q = 0; q < plan.chunks; ++q)
        plan.chunkPlans.push_back(
            chunkPlan(row + q * plan.chunkWidth, plan.chunkWidth, plan.runs));
      for (size_t d = spatial; d-- > 0;) {
        if (++k[d] < g.kernel[d])
          break;
        k[d] = 0;
      }
    }
  }

  /// The runs of one chunk of table entries (appended to `runs`), or a gather (count 0) where
  /// they would average fewer than a vector's worth of values each.
  template <class Index>
  static Im2colChunk chunkPlan(const Index *entries, int64_t n, std::vector<Im2colRun> &runs) {
    constexpr int64_t kMinAverageRun = 16;
    Im2colChunk chunk{(int32_t)runs.size(), 0};
    for (int64_t i = 0; i < n;) {
      Im2colRun run{(int64_t)entries[i], (int32_t)i, 1, 1};
      if (entries[i] < 0) {
        while (i + run.count < n && entries[i + run.count] < 0)
          ++run.count;
      } else if (i + 1 < n && entries[i + 1] > entries[i]) {
        run.stride = (int32_t)std::min<int64_t>(entries[i + 1] - entries[i], INT32_MAX);
        while (i + run.count < n &&
               entries[i + run.count] == entries[i] + (int64_t)run.count * run.stride)
          ++run.count;
      }
      runs.push_back(run);
      i += run.count;
      if (++chunk.count > 1 && chunk.count * kMinAverageRun > n) { // short runs: gather
        runs.resize((size_t)chunk.first);
        return {chunk.first, 0};
      }
    }
    return chunk;
  }
};

/// The im2col plan of `g`'s tiles, from `cache` or made and kept there.
const Im2col &im2colPlan(PackedOperand &cache, const ConvGeometry &g, int64_t tile,
                         int64_t panel) {
  if (!cache.im2col || !cache.im2col->covers(g, tile, panel))
    cache.im2col = std::make_shared<const Im2col>(g, tile, panel);
  return *cache.im2col;
}

namespace {

/// The epilogue over a whole output already computed (paths that accumulate into it).
void applyConvEpilogue(const ConvGeometry &g, const ConvEpilogue &e, float *output,
                       int numThreads) {
  parallelFor(numThreads, g.batch * g.outChannels, 2 * g.outSize, [&](int64_t b, int64_t end) {
    for (int64_t plane = b; plane < end; ++plane) {
      int64_t c = plane % g.outChannels, at = plane * g.outSize;
      for (int64_t p = 0; p < g.outSize; ++p)
        output[at + p] = e.apply(output[at + p], c, e.residual + at + p);
      activateRows(e.activation, output + at, 1, g.outSize, g.outSize);
    }
  });
}

/// The sgemm epilogue of the output tile at channel c0, element offset `at` of the output.
SgemmEpilogue convTileEpilogue(const ConvEpilogue *e, int64_t c0, int64_t at, int64_t ld) {
  SgemmEpilogue t;
  if (!e)
    return t;
  t.rowBias = e->bias ? e->bias + c0 : nullptr;
  t.residual = e->residual ? e->residual + at : nullptr;
  t.ldResidual = ld;
  t.clamp = e->clamp;
  t.lo = e->lo;
  t.hi = e->hi;
  t.activation = e->activation;
  return t;
}

} // namespace

void runConv(const ConvGeometry &g, const float *input, const float *weight, float *output,
             float *workspace, int numThreads, PackedOperand *cache, bool weightIsConstant,
             const ConvEpilogue *epilogue) {
  if (g.outSize == 0 || g.groupOut == 0 || g.batch == 0)
    return;
  if (epilogue && !epilogue->any())
    epilogue = nullptr;
  const int64_t outElements = g.batch * g.outChannels * g.outSize;
  // A residual in the output's bytes would be overwritten by partial sums: read it first.
  std::vector<float> residualCopy;
  ConvEpilogue separate;
  if (epilogue && epilogue->residual && epilogue->residual < output + outElements &&
      output < epilogue->residual + outElements) {
    residualCopy.assign(epilogue->residual, epilogue->residual + outElements);
    separate = *epilogue;
    separate.residual = residualCopy.data();
    epilogue = &separate;
  }
  if (g.channelsLast) // ChannelsLast.h (its own weight cache)
    return runConvChannelsLast(g, input, weight, output, workspace, numThreads, cache,
                               weightIsConstant, epilogue);
  PackedOperand local;
  if (!cache)
    cache = &local;
  std::vector<SgemmPacked> &packedWeights = cache->matrices;
  bool fresh = resetIfStale(*cache, weight, weightIsConstant, sgemmIsa());
  if (g.transposed) {
    if (fresh)
      transposedConvPackWeights(g, weight, packedWeights, numThreads);
    runTransposedConv(g, input, packedWeights.data(), output, workspace, numThreads);
    if (epilogue) // col2im adds into the output until the end
      applyConvEpilogue(g, *epilogue, output, numThreads);
    return;
  }
  if (g.winogradTile) {
    if (fresh) {
      std::vector<float> transformed(winogradWeightFloats(g)); // packed, then dropped
      winogradTransformWeights(g, weight, transformed.data(), numThreads);
      winogradPackWeights(g, transformed.data(), packedWeights, numThreads);
    }
    runWinograd(g, input, packedWeights.data(), output, workspace, numThreads, epilogue);
    return;
  }
  if (g.groupIn == 1 && g.kernel.size() == 2) {
    runDepthwise2dPhased(g, input, weight, output, numThreads, epilogue); // Depthwise.h
    return;
  }
  if (g.rows == 0) { // no input channels: an empty sum
    std::memset(output, 0, sizeof(float) * (size_t)outElements);
    if (epilogue)
      applyConvEpilogue(g, *epilogue, output, numThreads);
    return;
  }
  // The weights of each group are sgemm's A operand (groupOut x rows), packed once.
  if (fresh)
    for (int64_t grp = 0; grp < g.groups; ++grp)
      packedWeights.push_back(packSgemmA(sgemmIsa(), false, g.groupOut, g.rows,
                                         weight + grp * g.groupOut * g.rows, g.rows,
                                         numThreads));
  const SgemmPacked *packed = packedWeights.data();
  int64_t m = g.groupOut, k = g.rows, ldc = g.outSize;
  // One column tile [j0, j1) of a group: its im2col matrix in `col`, times the packed weights.
  // The sgemm packs B for many rows of A (sgemmPacksB): the matrix is then written packed (no
  // packing pass); with fewer rows it reads B in place, so it is written row-major.
  // `gemmThreads` run the sgemm (1 where the threads take whole tiles).
  auto im2colProduct = [&](const Im2col &im, const float *in, float *col, int64_t j0, int64_t j1,
                           float *out, const SgemmPacked *weights, const SgemmEpilogue *tileEp,
                           int gemmThreads) {
    int64_t width = j1 - j0;
    if (sgemmPacksB(m)) {
      SgemmPacked cols = sgemmPackedView(sgemmIsa(), false, width, k, col);
      im.fillPacked(in, cols, j0);
      sgemm(false, false, m, width, k, 1.0f, nullptr, k, nullptr, width, 0.0f, out, ldc,
            gemmThreads, weights, &cols, tileEp);
    } else {
      im.fill(in, col, j0);
      sgemm(false, false, m, width, k, 1.0f, nullptr, k, col, width, 0.0f, out, ldc, gemmThreads,
            weights, nullptr, tileEp);
    }
  };
  // The epilogue of the tile at column j0 of (image n, group grp).
  auto tileEpilogue = [&](int64_t n, int64_t grp, int64_t j0) {
    int64_t c0 = grp * g.groupOut;
    return convTileEpilogue(epilogue, c0, (n * g.outChannels + c0) * g.outSize + j0, ldc);
  };
  if (g.pointwise) {
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        SgemmEpilogue tile = tileEpilogue(n, grp, 0);
        sgemm(false, false, m, g.outSize, k, 1.0f, nullptr, k,
              input + (n * g.inChannels + grp * g.groupIn) * g.inSize, g.outSize, 0.0f,
              output + (n * g.outChannels + grp * g.groupOut) * g.outSize, ldc, numThreads,
              &packed[grp], nullptr, &tile);
      }
    return;
  }
  // The im2col panels: the packed-B panel width where the sgemm packs B, else row-major.
  const int64_t panel = sgemmPacksB(m) ? sgemmTileColumns(sgemmIsa()) : 0;
  // Few images of few columns (a 7x7 or 4x4 map): tiles of under 64 columns would each read
  // all the weights for a sliver of the output; the threads split the GEMM's rows instead
  // (each reads its share of the weights).
  const int64_t images = g.batch * g.groups;
  const bool threadsTakeTiles =
      numThreads > 1 &&
      (images >= numThreads || g.outSize / ((numThreads + images - 1) / images) >= 64);
  if (threadsTakeTiles) {
    // Items: (image, group, column tile), tiles small enough that every thread gets work.
    // With few images, split each into equal column tiles: about 4 items per thread, a
    // multiple of the thread count (balanced), tiles of >= 64 columns where possible.
    int64_t tile = g.columnTile;
    int64_t minTiles = (g.outSize + g.columnTile - 1) / g.columnTile;
    if (images * minTiles < 4 * numThreads) {
      int64_t fewest = std::max<int64_t>(minTiles, (numThreads + images - 1) / images);
      int64_t tiles = fewest;
      for (int64_t t = std::max(fewest, (4 * numThreads + images - 1) / images); t > fewest; --t)
        if (g.outSize / t >= 64 && (images * t) % numThreads == 0) {
          tiles = t;
          break;
        }
      // Whole 32-column panels of the sgemm where the split allows: a GEMM over 25 columns
      // costs as much as over 32, so 49 columns split 32 + 17 balance and 25 + 24 do not.
      tile = std::min(g.columnTile, (g.outSize + tiles - 1) / tiles);
      if (tile > 32)
        tile = std::min(g.columnTile, (tile + 31) / 32 * 32);
    }
    int64_t tilesPerImage = (g.outSize + tile - 1) / tile, items = images * tilesPerImage;
    const Im2col &im2col = im2colPlan(*cache, g, tile, panel);
    parallelItems(numThreads, items, [&](int64_t worker, int64_t item) {
      float *col = workspace + (size_t)worker * (g.workspaceBytes / sizeof(float));
      int64_t image = item / tilesPerImage, j0 = item % tilesPerImage * tile;
      int64_t n = image / g.groups, grp = image % g.groups;
      int64_t j1 = std::min(g.outSize, j0 + tile);
      const float *in = input + (n * g.inChannels + grp * g.groupIn) * g.inSize;
      SgemmEpilogue tileEp = tileEpilogue(n, grp, j0);
      float *out = output + (n * g.outChannels + grp * g.groupOut) * g.outSize + j0;
      im2colProduct(im2col, in, col, j0, j1, out, &packed[grp], &tileEp, 1);
    });
    return;
  }
  const Im2col &im2col = im2colPlan(*cache, g, g.columnTile, panel);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float *in = input + (n * g.inChannels + grp * g.groupIn) * g.inSize;
      float *out = output + (n * g.outChannels + grp * g.groupOut) * g.outSize;
      for (int64_t j0 = 0; j0 < g.outSize; j0 += g.columnTile) {
        int64_t j1 = std::min(g.outSize, j0 + g.columnTile);
        SgemmEpilogue tileEp = tileEpilogue(n, grp, j0);
        im2colProduct(im2col, in, workspace, j0, j1, out + j0, &packed[grp], &tileEp,
                      numThreads);
      }
    }
}

void runConv16(const ConvGeometry &g, const uint16_t *input, const uint16_t *weight,
               uint16_t *output, void *workspace, int numThreads, PackedOperand *cache,
               bool weightIsConstant) {
  if (g.outSize == 0 || g.groupOut == 0 || g.batch == 0)
    return;
  const Half16 type = g.dtype == TCCRT_BF16 ? Half16::BF16 : Half16::F16;
  // Whole tensors are converted on all the threads (one thread left 16 of them idle for most of
  // a bf16 depthwise convolution), rows of a tile on the tile's threads.
  auto widenInto = [type](const uint16_t *from, float *to, int64_t n, int threads) {
    if (type == Half16::BF16)
      convertElements(from, to, n, threads, [](uint16_t x) { return bfloat16ToFloat(x); });
    else
      convertElements(from, to, n, threads, [](uint16_t x) { return halfToFloat(x); });
  };
  auto narrowInto = [type](const float *from, uint16_t *to, int64_t n, int threads) {
    if (type == Half16::BF16)
      convertElements(from, to, n, threads, [](float x) { return floatToBfloat16(x); });
    else
      convertElements(from, to, n, threads, [](float x) { return floatToHalf(x); });
  };
  const int64_t outElements = g.batch * g.outChannels * g.outSize;
  const bool depthwise = !g.transposed && g.groupIn == 1 && g.kernel.size() == 2;
  if (g.transposed || depthwise) {
    // No 16-bit kernel: the f32 path on widened copies (the weights widened once when constant).
    const int64_t wElements = g.outChannels * g.groupIn * g.kernelSize;
    if (!weightIsConstant || cache->source != weight || cache->widened.empty()) {
      cache->widened.resize((size_t)wElements);
      widenInto(weight, cache->widened.data(), wElements, numThreads);
      cache->source = weightIsConstant ? weight : nullptr;
      cache->widenedPacking = std::make_shared<PackedOperand>();
    }
    if (depthwise) {
      // Slabs of channels of one image, each widened into the running thread's buffer, run by
      // the f32 kernel and narrowed while in cache: no whole-tensor copies.
      constexpr int64_t kSlabFloats = 32 * 1024;
      const int64_t slab = std::clamp<int64_t>(kSlabFloats / std::max<int64_t>(g.inSize, 1), 1,
                                               g.groups);
      const int64_t slabs = (g.groups + slab - 1) / slab;
      auto slabGeometry = [&](int64_t channels) {
        Shape x{1, channels}, w{channels * g.groupOut, 1}, y{1, channels * g.groupOut};
        x.insert(x.end(), g.inSpatial.begin(), g.inSpatial.end());
        w.insert(w.end(), g.kernel.begin(), g.kernel.end());
        y.insert(y.end(), g.outSpatial.begin(), g.outSpatial.end());
        return makeConvGeometry(x, w, y, g.strides, g.padLow, g.padHigh, g.dilations, channels);
      };
      const ConvGeometry whole = slabGeometry(slab);
      const ConvGeometry last = slabGeometry(g.groups - (slabs - 1) * slab);
      const float *widened = cache->widened.data();
      parallelItems(numThreads, g.batch * slabs, [&](int64_t, int64_t item) {
        const int64_t n = item / slabs, first = item % slabs * slab;
        const ConvGeometry &sg = first + slab <= g.groups ? whole : last;
        const int64_t in = sg.inChannels * g.inSize, out = sg.outChannels * g.outSize;
        thread_local std::vector<float> x, y;
        x.resize((size_t)in);
        y.resize((size_t)out);
        widenInto(input + (n * g.inChannels + first) * g.inSize, x.data(), in, 1);
        runDepthwise2dPhased(sg, x.data(), widened + first * g.groupOut * g.kernelSize,
                             y.data(), 1, nullptr);
        narrowInto(y.data(), output + (n * g.outChannels + first * g.groupOut) * g.outSize, out,
                   1);
      });
      return;
    }
    ConvGeometry wide = g;
    wide.dtype = TCCRT_F32;
    const int64_t inElements = g.batch * g.inChannels * g.inSize;
    // Kept by the calling thread: fresh pages every call cost page faults as large as the copies.
    thread_local std::vector<float> x, y;
    x.resize((size_t)inElements);
    y.resize((size_t)outElements);
    widenInto(input, x.data(), inElements, numThreads);
    runConv(wide, x.data(), cache->widened.data(), y.data(), static_cast<float *>(workspace),
            numThreads, cache->widenedPacking.get(), weightIsConstant);
    narrowInto(y.data(), output, outElements, numThreads);
    return;
  }
  if (g.rows == 0) {
    std::memset(output, 0, sizeof(uint16_t) * (size_t)outElements);
    return;
  }
  const SgemmIsa isa = gemm16Isa(type);
  std::vector<SgemmPacked> &packedWeights = cache->matrices;
  if (resetIfStale(*cache, weight, weightIsConstant, isa))
    for (int64_t grp = 0; grp < g.groups; ++grp)
      packedWeights.push_back(packGemm16A(type, false, g.groupOut, g.rows,
                                          weight + grp * g.groupOut * g.rows, g.rows,
                                          numThreads));
  const SgemmPacked *packed = packedWeights.data();
  const int64_t m = g.groupOut, k = g.rows;
  // One (image, group, column tile): the f32 product tile, rounded into the output rows.
  auto tileProduct = [&](const uint16_t *b, int64_t ldb, int64_t n, int64_t grp, int64_t j0,
                         int64_t width, int threads) {
    thread_local std::vector<float> sums;
    sums.resize((size_t)(m * width));
    gemm16(type, false, false, m, width, k, 1.0f, nullptr, k, b, ldb, 0.0f, sums.data(), width,
           threads, &packed[grp]);
    uint16_t *out = output + (n * g.outChannels + grp * g.groupOut) * g.outSize + j0;
    const float *rows = sums.data(); // sums is this thread's: the workers see their own
    const int64_t rowBytes = (int64_t)(sizeof(float) + sizeof(uint16_t)) * width;
    parallelFor(threads, m, rowBytes, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        narrowInto(rows + r * width, out + r * g.outSize, width, 1);
    });
  };
  if (g.pointwise) {
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t grp = 0; grp < g.groups; ++grp)
        tileProduct(input + (n * g.inChannels + grp * g.groupIn) * g.inSize, g.outSize, n, grp, 0,
                    g.outSize, numThreads);
    return;
  }
  const int64_t tile = g.columnTile, tilesPerImage = (g.outSize + tile - 1) / tile;
  const Im2col &im2col = im2colPlan(*cache, g, tile, 0);
  const int64_t items = g.batch * g.groups * tilesPerImage;
  parallelItems(numThreads, items, [&](int64_t worker, int64_t item) {
    auto *col = reinterpret_cast<uint16_t *>(static_cast<char *>(workspace) +
                                             (size_t)worker * g.workspaceBytes);
    int64_t image = item / tilesPerImage, j0 = item % tilesPerImage * tile;
    int64_t n = image / g.groups, grp = image % g.groups;
    int64_t j1 = std::min(g.outSize, j0 + tile), width = j1 - j0;
    im2col.fill(input + (n * g.inChannels + grp * g.groupIn) * g.inSize, col, j0);
    tileProduct(col, width, n, grp, j0, width, 1);
  });
}

//===--- Top-k ------------------------------------------------------------===//

TopKGeometry makeTopKGeometry(tccrt_dtype inputType, const Shape &input, tccrt_dtype valuesType,
                              const Shape &values, tccrt_dtype indicesType, const Shape &indices,
                              int64_t dim, bool largest) {
  const char *op = "topk";
  int64_t rank = (int64_t)input.size();
  if (dim < 0 || dim >= rank)
    throw Error(std::string(op) + ": dim " + std::to_string(dim) + " is out of range for input" +
                shapeString(input));
  if (valuesType != inputType || indicesType != TCCRT_I64 || values != indices)
    throw Error(std::string(op) + ": values must have the input's type (" +
                dtypeName(inputType) + ") and indices be i64 of the same shape; got values " +
                dtypeName(valuesType) + shapeString(values) + ", indices " +
                dtypeName(indicesType) + shapeString(indices));
  bool shapeOk = (int64_t)values.size() == rank && values[dim] <= input[dim];
  for (int64_t d = 0; shapeOk && d < rank; ++d)
    shapeOk = d == dim || values[d] == input[d];
  if (!shapeOk)
    throw Error(std::string(op) + ": values" + shapeString(values) +
                " must be the input's shape" + shapeString(input) + " with k <= " +
                std::to_string(input[dim]) + " along dim " + std::to_string(dim));
  TopKGeometry g;
  g.dtype = inputType;
  g.largest = largest;
  g.outer = product(input, 0, dim);
  g.size = input[dim];
  g.inner = product(input, dim + 1);
  g.k = values[dim];
  return g;
}

namespace {

template <class T> struct Compute {
  using type = T;
  static type get(T v) { return v; }
};
struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};
template <> struct Compute<Half> {
  using type = float;
  static float get(Half v) { return halfToFloat(v.bits); }
};
template <> struct Compute<BFloat> {
  using type = float;
  static float get(BFloat v) { return bfloat16ToFloat(v.bits); }
};

template <class T>
void topkTyped(const TopKGeometry &g, const T *in, T *outValues, int64_t *outIndices) {
  using C = typename Compute<T>::type;
  topKLines<C>(in, g.outer, g.size, g.inner, g.k, g.largest, Compute<T>::get, outValues,
               outIndices);
}

} // namespace

void runTopK(const TopKGeometry &g, const void *input, void *values, int64_t *indices) {
  switch (g.dtype) {
#define TCC_TOPK_CASE(D, T)                                                                        \
  case D:                                                                                          \
    return topkTyped(g, static_cast<const T *>(input), static_cast<T *>(values), indices);
    TCC_TOPK_CASE(TCCRT_BOOL, uint8_t)
    TCC_TOPK_CASE(TCCRT_I8, int8_t)
    TCC_TOPK_CASE(TCCRT_I16, int16_t)
    TCC_TOPK_CASE(TCCRT_I32, int32_t)
    TCC_TOPK_CASE(TCCRT_I64, int64_t)
    TCC_TOPK_CASE(TCCRT_U8, uint8_t)
    TCC_TOPK_CASE(TCCRT_U16, uint16_t)
    TCC_TOPK_CASE(TCCRT_U32, uint32_t)
    TCC_TOPK_CASE(TCCRT_U64, uint64_t)
    TCC_TOPK_CASE(TCCRT_F16, Half)
    TCC_TOPK_CASE(TCCRT_BF16, BFloat)
    TCC_TOPK_CASE(TCCRT_F32, float)
    TCC_TOPK_CASE(TCCRT_F64, double)
#undef TCC_TOPK_CASE
  }
  throw Error("topk: unsupported element type " + std::string(dtypeName(g.dtype)));
}

} // namespace tcc::rt
