//===- FakeNccl.cpp - NCCL implemented with MPI on the fake driver's memory -===//
//
// libtcc-fakenccl.so exports the NCCL functions libtccrt resolves (CudaCollectives.cpp), so that
// tests set TCC_NCCL_LIBRARY to it and run libtccrt's NCCL path, with several ranks under
// mpirun, on a machine without GPUs. The fake driver's device pointers are host pointers, so
// each collective is the matching MPI call on them, run when it is enqueued: this needs the fake
// driver's default (immediate) mode, where everything enqueued before has already run.
//
// MPI is the Open MPI that libtccrt already loaded (RTLD_GLOBAL) for the job; its functions are
// found with dlsym. ncclGetUniqueId writes the caller's world rank into the id; every rank of a
// group calls ncclCommInitRank together (SPMD order), so MPI_Comm_split with the root's world
// rank as colour makes the group's communicator. One-rank communicators need no MPI.
// ncclSend/ncclRecv are queued between ncclGroupStart and ncclGroupEnd and run there as
// non-blocking MPI point-to-point calls. Asynchronous errors, abort and in-progress states are
// not modelled.
//
//===----------------------------------------------------------------------===//
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

using Handle = void *;
struct UniqueId {
  char internal[128];
};
struct Comm {
  Handle mpi = nullptr; // null: one rank
  int rank = 0, size = 1;
};
struct P2p {
  bool send;
  void *buffer;
  size_t bytes;
  int peer;
  Comm *comm;
};

constexpr int kSuccess = 0, kInternalError = 3, kInvalidArgument = 4;
constexpr uint32_t kMagic = 0x7cc1ccu;

template <class F> F mpiFunction(const char *name) {
  auto f = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  if (!f) {
    std::fprintf(stderr, "fake NCCL: %s not found (is MPI loaded?)\n", name);
    std::abort();
  }
  return f;
}
Handle mpiObject(const char *name) { return mpiFunction<Handle>(name); }

size_t typeSize(int t) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return t >= 0 && t < 10 ? sizes[t] : 0;
}
Handle mpiType(int t) {
  switch (t) {
  case 2: return mpiObject("ompi_mpi_int32_t");
  case 4: return mpiObject("ompi_mpi_int64_t");
  case 7: return mpiObject("ompi_mpi_float");
  case 8: return mpiObject("ompi_mpi_double");
  default: return mpiObject("ompi_mpi_byte");
  }
}
Handle mpiOp(int op) {
  return op == 2 ? mpiObject("ompi_mpi_op_max") : op == 3 ? mpiObject("ompi_mpi_op_min")
                                                        : mpiObject("ompi_mpi_op_sum");
}
void divide(void *data, size_t count, int type, int n) {
  if (type == 7)
    for (size_t i = 0; i < count; ++i)
      static_cast<float *>(data)[i] /= (float)n;
  else if (type == 8)
    for (size_t i = 0; i < count; ++i)
      static_cast<double *>(data)[i] /= (double)n;
}
int worldRank() {
  int r = 0;
  mpiFunction<int (*)(Handle, int *)>("MPI_Comm_rank")(mpiObject("ompi_mpi_comm_world"), &r);
  return r;
}

std::vector<P2p> &pending() {
  static std::vector<P2p> ops;
  return ops;
}
int groupDepth = 0;

} // namespace

FAKE_API int ncclGetVersion(int *version) {
  *version = 22800;
  return kSuccess;
}

FAKE_API const char *ncclGetErrorString(int result) {
  return result == kSuccess ? "no error" : "fake NCCL error";
}

FAKE_API int ncclGetUniqueId(UniqueId *id) {
  std::memset(id, 0, sizeof *id);
  int32_t fields[2] = {(int32_t)kMagic, dlsym(RTLD_DEFAULT, "MPI_Comm_rank") ? worldRank() : 0};
  std::memcpy(id->internal, fields, sizeof fields);
  return kSuccess;
}

FAKE_API int ncclCommInitRank(Comm **out, int nranks, UniqueId id, int rank) {
  int32_t fields[2];
  std::memcpy(fields, id.internal, sizeof fields);
  if (fields[0] != (int32_t)kMagic || nranks < 1 || rank < 0 || rank >= nranks)
    return kInvalidArgument;
  auto *c = new Comm;
  c->rank = rank;
  c->size = nranks;
  if (nranks > 1) {
    auto split = mpiFunction<int (*)(Handle, int, int, Handle *)>("MPI_Comm_split");
    if (split(mpiObject("ompi_mpi_comm_world"), fields[1], rank, &c->mpi) != 0)
      return kInternalError;
  }
  *out = c;
  return kSuccess;
}

FAKE_API int ncclCommDestroy(Comm *c) {
  if (c && c->mpi)
    mpiFunction<int (*)(Handle *)>("MPI_Comm_free")(&c->mpi);
  delete c;
  return kSuccess;
}
FAKE_API int ncclCommAbort(Comm *c) { return ncclCommDestroy(c); }
FAKE_API int ncclCommGetAsyncError(Comm *, int *error) {
  *error = kSuccess;
  return kSuccess;
}

FAKE_API int ncclAllReduce(const void *in, void *out, size_t count, int type, int op, Comm *c,
                           void *) {
  if (!c->mpi) {
    std::memmove(out, in, count * typeSize(type));
    return kSuccess;
  }
  const void *send = in == out ? reinterpret_cast<const void *>(1) /* MPI_IN_PLACE */ : in;
  int rc = mpiFunction<int (*)(const void *, void *, int, Handle, Handle, Handle)>("MPI_Allreduce")(
      send, out, (int)count, mpiType(type), mpiOp(op), c->mpi);
  if (op == 4)
    divide(out, count, type, c->size);
  return rc == 0 ? kSuccess : kInternalError;
}

FAKE_API int ncclAllGather(const void *in, void *out, size_t count, int type, Comm *c, void *) {
  size_t bytes = count * typeSize(type);
  if (!c->mpi) {
    std::memmove(out, in, bytes);
    return kSuccess;
  }
  int rc = mpiFunction<int (*)(const void *, int, Handle, void *, int, Handle, Handle)>(
      "MPI_Allgather")(in, (int)bytes, mpiType(0), out, (int)bytes, mpiType(0), c->mpi);
  return rc == 0 ? kSuccess : kInternalError;
}

FAKE_API int ncclReduceScatter(const void *in, void *out, size_t count, int type, int op, Comm *c,
                               void *) {
  if (!c->mpi) {
    std::memmove(out, in, count * typeSize(type));
    return kSuccess;
  }
  int rc = mpiFunction<int (*)(const void *, void *, int, Handle, Handle, Handle)>(
      "MPI_Reduce_scatter_block")(in, out, (int)count, mpiType(type), mpiOp(op), c->mpi);
  if (op == 4)
    divide(out, count, type, c->size);
  return rc == 0 ? kSuccess : kInternalError;
}

FAKE_API int ncclBroadcast(const void *in, void *out, size_t count, int type, int root, Comm *c,
                           void *) {
  size_t bytes = count * typeSize(type);
  if (c->rank == root && in != out)
    std::memmove(out, in, bytes);
  if (!c->mpi)
    return kSuccess;
  int rc = mpiFunction<int (*)(void *, int, Handle, int, Handle)>("MPI_Bcast")(
      out, (int)bytes, mpiType(0), root, c->mpi);
  return rc == 0 ? kSuccess : kInternalError;
}

FAKE_API int ncclGroupStart() {
  ++groupDepth;
  return kSuccess;
}

FAKE_API int ncclSend(const void *buffer, size_t count, int type, int peer, Comm *c, void *) {
  pending().push_back({true, const_cast<void *>(buffer), count * typeSize(type), peer, c});
  return groupDepth > 0 ? kSuccess : kInvalidArgument; // libtccrt always groups them
}
FAKE_API int ncclRecv(void *buffer, size_t count, int type, int peer, Comm *c, void *) {
  pending().push_back({false, buffer, count * typeSize(type), peer, c});
  return groupDepth > 0 ? kSuccess : kInvalidArgument;
}

FAKE_API int ncclGroupEnd() {
  if (--groupDepth > 0)
    return kSuccess;
  std::vector<P2p> ops;
  ops.swap(pending());
  std::vector<Handle> requests(ops.size());
  auto isend = mpiFunction<int (*)(const void *, int, Handle, int, int, Handle, Handle *)>("MPI_Isend");
  auto irecv = mpiFunction<int (*)(void *, int, Handle, int, int, Handle, Handle *)>("MPI_Irecv");
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2p &o = ops[i];
    if (!o.comm->mpi) { // one rank: its own send is its receive
      continue;
    }
    int rc = o.send ? isend(o.buffer, (int)o.bytes, mpiType(0), o.peer, 7, o.comm->mpi, &requests[i])
                    : irecv(o.buffer, (int)o.bytes, mpiType(0), o.peer, 7, o.comm->mpi, &requests[i]);
    if (rc != 0)
      return kInternalError;
  }
  // One-rank groups: copy each send to the receive that pairs with it (same order).
  std::vector<const P2p *> sends;
  for (const P2p &o : ops)
    if (!o.comm->mpi && o.send)
      sends.push_back(&o);
  size_t next = 0;
  for (const P2p &o : ops)
    if (!o.comm->mpi && !o.send && next < sends.size())
      std::memmove(o.buffer, sends[next++]->buffer, o.bytes);
  auto wait = mpiFunction<int (*)(Handle *, void *)>("MPI_Wait");
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].comm->mpi && wait(&requests[i], nullptr) != 0)
      return kInternalError;
  return kSuccess;
}
