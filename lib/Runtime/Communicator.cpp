//===- Communicator.cpp - MPI, loaded at run time -----------------------------===//
//
// Open MPI's C ABI (Debian's libmpi.so.40): handles are pointers, the predefined ones are the
// addresses of exported objects (MPI_COMM_WORLD is &ompi_mpi_comm_world, MPI_FLOAT
// &ompi_mpi_float, MPI_SUM &ompi_mpi_op_sum), MPI_STATUS_IGNORE is null. The library is opened
// RTLD_GLOBAL: Open MPI's own plugins resolve its symbols through the global scope.
//
//===----------------------------------------------------------------------===//
#include "Communicator.h"
#include "DType.h"
#include "Program.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <condition_variable>

namespace tcc::rt {

namespace {

using Handle = void *;

struct MpiApi {
  void *lib = nullptr;
  int (*Initialized)(int *) = nullptr;
  int (*Init)(int *, char ***) = nullptr;
  int (*Finalize)() = nullptr;
  int (*Finalized)(int *) = nullptr;
  int (*Comm_rank)(Handle, int *) = nullptr;
  int (*Comm_size)(Handle, int *) = nullptr;
  int (*Comm_group)(Handle, Handle *) = nullptr;
  int (*Group_incl)(Handle, int, const int *, Handle *) = nullptr;
  int (*Group_free)(Handle *) = nullptr;
  int (*Comm_create_group)(Handle, Handle, int, Handle *) = nullptr;
  int (*Iallreduce)(const void *, void *, int, Handle, Handle, Handle, Handle *) = nullptr;
  int (*Iallgather)(const void *, int, Handle, void *, int, Handle, Handle, Handle *) = nullptr;
  int (*Ireduce_scatter_block)(const void *, void *, int, Handle, Handle, Handle, Handle *) = nullptr;
  int (*Ialltoall)(const void *, int, Handle, void *, int, Handle, Handle, Handle *) = nullptr;
  int (*Ibcast)(void *, int, Handle, int, Handle, Handle *) = nullptr;
  int (*Ibarrier)(Handle, Handle *) = nullptr;
  int (*Isend)(const void *, int, Handle, int, int, Handle, Handle *) = nullptr;
  int (*Irecv)(void *, int, Handle, int, int, Handle, Handle *) = nullptr;
  int (*Test)(Handle *, int *, void *) = nullptr;
  int (*Abort)(Handle, int) = nullptr;
  Handle commWorld = nullptr, byteType = nullptr, floatType = nullptr, doubleType = nullptr,
         int32Type = nullptr, int64Type = nullptr, opSum = nullptr, opMax = nullptr,
         opMin = nullptr;

  template <class F> void bind(F &f, const char *name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    if (!f)
      throw Error(std::string("the MPI library lacks ") + name);
  }
  Handle object(const char *name) {
    Handle h = dlsym(lib, name);
    if (!h)
      throw Error(std::string("the MPI library lacks ") + name +
                  " (libtccrt speaks Open MPI's ABI, as Debian's openmpi packages ship it)");
    return h;
  }
};

/// Runs a blocking MPI call that has no non-blocking form (start-up, communicator creation)
/// under the deadline: if it has not returned by then, this rank reports what it was waiting
/// for and exits, and mpirun ends the others.
} // namespace

void runWithDeadline(double seconds, const std::string &what, const std::function<void()> &call) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done; })) {
      std::fprintf(stderr,
                   "tcc: error: %s did not complete within %g s: a rank died or hung before it; "
                   "ending this rank\n",
                   what.c_str(), seconds);
      std::fflush(stderr);
      std::_Exit(3);
    }
  });
  try {
    call();
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(m);
      done = true;
    }
    cv.notify_all();
    watchdog.join();
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
}

double collectiveTimeout() {
  const char *t = std::getenv("TCC_COLLECTIVE_TIMEOUT");
  return t && std::atof(t) > 0 ? std::atof(t) : 300;
}

namespace {

void check(int rc, const char *call) {
  if (rc != 0)
    throw Error(std::string(call) + " failed with MPI error " + std::to_string(rc));
}

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(MpiApi api) : mpi(api) {
    int initialized = 0;
    check(mpi.Initialized(&initialized), "MPI_Initialized");
    if (!initialized) {
      runWithDeadline(collectiveTimeout(), "MPI start-up (MPI_Init)",
                   [&] { check(mpi.Init(nullptr, nullptr), "MPI_Init"); });
      std::atexit([] {
        if (auto *self = instance) {
          int finalized = 0;
          self->mpi.Finalized(&finalized);
          if (!finalized)
            self->mpi.Finalize();
        }
      });
    }
    check(mpi.Comm_rank(mpi.commWorld, &rank_), "MPI_Comm_rank");
    check(mpi.Comm_size(mpi.commWorld, &size_), "MPI_Comm_size");
    deadlineSeconds_ = collectiveTimeout();
    instance = this;
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "MPI (Open MPI, dlopen)"; }

  void allReduce(const std::vector<int> &group, const void *in, void *out, size_t count,
                 tccrt_dtype dtype, Reduction op, const std::string &what) override {
    PendingCollective p = startAllReduce(group, in, out, count, dtype, op, what);
    finish(p);
  }

  PendingCollective startAllReduce(const std::vector<int> &group, const void *in, void *out,
                                   size_t count, tccrt_dtype dtype, Reduction op,
                                   const std::string &what) override {
    PendingCollective p{nullptr, group, what, {}, {}};
    check(mpi.Iallreduce(in, out, checkedCount(count), type(dtype), reduction(op), comm(group),
                         &p.request),
          "MPI_Iallreduce");
    if (op == Reduction::Avg)
      p.then = [=] { divide(out, count, dtype, group.size()); };
    return p;
  }

  PendingCollective startReduceScatter(const std::vector<int> &group, const void *in, void *out,
                                       size_t count, tccrt_dtype dtype, Reduction op,
                                       const std::string &what) override {
    PendingCollective p{nullptr, group, what, {}, {}};
    check(mpi.Ireduce_scatter_block(in, out, checkedCount(count), type(dtype), reduction(op),
                                    comm(group), &p.request),
          "MPI_Ireduce_scatter_block");
    if (op == Reduction::Avg)
      p.then = [=] { divide(out, count, dtype, group.size()); };
    return p;
  }

  void finish(PendingCollective &p) override {
    wait(p.request, p.group, p.what);
    if (p.then)
      p.then();
  }

  void poke(PendingCollective &p) override {
    int done = 0;
    check(mpi.Test(&p.request, &done, nullptr), "MPI_Test");
  }

  void allGather(const std::vector<int> &group, const void *in, void *out, size_t bytes,
                 const std::string &what) override {
    PendingCollective p = startAllGather(group, in, out, bytes, what);
    finish(p);
  }

  PendingCollective startAllGather(const std::vector<int> &group, const void *in, void *out,
                                   size_t bytes, const std::string &what) override {
    PendingCollective p{nullptr, group, what, {}, {}};
    int n = checkedCount(bytes);
    check(mpi.Iallgather(in, n, mpi.byteType, out, n, mpi.byteType, comm(group), &p.request),
          "MPI_Iallgather");
    return p;
  }

  void reduceScatter(const std::vector<int> &group, const void *in, void *out, size_t count,
                     tccrt_dtype dtype, Reduction op, const std::string &what) override {
    PendingCollective p = startReduceScatter(group, in, out, count, dtype, op, what);
    finish(p);
  }

  void allToAll(const std::vector<int> &group, const void *in, void *out, size_t bytes,
                const std::string &what) override {
    Handle req = nullptr;
    int n = checkedCount(bytes);
    check(mpi.Ialltoall(in, n, mpi.byteType, out, n, mpi.byteType, comm(group), &req),
          "MPI_Ialltoall");
    wait(req, group, what);
  }

  void broadcast(const std::vector<int> &group, void *buffer, size_t bytes, int root,
                 const std::string &what) override {
    Handle req = nullptr;
    check(mpi.Ibcast(buffer, checkedCount(bytes), mpi.byteType, root, comm(group), &req),
          "MPI_Ibcast");
    wait(req, group, what);
  }

  PendingCollective startSend(const std::vector<int> &group, int peer, int tag, const void *in,
                              size_t bytes, const std::string &what) override {
    PendingCollective p{nullptr, group, what, {}, {}};
    p.staging.assign(static_cast<const uint8_t *>(in), static_cast<const uint8_t *>(in) + bytes);
    check(mpi.Isend(p.staging.data(), checkedCount(bytes), mpi.byteType, peer, tag, comm(group),
                    &p.request),
          "MPI_Isend");
    return p;
  }

  void recv(const std::vector<int> &group, int peer, int tag, void *out, size_t bytes,
            const std::string &what) override {
    Handle req = nullptr;
    check(mpi.Irecv(out, checkedCount(bytes), mpi.byteType, peer, tag, comm(group), &req),
          "MPI_Irecv");
    wait(req, group, what);
  }

  [[noreturn]] void abortJob(const std::string &message) override {
    std::fprintf(stderr, "tcc: error: rank %d: %s%s%s; aborting every rank\n", rank_,
                 message.c_str(), context_.empty() ? "" : " in ", context_.c_str());
    std::fflush(stderr);
    mpi.Abort(mpi.commWorld, 3);
    std::_Exit(3);
  }

  void barrier(const std::string &what) override {
    Handle req = nullptr;
    check(mpi.Ibarrier(mpi.commWorld, &req), "MPI_Ibarrier");
    std::vector<int> all(size_);
    for (int r = 0; r < size_; ++r)
      all[r] = r;
    wait(req, all, what);
  }

private:
  static int checkedCount(size_t n) {
    if (n > (size_t)INT32_MAX)
      throw Error("a collective of " + std::to_string(n) + " elements exceeds MPI's int count");
    return static_cast<int>(n);
  }

  Handle type(tccrt_dtype d) {
    switch (d) {
    case TCCRT_F32: return mpi.floatType;
    case TCCRT_F64: return mpi.doubleType;
    case TCCRT_I32: return mpi.int32Type;
    case TCCRT_I64: return mpi.int64Type;
    default:
      throw Error(std::string("MPI reductions of ") + dtypeName(d) + " are not supported");
    }
  }

  Handle reduction(Reduction op) {
    return op == Reduction::Max ? mpi.opMax : op == Reduction::Min ? mpi.opMin : mpi.opSum;
  }

  static void divide(void *data, size_t count, tccrt_dtype d, size_t n) {
    if (d == TCCRT_F32)
      for (size_t i = 0; i < count; ++i)
        static_cast<float *>(data)[i] /= static_cast<float>(n);
    else if (d == TCCRT_F64)
      for (size_t i = 0; i < count; ++i)
        static_cast<double *>(data)[i] /= static_cast<double>(n);
    else
      throw Error("avg needs a float tensor");
  }

  /// The sub-communicator of `group` (its ranks in group order), made the first time it is
  /// used, collectively by the group's ranks alone (MPI_Comm_create_group): ranks that run
  /// different programs (pipeline stages) reach their groups in different orders, and a
  /// group's ranks meet there just as at the collective that needs it.
  Handle comm(const std::vector<int> &group) {
    if ((int)group.size() == size_)
      return mpi.commWorld;
    auto it = comms.find(group);
    if (it != comms.end())
      return it->second;
    std::string ranks;
    uint32_t tag = 17;
    for (int r : group) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      tag = tag * 31 + static_cast<uint32_t>(r);
    }
    Handle world = nullptr, members = nullptr, c = nullptr;
    check(mpi.Comm_group(mpi.commWorld, &world), "MPI_Comm_group");
    check(mpi.Group_incl(world, (int)group.size(), group.data(), &members), "MPI_Group_incl");
    runWithDeadline(deadlineSeconds_,
                    "rank " + std::to_string(rank_) + ": making the communicator of ranks " +
                        ranks + " (MPI_Comm_create_group)",
                    [&] {
                      check(mpi.Comm_create_group(mpi.commWorld, members, (int)(tag % 32768), &c),
                            "MPI_Comm_create_group");
                    });
    mpi.Group_free(&members);
    mpi.Group_free(&world);
    return comms[group] = c;
  }

  void wait(Handle &req, const std::vector<int> &group, const std::string &what) {
    using Clock = std::chrono::steady_clock;
    auto start = Clock::now();
    auto deadline = start + std::chrono::duration<double>(deadlineSeconds_);
    int done = 0;
    for (int spins = 0;; ++spins) {
      check(mpi.Test(&req, &done, nullptr), "MPI_Test");
      if (done)
        return;
      if (Clock::now() > deadline) {
        std::string ranks;
        for (int r : group)
          ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
        std::fprintf(stderr,
                     "tcc: error: rank %d: %s%s%s did not complete within %g s (group of ranks "
                     "%s): a rank died or hung; aborting every rank\n",
                     rank_, what.c_str(), context_.empty() ? "" : " in ", context_.c_str(),
                     deadlineSeconds_, ranks.c_str());
        std::fflush(stderr);
        mpi.Abort(mpi.commWorld, 3);
        std::_Exit(3);
      }
      // Spin, yielding the core (ranks are often oversubscribed); after a while sleep briefly
      // so a long wait does not burn a core.
      if (spins > 20000)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      else
        std::this_thread::yield();
    }
  }

  MpiApi mpi;
  int rank_ = 0, size_ = 1;
  std::map<std::vector<int>, Handle> comms;
  static inline MpiCommunicator *instance = nullptr;
};

std::unique_ptr<Communicator> openMpi() {
  MpiApi api;
  const char *names[] = {"libmpi.so.40", "libmpi.so"};
  for (const char *name : names)
    if ((api.lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL)))
      break;
  if (!api.lib)
    throw Error(std::string("this process was started by mpirun but the MPI library could not "
                            "be loaded (libmpi.so.40: ") +
                dlerror() + "); install Open MPI (Debian: openmpi-bin)");
  api.bind(api.Initialized, "MPI_Initialized");
  api.bind(api.Init, "MPI_Init");
  api.bind(api.Finalize, "MPI_Finalize");
  api.bind(api.Finalized, "MPI_Finalized");
  api.bind(api.Comm_rank, "MPI_Comm_rank");
  api.bind(api.Comm_size, "MPI_Comm_size");
  api.bind(api.Comm_group, "MPI_Comm_group");
  api.bind(api.Group_incl, "MPI_Group_incl");
  api.bind(api.Group_free, "MPI_Group_free");
  api.bind(api.Comm_create_group, "MPI_Comm_create_group");
  api.bind(api.Iallreduce, "MPI_Iallreduce");
  api.bind(api.Iallgather, "MPI_Iallgather");
  api.bind(api.Ireduce_scatter_block, "MPI_Ireduce_scatter_block");
  api.bind(api.Ialltoall, "MPI_Ialltoall");
  api.bind(api.Ibcast, "MPI_Ibcast");
  api.bind(api.Ibarrier, "MPI_Ibarrier");
  api.bind(api.Isend, "MPI_Isend");
  api.bind(api.Irecv, "MPI_Irecv");
  api.bind(api.Test, "MPI_Test");
  api.bind(api.Abort, "MPI_Abort");
  api.commWorld = api.object("ompi_mpi_comm_world");
  api.byteType = api.object("ompi_mpi_byte");
  api.floatType = api.object("ompi_mpi_float");
  api.doubleType = api.object("ompi_mpi_double");
  api.int32Type = api.object("ompi_mpi_int32_t");
  api.int64Type = api.object("ompi_mpi_int64_t");
  api.opSum = api.object("ompi_mpi_op_sum");
  api.opMax = api.object("ompi_mpi_op_max");
  api.opMin = api.object("ompi_mpi_op_min");
  return std::make_unique<MpiCommunicator>(api);
}

} // namespace

Communicator *processCommunicator() {
  static std::once_flag once;
  static std::unique_ptr<Communicator> comm;
  static std::string failure;
  std::call_once(once, [] {
    const char *world = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (!world || std::atoi(world) <= 1)
      return;
    try {
      comm = openMpi();
    } catch (const Error &e) {
      failure = e.what();
    }
  });
  if (!failure.empty())
    throw Error(failure);
  return comm.get();
}

} // namespace tcc::rt
