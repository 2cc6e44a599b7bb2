//===- ArtifactWriter.h - Serialise a tk program as a tcc artifact --------===//
#pragma once

#include "tcc/Support/Tensor.h"
#include "tcc/Training/TrainingSpec.h"

#include "tcc/Codegen/CudaEmitter.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tcc {

/// The model nodes named in a step's location (LowerToKernels gives each step the fused
/// locations of its fusion's ops; the importer names ops after their ONNX nodes), in order,
/// each once.
std::vector<std::string> nodeNames(mlir::Location loc);

/// A CUDA kernel the program launches: a tk.kernel function's, or one generated for a tk.conv /
/// tk.topk (CudaLibraryKernels.h).
struct CudaKernelInfo {
  std::string name;
  codegen::CudaLaunchConfig launch;
};

/// One compiled image: a cubin ("sm_80") or PTX ("compute_80").
struct CudaCode {
  std::string arch;
  std::string bytes;
};

struct ArtifactContents {
  std::string device = "cpu";             // "cpu" or "cuda"
  std::vector<uint8_t> cpuSharedObject;  // kernels for the CPU (see KernelAbi.h)
  std::string cpuCompiler;               // compiler identity and flags
  std::vector<std::string> cpuIsa;       // ISA extensions the kernels may use
  /// CUDA: every kernel the images define (launched tk.kernel functions find theirs by name),
  /// the kernels each tk.conv / tk.topk / tk.attention / tk.attention_grad launches instead
  /// of a library call (indices into cudaKernels, in launch order), the images and the
  /// compiler identity.
  std::vector<CudaKernelInfo> cudaKernels;
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<size_t, 2>> cudaLibraryCalls;
  std::vector<CudaCode> cudaCubins, cudaPtx;
  std::string cudaCompiler;
  std::map<std::string, Tensor> specializedInputs;
  /// Graph input and output names; if empty, the program's tk.arg_names (else "arg<i>").
  std::vector<std::string> inputNames, outputNames;
};

struct ArtifactStats {
  size_t kernels = 0, externCalls = 0, launches = 0;
  uint64_t arenaBytes = 0, constantBytes = 0;
};

/// Serialises the module's tk.program (after -tcc-plan-memory) with its kernels' compiled code.
/// Throws tcc::Error on a program it cannot represent.
std::vector<uint8_t> writeArtifact(mlir::ModuleOp module, const ArtifactContents &contents,
                                   ArtifactStats *stats = nullptr);

/// Serialises a training artifact: a root program holding the spec's state (initial values,
/// 64-byte aligned), grad_accumulation, config and one entry per spec entry, whose program is
/// written exactly as writeArtifact writes a root program (from spec.entries[i].module, after
/// -tcc-plan-memory, with entryContents[i]) and whose bindings are the spec's. `stats` (if
/// given) receives one ArtifactStats per entry.
std::vector<uint8_t> writeTrainingArtifact(const TrainingSpec &spec,
                                           const std::vector<ArtifactContents> &entryContents,
                                           std::vector<ArtifactStats> *stats = nullptr);

} // namespace tcc
