//===- Shard.cpp - Sharding propagation and SPMD partitioning -----------------===//
//
// Propagation walks the function once, in program order. Each op's rule (decide() below: one
// case per op kind) looks at its operands' shardings and chooses the result shardings and what
// it needs of each operand: dims an op computes along independently keep their split (batch
// and M/N dims of a matmul, every dim of an elementwise op, the non-reduced dims of a
// reduction); dims it mixes (a slice's cut dim, a gather's axis, a softmax's reduced dim is
// fine but a cumsum's is not) must be whole. Contractions over split dims (matmul's K, a sum
// over a split dim, a convolution's input channels) leave partial sums, which stay pending
// through ops that are linear in them (transpose, reshape, broadcast, slice, further sums and
// contractions) and are reduced where a consumer needs the value itself: by reduce_scatter
// when the consumer wants it split along a dim (ZeRO's gradients), else all_reduce.
// Elementwise ops always reduce pending sums first: a sum of products of partial values is not
// the product of the sums, and reducing once is never more traffic than reducing later.
//
// Partitioning writes one rank's program: ops cloned with local shapes, constants sliced at
// compile time, and between a value and a consumer whose needs differ the collectives of
// reshard(): pending sums reduced, splits the consumer does not want gathered (a split moved
// from one dim to another is one all_to_all), splits it wants and the value lacks cut locally.
// A value resharded to the same target twice is resharded once.
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Shard.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Interp/Kernels.h"
#include "tcc/Passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

namespace tcc {
#define GEN_PASS_DEF_SHARD
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {

namespace {

using Axes = SmallVector<int, 2>;

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

int64_t product(MeshAttr mesh, ArrayRef<int> axes) {
  int64_t n = 1;
  for (int a : axes)
    n *= mesh.getSizes()[a];
  return n;
}

/// Gives dim `d` of `s` the split `axes` if the dim is still whole, no axis is taken yet and
/// the split divides `size`. Returns whether it did.
bool adopt(MeshAttr mesh, DimSharding &s, int64_t d, ArrayRef<int> axes, int64_t size) {
  if (axes.empty() || !s.dims[d].empty() || size % product(mesh, axes) != 0)
    return false;
  for (int a : axes)
    if (s.uses(a))
      return false;
  s.dims[d].assign(axes.begin(), axes.end());
  return true;
}

/// `s` with every split and pending sum removed except the dims listed.
DimSharding onlyDims(const DimSharding &s, ArrayRef<int64_t> keep) {
  DimSharding out = DimSharding::replicated(s.dims.size());
  for (int64_t d : keep)
    out.dims[d] = s.dims[d];
  return out;
}

std::string axesName(MeshAttr mesh, ArrayRef<int> axes) {
  std::string s;
  for (int a : axes)
    s += (s.empty() ? "" : ",") + mesh.getAxes()[a].getValue().str();
  return s;
}

CollectiveRecord collectiveRecord(MeshAttr mesh, StringRef kind, ArrayRef<int> axes,
                                  Value operand, std::string what) {
  int64_t bytes = CoreBuilder::bytesOf(operand);
  int64_t n = product(mesh, axes);
  int64_t wire = kind == "all_reduce" ? 2 * (n - 1) * bytes / n
                 : kind == "all_gather" ? (n - 1) * bytes
                                        : (n - 1) * bytes / n;
  return {kind.str(), axesName(mesh, axes), bytes, wire, std::move(what)};
}

/// On all_reduce ops partition() inserted: the index of their CollectiveRecord (removed again
/// by bucketAllReduces).
constexpr llvm::StringLiteral kRecordAttr = "tcc.collective_record";

/// The rules: one case per op kind. `in` are the operands' current shardings.
class Rules {
public:
  Rules(MeshAttr mesh, const llvm::DenseMap<Value, DimSharding> &hints)
      : mesh(mesh), hints(hints) {}

  ShardingPlan::OpPlan decide(Operation *op, ArrayRef<DimSharding> in, std::string &why) {
    ShardingPlan::OpPlan plan;
    bool known = llvm::TypeSwitch<Operation *, bool>(op)
        .Case<UnaryOp, BinaryOp, CompareOp, SelectOp, CastOp, BitcastOp>([&](Operation *o) {
          elementwise(o, in, plan);
          why = "elementwise: every dim keeps its split";
          return true;
        })
        .Case([&](TransposeOp o) {
          auto perm = o.getPerm();
          DimSharding r = DimSharding::replicated(perm.size());
          for (size_t i = 0; i < perm.size(); ++i)
            r.dims[i] = in[0].dims[perm[i]];
          r.partial = in[0].partial;
          plan.operands = {in[0]};
          plan.results = {r};
          why = "transpose: splits follow their dims";
          return true;
        })
        .Case([&](BroadcastInDimOp o) {
          ArrayRef<int64_t> from = shapeOf(o.getX()), to = shapeOf(o.getResult());
          DimSharding r = DimSharding::replicated(to.size());
          // New dims take the split consumers want first: each rank then materialises only
          // its block, and a conflicting operand split is undone on the small operand (a bias
          // gathered before it is broadcast, not the broadcast moved with an all_to_all).
          auto hint = hints.find(o.getResult());
          if (hint != hints.end())
            for (size_t d = 0; d < to.size(); ++d)
              if (!llvm::is_contained(o.getDims(), (int64_t)d))
                adopt(mesh, r, d, hint->second.dims[d], to[d]);
          SmallVector<int64_t> kept;
          for (auto [i, d] : llvm::enumerate(o.getDims()))
            if (from[i] == to[d] && adopt(mesh, r, d, in[0].dims[i], to[d]))
              kept.push_back(i);
          r.partial = in[0].partial;
          DimSharding need = onlyDims(in[0], kept);
          need.partial = in[0].partial;
          plan.operands = {need};
          plan.results = {r};
          why = "broadcast: kept dims keep their split, new dims are whole";
          return true;
        })
        .Case([&](ReshapeOp o) {
          reshape(o, in[0], plan);
          why = "reshape: a split moves to the result dim starting at the same element offset";
          return true;
        })
        .Case([&](SliceOp o) {
          ArrayRef<int64_t> shape = shapeOf(o.getX());
          SmallVector<int64_t> whole;
          for (size_t d = 0; d < shape.size(); ++d)
            if (o.getStart()[d] == 0 && o.getLimit()[d] == shape[d] && o.getStride()[d] == 1)
              whole.push_back(d);
          DimSharding need = onlyDims(in[0], whole);
          need.partial = in[0].partial;
          plan.operands = {need};
          plan.results = {need};
          why = "slice: cut dims are whole";
          return true;
        })
        .Case([&](ReverseOp o) {
          DimSharding need = in[0];
          for (int64_t d : o.getDims())
            need.dims[d].clear();
          plan.operands = {need};
          plan.results = {need};
          why = "reverse: reversed dims are whole";
          return true;
        })
        .Case([&](ConcatOp o) {
          int64_t rank = shapeOf(o.getResult()).size();
          DimSharding r = DimSharding::replicated(rank);
          ArrayRef<int64_t> shape = shapeOf(o.getResult());
          for (const DimSharding &s : in)
            for (int64_t d = 0; d < rank; ++d)
              if (d != static_cast<int64_t>(o.getAxis()))
                adopt(mesh, r, d, s.dims[d], shape[d]);
          plan.operands.assign(in.size(), r);
          plan.results = {r};
          why = "concat: the axis is whole, other dims share one split";
          return true;
        })
        .Case([&](PadOp o) {
          SmallVector<int64_t> untouched;
          for (size_t d = 0; d < o.getLow().size(); ++d)
            if (o.getLow()[d] == 0 && o.getHigh()[d] == 0)
              untouched.push_back(d);
          DimSharding need = onlyDims(in[0], untouched);
          plan.operands = {need, DimSharding::replicated(0)};
          plan.results = {need};
          why = "pad: padded dims are whole";
          return true;
        })
        .Case([&](ReduceOp o) {
          reduce(o, in[0], plan);
          why = o.getKind() == ReduceKind::Sum
                    ? "sum: split reduced dims leave partial sums"
                    : "max/min: split reduced dims are combined by an all_reduce after it";
          return true;
        })
        .Case([&](ArgReduceOp o) {
          oneDimWhole(in[0], o.getDim(), plan, /*dropDim=*/true);
          why = "arg_reduce: the reduced dim is whole";
          return true;
        })
        .Case([&](CumsumOp o) {
          oneDimWhole(in[0], o.getDim(), plan, false);
          why = "cumsum: the scanned dim is whole";
          return true;
        })
        .Case([&](TopKOp o) {
          oneDimWhole(in[0], o.getDim(), plan, false);
          plan.results.push_back(plan.results[0]);
          why = "topk: the sorted dim is whole";
          return true;
        })
        .Case([&](MatmulOp o) {
          matmul(o, in, plan);
          why = "matmul: batch, M and N dims keep their split; a split K leaves partial sums";
          return true;
        })
        .Case([&](AttentionOp o) {
          attention(o, in, plan);
          why = "attention: batch dims and query rows keep q's split (keys and values follow on "
                "the batch dims); key length and head dims are whole";
          return true;
        })
        .Case([&](AttentionGradOp o) {
          attentionGrad(o, in, plan);
          why = "attention_grad: batch dims keep q's split (keys, values and their gradients "
                "follow); rows, key length and head dims are whole";
          return true;
        })
        .Case([&](ConvOp o) {
          conv(o, in, plan);
          why = "conv: batch and output channels keep their split; split input channels leave "
                "partial sums; spatial dims are whole";
          return true;
        })
        .Case([&](ReduceWindowOp o) {
          SmallVector<int64_t> kept;
          for (size_t d = 0; d < o.getWindow().size(); ++d)
            if (o.getWindow()[d] == 1 && o.getStrides()[d] == 1 && o.getPadLow()[d] == 0 &&
                o.getPadHigh()[d] == 0)
              kept.push_back(d);
          DimSharding need = onlyDims(in[0], kept);
          plan.operands = {need};
          plan.results = {need};
          why = "reduce_window: windowed dims are whole";
          return true;
        })
        .Case([&](GatherOp o) {
          gather(o, in, plan);
          why = "gather: the axis is whole; the indices' splits become the result's";
          return true;
        })
        .Case([&](ScatterNDOp o) {
          if (!scatterAddIntoZeros(o, in, plan))
            return false;
          why = "scatter_nd add into zeros: each rank scatters its split updates, leaving "
                "partial sums (an embedding's gradient under data parallelism)";
          return true;
        })
        .Case<GatherElementsOp, ScatterElementsOp>([&](Operation *o) {
          int64_t axis = cast<IntegerAttr>(o->getAttr("axis")).getInt();
          ArrayRef<int64_t> shape = shapeOf(o->getOperand(1));
          DimSharding r = DimSharding::replicated(shape.size());
          for (const DimSharding &s : in)
            for (size_t d = 0; d < shape.size(); ++d)
              if ((int64_t)d != axis && shapeOf(o->getOperand(0))[d] == shape[d])
                adopt(mesh, r, d, s.dims[d], shape[d]);
          plan.operands.assign(in.size(), r);
          plan.results = {r};
          why = "gather/scatter_elements: the axis is whole, other dims share one split";
          return true;
        })
        .Default([&](Operation *) { return false; });
    if (!known) {
      for (const DimSharding &s : in)
        plan.operands.push_back(DimSharding::replicated(s.dims.size()));
      for (Value r : op->getResults())
        plan.results.push_back(DimSharding::replicated(shapeOf(r).size()));
      why = isa<ConstantOp, IotaOp>(op) ? "a source: whole, cut where consumers need"
                                        : "no sharding rule: operands gathered, results whole";
    }
    return plan;
  }

private:
  /// Whether `axes` (non-empty) are unused in `s` and split `size` evenly.
  bool free(const DimSharding &s, ArrayRef<int> axes, int64_t size) {
    return !axes.empty() && size % product(mesh, axes) == 0 &&
           llvm::none_of(axes, [&](int a) { return s.uses(a); });
  }

  void elementwise(Operation *op, ArrayRef<DimSharding> in, ShardingPlan::OpPlan &plan) {
    ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
    DimSharding r = DimSharding::replicated(shape.size());
    // Sums and differences of values pending the same sums stay pending (a gradient summed
    // over several uses is reduced once, as Megatron reduces the Q, K and V input gradients
    // once); any other elementwise op needs the values themselves.
    auto binary = dyn_cast<BinaryOp>(op);
    auto unary = dyn_cast<UnaryOp>(op);
    bool linear = (binary && (binary.getKind() == BinaryKind::Add ||
                              binary.getKind() == BinaryKind::Sub)) ||
                  (unary && unary.getKind() == UnaryKind::Neg);
    if (linear && !in[0].partial.empty() &&
        llvm::all_of(in, [&](const DimSharding &s) { return s.partial == in[0].partial; }))
      r.partial = in[0].partial;
    for (const DimSharding &s : in)
      for (size_t d = 0; d < shape.size(); ++d)
        adopt(mesh, r, d, s.dims[d], shape[d]);
    // Dims still whole take the split the consumers want (backward propagation): cutting a
    // whole operand is free, and a pending sum is then reduce-scattered, not all-reduced.
    auto hint = hints.find(op->getResult(0));
    if (hint != hints.end())
      for (size_t d = 0; d < shape.size(); ++d)
        adopt(mesh, r, d, hint->second.dims[d], shape[d]);
    plan.operands.assign(in.size(), r);
    plan.results = {r};
  }

  void reshape(ReshapeOp o, const DimSharding &in, ShardingPlan::OpPlan &plan) {
    ArrayRef<int64_t> from = shapeOf(o.getX()), to = shapeOf(o.getResult());
    DimSharding r = DimSharding::replicated(to.size());
    SmallVector<int64_t> kept;
    int64_t before = 1;
    for (size_t d = 0; d < from.size(); before *= from[d], ++d) {
      if (in.dims[d].empty())
        continue;
      // The result dim that starts at the same element offset takes the split when the split
      // divides it: block k of the operand dim is then block k of that result dim.
      int64_t offset = 1;
      for (size_t e = 0; e < to.size(); offset *= to[e], ++e)
        if (offset == before && to[e] != 1) {
          if (adopt(mesh, r, e, in.dims[d], to[e]))
            kept.push_back(d);
          break;
        }
    }
    DimSharding need = onlyDims(in, kept);
    need.partial = r.partial = in.partial;
    plan.operands = {need};
    plan.results = {r};
  }

  void reduce(ReduceOp o, const DimSharding &in, ShardingPlan::OpPlan &plan) {
    ArrayRef<int64_t> dims = o.getDims();
    DimSharding need = in;
    DimSharding r = DimSharding::replicated(0);
    Axes reducedSplits;
    for (size_t d = 0; d < in.dims.size(); ++d) {
      if (!llvm::is_contained(dims, (int64_t)d)) {
        r.dims.push_back(in.dims[d]);
        continue;
      }
      reducedSplits.append(in.dims[d].begin(), in.dims[d].end());
    }
    switch (o.getKind()) {
    case ReduceKind::Sum:
      r.partial = in.partial;
      r.partial.append(reducedSplits.begin(), reducedSplits.end());
      break;
    case ReduceKind::Max:
    case ReduceKind::Min:
      need.partial.clear();
      plan.reduceAfter = reducedSplits;
      plan.afterKind = o.getKind() == ReduceKind::Max ? CollectiveReduceKind::Max
                                                      : CollectiveReduceKind::Min;
      break;
    case ReduceKind::Prod:
      need.partial.clear();
      for (int64_t d : dims)
        need.dims[d].clear();
      break;
    }
    plan.operands = {need};
    plan.results = {r};
  }

  void oneDimWhole(const DimSharding &in, int64_t dim, ShardingPlan::OpPlan &plan, bool dropDim) {
    DimSharding need = in;
    need.partial.clear();
    need.dims[dim].clear();
    DimSharding r = need;
    if (dropDim)
      r.dims.erase(r.dims.begin() + dim);
    plan.operands = {need};
    plan.results = {r};
  }

  /// Rows of the scores are independent: q's batch dims and query rows may stay split. Keys
  /// and values must then be split the same way on the batch dims (a grouped-query head dim
  /// too: contiguous blocks of query heads read contiguous blocks of key/value heads when both
  /// counts divide), and be whole along the keys. A mask or bias follows the scores' split
  /// where it is not broadcast. Nothing may stay a pending sum (softmax is not linear).
  void attention(AttentionOp o, ArrayRef<DimSharding> in, ShardingPlan::OpPlan &plan) {
    ArrayRef<int64_t> q = shapeOf(o.getQ()), k = shapeOf(o.getK());
    int64_t rank = q.size();
    DimSharding r = DimSharding::replicated(rank);
    for (int64_t d = 0; d < rank - 1; ++d) {
      const Axes &axes = in[0].dims[d];
      if (d < rank - 2 && !axes.empty() && k[d] % product(mesh, axes) != 0)
        continue; // keys/values cannot follow this split: the dim is whole
      adopt(mesh, r, d, axes, q[d]);
    }
    DimSharding needQ = DimSharding::replicated(rank), needKV = DimSharding::replicated(rank);
    for (int64_t d = 0; d < rank - 2; ++d)
      needQ.dims[d] = needKV.dims[d] = r.dims[d];
    needQ.dims[rank - 2] = r.dims[rank - 2];
    plan.operands = {needQ, needKV, needKV};
    for (Value extra : {o.getMask(), o.getBias()}) {
      if (!extra)
        continue;
      ArrayRef<int64_t> shape = shapeOf(extra);
      DimSharding need = DimSharding::replicated(rank);
      for (int64_t d = 0; d < rank - 1; ++d)
        if (shape[d] != 1)
          need.dims[d] = r.dims[d];
      plan.operands.push_back(need);
    }
    plan.results = {r};
  }

  /// The gradient splits only the batch dims that attention could keep split, and only those:
  /// the key/value gradients sum over query rows, so split rows would leave them pending.
  void attentionGrad(AttentionGradOp o, ArrayRef<DimSharding> in, ShardingPlan::OpPlan &plan) {
    ArrayRef<int64_t> q = shapeOf(o.getQ()), k = shapeOf(o.getK());
    int64_t rank = q.size();
    DimSharding batch = DimSharding::replicated(rank);
    for (int64_t d = 0; d < rank - 2; ++d) {
      const Axes &axes = in[0].dims[d];
      if (!axes.empty() && k[d] % product(mesh, axes) == 0)
        adopt(mesh, batch, d, axes, q[d]);
    }
    plan.operands.assign(5, batch); // q, k, v, output, grad
    for (Value extra : {o.getMask(), o.getBias()}) {
      if (!extra)
        continue;
      ArrayRef<int64_t> shape = shapeOf(extra);
      DimSharding need = DimSharding::replicated(rank);
      for (int64_t d = 0; d < rank - 2; ++d)
        if (shape[d] != 1)
          need.dims[d] = batch.dims[d];
      plan.operands.push_back(need);
    }
    plan.results.assign(3, batch);
  }

  void matmul(MatmulOp o, ArrayRef<DimSharding> in, ShardingPlan::OpPlan &plan) {
    const DimSharding &lhs = in[0], &rhs = in[1];
    ArrayRef<int64_t> out = shapeOf(o.getResult());
    int64_t rank = out.size(), m = rank - 2, n = rank - 1;
    int64_t k = shapeOf(o.getLhs()).back();
    DimSharding r = DimSharding::replicated(rank);
    // A product is linear in each operand: one pending sum may stay pending, unless the other
    // operand is split over the same axes (a partial embedding output meeting a column-split
    // head): then the sum is reduced first rather than the split undone and the (larger)
    // product reduced after.
    auto conflicts = [&](const DimSharding &partialSide, const DimSharding &other) {
      return llvm::any_of(partialSide.partial, [&](int a) {
        return llvm::any_of(other.dims, [&](const Axes &d) { return llvm::is_contained(d, a); });
      });
    };
    bool lhsPartial = !lhs.partial.empty() && !conflicts(lhs, rhs);
    bool rhsPartial = !rhs.partial.empty() && !lhsPartial && !conflicts(rhs, lhs);
    r.partial = lhsPartial ? lhs.partial : rhsPartial ? rhs.partial : Axes{};
    for (int64_t b = 0; b < m; ++b) {
      adopt(mesh, r, b, lhs.dims[b], out[b]);
      adopt(mesh, r, b, rhs.dims[b], out[b]);
    }
    adopt(mesh, r, m, lhs.dims[m], out[m]);
    adopt(mesh, r, n, rhs.dims[n], out[n]); // rhs is [.., K, N]
    // K: the lhs's split if its axes are still free, else the rhs's.
    Axes kAxes = free(r, lhs.dims[n], k) ? lhs.dims[n] : free(r, rhs.dims[m], k) ? rhs.dims[m] : Axes{};
    DimSharding needL = DimSharding::replicated(rank), needR = DimSharding::replicated(rank);
    for (int64_t b = 0; b < m; ++b)
      needL.dims[b] = needR.dims[b] = r.dims[b];
    needL.dims[m] = r.dims[m];
    needL.dims[n] = kAxes;
    needR.dims[m] = kAxes;
    needR.dims[n] = r.dims[n];
    if (lhsPartial)
      needL.partial = lhs.partial;
    if (rhsPartial)
      needR.partial = rhs.partial;
    r.partial.append(kAxes.begin(), kAxes.end());
    plan.operands = {needL, needR};
    plan.results = {r};
  }

  void conv(ConvOp o, ArrayRef<DimSharding> in, ShardingPlan::OpPlan &plan) {
    ArrayRef<int64_t> out = shapeOf(o.getResult());
    int64_t rank = out.size();
    DimSharding r = DimSharding::replicated(rank);
    bool lhsPartial = !in[0].partial.empty(), rhsPartial = !in[1].partial.empty() && !lhsPartial;
    r.partial = lhsPartial ? in[0].partial : rhsPartial ? in[1].partial : Axes{};
    adopt(mesh, r, 0, in[0].dims[0], out[0]);
    bool grouped = o.getGroups() != 1;
    if (!grouped)
      adopt(mesh, r, 1, in[1].dims[0], out[1]);
    int64_t c = shapeOf(o.getWeight())[1];
    Axes cAxes = grouped                      ? Axes{}
                 : free(r, in[0].dims[1], c) ? in[0].dims[1]
                 : free(r, in[1].dims[1], c) ? in[1].dims[1]
                                             : Axes{};
    DimSharding needIn = DimSharding::replicated(rank), needW = DimSharding::replicated(rank);
    needIn.dims[0] = r.dims[0];
    needIn.dims[1] = cAxes;
    needW.dims[0] = r.dims[1];
    needW.dims[1] = cAxes;
    if (lhsPartial)
      needIn.partial = in[0].partial;
    if (rhsPartial)
      needW.partial = in[1].partial;
    r.partial.append(cAxes.begin(), cAxes.end());
    plan.operands = {needIn, needW};
    plan.results = {r};
  }

  /// scatter_nd with an add reduction into a zero constant, with updates split only along the
  /// index batch dims (shared with the indices): the sum of every rank's scatter is the whole
  /// scatter, so the result is a pending sum over those axes.
  bool scatterAddIntoZeros(ScatterNDOp o, ArrayRef<DimSharding> in, ShardingPlan::OpPlan &plan) {
    auto zeros = o.getX().getDefiningOp<ConstantOp>();
    auto dense = zeros ? dyn_cast<DenseElementsAttr>(zeros.getValue()) : DenseElementsAttr();
    if (o.getReduction() != ScatterReduction::Add || !dense || !dense.isSplat() ||
        !isa<FloatType>(dense.getElementType()) ||
        !dense.getSplatValue<APFloat>().isZero() || !in[1].partial.empty() ||
        !in[2].partial.empty())
      return false;
    ArrayRef<int64_t> idx = shapeOf(o.getIndices()), upd = shapeOf(o.getUpdates());
    int64_t batch = idx.size() - 1;
    DimSharding needI = DimSharding::replicated(idx.size());
    for (int64_t d = 0; d < batch; ++d) {
      adopt(mesh, needI, d, in[2].dims[d], idx[d]);
      adopt(mesh, needI, d, in[1].dims[d], idx[d]);
    }
    DimSharding needU = DimSharding::replicated(upd.size());
    Axes split;
    for (int64_t d = 0; d < batch; ++d) {
      needU.dims[d] = needI.dims[d];
      split.append(needI.dims[d].begin(), needI.dims[d].end());
    }
    if (split.empty())
      return false;
    DimSharding r = DimSharding::replicated(shapeOf(o.getResult()).size());
    r.partial = split;
    plan.operands = {DimSharding::replicated(shapeOf(o.getX()).size()), needI, needU};
    plan.results = {r};
    return true;
  }

  void gather(GatherOp o, ArrayRef<DimSharding> in, ShardingPlan::OpPlan &plan) {
    int64_t axis = o.getAxis();
    ArrayRef<int64_t> out = shapeOf(o.getResult());
    int64_t idxRank = shapeOf(o.getIndices()).size();
    DimSharding r = DimSharding::replicated(out.size());
    r.partial = in[0].partial;
    DimSharding needX = in[0];
    // A table split along the gathered axis (a vocabulary-parallel embedding) stays split:
    // each rank looks up the indices in its rows, zeros elsewhere, and the result is the sum
    // over the split axes (partition() writes the masked lookup).
    // Not over axes that split the indices: the lookups of a rank's own indices need every
    // row there (a ZeRO-3 table is gathered before use, as any parameter).
    Axes tableSplit;
    if (in[0].partial.empty())
      for (int a : in[0].dims[axis])
        if (!in[1].uses(a))
          tableSplit.push_back(a);
    if (tableSplit.size() != in[0].dims[axis].size())
      tableSplit.clear();
    needX.dims[axis] = tableSplit;
    for (int a : tableSplit)
      r.partial.push_back(a);
    DimSharding needI = DimSharding::replicated(idxRank);
    for (int64_t d = 0; d < axis; ++d)
      adopt(mesh, r, d, needX.dims[d], out[d]);
    for (int64_t d = axis + 1; d < (int64_t)needX.dims.size(); ++d)
      adopt(mesh, r, d - 1 + idxRank, needX.dims[d], out[d - 1 + idxRank]);
    for (int64_t d = 0; d < idxRank; ++d)
      if (adopt(mesh, r, axis + d, in[1].dims[d], out[axis + d]))
        needI.dims[d] = r.dims[axis + d];
    // x keeps only the splits the result took (and its table split).
    for (int64_t d = 0; d < (int64_t)needX.dims.size(); ++d)
      if (d != axis)
        needX.dims[d] = r.dims[d < axis ? d : d - 1 + idxRank];
    plan.operands = {needX, needI};
    plan.results = {r};
  }

  MeshAttr mesh;
  const llvm::DenseMap<Value, DimSharding> &hints;
};

/// Backward propagation: the splits consumers want, from the function's results back through
/// elementwise ops, transposes and broadcasts. Only splits (not pending sums) are hinted.
llvm::DenseMap<Value, DimSharding> consumerHints(func::FuncOp func, MeshAttr mesh,
                                                 ArrayRef<DimSharding> resultNeeds) {
  llvm::DenseMap<Value, DimSharding> hints;
  auto hintInto = [&](Value v, const DimSharding &want) {
    ArrayRef<int64_t> shape = shapeOf(v);
    auto [it, inserted] = hints.try_emplace(v, DimSharding::replicated(shape.size()));
    for (size_t d = 0; d < shape.size(); ++d)
      adopt(mesh, it->second, d, want.dims[d], shape[d]);
  };
  Block &body = func.getBody().front();
  for (auto [v, need] : llvm::zip(body.getTerminator()->getOperands(), resultNeeds))
    hintInto(v, need);
  for (Operation &op : llvm::reverse(body)) {
    if (op.getNumResults() != 1)
      continue;
    auto it = hints.find(op.getResult(0));
    if (it == hints.end())
      continue;
    DimSharding want = it->second;
    if (isa<UnaryOp, BinaryOp, SelectOp, CompareOp, CastOp, BitcastOp>(op)) {
      for (Value v : op.getOperands())
        hintInto(v, want);
    } else if (auto t = dyn_cast<TransposeOp>(op)) {
      DimSharding back = DimSharding::replicated(want.dims.size());
      for (auto [i, p] : llvm::enumerate(t.getPerm()))
        back.dims[p] = want.dims[i];
      hintInto(t.getX(), back);
    } else if (auto b = dyn_cast<BroadcastInDimOp>(op)) {
      DimSharding back = DimSharding::replicated(shapeOf(b.getX()).size());
      for (auto [i, d] : llvm::enumerate(b.getDims()))
        if (shapeOf(b.getX())[i] == shapeOf(b.getResult())[d])
          back.dims[i] = want.dims[d];
      hintInto(b.getX(), back);
    }
  }
  return hints;
}

} // namespace

FailureOr<ShardingPlan> ShardingPlan::build(func::FuncOp func, ShardingReport *report) {
  ShardingPlan plan;
  plan.func_ = func;
  plan.mesh_ = meshOf(func);
  if (!plan.mesh_)
    return func.emitError("sharding needs a module with a '") << TccDialect::kMeshAttrName << "'";
  MeshAttr mesh = plan.mesh_;
  auto annotated = [&](Attribute attr, Type type, DimSharding &out) -> LogicalResult {
    auto shape = cast<RankedTensorType>(type).getShape();
    out = DimSharding::replicated(shape.size());
    if (!attr)
      return success();
    std::string error;
    auto s = DimSharding::fromAttr(cast<ShardingAttr>(attr), mesh, shape, error);
    if (failed(s))
      return func.emitError(error);
    out = *s;
    return success();
  };
  for (BlockArgument arg : func.getArguments()) {
    DimSharding s;
    if (failed(annotated(func.getArgAttr(arg.getArgNumber(), TccDialect::kShardingAttrName),
                         arg.getType(), s)))
      return failure();
    plan.values_[arg] = s;
  }
  for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
    DimSharding s;
    if (failed(annotated(func.getResultAttr(i, TccDialect::kShardingAttrName), type, s)))
      return failure();
    plan.resultNeeds_.push_back(s);
  }
  llvm::DenseMap<Value, DimSharding> hints = consumerHints(func, mesh, plan.resultNeeds_);
  Rules rules(mesh, hints);
  for (Operation &op : func.getBody().front()) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    if (isCollective(&op) || isa<AxisIndexOp>(op))
      return op.emitOpError("is already a per-rank op: sharding takes a program of the whole "
                            "mesh, without collectives");
    SmallVector<DimSharding> in;
    for (Value v : op.getOperands())
      in.push_back(plan.values_.lookup(v));
    std::string why;
    OpPlan decided = rules.decide(&op, in, why);
    for (auto [r, s] : llvm::zip(op.getResults(), decided.results))
      plan.values_[r] = s;
    if (report) {
      std::string line;
      llvm::raw_string_ostream os(line);
      os << op.getName() << " at " << op.getLoc() << ": ";
      llvm::interleaveComma(decided.operands, os, [&](const DimSharding &s) { os << s.str(mesh); });
      os << " -> ";
      llvm::interleaveComma(decided.results, os, [&](const DimSharding &s) { os << s.str(mesh); });
      if (!decided.reduceAfter.empty())
        os << " then all_reduce " << stringifyCollectiveReduceKind(decided.afterKind) << " over "
           << axesName(mesh, decided.reduceAfter);
      os << " (" << why << ")";
      report->decisions.push_back(line);
    }
    plan.ops_[&op] = std::move(decided);
  }
  return plan;
}

//===--- Partitioning ----------------------------------------------------------===//

namespace {

/// Emits one rank's ops: local types, resharding between shardings.
class Partitioner {
public:
  Partitioner(MeshAttr mesh, int64_t rank, OpBuilder &b, ShardingReport *report,
              const IRMapping &local, const llvm::DenseMap<Value, DimSharding> &shardings)
      : mesh(mesh), rank(rank), b(b), report(report), localValues(local), shardings(shardings) {}

  /// `global` in sharding `to` on this rank, from its local value.
  Value reshard(Value global, const DimSharding &to, Operation *user) {
    return reshard(global, localValues.lookup(global), shardings.find(global)->second, to, user);
  }

  RankedTensorType localType(Value global, const DimSharding &s) {
    auto t = cast<RankedTensorType>(global.getType());
    return RankedTensorType::get(s.localShape(mesh, t.getShape()), t.getElementType());
  }

  /// The local value of `global` (held as `local` with sharding `from`) in sharding `to`.
  Value reshard(Value global, Value local, const DimSharding &from, const DimSharding &to,
                Operation *user) {
    if (from == to)
      return local;
    auto key = std::make_pair(global.getAsOpaquePointer(), to.str(mesh));
    // A resharded value is reused by later consumers, except a gathered parameter (a function
    // argument) far from where it was gathered: as FSDP does, it is gathered again (for the
    // backward pass) rather than kept whole in between, so a ZeRO-3 rank holds about one
    // gathered layer at a time.
    auto cached = cache.find(key);
    if (cached != cache.end() &&
        (!isa<BlockArgument>(global) || !cacheUser.count(key) ||
         userIndex(user) - cacheUser[key] <= kRegatherDistance))
      return cached->second;
    cacheUser[key] = userIndex(user);
    ArrayRef<int64_t> shape = shapeOf(global);
    Location loc = user->getLoc();
    // A broadcast is recomputed in the target sharding from its (smaller) operand rather than
    // its result moved: a bias is gathered before it is broadcast, never after.
    if (auto bc = global.getDefiningOp<BroadcastInDimOp>();
        bc && from.partial.empty() && to.partial.empty() && localValues.contains(bc.getX())) {
      ArrayRef<int64_t> xShape = shapeOf(bc.getX());
      DimSharding xTo = DimSharding::replicated(xShape.size());
      for (auto [i, d] : llvm::enumerate(bc.getDims()))
        if (xShape[i] == shape[d])
          xTo.dims[i] = to.dims[d];
      Value x = reshard(bc.getX(), xTo, user);
      Value v = b.create<BroadcastInDimOp>(loc, localType(global, to), x, bc.getDims());
      cache[key] = v;
      return v;
    }
    // A transpose of a broadcast: the same, transposed.
    if (auto t = global.getDefiningOp<TransposeOp>();
        t && from.partial.empty() && to.partial.empty() && t.getX().getDefiningOp<BroadcastInDimOp>() &&
        localValues.contains(t.getX())) {
      DimSharding xTo = DimSharding::replicated(to.dims.size());
      for (auto [i, p] : llvm::enumerate(t.getPerm()))
        xTo.dims[p] = to.dims[i];
      Value x = reshard(t.getX(), xTo, user);
      Value v = b.create<TransposeOp>(loc, localType(global, to), x, t.getPerm());
      cache[key] = v;
      return v;
    }
    DimSharding cur = from;
    Value v = local;
    std::string what = describe(global, user);
    auto record = [&](StringRef kind, ArrayRef<int> axes, Value operand) {
      if (report)
        report->collectives.push_back(collectiveRecord(mesh, kind, axes, operand, what));
    };
    auto names = [&](ArrayRef<int> axes) {
      SmallVector<StringRef> n;
      for (int a : axes)
        n.push_back(mesh.getAxes()[a].getValue());
      return b.getStrArrayAttr(n);
    };
    auto typeFor = [&](const DimSharding &s) { return localType(global, s); };

    // 1. Pending sums the target does not keep: reduce_scatter into a dim the target splits
    //    further by exactly those axes, else all_reduce.
    Axes pending;
    for (int a : cur.partial)
      if (!llvm::is_contained(to.partial, a))
        pending.push_back(a);
    for (int a : to.partial)
      if (!llvm::is_contained(cur.partial, a))
        throw Error("internal: sharding asks for a pending sum the value does not have (" +
                    what + ")");
    if (!pending.empty()) {
      // Reductions run as soon as the value exists (gradients are reduced while the backward
      // pass goes on, and buckets can form); gathers and cuts below run where the consumer is
      // (a ZeRO-3 parameter is gathered just before its use, not at the start).
      OpBuilder::InsertionGuard guard(b);
      if (Operation *def = local.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(cast<BlockArgument>(local).getOwner());
      DimSharding reducedKey = cur;
      for (size_t d = 0; d < shape.size(); ++d)
        reducedKey.dims[d] = to.dims[d];
      auto reducedIt = reducedCache.find({global.getAsOpaquePointer(), reducedKey.str(mesh)});
      if (reducedIt != reducedCache.end()) {
        v = reducedIt->second.first;
        cur = reducedIt->second.second;
        pending.clear();
      }
      for (size_t d = 0; d < shape.size() && !pending.empty(); ++d) {
        const Axes &have = cur.dims[d], &want = to.dims[d];
        if (want.size() <= have.size() || !std::equal(have.begin(), have.end(), want.begin()))
          continue;
        // The pending axes that come next in the wanted split (the rest is cut below).
        Axes extra;
        for (size_t i = have.size(); i < want.size() && llvm::is_contained(pending, want[i]); ++i)
          extra.push_back(want[i]);
        if (extra.empty())
          continue;
        DimSharding next = cur;
        next.dims[d].append(extra.begin(), extra.end());
        llvm::erase_if(next.partial, [&](int a) { return llvm::is_contained(extra, a); });
        llvm::erase_if(pending, [&](int a) { return llvm::is_contained(extra, a); });
        record("reduce_scatter", extra, v);
        v = b.create<ReduceScatterOp>(loc, typeFor(next), CollectiveReduceKind::Sum, v,
                                      (int64_t)d, names(extra));
        cur = next;
      }
      if (!pending.empty()) {
        record("all_reduce", pending, v);
        v = b.create<AllReduceOp>(loc, v.getType(), CollectiveReduceKind::Sum, v, names(pending));
        if (report) // which record, for bucketAllReduces
          v.getDefiningOp()->setAttr(kRecordAttr,
                                     b.getI64IntegerAttr(report->collectives.size() - 1));
        llvm::erase_if(cur.partial, [&](int a) { return llvm::is_contained(pending, a); });
      }
      reducedCache[{global.getAsOpaquePointer(), reducedKey.str(mesh)}] = {v, cur};
    }
    // 2. Splits the target lacks. A split that only moves to another dim is one all_to_all;
    //    others are gathered.
    for (size_t d = 0; d < shape.size(); ++d) {
      size_t common = 0;
      while (common < cur.dims[d].size() && common < to.dims[d].size() &&
             cur.dims[d][common] == to.dims[d][common])
        ++common;
      if (common == cur.dims[d].size())
        continue;
      Axes extra(cur.dims[d].begin() + common, cur.dims[d].end());
      DimSharding next = cur;
      next.dims[d].resize(common);
      // Move: a dim e whose target is its current split followed by exactly `extra`.
      int64_t moveTo = -1;
      for (size_t e = 0; e < shape.size(); ++e) {
        const Axes &have = cur.dims[e], &want = to.dims[e];
        if (e != d && want.size() == have.size() + extra.size() &&
            std::equal(have.begin(), have.end(), want.begin()) &&
            std::equal(extra.begin(), extra.end(), want.begin() + have.size()))
          moveTo = e;
      }
      if (moveTo >= 0) {
        next.dims[moveTo] = to.dims[moveTo];
        record("all_to_all", extra, v);
        v = b.create<AllToAllOp>(loc, typeFor(next), v, moveTo, (int64_t)d, names(extra));
      } else {
        record("all_gather", extra, v);
        v = b.create<AllGatherOp>(loc, typeFor(next), v, (int64_t)d, names(extra));
      }
      cur = next;
    }
    // 3. Splits the target adds: this rank's block, cut locally (constants at compile time).
    for (size_t d = 0; d < shape.size(); ++d) {
      if (cur.dims[d] == to.dims[d])
        continue;
      DimSharding next = cur;
      next.dims[d] = to.dims[d];
      ArrayRef<int64_t> localNow = cast<RankedTensorType>(v.getType()).getShape();
      SmallVector<int64_t> start(localNow.size(), 0), limit(localNow), stride(localNow.size(), 1);
      start[d] = next.blockOffset(mesh, shape, d, rank) - cur.blockOffset(mesh, shape, d, rank);
      limit[d] = start[d] + shape[d] / next.splits(mesh, d);
      v = sliceOf(v, start, limit, stride, typeFor(next), loc);
      cur = next;
    }
    if (cur != to)
      throw Error("internal: resharding " + what + " from " + from.str(mesh) + " to " +
                  to.str(mesh) + " ended at " + cur.str(mesh));
    cache[key] = v;
    return v;
  }

private:
  /// A static slice; of a constant it is computed now.
  Value sliceOf(Value v, ArrayRef<int64_t> start, ArrayRef<int64_t> limit, ArrayRef<int64_t> stride,
                RankedTensorType type, Location loc) {
    if (auto c = v.getDefiningOp<ConstantOp>()) {
      auto dense = cast<DenseElementsAttr>(c.getValue());
      if (dense.isSplat())
        return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, dense.getSplatValue<Attribute>()));
      Tensor t = kernels::slice(tensorFromAttr(dense), std::vector<int64_t>(start.begin(), start.end()),
                                std::vector<int64_t>(limit.begin(), limit.end()),
                                std::vector<int64_t>(stride.begin(), stride.end()));
      return b.create<ConstantOp>(loc, attrFromTensor(b.getContext(), t));
    }
    return b.create<SliceOp>(loc, type, v, start, limit, stride);
  }

  std::string describe(Value global, Operation *user) {
    std::string s;
    llvm::raw_string_ostream os(s);
    if (auto arg = dyn_cast<BlockArgument>(global))
      os << "argument " << arg.getArgNumber();
    else
      os << "'" << global.getDefiningOp()->getName() << "' result at " << global.getLoc();
    os << " for '" << user->getName() << "' at " << user->getLoc();
    return s;
  }

  MeshAttr mesh;
  int64_t rank;
  OpBuilder &b;
  ShardingReport *report;
  const IRMapping &localValues;
  const llvm::DenseMap<Value, DimSharding> &shardings;
  std::map<std::pair<void *, std::string>, Value> cache;
  /// For gathered arguments: the position (in the original function) of the op that made the
  /// cached value; more than kRegatherDistance ops later it is gathered again.
  static constexpr int64_t kRegatherDistance = 64;
  std::map<std::pair<void *, std::string>, int64_t> cacheUser;
  llvm::DenseMap<Operation *, int64_t> positions;
  int64_t userIndex(Operation *user) {
    if (positions.empty())
      for (auto [i, op] : llvm::enumerate(*user->getBlock()))
        positions[&op] = i;
    return positions.lookup(user);
  }
  /// Reductions of a value's pending sums, by the split its consumer wanted: the reduced value
  /// and its sharding.
  std::map<std::pair<void *, std::string>, std::pair<Value, DimSharding>> reducedCache;
};

} // namespace

namespace {

/// A gather from this rank's rows of a table split along the gathered axis: indices outside
/// them look up row 0 and are zeroed, so the sum over the split axes is the whole lookup.
/// Returns the op whose result replaces the gather's.
Operation *maskedLookup(OpBuilder &b, GatherOp g, const DimSharding &table, Value x, Value idx,
                        int64_t rank, MeshAttr mesh, RankedTensorType resultType) {
  Location loc = g.getLoc();
  CoreBuilder cb(b, loc);
  int64_t axis = g.getAxis();
  ArrayRef<int64_t> whole = shapeOf(g.getX());
  int64_t offset = table.blockOffset(mesh, whole, axis, rank);
  int64_t rows = whole[axis] / table.splits(mesh, axis);
  Value local = cb.sub(idx, cb.scalarLike(idx, (double)offset));
  Value inside = cb.builder().create<BinaryOp>(
      loc, BinaryKind::And, cb.compare(CompareKind::Ge, local, cb.scalarLike(local, 0.0)),
      cb.compare(CompareKind::Lt, local, cb.scalarLike(local, (double)rows)));
  Value safe = cb.select(inside, local, cb.scalarLike(local, 0.0));
  Value looked = cb.builder().create<GatherOp>(loc, resultType, x, safe, axis);
  // The mask broadcast over the result: index dims sit at axis .. axis + rank(idx).
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < CoreBuilder::rankOf(idx); ++d)
    dims.push_back(axis + d);
  Value mask = cb.builder().create<BroadcastInDimOp>(
      loc, RankedTensorType::get(resultType.getShape(), b.getI1Type()), inside, dims);
  return cb.builder().create<SelectOp>(loc, resultType, mask, looked,
                                       cb.splat(resultType, 0.0));
}

} // namespace

func::FuncOp ShardingPlan::partition(int64_t rank, StringRef name, ShardingReport *report) const {
  if (report)
    report->collectives.clear();
  func::FuncOp func_ = this->func_; // MLIR op handles are not const-correct
  OpBuilder b(func_);
  b.setInsertionPointAfter(func_);
  IRMapping local;
  Partitioner p(mesh_, rank, b, report, local, values_);
  SmallVector<Type> argTypes, resultTypes;
  for (BlockArgument arg : func_.getArguments())
    argTypes.push_back(p.localType(arg, values_.find(arg)->second));
  Operation *ret = func_.getBody().front().getTerminator();
  for (auto [v, need] : llvm::zip(ret->getOperands(), resultNeeds_))
    resultTypes.push_back(p.localType(v, need));
  auto fn = b.create<func::FuncOp>(func_.getLoc(), name, b.getFunctionType(argTypes, resultTypes));
  // Argument and result attributes other than the shardings carry over.
  for (unsigned i = 0; i < func_.getNumArguments(); ++i)
    for (NamedAttribute a : mlir::function_interface_impl::getArgAttrs(func_, i))
      if (a.getName() != TccDialect::kShardingAttrName)
        fn.setArgAttr(i, a.getName(), a.getValue());
  Block *block = fn.addEntryBlock();
  b.setInsertionPointToStart(block);
  for (auto [g, l] : llvm::zip(func_.getArguments(), block->getArguments()))
    local.map(g, l);
  auto operandIn = [&](Value g, const DimSharding &need, Operation *user) {
    return p.reshard(g, need, user);
  };
  for (Operation &op : func_.getBody().front()) {
    if (&op == ret) {
      SmallVector<Value> outs;
      for (auto [v, need] : llvm::zip(op.getOperands(), resultNeeds_))
        outs.push_back(operandIn(v, need, &op));
      b.create<func::ReturnOp>(op.getLoc(), outs);
      break;
    }
    const OpPlan &plan = ops_.find(&op)->second;
    IRMapping operands;
    for (auto [v, need] : llvm::zip(op.getOperands(), plan.operands))
      operands.map(v, operandIn(v, need, &op));
    // Values defined above used inside regions (tcc.if, tcc.loop) are whole.
    op.walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        if (!op.isAncestor(v.getParentBlock()->getParentOp()) && !operands.contains(v))
          operands.map(v, operandIn(v, DimSharding::replicated(shapeOf(v).size()), &op));
    });
    Operation *clone = nullptr;
    if (auto g = dyn_cast<GatherOp>(op); g && !plan.operands[0].dims[g.getAxis()].empty())
      clone = maskedLookup(b, g, plan.operands[0], operands.lookup(g.getX()),
                           operands.lookup(g.getIndices()), rank, mesh_,
                           p.localType(g.getResult(), values_.find(g.getResult())->second));
    else
      clone = b.clone(op, operands);
    for (auto [g, r] : llvm::zip(op.getResults(), clone->getResults())) {
      DimSharding s = values_.find(g)->second;
      r.setType(p.localType(g, s));
    }
    if (auto slice = dyn_cast<SliceOp>(clone)) {
      // Whole dims of a split operand: the limit is the local size.
      SmallVector<int64_t> limit(slice.getLimit());
      ArrayRef<int64_t> localShape = shapeOf(slice.getX());
      for (size_t d = 0; d < limit.size(); ++d)
        if (limit[d] > localShape[d])
          limit[d] = localShape[d];
      slice.setLimit(limit);
    }
    Value result = clone->getNumResults() ? clone->getResult(0) : Value();
    if (!plan.reduceAfter.empty()) {
      SmallVector<StringRef> names;
      for (int a : plan.reduceAfter)
        names.push_back(mesh_.getAxes()[a].getValue());
      if (report)
        report->collectives.push_back(
            collectiveRecord(mesh_, "all_reduce", plan.reduceAfter, result,
                             "'" + op.getName().getStringRef().str() + "' result"));
      result = b.create<AllReduceOp>(op.getLoc(), result.getType(), plan.afterKind, result,
                                     b.getStrArrayAttr(names));
    }
    for (auto [g, r] : llvm::zip(op.getResults(), clone->getResults()))
      local.map(g, g == op.getResult(0) && result ? result : r);
  }
  // Whole copies of constants every consumer took a slice of.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*block)))
    if (isOpTriviallyDead(&op))
      op.erase();
  bucketAllReduces(fn, bucketBytes, report);
  return fn;
}

void bucketAllReduces(func::FuncOp fn, int64_t capBytes, ShardingReport *report) {
  Block &block = fn.getBody().front();
  auto bytesOf = [](AllReduceOp op) { return CoreBuilder::bytesOf(op.getResult()); };
  // The first op (in program order) using any result of `ops`.
  auto firstUse = [&](ArrayRef<AllReduceOp> ops) -> Operation * {
    Operation *first = nullptr;
    for (AllReduceOp op : ops)
      for (Operation *user : op->getUsers()) {
        Operation *top = block.findAncestorOpInBlock(*user);
        if (top && (!first || top->isBeforeInBlock(first)))
          first = top;
      }
    return first;
  };
  SmallVector<SmallVector<AllReduceOp>> buckets;
  SmallVector<AllReduceOp> current;
  int64_t currentBytes = 0;
  auto close = [&] {
    if (current.size() > 1)
      buckets.push_back(current);
    current.clear();
    currentBytes = 0;
  };
  for (Operation &op : block) {
    auto ar = dyn_cast<AllReduceOp>(op);
    if (!ar || ar.getKind() != CollectiveReduceKind::Sum)
      continue;
    if (!current.empty()) {
      AllReduceOp head = current.front();
      Operation *use = firstUse(current);
      bool fits = ar.getAxes() == head.getAxes() &&
                  ar.getType().getElementType() == head.getType().getElementType() &&
                  currentBytes + bytesOf(ar) <= capBytes && (!use || ar->isBeforeInBlock(use));
      if (!fits)
        close();
    }
    current.push_back(ar);
    currentBytes += bytesOf(ar);
  }
  close();
  std::vector<CollectiveRecord> merged;
  std::set<int64_t> replaced;
  for (auto &bucket : buckets) {
    // One flat all_reduce where the bucket's last member was: every member's operand is ready
    // there, and no member's result is used before it.
    AllReduceOp last = bucket.back();
    OpBuilder b(last);
    Location loc = last.getLoc();
    SmallVector<Value> flat;
    int64_t total = 0;
    for (AllReduceOp op : bucket) {
      int64_t n = op.getType().getNumElements();
      flat.push_back(b.create<ReshapeOp>(loc, RankedTensorType::get({n}, op.getType().getElementType()),
                                         op.getX()));
      total += n;
    }
    auto flatType = RankedTensorType::get({total}, last.getType().getElementType());
    Value joined = b.create<ConcatOp>(loc, flatType, flat, b.getI64IntegerAttr(0));
    auto reduced = b.create<AllReduceOp>(loc, flatType, CollectiveReduceKind::Sum, joined,
                                         last.getAxes());
    int64_t offset = 0;
    CollectiveRecord record;
    for (AllReduceOp op : bucket) {
      int64_t n = op.getType().getNumElements();
      Value part = b.create<SliceOp>(loc, RankedTensorType::get({n}, op.getType().getElementType()),
                                     reduced, ArrayRef<int64_t>{offset}, ArrayRef<int64_t>{offset + n},
                                     ArrayRef<int64_t>{1});
      op.replaceAllUsesWith(b.create<ReshapeOp>(loc, op.getType(), part).getResult());
      offset += n;
      if (auto index = op->getAttrOfType<IntegerAttr>(kRecordAttr); index && report) {
        const CollectiveRecord &r = report->collectives[index.getInt()];
        replaced.insert(index.getInt());
        record.kind = r.kind;
        record.axes = r.axes;
        record.bytes += r.bytes;
        record.wireBytes += r.wireBytes;
      }
    }
    if (report && !record.kind.empty()) {
      record.value = "a bucket of " + std::to_string(bucket.size()) + " values (" +
                     std::to_string(record.bytes) + " bytes)";
      merged.push_back(record);
    }
    for (AllReduceOp op : bucket)
      op.erase();
  }
  if (report && !replaced.empty()) {
    std::vector<CollectiveRecord> kept;
    for (size_t i = 0; i < report->collectives.size(); ++i)
      if (!replaced.count(i))
        kept.push_back(report->collectives[i]);
    kept.insert(kept.end(), merged.begin(), merged.end());
    report->collectives = std::move(kept);
  }
  fn.walk([&](AllReduceOp op) { op->removeAttr(kRecordAttr); });
}

//===--- -tcc-shard ------------------------------------------------------------===//

namespace {

struct ShardPass : impl::ShardBase<ShardPass> {
  using ShardBase::ShardBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshAttr mesh = meshOf(module);
    if (!mesh) {
      module.emitError("-tcc-shard needs a module with a '") << TccDialect::kMeshAttrName << "'";
      return signalPassFailure();
    }
    if (rank < 0 || rank >= mesh.numRanks()) {
      module.emitError("-tcc-shard: rank ") << static_cast<int64_t>(rank) << " is outside the mesh's "
                                            << mesh.numRanks() << " ranks";
      return signalPassFailure();
    }
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      ShardingReport report;
      auto plan = ShardingPlan::build(func, &report);
      if (failed(plan))
        return signalPassFailure();
      func::FuncOp local;
      try {
        local = plan->partition(rank, func.getName(), &report);
      } catch (const Error &e) {
        func.emitError(e.what());
        return signalPassFailure();
      }
      if (explain) {
        for (const std::string &line : report.decisions)
          mlir::emitRemark(func.getLoc(), "sharding: ") << line;
        for (const CollectiveRecord &c : report.collectives)
          mlir::emitRemark(func.getLoc(), "collective: ")
              << c.kind << " over " << c.axes << ", " << c.bytes << " bytes per rank, of "
              << c.value;
      }
      func.erase();
    }
  }
};

} // namespace

} // namespace tcc
