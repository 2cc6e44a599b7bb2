//===- FakeKernels.cpp - Host versions of CudaDeviceTest's kernels --------===//
//
// The kernel library the fake CUDA driver runs (TCC_FAKE_CUDA_KERNELS) in tccrt-cuda-tests:
// `tcc_emu_<name>(void **args)` per kernel of the test's modules and `tcc_emu_launch`, which runs
// a kernel once per (block, thread) of the launch, one after another on the calling thread.
// The kernels here need no barriers or shared memory; generated kernels run on the emulation
// in test/support (CudaHostEmulation.h) instead.
//
//===----------------------------------------------------------------------===//
#include <cstdint>

namespace {
struct Index {
  unsigned block = 0, threadX = 0, threadY = 0, grid = 1, blockX = 1, blockY = 1;
} idx;
} // namespace

#define EMU_API extern "C" __attribute__((visibility("default")))

EMU_API int tcc_emu_launch(void (*kernel)(void **), void **args, unsigned grid, unsigned blockX,
                           unsigned blockY) {
  if (!kernel || grid == 0 || blockX == 0 || blockY == 0 || uint64_t(blockX) * blockY > 1024)
    return 1;
  idx.grid = grid;
  idx.blockX = blockX;
  idx.blockY = blockY;
  for (idx.block = 0; idx.block < grid; ++idx.block)
    for (idx.threadY = 0; idx.threadY < blockY; ++idx.threadY)
      for (idx.threadX = 0; idx.threadX < blockX; ++idx.threadX)
        kernel(args);
  return 0;
}

/// y[i] += a[0] * x[i] for i < n, grid-stride (the PTX kernel tcc_test_axpy of the test).
EMU_API void tcc_emu_tcc_test_axpy(void **args) {
  const float *x = static_cast<const float *>(args[0]);
  float *y = static_cast<float *>(args[1]);
  const float *a = static_cast<const float *>(args[2]);
  uint64_t n = reinterpret_cast<uintptr_t>(args[3]);
  uint64_t stride = uint64_t(idx.grid) * idx.blockX;
  for (uint64_t i = uint64_t(idx.block) * idx.blockX + idx.threadX; i < n; i += stride)
    y[i] += a[0] * x[i];
}

/// out[0..2] = gridDim.x, blockDim.x, blockDim.y as the kernel saw them; out[3] += 1 per
/// thread run.
EMU_API void tcc_emu_tcc_test_shape(void **args) {
  uint32_t *out = static_cast<uint32_t *>(args[0]);
  out[0] = idx.grid;
  out[1] = idx.blockX;
  out[2] = idx.blockY;
  out[3] += 1;
}
