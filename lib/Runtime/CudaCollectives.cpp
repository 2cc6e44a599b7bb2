//===- CudaCollectives.cpp - Collective steps of a CUDA program --------------===//
//
// NCCL's C ABI as nccl.h declares it (2.10 and later: ncclAvg): ncclComm_t is a pointer,
// ncclUniqueId a 128-byte struct passed by value, the enums are ints.
//
//===----------------------------------------------------------------------===//
#include "CudaCollectives.h"

#include "DType.h"
#include "Program.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace tcc::rt::cuda {

namespace {

struct NcclUniqueId {
  char internal[128];
};

struct NcclApi {
  using Result = int;
  using Comm = void *;
  std::string library;
  int version = 0;
  Result (*GetVersion)(int *);
  Result (*GetUniqueId)(NcclUniqueId *);
  Result (*CommInitRank)(Comm *, int, NcclUniqueId, int);
  Result (*CommDestroy)(Comm);
  Result (*CommAbort)(Comm);
  Result (*CommGetAsyncError)(Comm, Result *);
  const char *(*GetErrorString)(Result);
  Result (*AllReduce)(const void *, void *, size_t, int, int, Comm, CUstream);
  Result (*AllGather)(const void *, void *, size_t, int, Comm, CUstream);
  Result (*ReduceScatter)(const void *, void *, size_t, int, int, Comm, CUstream);
  Result (*Broadcast)(const void *, void *, size_t, int, int, Comm, CUstream);
  Result (*Send)(const void *, size_t, int, int, Comm, CUstream);
  Result (*Recv)(void *, size_t, int, int, Comm, CUstream);
  Result (*GroupStart)();
  Result (*GroupEnd)();

  void check(Result r, const std::string &what) const {
    if (r != 0)
      throw Error(what + " failed: NCCL error " + std::to_string(r) + " (" +
                  (GetErrorString ? GetErrorString(r) : "?") + ")");
  }
};

// nccl.h's enums.
constexpr int kNcclInt8 = 0, kNcclInt32 = 2, kNcclInt64 = 4, kNcclFloat32 = 7, kNcclFloat64 = 8;
constexpr int kNcclSum = 0, kNcclMax = 2, kNcclMin = 3, kNcclAvg = 4;
constexpr int kNcclAvgVersion = 21000; // ncclAvg appeared in NCCL 2.10

/// The process-wide NCCL, opened once; throws the same Error on every call if it cannot be.
const NcclApi &loadNccl() {
  static std::once_flag once;
  static NcclApi api;
  static std::string failure;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char *path = std::getenv("TCC_NCCL_LIBRARY"); path && *path)
      names.push_back(path);
    else
      names = {"libnccl.so.2", "libnccl.so"};
    void *lib = nullptr;
    std::string errors;
    for (const std::string &name : names) {
      if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        api.library = name;
        break;
      }
      const char *e = dlerror();
      errors += (errors.empty() ? "" : "; ") + std::string(e ? e : name);
    }
    if (!lib) {
      failure = "NCCL could not be loaded (" + errors +
                "); set TCC_NCCL_LIBRARY to libnccl.so.2, or TCC_CUDA_COLLECTIVES=host";
      return;
    }
    auto bind = [&](auto &slot, const char *name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(lib, name));
      if (!slot && failure.empty())
        failure = api.library + " lacks " + name + " (libtccrt needs NCCL 2.10 or later)";
    };
    bind(api.GetVersion, "ncclGetVersion");
    bind(api.GetUniqueId, "ncclGetUniqueId");
    bind(api.CommInitRank, "ncclCommInitRank");
    bind(api.CommDestroy, "ncclCommDestroy");
    bind(api.CommAbort, "ncclCommAbort");
    bind(api.CommGetAsyncError, "ncclCommGetAsyncError");
    bind(api.GetErrorString, "ncclGetErrorString");
    bind(api.AllReduce, "ncclAllReduce");
    bind(api.AllGather, "ncclAllGather");
    bind(api.ReduceScatter, "ncclReduceScatter");
    bind(api.Broadcast, "ncclBroadcast");
    bind(api.Send, "ncclSend");
    bind(api.Recv, "ncclRecv");
    bind(api.GroupStart, "ncclGroupStart");
    bind(api.GroupEnd, "ncclGroupEnd");
    if (failure.empty() && api.GetVersion(&api.version) != 0)
      failure = "ncclGetVersion failed";
    if (failure.empty() && api.version < kNcclAvgVersion)
      failure = api.library + " is NCCL " + std::to_string(api.version) +
                "; libtccrt needs NCCL 2.10 or later";
  });
  if (!failure.empty())
    throw Error(failure);
  return api;
}

int ncclType(tccrt_dtype d) {
  switch (d) {
  case TCCRT_F32: return kNcclFloat32;
  case TCCRT_F64: return kNcclFloat64;
  case TCCRT_I32: return kNcclInt32;
  case TCCRT_I64: return kNcclInt64;
  default: return kNcclInt8; // moved as bytes (no reductions on other types: checkCollective)
  }
}

int ncclOp(Reduction r) {
  switch (r) {
  case Reduction::Sum: return kNcclSum;
  case Reduction::Avg: return kNcclAvg;
  case Reduction::Max: return kNcclMax;
  case Reduction::Min: return kNcclMin;
  }
  return kNcclSum;
}

int envInt(const char *name, int fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

} // namespace

std::string ncclVersion() {
  int v = loadNccl().version; // 22809 = 2.28.9
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

int rankDeviceOrdinal(int ordinal) {
  int local = envInt("OMPI_COMM_WORLD_LOCAL_RANK", -1);
  if (local < 0)
    return ordinal;
  int n = cudaDeviceCount();
  return n > 0 ? (ordinal + local) % n : ordinal;
}

/// One collective step, planned at load.
struct DeviceCollectives::Planned {
  CollectiveStep step;
  std::string what;
  CUdeviceptr in = 0, out = 0;
  size_t elem = 0, inBytes = 0, outBytes = 0;
  std::vector<int> group;
  void *comm = nullptr;                    // NCCL
  CUdeviceptr staging = 0;                 // an async reduce_scatter's packed input
  std::unique_ptr<CudaEvent> ready, done;  // NCCL: compute -> comm stream -> compute
};

void copyBlocks(const CudaDriver &d, CUstream s, const std::vector<int64_t> &shape, int64_t dim,
                int64_t n, size_t elem, CUdeviceptr tensor, CUdeviceptr blocks, bool pack) {
  BlockRows rows(shape, dim, n, elem);
  size_t outer = rows.outer, row = rows.rowBytes;
  for (int64_t b = 0; b < n; ++b) {
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.WidthInBytes = row;
    c.Height = outer;
    CUdeviceptr t = tensor + b * row, k = blocks + b * outer * row;
    c.srcDevice = pack ? t : k;
    c.srcPitch = pack ? n * row : row;
    c.dstDevice = pack ? k : t;
    c.dstPitch = pack ? row : n * row;
    d.check(d.cuMemcpy2DAsync(&c, s), pack ? "packing a collective's blocks"
                                            : "unpacking a collective's blocks");
  }
}


DeviceCollectives::DeviceCollectives(CudaDevice &device, const Program &program,
                                     CudaStream &compute, const std::vector<CUdeviceptr> &addresses,
                                     const Allocate &allocate)
    : device_(device), program_(program), compute_(compute) {
  const std::vector<int64_t> &mesh = program.meshSizes_;
  std::string choice = std::getenv("TCC_CUDA_COLLECTIVES") ? std::getenv("TCC_CUDA_COLLECTIVES") : "";
  if (choice != "" && choice != "auto" && choice != "nccl" && choice != "host")
    throw Error("TCC_CUDA_COLLECTIVES is '" + choice + "': expected nccl, host or auto");
  bool forceNccl = choice == "nccl";

  bool needBackend = false;
  planned_.resize(program.steps_.size());
  for (size_t i = 0; i < program.steps_.size(); ++i) {
    auto *s = std::get_if<CollectiveStep>(&program.steps_[i]);
    if (!s)
      continue;
    auto p = std::make_unique<Planned>();
    p->step = *s;
    p->what = "launch " + std::to_string(i) + " (" + program.stepNames_[i] +
              (program.stepNodes_[i].empty() ? "" : ", nodes " + program.stepNodes_[i]) + ")";
    hasPointToPoint_ |= isPointToPoint(*s);
    p->in = addresses[s->input];
    p->out = addresses[s->output];
    p->elem = dtypeSize(s->dtype);
    p->inBytes = dimsProduct(s->inShape, 0, s->inShape.size()) * p->elem;
    p->outBytes = dimsProduct(s->outShape, 0, s->outShape.size()) * p->elem;
    needBackend |= s->groupSize > 1 || forceNccl;
    planned_[i] = std::move(p);
  }
  if (!needBackend)
    return;

  Communicator *host = processCommunicator();
  int world = host ? host->size() : 1;
  int meshRanks = (int)dimsProduct(mesh, 0, mesh.size());
  if (meshRanks != world)
    throw Error("this program was compiled for " + std::to_string(meshRanks) +
                " ranks and runs in a job of " + std::to_string(world) + "; start it with mpirun -np " +
                std::to_string(meshRanks) + " (tcc train --nproc " + std::to_string(meshRanks) + ")");
  int rank = host ? host->rank() : 0;

  if (choice == "host") {
    backend_ = CollectiveBackend::HostStaged;
  } else if (forceNccl) {
    loadNccl();
    backend_ = CollectiveBackend::Nccl;
  } else {
    bool gpuPerRank = envInt("OMPI_COMM_WORLD_LOCAL_SIZE", 1) <= cudaDeviceCount();
    bool ncclLoads = false;
    try {
      loadNccl();
      ncclLoads = true;
    } catch (const Error &) {
    }
    backend_ = gpuPerRank && ncclLoads ? CollectiveBackend::Nccl : CollectiveBackend::HostStaged;
  }

  size_t scratchBytes = 0;
  for (auto &p : planned_) {
    if (!p)
      continue;
    p->group = collectiveGroup(mesh, p->step.axes, rank);
    const CollectiveStep &s = p->step;
    bool packedIn = s.kind == CollectiveKind::ReduceScatter && dimsProduct(s.inShape, 0, s.dim) != 1;
    if (s.kind == CollectiveKind::AllGather && dimsProduct(s.outShape, 0, s.dim) != 1)
      scratchBytes = std::max(scratchBytes, p->outBytes);
    if (packedIn && !s.async)
      scratchBytes = std::max(scratchBytes, p->inBytes);
    if (s.kind == CollectiveKind::AllToAll)
      scratchBytes = std::max(scratchBytes, 2 * p->inBytes);
    if (backend_ == CollectiveBackend::Nccl && packedIn && s.async)
      p->staging = allocate(p->inBytes);
  }

  if (backend_ == CollectiveBackend::HostStaged || hasPointToPoint_) {
    staging_ = std::make_unique<PinnedBuffer>(device_);
    size_t most = 0;
    for (auto &p : planned_)
      if (p)
        most = std::max(most, p->inBytes + p->outBytes);
    staging_->reserve(most);
    if (backend_ == CollectiveBackend::HostStaged)
      return;
  }

  // NCCL: one communicator per group, made in step order on every rank.
  const NcclApi &nccl = loadNccl();
  if (scratchBytes)
    scratch_ = allocate(scratchBytes);
  commStream_ = std::make_unique<CudaStream>(device_);
  std::map<std::vector<int>, void *> byGroup;
  device_.makeCurrent();
  for (auto &p : planned_) {
    if (!p)
      continue;
    p->ready = std::make_unique<CudaEvent>(device_);
    p->done = std::make_unique<CudaEvent>(device_);
    if ((p->step.groupSize == 1 && !forceNccl) || isPointToPoint(p->step))
      continue;
    auto it = byGroup.find(p->group);
    if (it != byGroup.end()) {
      p->comm = it->second;
      continue;
    }
    int position = (int)(std::find(p->group.begin(), p->group.end(), rank) - p->group.begin());
    NcclUniqueId id{};
    std::string ranks;
    for (int r : p->group)
      ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    std::string what = "rank " + std::to_string(rank) + ": making the NCCL communicator of ranks {" +
                       ranks + "} (ncclCommInitRank)";
    if (position == 0)
      nccl.check(nccl.GetUniqueId(&id), "ncclGetUniqueId");
    if (p->group.size() > 1)
      host->broadcast(p->group, &id, sizeof id, 0, what + ": its unique id");
    void *comm = nullptr;
    double deadline = host ? host->deadline() : collectiveTimeout();
    runWithDeadline(deadline, what, [&] {
      nccl.check(nccl.CommInitRank(&comm, (int)p->group.size(), id, position), what);
    });
    comms_.push_back(comm);
    p->comm = byGroup[p->group] = comm;
  }
}

DeviceCollectives::~DeviceCollectives() {
  if (comms_.empty())
    return;
  try {
    device_.makeCurrent();
    commStream_->synchronize();
  } catch (...) {
  }
  const NcclApi &nccl = loadNccl();
  for (void *c : comms_)
    nccl.CommDestroy(c);
}

std::string DeviceCollectives::describe() const {
  switch (backend_) {
  case CollectiveBackend::Nccl: return "NCCL " + ncclVersion();
  case CollectiveBackend::HostStaged: return "host-staged (MPI)";
  case CollectiveBackend::None: return "";
  }
  return "";
}

void DeviceCollectives::launch(size_t index) {
  Planned &p = *planned_.at(index);
  const CudaDriver &d = device_.driver();
  if (isPointToPoint(p.step))
    return launchPointToPoint(p);
  if (!p.comm && (p.step.groupSize == 1 || backend_ == CollectiveBackend::None)) {
    // A group of one rank: the output is the input.
    if (p.in != p.out && p.outBytes)
      d.check(d.cuMemcpyDtoDAsync(p.out, p.in, p.outBytes, compute_.get()), p.what);
    return;
  }
  if (backend_ == CollectiveBackend::HostStaged)
    launchStaged(p);
  else
    launchNccl(p);
}

void DeviceCollectives::wait(size_t collective) {
  Planned *p = collective < planned_.size() ? planned_[collective].get() : nullptr;
  if (!p || !p->comm || !p->step.async)
    return; // done at launch
  const CudaDriver &d = device_.driver();
  d.check(d.cuStreamWaitEvent(compute_.get(), p->done->get(), 0), p->what + ": waiting for it");
}

void DeviceCollectives::launchStaged(Planned &p) {
  const CudaDriver &d = device_.driver();
  uint8_t *in = staging_->reserve(p.inBytes + p.outBytes), *out = in + p.inBytes;
  CUstream s = compute_.get();
  if (p.inBytes)
    d.check(d.cuMemcpyDtoHAsync(in, p.in, p.inBytes, s), p.what + ": copying its input to the host");
  compute_.synchronize();
  runCollective(p.step, program_.meshSizes_, in, out, processCommunicator(), hostScratch_, p.what);
  if (p.outBytes)
    d.check(d.cuMemcpyHtoDAsync(p.out, out, p.outBytes, s), p.what + ": copying its output back");
  compute_.synchronize(); // the pinned buffer is reused by the next step
}

void DeviceCollectives::launchPointToPoint(Planned &p) {
  const CudaDriver &d = device_.driver();
  Communicator *host = processCommunicator();
  if (!host)
    throw Error(p.what + ": a pipeline stage's send/recv needs the other stages' ranks (mpirun)");
  int peer = (int)p.step.dim, tag = (int)p.step.dim2;
  CUstream s = compute_.get();
  lastLaunched_ = p.what;
  if (p.step.kind == CollectiveKind::Send) {
    uint8_t *in = staging_->reserve(p.inBytes);
    if (p.inBytes)
      d.check(d.cuMemcpyDtoHAsync(in, p.in, p.inBytes, s), p.what + ": copying it to the host");
    compute_.synchronize();
    // The communicator copies the bytes: the pinned buffer is free again at once.
    pendingSends_.push_back(host->startSend(p.group, peer, tag, in, p.inBytes, p.what));
    return;
  }
  uint8_t *out = staging_->reserve(p.outBytes);
  host->recv(p.group, peer, tag, out, p.outBytes, p.what);
  if (p.outBytes)
    d.check(d.cuMemcpyHtoDAsync(p.out, out, p.outBytes, s), p.what + ": copying it to the device");
  compute_.synchronize(); // the pinned buffer is reused by the next step
}

void DeviceCollectives::finishSends() {
  Communicator *host = processCommunicator();
  for (PendingCollective &p : pendingSends_)
    host->finish(p);
  pendingSends_.clear();
}

void DeviceCollectives::launchNccl(Planned &p) {
  const NcclApi &nccl = loadNccl();
  const CudaDriver &d = device_.driver();
  const CollectiveStep &s = p.step;
  CUstream cs = commStream_->get();
  lastLaunched_ = p.what;
  p.ready->record(compute_);
  d.check(d.cuStreamWaitEvent(cs, p.ready->get(), 0), p.what);
  int64_t n = s.groupSize;
  size_t count = p.inBytes / p.elem;
  switch (s.kind) {
  case CollectiveKind::AllReduce:
    nccl.check(nccl.AllReduce((void *)p.in, (void *)p.out, count, ncclType(s.dtype),
                              ncclOp(s.reduction), p.comm, cs),
               p.what + ": ncclAllReduce");
    break;
  case CollectiveKind::Broadcast:
    nccl.check(nccl.Broadcast((void *)p.in, (void *)p.out, p.inBytes, kNcclInt8, (int)s.dim2,
                              p.comm, cs),
               p.what + ": ncclBroadcast");
    break;
  case CollectiveKind::AllGather: {
    bool direct = dimsProduct(s.outShape, 0, s.dim) == 1;
    nccl.check(nccl.AllGather((void *)p.in, (void *)(direct ? p.out : scratch_), p.inBytes,
                              kNcclInt8, p.comm, cs),
               p.what + ": ncclAllGather");
    if (!direct)
      copyBlocks(d, cs, s.outShape, s.dim, n, p.elem, p.out, scratch_, /*pack=*/false);
    break;
  }
  case CollectiveKind::ReduceScatter: {
    CUdeviceptr blocks = p.in;
    if (dimsProduct(s.inShape, 0, s.dim) != 1) {
      blocks = s.async ? p.staging : scratch_;
      copyBlocks(d, cs, s.inShape, s.dim, n, p.elem, p.in, blocks, /*pack=*/true);
    }
    nccl.check(nccl.ReduceScatter((void *)blocks, (void *)p.out, p.outBytes / p.elem,
                                  ncclType(s.dtype), ncclOp(s.reduction), p.comm, cs),
               p.what + ": ncclReduceScatter");
    break;
  }
  case CollectiveKind::AllToAll: {
    CUdeviceptr send = scratch_, recv = scratch_ + p.inBytes;
    size_t block = p.inBytes / n;
    copyBlocks(d, cs, s.inShape, s.dim, n, p.elem, p.in, send, /*pack=*/true);
    nccl.check(nccl.GroupStart(), p.what + ": ncclGroupStart");
    for (int64_t j = 0; j < n; ++j) {
      nccl.check(nccl.Send((void *)(send + j * block), block, kNcclInt8, (int)j, p.comm, cs),
                 p.what + ": ncclSend");
      nccl.check(nccl.Recv((void *)(recv + j * block), block, kNcclInt8, (int)j, p.comm, cs),
                 p.what + ": ncclRecv");
    }
    nccl.check(nccl.GroupEnd(), p.what + ": ncclGroupEnd");
    copyBlocks(d, cs, s.outShape, s.dim2, n, p.elem, p.out, recv, /*pack=*/false);
    break;
  }
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    break; // refused when the program loads
  }
  p.done->record(*commStream_);
  if (!s.async)
    d.check(d.cuStreamWaitEvent(compute_.get(), p.done->get(), 0), p.what);
}

void DeviceCollectives::synchronize() {
  finishSends();
  if (backend_ != CollectiveBackend::Nccl) {
    compute_.synchronize();
    return;
  }
  const NcclApi &nccl = loadNccl();
  const CudaDriver &d = device_.driver();
  CudaEvent end(device_);
  end.record(compute_);
  Communicator *host = processCommunicator();
  double seconds = host ? host->deadline() : collectiveTimeout();
  auto start = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    CUresult r = d.cuEventQuery(end.get());
    if (r == CUDA_SUCCESS)
      return;
    if (r != CUDA_ERROR_NOT_READY)
      d.check(r, "waiting for the program's work");
    for (void *c : comms_) {
      int async = 0;
      nccl.CommGetAsyncError(c, &async);
      if (async != 0 && async != 7 /* ncclInProgress */)
        deadlineMissed("NCCL reported error " + std::to_string(async) + " (" +
                       nccl.GetErrorString(async) + ") during this run's collectives");
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds)
      deadlineMissed("this run's collectives did not complete within " + std::to_string((int)seconds) +
                     " s: a rank died or hung");
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    else
      std::this_thread::yield();
  }
}

void DeviceCollectives::deadlineMissed(const std::string &reason) {
  std::string what = reason + " (the last collective launched: " + lastLaunched_ + ")";
  const NcclApi &nccl = loadNccl();
  for (void *c : comms_)
    nccl.CommAbort(c);
  comms_.clear();
  if (Communicator *host = processCommunicator())
    host->abortJob(what);
  throw Error(what);
}

} // namespace tcc::rt::cuda
