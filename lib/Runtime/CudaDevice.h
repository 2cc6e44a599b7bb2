//===- CudaDevice.h - A CUDA GPU as the runtime sees it -------------------===//
//
// The pieces a CUDA program runs on, over the dlopen'ed driver (CudaDriver.h):
//  * CudaDevice: one GPU (ordinal), its primary context, properties, and the process-wide
//    caching allocator for its memory (CachingAllocator.h with a cuMemAlloc raw allocator and
//    CUDA-event hooks, so stream-aware reuse and release-and-retry on out of memory hold for
//    device memory exactly as unit-tested on the host). One CudaDevice per ordinal per
//    process, shared by every program loaded on it (CudaDevice::get).
//  * CudaStream / CudaEvent: RAII owners.
//  * PinnedBuffer: page-locked host staging memory (cuMemAllocHost) that grows on demand;
//    host<->device copies of caller tensors go through it so they are true async DMA.
//  * CudaModule: the artifact's kernels loaded for this device: the cubins whose arch equals
//    the device's compute capability (sm_XY), else the PTX of the newest compute_XY not above
//    it (JIT by the driver; `jitFromPtx()` says so), else an Error naming the device's
//    capability and the archs the artifact holds.
//  * CudaGraph: a captured launch sequence (cuStreamBeginCapture .. cuGraphInstantiate) replayed
//    with one cuGraphLaunch.
// Every driver failure throws tcc::rt::Error naming the operation and the driver's error.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "CachingAllocator.h"
#include "CudaDriver.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tcc::rt::cuda {

class CudaDevice {
public:
  /// The process-wide device for `ordinal` (created on first use: loads the driver, retains
  /// the primary context). Throws Error if CUDA is unusable or the ordinal does not exist.
  static CudaDevice &get(int ordinal = 0);

  const CudaDriver &driver() const { return *driver_; }
  int ordinal() const { return ordinal_; }
  const std::string &name() const { return name_; }  // "NVIDIA H100 80GB HBM3"
  int computeCapability() const { return cc_; }       // major * 10 + minor, e.g. 90
  int multiprocessors() const { return sms_; }
  size_t totalMemory() const { return totalMemory_; }
  /// Makes this device's context current on the calling thread (every entry point that calls
  /// the driver does this first).
  void makeCurrent() const;

  /// Device memory: the caching allocator (Stream = the CUstream as an integer; 0 = the legacy
  /// default stream). Pointers are CUdeviceptr values cast to void*.
  CachingAllocator &allocator() { return *allocator_; }

private:
  CudaDevice(const CudaDriver &driver, int ordinal);
  const CudaDriver *driver_;
  int ordinal_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string name_;
  int cc_ = 0, sms_ = 0;
  size_t totalMemory_ = 0;
  std::unique_ptr<RawAllocator> raw_;
  std::unique_ptr<EventHooks> events_;
  std::unique_ptr<CachingAllocator> allocator_;
};

class CudaStream {
public:
  explicit CudaStream(CudaDevice &device); // CU_STREAM_NON_BLOCKING
  ~CudaStream();
  CudaStream(const CudaStream &) = delete;
  CudaStream &operator=(const CudaStream &) = delete;
  CUstream get() const { return stream_; }
  CudaDevice &device() const { return device_; }
  Stream id() const { return reinterpret_cast<Stream>(stream_); } // for the allocator
  void synchronize() const;

private:
  CudaDevice &device_;
  CUstream stream_ = nullptr;
};

class CudaEvent {
public:
  explicit CudaEvent(CudaDevice &device, bool timing = false);
  ~CudaEvent();
  CudaEvent(const CudaEvent &) = delete;
  CudaEvent &operator=(const CudaEvent &) = delete;
  CUevent get() const { return event_; }
  void record(const CudaStream &stream);
  void synchronize() const;
  /// Milliseconds between two recorded, completed timing events.
  float elapsedMs(const CudaEvent &start) const;

private:
  CudaDevice &device_;
  CUevent event_ = nullptr;
};

/// Page-locked host memory that grows (never shrinks) to the largest size asked for.
class PinnedBuffer {
public:
  explicit PinnedBuffer(CudaDevice &device) : device_(device) {}
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  /// At least `bytes` bytes (64-byte aligned); invalidates earlier pointers when it grows.
  uint8_t *reserve(size_t bytes);
  size_t capacity() const { return capacity_; }

private:
  CudaDevice &device_;
  uint8_t *data_ = nullptr;
  size_t capacity_ = 0;
};

/// One image of an artifact's CudaModule (decoded by the loader).
struct CudaCode {
  std::string arch;              // "sm_80" (cubin) or "compute_80" (PTX)
  const uint8_t *data = nullptr; // into the artifact copy; PTX is NUL-terminated by the loader
  size_t size = 0;
};

/// The artifact's kernels loaded for one device. An artifact may hold several images per
/// architecture (the compiler batches kernels into NVRTC programs); every image of the chosen
/// architecture is loaded as a driver module and each kernel is looked up in all of them.
class CudaModule {
public:
  /// Picks the architecture for `device` (selectCudaArch) and loads its images. Throws Error
  /// naming the device, its capability and the archs available.
  CudaModule(CudaDevice &device, const std::vector<CudaCode> &cubins,
             const std::vector<CudaCode> &ptx);
  ~CudaModule();
  CudaModule(const CudaModule &) = delete;
  CudaModule &operator=(const CudaModule &) = delete;
  /// Throws Error naming the kernel if no loaded image has it.
  CUfunction function(const std::string &name) const;
  const std::string &loadedArch() const { return arch_; } // "sm_90" or "compute_80"
  bool jitFromPtx() const { return jit_; }

private:
  CudaDevice &device_;
  std::vector<CUmodule> modules_;
  std::string arch_;
  bool jit_ = false;
};

/// Which code a device of compute capability `cc` (e.g. 86) runs: the cubins of arch
/// "sm_<cc>" if any, else the PTX of the newest "compute_XY" with XY <= cc, else none (empty
/// arch). Archs with a suffix ("sm_90a", "compute_90a") match only that exact capability.
/// Pure, for tests.
struct CudaArchChoice {
  std::string arch; // "" if nothing fits
  bool ptx = false; // true: JIT from PTX
};
CudaArchChoice selectCudaArch(int cc, const std::vector<std::string> &cubinArchs,
                              const std::vector<std::string> &ptxArchs);

class CudaGraph {
public:
  /// Captures everything `record` enqueues on `stream` (thread-local capture mode) and
  /// instantiates it. Throws Error if capture or instantiation fails (the stream is left out
  /// of capture mode either way).
  template <class F> static std::unique_ptr<CudaGraph> capture(CudaStream &stream, F &&record) {
    auto graph = std::unique_ptr<CudaGraph>(new CudaGraph(stream));
    graph->begin();
    try {
      record();
    } catch (...) {
      graph->abort();
      throw;
    }
    graph->end();
    return graph;
  }
  ~CudaGraph();
  void launch(const CudaStream &stream) const;

private:
  explicit CudaGraph(CudaStream &stream) : stream_(stream) {}
  void begin();
  void end();
  void abort() noexcept;
  CudaStream &stream_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

} // namespace tcc::rt::cuda
