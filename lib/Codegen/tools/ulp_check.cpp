//===- ulp_check.cpp - Exhaustive accuracy of the prelude's f32 transcendentals ----===//
//
// One-off check of tcc_expf/logf/tanhf/erff/sigmoidf (include/tcc/Support/CpuMathF32.inc)
// against glibc's f32 functions (the reference kernels' results) and against the double
// functions rounded to float, over all 2^32 f32 bit patterns. Prints the max ulp error per
// function (ulps counted on the ordered bit patterns, so across the normal/subnormal boundary
// and next to inf too; NaN must match NaN), the argument where it occurs and how many inputs
// are off by more than 1 ulp. Build and run (from the repository root):
//
//   cp include/tcc/Support/CpuMathF32.inc /tmp/tcc_math_prelude.inc
//   g++ -O3 -march=native -fopenmp -ffp-contract=off -fno-math-errno -I/tmp \
//       lib/Codegen/tools/ulp_check.cpp -o /tmp/ulp_check && /tmp/ulp_check [stride]
//
// (`stride` > 1 checks every stride-th bit pattern only.)
//===----------------------------------------------------------------------------------===//
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define TCC_FN static inline __attribute__((always_inline))
TCC_FN uint32_t tcc_bits_f32(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }
TCC_FN float tcc_f32_from_bits(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
#include "tcc_math_prelude.inc"

static int64_t ordered(float f) {
  uint32_t u = tcc_bits_f32(f);
  return (u & 0x80000000u) ? -(int64_t)(u & 0x7FFFFFFFu) : (int64_t)u;
}
/// ulp distance; NaN vs NaN is 0, NaN vs a number is "infinite".
static int64_t ulps(float a, float b) {
  if (a != a || b != b)
    return (a != a && b != b) ? 0 : (int64_t)1 << 40;
  int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

struct Stat {
  int64_t maxUlp = 0;
  float worstX = 0;
  uint64_t over1 = 0;
  void add(int64_t u, float x) {
    if (u > maxUlp) {
      maxUlp = u;
      worstX = x;
    }
    over1 += u > 1;
  }
  void merge(const Stat &o) {
    if (o.maxUlp > maxUlp) {
      maxUlp = o.maxUlp;
      worstX = o.worstX;
    }
    over1 += o.over1;
  }
};

constexpr int kFns = 5;
static const char *const kNames[kFns] = {"exp", "log", "tanh", "erf", "sigmoid"};

static void ours(int fn, const float *x, float *y, int n) {
  switch (fn) {
  case 0: for (int i = 0; i < n; ++i) y[i] = tcc_expf(x[i]); break;
  case 1: for (int i = 0; i < n; ++i) y[i] = tcc_logf(x[i]); break;
  case 2: for (int i = 0; i < n; ++i) y[i] = tcc_tanhf(x[i]); break;
  case 3: for (int i = 0; i < n; ++i) y[i] = tcc_erff(x[i]); break;
  case 4: for (int i = 0; i < n; ++i) y[i] = tcc_sigmoidf(x[i]); break;
  }
}
static float libmF(int fn, float x) {
  switch (fn) {
  case 0: return std::exp(x);
  case 1: return std::log(x);
  case 2: return std::tanh(x);
  case 3: return std::erf(x);
  default: return 1.0f / (1.0f + std::exp(-x));
  }
}
static float libmD(int fn, float x) {
  double d = x;
  switch (fn) {
  case 0: return (float)std::exp(d);
  case 1: return (float)std::log(d);
  case 2: return (float)std::tanh(d);
  case 3: return (float)std::erf(d);
  default: return (float)(1.0 / (1.0 + std::exp(-d)));
  }
}

int main(int argc, char **argv) {
  const uint64_t stride = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : 1;
  const uint64_t count = ((uint64_t)1 << 32) / stride;
  constexpr int kBlock = 4096;
  const int64_t blocks = (int64_t)((count + kBlock - 1) / kBlock);
  Stat vsF[kFns], vsD[kFns];
#pragma omp parallel
  {
    Stat f[kFns], d[kFns];
    float x[kBlock], y[kBlock];
#pragma omp for schedule(dynamic, 64)
    for (int64_t b = 0; b < blocks; ++b) {
      int n = 0;
      for (uint64_t i = (uint64_t)b * kBlock; i < count && n < kBlock; ++i)
        x[n++] = tcc_f32_from_bits((uint32_t)(i * stride));
      for (int fn = 0; fn < kFns; ++fn) {
        ours(fn, x, y, n);
        for (int i = 0; i < n; ++i) {
          // The reference's sigmoid 1 / (1 + expf(-x)) flushes to 0 below -88.72 (expf(-x)
          // overflows); ours keeps the subnormal result there: compared with double only.
          if (!(fn == 4 && x[i] <= -0x1.62e43p+6f))
            f[fn].add(ulps(y[i], libmF(fn, x[i])), x[i]);
          d[fn].add(ulps(y[i], libmD(fn, x[i])), x[i]);
        }
      }
    }
#pragma omp critical
    for (int fn = 0; fn < kFns; ++fn) {
      vsF[fn].merge(f[fn]);
      vsD[fn].merge(d[fn]);
    }
  }
  std::printf("%llu inputs (stride %llu)\n", (unsigned long long)count, (unsigned long long)stride);
  for (int fn = 0; fn < kFns; ++fn)
    std::printf("%-8s vs glibc f32: max %lld ulp (x = %a), %llu inputs > 1 ulp | vs double "
                "rounded: max %lld ulp (x = %a), %llu > 1 ulp\n",
                kNames[fn], (long long)vsF[fn].maxUlp, vsF[fn].worstX,
                (unsigned long long)vsF[fn].over1, (long long)vsD[fn].maxUlp, vsD[fn].worstX,
                (unsigned long long)vsD[fn].over1);
  return 0;
}
