//===- Execute.h - Compiling loaded models and running them on a device ---===//
#pragma once

#include "tcc/Driver/Pipeline.h"

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

/// How the runtime runs a program (tccrt_options).
struct RunOptions {
  int threads = 0;        // CPU threads; 0: all cores
  bool cudaGraph = false; // CUDA: replay the launch list as a CUDA graph after the first run
  int deviceOrdinal = 0;  // CUDA: which GPU
};

/// One launch of a program's launch list, as libtccrt's profiling saw it (tccrt_launch_profile).
struct LaunchProfile {
  std::string kind, name, nodes;
  uint64_t calls = 0;
  double totalSeconds = 0, lastStartSeconds = 0, lastSeconds = 0;
};

/// An artifact loaded into the runtime (libtccrt, through its C API).
class RuntimeProgram {
public:
  static RuntimeProgram fromBytes(const std::vector<uint8_t> &artifact, const RunOptions &options);
  static RuntimeProgram fromFile(const std::string &path, const RunOptions &options);
  RuntimeProgram(RuntimeProgram &&other) noexcept : program_(other.program_) {
    other.program_ = nullptr;
  }
  RuntimeProgram(const RuntimeProgram &) = delete;
  ~RuntimeProgram();

  /// What the program runs on, e.g. "cpu (16 threads)" or "cuda:0 NVIDIA H100 ... (sm_90,
  /// cubin)".
  std::string deviceName() const;
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;
  /// Symbolic programs (compiled with size ranges): whether it is one, and input i's dims as
  /// text ("batch", "16").
  bool isSymbolic() const;
  std::vector<std::string> inputDims(size_t i) const;
  /// Sets the shapes of the next runs' inputs (symbolic programs; a static program checks them
  /// against its own); inputs() and outputs() then give the bound shapes.
  void setInputShapes(const std::vector<Shape> &shapes);
  /// Fresh tensors of the outputs' types.
  std::vector<Tensor> allocateOutputs() const;
  /// Binds a symbolic program to the inputs' shapes, checks the inputs against inputs(), runs,
  /// writes `outputs` (from allocateOutputs() after the binding).
  void run(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs);
  /// The same, into freshly allocated outputs.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs);
  /// Runs on caller-provided buffers (for timing; no checks beyond the runtime's).
  void runRaw(const std::vector<const void *> &inputs, const std::vector<void *> &outputs);
  /// Per-launch timing of later runs (clears the counts): host clock on the CPU, CUDA timing
  /// events on a GPU.
  void setProfiling(bool enabled);
  /// CUDA programs: the peak bytes of their GPU's caching allocator (none for a CPU program).
  std::optional<uint64_t> devicePeakBytes() const;
  std::vector<LaunchProfile> launchProfiles() const;

private:
  explicit RuntimeProgram(tccrt_program *p) : program_(p) {}
  void bindShapesOf(const std::vector<Tensor> &inputs);
  tccrt_program *program_;
};

/// The peak of libtccrt's host caching allocator in this process (bytes allocated at once).
uint64_t runtimeHostPeakBytes();

/// The tensors' data, for RuntimeProgram::runRaw.
std::vector<const void *> inputPointers(const std::vector<Tensor> &tensors);
std::vector<void *> outputPointers(std::vector<Tensor> &tensors);

/// Compiles a loaded model. Inputs the import specialised on are recorded in the artifact (the
/// runtime refuses other values). `givenInputs`: how many leading inputs the user supplied;
/// unless `randomValuesRun` (the artifact is run right away on model.inputs), specialising on
/// an input drawn at random is an error naming it: its value would be arbitrary.
CompiledModel compileLoaded(LoadedModel &model, size_t givenInputs, CompileOptions options,
                            bool randomValuesRun = false);

/// Runs a loaded model on `device` ("interp", "cpu" or "cuda"; see resolveDevice) with its
/// inputs.
std::vector<Tensor> execute(LoadedModel &model, size_t givenInputs, const std::string &device,
                            const CompileOptions &compile, const RunOptions &run);

/// The device a command that runs models uses for `--device` `requested`: "interp", "cpu" and
/// "cuda" as given, "auto" resolved to "cuda" when libtccrt finds a usable CUDA GPU and driver
/// and this tcc has NVRTC, else to "cpu" with a one-line note on stderr saying why. Throws
/// tcc::Error for an unknown name, and for "cuda" where it cannot run ("no usable CUDA
/// GPU/driver: <reason>; use --device cpu").
std::string resolveDevice(const std::string &requested);

/// Why CUDA programs cannot run in this process ("" if they can): libtccrt's reason.
std::string cudaUnavailableReason();

/// The device ("cpu" or "cuda") an artifact file was compiled for; "" if the file is not a
/// well-formed artifact (loading it then reports what is wrong).
std::string artifactDevice(const std::string &path);

/// True if `path` ends in ".tcc" or holds the artifact's file identifier.
bool isArtifactFile(const std::string &path);

} // namespace tcc
