//===- KernelCompiler.h - Host compiler driver and on-disk kernel cache ---===//
//
// Compiles emitted CPU kernels with the host C++ compiler (`c++` from PATH, or $TCC_CXX) into
// one shared object. Each kernel's object file is cached on disk, keyed by a SHA-256 of its
// source, the compiler's identity (version and the target `-march=native` resolves to) and the
// flags; the linked shared object is cached too, keyed by the object keys. Cache files are
// written to a temporary name and renamed, so concurrent compiles never see partial files.
// Layout: <cacheDir>/cpu/<first 2 hex digits>/<hash>.o and .so.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tcc::codegen {

struct KernelSource {
  std::string name;   // for messages (the exported symbols are whatever the source defines)
  std::string source; // a complete translation unit (emitCpuKernel, or several concatenated)
};

struct CpuCompileOptions {
  std::string cacheDir; // empty: defaultKernelCacheDir()
  bool useCache = true; // false: neither read nor write the cache
  unsigned jobs = 0;    // parallel compiler processes; 0: hardware threads
  /// Called after each kernel is compiled or found in the cache (from worker threads, one call
  /// at a time).
  std::function<void(size_t done, size_t total)> progress;
};

struct CpuCompileStats {
  size_t kernels = 0, cacheHits = 0; // object files found in the cache
  bool linkCacheHit = false;         // the shared object was found in the cache
  double seconds = 0;                // wall time of compileCpuModule
};

struct CpuModule {
  std::vector<uint8_t> sharedObject; // the .so's bytes
  std::string compiler;              // compiler version + flags
  std::vector<std::string> isa;      // ISA extensions the target enables (CpuFeatures.h)
  CpuCompileStats stats;
};

/// Compiles every kernel to an object (in parallel, each cached on disk keyed by a hash of
/// source + compiler identity + flags), links them into one shared object (also cached, keyed
/// by the object hashes) and returns its bytes. Throws tcc::Error with the compiler's output on
/// failure.
CpuModule compileCpuModule(const std::vector<KernelSource> &kernels,
                           const CpuCompileOptions &options);

/// $TCC_CACHE_DIR, else $XDG_CACHE_HOME/tcc, else ~/.cache/tcc.
std::string defaultKernelCacheDir();

} // namespace tcc::codegen
