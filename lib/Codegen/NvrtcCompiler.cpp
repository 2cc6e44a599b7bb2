//===- NvrtcCompiler.cpp - CUDA kernels to PTX and cubins with NVRTC ------===//
//
// See NvrtcCompiler.h. Kernels are batched into NVRTC programs; each program is compiled for
// each real architecture, and nvrtcGetPTX then returns the PTX NVRTC generated on the way (same
// .target), so PTX and cubin cost one compile. NVRTC API calls other than nvrtcGetTypeName are
// thread-safe (nvrtc.h), so programs compile concurrently on a thread pool.
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

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>

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

void tcc::codegen::checkCudaArch(const std::string &arch) {
  llvm::StringRef a(arch);
  bool ok = a.consume_front("sm_");
  a.consume_back("a");
  unsigned number;
  if (!ok || a.empty() || a.getAsInteger(10, number) || number < 10)
    throw Error("invalid CUDA architecture '" + arch +
                "': expected a real architecture sm_<major><minor> such as sm_80, sm_90 or "
                "sm_90a");
}

#ifdef TCC_HAVE_NVRTC

namespace {

std::string nvrtcError(nvrtcResult r) { return nvrtcGetErrorString(r); }

/// Checks an NVRTC call that cannot fail on valid input.
void check(nvrtcResult r, const char *what) {
  if (r != NVRTC_SUCCESS)
    throw Error(std::string("NVRTC ") + what + " failed: " + nvrtcError(r));
}

/// Several kernels as one NVRTC translation unit.
struct Program {
  std::vector<size_t> kernels; // indices into the input
  std::string name;            // for messages and the kept source: the first kernel's name
  std::string source;
};

/// The kernels' sources concatenated, each starting with a #line directive naming it (so NVRTC
/// diagnostics say "<kernel>.cu(line)").
Program makeProgram(const std::vector<KernelSource> &kernels, size_t begin, size_t end) {
  Program p;
  p.name = kernels[begin].name;
  for (size_t i = begin; i < end; ++i) {
    p.kernels.push_back(i);
    p.source += "#line 1 \"" + kernels[i].name + ".cu\"\n" + kernels[i].source;
    if (p.source.back() != '\n')
      p.source += '\n';
  }
  return p;
}

/// Input order cut into ceil(n / perProgram) programs, but at least enough programs (up to one
/// per kernel) that programs x architectures keep `jobs` threads busy; sizes differ by at most
/// one.
std::vector<Program> batch(const std::vector<KernelSource> &kernels, size_t maxPerProgram,
                           size_t jobs, size_t numArchs) {
  size_t n = kernels.size();
  if (n == 0)
    return {};
  size_t perProgram = std::max<size_t>(1, maxPerProgram);
  size_t count = (n + perProgram - 1) / perProgram;
  count = std::max(count, std::min(n, (jobs + numArchs - 1) / numArchs));
  std::vector<Program> programs;
  for (size_t i = 0, begin = 0; i < count; ++i) {
    size_t end = begin + n / count + (i < n % count ? 1 : 0);
    programs.push_back(makeProgram(kernels, begin, end));
    begin = end;
  }
  return programs;
}

/// Keeps a failing program's source for the user to look at.
std::string keepSource(const Program &p) {
  llvm::SmallString<128> path;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("tcc-" + p.name, "cu", fd, path))
    return "(could not keep the source)";
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << p.source;
  return path.str().str();
}

/// The kernels of `p` whose file ("<name>.cu(") NVRTC's log names.
std::string kernelsNamedIn(const std::string &log, const Program &p,
                           const std::vector<KernelSource> &kernels) {
  std::string names;
  for (size_t k : p.kernels)
    if (log.find(kernels[k].name + ".cu(") != std::string::npos)
      names += (names.empty() ? "'" : ", '") + kernels[k].name + "'";
  return names;
}

/// Compiles `p` for `arch` with NVRTC into `image` (PTX, cubin, log, seconds).
void compileProgram(const Program &p, const std::vector<KernelSource> &kernels,
                    const std::string &arch, CudaImage &image) {
  auto start = std::chrono::steady_clock::now();
  nvrtcProgram program;
  check(nvrtcCreateProgram(&program, p.source.c_str(), (p.name + ".cu").c_str(), 0, nullptr,
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
  if (result != NVRTC_SUCCESS) {
    std::string named = kernelsNamedIn(log, p, kernels);
    std::string what = named.empty() ? "an NVRTC program of " + std::to_string(p.kernels.size()) +
                                           " kernel(s) starting with '" + p.name + "'"
                                     : "kernel " + named;
    throw Error("NVRTC could not compile " + what + " for " + arch + " (" + nvrtcError(result) +
                "; source kept at " + keepSource(p) + "):\n" + log);
  }

  check(nvrtcGetPTXSize(program, &size), "nvrtcGetPTXSize");
  image.ptx.resize(size);
  check(nvrtcGetPTX(program, image.ptx.data()), "nvrtcGetPTX");
  if (!image.ptx.empty() && image.ptx.back() == '\0')
    image.ptx.pop_back();
  check(nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize");
  image.cubin.resize(size);
  check(nvrtcGetCUBIN(program, (char *)image.cubin.data()), "nvrtcGetCUBIN");
  image.log = std::move(log);
  image.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
    checkCudaArch(arch);
  if (std::set<std::string>(options.archs.begin(), options.archs.end()).size() !=
      options.archs.size())
    throw Error("a CUDA architecture is listed twice");
  std::set<std::string> names;
  for (const KernelSource &k : kernels)
    if (!names.insert(k.name).second)
      throw Error("two CUDA kernels are named '" + k.name + "'");

  CudaModule module;
  module.compiler = nvrtcVersionString() + " " + kNvrtcFlags;
  module.stats.kernels = kernels.size();
  size_t numArchs = options.archs.size();
  module.kernels.resize(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    module.kernels[i].name = kernels[i].name;
    module.kernels[i].binaries.resize(numArchs);
  }
  unsigned hardware = llvm::hardware_concurrency().compute_thread_count();
  unsigned jobs = options.jobs ? options.jobs : hardware;
  std::vector<Program> programs =
      batch(kernels, options.maxKernelsPerProgram, jobs, numArchs);
  size_t total = programs.size() * numArchs;
  module.images.resize(total);
  KernelCache cache((options.cacheDir.empty() ? defaultKernelCacheDir() : options.cacheDir) +
                    "/cuda");

  std::vector<std::string> errors(total);
  std::mutex mutex;
  size_t kernelsDone = 0;
  auto compileJob = [&](size_t job) {
    const Program &p = programs[job / numArchs];
    size_t a = job % numArchs;
    const std::string &arch = options.archs[a];
    CudaImage &image = module.images[job];
    image.arch = arch;
    image.kernels = p.kernels;
    try {
      std::string key = KernelCache::key({module.compiler, arch, p.source});
      // The log is written last: its presence means the whole entry is there.
      std::string log, cubin;
      image.cacheHit = options.useCache && cache.read(key, ".log", log) &&
                       cache.read(key, ".ptx", image.ptx) && cache.read(key, ".cubin", cubin);
      // Every kernel's ptxas report; the name of the first kernel without one, else "".
      auto parseReports = [&]() -> std::string {
        for (size_t k : p.kernels) {
          CudaBinary &binary = module.kernels[k].binaries[a];
          binary.arch = arch;
          binary.image = job;
          if (!parsePtxasReport(image.log, kernels[k].name, binary))
            return kernels[k].name;
        }
        return "";
      };
      if (image.cacheHit) {
        image.cubin.assign(cubin.begin(), cubin.end());
        image.log = std::move(log);
        image.cacheHit = parseReports().empty(); // else a damaged entry: compile again
      }
      if (!image.cacheHit) {
        compileProgram(p, kernels, arch, image);
        std::string missing = parseReports();
        if (!missing.empty())
          throw Error("NVRTC's log for kernel '" + missing + "' (" + arch +
                      ") has no ptxas report for it (is the kernel's function named '" +
                      missing + "'?):\n" + image.log);
      }
      if (options.useCache && !image.cacheHit) {
        cache.write(key, ".ptx", image.ptx);
        cache.write(key, ".cubin", std::string(image.cubin.begin(), image.cubin.end()));
        cache.write(key, ".log", image.log);
      }
      std::lock_guard<std::mutex> lock(mutex);
      kernelsDone += p.kernels.size();
      module.stats.cacheHits += image.cacheHit;
      module.stats.nvrtcSeconds += image.seconds;
      if (options.progress)
        options.progress(kernelsDone, kernels.size() * numArchs);
    } catch (const std::exception &e) {
      std::lock_guard<std::mutex> lock(mutex);
      errors[job] = e.what();
    }
  };

  jobs = (unsigned)std::min<size_t>(jobs, total);
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
              " NVRTC compiles failed; the first:\n" + message;
  if (failures)
    throw Error(message);
  module.stats.programs = programs.size();
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
  throw Error("cannot compile CUDA kernels: this tcc was built without the CUDA toolkit "
              "(NVRTC)");
}

#endif
