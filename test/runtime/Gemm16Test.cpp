//===- Gemm16Test.cpp - libtccrt's bf16/f16 GEMM against a float64 reference ===//
//
// gemm16 (Sgemm.h) on the family this process uses for 16-bit operands: AMX tiles or
// AVX512-BF16's pair kernels where the CPU has them, f32 kernels on converted panels otherwise.
// CMake registers these tests again with $TCC_GEMM_ISA = avx512, avx2 and generic (the
// conversion path on each f32 family) and amx-emulated (the amx family's packing, blocking and
// store-out, its tile instructions in C++: how they are tested where the CPU has no AMX); a
// family the CPU lacks skips. Also the f32 <-> 16-bit conversions of DType.h
// and runGemm's 16-bit steps (batches, constant operands packed once).
#include "CpuLibrary.h"
#include "DType.h"
#include "Sgemm.h"
#include "tcc/Runtime/CpuFeatures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace tcc::rt;

namespace {

void skipUnlessForcedFamilyRuns() {
  if (const char *forced = std::getenv("TCC_GEMM_ISA"))
    if (*forced && std::string(forced) != sgemmIsaName(gemm16Isa(Half16::BF16)))
      GTEST_SKIP() << "this CPU cannot run the " << forced << " kernels (using "
                   << sgemmIsaName(gemm16Isa(Half16::BF16)) << ")";
}

float widen(Half16 type, uint16_t bits) {
  return type == Half16::BF16 ? bfloat16ToFloat(bits) : halfToFloat(bits);
}
uint16_t narrow(Half16 type, float f) {
  return type == Half16::BF16 ? floatToBfloat16(f) : floatToHalf(f);
}
const char *typeName(Half16 type) { return type == Half16::BF16 ? "bf16" : "f16"; }

/// A random 16-bit matrix problem; the reference sums the 16-bit values exactly (float64).
struct Problem16 {
  Half16 type;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  std::vector<uint16_t> a, b;
  std::vector<float> c;

  Problem16(std::mt19937 &rng, Half16 type, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
            float alpha, float beta, int64_t pad = 0)
      : type(type), ta(ta), tb(tb), m(m), n(n), k(k), lda((ta ? m : k) + pad),
        ldb((tb ? k : n) + pad), ldc(n + pad), alpha(alpha), beta(beta) {
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    a.resize((size_t)((ta ? k : m) * lda));
    b.resize((size_t)((tb ? n : k) * ldb));
    c.resize((size_t)(m * ldc));
    for (uint16_t &x : a)
      x = narrow(type, dist(rng));
    for (uint16_t &x : b)
      x = narrow(type, dist(rng));
    for (float &x : c)
      x = dist(rng);
  }
  double at(const std::vector<uint16_t> &v, int64_t ld, bool t, int64_t r, int64_t col) const {
    return widen(type, t ? v[col * ld + r] : v[r * ld + col]);
  }
  std::vector<float> run(int threads, const SgemmPacked *pa = nullptr,
                         const SgemmPacked *pb = nullptr,
                         const SgemmEpilogue *epilogue = nullptr) const {
    std::vector<float> out = c;
    gemm16(type, ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, out.data(), ldc,
           threads, pa, pb, epilogue);
    return out;
  }
  /// Checks `got` against the float64 sum (then + bias[j], ReLU when given): products of 16-bit
  /// values are exact in f32, so the bound is f32 summation's.
  void check(const std::vector<float> &got, const std::string &what,
             const float *bias = nullptr, bool relu = false) const {
    size_t bad = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          double x = at(a, lda, ta, i, p) * at(b, ldb, tb, p, j);
          acc += x;
          mag += std::fabs(x);
        }
        double old = c[i * ldc + j];
        double want = alpha * acc + (beta == 0 ? 0.0 : beta * old) + (bias ? bias[j] : 0.0);
        if (relu)
          want = std::max(want, 0.0);
        double bound =
            (std::fabs(alpha) * mag + (beta == 0 ? 0.0 : std::fabs(beta * old))) * (k + 2) * 1.2e-7 +
            1e-6;
        float g = got[i * ldc + j];
        if (!(std::fabs(g - want) <= bound) && ++bad <= 5)
          ADD_FAILURE() << what << ": C[" << i << "][" << j << "] is " << g << ", expected "
                        << want;
      }
    EXPECT_EQ(bad, 0u) << what;
  }
  std::string name() const {
    return std::string(typeName(type)) + (ta ? " A^T" : " A") + (tb ? " B^T" : " B") +
           " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
           " ld+" + std::to_string(ldc - n);
  }
};

TEST(Gemm16, RandomShapesBothTypesEveryTransposeAndStride) {
  skipUnlessForcedFamilyRuns();
  std::mt19937 rng(21);
  for (Half16 type : {Half16::BF16, Half16::F16})
    for (int trial = 0; trial < 80; ++trial) {
      // Odd and even k (the pair kernels pad the last pair), some past one k block of pairs
      // (384 pairs: 768 values) and one column block (512).
      int64_t m = 1 + rng() % 40, n = 1 + rng() % 70, k = 1 + rng() % 90;
      if (trial % 10 == 0)
        k = 700 + rng() % 200;
      if (trial % 15 == 0)
        n = 500 + rng() % 200;
      float alpha = trial % 3 == 0 ? -0.75f : 1.0f, beta = trial % 4 == 0 ? 0.5f : 0.0f;
      Problem16 p(rng, type, trial & 1, trial & 2, m, n, k, alpha, beta, trial % 5 == 0 ? 3 : 0);
      SCOPED_TRACE(p.name());
      p.check(p.run(1 + trial % 3), "gemm16");
    }
}

TEST(Gemm16, ResultDoesNotDependOnThreadsOrPrepacking) {
  skipUnlessForcedFamilyRuns();
  std::mt19937 rng(22);
  for (Half16 type : {Half16::BF16, Half16::F16})
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{40, 1100, 801},
                           {3, 515, 129},
                           {1, 1100, 301}}) { // one row: the 4-panel row kernel
      for (int t = 0; t < 4; ++t) {
        Problem16 p(rng, type, t & 1, t & 2, m, n, k, 1.0f, 0.25f);
        SCOPED_TRACE(p.name());
        std::vector<float> one = p.run(1);
        p.check(one, "one thread");
        EXPECT_EQ(p.run(3), one) << "three threads";
        SgemmPacked pa = packGemm16A(type, p.ta, m, k, p.a.data(), p.lda, 2);
        SgemmPacked pb = packGemm16B(type, p.tb, k, n, p.b.data(), p.ldb, 2);
        EXPECT_EQ(pa.isa, gemm16Isa(type));
        EXPECT_EQ(p.run(2, &pa, &pb), one) << "both prepacked";
        std::vector<float> out = p.c;
        gemm16(type, p.ta, p.tb, m, n, k, p.alpha, nullptr, p.lda, nullptr, p.ldb, p.beta,
               out.data(), p.ldc, 2, &pa, &pb);
        EXPECT_EQ(out, one) << "prepacked, no plain operands";
        // Packed for f32 (or for another k) is not the 16-bit layout: repacked from a and b.
        SgemmPacked otherK = packGemm16B(type, p.tb, k - 1, n, p.b.data(), p.ldb);
        EXPECT_EQ(p.run(1, nullptr, &otherK), one) << "B packed for another k";
      }
    }
}

TEST(Gemm16, BiasReluAndBetaZeroNeverReadsC) {
  skipUnlessForcedFamilyRuns();
  std::mt19937 rng(23);
  for (Half16 type : {Half16::BF16, Half16::F16})
    for (int64_t m : {1, 2, 29}) {
      Problem16 p(rng, type, false, m % 2 == 0, m, 150, 401, 0.5f, 0.0f);
      std::fill(p.c.begin(), p.c.end(), std::numeric_limits<float>::quiet_NaN());
      std::vector<float> bias(150);
      for (float &x : bias)
        x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
      SgemmEpilogue epilogue;
      epilogue.bias = bias.data();
      epilogue.clamp = true; // ReLU
      epilogue.hi = INFINITY;
      SCOPED_TRACE(p.name());
      p.check(p.run(2, nullptr, nullptr, &epilogue), "bias + relu", bias.data(), true);
    }
}

TEST(Gemm16, EmptyInnerDimensionScalesC) {
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  gemm16(Half16::BF16, false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, 2.0f, c.data(), 3, 1);
  EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8, 10, 12}));
}

TEST(Gemm16, WidestPairFamilyTheCpuHas) {
  if (const char *forced = std::getenv("TCC_GEMM_ISA"); forced && *forced)
    GTEST_SKIP() << "$TCC_GEMM_ISA caps the families";
  bool bf16 = cpuHasFeature("avx512f") && cpuHasFeature("avx512bf16");
  bool amx = bf16 && cpuHasFeature("amx-tile") && cpuHasFeature("amx-bf16");
  EXPECT_EQ(sgemmIsaSupported(SgemmIsa::Avx512Bf16), bf16);
  // Linux grants the tile state from 5.16 on; an older kernel leaves AMX unused.
  EXPECT_EQ(sgemmIsaSupported(SgemmIsa::Amx), amx) << "the OS did not grant the AMX tile state";
  EXPECT_EQ(gemm16Isa(Half16::BF16), amx    ? SgemmIsa::Amx
                                     : bf16 ? SgemmIsa::Avx512Bf16
                                            : sgemmIsa());
  EXPECT_EQ(gemm16Isa(Half16::F16), sgemmIsa()); // f16 is converted: no f32-accumulating f16 dot
  EXPECT_LT(sgemmIsa(), SgemmIsa::Avx512Bf16);   // f32 products never take a pair family
  // The emulated tiles are only ever asked for.
  EXPECT_NE(gemm16Isa(Half16::BF16), SgemmIsa::AmxEmulated);
}

TEST(Gemm16, TileEdgesRowsColumnsAndDepth) {
  // Around the amx family's 16 x 16 tiles, its 32 x 32 call and its k tiles of 16 pairs (and
  // the other families' 14 x 32 / 6 x 16 / 4 x 16 tiles and 384-pair k blocks), both operand
  // orders, prepacked and not.
  skipUnlessForcedFamilyRuns();
  std::mt19937 rng(24);
  int trial = 0;
  for (int64_t m : {1, 15, 16, 17, 32, 33, 47})
    for (int64_t n : {1, 16, 17, 32, 33})
      for (int64_t k : {1, 2, 31, 32, 33, 768, 769}) {
        ++trial;
        Problem16 p(rng, Half16::BF16, trial & 1, trial & 2, m, n, k, 1.0f,
                    trial % 3 ? 0.0f : 0.5f, trial % 4 == 0 ? 5 : 0);
        SCOPED_TRACE(p.name());
        p.check(p.run(1 + trial % 2), "gemm16");
        if (trial % 5 == 0) {
          SgemmPacked pa = packGemm16A(Half16::BF16, p.ta, m, k, p.a.data(), p.lda);
          SgemmPacked pb = packGemm16B(Half16::BF16, p.tb, k, n, p.b.data(), p.ldb);
          p.check(p.run(1, &pa, &pb), "prepacked");
        }
      }
}

TEST(Gemm16, ConversionsRoundToNearestEven) {
  // Every f16 value round-trips; every midpoint between neighbours rounds to the even one;
  // past the largest finite value (65504) halfway to the next, infinity.
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    for (uint16_t sign : {0, 0x8000}) {
      uint16_t bits = (uint16_t)(h | sign);
      ASSERT_EQ(floatToHalf(halfToFloat(bits)), bits) << std::hex << bits;
      double lo = halfToFloat(bits), hi = halfToFloat((uint16_t)(bits + 1));
      if (h + 1 < 0x7c00u) {
        float mid = (float)((lo + hi) / 2); // exact in float
        uint16_t even = (h & 1) ? (uint16_t)(bits + 1) : bits;
        ASSERT_EQ(floatToHalf(mid), even) << "midpoint after " << std::hex << bits;
        ASSERT_EQ(floatToHalf(std::nextafter(mid, (float)lo)), bits);
      }
    }
  }
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bffu);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00u);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00u);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  // bf16: the upper half of the float, rounded to nearest even.
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80u);
  EXPECT_EQ(floatToBfloat16(bfloat16ToFloat(0x3f80) + std::ldexp(1.0f, -8)), 0x3f80u); // tie: even
  EXPECT_EQ(floatToBfloat16(bfloat16ToFloat(0x3f81) + std::ldexp(1.0f, -8)), 0x3f82u); // tie: even
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7f80u);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(std::nanf("0x1")))));
  for (uint32_t b = 0; b < 0x7f80u; b += 7)
    ASSERT_EQ(floatToBfloat16(bfloat16ToFloat((uint16_t)b)), b);
}

TEST(Gemm16, RunGemmBatchesWithConstantOperandsPackedOnce) {
  skipUnlessForcedFamilyRuns();
  // a [3, 1, 5, 37] x b [1, 2, 37, 9] -> c [3, 2, 5, 9], b constant (packed once, kept).
  std::mt19937 rng(24);
  for (Half16 type : {Half16::BF16, Half16::F16}) {
    tccrt_dtype dtype = type == Half16::BF16 ? TCCRT_BF16 : TCCRT_F16;
    GemmGeometry g = makeGemmGeometry(dtype, {3, 1, 5, 37}, {1, 2, 37, 9}, {3, 2, 5, 9}, false,
                                      false, 1.0, 0.0);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<uint16_t> a(3 * 5 * 37), b(2 * 37 * 9), c(3 * 2 * 5 * 9);
    for (uint16_t &x : a)
      x = narrow(type, dist(rng));
    for (uint16_t &x : b)
      x = narrow(type, dist(rng));
    PackedOperand packedB;
    for (int run = 0; run < 2; ++run) {
      runGemm(g, a.data(), b.data(), c.data(), 2, nullptr, false, &packedB, true);
      EXPECT_EQ(packedB.matrices.size(), 2u);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j)
          for (int r = 0; r < 5; ++r)
            for (int col = 0; col < 9; ++col) {
              double want = 0;
              for (int p = 0; p < 37; ++p)
                want += (double)widen(type, a[(i * 5 + r) * 37 + p]) *
                        widen(type, b[(j * 37 + p) * 9 + col]);
              float got = widen(type, c[((i * 2 + j) * 5 + r) * 9 + col]);
              // One rounding to the 16-bit type: half an ulp (bf16 2^-9, f16 2^-12 relative).
              double ulp = type == Half16::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
              ASSERT_NEAR(got, want, std::fabs(want) * ulp + 1e-4)
                  << typeName(type) << " batch " << i << "," << j << " C[" << r << "][" << col
                  << "]";
            }
    }
  }
}

/// runConv16 against runConv on the widened operands, per geometry: im2col (strided, padded,
/// dilated, grouped, 1-D and 3x3 stride 1, which f32 runs with Winograd), pointwise, and the
/// widened fallbacks (depthwise, transposed), small and large enough to convert on several
/// threads; bf16 and f16, 1 and 3 threads, the weights packed
/// once and reused (a second run with a constant weight must give the same bits).
TEST(Gemm16, ConvolutionsMatchTheF32PathOnTheSameValues) {
  skipUnlessForcedFamilyRuns();
  struct Case {
    const char *what;
    Shape x, w, strides, padLow, padHigh, dilations;
    int64_t groups;
    Shape lhsDilation;
  };
  const Case cases[] = {
      {"3x3 stride 1 (f32: Winograd)", {2, 16, 14, 14}, {24, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, {}},
      {"3x3 stride 2", {1, 12, 15, 13}, {20, 12, 3, 3}, {2, 2}, {1, 1}, {0, 1}, {1, 1}, 1, {}},
      {"7x7 stride 2 stem", {1, 3, 32, 32}, {16, 3, 7, 7}, {2, 2}, {3, 3}, {3, 3}, {1, 1}, 1, {}},
      {"dilated, grouped", {2, 8, 12, 12}, {10, 4, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 2, {}},
      {"pointwise", {2, 40, 7, 9}, {33, 40, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, {}},
      {"1-D, odd channels", {3, 7, 50}, {9, 7, 5}, {1}, {2}, {2}, {1}, 1, {}},
      {"depthwise (widened)", {1, 8, 10, 10}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 8, {}},
      {"transposed (widened)", {1, 6, 5, 5}, {4, 6, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 1, {2, 2}},
      // Large enough that the conversions of the output (and the widened copies) are split
      // over the threads.
      {"pointwise, rows rounded on threads", {1, 64, 32, 32}, {96, 64, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, {}},
      {"depthwise, slabs of channels", {1, 64, 40, 40}, {64, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 64, {}},
      {"depthwise x2, strided, slabs over two images", {2, 40, 60, 60}, {80, 1, 3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 40, {}},
  };
  std::mt19937 rng(25);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (Half16 type : {Half16::BF16, Half16::F16})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(typeName(type)) + " " + c.what);
      size_t spatial = c.x.size() - 2;
      Shape y{c.x[0], c.w[0]};
      for (size_t d = 0; d < spatial; ++d) {
        int64_t lhs = c.lhsDilation.empty() ? 1 : c.lhsDilation[d];
        int64_t in = (c.x[d + 2] - 1) * lhs + 1 + c.padLow[d] + c.padHigh[d];
        y.push_back((in - c.dilations[d] * (c.w[d + 2] - 1) - 1) / c.strides[d] + 1);
      }
      tccrt_dtype dtype = type == Half16::BF16 ? TCCRT_BF16 : TCCRT_F16;
      ConvGeometry g16 = makeConvGeometry(c.x, c.w, y, c.strides, c.padLow, c.padHigh,
                                          c.dilations, c.groups, c.lhsDilation, dtype);
      ConvGeometry g32 = makeConvGeometry(c.x, c.w, y, c.strides, c.padLow, c.padHigh,
                                          c.dilations, c.groups, c.lhsDilation);
      auto count = [](const Shape &s) {
        int64_t n = 1;
        for (int64_t d : s)
          n *= d;
        return n;
      };
      std::vector<uint16_t> x16(count(c.x)), w16(count(c.w)), y16(count(y));
      std::vector<float> x32(x16.size()), w32(w16.size()), y32(y16.size());
      for (size_t i = 0; i < x16.size(); ++i)
        x32[i] = widen(type, x16[i] = narrow(type, dist(rng)));
      for (size_t i = 0; i < w16.size(); ++i)
        w32[i] = widen(type, w16[i] = narrow(type, dist(rng)));
      size_t workspace = std::max(g16.workspaceBytes, g32.workspaceBytes) * 3 + 64;
      std::vector<char> ws(workspace + 64);
      void *aligned = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
      runConv(g32, x32.data(), w32.data(), y32.data(), static_cast<float *>(aligned), 1, nullptr,
              false);
      PackedOperand cache;
      for (int threads : {1, 3}) {
        runConv16(g16, x16.data(), w16.data(), y16.data(), aligned, threads, &cache, true);
        std::vector<uint16_t> first = y16;
        runConv16(g16, x16.data(), w16.data(), y16.data(), aligned, threads, &cache, true);
        EXPECT_EQ(y16, first) << "second run with the packed weights, " << threads << " threads";
        int64_t taps = c.w[1] * count(Shape(c.w.begin() + 2, c.w.end()));
        size_t bad = 0;
        for (size_t i = 0; i < y16.size(); ++i) {
          // One rounding to the 16-bit type, and f32 sums in another order.
          double ref = y32[i], got = widen(type, y16[i]);
          double ulp = type == Half16::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
          if (!(std::fabs(got - ref) <= std::fabs(ref) * ulp + taps * 1.2e-7 * 2) && ++bad <= 3)
            ADD_FAILURE() << "output " << i << " is " << got << ", expected " << ref;
        }
        EXPECT_EQ(bad, 0u) << threads << " threads";
      }
    }
}

} // namespace
