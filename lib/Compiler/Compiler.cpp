//===- Compiler.cpp - From an imported graph module to a tcc artifact -----===//
//
// Stages (each can be dumped with CompileOptions::dumpDir, and each is a tcc-opt pass):
//   1. -tcc-fuse              graph ops grouped into tcc.fusion ops
//   2. -tcc-lower-to-kernels  tk kernels + the tk program; canonicalize + CSE tidy the kernels
//   3. -tcc-plan-memory       arena offsets
//   4. code generation        one C++ translation unit per kernel, compiled in parallel through
//                             the disk cache into one shared object
//   5. the artifact           FlatBuffers (ArtifactWriter)
//
//===----------------------------------------------------------------------===//
#include "tcc/Compiler/Compiler.h"

#include "tcc/Codegen/CppEmitter.h"
#include "tcc/Codegen/KernelCompiler.h"
#include "tcc/Compiler/ArtifactWriter.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

using namespace mlir;

namespace tcc {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream f(path);
  if (!f)
    throw Error("cannot write '" + path + "'");
  f << text;
}

void dumpModule(const CompileOptions &options, ModuleOp module, const char *name) {
  if (options.dumpDir.empty())
    return;
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  flags.elideLargeElementsAttrs(16);
  module->print(os, flags);
  writeFile(options.dumpDir + "/" + name, text);
}

/// Runs `build`'s passes; errors (with their op locations) become one tcc::Error. With
/// `explain`, remarks go to stderr as they come.
void runPasses(ModuleOp module, const char *stage, bool explain,
               llvm::function_ref<void(PassManager &)> build) {
  MLIRContext *ctx = module.getContext();
  std::string errors;
  ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << diag.getLocation() << ": " << diag;
    for (const Diagnostic &note : diag.getNotes())
      os << "\n  note: " << note.getLocation() << ": " << note;
    if (diag.getSeverity() == DiagnosticSeverity::Remark) {
      if (explain)
        std::cerr << "tcc: fusion: " << text << "\n";
    } else if (diag.getSeverity() == DiagnosticSeverity::Error) {
      errors += (errors.empty() ? "" : "\n") + text;
    }
    return success();
  });
  PassManager pm(ctx);
  build(pm);
  if (failed(pm.run(module)))
    throw Error(std::string(stage) + " failed:\n" +
                (errors.empty() ? std::string("(no diagnostic)") : errors));
}

} // namespace

std::string CompileReport::toJson() const {
  std::ostringstream os;
  os.precision(6);
  os << "{\n  \"device\": \"" << device << "\",\n  \"kernels\": " << kernels
     << ",\n  \"extern_calls\": " << externCalls << ",\n  \"launches\": " << launches
     << ",\n  \"arena_bytes\": " << arenaBytes << ",\n  \"unplanned_bytes\": " << unplannedBytes
     << ",\n  \"constant_bytes\": " << constantBytes << ",\n  \"artifact_bytes\": "
     << artifactBytes << ",\n  \"cache_hits\": " << cacheHits << ",\n  \"compile_seconds\": "
     << compileSeconds << ",\n  \"codegen_seconds\": " << codegenSeconds
     << ",\n  \"kernel_names\": [";
  for (size_t i = 0; i < kernelNames.size(); ++i)
    os << (i ? ", " : "") << "\"" << kernelNames[i] << "\"";
  os << "]\n}\n";
  return os.str();
}

CompiledModel compileModule(ModuleOp module, const CompileOptions &options) {
  auto start = std::chrono::steady_clock::now();
  if (options.device != "cpu")
    throw Error("cannot compile for device '" + options.device + "': this build of tcc "
                "compiles for 'cpu' (run 'interp' models with tcc run --device interp)");
  if (!options.dumpDir.empty()) {
    if (auto ec = llvm::sys::fs::create_directories(options.dumpDir))
      throw Error("cannot create '" + options.dumpDir + "': " + ec.message());
    dumpModule(options, module, "0-graph.mlir");
  }

  runPasses(module, "fusion", options.explainFusion, [&](PassManager &pm) {
    FuseOptions fuse;
    fuse.explain = options.explainFusion;
    pm.addNestedPass<func::FuncOp>(createFuse(fuse));
  });
  dumpModule(options, module, "1-fused.mlir");
  runPasses(module, "lowering to kernels", false, [&](PassManager &pm) {
    pm.addPass(createLowerToKernels());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    pm.addPass(createPlanMemory());
  });
  dumpModule(options, module, "2-kernels.mlir");

  CompiledModel out;
  CompileReport &report = out.report;
  report.device = options.device;

  // Code generation: every kernel function becomes a translation unit.
  std::vector<codegen::KernelSource> sources;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (!tk::isKernel(f))
      continue;
    sources.push_back({f.getName().str(), codegen::emitCpuKernel(f)});
    report.kernelNames.push_back(f.getName().str());
  }
  if (!options.dumpDir.empty()) {
    llvm::sys::fs::create_directories(options.dumpDir + "/kernels");
    for (const auto &k : sources)
      writeFile(options.dumpDir + "/kernels/" + k.name + ".cpp", k.source);
  }
  codegen::CpuCompileOptions cc;
  cc.cacheDir = options.cacheDir;
  cc.useCache = options.useCache;
  cc.jobs = options.jobs;
  bool showProgress = options.progress && isatty(STDERR_FILENO) && sources.size() > 1;
  if (showProgress)
    cc.progress = [](size_t done, size_t total) {
      std::fprintf(stderr, "\rtcc: compiling kernels %zu/%zu", done, total);
      if (done == total)
        std::fprintf(stderr, "\n");
      std::fflush(stderr);
    };
  codegen::CpuModule cpu = codegen::compileCpuModule(sources, cc);
  report.cacheHits = cpu.stats.cacheHits;
  report.codegenSeconds = cpu.stats.seconds;

  ArtifactContents contents;
  contents.device = options.device;
  contents.cpuSharedObject = std::move(cpu.sharedObject);
  contents.cpuCompiler = cpu.compiler;
  contents.cpuIsa = cpu.isa;
  contents.specializedInputs = options.specializedInputs;
  contents.inputNames = options.inputNames;
  contents.outputNames = options.outputNames;
  ArtifactStats stats;
  out.artifact = writeArtifact(module, contents, &stats);

  report.kernels = sources.size();
  report.externCalls = stats.externCalls;
  report.launches = stats.launches;
  report.arenaBytes = stats.arenaBytes;
  report.constantBytes = stats.constantBytes;
  report.artifactBytes = out.artifact.size();
  for (auto f : module.getOps<func::FuncOp>())
    if (tk::isProgram(f))
      f.walk([&](tk::AllocOp a) { report.unplannedBytes += tk::bufferBytes(a.getType()); });
  report.compileSeconds = secondsSince(start);
  return out;
}

} // namespace tcc
