//===- NvrtcCompiler.cpp - CUDA kernels to PTX and cubins with NVRTC ------===//
//
// See NvrtcCompiler.h. One NVRTC program per (kernel, architecture), compiled for the real
// architecture; nvrtcGetPTX then returns the PTX NVRTC generated on the way (same .target), so
// PTX and cubin cost one compile. NVRTC API calls other than nvrtcGetTypeName are thread-safe
// (nvrtc.h), so programs compile concurrently on a thread pool.
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/NvrtcCompiler.h"

#include "tcc/Support/Tensor.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"

#ifdef TCC_HAVE_NVRTC
#include <nvrtc.h>
#endif

#include <chrono>
#include <mutex>

using namespace tcc;
using namespace tcc::codegen;

bool tcc::codegen::parsePtxasReport(const std::string &log, const std::string &name,
                                    CudaBinary &binary) {
  // ptxas info    : Compiling entry function 'NAME' for 'sm_90'
  // ptxas info    : Function properties for NAME
  // ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 32 registers, used 1 barriers, 256 bytes smem, 384 bytes cmem[0]
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(log).split(lines, '\n');
  std::string entry = "Compiling entry function '" + name + "'";
  bool inEntry = false, sawRegisters = false, sawStack = false;
  auto numberBefore = [](llvm::StringRef text, llvm::StringRef what, int &out) {
    size_t at = text.find(what);
    if (at == llvm::StringRef::npos)
      return false;
    llvm::StringRef before = text.take_front(at).rtrim();
    size_t start = before.find_last_not_of("0123456789");
    llvm::StringRef digits = before.drop_front(start == llvm::StringRef::npos ? 0 : start + 1);
    return !digits.getAsInteger(10, out);
  };
  for (llvm::StringRef l : lines) {
    if (l.contains("Compiling entry function")) {
      if (inEntry)
        break; // the next entry
      inEntry = l.contains(entry);
      continue;
    }
    if (!inEntry)
      continue;
    if (l.contains("bytes stack frame")) {
      sawStack = numberBefore(l, " bytes stack frame", binary.stackBytes) &&
                 numberBefore(l, " bytes spill stores", binary.spillStoreBytes) &&
                 numberBefore(l, " bytes spill loads", binary.spillLoadBytes);
    } else if (l.contains("Used ") && l.contains(" registers")) {
      sawRegisters = numberBefore(l, " registers", binary.registers);
      binary.staticSharedBytes = 0;
      numberBefore(l, " bytes smem", binary.staticSharedBytes); // absent: none
    }
  }
  return sawRegisters && sawStack;
}

#ifdef TCC_HAVE_NVRTC

namespace {

std::string nvrtcError(nvrtcResult r) { return nvrtcGetErrorString(r); }

/// Checks an NVRTC call that cannot fail on valid input.
void check(nvrtcResult r, const char *what) {
  if (r != NVRTC_SUCCESS)
    throw Error(std::string("NVRTC ") + what + " failed: " + nvrtcError(r));
}

/// sm_<digits>[a]: a real architecture NVRTC can make a cubin for.
void checkArch(const std::string &arch) {
  llvm::StringRef a(arch);
  bool ok = a.consume_front("sm_");
  a.consume_back("a");
  unsigned number;
  if (!ok || a.empty() || a.getAsInteger(10, number))
    throw Error("invalid CUDA architecture '" + arch +
                "': expected a real architecture such as sm_80 or sm_90");
}

/// Keeps a failing kernel's source for the user to look at.
std::string keepSource(const KernelSource &k) {
  llvm::SmallString<128> path;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("tcc-" + k.name, "cu", fd, path))
    return "(could not keep the source)";
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << k.source;
  return path.str().str();
}

/// Compiles `k` for `arch` with NVRTC; fills the binary and returns NVRTC's log.
std::string compileOne(const KernelSource &k, const std::string &arch, CudaBinary &binary) {
  auto start = std::chrono::steady_clock::now();
  nvrtcProgram program;
  check(nvrtcCreateProgram(&program, k.source.c_str(), (k.name + ".cu").c_str(), 0, nullptr,
                           nullptr),
        "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram &p;
    ~Destroy() { nvrtcDestroyProgram(&p); }
  } destroy{program};

  std::vector<std::string> options = {"--gpu-architecture=" + arch};
  for (llvm::StringRef flag : llvm::split(kNvrtcFlags, ' '))
    if (!flag.empty())
      options.push_back(flag.str());
  std::vector<const char *> argv;
  for (const std::string &o : options)
    argv.push_back(o.c_str());
  nvrtcResult result = nvrtcCompileProgram(program, (int)argv.size(), argv.data());

  size_t size = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(program, &size) == NVRTC_SUCCESS && size > 1) {
    log.resize(size);
    nvrtcGetProgramLog(program, log.data());
    while (!log.empty() && log.back() == '\0')
      log.pop_back();
  }
  if (result != NVRTC_SUCCESS)
    throw Error("NVRTC could not compile kernel '" + k.name + "' for " + arch + " (" +
                nvrtcError(result) + "; source kept at " + keepSource(k) + "):\n" + log);

  check(nvrtcGetPTXSize(program, &size), "nvrtcGetPTXSize");
  binary.ptx.resize(size);
  check(nvrtcGetPTX(program, binary.ptx.data()), "nvrtcGetPTX");
  if (!binary.ptx.empty() && binary.ptx.back() == '\0')
    binary.ptx.pop_back();
  check(nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize");
  binary.cubin.resize(size);
  check(nvrtcGetCUBIN(program, (char *)binary.cubin.data()), "nvrtcGetCUBIN");
  binary.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return log;
}

} // namespace

bool tcc::codegen::nvrtcAvailable() { return true; }

std::string tcc::codegen::nvrtcVersionString() {
  int major = 0, minor = 0;
  if (::nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return "NVRTC (unknown version)";
  return "NVRTC " + std::to_string(major) + "." + std::to_string(minor);
}

CudaModule tcc::codegen::compileCudaModule(const std::vector<KernelSource> &kernels,
                                           const CudaCompileOptions &options) {
  auto start = std::chrono::steady_clock::now();
  if (options.archs.empty())
    throw Error("no CUDA architecture to compile for");
  for (const std::string &arch : options.archs)
    checkArch(arch);
  CudaModule module;
  module.compiler = nvrtcVersionString() + " " + kNvrtcFlags;
  module.stats.kernels = kernels.size();
  module.kernels.resize(kernels.size());
  size_t numArchs = options.archs.size(), total = kernels.size() * numArchs;
  for (size_t i = 0; i < kernels.size(); ++i) {
    module.kernels[i].name = kernels[i].name;
    module.kernels[i].binaries.resize(numArchs);
  }
  KernelCache cache((options.cacheDir.empty() ? defaultKernelCacheDir() : options.cacheDir) +
                    "/cuda");

  std::vector<std::string> errors(total);
  std::mutex mutex;
  size_t done = 0;
  auto compileJob = [&](size_t job) {
    const KernelSource &k = kernels[job / numArchs];
    const std::string &arch = options.archs[job % numArchs];
    CudaBinary &binary = module.kernels[job / numArchs].binaries[job % numArchs];
    binary.arch = arch;
    try {
      std::string key = KernelCache::key({module.compiler, arch, k.source});
      // The log is written last: its presence means the whole entry is there.
      std::string log, cubin;
      binary.cacheHit = options.useCache && cache.read(key, ".log", log) &&
                        cache.read(key, ".ptx", binary.ptx) && cache.read(key, ".cubin", cubin) &&
                        parsePtxasReport(log, k.name, binary);
      binary.log = log;
      if (binary.cacheHit) {
        binary.cubin.assign(cubin.begin(), cubin.end());
      } else {
        log = binary.log = compileOne(k, arch, binary);
        if (!parsePtxasReport(log, k.name, binary))
          throw Error("NVRTC's log for kernel '" + k.name + "' (" + arch +
                      ") has no ptxas report for it (is the kernel's function named '" +
                      k.name + "'?):\n" + log);
        if (options.useCache) {
          cache.write(key, ".ptx", binary.ptx);
          cache.write(key, ".cubin", std::string(binary.cubin.begin(), binary.cubin.end()));
          cache.write(key, ".log", log);
        }
      }
      std::lock_guard<std::mutex> lock(mutex);
      ++done;
      module.stats.cacheHits += binary.cacheHit;
      module.stats.nvrtcSeconds += binary.seconds;
      if (options.progress)
        options.progress(done, total);
    } catch (const std::exception &e) {
      std::lock_guard<std::mutex> lock(mutex);
      errors[job] = e.what();
    }
  };

  unsigned jobs = (unsigned)std::min<size_t>(
      options.jobs ? options.jobs : llvm::hardware_concurrency().compute_thread_count(), total);
  if (jobs <= 1) {
    for (size_t job = 0; job < total; ++job)
      compileJob(job);
  } else {
    llvm::DefaultThreadPool pool(llvm::hardware_concurrency(jobs));
    for (size_t job = 0; job < total; ++job)
      pool.async([&, job] { compileJob(job); });
    pool.wait();
  }
  // All failures counted, the first few in full.
  size_t failures = 0;
  std::string message;
  for (const std::string &e : errors)
    if (!e.empty() && ++failures <= 3)
      message += (message.empty() ? "" : "\n") + e;
  if (failures > 1)
    message = std::to_string(failures) + " of " + std::to_string(total) +
              " CUDA compiles failed; the first:\n" + message;
  if (failures)
    throw Error(message);
  module.stats.compiles = total;
  module.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return module;
}

#else // !TCC_HAVE_NVRTC

bool tcc::codegen::nvrtcAvailable() { return false; }

std::string tcc::codegen::nvrtcVersionString() {
  return "NVRTC unavailable (the CUDA toolkit was not found when tcc was configured)";
}

CudaModule tcc::codegen::compileCudaModule(const std::vector<KernelSource> &kernels,
                                           const CudaCompileOptions &options) {
  throw Error("cannot compile CUDA kernels: this build of tcc has no NVRTC (the CUDA toolkit "
              "was not found when it was configured)");
}

#endif
