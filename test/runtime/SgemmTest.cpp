//===- SgemmTest.cpp - libtccrt's sgemm against a float64 reference --------===//
//
// Runs on the kernel family this process uses (the widest the CPU has, or $TCC_GEMM_ISA's);
// CMake registers the tests again for each narrower family (test names prefixed "gemm-avx2:",
// "gemm-generic:"), and a family this CPU lacks skips, saying so.
#include "Activation.h"
#include "CpuMath.h"
#include "CpuMathAvx512.h"
#include "Sgemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace tcc::rt;

namespace {

void skipUnlessForcedFamilyRuns() {
  if (const char *forced = std::getenv("TCC_GEMM_ISA"))
    if (*forced && std::string(forced) != sgemmIsaName(sgemmIsa()))
      GTEST_SKIP() << "this CPU cannot run the " << forced << " kernels (using "
                   << sgemmIsaName(sgemmIsa()) << ")";
}

std::vector<float> random(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

struct Problem {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  std::vector<float> a, b, c;

  Problem(std::mt19937 &rng, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          float beta, int64_t pad = 0)
      : ta(ta), tb(tb), m(m), n(n), k(k), lda((ta ? m : k) + pad), ldb((tb ? k : n) + pad),
        ldc(n + pad), alpha(alpha), beta(beta) {
    a = random((size_t)((ta ? k : m) * lda), rng);
    b = random((size_t)((tb ? n : k) * ldb), rng);
    c = random((size_t)(m * ldc), rng);
  }
  float at(const std::vector<float> &v, int64_t ld, bool t, int64_t r, int64_t col) const {
    return t ? v[col * ld + r] : v[r * ld + col];
  }
  /// C as sgemm must leave it, in float64; and the bound on float32 rounding per element.
  void reference(std::vector<double> &want, std::vector<double> &bound) const {
    want.assign(c.begin(), c.end());
    bound.assign(c.size(), 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          double x = (double)at(a, lda, ta, i, p) * at(b, ldb, tb, p, j);
          acc += x;
          mag += std::fabs(x);
        }
        double old = c[i * ldc + j];
        want[i * ldc + j] = alpha * acc + (beta == 0 ? 0.0 : beta * old);
        bound[i * ldc + j] =
            (std::fabs(alpha) * mag + (beta == 0 ? 0.0 : std::fabs(beta * old))) * (k + 2) * 1.2e-7 + 1e-6;
      }
  }
  std::vector<float> run(int threads, const SgemmPacked *pa = nullptr,
                         const SgemmPacked *pb = nullptr) const {
    std::vector<float> out = c;
    sgemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, out.data(), ldc, threads,
          pa, pb);
    return out;
  }
  void check(const std::vector<float> &got, const std::string &what) const {
    std::vector<double> want, bound;
    reference(want, bound);
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - want[i]) <= bound[i]) && ++bad <= 5)
        ADD_FAILURE() << what << ": element " << i << " (row " << i / ldc << ", column "
                      << i % ldc << ") is " << got[i] << ", expected " << want[i];
    EXPECT_EQ(bad, 0u) << what;
  }
  std::string name() const {
    return std::string(ta ? "A^T" : "A") + (tb ? " B^T" : " B") + " m=" + std::to_string(m) +
           " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
           " ld+" + std::to_string(ldc - n);
  }
};

TEST(Sgemm, RandomShapesEveryTransposeAndStride) {
  skipUnlessForcedFamilyRuns();
  std::mt19937 rng(11);
  for (int trial = 0; trial < 120; ++trial) {
    // Mostly small, with some past one k block (256) and one column block (512).
    int64_t m = 1 + rng() % 40, n = 1 + rng() % 70, k = 1 + rng() % 90;
    if (trial % 10 == 0)
      k = 250 + rng() % 300;
    if (trial % 15 == 0)
      n = 500 + rng() % 200;
    float alpha = trial % 3 == 0 ? -0.75f : 1.0f, beta = trial % 4 == 0 ? 0.5f : 0.0f;
    Problem p(rng, trial & 1, trial & 2, m, n, k, alpha, beta, trial % 5 == 0 ? 3 : 0);
    SCOPED_TRACE(p.name());
    p.check(p.run(1 + trial % 3), "sgemm");
  }
}

TEST(Sgemm, ResultDoesNotDependOnThreadsOrPrepacking) {
  skipUnlessForcedFamilyRuns();
  std::mt19937 rng(12);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{67, 1100, 300},
                         {200, 45, 520},
                         {3, 515, 129},
                         {1, 1100, 301}}) { // one row: the 4-panel row kernel, or B in place
    for (int t = 0; t < 4; ++t) {
      Problem p(rng, t & 1, t & 2, m, n, k, 1.0f, 0.25f);
      SCOPED_TRACE(p.name());
      std::vector<float> one = p.run(1);
      p.check(one, "one thread");
      EXPECT_EQ(p.run(2), one) << "two threads";
      EXPECT_EQ(p.run(3), one) << "three threads";
      SgemmPacked pa = packSgemmA(sgemmIsa(), p.ta, m, k, p.a.data(), p.lda, 2);
      SgemmPacked pb = packSgemmB(sgemmIsa(), p.tb, k, n, p.b.data(), p.ldb, 2);
      EXPECT_EQ(p.run(2, &pa, &pb), one) << "both prepacked";
      EXPECT_EQ(p.run(1, &pa, nullptr), one) << "A prepacked";
      std::vector<float> out = p.c;
      sgemm(p.ta, p.tb, m, n, k, p.alpha, nullptr, p.lda, nullptr, p.ldb, p.beta, out.data(),
            p.ldc, 2, &pa, &pb);
      EXPECT_EQ(out, one) << "prepacked, no plain operands";
    }
  }
}

TEST(Sgemm, FewRowsReadBInPlace) {
  skipUnlessForcedFamilyRuns();
  // Up to two panels of rows and a non-transposed B: B is read where it is, its last partial
  // panel of columns packed; views with row strides past the width.
  std::mt19937 rng(13);
  for (int64_t m : {1, 2, 5, 13, 27})
    for (int64_t n : {1, 15, 16, 31, 33, 100, 1000})
      for (int64_t pad : {0, 5}) {
        Problem p(rng, false, false, m, n, 1 + rng() % 300, 1.0f, pad ? 1.0f : 0.0f, pad);
        SCOPED_TRACE(p.name());
        p.check(p.run(1 + pad % 2), "sgemm");
      }
}

TEST(Sgemm, PackedForAnotherShapeOrFamilyIsRepacked) {
  skipUnlessForcedFamilyRuns();
  std::mt19937 rng(14);
  Problem p(rng, false, false, 20, 40, 30, 1.0f, 0.0f);
  SgemmPacked otherK = packSgemmB(sgemmIsa(), false, 29, 40, p.b.data(), p.ldb);
  SgemmPacked generic = packSgemmA(SgemmIsa::Generic, false, 20, 30, p.a.data(), p.lda);
  p.check(p.run(1, &generic, &otherK), "mismatched packs");
}

TEST(Sgemm, EpiloguesOnEveryPath) {
  skipUnlessForcedFamilyRuns();
  // One row (the row kernel with B packed, the microkernel with B in place), few and many rows,
  // k past one block, a last partial panel, 40 columns (A read in place); as the tile is
  // stored: a column bias then ReLU
  // (a GEMM's), or a row bias, a residual (its own row stride) and a clamp to [-0.3, 0.4] (a
  // convolution's), or all of them.
  std::mt19937 rng(16);
  enum Kind { ColumnBiasRelu, RowBiasResidualClamp, All };
  for (Kind kind : {ColumnBiasRelu, RowBiasResidualClamp, All})
    for (int64_t m : {1, 2, 29})
      for (bool tb : {false, true})
        for (bool prepacked : {false, true})
          for (int64_t n : {150, 40}) {
            Problem p(rng, false, tb, m, n, 400, 0.5f, m == 2 ? 0.5f : 0.0f);
            std::vector<float> bias = random((size_t)n, rng), rowBias = random((size_t)m, rng);
            const int64_t ldr = 157;
            std::vector<float> residual = random((size_t)(m * ldr), rng);
            SCOPED_TRACE(p.name() + (prepacked ? " prepacked" : "") + " kind " +
                         std::to_string(kind));
            SgemmPacked pb = packSgemmB(sgemmIsa(), tb, p.k, p.n, p.b.data(), p.ldb);
            SgemmEpilogue epilogue;
            if (kind != RowBiasResidualClamp)
              epilogue.bias = bias.data();
            if (kind != ColumnBiasRelu) {
              epilogue.rowBias = rowBias.data();
              epilogue.residual = residual.data();
              epilogue.ldResidual = ldr;
            }
            epilogue.clamp = true;
            epilogue.lo = kind == ColumnBiasRelu ? 0.0f : -0.3f;
            epilogue.hi = kind == ColumnBiasRelu ? INFINITY : 0.4f;
            std::vector<float> got = p.c;
            sgemm(false, tb, m, p.n, p.k, p.alpha, p.a.data(), p.lda, p.b.data(), p.ldb, p.beta,
                  got.data(), p.ldc, 2, nullptr, prepacked ? &pb : nullptr, &epilogue);
            std::vector<double> want, bound;
            p.reference(want, bound);
            size_t bad = 0;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < p.n; ++j) {
                size_t at = (size_t)(i * p.ldc + j);
                double w = want[at];
                if (epilogue.bias)
                  w += bias[j];
                if (epilogue.rowBias)
                  w += rowBias[i] + residual[i * ldr + j];
                w = std::min(std::max(w, (double)epilogue.lo), (double)epilogue.hi);
                if (!(std::fabs(got[at] - w) <= bound[at] + 1e-6) && ++bad <= 5)
                  ADD_FAILURE() << "C[" << i << "][" << j << "] is " << got[at] << ", expected "
                                << w;
              }
            EXPECT_EQ(bad, 0u);
          }
}

TEST(Sgemm, GeluEpiloguesMatchTheirDefinitions) {
  skipUnlessForcedFamilyRuns();
  // A transformer's first FFN product: bias then the erf GELU (BERT, ViT) or the tanh one
  // (GPT-2), applied by sgemm to each row panel's block. One row (the row kernel), rows past a
  // panel, a partial last panel, 2 threads. Against the definitions in double precision on the
  // product as sgemm computes it (the same call without the activation), so that only the
  // GELU's own error counts: a few ulps of the vectorised erf / tanh, scaled by |x|.
  std::mt19937 rng(17);
  for (ActivationKind kind : {ActivationKind::GeluErf, ActivationKind::GeluTanh})
    for (int64_t m : {1, 37})
      for (int64_t n : {150, 40}) {
        Problem p(rng, false, true, m, n, 96, 1.0f, 0.0f);
        std::vector<float> bias = random((size_t)n, rng);
        SCOPED_TRACE(p.name() + (kind == ActivationKind::GeluErf ? " erf" : " tanh"));
        SgemmEpilogue epilogue;
        epilogue.bias = bias.data();
        std::vector<float> plain = p.c, got = p.c;
        sgemm(false, true, m, p.n, p.k, p.alpha, p.a.data(), p.lda, p.b.data(), p.ldb, p.beta,
              plain.data(), p.ldc, 2, nullptr, nullptr, &epilogue);
        epilogue.activation.kind = kind;
        sgemm(false, true, m, p.n, p.k, p.alpha, p.a.data(), p.lda, p.b.data(), p.ldb, p.beta,
              got.data(), p.ldc, 2, nullptr, nullptr, &epilogue);
        size_t bad = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < p.n; ++j) {
            size_t at = (size_t)(i * p.ldc + j);
            double x = plain[at];
            double w = kind == ActivationKind::GeluErf
                           ? 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))
                           : 0.5 * x *
                                 (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
            if (!(std::fabs(got[at] - w) <= 4e-7 * (1 + std::fabs(x))) && ++bad <= 5)
              ADD_FAILURE() << "C[" << i << "][" << j << "] is " << got[at] << ", expected " << w
                            << " (x " << x << ")";
          }
        EXPECT_EQ(bad, 0u);
      }
}

TEST(Sgemm, HardSwishIsItsDefinitionBitForBit) {
  skipUnlessForcedFamilyRuns();
  // x * min(max(alpha * x + beta, 0), 1) in f32 (the product and the sum each rounded), the
  // clamp keeping NaN as the generated kernels' tcc_max and tcc_min do: every value of a fine
  // grid over the bend, random ones, signed zeros, infinities, NaN, the largest and a
  // subnormal; MobileNetV3's gate and one whose gate is NaN at 0 (alpha infinite). Rows of 37
  // (a vector tail) 40 apart.
  std::vector<float> values;
  for (int i = -600; i <= 600; ++i)
    values.push_back((float)i / 100);
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> wide(-1e4f, 1e4f);
  for (int i = 0; i < 200; ++i)
    values.push_back(wide(rng));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::denorm_min()})
    values.push_back(v);
  const int64_t cols = 37, ld = 40;
  while (values.size() % cols)
    values.push_back(1.0f);
  const int64_t rows = (int64_t)values.size() / cols;
  for (auto [alpha, beta] : {std::pair<float, float>{1.0f / 6, 0.5f}, {inf, 0.25f}}) {
    SCOPED_TRACE("alpha " + std::to_string(alpha) + ", beta " + std::to_string(beta));
    std::vector<float> x((size_t)(rows * ld), -7.0f);
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(values.begin() + i * cols, cols, x.begin() + i * ld);
    Activation a;
    a.kind = ActivationKind::HardSwish;
    a.alpha = alpha;
    a.beta = beta;
    activateRows(a, x.data(), rows, cols, ld);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < ld; ++j) {
        float got = x[(size_t)(i * ld + j)];
        if (j >= cols) { // between rows: untouched
          EXPECT_EQ(got, -7.0f);
          continue;
        }
        volatile float product = values[(size_t)(i * cols + j)] * alpha; // rounded alone
        float v = values[(size_t)(i * cols + j)], gate = product + beta;
        float clamped = std::isnan(gate) ? gate : std::min(std::max(gate, 0.0f), 1.0f);
        float want = v * clamped;
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(got)) << "x " << v << " gave " << got;
        else
          EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
              << "x " << v << " gave " << got << ", expected " << want;
      }
  }
}

/// activateRows(a) on about 4 million inputs spread over every bit pattern (each sign,
/// exponent and NaN payload), a grid over [lo, hi] / 1000 in steps of step / 1000 and `extra`,
/// in rows of 1021 (vector tails) 1024 apart: the mismatches against want(x), bit for bit (any
/// NaN for a NaN), the first five reported, and any change to the gaps between rows.
size_t activationMismatches(const Activation &a, int lo, int hi, int step,
                            std::initializer_list<float> extra,
                            const std::function<float(float)> &want) {
  std::vector<float> values;
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 1021)
    values.push_back(tcc::rt::cpumath::tcc_f32_from_bits((uint32_t)bits));
  for (int i = lo; i <= hi; i += step)
    values.push_back((float)i / 1000);
  values.insert(values.end(), extra);
  const int64_t cols = 1021, ld = 1024;
  while (values.size() % cols)
    values.push_back(-1.0f);
  const int64_t rows = (int64_t)values.size() / cols;
  std::vector<float> x((size_t)(rows * ld), -7.0f);
  for (int64_t i = 0; i < rows; ++i)
    std::copy_n(values.begin() + i * cols, cols, x.begin() + i * ld);
  activateRows(a, x.data(), rows, cols, ld);
  size_t bad = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < ld; ++j) {
      const float got = x[(size_t)(i * ld + j)];
      if (j >= cols) {
        bad += got != -7.0f;
        continue;
      }
      const float v = values[(size_t)(i * cols + j)], w = want(v);
      const bool same = std::isnan(w) ? std::isnan(got) : std::memcmp(&got, &w, 4) == 0;
      if (!same && ++bad <= 5)
        ADD_FAILURE() << "x " << std::hexfloat << v << " gave " << got << ", expected " << w;
    }
  return bad;
}

TEST(Sgemm, SiluIsXTimesTccSigmoidBitForBit) {
  skipUnlessForcedFamilyRuns();
  // x * tcc_sigmoidf(x), the generated kernels' SiLU, on every ISA's path (the AVX-512 one
  // written with its own instructions); the grid over [-120, 20] and the extra values reach
  // the subnormal results below -87 and the clamp at -104.
  const float inf = std::numeric_limits<float>::infinity();
  Activation a;
  a.kind = ActivationKind::Silu;
  EXPECT_EQ(activationMismatches(a, -120000, 20000, 7, {0.0f, -0.0f, inf, -inf, -104.0f, -87.5f, 88.0f},
                                 [](float v) { return v * tcc::rt::cpumath::tcc_sigmoidf(v); }),
            0u);
}

TEST(Sgemm, GelusAreTheirDefinitionsBitForBit) {
  skipUnlessForcedFamilyRuns();
  // GELU (erf) and GELU (tanh) as activateRows applies them on every ISA's path (AVX-512's
  // written with its own instructions), against the f32 definitions op for op with the
  // generated kernels' tcc_erff and tcc_tanhf, each product and sum rounded alone; the grid
  // over [-12, 12] reaches both branches of erf and tanh and their clamps.
  const float inf = std::numeric_limits<float>::infinity();
  Activation erf, tanh;
  erf.kind = ActivationKind::GeluErf;
  tanh.kind = ActivationKind::GeluTanh;
  EXPECT_EQ(activationMismatches(erf, -12000, 12000, 3, {0.0f, -0.0f, inf, -inf},
                                 [](float v) {
                                   volatile float step = v / 1.41421356f; // rounded alone
                                   step = tcc::rt::cpumath::tcc_erff(step) + 1.0f;
                                   step = v * step;
                                   return step * 0.5f;
                                 }),
            0u);
  EXPECT_EQ(activationMismatches(tanh, -12000, 12000, 3, {0.0f, -0.0f, inf, -inf},
                                 [](float v) {
                                   volatile float step = v * v;
                                   step = step * v;
                                   step = 0.044715f * step;
                                   step = v + step;
                                   step = 0.797884561f * step;
                                   step = tcc::rt::cpumath::tcc_tanhf(step) + 1.0f;
                                   volatile float halfV = 0.5f * v;
                                   return halfV * step;
                                 }),
            0u);
}

/// e^x by CpuMathAvx512.h's expNonpositiveVectors (four vectors at a time), in place.
[[gnu::target("avx512f")]] void expNonpositiveAvx512(float *x, size_t n) {
  for (size_t i = 0; i + 64 <= n; i += 64) {
    __m512 v[4];
    for (int u = 0; u < 4; ++u)
      v[u] = _mm512_loadu_ps(x + i + 16 * u);
    tcc::rt::expNonpositiveVectors<4>(v);
    for (int u = 0; u < 4; ++u)
      _mm512_storeu_ps(x + i + 16 * u, v[u]);
  }
}

TEST(CpuMathAvx512, ExpNonpositiveIsTccExpNonpositiveBitForBit) {
  // The AVX-512 exp that attention's softmax and SiLU use, against the portable
  // tcc_exp_nonpositive, bit for bit: about 2 million non-positive inputs spread over every bit
  // pattern with the sign set (subnormal results below -87.3, the clamp at -104, -inf, NaN
  // payloads), a fine grid over [-110, 0] and both zeros.
  if (!__builtin_cpu_supports("avx512f"))
    GTEST_SKIP() << "this CPU has no AVX-512F";
  std::vector<float> values;
  for (uint64_t bits = 0x80000000ull; bits < (1ull << 32); bits += 1021)
    values.push_back(tcc::rt::cpumath::tcc_f32_from_bits((uint32_t)bits));
  for (int i = -110000; i <= 0; i += 3)
    values.push_back((float)i / 1000);
  values.push_back(0.0f);
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  while (values.size() % 64)
    values.push_back(-1.0f);
  std::vector<float> got = values;
  expNonpositiveAvx512(got.data(), got.size());
  size_t bad = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const float want = tcc::rt::cpumath::tcc_exp_nonpositive(values[i]);
    const bool same =
        std::isnan(want) ? std::isnan(got[i]) : std::memcmp(&got[i], &want, sizeof(float)) == 0;
    if (!same && ++bad <= 5)
      ADD_FAILURE() << "x " << std::hexfloat << values[i] << " gave " << got[i] << ", expected "
                    << want;
  }
  EXPECT_EQ(bad, 0u);
}

TEST(Sgemm, ClampKeepsNaN) {
  skipUnlessForcedFamilyRuns();
  // A NaN product stays NaN through a clamp (as max/min in generated kernels); so does one
  // from the residual.
  std::mt19937 rng(17);
  for (int64_t m : {1, 5}) {
    Problem p(rng, false, false, m, 40, 8, 1.0f, 0.0f);
    p.a[0] = std::numeric_limits<float>::quiet_NaN(); // row 0 of the product
    std::vector<float> residual = random((size_t)(m * p.n), rng);
    residual.back() = std::numeric_limits<float>::quiet_NaN();
    SgemmEpilogue epilogue;
    epilogue.residual = residual.data();
    epilogue.ldResidual = p.n;
    epilogue.clamp = true;
    epilogue.lo = 0.0f;
    epilogue.hi = 6.0f;
    std::vector<float> got = p.c;
    sgemm(false, false, m, p.n, p.k, 1.0f, p.a.data(), p.lda, p.b.data(), p.ldb, 0.0f,
          got.data(), p.ldc, 1, nullptr, nullptr, &epilogue);
    for (int64_t j = 0; j < p.n; ++j)
      EXPECT_TRUE(std::isnan(got[j])) << "row 0, column " << j;
    EXPECT_TRUE(std::isnan(got[(m - 1) * p.ldc + p.n - 1]));
    for (int64_t i = 1; i < m; ++i)
      for (int64_t j = 0; j + 1 < p.n; ++j)
        EXPECT_TRUE(got[i * p.ldc + j] >= 0.0f && got[i * p.ldc + j] <= 6.0f);
  }
}

TEST(Sgemm, BetaZeroNeverReadsC) {
  skipUnlessForcedFamilyRuns();
  std::mt19937 rng(15);
  for (int64_t m : {1, 7, 30}) {
    Problem p(rng, false, true, m, 37, 19, 1.0f, 0.0f);
    std::fill(p.c.begin(), p.c.end(), std::numeric_limits<float>::quiet_NaN());
    p.check(p.run(2), "C of NaN with beta 0");
  }
}

TEST(Sgemm, EmptyInnerDimensionScalesC) {
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  sgemm(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, 2.0f, c.data(), 3, 1);
  EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8, 10, 12}));
  sgemm(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, 0.0f, c.data(), 3, 1);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

TEST(Sgemm, FamiliesAreChosenByCpuFeatures) {
  // The generic family runs anywhere; the chosen one is supported; without a cap, the widest.
  EXPECT_TRUE(sgemmIsaSupported(SgemmIsa::Generic));
  EXPECT_TRUE(sgemmIsaSupported(sgemmIsa()));
  if (const char *forced = std::getenv("TCC_GEMM_ISA"); !forced || !*forced) {
    for (SgemmIsa isa : {SgemmIsa::Avx2, SgemmIsa::Avx512})
      if (sgemmIsaSupported(isa)) {
        EXPECT_GE((int)sgemmIsa(), (int)isa) << sgemmIsaName(isa);
      }
  }
}

} // namespace
