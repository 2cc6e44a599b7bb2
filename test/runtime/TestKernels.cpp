//===- TestKernels.cpp - A hand-written CPU module for the runtime tests --===//
//
// Stands in for the CPU module the compiler generates: exported kernels with the KernelAbi.h
// signature, shapes compiled in. Built as a MODULE library; tests embed its bytes in artifacts.
#include <cstdint>

#define TCC_KERNEL extern "C" __attribute__((visibility("default"))) void

// c[64] = a[64] + b[64]   (f32)
TCC_KERNEL add64(void *const *args, int32_t) {
  const float *a = static_cast<const float *>(args[0]), *b = static_cast<const float *>(args[1]);
  float *c = static_cast<float *>(args[2]);
  for (int i = 0; i < 64; ++i)
    c[i] = a[i] + b[i];
}

// y[64] = max(x[64], 0)   (f32)
TCC_KERNEL relu64(void *const *args, int32_t) {
  const float *x = static_cast<const float *>(args[0]);
  float *y = static_cast<float *>(args[1]);
  for (int i = 0; i < 64; ++i)
    y[i] = x[i] > 0 ? x[i] : 0;
}

// y[16] = x[16] * 2   (f32)
TCC_KERNEL double16(void *const *args, int32_t) {
  const float *x = static_cast<const float *>(args[0]);
  float *y = static_cast<float *>(args[1]);
  for (int i = 0; i < 16; ++i)
    y[i] = x[i] * 2;
}

// out[1] = num_threads   (i32)
TCC_KERNEL threads(void *const *args, int32_t numThreads) {
  static_cast<int32_t *>(args[0])[0] = numThreads;
}

// ---- A training model for the trainer tests -------------------------------------------------
// Elementwise regression over 16 features: prediction w * x, per-sample loss (w x - y)^2, mean
// loss, gradient g = 2 (w x - y) x / 16. State: w, its gradient accumulator acc, a step counter
// and the last random key seen.

static float gradAndLoss16(const float *w, const float *x, const float *y, float *g) {
  float sum = 0;
  for (int i = 0; i < 16; ++i) {
    float d = w[i] * x[i] - y[i];
    g[i] = 2 * d * x[i] / 16;
    sum += d * d;
  }
  return sum / 16;
}

// train_step: (w, acc, step i64, x, y, lr f32, key u64)
//   -> (w - lr (acc + g), acc' = 0, step + 1, last_key = key, loss)
TCC_KERNEL train16(void *const *args, int32_t) {
  const float *w = static_cast<const float *>(args[0]), *acc = static_cast<const float *>(args[1]);
  const int64_t step = *static_cast<const int64_t *>(args[2]);
  const float *x = static_cast<const float *>(args[3]), *y = static_cast<const float *>(args[4]);
  float lr = *static_cast<const float *>(args[5]);
  uint64_t key = *static_cast<const uint64_t *>(args[6]);
  float *wOut = static_cast<float *>(args[7]), *accOut = static_cast<float *>(args[8]);
  float g[16];
  float loss = gradAndLoss16(w, x, y, g);
  for (int i = 0; i < 16; ++i) {
    wOut[i] = w[i] - lr * (acc[i] + g[i]);
    accOut[i] = 0;
  }
  *static_cast<int64_t *>(args[9]) = step + 1;
  *static_cast<uint64_t *>(args[10]) = key;
  *static_cast<float *>(args[11]) = loss;
}

// accumulate_step: (w, acc, x, y, key) -> (acc + g, last_key = key, loss)
TCC_KERNEL accumulate16(void *const *args, int32_t) {
  const float *w = static_cast<const float *>(args[0]), *acc = static_cast<const float *>(args[1]);
  const float *x = static_cast<const float *>(args[2]), *y = static_cast<const float *>(args[3]);
  uint64_t key = *static_cast<const uint64_t *>(args[4]);
  float *accOut = static_cast<float *>(args[5]);
  float g[16];
  float loss = gradAndLoss16(w, x, y, g);
  for (int i = 0; i < 16; ++i)
    accOut[i] = acc[i] + g[i];
  *static_cast<uint64_t *>(args[6]) = key;
  *static_cast<float *>(args[7]) = loss;
}

// eval: (w, x, y) -> (per-sample loss f32[16], prediction above target i64[16])
TCC_KERNEL eval16(void *const *args, int32_t) {
  const float *w = static_cast<const float *>(args[0]), *x = static_cast<const float *>(args[1]),
              *y = static_cast<const float *>(args[2]);
  float *loss = static_cast<float *>(args[3]);
  int64_t *above = static_cast<int64_t *>(args[4]);
  for (int i = 0; i < 16; ++i) {
    float d = w[i] * x[i] - y[i];
    loss[i] = d * d;
    above[i] = d > 0;
  }
}

// ---- A symbolic program's kernel (SymbolicTest.cpp) ------------------------------------------
// Its sizes come from the Symbols buffer, as a generated kernel's do.

// (t f32[m x 8], scale f32[m], y f32[m x 8], sizes i64[1] = {m}): y = max(t, 0) * scale[row]
TCC_KERNEL relu_scale_rows8(void *const *args, int32_t) {
  const float *t = static_cast<const float *>(args[0]);
  const float *scale = static_cast<const float *>(args[1]);
  float *y = static_cast<float *>(args[2]);
  const int64_t m = static_cast<const int64_t *>(args[3])[0];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < 8; ++j)
      y[i * 8 + j] = (t[i * 8 + j] > 0 ? t[i * 8 + j] : 0) * scale[i];
}
