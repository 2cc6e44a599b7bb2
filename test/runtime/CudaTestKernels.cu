// CudaTestKernels.cu - the CUDA kernels of the runtime's CUDA tests (CudaRuntimeTest.cpp).
//
// Compiled to PTX (compute_80) with nvcc at build time when the toolkit is installed; test
// artifacts carry that PTX, so on a real GPU the driver JIT-compiles and runs these. Under the
// fake CUDA driver, CudaTestKernels.cpp runs host versions of the same kernels (same names,
// same parameters, same results). Shapes are compiled in, as in generated kernels; every kernel
// covers its elements with a grid-stride loop, so any grid works.

#define GRID_STRIDE(i, n)                                                                          \
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

// c[64] = a[64] + b[64]
extern "C" __global__ void add64(const float *a, const float *b, float *c) {
  GRID_STRIDE(i, 64) c[i] = a[i] + b[i];
}

// y[64] = max(x[64], 0)
extern "C" __global__ void relu64(const float *x, float *y) {
  GRID_STRIDE(i, 64) y[i] = x[i] > 0 ? x[i] : 0;
}

// y[16] = 2 x[16]
extern "C" __global__ void scale16(const float *x, float *y) {
  GRID_STRIDE(i, 16) y[i] = 2 * x[i];
}

// counter[1] += 1 (i32): counts the runs that executed the launch list.
extern "C" __global__ void increment(int *counter) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    counter[0] += 1;
}

// y[64] = x[64] + sum(shared scratch of 1024 floats, zeroed): uses 4 KiB of dynamic shared
// memory (the launch must give at least that).
extern "C" __global__ void shared64(const float *x, float *y) {
  extern __shared__ float scratch[];
  for (int i = threadIdx.x; i < 1024; i += blockDim.x)
    scratch[i] = 0;
  __syncthreads();
  GRID_STRIDE(i, 64) y[i] = x[i] + scratch[i];
}

// Training: w'[16] = w[16] - lr * x[16]; loss = sum(w * x) / 16 (one block sums).
extern "C" __global__ void sgd16(const float *w, const float *x, const float *lr, float *wOut,
                                 float *loss) {
  GRID_STRIDE(i, 16) wOut[i] = w[i] - lr[0] * x[i];
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float s = 0;
    for (int i = 0; i < 16; ++i)
      s += w[i] * x[i];
    loss[0] = s / 16;
  }
}

// Eval: y[16] = w[16] * x[16].
extern "C" __global__ void mul16(const float *w, const float *x, float *y) {
  GRID_STRIDE(i, 16) y[i] = w[i] * x[i];
}
