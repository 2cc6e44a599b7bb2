//===- CudaCollectives.h - Collective steps of a CUDA program ----------------===//
//
// A distributed CUDA program's collective steps (artifact.fbs Collective, Wait) on device
// buffers, through one of two backends chosen at load:
//
//  * NCCL (libnccl.so.2, opened with dlopen like the driver; $TCC_NCCL_LIBRARY names another
//    file). One NCCL communicator per group of ranks the program's collectives use, made at load
//    in step order (SPMD programs reach them in the same order on every rank): the group's first
//    rank draws the unique id and broadcasts it over the process's MPI communicator. Every
//    collective runs on one communication stream, ordered after the compute stream's work by an
//    event; a synchronous step makes the compute stream wait for it at once, an asynchronous one
//    (gradient buckets) only at its Wait step, so backward kernels overlap the reduction.
//    Collectives along a dim other than the first pack their blocks with pitched copies
//    (cuMemcpy2DAsync) on the same stream.
//  * Host staging: the step's input is copied to pinned host memory, run through the host
//    collectives (Collectives.h, MPI) and copied back. For ranks that share a GPU (NCCL refuses
//    two ranks on one device) and for tests on the fake driver. Asynchronous steps run at once.
//
// Pipeline stages' send/recv always go through the host's MPI, staged in pinned memory: sends
// start at once and complete by the end of the run, receives match their sends by tag, so the
// stages may receive in another order than they send (NCCL's point-to-point has no tags).
//
// $TCC_CUDA_COLLECTIVES chooses: "nccl", "host", or unset/"auto": NCCL when it loads and every
// rank on this machine has a GPU of its own (OMPI_COMM_WORLD_LOCAL_SIZE <= the device count),
// else host staging. With "nccl", steps over a group of one rank also go through NCCL (a
// one-rank communicator: how a single GPU checks the NCCL path); otherwise they are device
// copies and need no backend.
//
// NCCL work is asynchronous: synchronize() waits for the compute stream within the collective
// deadline (TCC_COLLECTIVE_TIMEOUT), checking NCCL's asynchronous errors; when it passes, the
// communicators are aborted and the whole job ends with an error naming the step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "Collectives.h"
#include "Communicator.h"
#include "CudaDevice.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tcc::rt {
class Program;
}

namespace tcc::rt::cuda {

enum class CollectiveBackend { None, Nccl, HostStaged };

/// The NCCL library's version as "2.28.9", or throws Error saying why it cannot be loaded.
std::string ncclVersion();

/// The GPU a rank of a job uses: `ordinal` for a single process; in a job started by mpirun,
/// the ranks on one machine take consecutive GPUs from `ordinal` on (wrapping around when there
/// are more ranks than GPUs).
int rankDeviceOrdinal(int ordinal);

/// Enqueues on `stream` the pitched copies (cuMemcpy2DAsync, one per block) between a tensor of
/// `shape` viewed as [outer, n blocks along `dim`, rest] and n contiguous blocks, block b being
/// [outer, shape[dim] / n, rest]: pack = tensor -> blocks, else blocks -> tensor.
void copyBlocks(const CudaDriver &driver, CUstream stream, const std::vector<int64_t> &shape,
                int64_t dim, int64_t n, size_t elemBytes, CUdeviceptr tensor, CUdeviceptr blocks,
                bool pack);

class DeviceCollectives {
public:
  using Allocate = std::function<CUdeviceptr(size_t)>;
  /// Plans every collective step of `program` (addresses[i] = buffer i's device address), picks
  /// the backend and makes the NCCL communicators. Throws Error (NCCL asked for and not usable,
  /// a multi-rank program started without mpirun, ...).
  DeviceCollectives(CudaDevice &device, const Program &program, CudaStream &compute,
                    const std::vector<CUdeviceptr> &addresses, const Allocate &allocate);
  ~DeviceCollectives();
  DeviceCollectives(const DeviceCollectives &) = delete;
  DeviceCollectives &operator=(const DeviceCollectives &) = delete;

  CollectiveBackend backend() const { return backend_; }
  /// "NCCL 2.28.9", "host-staged (MPI)" or "" (no backend needed).
  std::string describe() const;

  /// Launch `step` (an index into the program's steps): enqueued after the compute stream's
  /// work; the compute stream waits for it now (synchronous steps) or at its Wait step.
  void launch(size_t step);
  /// The Wait step for the asynchronous collective at `step`.
  void wait(size_t step);
  /// Waits for the compute stream's work within the collective deadline.
  void synchronize();

private:
  struct Planned;
  void launchNccl(Planned &p);
  void launchStaged(Planned &p);
  /// A pipeline stage's send or recv: through the host's MPI (its tags let the stages receive
  /// in another order than they send), staged through pinned memory, whatever the backend.
  void launchPointToPoint(Planned &p);
  /// Waits for this run's sends (each a copy the communicator holds).
  void finishSends();
  static bool isPointToPoint(const CollectiveStep &s) {
    return s.kind == CollectiveKind::Send || s.kind == CollectiveKind::Recv;
  }
  [[noreturn]] void deadlineMissed(const std::string &what);

  CudaDevice &device_;
  const Program &program_;
  CudaStream &compute_;
  CollectiveBackend backend_ = CollectiveBackend::None;
  std::vector<std::unique_ptr<Planned>> planned_; // per program step (null: not a collective)
  std::vector<void *> comms_;                     // NCCL communicators, one per group
  std::unique_ptr<CudaStream> commStream_;
  std::unique_ptr<PinnedBuffer> staging_;
  bool hasPointToPoint_ = false;
  std::vector<PendingCollective> pendingSends_;
  std::vector<uint8_t> hostScratch_;
  CUdeviceptr scratch_ = 0; // packing space of synchronous steps
  std::string lastLaunched_;
};

} // namespace tcc::rt::cuda
