//===- Pipeline.cpp - Pipeline parallelism: stages, schedules, send/recv ---------===//
//
// See tcc/Passes/Pipeline.h. Groups are numbered -1 (the argument-only prologue), 2m (the
// forward F(m) of micro-batch m) and 2m+1 (its backward B(m)).
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Pipeline.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include <algorithm>

using namespace mlir;

namespace tcc {
#define GEN_PASS_DEF_PIPELINE
#include "tcc/Passes/Passes.h.inc"

namespace {

int64_t elementsOf(Type t) {
  auto type = dyn_cast<RankedTensorType>(t);
  return type && type.hasStaticShape() ? type.getNumElements() : 0;
}

/// An op's cost in arithmetic: 2*M*N*K per matrix product, 2 * output * (kernel elements per
/// output channel) per convolution, 4 * q elements * keys for attention, else one per output
/// element.
double costOf(Operation *op) {
  double out = 0;
  for (Value r : op->getResults())
    out += static_cast<double>(elementsOf(r.getType()));
  if (auto m = dyn_cast<MatmulOp>(op)) {
    auto lhs = cast<RankedTensorType>(m.getLhs().getType());
    return 2 * out * static_cast<double>(lhs.getShape().back());
  }
  if (auto c = dyn_cast<ConvOp>(op)) {
    auto w = cast<RankedTensorType>(c.getWeight().getType());
    return 2 * out * static_cast<double>(w.getNumElements() / std::max<int64_t>(1, w.getShape()[0]));
  }
  if (auto a = dyn_cast<AttentionOp>(op)) {
    auto k = cast<RankedTensorType>(a.getK().getType());
    return 4 * out * static_cast<double>(k.getShape()[k.getRank() - 2]);
  }
  if (auto a = dyn_cast<AttentionGradOp>(op)) { // five products of the forward's two sizes
    auto k = cast<RankedTensorType>(a.getK().getType());
    return 10 * static_cast<double>(elementsOf(a.getOutput().getType())) *
           static_cast<double>(k.getShape()[k.getRank() - 2]);
  }
  return out;
}

} // namespace

bool parsePipelineSchedule(llvm::StringRef text, PipelineSchedule &out) {
  if (text == "gpipe")
    out = PipelineSchedule::GPipe;
  else if (text == "1f1b")
    out = PipelineSchedule::OneFOneB;
  else
    return false;
  return true;
}

int64_t PipelinePlan::stageOf(Value v) const {
  Operation *def = v.getDefiningOp();
  if (!def)
    return -1;
  auto it = stage_.find(def);
  return it == stage_.end() ? -1 : it->second;
}

int64_t PipelinePlan::position(int64_t stage, int64_t group) const {
  if (group < 0)
    return -1;
  int64_t m = group / 2, M = microBatches_;
  bool backward = group % 2;
  if (schedule_ == PipelineSchedule::GPipe)
    return backward ? M + m : m;
  // 1F1B: `warm` forwards, then pairs (F(warm + i), B(i)), then the remaining backwards.
  int64_t warm = std::min(M, stages_ - 1 - stage);
  if (!backward)
    return m < warm ? m : warm + 2 * (m - warm);
  return m < M - warm ? warm + 2 * m + 1 : 2 * M - (M - m);
}

FailureOr<PipelinePlan> PipelinePlan::build(func::FuncOp step, int64_t stages, int64_t microBatches,
                                            PipelineSchedule schedule, llvm::StringRef axis) {
  PipelinePlan p;
  p.step_ = step;
  p.stages_ = stages;
  p.microBatches_ = microBatches;
  p.schedule_ = schedule;
  p.axis_ = axis.str();
  Block &body = step.getBody().front();
  for (Operation &op : body.without_terminator())
    p.ops_.push_back(&op);
  // The forward (and loss) of each micro-batch, by forward index.
  std::vector<std::vector<Operation *>> forward(microBatches);
  auto attr = [](Operation *op, StringRef name) -> int64_t {
    auto a = op->getAttrOfType<IntegerAttr>(name);
    return a ? a.getInt() : -1;
  };
  for (Operation *op : p.ops_) {
    int64_t m = attr(op, TccDialect::kMicroBatchAttrName),
            i = attr(op, TccDialect::kForwardIndexAttrName);
    if (m < 0 || i < 0 || attr(op, TccDialect::kBackwardOfAttrName) >= 0)
      continue;
    if (m >= microBatches)
      return step.emitError("pipeline: an op of micro-batch ") << m << " in a step of "
                                                               << microBatches << " micro-batches";
    if ((int64_t)forward[m].size() <= i)
      forward[m].resize(i + 1, nullptr);
    forward[m][i] = op;
  }
  // (Indices of ops nothing used are gone: the lists may have holes, the same in each.)
  size_t longest = 0;
  for (auto &f : forward)
    longest = std::max(longest, f.size());
  for (auto &f : forward)
    f.resize(longest, nullptr);
  const std::vector<Operation *> &first = forward[0];
  for (int64_t m = 1; m < microBatches; ++m) {
    bool same = true;
    for (size_t i = 0; same && i < first.size(); ++i)
      same = (!forward[m][i] && !first[i]) ||
             (forward[m][i] && first[i] && forward[m][i]->getName() == first[i]->getName());
    if (!same)
      return step.emitError("pipeline: the forward of micro-batch ")
             << m << " differs from micro-batch 0's (" << forward[m].size() << " ops against "
             << first.size() << ")";
  }
  int64_t n = static_cast<int64_t>(first.size());
  if (n < stages)
    return step.emitError("pipeline: ") << stages << " stages for a forward of " << n << " ops";
  if (stages > 64)
    return step.emitError("pipeline: ") << stages << " stages (at most 64)";

  // Cuts: cut i puts ops [0, i) of the forward before it. Bytes crossing each cut: values
  // made before it and used after it within the forward.
  std::vector<double> cost(n), before(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    cost[i] = first[i] ? costOf(first[i]) : 0;
    before[i + 1] = before[i] + cost[i];
  }
  llvm::DenseMap<Operation *, int64_t> forwardIndex;
  for (int64_t i = 0; i < n; ++i)
    if (first[i])
      forwardIndex[first[i]] = i;
  std::vector<int64_t> crossingDelta(n + 2, 0);
  for (int64_t i = 0; i < n; ++i)
    for (Value r : first[i] ? first[i]->getResults() : ResultRange(nullptr, 0)) {
      int64_t last = -1;
      for (Operation *user : r.getUsers()) {
        auto it = forwardIndex.find(user);
        if (it != forwardIndex.end())
          last = std::max(last, it->second);
      }
      if (last > i) { // crosses cuts i+1 .. last
        crossingDelta[i + 1] += CoreBuilder::bytesOf(r);
        crossingDelta[last + 1] -= CoreBuilder::bytesOf(r);
      }
    }
  std::vector<int64_t> crossing(n + 1, 0);
  for (int64_t i = 1; i <= n; ++i)
    crossing[i] = crossing[i - 1] + crossingDelta[i];
  double total = before[n], share = total / static_cast<double>(stages);
  std::vector<int64_t> cuts; // cuts[k-1]: first op of stage k
  for (int64_t k = 1; k < stages; ++k) {
    int64_t lo = cuts.empty() ? 1 : cuts.back() + 1, hi = n - (stages - k);
    double target = share * static_cast<double>(k), tolerance = share / 10;
    int64_t best = -1;
    for (int64_t i = lo; i <= hi; ++i) {
      if (std::abs(before[i] - target) > tolerance)
        continue;
      if (best < 0 || crossing[i] < crossing[best] ||
          (crossing[i] == crossing[best] &&
           std::abs(before[i] - target) < std::abs(before[best] - target)))
        best = i;
    }
    if (best < 0) { // nothing within the tolerance: the closest to the balanced point
      best = lo;
      for (int64_t i = lo; i <= hi; ++i)
        if (std::abs(before[i] - target) < std::abs(before[best] - target))
          best = i;
    }
    cuts.push_back(best);
  }
  auto stageOfForward = [&](int64_t i) {
    return static_cast<int64_t>(std::upper_bound(cuts.begin(), cuts.end(), i) - cuts.begin());
  };
  for (int64_t k = 0; k < stages; ++k) {
    int64_t from = k == 0 ? 0 : cuts[k - 1], to = k + 1 == stages ? n : cuts[k];
    double c = before[to] - before[from];
    p.stageShares_.push_back(total > 0 ? c / total : 1.0 / stages);
    p.decisions_.push_back("stage " + std::to_string(k) + ": forward ops " + std::to_string(from) +
                           ".." + std::to_string(to - 1) + " of " + std::to_string(n) + " (" +
                           std::to_string(static_cast<int>(100 * c / std::max(total, 1.0) + 0.5)) +
                           "% of the forward's cost)" +
                           (k + 1 < stages ? ", " + std::to_string(crossing[to]) +
                                                 " bytes per micro-batch cross to the next"
                                           : ""));
  }
  for (int64_t m = 0; m < microBatches; ++m)
    for (int64_t i = 0; i < n; ++i)
      if (forward[m][i]) {
        p.stage_[forward[m][i]] = stageOfForward(i);
        p.group_[forward[m][i]] = 2 * m;
      }
  // Constants (ops without operands) are made on every stage that uses them. The ops autodiff
  // made for a forward op's vector-Jacobian product run on its stage in its micro-batch's
  // backward, so backward values only ever flow to lower stages (and forward values to
  // higher ones): no two stages wait on each other.
  for (Operation *op : p.ops_) {
    if (op->getNumOperands() == 0) {
      p.stage_[op] = -1;
      p.group_[op] = -1;
      continue;
    }
    int64_t of = attr(op, TccDialect::kBackwardOfAttrName), m = attr(op, TccDialect::kMicroBatchAttrName);
    if (of >= 0 && of < n && m >= 0 && m < microBatches) {
      p.stage_[op] = stageOfForward(of);
      p.group_[op] = 2 * m + 1;
    }
  }
  // Everything else (gradient sums, the optimizer, collectives the sharding pass inserted):
  // the lowest stage among the ops it reads (none: every stage), and the latest group among
  // them: the forward of the latest micro-batch where it reads forward values only (a
  // batch-norm statistic's all-reduce over dp, a tensor-parallel block's output), else that
  // micro-batch's backward (none: the prologue). Every schedule runs F(m) after each F(k < m)
  // and B(m) after every F and B it may read.
  for (Operation *op : p.ops_) {
    if (p.stage_.count(op))
      continue;
    int64_t stage = -1, latest = -1;
    bool backward = false;
    for (Value v : op->getOperands()) {
      int64_t s = p.stageOf(v);
      if (s >= 0)
        stage = stage < 0 ? s : std::min(stage, s);
      if (Operation *def = v.getDefiningOp())
        if (auto it = p.group_.find(def); it != p.group_.end() && it->second >= 0) {
          latest = std::max(latest, it->second / 2);
          backward |= it->second % 2 == 1;
        }
    }
    p.stage_[op] = stage;
    p.group_[op] = stage < 0 || latest < 0 ? -1 : 2 * latest + (backward ? 1 : 0);
  }
  // Where each every-stage op is needed: the stages of the ops using it (all, for a result).
  for (Operation *op : llvm::reverse(p.ops_)) {
    if (p.stage_[op] >= 0)
      continue;
    uint64_t mask = 0;
    for (Value r : op->getResults())
      for (Operation *user : r.getUsers()) {
        if (user->hasTrait<OpTrait::IsTerminator>())
          mask = ~uint64_t(0);
        else if (int64_t s = p.stage_.lookup(user); s >= 0)
          mask |= uint64_t(1) << s;
        else
          mask |= p.needed_.lookup(user);
      }
    p.needed_[op] = mask;
  }
  // Tags: values used on another stage than their own, in program order.
  int64_t tags = 0, sentBytes = 0;
  for (Operation *op : p.ops_) {
    int64_t s = p.stage_[op];
    if (s < 0)
      continue;
    for (Value r : op->getResults())
      for (Operation *user : r.getUsers()) {
        int64_t u = user->hasTrait<OpTrait::IsTerminator>() ? s : p.stage_.lookup(user);
        if (u >= 0 && u != s && !p.tag_.count(r)) {
          p.tag_[r] = tags++;
          sentBytes += CoreBuilder::bytesOf(r);
        }
      }
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (Value v : ret.getOperands())
    p.resultStage_.push_back(p.stageOf(v));
  p.crossingBytes_ = sentBytes;
  p.decisions_.push_back(std::to_string(tags) + " values cross stages per step (" +
                         std::to_string(sentBytes) + " bytes, each sent once per stage that reads it)");
  return p;
}

func::FuncOp PipelinePlan::partition(int64_t stage, llvm::StringRef name,
                                     llvm::ArrayRef<int64_t> resultArgument) const {
  func::FuncOp step = step_; // MLIR's op handles have non-const accessors
  OpBuilder b(step);
  auto f = b.create<func::FuncOp>(step.getLoc(), name, step.getFunctionType());
  if (ArrayAttr args = step.getAllArgAttrs())
    f.setAllArgAttrs(args);
  Block *entry = f.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping map;
  for (auto [from, to] : llvm::zip(step.getArguments(), entry->getArguments()))
    map.map(from, to);

  // This stage's ops (and every stage's), in its schedule's order.
  std::vector<Operation *> mine;
  for (Operation *op : ops_) {
    int64_t s = stage_.lookup(op);
    if (s == stage || (s < 0 && (needed_.lookup(op) >> stage & 1)))
      mine.push_back(op);
  }
  std::stable_sort(mine.begin(), mine.end(), [&](Operation *a, Operation *c) {
    return position(stage, group_.lookup(a)) < position(stage, group_.lookup(c));
  });
  auto axisAttr = b.getStringAttr(axis_);
  auto received = [&](Value v) -> Value {
    if (Value local = map.lookupOrNull(v))
      return local;
    if (stageOf(v) < 0 || stageOf(v) == stage)
      llvm::report_fatal_error("pipeline: a stage's schedule uses a value before computing it");
    // Made on another stage: received just before its first use here.
    auto type = cast<RankedTensorType>(v.getType());
    Value r = b.create<RecvOp>(v.getLoc(), type, stageOf(v), axisAttr, tag_.lookup(v));
    map.map(v, r);
    return r;
  };
  for (Operation *op : mine) {
    for (Value v : op->getOperands())
      received(v);
    Operation *copy = b.clone(*op, map);
    copy->removeAttr(TccDialect::kForwardIndexAttrName);
    copy->removeAttr(TccDialect::kBackwardOfAttrName);
    // From here on the mark names the op's place in the schedule (2m: the forward of
    // micro-batch m, 2m+1: its backward), which fusion keeps apart.
    if (int64_t group = group_.lookup(op); group >= 0)
      copy->setAttr(TccDialect::kMicroBatchAttrName, b.getI64IntegerAttr(group));
    else
      copy->removeAttr(TccDialect::kMicroBatchAttrName);
    // Sent right away to every other stage that reads it.
    for (auto [r, local] : llvm::zip(op->getResults(), copy->getResults())) {
      if (!tag_.count(r))
        continue;
      llvm::SmallSet<int64_t, 4> peers;
      for (Operation *user : r.getUsers()) {
        int64_t u = user->hasTrait<OpTrait::IsTerminator>() ? -1 : stage_.lookup(user);
        if (u >= 0 && u != stage && peers.insert(u).second)
          b.create<SendOp>(op->getLoc(), local, u, axisAttr, tag_.lookup(r));
      }
    }
  }
  // Results: where computed, its value; elsewhere the state argument unchanged when no other
  // stage reads that argument, else (the loss, tied parameters) a broadcast from the stage
  // that computes it. The choice is the same on every stage, so every stage joins the same
  // broadcasts in the same order.
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  auto readOnlyBy = [&](int64_t arg, int64_t s) {
    return llvm::all_of(step.getArgument(arg).getUsers(), [&](Operation *user) {
      int64_t u = stage_.lookup(user);
      return user->hasTrait<OpTrait::IsTerminator>() || u == s ||
             (u < 0 && !(needed_.lookup(user) & ~(uint64_t(1) << s)));
    });
  };
  SmallVector<Value> results;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    int64_t s = resultStage_[i];
    int64_t arg = i < resultArgument.size() ? resultArgument[i] : -1;
    if (s < 0) {
      results.push_back(map.lookup(v));
    } else if (arg >= 0 && readOnlyBy(arg, s)) {
      results.push_back(s == stage ? map.lookup(v) : entry->getArgument(arg));
    } else {
      CoreBuilder cb(b, v.getLoc());
      Value mineOrZeros = s == stage ? map.lookup(v) : cb.splatLike(v, 0);
      results.push_back(
          b.create<BroadcastOp>(v.getLoc(), mineOrZeros, s, b.getStrArrayAttr({axis_})));
    }
  }
  b.create<func::ReturnOp>(ret.getLoc(), results);
  return f;
}

namespace {

struct PipelinePass : impl::PipelineBase<PipelinePass> {
  using PipelineBase::PipelineBase;
  void runOnOperation() override {
    PipelineSchedule kind;
    if (!parsePipelineSchedule(schedule, kind)) {
      getOperation().emitError("-tcc-pipeline: schedule '") << schedule << "' is not gpipe or 1f1b";
      return signalPassFailure();
    }
    if (stages < 1 || microBatches < 1 || stage < 0 || stage >= stages) {
      getOperation().emitError("-tcc-pipeline: needs stages >= 1, micro-batches >= 1 and 0 <= stage < stages");
      return signalPassFailure();
    }
    for (auto func : llvm::to_vector(getOperation().getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      auto plan = PipelinePlan::build(func, stages, microBatches, kind);
      if (failed(plan))
        return signalPassFailure();
      if (explain)
        for (const std::string &line : plan->decisions())
          mlir::emitRemark(func.getLoc(), "pipeline: ") << line;
      plan->partition(stage, func.getName());
      func.erase();
    }
  }
};

} // namespace
} // namespace tcc
