//===- GemmBench.cpp - libtccrt's sgemm vs the FMA peak and OpenBLAS ------===//
//
// tccrt-gemm-bench [--threads N] [--repeats N] [--json]: measures this core's FMA peak (independent
// 512- and 256-bit FMA chains, whichever the CPU has), then times libtccrt's sgemm (packing per
// call, and with the weight operand prepacked as compiled programs do) and OpenBLAS's cblas_sgemm
// on the same shapes in one run, each the best of N repeats, and the same product in bf16
// (gemm16, B prepacked: AVX512-BF16 where the CPU has it). Not a test (target
// tccrt-gemm-bench, built on request); bench/gemm_cpu.py runs it and writes the result tables.
#include "DType.h"
#include "Sgemm.h"
#include "tcc/Runtime/CpuFeatures.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace tcc::rt;

extern "C" char *openblas_get_corename(void);

namespace {

using Clock = std::chrono::steady_clock;

template <class F> double bestSeconds(int repeats, const F &f) {
  f(); // warm up
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

// 12 independent accumulators hide the FMA latency (4-5 cycles) on two FMA pipes; named
// variables (an array would live in memory), and the empty asm keeps every chain in its
// register and every FMA executed.
__attribute__((target("avx512f"))) double fmaPeak512(int64_t iters) {
  __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  __m512 c0 = _mm512_set1_ps(0e-3f);
  __m512 c1 = _mm512_set1_ps(1e-3f);
  __m512 c2 = _mm512_set1_ps(2e-3f);
  __m512 c3 = _mm512_set1_ps(3e-3f);
  __m512 c4 = _mm512_set1_ps(4e-3f);
  __m512 c5 = _mm512_set1_ps(5e-3f);
  __m512 c6 = _mm512_set1_ps(6e-3f);
  __m512 c7 = _mm512_set1_ps(7e-3f);
  __m512 c8 = _mm512_set1_ps(8e-3f);
  __m512 c9 = _mm512_set1_ps(9e-3f);
  __m512 c10 = _mm512_set1_ps(10e-3f);
  __m512 c11 = _mm512_set1_ps(11e-3f);
  for (int64_t it = 0; it < iters; ++it) {
    c0 = _mm512_fmadd_ps(c0, x, y);
    c1 = _mm512_fmadd_ps(c1, x, y);
    c2 = _mm512_fmadd_ps(c2, x, y);
    c3 = _mm512_fmadd_ps(c3, x, y);
    c4 = _mm512_fmadd_ps(c4, x, y);
    c5 = _mm512_fmadd_ps(c5, x, y);
    c6 = _mm512_fmadd_ps(c6, x, y);
    c7 = _mm512_fmadd_ps(c7, x, y);
    c8 = _mm512_fmadd_ps(c8, x, y);
    c9 = _mm512_fmadd_ps(c9, x, y);
    c10 = _mm512_fmadd_ps(c10, x, y);
    c11 = _mm512_fmadd_ps(c11, x, y);
    asm volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7), "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11));
  }
  __m512 s = c0;
  s = _mm512_add_ps(s, c1);
  s = _mm512_add_ps(s, c2);
  s = _mm512_add_ps(s, c3);
  s = _mm512_add_ps(s, c4);
  s = _mm512_add_ps(s, c5);
  s = _mm512_add_ps(s, c6);
  s = _mm512_add_ps(s, c7);
  s = _mm512_add_ps(s, c8);
  s = _mm512_add_ps(s, c9);
  s = _mm512_add_ps(s, c10);
  s = _mm512_add_ps(s, c11);
  float v[16];
  _mm512_storeu_ps(v, s);
  return v[0];
}

__attribute__((target("avx2,fma"))) double fmaPeak256(int64_t iters) {
  __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  __m256 c0 = _mm256_set1_ps(0e-3f);
  __m256 c1 = _mm256_set1_ps(1e-3f);
  __m256 c2 = _mm256_set1_ps(2e-3f);
  __m256 c3 = _mm256_set1_ps(3e-3f);
  __m256 c4 = _mm256_set1_ps(4e-3f);
  __m256 c5 = _mm256_set1_ps(5e-3f);
  __m256 c6 = _mm256_set1_ps(6e-3f);
  __m256 c7 = _mm256_set1_ps(7e-3f);
  __m256 c8 = _mm256_set1_ps(8e-3f);
  __m256 c9 = _mm256_set1_ps(9e-3f);
  __m256 c10 = _mm256_set1_ps(10e-3f);
  __m256 c11 = _mm256_set1_ps(11e-3f);
  for (int64_t it = 0; it < iters; ++it) {
    c0 = _mm256_fmadd_ps(c0, x, y);
    c1 = _mm256_fmadd_ps(c1, x, y);
    c2 = _mm256_fmadd_ps(c2, x, y);
    c3 = _mm256_fmadd_ps(c3, x, y);
    c4 = _mm256_fmadd_ps(c4, x, y);
    c5 = _mm256_fmadd_ps(c5, x, y);
    c6 = _mm256_fmadd_ps(c6, x, y);
    c7 = _mm256_fmadd_ps(c7, x, y);
    c8 = _mm256_fmadd_ps(c8, x, y);
    c9 = _mm256_fmadd_ps(c9, x, y);
    c10 = _mm256_fmadd_ps(c10, x, y);
    c11 = _mm256_fmadd_ps(c11, x, y);
    asm volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7), "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11));
  }
  __m256 s = c0;
  s = _mm256_add_ps(s, c1);
  s = _mm256_add_ps(s, c2);
  s = _mm256_add_ps(s, c3);
  s = _mm256_add_ps(s, c4);
  s = _mm256_add_ps(s, c5);
  s = _mm256_add_ps(s, c6);
  s = _mm256_add_ps(s, c7);
  s = _mm256_add_ps(s, c8);
  s = _mm256_add_ps(s, c9);
  s = _mm256_add_ps(s, c10);
  s = _mm256_add_ps(s, c11);
  float v[8];
  _mm256_storeu_ps(v, s);
  return v[0];
}

/// GFLOP/s of one thread's FMA chains of the given width (0 when the CPU lacks it).
double measurePeak(int bits, int repeats) {
  const int64_t iters = 20000000;
  volatile double sink = 0;
  if (bits == 512 && cpuHasFeature("avx512f")) {
    double s = bestSeconds(repeats, [&] { sink = sink + fmaPeak512(iters); });
    return iters * 12 * 16 * 2 / s * 1e-9;
  }
  if (bits == 256 && cpuHasFeature("avx2") && cpuHasFeature("fma")) {
    double s = bestSeconds(repeats, [&] { sink = sink + fmaPeak256(iters); });
    return iters * 12 * 8 * 2 / s * 1e-9;
  }
  return 0;
}

struct Shape {
  const char *what;
  int64_t m, n, k;
  bool transB;
};

} // namespace

int main(int argc, char **argv) {
  int threads = 1, repeats = 10;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else if (a == "--json")
      json = true;
    else {
      std::fprintf(stderr, "usage: tccrt-gemm-bench [--threads N] [--repeats N] [--json]\n");
      return 2;
    }
  }
  openblas_set_num_threads(threads);
  double peak512 = measurePeak(512, 3), peak256 = measurePeak(256, 3);
  const char *family = sgemmIsaName(sgemmIsa());
  double peak = sgemmIsa() == SgemmIsa::Avx512 ? peak512 : peak256;
  const char *family16 = sgemmIsaName(gemm16Isa(Half16::BF16));
  if (json)
    std::printf("{\"threads\": %d, \"family\": \"%s\", \"bf16_family\": \"%s\", "
                "\"openblas_core\": \"%s\", \"fma_peak_512_gflops\": %.2f, "
                "\"fma_peak_256_gflops\": %.2f, \"shapes\": [\n",
                threads, family, family16, openblas_get_corename(), peak512, peak256);
  else
    std::printf("sgemm family %s (bf16: %s), OpenBLAS core %s, %d thread(s); one core's FMA "
                "peak: 512-bit %.1f GFLOP/s, 256-bit %.1f GFLOP/s\n%-34s %9s %9s %9s %9s %8s "
                "%9s %8s\n",
                family, family16, openblas_get_corename(), threads, peak512, peak256,
                "shape (m n k)", "tcc", "prepacked", "openblas", "% peak", "tcc/obl", "bf16 pre",
                "f32/bf16");
  // Large squares; the GEMMs of transformer layers (tokens x d_model x d_ff); im2col GEMMs of
  // ResNet-like convs (c_out x h*w x c_in*9); batch-1 layers (GEMV-like, weights as nn.Linear's
  // transposed [out, in] and as MatMul's [in, out]).
  std::vector<Shape> shapes = {
      {"square", 1024, 1024, 1024, false}, {"square", 2048, 2048, 2048, false},
      {"bert ffn1", 128, 1536, 384, true},   {"bert ffn2", 128, 384, 1536, true},
      {"gpt2 qkv", 256, 2304, 768, false},   {"conv3x3 64@56", 64, 3136, 576, false},
      {"conv3x3 256@14", 256, 196, 2304, false}, {"conv1x1 1024->256@14", 256, 196, 1024, false},
      {"gemv linear 2048->1000", 1, 1000, 2048, true}, {"gemv matmul 768->3072", 1, 3072, 768, false},
      {"batch4 linear 512->512", 4, 512, 512, true},  {"lstm gates 1x256->1024", 1, 1024, 256, true},
  };
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  bool first = true;
  for (const Shape &s : shapes) {
    std::vector<float> a((size_t)(s.m * s.k)), b((size_t)(s.k * s.n)), c((size_t)(s.m * s.n));
    for (float &x : a)
      x = dist(rng);
    for (float &x : b)
      x = dist(rng);
    int64_t ldb = s.transB ? s.k : s.n;
    double flops = 2.0 * s.m * s.n * s.k;
    int reps = flops > 4e9 ? std::max(2, repeats / 4) : flops < 1e7 ? repeats * 20 : repeats;
    double tOwn = bestSeconds(reps, [&] {
      sgemm(false, s.transB, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), ldb, 0.0f, c.data(),
            s.n, threads);
    });
    SgemmPacked packed = packSgemmB(sgemmIsa(), s.transB, s.k, s.n, b.data(), ldb, threads);
    double tPacked = bestSeconds(reps, [&] {
      sgemm(false, s.transB, s.m, s.n, s.k, 1.0f, a.data(), s.k, nullptr, ldb, 0.0f, c.data(),
            s.n, threads, nullptr, &packed);
    });
    double tBlas = bestSeconds(reps, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, s.transB ? CblasTrans : CblasNoTrans, (int)s.m,
                  (int)s.n, (int)s.k, 1.0f, a.data(), (int)s.k, b.data(), (int)ldb, 0.0f,
                  c.data(), (int)s.n);
    });
    // The same product in bf16 (gemm16: AVX512-BF16 pairs where the CPU has them), B prepacked.
    std::vector<uint16_t> a16(a.size()), b16(b.size());
    for (size_t i = 0; i < a.size(); ++i)
      a16[i] = floatToBfloat16(a[i]);
    for (size_t i = 0; i < b.size(); ++i)
      b16[i] = floatToBfloat16(b[i]);
    SgemmPacked packed16 =
        packGemm16B(Half16::BF16, s.transB, s.k, s.n, b16.data(), ldb, threads);
    double tBf16 = bestSeconds(reps, [&] {
      gemm16(Half16::BF16, false, s.transB, s.m, s.n, s.k, 1.0f, a16.data(), s.k, nullptr, ldb,
             0.0f, c.data(), s.n, threads, nullptr, &packed16);
    });
    double own = flops / tOwn * 1e-9, pre = flops / tPacked * 1e-9, blas = flops / tBlas * 1e-9;
    double bf16 = flops / tBf16 * 1e-9;
    double ofPeak = peak > 0 ? 100.0 * own / (peak * threads) : 0;
    if (json) {
      std::printf("%s  {\"what\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"trans_b\": %s, "
                  "\"tcc_gflops\": %.2f, \"tcc_prepacked_gflops\": %.2f, "
                  "\"openblas_gflops\": %.2f, \"tcc_bf16_prepacked_gflops\": %.2f}",
                  first ? "" : ",\n", s.what, (long long)s.m, (long long)s.n, (long long)s.k,
                  s.transB ? "true" : "false", own, pre, blas, bf16);
    } else {
      char name[64];
      std::snprintf(name, sizeof name, "%s (%lld %lld %lld)", s.what, (long long)s.m,
                    (long long)s.n, (long long)s.k);
      std::printf("%-34s %9.1f %9.1f %9.1f %8.0f%% %8.2f %9.1f %8.2f\n", name, own, pre, blas,
                  ofPeak, tOwn / tBlas, bf16, tPacked / tBf16);
    }
    first = false;
  }
  if (json)
    std::printf("\n]}\n");
  return 0;
}
