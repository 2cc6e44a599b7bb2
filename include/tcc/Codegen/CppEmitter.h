//===- CppEmitter.h - C++ source for tk kernels (the CPU backend) ---------===//
//
// Turns one `tk.kernel` function into a self-contained C++ translation unit that exports
//
//   extern "C" void NAME(void *const *args, int32_t num_threads);
//
// (tcc/Runtime/KernelAbi.h). Scalar ops go through ScalarEmitter (shared with the CUDA
// emitter); this backend adds the loop skeleton: the outermost tk.parallel runs on OpenMP
// threads when the kernel is large enough, inner loops are `#pragma omp simd` loops, and
// reductions use OpenMP simd reductions where their kind and type allow.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace tcc::codegen {

/// The complete C++ translation unit for one tk.kernel function: a prelude plus
/// `extern "C" void NAME(void *const *args, int32_t num_threads)` (KernelAbi.h). Throws
/// tcc::Error (include/tcc/Support/Tensor.h) naming the op it cannot emit. Several emitted
/// units may be concatenated into one (the prelude is include-guarded).
std::string emitCpuKernel(mlir::func::FuncOp kernel);

/// Flags the emitted code is meant to be compiled with (besides -c / -shared). No -ffast-math:
/// NaN and infinity semantics matter. -ffp-contract=off: GCC fuses a * b + c into an FMA by
/// default even in ISO C++ mode, which rounds once where the reference rounds twice.
inline constexpr const char *kCpuCompileFlags =
    "-O3 -march=native -fopenmp -fPIC -std=c++17 -fno-math-errno -ffp-contract=off";

} // namespace tcc::codegen
