//===- NvrtcCompiler.h - CUDA kernels to PTX and cubins with NVRTC --------===//
//
// Compiles emitted CUDA kernels (CudaEmitter.h, CudaLibraryKernels.h) with NVRTC, for each
// target architecture in `archs` (real architectures, e.g. sm_80 and sm_90), to cubins and to
// PTX for that architecture's virtual one (one NVRTC compile gives both: the PTX it generated
// on the way). A runtime loads the cubins matching its GPU, or JIT-compiles the PTX of the
// newest architecture not above it. No GPU or driver is needed.
//
// Batching: an NVRTC program costs ~0.2 s of fixed work (the prelude, cuda_fp16.h and
// cuda_bf16.h parsed, the compiler started) whatever it holds, so kernels are concatenated into
// programs of at most `maxKernelsPerProgram` (the prelude is include-guarded, so sources
// concatenate; each kernel's text starts with `#line 1 "<name>.cu"` so diagnostics name it).
// The kernels are dealt out in input order into as few programs as that bound allows, but at
// least enough to keep `jobs` threads busy; each (program, architecture) is one NVRTC compile,
// and compiles run in parallel on an llvm::DefaultThreadPool. A program compiled for one
// architecture is one CudaImage (a cubin and its PTX); an artifact then holds several images
// per architecture (artifact.fbs allows it) and every kernel is in exactly one of them.
//
// Cache: each (program, architecture) is cached on disk (KernelCache in KernelCompiler.h,
// under <cache>/cuda/), keyed by the NVRTC version, the options, the architecture and the
// program's whole source. The batching is deterministic for given kernels, bounds and job
// count, so a recompile of the same model hits the cache.
//
// Resource usage comes from ptxas's own report (`--ptxas-options=-v` puts it in the program
// log, one entry per kernel of the program): registers, spill stores/loads, stack frame,
// static shared memory. It is parsed from the log rather than from the cubin's .nv.info ELF
// attributes because spill counts only exist in the log (.nv.info has the register count, not
// spills); the log is cached next to the cubin.
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

/// The default bound on kernels per NVRTC program (see the batching above; measured in
/// lib/Codegen/README.md).
inline constexpr size_t kDefaultKernelsPerProgram = 16;

struct CudaCompileOptions {
  std::vector<std::string> archs = {"sm_80", "sm_90"}; // real architectures: sm_<digits>[a]
  std::string cacheDir;                                // empty: defaultKernelCacheDir()
  bool useCache = true;
  unsigned jobs = 0; // parallel NVRTC compiles; 0: hardware threads
  /// Kernels per NVRTC program at most (>= 1; 1 compiles every kernel on its own).
  size_t maxKernelsPerProgram = kDefaultKernelsPerProgram;
  /// Called after each (program, architecture) is compiled or found in the cache, with the
  /// kernels done so far and the total (kernels x architectures), from worker threads, one call
  /// at a time.
  std::function<void(size_t done, size_t total)> progress;
};

/// One NVRTC program compiled for one architecture.
struct CudaImage {
  std::string arch;            // "sm_80"
  std::vector<size_t> kernels; // indices into CudaModule::kernels, in source order
  std::string ptx;             // PTX for the matching virtual architecture (.target sm_80)
  std::vector<uint8_t> cubin;  // ELF for the real architecture
  double seconds = 0;          // NVRTC time (0 for a cache hit)
  bool cacheHit = false;
  std::string log;             // NVRTC's program log: diagnostics, then the ptxas report
};

/// One kernel on one architecture: where its code is and what ptxas reported for it.
struct CudaBinary {
  std::string arch;           // "sm_80"
  size_t image = 0;           // index into CudaModule::images
  int registers = 0;          // per thread
  int spillStoreBytes = 0, spillLoadBytes = 0;
  int stackBytes = 0;         // local memory stack frame per thread
  int staticSharedBytes = 0;  // __shared__ arrays (dynamic shared memory not included)
};

struct CudaCompiledKernel {
  std::string name;
  std::vector<CudaBinary> binaries; // one per architecture, in options.archs order
};

struct CudaCompileStats {
  size_t kernels = 0;
  size_t programs = 0;      // NVRTC programs the kernels were batched into
  size_t compiles = 0;      // (program, architecture) pairs
  size_t cacheHits = 0;     // of those, found in the cache
  double seconds = 0;       // wall time of compileCudaModule
  double nvrtcSeconds = 0;  // NVRTC time summed over the compiles (parallel: above `seconds`)
};

struct CudaModule {
  std::vector<CudaCompiledKernel> kernels; // in input order
  std::vector<CudaImage> images;           // program-major, then architecture (options order)
  std::string compiler;                    // "NVRTC <major>.<minor> <flags>"
  CudaCompileStats stats;
};

/// True when this build links NVRTC.
bool nvrtcAvailable();
/// "NVRTC 13.0", or why NVRTC is unavailable.
std::string nvrtcVersionString();

/// Checks a real architecture name (sm_<digits>, optionally with the 'a' suffix, e.g. sm_90a);
/// throws tcc::Error naming it otherwise. Available without NVRTC.
void checkCudaArch(const std::string &arch);

/// Compiles every kernel (each source a translation unit defining the extern "C" __global__
/// function `name`; names must be unique) for every architecture, batched as described above.
/// Throws tcc::Error with NVRTC's log naming the kernels whose lines it complains about (the
/// program's source kept in a temporary file) when a program does not compile, or when NVRTC
/// is not available.
CudaModule compileCudaModule(const std::vector<KernelSource> &kernels,
                             const CudaCompileOptions &options);

/// Parses ptxas -v output for the entry function `name` into `binary`'s resource fields;
/// false if the log has no report for it.
bool parsePtxasReport(const std::string &log, const std::string &name, CudaBinary &binary);

} // namespace tcc::codegen
