//===- Execute.h - Compiling loaded models and running them on a device ---===//
#pragma once

#include "Pipeline.h"

#include "tcc/Compiler/Compiler.h"

#include <cstdint>
#include <string>
#include <vector>

struct tccrt_program;

namespace tcc {

/// A tensor an artifact takes or returns.
struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
};

/// An artifact loaded into the runtime (libtccrt, through its C API).
class RuntimeProgram {
public:
  /// `numThreads` 0: all cores.
  static RuntimeProgram fromBytes(const std::vector<uint8_t> &artifact, int numThreads);
  static RuntimeProgram fromFile(const std::string &path, int numThreads);
  RuntimeProgram(RuntimeProgram &&other) noexcept : program_(other.program_) {
    other.program_ = nullptr;
  }
  RuntimeProgram(const RuntimeProgram &) = delete;
  ~RuntimeProgram();

  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;
  /// Fresh tensors of the outputs' types.
  std::vector<Tensor> allocateOutputs() const;
  /// Checks the inputs against inputs(), runs, writes `outputs` (from allocateOutputs()).
  void run(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs);
  /// The same, into freshly allocated outputs.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs);
  /// Runs on caller-provided buffers (for timing; no checks beyond the runtime's).
  void runRaw(const std::vector<const void *> &inputs, const std::vector<void *> &outputs);

private:
  explicit RuntimeProgram(tccrt_program *p) : program_(p) {}
  tccrt_program *program_;
};

/// The tensors' data, for RuntimeProgram::runRaw.
std::vector<const void *> inputPointers(const std::vector<Tensor> &tensors);
std::vector<void *> outputPointers(std::vector<Tensor> &tensors);

/// Compiles a loaded model. Inputs the import specialised on are recorded in the artifact (the
/// runtime refuses other values). `givenInputs`: how many leading inputs the user supplied;
/// unless `randomValuesRun` (the artifact is run right away on model.inputs), specialising on
/// an input drawn at random is an error naming it: its value would be arbitrary.
CompiledModel compileLoaded(LoadedModel &model, size_t givenInputs, CompileOptions options,
                            bool randomValuesRun = false);

/// Runs a loaded model on `device` ("interp" or "cpu") with its inputs.
std::vector<Tensor> execute(LoadedModel &model, size_t givenInputs, const std::string &device,
                            const CompileOptions &compile, int numThreads);

/// True if `path` ends in ".tcc" or holds the artifact's file identifier.
bool isArtifactFile(const std::string &path);

} // namespace tcc
