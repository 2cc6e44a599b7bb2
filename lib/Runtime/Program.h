//===- Program.h - A loaded, verified artifact and its executors ----------===//
//
// Program::load copies an artifact into 64-byte aligned memory, verifies it (FlatBuffers
// structure, then everything the executors rely on: indices, extents, operand shapes, kernels,
// CUDA launch geometry and code) and decodes it into the plain structures below. Afterwards the
// FlatBuffer is read only for constants, CUDA code and initial state (which point into the
// copy) and, in a symbolic program, for its launch list, derived again at each new binding of
// its size symbols. A CUDA artifact is verified completely before the driver is touched, so a
// damaged one gets the same error with or without a GPU. Program::run executes the launch list:
// on the CPU here (Executor.cpp), on a GPU through a CudaExecutor (CudaExecutor.h). A training
// artifact's root program runs nothing itself: its TrainingDesc holds the state and the entry
// points, each a Program decoded and verified like a root program (Trainer.h runs them). Every
// failure throws tcc::rt::Error with a message naming what is wrong.
//
// Symbolic programs (compiled with size ranges) have size symbols and dims that are expressions
// of them. Load verifies what holds at every size (expressions over declared symbols, the
// arena's plan at every symbol's max, kernel parameters, the launch list's structure);
// bindInputShapes binds the symbols from the input shapes and derives every buffer's shape and
// the launch list (library geometries included) at those sizes, with the same code that decodes
// a static program once at load.
#pragma once

#include "Attention.h"
#include "Collectives.h"
#include "CpuLibrary.h"
#include "CpuModule.h"
#include "CudaDevice.h"
#include "tcc/Runtime/tccrt.h"
#include "tcc/Support/SymbolBinding.h"

#include "flatbuffers/flatbuffers.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

namespace tcc::artifact {
struct Program;
struct Training;
struct TensorSpec;
struct CudaModule;
} // namespace tcc::artifact

namespace tcc::rt {

struct TrainingDesc;
class LaunchListDecoder;
namespace cuda {
class CudaExecutor;
class DeviceCollectives;
}

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TensorDesc {
  std::string name;
  tccrt_dtype dtype = TCCRT_F32;
  /// Symbolic tensors: the shape at the bound sizes; before a binding, -1 in every symbolic
  /// dim (and bytes 0).
  std::vector<int64_t> shape;
  size_t bytes = 0;
  /// Symbolic tensors: every dim's size expression (static dims as constants); empty for a
  /// static tensor.
  std::vector<SymExpr> dims;
  /// Symbolic tensors: every dim's expression text, "" for a static dim (tccrt_input_dim_expr).
  std::vector<std::string> dimTexts;
  /// Inputs the compiler specialised on: the only value the program accepts (`bytes` bytes).
  std::vector<uint8_t> specializedValue;
};

/// Symbols: the values of the program's size symbols at the run's binding (i64, one per symbol),
/// which generated kernels read their sizes from.
enum class BufferKind : uint8_t { Input, Output, Constant, Arena, Symbols };

struct BufferDesc {
  BufferKind kind = BufferKind::Arena;
  uint32_t index = 0;
  uint64_t offset = 0;
  tccrt_dtype dtype = TCCRT_F32;
  std::vector<int64_t> shape; // symbolic buffers: as TensorDesc::shape
  size_t bytes = 0;
  std::vector<SymExpr> dims; // as TensorDesc::dims
  // Symbolic programs' arena buffers: their ArenaSlot (-1: none) and offset within it.
  int32_t slot = -1;
  uint64_t slotOffset = 0;
};

/// One allocation of a symbolic program's arena (artifact.fbs ArenaSlot): placed again at
/// each binding with the bound sizes.
struct ArenaSlotDesc {
  uint32_t buffer; // the buffer of the slot's whole extent
  int64_t first, last;
};

struct KernelStep {
  uint32_t kernel;
  std::vector<uint32_t> args;
  // CUDA only (verified: every dim >= 1, the block at most 1024 threads).
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  uint32_t sharedBytes = 0;
};
/// Same numbering as artifact.fbs GemmActivation.
enum class GemmActivation : uint8_t { None, Relu, GeluTanh, GeluErf };
struct GemmStep {
  uint32_t a, b, c;
  GemmGeometry geometry; // on CUDA, geometry.dtype may also be f16 or bf16
  // Epilogue: c = act(alpha op(a) op(b) + beta c + bias), bias[n] when hasBias (on the CPU:
  // f32, bias and ReLU only, applied in the sgemm's tiles).
  bool hasBias = false;
  uint32_t bias = 0;
  GemmActivation activation = GemmActivation::None;
  // Constant operands packed for the CPU's sgemm, kept across runs. Steps that read the same
  // constant the same way share one (an unrolled recurrence's steps all multiply by one
  // weight: one packed copy stays in cache instead of one per step).
  std::shared_ptr<PackedOperand> packedA = std::make_shared<PackedOperand>(),
                                 packedB = std::make_shared<PackedOperand>();
};
struct ConvStep {
  uint32_t input, weight, output;
  ConvGeometry geometry;
  // Epilogue (f32): bias [C_out] when hasBias, residual (the output's shape) when hasResidual,
  // then the clamp (CpuLibrary.h, ConvEpilogue).
  bool hasBias = false, hasResidual = false, clamp = false;
  uint32_t bias = 0, residual = 0;
  float clampMin = 0.0f, clampMax = 0.0f;
  Activation activation; // last (Activation.h)
  mutable PackedOperand weightCache; // packed (Winograd: transformed) weights, reused across runs
};
struct TopKStep {
  uint32_t input, values, indices;
  TopKGeometry geometry;
};
struct AttentionStep {
  uint32_t q, k, v, mask, bias, output; // mask/bias: only when the geometry has them
  AttentionGeometry geometry;
};
struct AttentionGradStep {
  uint32_t q, k, v, output, gradOutput, gradQ, gradK, gradV, mask, bias;
  AttentionGeometry geometry;
};
struct PoolStep {
  uint32_t input, output;
  PoolGeometry geometry;
};
struct CopyStep {
  uint32_t source, target;
};
using Step = std::variant<KernelStep, GemmStep, ConvStep, TopKStep, CopyStep, CollectiveStep,
                          WaitStep, AttentionStep, PoolStep, AttentionGradStep>;

/// An aligned, owned byte array (the artifact copy).
struct AlignedBytes {
  uint8_t *data = nullptr;
  size_t size = 0;
  AlignedBytes() = default;
  void allocate(size_t n); // once
  AlignedBytes(const AlignedBytes &) = delete;
  AlignedBytes &operator=(const AlignedBytes &) = delete;
  ~AlignedBytes();
};

/// What tccrt_options carries.
struct LoadOptions {
  int numThreads = 0;      // CPU threads; 0 = all cores
  bool cudaGraph = false;  // CUDA: replay the launch list as a graph (see CudaExecutor.h)
  int deviceOrdinal = 0;   // CUDA: which GPU
};

class Program {
public:
  /// Copies, verifies and decodes an artifact; loads its CPU module, or (CUDA artifacts) sets
  /// up its executor on the GPU: a GPU/driver that is not usable is an error then.
  static std::unique_ptr<Program> load(const void *data, size_t size, const LoadOptions &options);
  /// numThreads: 0 = all cores.
  static std::unique_ptr<Program> load(const void *data, size_t size, int numThreads) {
    LoadOptions options;
    options.numThreads = numThreads;
    return load(data, size, options);
  }
  ~Program();
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;

  tccrt_device device() const { return device_; }
  /// "cpu (16 threads)" or "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, cubin)".
  std::string deviceName() const;
  /// CUDA programs: the GPU they run on (null on the CPU).
  cuda::CudaDevice *cudaDevice() const;
  const std::vector<TensorDesc> &inputs() const { return inputs_; }
  const std::vector<TensorDesc> &outputs() const { return outputs_; }
  const std::vector<BufferDesc> &buffers() const { return buffers_; }
  const std::vector<Step> &steps() const { return steps_; }
  const std::string &producer() const { return producer_; }
  uint64_t arenaBytes() const { return arenaBytes_; }
  /// The arena the program runs in now: a symbolic program's is its binding's plan (0 before
  /// the first binding).
  uint64_t boundArenaBytes() const {
    return arenaSlots_.empty() ? arenaBytes_ : bound_ ? arenaBytes_ : 0;
  }

  /// Training artifacts only (else null): the state and the entry points.
  const TrainingDesc *training() const { return training_.get(); }

  /// 0 = all cores. A training artifact's entry programs follow their root.
  void setNumThreads(int numThreads);
  int numThreads() const { return numThreads_; }

  /// Symbolic programs (compiled with size ranges): their size symbols, in the order of the
  /// Symbols buffer, with the compiled ranges.
  bool isSymbolic() const { return !symbolNames_.empty(); }
  const std::vector<std::string> &symbolNames() const { return symbolNames_; }
  const SymbolRanges &symbolRanges() const { return symbolRanges_; }
  /// Binds the size symbols to the shapes of the next runs' inputs (one per input): inputs(),
  /// outputs(), buffers() and steps() then have those sizes. Errors name the input, the dim
  /// and the assumption, and leave the program unbound. Binding the bound shapes again costs a
  /// comparison (it is on the per-request path); a static program accepts its own shapes only.
  void bindInputShapes(const std::vector<std::vector<int64_t>> &shapes);
  /// Whether a run may start: a static program, or a symbolic one with its input shapes bound.
  bool bound() const { return !isSymbolic() || bound_; }

  /// Runs the launch list on caller tensors (contiguous, sizes of inputs()/outputs()). A
  /// training artifact's root is an error (its entries run through the Trainer).
  void run(const void *const *inputs, void *const *outputs);
  /// CUDA programs: run() on tensors in their GPU's memory (device addresses); returns when
  /// the outputs are written. Inputs must be ready for work enqueued on cudaStream().
  void runOnDevice(const void *const *inputs, void *const *outputs);
  /// CUDA programs: the CUstream their runs are enqueued on; null for CPU programs.
  void *cudaStream() const;

  /// Profiling: while enabled, run() times each step: on the CPU with the wall clock around
  /// it, on CUDA with timing events around its launches on the stream (GPU time; the runs
  /// launch plainly, without a captured graph). Enabling clears the counts.
  struct StepProfile {
    uint64_t calls = 0;
    double totalSeconds = 0;
    double lastStartSeconds = 0; // in the last run, from its start
    double lastSeconds = 0;
    /// One more timed call, started `start` seconds into its run, `seconds` long.
    void record(double start, double seconds) {
      calls += 1;
      lastStartSeconds = start;
      lastSeconds = seconds;
      totalSeconds += seconds;
    }
  };
  void setProfiling(bool enabled);
  const std::vector<StepProfile> &stepProfiles() const { return profiles_; }
  /// Per step: its kind ("kernel", "gemm", "conv", "topk", "copy"), a name (the kernel's, or
  /// the library call with its shape) and the model nodes it computes (", "-separated).
  const std::vector<std::string> &stepKinds() const { return stepKinds_; }
  const std::vector<std::string> &stepNames() const { return stepNames_; }
  const std::vector<std::string> &stepNodes() const { return stepNodes_; }

private:
  friend class cuda::CudaExecutor;
  friend class cuda::DeviceCollectives;
  friend class LaunchListDecoder;
  Program() = default;
  /// Verifies and decodes one Program table of the file at `base` (the root, or an entry).
  void decode(const tcc::artifact::Program *program, const uint8_t *base);
  /// Checks run()'s arguments: no training root, no null tensors, specialised inputs equal to
  /// their compiled values (read from the device with `onDevice`).
  void checkRunArguments(const void *const *inputs, void *const *outputs, bool onDevice);
  void decodeTraining(const tcc::artifact::Training *training, const uint8_t *base);
  /// CUDA programs: the module's archs and code (no driver involved).
  void decodeCudaModule(const tcc::artifact::CudaModule *module, size_t numKernels);
  void *bufferAddress(const BufferDesc &b, const void *const *inputs, void *const *outputs) const;
  /// Fills stepKinds_ and stepNames_ from the decoded steps.
  void describeSteps();
  /// After a profiled CUDA run: the executor's event times into profiles_.
  void collectCudaProfile();

  // Decoding (Loader.cpp).
  void decodeSymbols(const tcc::artifact::Program *program);
  TensorDesc readTensor(const tcc::artifact::TensorSpec *spec, const std::string &what) const;
  void decodeConstants(const tcc::artifact::Program *program, const uint8_t *base);
  void decodeKernels(const tcc::artifact::Program *program);
  void decodeBuffers(const tcc::artifact::Program *program);
  void decodeArenaSlots(const tcc::artifact::Program *program);
  /// A dims vector (TensorSpec/Buffer.dims) over `shape`: the expressions, none when every dim
  /// is static (constant expressions go into `shape`).
  std::vector<SymExpr>
  readDims(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *dims,
           std::vector<int64_t> &shape, const std::string &what) const;
  /// A size expression of the artifact (`where` names it in errors): it parses and reads
  /// declared symbols only.
  SymExpr readSizeExpression(const flatbuffers::String *text, const std::string &where) const;
  /// The bytes the base of buffer `b` holds at the current shapes.
  uint64_t baseBytes(const BufferDesc &b) const;
  /// Buffer `b` (number `i`), `bytes` long, lies inside its base, which holds `limit` bytes.
  void checkExtent(const BufferDesc &b, size_t i, uint64_t bytes, uint64_t limit) const;
  /// The launch list at the buffers' current shapes (LaunchListDecoder); with !shapesKnown (a
  /// symbolic program at load), what holds at every size is checked and nothing is kept.
  void decodeLaunchList(bool shapesKnown);

  // Symbolic programs (Binding.cpp).
  /// Every symbolic tensor's and buffer's shape and bytes at symbolBindings_, buffers' extents
  /// checked, then the launch list derived at them.
  void applyBinding();
  /// Places the arena slots at the bound sizes (a symbolic program's arena is the bound
  /// sizes' plan, grown when a binding needs more) and moves their buffers.
  void placeArenaSlots();
  /// Symbolic shapes back to -1, no launch list: the state before a binding.
  void clearBinding();
  /// The error of a run without a binding: names the first symbolic input and its dims.
  std::string unboundMessage() const;

  /// CUDA: creates the executors (the root's, then each training entry's on the root's arena).
  void startCuda(const LoadOptions &options);

  AlignedBytes file_;
  tccrt_device device_ = TCCRT_DEVICE_CPU;
  std::string producer_;
  std::vector<TensorDesc> inputs_, outputs_;
  std::vector<BufferDesc> buffers_;
  std::vector<ArenaSlotDesc> arenaSlots_; // symbolic programs only
  uint64_t arenaCapacity_ = 0;            // bytes allocated at arena_
  std::vector<const uint8_t *> constants_; // into file_
  std::vector<uint64_t> constantSizes_;
  const uint8_t *constantData_ = nullptr; // constant_data, into file_ (uploaded whole on CUDA)
  uint64_t constantDataBytes_ = 0;
  std::vector<std::string> kernelNames_;
  // CUDA code (verified archs; PTX copied NUL-terminated into ptxText_).
  std::vector<cuda::CudaCode> cubins_, ptx_;
  std::vector<std::string> ptxText_;
  std::string cudaCompiler_;
  uint64_t arenaBytes_ = 0;
  std::vector<Step> steps_;
  std::vector<std::vector<TensorDesc>> kernelParams_; // per kernel: its parameters' types
  // Symbolic programs: the symbols (in the Symbols buffer's order) and their ranges; the bound
  // values (empty before a binding) and the Symbols buffer holding them (its address is fixed:
  // one value per symbol); the table the launch list is derived from at each new binding.
  std::vector<std::string> symbolNames_;
  SymbolRanges symbolRanges_;
  SymbolBindings symbolBindings_;
  std::vector<int64_t> symbolValues_;
  bool bound_ = false;
  const tcc::artifact::Program *table_ = nullptr;
  /// Constant GEMM operands packed for the sgemm, one per constant read the same way (kept
  /// across bindings: a constant's packing depends on its own, static, shape only). Key:
  /// constant index, byte offset, is-A, transposed, outer dim, K, matrix count, batch strides.
  using PackingKey = std::tuple<uint32_t, uint64_t, bool, bool, int64_t, int64_t, int64_t,
                                std::vector<int64_t>>;
  std::map<PackingKey, std::shared_ptr<PackedOperand>> packings_;
  std::vector<int64_t> meshSizes_;       // distributed programs: the mesh of their collectives
  std::vector<uint8_t> collectiveScratch_;
  std::vector<std::optional<PendingCollective>> pending_; // async collectives, by step
  std::vector<std::string> stepKinds_, stepNames_, stepNodes_; // per step (profiles)
  bool profiling_ = false;
  std::vector<StepProfile> profiles_;
  std::vector<CpuKernelFn> kernels_;
  std::unique_ptr<CpuModule> module_;
  size_t workspaceBytes_ = 0; // the largest conv's or attention's workspace per thread
  void *arena_ = nullptr;     // hostAllocate'd once, reused across runs
  bool ownsArena_ = true;     // false in a training entry: the root's arena, shared by entries
  void *workspace_ = nullptr; // conv and attention workspaces (one per thread), reused across runs
  size_t workspaceCapacity_ = 0;
  void reserveWorkspace(); // for numThreads_
  int numThreads_ = 1;
  std::vector<void *> addresses_; // per run: every buffer's address
  std::vector<void *> args_;      // per launch: kernel arguments
  // CUDA programs (declared before training_: a training root's executor owns the arena its
  // entries' executors use, so it must outlive them).
  std::unique_ptr<cuda::CudaExecutor> cuda_;
  std::unique_ptr<TrainingDesc> training_;
};

// ---- Training artifacts -------------------------------------------------------------------------

/// Same numbering as artifact.fbs BindingRole.
enum class BindingRole : uint8_t { Data, State, LearningRate, RngKey, Loss };

struct BindingDesc {
  BindingRole role = BindingRole::Data;
  uint32_t state = 0; // role State
};

struct StateDesc {
  TensorDesc tensor;                // distributed artifacts: this rank's block
  tccrt_state_kind kind = TCCRT_STATE_PARAMETER;
  const uint8_t *initial = nullptr; // tensor.bytes bytes in the artifact copy (or ownedInitial)
  std::vector<int64_t> globalShape; // the whole tensor's shape
  std::vector<std::vector<uint8_t>> splits; // per dim, the mesh axes splitting it
  std::vector<uint8_t> ownedInitial;        // this rank's block of a split tensor
  int64_t pipelineStage = -1;               // pp coordinate of the ranks updating it (-1: all)
};

/// An entry point. The loader has checked the bindings against the program: one per input and
/// output, State bindings in range with the state's dtype and shape, the roles' fixed types,
/// and which roles each entry may use (see Loader.cpp).
struct EntryDesc {
  std::string name;
  std::unique_ptr<Program> program;
  std::vector<BindingDesc> inputs, outputs;
};

struct TrainingDesc {
  /// Distributed artifacts: the mesh and this process's rank (entries are this rank's).
  std::vector<std::string> meshAxes;
  std::vector<int64_t> meshSizes;
  int rank = 0, worldSize = 1;
  /// Pipeline parallelism: the mesh axis named "pp" (its index; -1 if none) and this rank's
  /// coordinate on it (StateDesc::pipelineStage names one).
  int64_t pipelineAxis = -1, pipelineStage = -1;
  std::vector<StateDesc> state;
  std::vector<EntryDesc> entries;
  uint32_t gradAccumulation = 1;
  std::string config;
  const EntryDesc *trainStep = nullptr, *accumulateStep = nullptr, *eval = nullptr;
  /// The batch: every entry's Data inputs (the same in every entry), in order.
  std::vector<TensorDesc> batch;
};

/// Threads for a requested count: 0 = all cores; negative is an error.
int resolveNumThreads(int requested);

// Verification helpers shared by the artifact loader and the checkpoint reader.

/// "f32[2, 3]".
std::string shapeString(tccrt_dtype dtype, const Shape &shape);
/// Bytes of a contiguous tensor; throws if a dim is negative or the size is absurd.
size_t tensorBytes(tccrt_dtype dtype, const Shape &shape, const std::string &what);
/// A [long] vector as a Shape (null: rank 0); throws if its elements are misaligned.
Shape readShape(const flatbuffers::Vector<int64_t> *v);
/// The dtype if valid, else throws naming `what`.
tccrt_dtype checkDType(unsigned dtype, const std::string &what);

} // namespace tcc::rt
