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
