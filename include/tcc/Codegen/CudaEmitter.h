//===- CudaEmitter.h - CUDA C++ source for tk kernels ---------------------===//
//
// Turns one `tk.kernel` function into a self-contained NVRTC translation unit that defines
//
//   extern "C" __global__ void NAME(T0 *arg0, T1 *arg1, ...);
//
// (one typed device pointer per buffer argument, in order; const where the kernel only reads
// it) plus the launch configuration it was written for. Scalar ops go through ScalarEmitter
// (shared with the CPU emitter); this backend adds the mapping of loops onto the grid.
//
// The outermost tk.parallel's iterations are dealt out to "teams" of threads in a grid-stride
// loop; what a team is depends on what the iteration does (the `strategy`):
//  * pointwise: the body has no loops. One thread per group of V consecutive iterations of the
//    innermost dims; V (up to 16 bytes of the widest element) is chosen so that the contiguous
//    loads and stores become 16-byte (or narrower) vector accesses when the IR proves their
//    alignment (static shapes, index arithmetic, the arguments' alignment).
//  * row: reductions along contiguous memory (softmax, layer norm, reductions over the last
//    axis). A team of T consecutive threads (2..32 lanes of a warp, or a whole block of up to
//    1024) shares one row: loops inside the row are split across the team (again in vector
//    groups), partial results are combined with warp shuffles (and shared memory across the
//    warps of a block) and every team thread gets the result.
//  * column: reductions whose reduced dims are not the contiguous ones (the kept innermost dim
//    is). Consecutive threads (threadIdx.x) take consecutive outputs, so every load is
//    coalesced; a team of blockDim.y threads splits the reduced loop and combines through
//    shared memory.
//  * thread: one thread per iteration, inner loops sequential (sequential tk.for such as
//    cumsum and scatter, reductions too short to share).
//  * serial: one thread runs the whole body: kernels over empty tensors (nothing to run) and
//    kernels with several top-level loops (the lowering does not make those).
// Loops nested deeper than the team level run sequentially in each thread. f16/bf16 are stored
// as 16-bit bits and computed in f32 (hardware conversions), f64 in double; integer arithmetic,
// casts and max/min follow the reference kernels exactly (see ScalarEmitter.h). Float sums are
// combined in a fixed, but different, order than on the CPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tcc::codegen {

/// How to launch an emitted kernel: every launch of it uses this grid and block (the kernel's
/// grid-stride loops cover any grid, so a runtime may also shrink `grid`).
struct CudaLaunchConfig {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t sharedBytes = 0; // dynamic shared memory per block
  /// Symbolic programs: the units of work the grid covers, as a size expression (SymExpr text;
  /// empty: `grid` is exact), `workPerBlock` of them a block. A runtime launches
  /// min(grid.x, ceil(work / workPerBlock)) blocks at a binding.
  std::string gridWork;
  uint32_t workPerBlock = 0;
  /// Library kernels (CudaLibraryKernels.h) of symbolic programs: the kernel takes the
  /// program's size symbol values (tk.symbol_values) after the op's buffers.
  bool symbolsArgument = false;
};

struct CudaKernel {
  std::string name;   // the extern "C" __global__ function
  std::string source; // a complete NVRTC translation unit (include-guarded prelude + kernel)
  CudaLaunchConfig launch;
  /// "pointwise", "row", "column", "thread" or "serial", with the team size and vector width,
  /// e.g. "row team=32 vec=4" (for reports and tests).
  std::string strategy;
};

struct CudaEmitOptions {
  /// Guaranteed alignment in bytes of each argument's base pointer (a power of two), by
  /// position; arguments past the end get `defaultAlignment`. cudaArgumentAlignments computes
  /// it from the program that launches the kernel.
  std::vector<unsigned> argAlignment;
  /// For kernels seen alone: the CUDA runtime's contract is that every buffer it passes is at
  /// least 16-byte aligned (device allocations are 256-byte aligned; arena offsets and
  /// constants 64-byte).
  unsigned defaultAlignment = 16;
};

/// The CUDA translation unit and launch configuration for one tk.kernel function. Throws
/// tcc::Error naming the op it cannot emit.
CudaKernel emitCudaKernel(mlir::func::FuncOp kernel, const CudaEmitOptions &options = {});

/// The alignment each argument of `kernel` is guaranteed over every tk.launch of it in its
/// module: 16 for program arguments and constants (the runtime's contract), the arena's 64 for
/// tk.alloc, reduced by the byte offsets of tk.view. Arguments of a kernel never launched get
/// 16.
std::vector<unsigned> cudaArgumentAlignments(mlir::func::FuncOp kernel);

/// The alignment in bytes (at most 16) of `buffer` in a program: 16 for program arguments,
/// arena offsets and constants, reduced by the byte offsets of tk.view.
unsigned cudaBufferAlignment(mlir::Value buffer);

} // namespace tcc::codegen
