//===- KernelCompiler.h - Host compiler driver and on-disk kernel cache ---===//
//
// Compiles emitted CPU kernels with the host C++ compiler (`c++` from PATH, or $TCC_CXX) into
// one shared object. Each kernel's object file is cached on disk, keyed by a SHA-256 of its
// source, the compiler's identity (version and the target `-march=native` resolves to) and the
// flags; the linked shared object is cached too, keyed by the object keys. The cache itself
// (KernelCache below, shared with the CUDA compiler) writes files to a temporary name and
// renames them, so concurrent compiles never see partial files.
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

/// The on-disk kernel cache both kernel compilers use (CPU objects here, CUDA binaries in
/// NvrtcCompiler.h): entries are files `<root>/<first 2 hex digits>/<key><ext>` (or
/// `<root>/<key><ext>` in a scratch directory), keyed by SHA-256 digests of everything the
/// entry depends on. An entry appears by rename(2) of a fully written temporary in the same
/// directory, so concurrent compiles (threads or processes) see a whole file or none.
class KernelCache {
public:
  /// `root`: e.g. defaultKernelCacheDir() + "/cpu". `sharded`: entries go into subdirectories
  /// named after their first two hex digits (false for a scratch directory).
  explicit KernelCache(std::string root, bool sharded = true)
      : root(std::move(root)), sharded(sharded) {}

  /// Lower-case hex SHA-256 of the parts, each followed by a NUL byte (so ("ab", "c") and
  /// ("a", "bc") differ).
  static std::string key(const std::vector<std::string> &parts);

  /// Where the entry lives; its directory is created. Throws tcc::Error if it cannot be.
  std::string path(const std::string &key, const std::string &ext) const;
  bool contains(const std::string &key, const std::string &ext) const;
  /// The entry's bytes; false if it does not exist.
  bool read(const std::string &key, const std::string &ext, std::string &bytes) const;
  /// Writes the entry atomically (a concurrent writer of the same entry is as good as us).
  void write(const std::string &key, const std::string &ext, const std::string &bytes) const;

  /// A unique temporary name next to `final` (same file system: the rename is atomic), for
  /// tools that write the entry themselves; then publish(temporary, final).
  static std::string temporaryNextTo(const std::string &final);
  static void publish(const std::string &temporary, const std::string &final);

private:
  std::string root;
  bool sharded;
};

} // namespace tcc::codegen
