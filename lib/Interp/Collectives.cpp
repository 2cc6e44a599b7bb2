//===- Collectives.cpp - Collective ops in the interpreter; the simulated mesh ---===//
//
// Every collective is evaluated from one exchange of the group's tensors, then a local
// combination in group order, so every rank of a group computes bit-identical results (the
// sums are added in the same order everywhere). SimulatedMesh runs the ranks as threads of this
// process: the oracle the sharding pass is tested against.
//
//===----------------------------------------------------------------------===//
#include "Collectives.h"

#include "tcc/IR/Sharding.h"
#include "tcc/Interp/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <condition_variable>
#include <deque>
#include <tuple>
#include <map>
#include <mutex>
#include <thread>

using namespace mlir;

namespace tcc {

namespace {

SmallVector<int> meshAxes(Operation *op, ArrayAttr names) {
  std::string error;
  auto axes = axisIndices(meshOf(op), names, error);
  if (failed(axes))
    throw Error(error);
  return *axes;
}

CollectiveGroup groupOf(Operation *op, ArrayAttr axes, CollectiveTransport *transport) {
  MeshAttr mesh = meshOf(op);
  if (!mesh)
    throw Error("the module has no tcc.mesh");
  return collectiveGroup(mesh, meshAxes(op, axes), transport ? transport->rank() : 0);
}

Tensor combine(CollectiveReduceKind kind, const std::vector<Tensor> &parts) {
  namespace k = kernels;
  k::BinaryKind op = kind == CollectiveReduceKind::Max   ? k::BinaryKind::Max
                     : kind == CollectiveReduceKind::Min ? k::BinaryKind::Min
                                                         : k::BinaryKind::Add;
  Tensor acc = parts[0];
  for (size_t i = 1; i < parts.size(); ++i)
    acc = k::binary(op, acc, parts[i]);
  if (kind == CollectiveReduceKind::Avg) {
    Tensor n = k::cast(Tensor::scalar<double>((double)parts.size()), acc.dtype());
    acc = k::binary(k::BinaryKind::Div, acc, k::broadcastInDim(n, acc.shape(), {}));
  }
  return acc;
}

/// Block `index` of `count` along `dim`.
Tensor block(const Tensor &x, int64_t dim, int64_t index, int64_t count) {
  std::vector<int64_t> start(x.shape().size(), 0), limit(x.shape()), stride(x.shape().size(), 1);
  int64_t size = x.shape()[dim] / count;
  start[dim] = index * size;
  limit[dim] = start[dim] + size;
  return kernels::slice(x, start, limit, stride);
}

int64_t peerRank(Operation *op, StringAttr axis, int64_t peer, CollectiveTransport *transport) {
  MeshAttr mesh = meshOf(op);
  SmallVector<int64_t> coords = meshCoordinates(mesh, transport->rank());
  coords[mesh.axisIndex(axis.getValue())] = peer;
  return rankAt(mesh, coords);
}

} // namespace

bool needsTransport(Operation *op) { return isCollective(op) || isa<AxisIndexOp>(op); }

std::vector<Tensor> evaluateCollective(Operation *op, const std::vector<Tensor> &in,
                                       CollectiveTransport *transport) {
  std::string what = describeOp(op);
  // Exchanges `mine` within the group over `axes`; a group of one needs no transport.
  auto exchange = [&](ArrayAttr axes, const Tensor &mine, CollectiveGroup &group) {
    group = groupOf(op, axes, transport);
    if (group.ranks.size() == 1)
      return std::vector<Tensor>{mine};
    if (!transport)
      throw Error("a collective over " + std::to_string(group.ranks.size()) +
                  " ranks needs the other ranks: run the per-rank programs together (tcc::runSpmd)");
    return transport->exchange(group.ranks, mine, what);
  };
  CollectiveGroup group;
  auto one = [](Tensor t) { return std::vector<Tensor>{std::move(t)}; };
  return llvm::TypeSwitch<Operation *, std::vector<Tensor>>(op)
      .Case([&](AllReduceOp o) {
        return one(combine(o.getKind(), exchange(o.getAxes(), in[0], group)));
      })
      .Case([&](AllGatherOp o) {
        return one(kernels::concat(exchange(o.getAxes(), in[0], group), o.getDim()));
      })
      .Case([&](ReduceScatterOp o) {
        Tensor all = combine(o.getKind(), exchange(o.getAxes(), in[0], group));
        return one(block(all, o.getDim(), group.position, group.ranks.size()));
      })
      .Case([&](AllToAllOp o) {
        std::vector<Tensor> all = exchange(o.getAxes(), in[0], group);
        std::vector<Tensor> mine;
        for (const Tensor &t : all)
          mine.push_back(block(t, o.getSplitDim(), group.position, all.size()));
        return one(kernels::concat(mine, o.getConcatDim()));
      })
      .Case([&](BroadcastOp o) {
        return one(exchange(o.getAxes(), in[0], group)[o.getRoot()]);
      })
      .Case([&](AxisIndexOp o) {
        return one(Tensor::scalar<int64_t>(groupOf(op, o.getAxes(), transport).position));
      })
      .Case([&](SendOp o) {
        if (!transport)
          throw Error("send needs the other ranks: run the per-rank programs together (tcc::runSpmd)");
        transport->send(peerRank(op, o.getAxisAttr(), o.getPeer(), transport), o.getTag(), in[0],
                        what);
        return std::vector<Tensor>{};
      })
      .Case([&](RecvOp o) {
        if (!transport)
          throw Error("recv needs the other ranks: run the per-rank programs together (tcc::runSpmd)");
        Tensor t =
            transport->recv(peerRank(op, o.getAxisAttr(), o.getPeer(), transport), o.getTag(), what);
        auto type = o.getType();
        if (t.shape() != Shape(type.getShape().begin(), type.getShape().end()) ||
            t.dtype() != dtypeFromType(type.getElementType()))
          throw Error("received " + t.typeString() + " where the program expects " +
                      shapeToString(Shape(type.getShape().begin(), type.getShape().end())) + "x" +
                      dtypeName(dtypeFromType(type.getElementType())));
        return one(std::move(t));
      })
      .Default([&](Operation *) -> std::vector<Tensor> {
        throw Error("not a collective: " + what);
      });
}

//===--- The simulated mesh ---------------------------------------------------===//

namespace {

/// Rendezvous of rank threads. Exchanges are keyed by group and by the collective's sequence
/// number within that group on each rank, so concurrent groups never mix.
class SimulatedMesh {
public:
  SimulatedMesh(int64_t ranks, std::chrono::milliseconds deadline)
      : numRanks(ranks), deadline(deadline), sequence(ranks) {}

  std::vector<Tensor> exchange(int64_t rank, ArrayRef<int64_t> ranks, const Tensor &mine,
                               const std::string &what) {
    std::vector<int64_t> members(ranks.begin(), ranks.end());
    int64_t position = std::find(members.begin(), members.end(), rank) - members.begin();
    std::unique_lock<std::mutex> lock(mutex);
    int64_t seq = sequence[rank][members]++;
    Slot &slot = slots[{members, seq}];
    if (slot.parts.empty()) {
      slot.parts.resize(members.size());
      slot.present.resize(members.size());
    }
    slot.parts[position] = mine;
    slot.present[position] = true;
    ++slot.arrived;
    cv.notify_all();
    wait(lock, rank, what, [&] { return slot.arrived == (int64_t)members.size(); }, [&] {
      std::vector<int64_t> missing;
      for (size_t i = 0; i < members.size(); ++i)
        if (!slot.present[i])
          missing.push_back(members[i]);
      return "waiting for rank(s) " + rankList(missing) + " of group " + rankList(members);
    });
    std::vector<Tensor> out = slot.parts;
    if (++slot.read == (int64_t)members.size())
      slots.erase({members, seq});
    return out;
  }

  void send(int64_t from, int64_t to, int64_t tag, const Tensor &value) {
    std::lock_guard<std::mutex> lock(mutex);
    channels[{from, to, tag}].push_back(value);
    cv.notify_all();
  }

  Tensor recv(int64_t from, int64_t to, int64_t tag, const std::string &what) {
    std::unique_lock<std::mutex> lock(mutex);
    auto &queue = channels[{from, to, tag}];
    wait(lock, to, what, [&] { return !queue.empty(); },
         [&] { return "waiting for rank " + std::to_string(from) + " to send"; });
    Tensor t = std::move(queue.front());
    queue.pop_front();
    return t;
  }

  /// Records the first failure and wakes every waiting rank.
  void fail(int64_t rank, const std::string &message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failure.empty())
      failure = "rank " + std::to_string(rank) + ": " + message;
    cv.notify_all();
  }

  std::string firstFailure() {
    std::lock_guard<std::mutex> lock(mutex);
    return failure;
  }

private:
  struct Slot {
    std::vector<Tensor> parts;
    std::vector<bool> present;
    int64_t arrived = 0, read = 0;
  };

  static std::string rankList(const std::vector<int64_t> &ranks) {
    std::string s = "{";
    for (size_t i = 0; i < ranks.size(); ++i)
      s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s + "}";
  }

  template <class Ready, class Waiting>
  void wait(std::unique_lock<std::mutex> &lock, int64_t rank, const std::string &what,
            Ready ready, Waiting waiting) {
    auto until = std::chrono::steady_clock::now() + deadline;
    while (!ready()) {
      if (!failure.empty())
        throw Error("in " + what + ": stopped because " + failure);
      if (cv.wait_until(lock, until) == std::cv_status::timeout && !ready() && failure.empty())
        throw Error("in " + what + ": rank " + std::to_string(rank) + " timed out after " +
                    std::to_string(deadline.count()) + " ms " + waiting());
    }
  }

  int64_t numRanks;
  std::chrono::milliseconds deadline;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::map<std::vector<int64_t>, int64_t>> sequence;
  std::map<std::pair<std::vector<int64_t>, int64_t>, Slot> slots;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::deque<Tensor>> channels; // from, to, tag
  std::string failure;
};

class SimulatedTransport : public CollectiveTransport {
public:
  SimulatedTransport(SimulatedMesh &mesh, int64_t rank) : mesh(mesh), myRank(rank) {}
  int64_t rank() const override { return myRank; }
  std::vector<Tensor> exchange(ArrayRef<int64_t> ranks, const Tensor &mine,
                               const std::string &what) override {
    return mesh.exchange(myRank, ranks, mine, what);
  }
  void send(int64_t peer, int64_t tag, const Tensor &value, const std::string &) override {
    mesh.send(myRank, peer, tag, value);
  }
  Tensor recv(int64_t peer, int64_t tag, const std::string &what) override {
    return mesh.recv(peer, myRank, tag, what);
  }

private:
  SimulatedMesh &mesh;
  int64_t myRank;
};

} // namespace

std::vector<std::vector<Tensor>> runSpmd(ArrayRef<func::FuncOp> programs,
                                         const std::vector<std::vector<Tensor>> &args,
                                         std::chrono::milliseconds deadline) {
  if (programs.empty())
    throw Error("runSpmd needs one program per rank");
  MeshAttr mesh = meshOf(programs[0]);
  int64_t ranks = mesh ? mesh.numRanks() : 1;
  if ((int64_t)programs.size() != ranks || (int64_t)args.size() != ranks)
    throw Error("the mesh has " + std::to_string(ranks) + " ranks but " +
                std::to_string(programs.size()) + " programs and " + std::to_string(args.size()) +
                " argument lists were given");
  SimulatedMesh sim(ranks, deadline);
  std::vector<std::vector<Tensor>> results(ranks);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      SimulatedTransport transport(sim, r);
      try {
        results[r] = runFunction(programs[r], args[r], &transport);
      } catch (const std::exception &e) {
        sim.fail(r, e.what());
      }
    });
  for (auto &t : threads)
    t.join();
  std::string failure = sim.firstFailure();
  if (!failure.empty())
    throw Error(failure);
  return results;
}

} // namespace tcc
