//===- KernelAbi.h - How the runtime calls generated CPU kernels ---------===//
//
// Each kernel in an artifact's CPU module is an exported C function
//
//   extern "C" void NAME(void *const *args, int32_t num_threads);
//
// `args[i]` is the base address of the kernel's i-th buffer argument (tk.kernel argument order,
// contiguous row-major, shapes compiled in). `num_threads` bounds the threads the kernel may use.
// Kernels never allocate, never throw, and are safe to call concurrently on disjoint buffers.
#pragma once

#include <cstdint>

namespace tcc::rt {
using CpuKernelFn = void (*)(void *const *args, int32_t num_threads);
} // namespace tcc::rt
