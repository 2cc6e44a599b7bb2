//===- CudaTestKernels.cpp - Host versions of CudaTestKernels.cu for the fake driver -===//
//
// The fake CUDA driver ($TCC_FAKE_CUDA_KERNELS) looks kernel `name` up as tcc_emu_<name>
// (args[i] = the i-th kernel argument: a device pointer, which is host memory under the fake)
// and runs it through tcc_emu_launch (0: success). These compute what the CUDA kernels compute, all
// elements in one call (the grid does not matter to them).
#include <cstdint>

#define TCC_EMU extern "C" __attribute__((visibility("default"))) void

extern "C" __attribute__((visibility("default"))) int
tcc_emu_launch(void (*kernel)(void **), void **args, unsigned, unsigned, unsigned) {
  kernel(args);
  return 0;
}

TCC_EMU tcc_emu_add64(void **args) {
  const float *a = static_cast<const float *>(args[0]), *b = static_cast<const float *>(args[1]);
  float *c = static_cast<float *>(args[2]);
  for (int i = 0; i < 64; ++i)
    c[i] = a[i] + b[i];
}

TCC_EMU tcc_emu_relu64(void **args) {
  const float *x = static_cast<const float *>(args[0]);
  float *y = static_cast<float *>(args[1]);
  for (int i = 0; i < 64; ++i)
    y[i] = x[i] > 0 ? x[i] : 0;
}

TCC_EMU tcc_emu_scale16(void **args) {
  const float *x = static_cast<const float *>(args[0]);
  float *y = static_cast<float *>(args[1]);
  for (int i = 0; i < 16; ++i)
    y[i] = 2 * x[i];
}

TCC_EMU tcc_emu_increment(void **args) { static_cast<int32_t *>(args[0])[0] += 1; }

TCC_EMU tcc_emu_shared64(void **args) {
  const float *x = static_cast<const float *>(args[0]);
  float *y = static_cast<float *>(args[1]);
  for (int i = 0; i < 64; ++i)
    y[i] = x[i];
}

TCC_EMU tcc_emu_sgd16(void **args) {
  const float *w = static_cast<const float *>(args[0]), *x = static_cast<const float *>(args[1]);
  float lr = *static_cast<const float *>(args[2]);
  float *wOut = static_cast<float *>(args[3]), *loss = static_cast<float *>(args[4]);
  float s = 0;
  for (int i = 0; i < 16; ++i) {
    s += w[i] * x[i];
    wOut[i] = w[i] - lr * x[i];
  }
  loss[0] = s / 16;
}

TCC_EMU tcc_emu_mul16(void **args) {
  const float *w = static_cast<const float *>(args[0]), *x = static_cast<const float *>(args[1]);
  float *y = static_cast<float *>(args[2]);
  for (int i = 0; i < 16; ++i)
    y[i] = w[i] * x[i];
}
