//===- CudaHostEmulation.h - Run generated CUDA kernels on the host (tests) -===//
//
// Tests of the CUDA code generators run without a GPU by compiling the generated CUDA for the
// host against a small emulation of the CUDA programming model:
//
//  * one pthread per CUDA thread of a block (at most 1024); the blocks of the grid run one
//    after another on the same threads, so `blockIdx.x` runs 0..grid-1 (blockIdx.y/z and
//    gridDim.y/z are 0 and 1: kernels must cover their work with a 1-D grid-stride loop);
//  * `__syncthreads()` is a barrier over the block's threads; `__syncwarp()`, `__shfl_sync`,
//    `__shfl_xor_sync`, `__shfl_down_sync` and `__shfl_up_sync` are barriers over the (up to
//    32) threads of each warp exchanging values through shared slots: the full mask of the
//    threads present is assumed (divergent shuffles deadlock, and the emulation aborts after a
//    minute at a barrier, naming it);
//  * `__shared__` variables (static ones declared in a kernel, and `extern __shared__` dynamic
//    shared memory, backed by one 227 KiB buffer) are one object shared by all threads; blocks
//    run in turn, so a block sees the previous block's leftovers, like a GPU may;
//  * the kernel's own prelude (ScalarEmitter's CUDA prelude) is replaced by the CPU prelude:
//    the same helpers with software f16/bf16 conversions and libm math;
//  * `tcc_emu_mma16816` and `tcc_emu_ldmatrix_x4`: the warp-wide tensor-core product mma.sync
//    m16n8k16 (f16/bf16 in, f32 accumulate) and fragment load ldmatrix m8n8.x4 (.trans) with
//    the PTX ISA's fragment layouts; kernels that use tensor cores call them where
//    TCC_CUDA_EMULATION is defined (it is, here) instead of their inline PTX (and copy
//    synchronously where they would use cp.async);
//  * a few device intrinsics: `__ldg`, `__float_as_uint`/`__uint_as_float`,
//    `__float_as_int`/`__int_as_float`, `__fmaf_rn`,
//    `__double_as_longlong`/`__longlong_as_double`, `min`/`max` on integers, `atomicAdd` on int, unsigned and unsigned long long,
//    `__launch_bounds__`, `__restrict__`, `__align__`, `__forceinline__`.
// Not modelled: memory-model races between threads that a GPU would tolerate or not (the
// threads really run concurrently, so a missing __syncthreads usually shows as a wrong
// result, but not always), warp-synchronous code without __syncwarp, other atomics, textures,
// cooperative groups, other tensor-core instructions (wmma, wgmma), cp.async, and
// timing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tcc::testsupport {

/// One generated CUDA kernel to run on the host.
struct EmulatedKernel {
  std::string name;   // the extern "C" __global__ function
  std::string source; // the NVRTC translation unit: ScalarEmitter's CUDA prelude + kernel
  /// The host storage type of each (pointer) parameter, e.g. "float", "uint16_t" (f16/bf16),
  /// "int64_t"; ScalarEmitter(Target::Cpu).storageType gives it for an element type.
  std::vector<std::string> paramTypes;
};

/// The host translation unit for `kernels`: the emulation, the CPU prelude, each kernel's code
/// and a wrapper per kernel
///   extern "C" void tcc_emu_<name>(void **args);   // args[i]: the i-th pointer argument
/// plus
///   extern "C" int tcc_emu_launch(void (*kernel)(void **), void **args, unsigned grid,
///                                 unsigned blockX, unsigned blockY);   // 0 on success
/// Throws tcc::Error when a kernel does not start with the CUDA prelude.
std::string cudaEmulationSource(const std::vector<EmulatedKernel> &kernels);

/// A shared object loaded from its bytes (written to a temporary file, dlopen'ed, removed).
class HostLibrary {
public:
  explicit HostLibrary(const std::vector<uint8_t> &bytes);
  ~HostLibrary();
  HostLibrary(const HostLibrary &) = delete;
  HostLibrary &operator=(const HostLibrary &) = delete;
  /// The symbol's address; throws tcc::Error if it is missing.
  void *get(const std::string &name) const;

private:
  void *handle = nullptr;
};

/// `kernels` compiled for the host (with KernelCompiler's compileCpuModule, cached under
/// `cacheDir`) and loaded, ready to launch.
class CudaHostEmulation {
public:
  CudaHostEmulation(const std::vector<EmulatedKernel> &kernels, const std::string &cacheDir);
  /// Runs kernel `name` on `args` (host pointers, one per parameter) with `grid` blocks of
  /// blockX x blockY threads; throws tcc::Error if the launch is impossible (no such kernel,
  /// more than 1024 threads, threads not created).
  void launch(const std::string &name, const std::vector<void *> &args, unsigned grid,
              unsigned blockX, unsigned blockY = 1) const;
  const HostLibrary &library() const { return lib; }

private:
  HostLibrary lib;
};

/// `leaf` under the system's temporary directory: where tests keep their kernel caches.
std::string testKernelCacheDir(const char *leaf);

} // namespace tcc::testsupport
