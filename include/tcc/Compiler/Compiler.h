//===- Compiler.h - From an imported graph module to a tcc artifact -------===//
//
// The compiler's back half, device by device: fusion (-tcc-fuse), lowering to kernels and a
// program (-tcc-lower-to-kernels), memory planning (-tcc-plan-memory), code generation and the
// FlatBuffers artifact. Code generation for "cpu": the C++ emitter and the host compiler with
// its disk cache; for "cuda": the CUDA emitter (and the generated convolution / top-k kernels of
// CudaLibraryKernels.h) and NVRTC, batched, for every architecture in `cudaArchs`.
#pragma once

#include "tcc/Support/Tensor.h"
#include "tcc/Training/TrainingSpec.h"

#include "tcc/Codegen/CudaEmitter.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tcc {

struct CompileOptions {
  std::string device = "cpu";  // "cpu" or "cuda"
  /// CUDA: the real architectures to make cubins (and PTX) for (--arch).
  std::vector<std::string> cudaArchs = {"sm_80", "sm_90"};
  /// CUDA: kernels per NVRTC program at most (0: NvrtcCompiler.h's default).
  size_t cudaKernelsPerProgram = 0;
  bool useCache = true;        // the on-disk kernel cache (--no-cache turns it off)
  std::string cacheDir;        // empty: the default (see KernelCompiler.h)
  unsigned jobs = 0;           // parallel kernel compiles; 0 = one per core
  bool explainFusion = false;  // print every fusion decision with its reason (stderr)
  /// "fp32", or "bf16"/"fp16": matrix products and attention in 16 bits with f32 accumulation,
  /// everything else in f32 (-tcc-autocast; training: the builder's TrainingOptions::precision).
  std::string precision = "fp32";
  /// CPU: the layout pass (-tcc-layout): "auto" (pointwise and depthwise convolutions
  /// channels-last where the cost model says it pays), "nhwc" (every one), "nchw" (none).
  std::string layout = "auto";
  bool explainLayout = false; // print every layout decision (stderr)
  /// Training steps: activation checkpointing (-tcc-remat): the cheap ops' saved values are
  /// recomputed in the backward pass; with `memoryBudget` >= 0 (bytes of saved activations)
  /// that they exceed, whole blocks are recomputed from their boundaries.
  bool remat = false;
  int64_t memoryBudget = -1;
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
  uint64_t stateBytes = 0;     // training artifacts: the most state one rank holds (all of it in one process)
  uint64_t artifactBytes = 0;
  size_t cacheHits = 0;        // kernels whose object came from the disk cache
  /// The layout changes the layout pass left (transposes between channels-first and
  /// channels-last values: one copy each at run time) and the bytes they write.
  size_t layoutCopies = 0;
  uint64_t layoutCopyBytes = 0;
  double compileSeconds = 0;   // whole compile (set by the caller if it includes loading)
  double codegenSeconds = 0;   // host compiler time (incl. cache lookups)
  std::vector<std::string> kernelNames; // training artifacts: "<entry>/<kernel>"
  /// Training artifacts: each entry's share (the fields above are sums over the entries).
  struct Entry {
    std::string name;
    size_t kernels = 0, launches = 0;
    uint64_t arenaBytes = 0;
    /// Training steps: the bytes of forward values the backward pass reads (the saved
    /// activations), after and before activation checkpointing (equal without it).
    uint64_t activationBytes = 0, activationBytesWithoutRemat = 0;
  };
  std::vector<Entry> entries;

  /// CUDA: every generated kernel (the program's and the convolution / top-k kernels), with
  /// its launch configuration and, per architecture, what ptxas reported.
  struct CudaResources {
    std::string arch; // "sm_80"
    int registers = 0, spillStores = 0, spillLoads = 0; // spills in bytes
    int stackBytes = 0, staticSharedBytes = 0;
  };
  struct CudaKernel {
    std::string name;     // training artifacts: "<entry>/<kernel>"
    std::string strategy; // CudaEmitter.h: e.g. "row team=32 vec=4"
    std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
    uint32_t sharedBytes = 0;
    std::vector<CudaResources> archs; // in cudaArchs order
  };
  std::vector<CudaKernel> cudaKernels;
  std::vector<std::string> cudaArchs;
  size_t nvrtcPrograms = 0;  // NVRTC programs the kernels were batched into (summed)
  double nvrtcSeconds = 0;   // NVRTC time summed over its compiles (they run in parallel)

  /// Distributed training artifacts (--mesh): what one rank holds and what it communicates.
  struct Distributed {
    std::string mesh;        // "dp=2,tp=2"
    int64_t ranks = 0;
    /// The state bytes by kind of the rank holding the most (ZeRO and tensor parallelism divide
    /// them, pipeline stages hold their own layers').
    uint64_t parameterBytes = 0, optimizerBytes = 0, accumulatorBytes = 0, bufferBytes = 0;
    /// And what the whole model's state takes in one process, for comparison.
    uint64_t wholeStateBytes = 0;
    /// Pipeline stages: their count, the micro-batches and the costliest stage's share of the
    /// forward's arithmetic (tcc/Passes/Pipeline.h).
    int64_t stages = 1, microBatches = 1;
    double largestStageShare = 1;
    struct Collectives {
      std::string entry, kind, axes; // "train_step", "all_reduce", "dp"
      int64_t count = 0, bytes = 0;  // per step, one rank's operands
      int64_t wireBytes = 0;         // per step, what one rank sends (ring algorithms)
    };
    std::vector<Collectives> collectives;
  };
  std::optional<Distributed> distributed;

  /// CUDA totals for the text report: the most registers any kernel uses (and which), and the
  /// kernels that spill on some architecture.
  int maxRegisters(std::string *kernel = nullptr) const;
  size_t spillingKernels() const;

  /// JSON object: kernels, extern_calls, launches, arena_bytes, unplanned_bytes,
  /// constant_bytes, artifact_bytes, cache_hits, compile_seconds, codegen_seconds, device,
  /// layout_copies, layout_copy_bytes,
  /// kernel_names, for training artifacts entries ([{name, kernels, launches, arena_bytes,
  /// activation_bytes, activation_bytes_without_remat}]),
  /// and for CUDA cuda_archs, nvrtc_programs, nvrtc_seconds and cuda_kernels ([{name,
  /// strategy, grid, block, shared_bytes, archs: {<arch>: {registers, spill_stores,
  /// spill_loads, stack_bytes, static_shared_bytes}}}]), and for distributed training
  /// artifacts distributed ({mesh, ranks, state_bytes_per_rank: {parameters, optimizer,
  /// grad_accumulators, buffers}, whole_state_bytes, collectives_per_step: [{entry, kind, axes,
  /// count, bytes, wire_bytes}]}; entries' arena_bytes are then per entry and rank).
  std::string toJson() const;
};

struct CompiledModel {
  std::vector<uint8_t> artifact; // a FlatBuffers tcc artifact (include/tcc/Runtime/artifact.fbs)
  CompileReport report;
};

/// Checks the device and its options (architectures, NVRTC present) before any work; throws
/// tcc::Error saying what is wrong.
void checkCompileOptions(const CompileOptions &options);

/// Stages 1-3 on the imported graph (rewritten in place): fusion, lowering to kernels and a
/// program (canonicalized, CSE'd), memory planning. `explainFusion` and `dumpDir` apply.
void lowerModule(mlir::ModuleOp module, const CompileOptions &options,
                 CompileReport *report = nullptr);

/// The CUDA kernels of a lowered module: every tk.kernel function emitted for the alignments
/// its launches guarantee (cudaArgumentAlignments), then one generated kernel per distinct
/// tk.conv / tk.topk / tk.attention geometry and two per tk.attention_grad geometry
/// (CudaLibraryKernels.h), in program order. `libraryCalls` maps each of those ops to the
/// indices of the kernels it launches, in launch order.
struct CudaProgramKernels {
  std::vector<codegen::CudaKernel> kernels;
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<size_t, 2>> libraryCalls;
};
CudaProgramKernels emitCudaProgram(mlir::ModuleOp module);

/// Compiles the imported graph (func.func @main over tensors; rewritten in place). Throws
/// tcc::Error with the diagnostics (naming the op) when a stage fails.
CompiledModel compileModule(mlir::ModuleOp module, const CompileOptions &options);

/// Compiles every entry of a training spec (include/tcc/Training/TrainingSpec.h) like an
/// inference model and serialises them, with the state and its initial values, as one training
/// artifact. The report sums the entries (kernels, launches, bytes...).
CompiledModel compileTraining(TrainingSpec &spec, const CompileOptions &options);

} // namespace tcc
