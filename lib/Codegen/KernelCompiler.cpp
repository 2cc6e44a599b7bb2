//===- KernelCompiler.cpp - Host compiler driver and on-disk kernel cache -===//
//
// See KernelCompiler.h. Compiler runs go through llvm::sys::ExecuteAndWait, in parallel on an
// llvm::DefaultThreadPool; cache keys are llvm::SHA256 digests; cache entries appear by
// rename(2) of a fully written temporary in the same directory, so readers see a whole file or
// none.
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/KernelCompiler.h"
#include "tcc/Codegen/CppEmitter.h"
#include "tcc/Runtime/CpuFeatures.h"

#include "tcc/Support/Tensor.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

using namespace tcc;
using namespace tcc::codegen;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace {

/// Not -z nodelete: a freed program unloads its module (a service loading and freeing models
/// would otherwise keep every module mapped, five mappings each, until it runs out). libgomp,
/// which the module's parallel loops run on, is not unloaded with it: libtccrt links it too,
/// and its pooled worker threads wait in libgomp's code, never in the module's.
constexpr const char *kLinkFlags = "-shared -fopenmp";

std::vector<std::string> splitFlags(llvm::StringRef flags) {
  llvm::SmallVector<llvm::StringRef> parts;
  flags.split(parts, ' ', -1, /*KeepEmpty=*/false);
  return std::vector<std::string>(parts.begin(), parts.end());
}

std::string readFileOrEmpty(const llvm::Twine &file) {
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

struct RunResult {
  int status = -1;
  std::string output; // stdout and stderr together
};

/// Runs `program args...` with stdin from /dev/null and stdout+stderr captured.
RunResult run(const std::string &program, const std::vector<std::string> &args,
              llvm::StringRef stdinFile = "") {
  llvm::SmallString<128> outFile;
  if (std::error_code ec = fs::createTemporaryFile("tcc-cxx", "log", outFile))
    throw Error("cannot create a temporary file: " + ec.message());
  llvm::FileRemover removeOut(outFile);
  std::vector<llvm::StringRef> argv{program};
  for (const std::string &a : args)
    argv.push_back(a);
  std::optional<llvm::StringRef> redirects[] = {stdinFile, llvm::StringRef(outFile),
                                                llvm::StringRef(outFile)};
  std::string error;
  RunResult result;
  result.status = llvm::sys::ExecuteAndWait(program, argv, std::nullopt, redirects, 0, 0, &error);
  result.output = readFileOrEmpty(outFile);
  if (result.status < 0)
    result.output += error;
  return result;
}

struct Compiler {
  std::string path;
  std::string version;  // first line of --version
  std::string identity; // version, target of -march=native, flags: part of every cache key
  std::vector<std::string> isa; // ISA extensions -march=native enables
};

/// The compiler to use ($TCC_CXX, else c++ from PATH), identified once per process and path.
const Compiler &hostCompiler() {
  static std::mutex mutex;
  static std::map<std::string, Compiler> known;
  const char *env = std::getenv("TCC_CXX");
  std::string name = env && *env ? env : "c++";
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(name);
  if (it != known.end())
    return it->second;

  Compiler c;
  if (name.find('/') != std::string::npos) {
    c.path = name;
  } else {
    auto found = llvm::sys::findProgramByName(name);
    if (!found)
      throw Error("cannot find the C++ compiler '" + name +
                  "' on PATH (set TCC_CXX to a compiler)");
    c.path = *found;
  }
  RunResult version = run(c.path, {"--version"});
  if (version.status != 0)
    throw Error("'" + c.path + " --version' failed:\n" + version.output);
  c.version = llvm::StringRef(version.output).split('\n').first.trim().str();
  // -march=native means different code on different machines (a cache dir may be shared):
  // the predefined macros name the target features it resolves to.
  std::vector<std::string> args = {"-march=native", "-E", "-dM", "-x", "c++", "-"};
  RunResult macros = run(c.path, args, "/dev/null");
  if (macros.status != 0)
    throw Error("'" + c.path + " -march=native -E -dM' failed:\n" + macros.output);
  c.isa = rt::cpuFeaturesFromMacros(macros.output);
  c.identity = c.version + "\ntarget " + KernelCache::key({macros.output}) + "\nflags " +
               kCpuCompileFlags + "\nlink " + kLinkFlags;
  return known.emplace(name, std::move(c)).first->second;
}

} // namespace

std::string KernelCache::key(const std::vector<std::string> &parts) {
  llvm::SHA256 hasher;
  for (const std::string &part : parts) {
    hasher.update(part);
    hasher.update(llvm::StringRef("\0", 1)); // separator: ("ab","c") != ("a","bc")
  }
  std::array<uint8_t, 32> digest = hasher.final();
  return llvm::toHex(digest, /*LowerCase=*/true);
}

std::string KernelCache::path(const std::string &key, const std::string &ext) const {
  std::string dir = sharded ? root + "/" + key.substr(0, 2) : root;
  if (std::error_code ec = fs::create_directories(dir))
    throw Error("cannot create the kernel cache directory " + dir + ": " + ec.message());
  return dir + "/" + key + ext;
}

bool KernelCache::contains(const std::string &key, const std::string &ext) const {
  return fs::exists(path(key, ext));
}

bool KernelCache::read(const std::string &key, const std::string &ext, std::string &bytes) const {
  auto buffer = llvm::MemoryBuffer::getFile(path(key, ext), /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return false;
  bytes = (*buffer)->getBuffer().str();
  return true;
}

void KernelCache::write(const std::string &key, const std::string &ext,
                        const std::string &bytes) const {
  std::string final = path(key, ext), temp = temporaryNextTo(final);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(temp, ec, fs::OF_None);
    if (ec)
      throw Error("cannot write the kernel cache file " + temp + ": " + ec.message());
    os << bytes;
    os.close();
    if (os.has_error()) {
      os.clear_error();
      fs::remove(temp);
      throw Error("cannot write the kernel cache file " + temp);
    }
  }
  publish(temp, final);
}

std::string KernelCache::temporaryNextTo(const std::string &final) {
  llvm::SmallString<256> model(final);
  model += ".tmp-%%%%%%%%%%%%";
  llvm::SmallString<256> result;
  fs::createUniquePath(model, result, /*MakeAbsolute=*/false);
  return result.str().str();
}

void KernelCache::publish(const std::string &temporary, const std::string &final) {
  // A concurrent winner is as good as us.
  if (std::error_code ec = fs::rename(temporary, final)) {
    fs::remove(temporary);
    if (!fs::exists(final))
      throw Error("cannot write the kernel cache file " + final + ": " + ec.message());
  }
}

std::string tcc::codegen::defaultKernelCacheDir() {
  if (const char *dir = std::getenv("TCC_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (llvm::Twine(xdg) + "/tcc").str();
  llvm::SmallString<128> home;
  if (path::home_directory(home))
    return (home + "/.cache/tcc").str();
  llvm::SmallString<128> tmp;
  path::system_temp_directory(/*ErasedOnReboot=*/true, tmp);
  return (tmp + "/tcc-cache").str();
}

CpuModule tcc::codegen::compileCpuModule(const std::vector<KernelSource> &kernels,
                                         const CpuCompileOptions &options) {
  auto start = std::chrono::steady_clock::now();
  const Compiler &cxx = hostCompiler();
  CpuModule module;
  module.compiler = cxx.version + " " + kCpuCompileFlags;
  module.isa = cxx.isa;
  module.stats.kernels = kernels.size();
  if (kernels.empty())
    return module;

  // Where objects go: the cache, or a scratch directory removed at the end.
  std::string root;
  llvm::SmallString<128> scratch;
  if (options.useCache) {
    root = (options.cacheDir.empty() ? defaultKernelCacheDir() : options.cacheDir) + "/cpu";
  } else {
    if (std::error_code ec = fs::createUniqueDirectory("tcc-kernels", scratch))
      throw Error("cannot create a temporary directory: " + ec.message());
    root = scratch.str().str();
  }
  auto removeScratch = llvm::make_scope_exit([&] {
    if (!scratch.empty())
      fs::remove_directories(scratch);
  });
  KernelCache cache(root, /*sharded=*/options.useCache);

  std::vector<std::string> keys(kernels.size()), objects(kernels.size());
  std::vector<std::string> errors(kernels.size());
  std::mutex mutex;
  size_t done = 0, hits = 0;
  std::vector<std::string> flags = splitFlags(kCpuCompileFlags);

  auto compileOne = [&](size_t i) {
    try {
      const KernelSource &k = kernels[i];
      keys[i] = KernelCache::key({cxx.identity, k.source});
      objects[i] = cache.path(keys[i], ".o");
      bool hit = options.useCache && fs::exists(objects[i]);
      if (!hit) {
        llvm::SmallString<128> source;
        if (std::error_code ec = fs::createTemporaryFile("tcc-" + k.name, "cpp", source))
          throw Error("cannot create a temporary file: " + ec.message());
        {
          std::error_code ec;
          llvm::raw_fd_ostream os(source, ec);
          if (ec)
            throw Error("cannot write " + source.str().str() + ": " + ec.message());
          os << k.source;
        }
        std::string temp = KernelCache::temporaryNextTo(objects[i]);
        std::vector<std::string> args = flags;
        for (const char *a : {"-c", "-x", "c++"})
          args.push_back(a);
        args.push_back(source.str().str());
        args.push_back("-o");
        args.push_back(temp);
        RunResult r = run(cxx.path, args);
        if (r.status != 0) {
          fs::remove(temp);
          // Keep the source for the user to look at.
          throw Error("compiling kernel '" + k.name + "' failed (" + cxx.path + " exited with " +
                      std::to_string(r.status) + "; source kept at " + source.str().str() +
                      "):\n" + r.output);
        }
        fs::remove(source);
        KernelCache::publish(temp, objects[i]);
      }
      std::lock_guard<std::mutex> lock(mutex);
      hits += hit;
      ++done;
      if (options.progress)
        options.progress(done, kernels.size());
    } catch (const std::exception &e) {
      std::lock_guard<std::mutex> lock(mutex);
      errors[i] = e.what();
    }
  };

  unsigned jobs = std::min<size_t>(
      options.jobs ? options.jobs : llvm::hardware_concurrency().compute_thread_count(),
      kernels.size());
  if (jobs <= 1) {
    for (size_t i = 0; i < kernels.size(); ++i)
      compileOne(i);
  } else {
    llvm::DefaultThreadPool pool(llvm::hardware_concurrency(jobs));
    for (size_t i = 0; i < kernels.size(); ++i)
      pool.async([&, i] { compileOne(i); });
    pool.wait();
  }
  for (const std::string &e : errors)
    if (!e.empty())
      throw Error(e);
  module.stats.cacheHits = hits;

  // Link (cached by the object keys: equal objects link to an equal shared object).
  std::vector<std::string> keyParts{cxx.identity, kLinkFlags};
  keyParts.insert(keyParts.end(), keys.begin(), keys.end());
  std::string so = cache.path(KernelCache::key(keyParts), ".so");
  module.stats.linkCacheHit = options.useCache && fs::exists(so);
  if (!module.stats.linkCacheHit) {
    std::string temp = KernelCache::temporaryNextTo(so);
    std::vector<std::string> args = splitFlags(kLinkFlags);
    args.push_back("-o");
    args.push_back(temp);
    for (const std::string &o : objects)
      args.push_back(o);
    RunResult r = run(cxx.path, args);
    if (r.status != 0) {
      fs::remove(temp);
      throw Error("linking " + std::to_string(kernels.size()) + " kernel(s) failed (" + cxx.path +
                  " exited with " + std::to_string(r.status) + "):\n" + r.output);
    }
    KernelCache::publish(temp, so);
  }
  auto buffer = llvm::MemoryBuffer::getFile(so, false, false);
  if (!buffer)
    throw Error("cannot read " + so + ": " + buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  module.sharedObject.assign(bytes.begin(), bytes.end());
  module.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return module;
}
