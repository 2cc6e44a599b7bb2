//===- Collectives.cpp - Collective steps of a distributed program ------------===//
#include "Collectives.h"
#include "DType.h"
#include "Program.h"
#include "tcc/Support/MeshGeometry.h"

#include <cstring>
#include <memory>
#include <numeric>

namespace tcc::rt {

int64_t dimsProduct(const std::vector<int64_t> &v, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < v.size(); ++i)
    p *= v[i];
  return p;
}

namespace {

std::string shapeText(const std::vector<int64_t> &s) {
  std::string t;
  for (int64_t d : s)
    t += (t.empty() ? "" : "x") + std::to_string(d);
  return t.empty() ? "scalar" : t;
}

/// Copies block b of every outer row (BlockRows) between a tensor and n contiguous blocks, on
/// the host.
struct Blocks : BlockRows {
  using BlockRows::BlockRows;
  void pack(const uint8_t *tensor, uint8_t *blocks, int64_t n) const {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(blocks + (b * outer + o) * rowBytes, tensor + (o * n + b) * rowBytes, rowBytes);
  }
  void unpack(const uint8_t *blocks, uint8_t *tensor, int64_t n) const {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(tensor + (o * n + b) * rowBytes, blocks + (b * outer + o) * rowBytes, rowBytes);
  }
};

} // namespace

std::string collectiveName(const CollectiveStep &s) {
  static const char *names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                "broadcast",  "send",       "recv"};
  return std::string(names[static_cast<int>(s.kind)]) + " " + dtypeName(s.dtype) + " " +
         shapeText(s.inShape) + " over " + std::to_string(s.groupSize) + " ranks";
}

std::vector<int> collectiveGroup(const std::vector<int64_t> &mesh, const std::vector<uint8_t> &axes,
                                 int rank) {
  std::vector<int64_t> ranks = tcc::mesh::groupRanks(mesh, axes, rank);
  return std::vector<int>(ranks.begin(), ranks.end());
}

void checkCollective(CollectiveStep &s, const std::vector<int64_t> &mesh) {
  if (mesh.empty())
    throw Error("a collective in a program without a mesh");
  s.groupSize = 1;
  for (uint8_t a : s.axes) {
    if (a >= mesh.size())
      throw Error("collective axis " + std::to_string(a) + " is outside the mesh of " +
                  std::to_string(mesh.size()) + " axes");
    if (mesh[a] < 1)
      throw Error("mesh axis sizes must be >= 1");
    s.groupSize *= mesh[a];
  }
  if (s.axes.empty())
    throw Error("a collective needs at least one mesh axis");
  int64_t n = s.groupSize, rank = s.inShape.size();
  auto dimOk = [&](int64_t d) { return d >= 0 && d < rank; };
  std::vector<int64_t> want = s.inShape;
  switch (s.kind) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::Broadcast:
    if (s.kind == CollectiveKind::Broadcast && (s.dim2 < 0 || s.dim2 >= n))
      throw Error("broadcast root " + std::to_string(s.dim2) + " is outside the group");
    break;
  case CollectiveKind::AllGather:
    if (!dimOk(s.dim))
      throw Error("all_gather dim out of range");
    want[s.dim] *= n;
    break;
  case CollectiveKind::ReduceScatter:
    if (!dimOk(s.dim) || want[s.dim] % n)
      throw Error("reduce_scatter dim out of range or not divisible by the group");
    want[s.dim] /= n;
    break;
  case CollectiveKind::AllToAll:
    if (!dimOk(s.dim) || !dimOk(s.dim2) || want[s.dim] % n)
      throw Error("all_to_all dims out of range or split dim not divisible by the group");
    want[s.dim] /= n;
    want[s.dim2] *= n;
    break;
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    if (s.axes.size() != 1 || s.dim < 0 || s.dim >= n)
      throw Error(std::string(s.kind == CollectiveKind::Send ? "send" : "recv") + " peer " +
                  std::to_string(s.dim) + " is outside its axis of " + std::to_string(n) + " ranks");
    if (s.dim2 < 0 || s.dim2 > 32767)
      throw Error("send/recv tag " + std::to_string(s.dim2) + " is outside [0, 32767]");
    if (s.input != s.output)
      throw Error("send/recv name one buffer as input and output");
    break;
  }
  if (want != s.outShape)
    throw Error(collectiveName(s) + ": the output is " + shapeText(s.outShape) + ", expected " +
                shapeText(want));
  bool reduces = s.kind == CollectiveKind::AllReduce || s.kind == CollectiveKind::ReduceScatter;
  if (reduces && s.dtype != TCCRT_F32 && s.dtype != TCCRT_F64 && s.dtype != TCCRT_I32 &&
      s.dtype != TCCRT_I64)
    throw Error(collectiveName(s) + ": reductions run on f32, f64, i32 and i64 tensors");
  if (reduces && s.reduction == Reduction::Avg && s.dtype != TCCRT_F32 && s.dtype != TCCRT_F64)
    throw Error(collectiveName(s) + ": avg needs a float tensor");
}

void runCollective(const CollectiveStep &s, const std::vector<int64_t> &mesh, const void *in,
                   void *out, Communicator *comm, std::vector<uint8_t> &scratch,
                   const std::string &what) {
  size_t elem = dtypeSize(s.dtype);
  size_t inBytes = dimsProduct(s.inShape, 0, s.inShape.size()) * elem;
  size_t outBytes = dimsProduct(s.outShape, 0, s.outShape.size()) * elem;
  if (s.groupSize == 1) {
    if (in != out)
      std::memmove(out, in, outBytes);
    return;
  }
  if (!comm) {
    std::string ranks = std::to_string(dimsProduct(mesh, 0, mesh.size()));
    throw Error(what + ": this program was compiled for " + ranks +
                " ranks; start it with mpirun -np " + ranks);
  }
  std::vector<int> group = collectiveGroup(mesh, s.axes, comm->rank());
  int64_t n = s.groupSize;
  auto *src = static_cast<const uint8_t *>(in);
  auto *dst = static_cast<uint8_t *>(out);
  switch (s.kind) {
  case CollectiveKind::AllReduce:
    comm->allReduce(group, in, out, inBytes / elem, s.dtype, s.reduction, what);
    return;
  case CollectiveKind::Broadcast: {
    int root = static_cast<int>(s.dim2);
    if (in != out)
      std::memmove(out, in, inBytes);
    comm->broadcast(group, out, inBytes, root, what);
    return;
  }
  case CollectiveKind::AllGather: {
    if (dimsProduct(s.inShape, 0, s.dim) == 1) {
      comm->allGather(group, in, out, inBytes, what);
      return;
    }
    scratch.resize(outBytes);
    comm->allGather(group, in, scratch.data(), inBytes, what);
    Blocks(s.outShape, s.dim, n, elem).unpack(scratch.data(), dst, n);
    return;
  }
  case CollectiveKind::ReduceScatter: {
    const void *blocks = in;
    if (dimsProduct(s.inShape, 0, s.dim) != 1) {
      scratch.resize(inBytes);
      Blocks(s.inShape, s.dim, n, elem).pack(src, scratch.data(), n);
      blocks = scratch.data();
    }
    comm->reduceScatter(group, blocks, out, outBytes / elem, s.dtype, s.reduction, what);
    return;
  }
  case CollectiveKind::Send: {
    PendingCollective p = comm->startSend(group, (int)s.dim, (int)s.dim2, in, inBytes, what);
    comm->finish(p);
    return;
  }
  case CollectiveKind::Recv:
    comm->recv(group, (int)s.dim, (int)s.dim2, out, outBytes, what);
    return;
  case CollectiveKind::AllToAll: {
    // Send: the split dim's blocks, contiguous; receive: blocks to concatenate along concat dim.
    scratch.resize(inBytes * 2);
    uint8_t *send = scratch.data(), *recv = scratch.data() + inBytes;
    Blocks(s.inShape, s.dim, n, elem).pack(src, send, n);
    comm->allToAll(group, send, recv, inBytes / n, what);
    Blocks(s.outShape, s.dim2, n, elem).unpack(recv, dst, n);
    return;
  }
  }
}

std::optional<PendingCollective> startCollective(const CollectiveStep &s,
                                                 const std::vector<int64_t> &mesh, const void *in,
                                                 void *out, Communicator *comm,
                                                 const std::string &what) {
  size_t elem = dtypeSize(s.dtype);
  size_t inBytes = dimsProduct(s.inShape, 0, s.inShape.size()) * elem;
  size_t outBytes = dimsProduct(s.outShape, 0, s.outShape.size()) * elem;
  if (s.groupSize == 1 || !comm) {
    std::vector<uint8_t> unused;
    runCollective(s, mesh, in, out, comm, unused, what);
    return std::nullopt;
  }
  std::vector<int> group = collectiveGroup(mesh, s.axes, comm->rank());
  if (s.kind == CollectiveKind::AllReduce)
    return comm->startAllReduce(group, in, out, inBytes / elem, s.dtype, s.reduction, what);
  if (s.kind == CollectiveKind::Send)
    return comm->startSend(group, (int)s.dim, (int)s.dim2, in, inBytes, what);
  if (s.kind == CollectiveKind::AllGather) {
    if (dimsProduct(s.outShape, 0, s.dim) == 1)
      return comm->startAllGather(group, in, out, inBytes, what);
    // Gathered along an inner dim: the blocks arrive one after another in a staging buffer
    // (owned by the completion, which unpacks them into place).
    auto staging = std::make_shared<std::vector<uint8_t>>(outBytes);
    PendingCollective p = comm->startAllGather(group, in, staging->data(), inBytes, what);
    Blocks blocks(s.outShape, s.dim, s.groupSize, elem);
    int64_t n = s.groupSize;
    p.then = [=] { blocks.unpack(staging->data(), static_cast<uint8_t *>(out), n); };
    return p;
  }
  if (s.kind != CollectiveKind::ReduceScatter)
    throw Error(what + ": only all_reduce, reduce_scatter, all_gather and send run asynchronously");
  std::vector<uint8_t> staging;
  const void *blocks = in;
  if (dimsProduct(s.inShape, 0, s.dim) != 1) {
    staging.resize(inBytes);
    Blocks(s.inShape, s.dim, s.groupSize, elem)
        .pack(static_cast<const uint8_t *>(in), staging.data(), s.groupSize);
    blocks = staging.data();
  }
  PendingCollective p =
      comm->startReduceScatter(group, blocks, out, outBytes / elem, s.dtype, s.reduction, what);
  p.staging = std::move(staging);
  return p;
}

std::vector<int64_t> blockShape(const std::vector<int64_t> &shape,
                                const std::vector<std::vector<uint8_t>> &splits,
                                const std::vector<int64_t> &mesh) {
  std::vector<int64_t> local = shape;
  for (size_t d = 0; d < splits.size() && d < local.size(); ++d)
    for (uint8_t a : splits[d]) {
      if (a >= mesh.size() || mesh[a] < 1 || local[d] % mesh[a])
        throw Error("a state split does not fit the mesh");
      local[d] /= mesh[a];
    }
  return local;
}

std::vector<int64_t> blockOffset(const std::vector<int64_t> &shape,
                                 const std::vector<std::vector<uint8_t>> &splits,
                                 const std::vector<int64_t> &mesh, int rank) {
  std::vector<int64_t> local = blockShape(shape, splits, mesh);
  std::vector<int64_t> offset(shape.size(), 0);
  for (size_t d = 0; d < splits.size() && d < shape.size(); ++d)
    offset[d] = tcc::mesh::positionOver(mesh, splits[d], rank) * local[d];
  return offset;
}

int64_t copyOverlap(const uint8_t *src, const std::vector<int64_t> &srcShape,
                    const std::vector<int64_t> &srcOffset, uint8_t *dst,
                    const std::vector<int64_t> &dstShape, const std::vector<int64_t> &dstOffset,
                    size_t elem, uint8_t *covered) {
  size_t rank = dstShape.size();
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    covered[0] = 1;
    return 1;
  }
  // The overlap [lo, hi) in whole-tensor coordinates.
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(srcOffset[d], dstOffset[d]);
    hi[d] = std::min(srcOffset[d] + srcShape[d], dstOffset[d] + dstShape[d]);
    if (lo[d] >= hi[d])
      return 0;
  }
  auto strides = [&](const std::vector<int64_t> &s) {
    std::vector<int64_t> st(rank, 1);
    for (size_t d = rank - 1; d-- > 0;)
      st[d] = st[d + 1] * s[d + 1];
    return st;
  };
  std::vector<int64_t> ss = strides(srcShape), ds = strides(dstShape);
  int64_t run = hi[rank - 1] - lo[rank - 1], copied = 0;
  std::vector<int64_t> idx(lo.begin(), lo.end());
  while (true) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      s += (idx[d] - srcOffset[d]) * ss[d];
      t += (idx[d] - dstOffset[d]) * ds[d];
    }
    std::memcpy(dst + t * elem, src + s * elem, run * elem);
    std::memset(covered + t, 1, run);
    copied += run;
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++idx[d] < hi[d])
        break;
      idx[d] = lo[d];
    }
    if (d == (size_t)-1)
      return copied;
  }
}

void copyBlock(const uint8_t *whole, const std::vector<int64_t> &shape, size_t elem,
               const std::vector<std::vector<uint8_t>> &splits, const std::vector<int64_t> &mesh,
               int rank, uint8_t *out) {
  std::vector<int64_t> local = blockShape(shape, splits, mesh);
  std::vector<uint8_t> covered(std::max<int64_t>(1, std::accumulate(local.begin(), local.end(),
                                                                     int64_t(1), std::multiplies<>())));
  copyOverlap(whole, shape, std::vector<int64_t>(shape.size(), 0), out, local,
              blockOffset(shape, splits, mesh, rank), elem, covered.data());
}

} // namespace tcc::rt
