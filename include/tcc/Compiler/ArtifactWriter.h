//===- ArtifactWriter.h - Serialise a tk program as a tcc artifact --------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tcc {

struct ArtifactContents {
  std::string device = "cpu";             // "cpu" or "cuda"
  std::vector<uint8_t> cpuSharedObject;  // kernels for the CPU (see KernelAbi.h)
  std::string cpuCompiler;               // compiler identity and flags
  std::vector<std::string> cpuIsa;       // ISA extensions the kernels may use
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

} // namespace tcc
