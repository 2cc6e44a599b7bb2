//===- NvrtcCompiler.h - CUDA kernels to PTX and cubins with NVRTC --------===//
//
// Compiles emitted CUDA kernels (CudaEmitter.h) with NVRTC, for each target architecture in
// `archs` (real architectures, e.g. sm_80 and sm_90), to a cubin and to PTX for that
// architecture's virtual one (one NVRTC compile gives both: the PTX it generated on the way).
// A runtime loads the cubin matching its GPU, or JIT-compiles the PTX of the newest
// architecture not above it. No GPU or driver is needed.
//
// Kernels compile in parallel (one NVRTC program per kernel and architecture, on an
// llvm::DefaultThreadPool) through the on-disk kernel cache (KernelCache in KernelCompiler.h,
// under <cache>/cuda/), keyed by the NVRTC version, the options, the architecture and the
// source.
//
// Resource usage comes from ptxas's own report (`--ptxas-options=-v` puts it in the program
// log): registers, spill stores/loads, stack frame, static shared memory. It is parsed from the
// log rather than from the cubin's .nv.info ELF attributes because spill counts only exist in
// the log (.nv.info has the register count, not spills); the parsed numbers are cached next to
// the cubin.
//
// Builds without the CUDA toolkit (TCC_HAVE_NVRTC undefined) still have these functions:
// nvrtcAvailable() is false and compileCudaModule throws a tcc::Error saying so.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Codegen/KernelCompiler.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tcc::codegen {

/// NVRTC options besides the architecture. No fast math (NaN/infinity semantics and IEEE
/// division/square root, like the reference kernels); --fmad=false keeps a * b + c rounded
/// twice like the reference (memory-bound kernels lose nothing by it).
inline constexpr const char *kNvrtcFlags = "--std=c++17 --fmad=false --ptxas-options=-v";

struct CudaCompileOptions {
  std::vector<std::string> archs = {"sm_80", "sm_90"}; // real architectures: sm_<digits>[a]
  std::string cacheDir;                                // empty: defaultKernelCacheDir()
  bool useCache = true;
  unsigned jobs = 0; // parallel NVRTC compiles; 0: hardware threads
  /// Called after each (kernel, architecture) is compiled or found in the cache (from worker
  /// threads, one call at a time).
  std::function<void(size_t done, size_t total)> progress;
};

/// One kernel for one architecture.
struct CudaBinary {
  std::string arch;           // "sm_80"
  std::string ptx;            // PTX for the matching virtual architecture (.target sm_80)
  std::vector<uint8_t> cubin; // ELF for the real architecture
  // From ptxas -v.
  int registers = 0;          // per thread
  int spillStoreBytes = 0, spillLoadBytes = 0;
  int stackBytes = 0;         // local memory stack frame per thread
  int staticSharedBytes = 0;  // __shared__ arrays (dynamic shared memory not included)
  double seconds = 0;         // NVRTC time (0 for a cache hit)
  bool cacheHit = false;
  std::string log;            // NVRTC's program log: diagnostics, then the ptxas report
};

struct CudaCompiledKernel {
  std::string name;
  std::vector<CudaBinary> binaries; // one per architecture, in options.archs order
};

struct CudaCompileStats {
  size_t kernels = 0;
  size_t compiles = 0;      // (kernel, architecture) pairs
  size_t cacheHits = 0;     // of those, found in the cache
  double seconds = 0;       // wall time of compileCudaModule
  double nvrtcSeconds = 0;  // NVRTC time summed over the compiles (parallel: above `seconds`)
};

struct CudaModule {
  std::vector<CudaCompiledKernel> kernels; // in input order
  std::string compiler;                    // "NVRTC <major>.<minor> <flags>"
  CudaCompileStats stats;
};

/// True when this build links NVRTC.
bool nvrtcAvailable();
/// "NVRTC 13.0", or why NVRTC is unavailable.
std::string nvrtcVersionString();

/// Compiles every kernel (each source one translation unit defining the __global__ function
/// `name`) for every architecture. Throws tcc::Error with NVRTC's log (and the source kept in
/// a temporary file) when a kernel does not compile, or when NVRTC is not available.
CudaModule compileCudaModule(const std::vector<KernelSource> &kernels,
                             const CudaCompileOptions &options);

/// Parses ptxas -v output for the entry function `name` into `binary`'s resource fields;
/// false if the log has no report for it.
bool parsePtxasReport(const std::string &log, const std::string &name, CudaBinary &binary);

} // namespace tcc::codegen
