//===- Compiler.h - From an imported graph module to a tcc artifact -------===//
//
// The compiler's back half, device by device: fusion (-tcc-fuse), lowering to kernels and a
// program (-tcc-lower-to-kernels), memory planning (-tcc-plan-memory), code generation (the C++
// emitter and the kernel compiler with its disk cache) and the FlatBuffers artifact.
#pragma once

#include "tcc/Support/Tensor.h"
#include "tcc/Training/TrainingSpec.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tcc {

struct CompileOptions {
  std::string device = "cpu";
  bool useCache = true;        // the on-disk kernel cache (--no-cache turns it off)
  std::string cacheDir;        // empty: the default (see KernelCompiler.h)
  unsigned jobs = 0;           // parallel kernel compiles; 0 = one per core
  bool explainFusion = false;  // print every fusion decision with its reason (stderr)
  bool progress = false;       // a progress line on stderr while kernels compile
  std::string dumpDir;         // if set: write each IR stage and the kernel sources there
  /// Inputs whose values the import baked into the graph: recorded so the runtime can refuse
  /// other values.
  std::map<std::string, Tensor> specializedInputs;
  std::vector<std::string> inputNames, outputNames; // graph input/output names, in order
};

struct CompileReport {
  std::string device;
  size_t kernels = 0;          // generated kernels (library calls not counted)
  size_t externCalls = 0;      // library calls (GEMM, convolution, top-k)
  size_t launches = 0;         // steps in the launch list (kernels, library calls, copies)
  uint64_t arenaBytes = 0;     // temporaries, after memory planning
  uint64_t unplannedBytes = 0; // what the temporaries would take without sharing
  uint64_t constantBytes = 0;
  uint64_t artifactBytes = 0;
  size_t cacheHits = 0;        // kernels whose object came from the disk cache
  double compileSeconds = 0;   // whole compile (set by the caller if it includes loading)
  double codegenSeconds = 0;   // host compiler time (incl. cache lookups)
  std::vector<std::string> kernelNames; // training artifacts: "<entry>/<kernel>"
  /// Training artifacts: each entry's share (the fields above are sums over the entries).
  struct Entry {
    std::string name;
    size_t kernels = 0, launches = 0;
    uint64_t arenaBytes = 0;
  };
  std::vector<Entry> entries;
  /// JSON object: kernels, extern_calls, launches, arena_bytes, unplanned_bytes,
  /// constant_bytes, artifact_bytes, cache_hits, compile_seconds, codegen_seconds, device,
  /// kernel_names, and for training artifacts entries ([{name, kernels, launches,
  /// arena_bytes}]).
  std::string toJson() const;
};

struct CompiledModel {
  std::vector<uint8_t> artifact; // a FlatBuffers tcc artifact (include/tcc/Runtime/artifact.fbs)
  CompileReport report;
};

/// Compiles the imported graph (func.func @main over tensors; rewritten in place). Throws
/// tcc::Error with the diagnostics (naming the op) when a stage fails.
CompiledModel compileModule(mlir::ModuleOp module, const CompileOptions &options);

/// Compiles every entry of a training spec (include/tcc/Training/TrainingSpec.h) like an
/// inference model and serialises them, with the state and its initial values, as one training
/// artifact. The report sums the entries (kernels, launches, bytes...).
CompiledModel compileTraining(TrainingSpec &spec, const CompileOptions &options);

} // namespace tcc
