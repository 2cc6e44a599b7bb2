//===- tcc-cuda-compile-check.cpp - Compile a suite's kernels for CUDA ----===//
//
//   tcc-cuda-compile-check [--arch sm_80,sm_90] [--every K] [-j N] [--no-cache]
//                          [--kernels-per-program N] [--expected-failures FILE] [-v] DIR...
//
// For every case of ONNX backend-test suites (the layout `tcc check` reads; a DIR holding
// model.onnx is one case): imports the model for the first data set's inputs, lowers it and
// emits its CUDA kernels exactly as `tcc compile --device cuda` does (lowerModule and
// emitCudaProgram: the tk kernels and the generated convolution / top-k kernels), then
// compiles the kernels of all cases together with NVRTC for each architecture (batched into
// programs, in parallel, through the kernel cache). Fails if a kernel cannot be emitted or
// compiled, or if ptxas reports spills for any of them, and prints the counts, times and
// register usage (stack frames without spills are counted: CUDA's sin/cos/tan keep a small
// local array for the reduction of huge arguments). A case whose test data cannot be read is
// skipped, as is one that fails before code generation and is listed in the expected-failures
// file (the CPU backend's list: those cases do not lower there either). `--every K` takes
// every K-th case in name order (a deterministic subset).
//
//===----------------------------------------------------------------------===//
#include "tcc/Driver/Check.h"
#include "tcc/Driver/Pipeline.h"

#include "tcc/Codegen/NvrtcCompiler.h"
#include "tcc/Compiler/Compiler.h"
#include "tcc/Frontend/OnnxModel.h"
#include "tcc/IR/TkDialect.h"

#include "mlir/IR/SymbolTable.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace fs = std::filesystem;
using namespace tcc;

namespace {

struct Options {
  std::vector<std::string> archs = {"sm_80", "sm_90"};
  std::vector<std::string> dirs;
  std::string expectedFailures;
  size_t every = 1;
  unsigned jobs = 0;
  size_t kernelsPerProgram = 0; // 0: the compiler's default
  bool useCache = true, verbose = false;
};

int usage() {
  std::cerr << "usage: tcc-cuda-compile-check [--arch sm_80,sm_90] [--every K] [-j N] "
               "[--no-cache] [--kernels-per-program N] [--expected-failures FILE] [-v] "
               "DIR...\n";
  return 2;
}

std::vector<fs::path> numbered(const fs::path &dir, const std::string &prefix) {
  std::vector<fs::path> files;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0 && e.path().extension() == ".pb")
      files.push_back(e.path());
  std::sort(files.begin(), files.end(), [&](const fs::path &a, const fs::path &b) {
    auto n = [&](const fs::path &p) { return std::stoll(p.stem().string().substr(prefix.size())); };
    return n(a) < n(b);
  });
  return files;
}

struct CaseResult {
  enum { Emitted, Skipped, Failed } status = Failed;
  std::string detail;
  std::vector<codegen::KernelSource> kernels;
  std::vector<std::string> strategies;
};

CaseResult emitCase(const fs::path &dir, bool expectedToFail) {
  CaseResult r;
  std::string stage = "reading the test data";
  try {
    LoadOptions load;
    std::vector<fs::path> sets;
    for (const auto &e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
        sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (!sets.empty()) {
      for (const fs::path &f : numbered(sets[0], "input_"))
        load.inputs.push_back(readTensorFile(f.string()));
      // Like `tcc check`: a case whose expected outputs are not plain tensors is skipped.
      for (const fs::path &f : numbered(sets[0], "output_"))
        readTensorFile(f.string());
    }
    stage = "importing";
    LoadedModel model = loadModel((dir / "model.onnx").string(), load);
    stage = "lowering";
    mlir::ModuleOp module = *model.imported.module;
    CompileOptions compile;
    compile.device = "cuda";
    lowerModule(module, compile);
    stage = "emitting CUDA";
    // The case's kernels renamed to be unique across cases (the generated library kernels are
    // named after their geometry: equal names are equal kernels, compiled once).
    std::string prefix = dir.filename().string() + "__";
    mlir::SymbolTable symbols(module);
    for (auto fn : llvm::make_early_inc_range(module.getOps<mlir::func::FuncOp>()))
      if (tk::isKernel(fn) &&
          mlir::failed(symbols.rename(fn, prefix + fn.getSymName().str())))
        throw Error("cannot rename kernel '" + fn.getSymName().str() + "'");
    for (codegen::CudaKernel &k : emitCudaProgram(module).kernels) {
      r.kernels.push_back({k.name, std::move(k.source)});
      r.strategies.push_back(k.strategy.substr(0, k.strategy.find(' ')));
    }
    r.status = CaseResult::Emitted;
  } catch (const std::exception &e) {
    bool beforeCodegen = stage != "emitting CUDA";
    if (stage == "reading the test data" || (beforeCodegen && expectedToFail)) {
      r.status = CaseResult::Skipped;
      r.detail = stage + ": " + e.what();
    } else {
      r.status = CaseResult::Failed;
      r.detail = stage + ": " + e.what();
    }
  }
  return r;
}

int run(const Options &options) {
  auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (!codegen::nvrtcAvailable()) {
    std::cout << "SKIP: " << codegen::nvrtcVersionString() << "\n";
    return 0;
  }
  std::set<std::string> expected;
  for (const auto &[name, reason] : readExpectedFailures(options.expectedFailures))
    expected.insert(name);
  std::vector<fs::path> cases;
  for (const std::string &d : options.dirs) {
    if (fs::exists(fs::path(d) / "model.onnx")) {
      cases.push_back(d);
      continue;
    }
    if (!fs::is_directory(d))
      throw Error("'" + d + "' is not a directory");
    std::vector<fs::path> suite;
    for (const auto &e : fs::directory_iterator(d))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx"))
        suite.push_back(e.path());
    std::sort(suite.begin(), suite.end());
    cases.insert(cases.end(), suite.begin(), suite.end());
  }
  std::vector<fs::path> picked;
  for (size_t i = 0; i < cases.size(); i += options.every)
    picked.push_back(cases[i]);

  // Import, lower and emit, one case per worker at a time.
  std::vector<CaseResult> results(picked.size());
  std::atomic<size_t> next{0};
  unsigned jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < std::min<size_t>(jobs, picked.size()); ++t)
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < picked.size();)
        results[i] = emitCase(picked[i], expected.count(picked[i].filename().string()) != 0);
    });
  for (auto &w : workers)
    w.join();
  double emitSeconds = seconds();

  std::vector<codegen::KernelSource> sources;
  std::set<std::string> names;
  std::map<std::string, size_t> strategies;
  size_t emitted = 0, skipped = 0, failed = 0;
  for (size_t i = 0; i < picked.size(); ++i) {
    const CaseResult &r = results[i];
    std::string name = picked[i].filename().string();
    if (r.status == CaseResult::Failed) {
      ++failed;
      std::cout << "FAIL  " << name << ": " << r.detail << "\n";
      continue;
    }
    if (r.status == CaseResult::Skipped) {
      ++skipped;
      if (options.verbose)
        std::cout << "SKIP  " << name << ": " << r.detail << "\n";
      continue;
    }
    ++emitted;
    for (size_t k = 0; k < r.kernels.size(); ++k) {
      if (!names.insert(r.kernels[k].name).second)
        continue; // a library kernel another case generated too
      sources.push_back(r.kernels[k]);
      ++strategies[r.strategies[k]];
      if (options.verbose && r.strategies[k] == "serial")
        std::cout << "NOTE  " << r.kernels[k].name << ": one thread runs the whole kernel\n";
    }
  }

  codegen::CudaCompileOptions compile;
  compile.archs = options.archs;
  compile.useCache = options.useCache;
  compile.jobs = options.jobs;
  if (options.kernelsPerProgram)
    compile.maxKernelsPerProgram = options.kernelsPerProgram;
  codegen::CudaModule module;
  try {
    module = codegen::compileCudaModule(sources, compile);
  } catch (const std::exception &e) {
    std::cout << "FAIL  NVRTC: " << e.what() << "\n";
    return 1;
  }

  // Resource usage per architecture.
  size_t spilling = 0, framed = 0;
  for (size_t a = 0; a < options.archs.size(); ++a) {
    std::map<int, size_t> histogram; // registers rounded up to 16 -> kernels
    int most = 0;
    std::string mostName;
    for (const codegen::CudaCompiledKernel &k : module.kernels) {
      const codegen::CudaBinary &b = k.binaries[a];
      histogram[(b.registers + 15) / 16 * 16]++;
      if (b.registers > most)
        most = b.registers, mostName = k.name;
      if (b.spillStoreBytes || b.spillLoadBytes) {
        ++spilling;
        std::cout << "FAIL  " << k.name << " (" << b.arch << "): " << b.spillStoreBytes
                  << " bytes spill stores, " << b.spillLoadBytes << " bytes spill loads\n";
      } else if (b.stackBytes) {
        // Not a spill: a local array, in practice the Payne-Hanek argument reduction of CUDA's
        // sin/cos/tan for huge arguments (a slow path taken only for |x| > 105615).
        ++framed;
        if (options.verbose)
          std::cout << "NOTE  " << k.name << " (" << b.arch << "): " << b.stackBytes
                    << " bytes stack frame, no spills\n";
      }
    }
    std::cout << options.archs[a] << " registers per thread (kernels):";
    for (auto [regs, count] : histogram)
      std::cout << " <=" << regs << ": " << count;
    std::cout << "; most " << most << " (" << mostName << ")\n";
  }
  std::cout << "strategies:";
  for (auto [s, count] : strategies)
    std::cout << " " << s << " " << count;
  std::cout << "\n";
  const codegen::CudaCompileStats &st = module.stats;
  size_t compiled = st.compiles - st.cacheHits;
  std::printf("%zu cases: %zu emitted, %zu skipped, %zu failed; %zu kernels in %zu NVRTC programs, "
              "%zu compiles (%zu cache hits), %zu spilling, %zu with a stack frame; "
              "import+lower+emit %.1f s, NVRTC %.1f s wall, %.3f s per compile (%s), total "
              "%.1f s\n",
              picked.size(), emitted, skipped, failed, st.kernels, st.programs, st.compiles,
              st.cacheHits, spilling, framed, emitSeconds, st.seconds,
              compiled ? st.nvrtcSeconds / compiled : 0.0, module.compiler.c_str(), seconds());
  return failed || spilling ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc)
          throw Error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--arch") {
        options.archs.clear();
        std::string list = value();
        for (size_t p = 0; p <= list.size();) {
          size_t comma = std::min(list.find(',', p), list.size());
          if (comma > p)
            options.archs.push_back(list.substr(p, comma - p));
          p = comma + 1;
        }
      } else if (a == "--every") {
        options.every = std::max(1, std::stoi(value()));
      } else if (a == "-j") {
        options.jobs = (unsigned)std::stoi(value());
      } else if (a == "--kernels-per-program") {
        options.kernelsPerProgram = (size_t)std::max(1, std::stoi(value()));
      } else if (a == "--no-cache") {
        options.useCache = false;
      } else if (a == "--expected-failures") {
        options.expectedFailures = value();
      } else if (a == "-v") {
        options.verbose = true;
      } else if (!a.empty() && a[0] == '-') {
        return usage();
      } else {
        options.dirs.push_back(a);
      }
    }
    if (options.dirs.empty())
      return usage();
    return run(options);
  } catch (const std::exception &e) {
    std::cerr << "tcc-cuda-compile-check: " << e.what() << "\n";
    return 1;
  }
}
