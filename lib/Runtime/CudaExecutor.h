//===- CudaExecutor.h - Running a loaded CUDA program on a GPU ------------===//
//
// One per CUDA program (and per training entry), made at load once the whole artifact has been
// verified. At load it sets up everything a run needs, so that every device address is fixed
// for the program's life:
//  * the device (CudaDevice::get(device_ordinal)), the module (the cubins of the GPU's
//    architecture, else PTX JIT-compiled by the driver) and every kernel's function;
//  * device memory from the device's caching allocator, allocated on the program's stream: the
//    constants (constant_data uploaded once, one allocation), the arena (a training entry uses
//    its root's), one buffer per input and output, and for programs with GEMMs a 32 MiB cuBLASLt
//    workspace;
//  * a stream, a pinned staging buffer sized for all inputs and outputs, and each Gemm step
//    planned on cuBLASLt (CublasLt.h: descriptors and the heuristic's algorithm, chosen once).
// A run copies the caller's inputs into the pinned buffer, enqueues the host-to-device copies,
// the launch list (kernels with one CUdeviceptr parameter per argument, buffer = base +
// offset; copies as cuMemcpyDtoDAsync; GEMMs through cuBLASLt), the device-to-host copies into
// the pinned buffer, synchronises the stream once and copies the outputs out. A run on device
// tensors (tccrt_run_device) copies them device to device into and out of the same buffers
// instead, so that the launch list (and a captured graph) keeps its fixed addresses.
//
// A symbolic program (compiled with size ranges) has no launch list until its sizes are bound:
// at load the executor sets up the code, the constants and a device buffer for the size
// symbols' values; at each new binding (bind(), called by Program::bindInputShapes) it uploads
// the values, grows the arena and the input and output buffers where the sizes need more,
// shrinks each kernel's grid to the binding's work (KernelLaunch.grid_work), plans the GEMMs
// at the bound geometries and drops a captured graph (the next runs warm up and capture again).
//
// A distributed program's collective steps run through DeviceCollectives (NCCL, or staged
// through the host's MPI); the GPU of each rank of a job is rankDeviceOrdinal's.
//
// With the cuda_graph option (ignored for programs with collectives) the launch list (everything between the input copies and the
// output copies) is captured into a CUDA graph at the second run and replayed with one
// cuGraphLaunch on that run and every later one; addresses being fixed, the graph stays valid
// and the results are identical to plain launches. The first run launches plainly: it warms up
// what stream capture must not do (the driver's lazy loading of kernels, cuBLASLt's first-call
// setup), as PyTorch warms up before capturing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "CublasLt.h"
#include "CudaCollectives.h"
#include "CudaDevice.h"
#include "Program.h"

#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace tcc::rt::cuda {

class CudaExecutor {
public:
  /// `sharedArena`: a training entry's arena (its root's, at least program.arenaBytes()); 0:
  /// the executor allocates the program's own. Throws Error (no usable GPU, no code for this
  /// GPU, a kernel missing from the module, a GEMM cuBLASLt cannot run, out of memory, ...).
  CudaExecutor(const Program &program, const LoadOptions &options, CUdeviceptr sharedArena);
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor &) = delete;
  CudaExecutor &operator=(const CudaExecutor &) = delete;

  /// A symbolic program's new binding (Program's shapes, steps and arena plan are the bound
  /// ones): device memory, the symbol values and the launch list follow them.
  void bind();
  /// Caller tensors on the host (already checked by Program::run), or with `onDevice` in this
  /// GPU's memory (device addresses: copied device to device on the stream, no staging).
  void run(const void *const *inputs, void *const *outputs, bool onDevice = false);
  /// Copies `bytes` at device address `source` to the host (synchronous, on the stream).
  void copyToHost(void *target, const void *source, size_t bytes);
  /// The stream every run is enqueued on.
  CUstream stream() const { return stream_->get(); }

  CudaDevice &device() const { return device_; }
  CUdeviceptr arena() const { return arena_; }
  /// "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, cubin)" / "(compute_80 PTX, JIT)" / "(no kernels)".
  std::string deviceName() const;
  /// Whether runs replay a captured graph (the option was given and the second run captured it).
  bool graphCaptured() const { return graph_ != nullptr; }
  /// Profiling: each op of the launch list between two timing events (runs launch plainly,
  /// no graph, while it is on). stepTimes() after a run: per program step, its start from the
  /// run's first op and its GPU time (a step of several ops: their sum; a step that launches
  /// nothing, e.g. an empty copy: 0).
  void setProfiling(bool enabled);
  struct StepTime {
    double startSeconds = 0, seconds = 0;
  };
  std::vector<StepTime> stepTimes() const;

private:
  struct Launch {
    CUfunction function = nullptr;
    uint32_t grid[3], block[3], sharedBytes;
    std::vector<CUdeviceptr> values; // one per argument
    std::vector<void *> params;      // &values[i]
  };
  struct Copy {
    CUdeviceptr source, target, via; // via: a scratch buffer when source and target overlap
    size_t bytes;
  };
  struct Fill { // c = 0 (a GEMM with K = 0, beta = 0, no bias)
    CUdeviceptr target;
    size_t bytes;
  };
  struct Collective { // a collective step (CudaCollectives.h)
    size_t step;
  };
  struct WaitFor { // the Wait step of an asynchronous collective
    size_t collective;
  };
  using Op = std::variant<Launch, Copy, Fill, std::unique_ptr<CublasLtGemm>, Collective, WaitFor>;

  /// A device buffer that grows with the bindings (freed at the end).
  struct Growable {
    void *block = nullptr;
    size_t bytes = 0;
  };
  CUdeviceptr allocate(size_t bytes); // from the caching allocator on stream_, freed at the end
  /// `g` holding at least `bytes` (its old contents are not kept); 0 for 0 bytes.
  CUdeviceptr ensure(Growable &g, size_t bytes);
  /// Frees every device block the executor owns (at the end, or after a failed start).
  void releaseMemory() noexcept;
  /// Device memory at the program's current sizes, then the launch list over it.
  void buildLaunchList();
  void enqueueLaunchList();
  void makeProfileEvents(); // two per op

  const Program &program_;
  CudaDevice &device_;
  bool useGraph_ = false;
  bool warmedUp_ = false; // a plain run happened (the graph is captured at the next one)
  std::unique_ptr<CudaStream> stream_;
  std::unique_ptr<PinnedBuffer> pinned_;
  std::unique_ptr<CudaModule> module_;
  std::unique_ptr<CublasLtHandle> blas_;
  std::vector<void *> blocks_; // device allocations owned here
  std::vector<CUfunction> functions_;
  CUdeviceptr constants_ = 0, arena_ = 0, workspace_ = 0, scratch_ = 0, symbols_ = 0;
  CUdeviceptr sharedArena_ = 0;
  Growable ownArena_, scratchBlock_;
  std::vector<Growable> inputBlocks_, outputBlocks_;
  std::vector<CUdeviceptr> inputs_, outputs_;
  std::vector<size_t> inputStaging_, outputStaging_; // offsets into the pinned buffer
  size_t stagingBytes_ = 0;
  std::vector<Op> ops_;
  std::unique_ptr<CudaGraph> graph_;
  bool profiling_ = false;
  std::vector<size_t> opSteps_; // ops_[k] runs program step opSteps_[k]
  std::vector<std::unique_ptr<CudaEvent>> profileEvents_;
  std::unique_ptr<DeviceCollectives> collectives_;
};

} // namespace tcc::rt::cuda
