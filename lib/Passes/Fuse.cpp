//===- Fuse.cpp - Groups graph ops into tcc.fusion ops --------------------------===//
//
// -tcc-fuse, on a graph function (tensors, static shapes, after folding/canonicalize/CSE):
//
//  0. Control flow: a tcc.loop whose trip count is known at compile time (from its scan
//     results' leading dim, or a constant max_trip with a condition that stays true) is
//     unrolled (at most kMaxUnroll iterations); a tcc.if whose branches hold no tcc.loop is
//     replaced by both branches, inlined, and a tcc.select of their results. A tcc.loop left
//     is an error (the compiled backends have no data-dependent control flow).
//  1. Inlining (Inductor's "pointwise ops are recomputed in their consumers"): walking consumers
//     before producers, each pointwise op (elementwise, layout and gather-like ops, see
//     FusionUtils.h) is inlined into the groups of its consumers when it feeds one group, or
//     several when it is cheap to recompute; otherwise it is materialised as a group of its own.
//     A materialised reshape is a free view instead. Transposes of the last two dims and batch
//     broadcasts of a GEMM operand are absorbed by the GEMM. On CPUs, a transcendental
//     function (an exp, a sigmoid) that a consumer kernel reads broadcast over at least
//     kBroadcastRecompute times its elements is materialised: computed once.
//  2. Every other op roots a group: reductions (loop), f32/f64 matmul and f32 conv (extern),
//     topk (extern), loop forms of matmul/conv/reduce_window, and sequential ops (loop). The
//     part of a matmul's epilogue that the target's GEMM library computes (a scale, a bias
//     vector, then ReLU or tanh GELU on CUDA: GemmEpilogue.h) is decided first and belongs to
//     the matmul's group; its last value is what the group's consumers read.
//  3. Merging, on groups with the legality checks in FusionPolicy:
//     - epilogues: pointwise groups over a library call's output reading it at the same element
//       join its extern group;
//     - rows: a group with reductions joins a consumer group that reads its results at the same
//       row (index maps composed from the consumer's index space: a projection onto the row
//       dims), so a softmax or a layer norm becomes one kernel;
//     - horizontal: independent loop groups with the same iteration space sharing an input
//       (not a group of values -tcc-remat recomputes with one of the forward pass).
//     A merge that would create a cycle between groups is refused.
//  4. Each group becomes a tcc.fusion (inputs = what it reads from outside, results = what is
//     read outside), in a topological order; splat constants are cloned into the bodies.
//
// With `explain`, every decision is reported as a remark on the op it concerns, with its reason.
//
//===----------------------------------------------------------------------===//
#include "FusionUtils.h"

#include "tcc/Passes/GemmEpilogue.h"
#include "tcc/Passes/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <functional>
#include <queue>
#include <set>

namespace tcc {
#define GEN_PASS_DEF_FUSE
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc::fusion;

namespace tcc {
namespace {

//===--- Loop unrolling and if-conversion ---------------------------------------===//

constexpr int64_t kMaxUnroll = 1024;

/// The number of iterations `loop` runs, if known at compile time.
std::optional<int64_t> staticTripCount(LoopOp loop) {
  size_t numCarried = loop.getInits().size();
  if (loop.getNumResults() > numCarried) // scan results: their leading dim is the count
    return tensorType(loop.getResult(numCarried)).getDimSize(0);
  DenseElementsAttr maxTrip, cond;
  if (!matchPattern(loop.getMaxTrip(), m_Constant(&maxTrip)) ||
      !matchPattern(loop.getCond(), m_Constant(&cond)) || !cond.getSplatValue<bool>())
    return std::nullopt;
  // The condition must stay true: the body yields its own condition argument or a true.
  Block &body = loop.getBody().front();
  Value yielded = body.getTerminator()->getOperand(0);
  DenseElementsAttr yieldedConst;
  bool staysTrue = yielded == body.getArgument(1) ||
                   (matchPattern(yielded, m_Constant(&yieldedConst)) &&
                    yieldedConst.getSplatValue<bool>());
  if (!staysTrue)
    return std::nullopt;
  return maxTrip.getSplatValue<APInt>().getSExtValue();
}

/// Replaces `loop` by `count` copies of its body.
void unrollLoop(LoopOp loop, int64_t count) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  Block &body = loop.getBody().front();
  size_t numCarried = loop.getInits().size();
  SmallVector<Value> carried(loop.getInits());
  Value cond = loop.getCond();
  size_t numScans = loop.getNumResults() - numCarried;
  std::vector<SmallVector<Value>> scans(numScans);
  auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
  for (int64_t i = 0; i < count; ++i) {
    IRMapping map;
    map.map(body.getArgument(0),
            b.create<ConstantOp>(loc, DenseElementsAttr::get(i64Scalar, b.getI64IntegerAttr(i)))
                .getResult());
    map.map(body.getArgument(1), cond);
    for (size_t c = 0; c < numCarried; ++c)
      map.map(body.getArgument(2 + c), carried[c]);
    for (Operation &op : body.without_terminator()) {
      Operation *copy = b.clone(op, map);
      // Scalar arithmetic on the iteration number folds here (a reverse pass's step is
      // length - 1 - i): the copies then differ only in constants, which the kernel lowering
      // turns into buffer offsets where it can.
      foldConstantOp(copy, /*maxElements=*/1, [&](Value result, Value folded) {
        for (unsigned r = 0; r < copy->getNumResults(); ++r)
          if (copy->getResult(r) == result)
            map.map(op.getResult(r), folded);
      });
    }
    auto yielded = body.getTerminator()->getOperands();
    cond = map.lookupOrDefault(yielded[0]);
    for (size_t c = 0; c < numCarried; ++c)
      carried[c] = map.lookupOrDefault(yielded[1 + c]);
    for (size_t s = 0; s < numScans; ++s) {
      Value element = map.lookupOrDefault(yielded[1 + numCarried + s]);
      auto t = tensorType(element);
      SymShape shape{SymExpr(1)};
      llvm::append_range(shape, symbolicShape(t));
      scans[s].push_back(
          b.create<ReshapeOp>(loc, tensorTypeWithDims(shape, t.getElementType()), element));
    }
  }
  for (size_t c = 0; c < numCarried; ++c)
    loop.getResult(c).replaceAllUsesWith(carried[c]);
  for (size_t s = 0; s < numScans; ++s) {
    Value result = loop.getResult(numCarried + s);
    Value stacked = scans[s].size() == 1
                        ? scans[s][0]
                        : b.create<ConcatOp>(loc, result.getType(), scans[s],
                                             b.getI64IntegerAttr(0))
                              .getResult();
    result.replaceAllUsesWith(stacked);
  }
  loop.erase();
}

void unrollStaticLoops(func::FuncOp func) {
  SmallVector<LoopOp> loops; // innermost first
  func.walk<WalkOrder::PostOrder>([&](LoopOp op) { loops.push_back(op); });
  for (LoopOp loop : loops) {
    std::optional<int64_t> count = staticTripCount(loop);
    if (count && *count >= 1 && *count <= kMaxUnroll)
      unrollLoop(loop, *count);
  }
}

LogicalResult convertIfs(func::FuncOp func) {
  unrollStaticLoops(func);
  SmallVector<IfOp> ifs;
  func.walk<WalkOrder::PostOrder>([&](IfOp op) { ifs.push_back(op); });
  for (IfOp op : ifs) {
    bool hasLoop = false;
    op.walk([&](LoopOp) { hasLoop = true; });
    if (hasLoop)
      continue;
    OpBuilder b(op);
    auto inlineRegion = [&](Region &region) {
      IRMapping map;
      for (Operation &inner : region.front().without_terminator())
        b.clone(inner, map);
      SmallVector<Value> values;
      for (Value v : region.front().getTerminator()->getOperands())
        values.push_back(map.lookupOrDefault(v));
      return values;
    };
    SmallVector<Value> thenValues = inlineRegion(op.getThenRegion());
    SmallVector<Value> elseValues = inlineRegion(op.getElseRegion());
    for (unsigned i = 0; i < op.getNumResults(); ++i) {
      auto type = tensorType(op.getResult(i));
      Value cond = op.getCond();
      if (type.getRank() > 0)
        cond = b.create<BroadcastInDimOp>(
            op.getLoc(), withElementType(type, b.getI1Type()), cond,
            b.getDenseI64ArrayAttr({}));
      Value s = b.create<SelectOp>(op.getLoc(), type, cond, thenValues[i], elseValues[i]);
      op.getResult(i).replaceAllUsesWith(s);
    }
    op.erase();
  }
  WalkResult r = func.walk([&](LoopOp loop) {
    loop.emitError("tcc.loop whose trip count is not known at compile time (or exceeds ")
        << kMaxUnroll << " iterations) is not supported by the compiled backends";
    return WalkResult::interrupt();
  });
  return failure(r.wasInterrupted());
}

//===--- Groups -----------------------------------------------------------------===//

enum class Status { Dead, Constant, Inline, Absorbed, View, Root, LibraryEpilogue };

/// Ops that are computed by a group's root: the root itself, or an op the GEMM library computes
/// in the root matmul's epilogue.
bool computedByGroup(Status s) { return s == Status::Root || s == Status::LibraryEpilogue; }

/// Pipeline stages: whether two ops (groups' roots) have the same place in the stage's
/// schedule (a group merged with another micro-batch's would wait for that one's data from the
/// next stage).
bool samePlace(Operation *a, Operation *b) {
  return a->getAttr(TccDialect::kMicroBatchAttrName) == b->getAttr(TccDialect::kMicroBatchAttrName);
}

/// Pipeline stages: whether `op` may be computed in a kernel of `root`'s. Each micro-batch's work
/// keeps its place in the stage's schedule: an op of one micro-batch (or one reading several,
/// such as a sum of their gradients) joins no kernel of another, where it would hold that
/// kernel back until its own inputs arrive from the next stage. Unmarked ops of unmarked inputs
/// (the step's scalar prologue) join anything. Without micro-batches nothing is marked.
bool mayJoin(Operation *op, Operation *root) {
  if (samePlace(op, root))
    return true;
  return !op->hasAttr(TccDialect::kMicroBatchAttrName) &&
         llvm::none_of(op->getOperands(), [](Value v) {
           Operation *d = v.getDefiningOp();
           return d && d->hasAttr(TccDialect::kMicroBatchAttrName);
         });
}

struct Group {
  int id = 0;
  bool alive = true;
  bool external = false;   // "extern": a library call (+ epilogue)
  bool sequential = false; // cumsum / scatter / dynamic_update_slice / loop forms: no merging
  SmallVector<Operation *> roots;
  llvm::SetVector<Operation *> members;
  Operation *library = nullptr; // extern groups: the library call
  Value libraryResult;          // what the library writes (after its own epilogue, if any)
  SymShape rows; // row shape when the group has reductions
  bool hasReduction = false;
  std::set<int> deps; // producer groups (ids, resolve with find)
};

/// Ops that read each element of an operand many times (inner reductions over windows that
/// overlap, loop matmuls and convolutions): only producers of at most kOpsRecomputedPerRead
/// ops are recomputed in them. (A 3x3 stride-2 max pool reads each input 2.25 times: ResNet's
/// batch norm + ReLU recomputed in it, with every read a clamped gather, cost 2.5 ms against
/// 1.8 ms for the pool alone and 0.1 ms to write them once, on Zen 4.)
bool readsRepeatedly(Operation *user, Target target) {
  if (auto pool = dyn_cast<ReduceWindowOp>(user)) {
    for (auto [window, stride] : llvm::zip(pool.getWindow(), pool.getStrides()))
      if (window > stride)
        return true;
    return false;
  }
  return classify(user, target) == OpClass::LoopRoot;
}
constexpr int kOpsRecomputedPerRead = 1;

/// How many ops an inlined pointwise op costs to recompute at most, and still be "cheap".
constexpr int kCheapOps = 8;

/// What one op counts for in that budget. Index remaps (layout ops) cost nothing. With
/// `weighTranscendental`, a transcendental function (an exp, a sigmoid, an erf: a range
/// reduction, a polynomial and often a division, ~0.5 ns an element on one Zen 4 core) costs
/// more than storing its value once and reading it back: more than the whole budget.
int recomputeCost(Operation *op, bool weighTranscendental) {
  if (isa<ReshapeOp, BroadcastInDimOp, TransposeOp, SliceOp, ReverseOp>(op))
    return 0;
  if (auto u = dyn_cast<UnaryOp>(op)) {
    switch (u.getKind()) {
    case UnaryKind::Neg: case UnaryKind::Abs: case UnaryKind::Sqrt: case UnaryKind::Rsqrt:
    case UnaryKind::Reciprocal: case UnaryKind::Floor: case UnaryKind::Ceil:
    case UnaryKind::Round: case UnaryKind::Sign: case UnaryKind::Not:
      return 1;
    default:
      return weighTranscendental ? kCheapOps + 1 : 1;
    }
  }
  if (auto b = dyn_cast<BinaryOp>(op); b && b.getKind() == BinaryKind::Pow)
    return weighTranscendental ? kCheapOps + 1 : 1;
  return 1;
}

/// On CPUs, a transcendental function (an exp, a sigmoid) whose value kernels read broadcast
/// over this many times its elements or more (a squeeze-excitation's sigmoid gate, [N, C, 1, 1],
/// scaling [N, C, H, W]) is materialised: computed once per element, not once per read.
constexpr int64_t kBroadcastRecompute = 16;

/// Elements of the largest static tensor `op` reads or writes: its iteration space, roughly.
int64_t iterationElements(Operation *op) {
  int64_t most = 0;
  auto consider = [&](Type t) {
    if (auto r = dyn_cast<RankedTensorType>(t); r && r.hasStaticShape())
      most = std::max(most, r.getNumElements());
  };
  for (Type t : op->getOperandTypes())
    consider(t);
  for (Type t : op->getResultTypes())
    consider(t);
  return most;
}

/// How many times more elements the kernels rooted at `roots` iterate over than `op` has (1
/// when unknown or not larger).
int64_t broadcastExpansion(Operation *op, ArrayRef<Operation *> roots) {
  auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!t || !t.hasStaticShape() || t.getNumElements() == 0)
    return 1;
  int64_t most = 0;
  for (Operation *r : roots)
    most = std::max(most, iterationElements(r));
  return std::max<int64_t>(1, most / t.getNumElements());
}

/// A value that this many kernels or more each read through their own slice of it
/// (an unrolled recurrence's steps, each reading its step's row of the stacked input
/// projections) is materialised: each kernel then reads its slice in place, and the steps'
/// kernels, which differ only by where their slice starts, are compiled once (DedupKernels).
/// Inlined, each kernel would recompute the value's producers with its own offsets.
constexpr size_t kSlicedReaders = 8;

/// Whether every user of op's result is a slice of it (static, or a dynamic one).
bool readOnlyThroughSlices(Operation *op) {
  return op->getNumResults() == 1 && !op->getResult(0).use_empty() &&
         llvm::all_of(op->getResult(0).getUsers(),
                      [](Operation *u) { return isa<SliceOp, DynamicSliceOp>(u); });
}

/// Gathers needing at least this many taps of one value to materialise it (see tapReads).
constexpr int kMaterializedTapReads = 2;

/// How many gathers read `op`'s result as their data when together they read at least as
/// many elements as it has (0 otherwise, or when shapes are symbolic): the taps of a resize
/// along one axis, or of an interpolation. Inlined, the value would be recomputed once per
/// tap for every element of the consumer: a separable resize's first axis, inlined into the
/// second axis's two taps, reads the input four times through gathers (DeepLabV3's 16x
/// bilinear upsample: 2.3 ms against 0.5 ms with the first axis written once).
int tapReads(Operation *op) {
  auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!t || !t.hasStaticShape())
    return 0;
  int taps = 0;
  int64_t read = 0;
  for (Operation *user : op->getResult(0).getUsers()) {
    auto g = dyn_cast<GatherOp>(user);
    if (!g || g.getX() != op->getResult(0))
      continue;
    auto gt = dyn_cast<RankedTensorType>(g.getType());
    if (!gt || !gt.hasStaticShape())
      return 0;
    ++taps;
    read += gt.getNumElements();
  }
  return read >= t.getNumElements() ? taps : 0;
}

class FusionPolicy {
public:
  FusionPolicy(func::FuncOp func, bool explain, Target target)
      : func_(func), explain_(explain), target_(target) {}

  LogicalResult run();

private:
  // ---- Step 1-2 ----
  void decideLibraryEpilogues();
  void decide();
  int costOf(Operation *op, bool weighTranscendental);
  bool separatedByLibrary(ArrayRef<Operation *> roots);
  bool needsBuffer(Operation *user, Value operand);
  void buildGroups();
  // ---- Step 3 ----
  int find(int g) { return parent_[g] == g ? g : parent_[g] = find(parent_[g]); }
  Group &group(int g) { return groups_[find(g)]; }
  int producerGroup(Value v);
  void computeDeps(Group &g);
  bool pathThroughOther(int from, int to);
  /// `why`, or if it is empty and merging `to` into `from` would close a cycle, that reason.
  std::string orCycle(std::string why, int from, int to);
  /// The group roots that consume `op`'s results: users that root a group, and the roots of
  /// the groups that inlined a user.
  SmallVector<Operation *> consumerRootsOf(Operation *op);
  void merge(int into, int from);
  void fuseEpilogues();
  void fuseRows();
  void fuseHorizontal();
  /// Why `consumer` cannot take in the row group `producer` (empty: it can).
  std::string rowIllegality(Group &producer, Group &consumer);
  std::string epilogueIllegality(Group &lib, Group &consumer);
  // ---- Step 4 ----
  LogicalResult materialize();

  void remark(Operation *op, const Twine &message) {
    if (explain_ && remarked_.insert({op, message.str()}).second)
      op->emitRemark(message);
  }
  static std::string describe(Operation *op) {
    std::string s = op->getName().getStringRef().str();
    if (auto r = dyn_cast<ReduceOp>(op))
      s += " " + stringifyReduceKind(r.getKind()).str();
    else if (auto b = dyn_cast<BinaryOp>(op))
      s += " " + stringifyBinaryKind(b.getKind()).str();
    else if (auto u = dyn_cast<UnaryOp>(op))
      s += " " + stringifyUnaryKind(u.getKind()).str();
    return "'" + s + "'";
  }

  func::FuncOp func_;
  bool explain_;
  Target target_;
  SmallVector<Operation *> ops_;
  DenseMap<Operation *, int> position_;
  DenseMap<Operation *, Status> status_;
  DenseMap<Operation *, SmallVector<Operation *, 2>> consumerRoots_;
  DenseMap<std::pair<Operation *, unsigned>, int> cost_; // (op, weighTranscendental)
  DenseMap<Operation *, int> rootGroup_;
  DenseMap<Operation *, GemmEpilogue> libraryEpilogues_; // matmul -> its library epilogue
  SmallVector<Group> groups_;
  SmallVector<int> parent_;
  std::set<std::pair<Operation *, std::string>> remarked_;
};

int FusionPolicy::costOf(Operation *op, bool weighTranscendental) {
  // Distinct computing pointwise ops in the operand cone of `op` (itself included), capped.
  if (auto it = cost_.find({op, unsigned(weighTranscendental)}); it != cost_.end())
    return it->second;
  llvm::SmallPtrSet<Operation *, 16> seen;
  SmallVector<Operation *> work{op};
  int cost = 0;
  while (!work.empty() && cost <= kCheapOps) {
    Operation *o = work.pop_back_val();
    if (!seen.insert(o).second)
      continue;
    cost += recomputeCost(o, weighTranscendental); // gathers cost their index computation
    for (Value v : o->getOperands())
      if (Operation *d = v.getDefiningOp())
        if (classify(d, target_) == OpClass::Pointwise && status_.lookup(d) != Status::View &&
            status_.lookup(d) != Status::LibraryEpilogue)
          work.push_back(d);
  }
  return cost_[{op, unsigned(weighTranscendental)}] = cost;
}

/// Whether one of `roots` (in program order) depends on another through a library call: such
/// kernels never become one (a squeeze-excitation's mean and its scaling, with the gate's
/// convolutions between), so a value they share is computed in each of them separately. Kernels
/// that only depend directly (a softmax's sum and its division) may merge into one row kernel.
bool FusionPolicy::separatedByLibrary(ArrayRef<Operation *> roots) {
  int last = 0;
  for (Operation *r : roots)
    last = std::max(last, position_.lookup(r));
  llvm::DenseSet<Operation *> targets(roots.begin(), roots.end());
  for (Operation *from : roots) {
    SmallVector<std::pair<Operation *, unsigned>> work; // (op, reached through a library call)
    llvm::DenseSet<std::pair<Operation *, unsigned>> seen;
    work.push_back({from, 0});
    while (!work.empty()) {
      auto [op, viaLibrary] = work.pop_back_val();
      if (!seen.insert({op, viaLibrary}).second)
        continue;
      if (viaLibrary && targets.contains(op))
        return true;
      unsigned next = viaLibrary || (op != from && classify(op, target_) == OpClass::Library);
      for (Operation *u : op->getUsers())
        if (position_.count(u) && position_.lookup(u) <= last)
          work.push_back({u, next});
    }
  }
  return false;
}

bool FusionPolicy::needsBuffer(Operation *user, Value operand) {
  if (isa<func::ReturnOp>(user))
    return true;
  Status s = status_.lookup(user);
  if (s == Status::View || s == Status::Absorbed)
    return true;
  switch (classify(user, target_)) {
  case OpClass::Library:
    return !(isa<MatmulOp>(user) && operand.getDefiningOp() &&
             status_.lookup(operand.getDefiningOp()) == Status::Absorbed);
  case OpClass::WholeBuffer:
    return true;
  case OpClass::Sequential:
    return isa<ScatterElementsOp, ScatterNDOp, DynamicUpdateSliceOp>(user) &&
           user->getOperand(0) == operand;
  default:
    return false;
  }
}

void FusionPolicy::decideLibraryEpilogues() {
  Block *block = &func_.getBody().front();
  for (Operation *op : ops_) {
    auto matmul = dyn_cast<MatmulOp>(op);
    if (!matmul || classify(op, target_) != OpClass::Library)
      continue;
    // Any pointwise op of the function can join the matmul's group.
    GemmEpilogue ep = matchGemmEpilogue(matmul, target_, [&](Operation *o) {
      return o->getBlock() == block && classify(o, target_) == OpClass::Pointwise &&
             !status_.count(o) && mayJoin(o, matmul);
    });
    Type elementType = tensorType(matmul.getResult()).getElementType();
    StringRef library = gemmEpilogueSupport(target_, elementType).library;
    if (!ep.empty() && !ep.result.use_empty()) {
      for (Operation *o : ep.ops) {
        status_[o] = Status::LibraryEpilogue;
        consumerRoots_[o] = {matmul};
      }
      remark(matmul, ep.describe() + " fused into the " + library + " epilogue" +
                         (ep.stop.empty() ? "" : "; not what follows: " + ep.stop));
      libraryEpilogues_[matmul] = std::move(ep);
    } else if (!ep.stop.empty()) {
      remark(matmul, "nothing fused into the " + library + " epilogue: " + ep.stop);
    }
  }
}

void FusionPolicy::decide() {
  for (Operation &op : func_.getBody().front().without_terminator()) {
    position_[&op] = ops_.size();
    ops_.push_back(&op);
  }
  decideLibraryEpilogues();
  for (Operation *op : llvm::reverse(ops_)) {
    if (status_.lookup(op) == Status::LibraryEpilogue)
      continue;
    OpClass cls = classify(op, target_);
    if (cls == OpClass::Constant) {
      status_[op] = Status::Constant;
      continue;
    }
    if (op->use_empty() && !isa<SendOp>(op)) { // a send has no results and is never dead
      status_[op] = Status::Dead;
      continue;
    }
    if (cls != OpClass::Pointwise) {
      status_[op] = Status::Root;
      consumerRoots_[op] = {op};
      continue;
    }
    // Absorbed by GEMMs: every user is a library matmul (or another absorbed op).
    if (isGemmAbsorbable(op) && llvm::all_of(op->getUsers(), [&](Operation *u) {
          return (isa<MatmulOp>(u) && classify(u, target_) == OpClass::Library) ||
                 status_.lookup(u) == Status::Absorbed;
        })) {
      status_[op] = Status::Absorbed;
      consumerRoots_[op] = {};
      remark(op, isa<TransposeOp>(op) ? "absorbed into the GEMM as a transposed operand"
                                      : "absorbed into the GEMM as a batch-broadcast operand");
      continue;
    }
    bool needBuffer = false, repeated = false;
    llvm::SetVector<Operation *> roots;
    for (OpOperand &use : op->getUses()) {
      Operation *user = use.getOwner();
      needBuffer |= needsBuffer(user, use.get());
      repeated |= readsRepeatedly(user, target_);
      for (Operation *r : consumerRoots_.lookup(user))
        roots.insert(r);
    }
    int cost = costOf(op, false);
    bool cheap = cost <= kCheapOps;
    if (cheap && roots.size() > 1 && separatedByLibrary(roots.getArrayRef())) {
      cost = costOf(op, true);
      cheap = cost <= kCheapOps;
    }
    std::string why;
    int64_t expansion = 1; // read broadcast over this many times its elements
    int taps = 0;          // gathers reading it as taps
    if (needBuffer)
      why = "its value is needed in memory (a graph output, a library call operand, a scatter "
            "base or a view)";
    else if (roots.size() > 1 && !cheap)
      why = "used by " + std::to_string(roots.size()) + " kernels and too costly to recompute (" +
            std::to_string(cost) + " ops)";
    else if (roots.size() >= kSlicedReaders && readOnlyThroughSlices(op))
      why = "read through slices by " + std::to_string(roots.size()) +
            " kernels (each reads its slice in place)";
    else if (target_ == Target::Cpu && recomputeCost(op, true) > kCheapOps &&
             (expansion = broadcastExpansion(op, roots.getArrayRef())) >= kBroadcastRecompute)
      why = "a transcendental broadcast to " + std::to_string(expansion) +
            "x its elements in its consumer kernel (computed once, not per element)";
    else if (target_ == Target::Cpu && cost > kOpsRecomputedPerRead &&
             (taps = tapReads(op)) >= kMaterializedTapReads)
      why = "read by " + std::to_string(taps) +
            " gathers (taps) for each element they make, and not free to recompute";
    else if (repeated && cost > kOpsRecomputedPerRead)
      why = "read many times per element by a windowed consumer and too costly to recompute";
    else if (llvm::any_of(roots, [&](Operation *r) { return !mayJoin(op, r); }))
      why = "a pipeline stage runs it in another micro-batch's place than a consumer's";
    if (why.empty()) {
      status_[op] = Status::Inline;
      consumerRoots_[op] = SmallVector<Operation *, 2>(roots.begin(), roots.end());
      if (roots.size() > 1)
        remark(op, "recomputed in each of its " + Twine(roots.size()) + " consumer kernels: cheap (" +
                       Twine(cost) + " ops, no reduction)");
      else
        remark(op, "inlined into its consumer's kernel");
      continue;
    }
    if (isa<ReshapeOp>(op)) {
      status_[op] = Status::View;
      consumerRoots_[op] = {};
      remark(op, "a free view of its operand: " + why);
      continue;
    }
    status_[op] = Status::Root;
    consumerRoots_[op] = {op};
    remark(op, "materialised: " + why);
  }
}

void FusionPolicy::buildGroups() {
  for (Operation *op : ops_) {
    if (status_[op] != Status::Root)
      continue;
    Group g;
    g.id = groups_.size();
    g.roots.push_back(op);
    OpClass cls = classify(op, target_);
    g.external = cls == OpClass::Library || cls == OpClass::WholeBuffer;
    g.sequential = cls == OpClass::Sequential || cls == OpClass::LoopRoot;
    if (cls == OpClass::Reduction) {
      g.hasReduction = true;
      g.rows = symShapeOf(op->getResult(0));
    }
    SmallVector<Operation *> work{op};
    if (cls == OpClass::Library) {
      g.library = op;
      g.libraryResult = op->getResult(0);
    }
    if (auto it = libraryEpilogues_.find(op); it != libraryEpilogues_.end()) {
      // The library computes these: members of its group, its last value read by consumers.
      const GemmEpilogue &ep = it->second;
      llvm::append_range(work, ep.ops);
      for (Operation *o : ep.ops)
        rootGroup_[o] = g.id;
      g.roots.push_back(ep.result.getDefiningOp());
      g.libraryResult = ep.result;
    }
    llvm::SmallPtrSet<Operation *, 16> seen;
    while (!work.empty()) {
      Operation *o = work.pop_back_val();
      if (!seen.insert(o).second)
        continue;
      g.members.insert(o);
      for (Value v : o->getOperands())
        if (Operation *d = v.getDefiningOp()) {
          Status s = status_.lookup(d);
          if (s == Status::Inline || s == Status::Absorbed)
            work.push_back(d);
        }
    }
    rootGroup_[op] = g.id;
    parent_.push_back(g.id);
    groups_.push_back(std::move(g));
  }
  for (Group &g : groups_)
    computeDeps(g);
}

int FusionPolicy::producerGroup(Value v) {
  while (true) {
    Operation *d = v.getDefiningOp();
    if (!d)
      return -1;
    Status s = status_.lookup(d);
    if (s == Status::View) {
      v = d->getOperand(0);
      continue;
    }
    if (!computedByGroup(s))
      return -1;
    return find(rootGroup_.lookup(d));
  }
}

void FusionPolicy::computeDeps(Group &g) {
  g.deps.clear();
  for (Operation *m : g.members)
    for (Value v : m->getOperands()) {
      if (v.getDefiningOp() && g.members.contains(v.getDefiningOp()))
        continue;
      int p = producerGroup(v);
      if (p >= 0 && p != find(g.id))
        g.deps.insert(p);
    }
}

SmallVector<Operation *> FusionPolicy::consumerRootsOf(Operation *op) {
  SmallVector<Operation *> roots;
  for (Operation *user : op->getUsers()) {
    Status s = status_.lookup(user);
    if (s == Status::Root)
      roots.push_back(user);
    else if (s == Status::Inline || s == Status::LibraryEpilogue)
      llvm::append_range(roots, consumerRoots_.lookup(user));
  }
  llvm::erase_if(roots, [&](Operation *r) { return !rootGroup_.count(r); });
  return roots;
}

std::string FusionPolicy::orCycle(std::string why, int from, int to) {
  if (why.empty() && pathThroughOther(from, to))
    why = "would create a cycle between kernels";
  return why;
}

bool FusionPolicy::pathThroughOther(int from, int to) {
  // Is there a path from -> X -> ... -> to with X != from, to? Walk producers of `to`.
  from = find(from);
  to = find(to);
  SmallVector<int> work;
  llvm::DenseSet<int> seen;
  for (int d : group(to).deps)
    if (find(d) != from && find(d) != to)
      work.push_back(find(d));
  while (!work.empty()) {
    int g = work.pop_back_val();
    if (g == from)
      return true;
    if (g == to || !seen.insert(g).second)
      continue;
    for (int d : group(g).deps)
      work.push_back(find(d));
  }
  return false;
}

void FusionPolicy::merge(int into, int from) {
  Group &a = group(into);
  Group &b = group(from);
  for (Operation *r : b.roots)
    a.roots.push_back(r);
  for (Operation *m : b.members)
    a.members.insert(m);
  a.external |= b.external;
  a.sequential |= b.sequential;
  if (b.hasReduction) {
    a.hasReduction = true;
    a.rows = b.rows;
  }
  b.alive = false;
  parent_[b.id] = a.id;
  computeDeps(a);
}

//===--- Legality -----------------------------------------------------------------===//

std::string FusionPolicy::epilogueIllegality(Group &lib, Group &c) {
  if (c.external || c.sequential || c.hasReduction)
    return "not an elementwise consumer";
  Value result = lib.libraryResult;
  SymShape shape = symShapeOf(result);
  for (Operation *r : c.roots)
    for (Value v : r->getResults())
      if (symShapeOf(v) != shape)
        return "its iteration space differs from the library call's output";
  std::string why;
  llvm::DenseSet<std::pair<Value, Operation *>> dummy;
  std::set<std::pair<const void *, std::vector<const void *>>> visited;
  std::function<void(Value, const Index &)> walk = [&](Value v, const Index &idx) {
    if (!why.empty())
      return;
    std::vector<const void *> key;
    for (AffineExpr e : idx)
      key.push_back(e.getAsOpaquePointer());
    if (!visited.insert({v.getAsOpaquePointer(), key}).second)
      return;
    if (v == result) {
      if (idx != spaceIndex(v.getContext(), shape))
        why = "would read the library result at another element";
      return;
    }
    Operation *op = v.getDefiningOp();
    if (!op || !c.members.contains(op))
      return;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      auto sub = affineOperandIndex(op, i, idx);
      if (sub) {
        walk(op->getOperand(i), *sub);
        continue;
      }
      // Data-dependent read: fine unless it reaches the library result.
      SmallVector<Value> work{op->getOperand(i)};
      llvm::DenseSet<Value> seen;
      while (!work.empty() && why.empty()) {
        Value w = work.pop_back_val();
        if (!seen.insert(w).second)
          continue;
        if (w == result)
          why = "would read the library result at a data-dependent or clamped element";
        if (Operation *d = w.getDefiningOp(); d && c.members.contains(d))
          work.append(d->getOperands().begin(), d->getOperands().end());
      }
    }
  };
  for (Operation *r : c.roots)
    walk(r->getResult(0), spaceIndex(r->getContext(), shape));
  return why;
}

std::string FusionPolicy::rowIllegality(Group &p, Group &c) {
  if (c.external || c.sequential)
    return "the consumer is not a loop kernel over rows";
  const SymShape &rows = p.rows;
  if (c.hasReduction && c.rows != rows)
    return "the consumer's reductions run over other rows";
  // The merged group is legal when every reduction in it is read at the current row: walk from
  // every root through the members of both groups, composing index maps.
  auto isMember = [&](Operation *op) {
    return op && (p.members.contains(op) || c.members.contains(op));
  };
  MLIRContext *ctx = func_.getContext();

  // Each space: a shape and its row dims once known (a projection onto them reads the row).
  struct Space {
    SymShape shape;
    std::optional<SmallVector<int64_t>> rowDims;
  };
  std::vector<Space> spaces;
  std::string why;
  std::set<std::tuple<const void *, std::vector<const void *>, size_t>> visited;
  std::function<void(Value, const Index &, size_t)> walk = [&](Value v, const Index &idx,
                                                              size_t s) {
    if (!why.empty())
      return;
    std::vector<const void *> key;
    for (AffineExpr e : idx)
      key.push_back(e.getAsOpaquePointer());
    if (!visited.insert({v.getAsOpaquePointer(), key, s}).second)
      return;
    Operation *op = v.getDefiningOp();
    if (!isMember(op))
      return;
    if (isa<ReduceOp, ArgReduceOp>(op)) {
      SymShape vs = symShapeOf(v);
      auto dims = asProjection(idx, spaces[s].shape, vs);
      if (!dims) {
        // A permuted projection is a transposed read; anything else another row.
        bool permuted = idx.size() == shapeOf(v).size() &&
                        llvm::all_of(idx, [](AffineExpr e) { return isa<AffineDimExpr>(e); });
        why = permuted ? "would read the reduction at a transposed index"
                       : "would read the reduction at another row";
        return;
      }
      if (vs != rows) {
        why = "would read a reduction over other rows";
        return;
      }
      // Its operand is read over a space whose row dims are the kept dims.
      Value x = op->getOperand(0);
      SymShape xs = symShapeOf(x);
      SmallVector<int64_t> reduced, kept;
      if (auto r = dyn_cast<ReduceOp>(op))
        reduced.assign(r.getDims().begin(), r.getDims().end());
      else
        reduced.push_back(cast<ArgReduceOp>(op).getDim());
      for (int64_t d = 0; d < (int64_t)xs.size(); ++d)
        if (!llvm::is_contained(reduced, d))
          kept.push_back(xs[d] == SymExpr(1) ? -1 : d);
      // Over a space shaped like the reduced tensor, the rows must be the same dims (else the
      // kernel would walk the reduction's rows across the consumer's).
      if ((spaces[s].rowDims && *spaces[s].rowDims != *dims) ||
          (spaces[s].shape == xs && *dims != kept)) {
        why = "would read the reduction at a transposed index";
        return;
      }
      spaces[s].rowDims = *dims;
      spaces.push_back({xs, kept});
      walk(x, spaceIndex(ctx, xs), spaces.size() - 1);
      return;
    }
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      if (auto sub = affineOperandIndex(op, i, idx)) {
        walk(op->getOperand(i), *sub, s);
        continue;
      }
      // A data-dependent or clamped read: fine unless a reduction of the group is behind it.
      SmallVector<Value> work{op->getOperand(i)};
      llvm::DenseSet<Value> seen;
      while (!work.empty() && why.empty()) {
        Value w = work.pop_back_val();
        if (!seen.insert(w).second)
          continue;
        Operation *d = w.getDefiningOp();
        if (!isMember(d))
          continue;
        if (isa<ReduceOp, ArgReduceOp>(d))
          why = "would read the reduction at a data-dependent or clamped index";
        work.append(d->getOperands().begin(), d->getOperands().end());
      }
    }
  };
  for (Operation *r : llvm::concat<Operation *const>(c.roots, p.roots)) {
    for (Value y : r->getResults()) {
      SymShape shape = symShapeOf(y);
      Space space{shape, std::nullopt};
      if (shape == rows)
        space.rowDims = *asProjection(spaceIndex(ctx, shape), shape, rows);
      spaces.push_back(space);
      size_t s = spaces.size() - 1;
      walk(y, spaceIndex(ctx, shape), s);
      if (!why.empty())
        return why;
      if (!spaces[s].rowDims)
        return "the consumer's result does not iterate over the rows";
    }
  }
  return why;
}

//===--- Merging ------------------------------------------------------------------===//

void FusionPolicy::fuseEpilogues() {
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group &lib = groups_[i];
    if (!lib.alive || !lib.library)
      continue;
    Operation *libOp = lib.library;
    SmallVector<int> consumers;
    for (Operation *r : consumerRootsOf(lib.libraryResult.getDefiningOp()))
      consumers.push_back(find(rootGroup_[r]));
    llvm::sort(consumers);
    consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
    for (int ci : consumers) {
      Group &c = group(ci);
      if (!c.alive || find(ci) == find(lib.id))
        continue;
      Operation *croot = c.roots.front();
      std::string why = !samePlace(croot, libOp)
                            ? "a pipeline stage runs it in another micro-batch's place"
                            : orCycle(epilogueIllegality(lib, c), lib.id, ci);
      if (!why.empty()) {
        remark(croot, "not fused into the epilogue of " + describe(libOp) + ": " + why);
        continue;
      }
      remark(croot, "fused into the epilogue of " + describe(libOp) +
                        ": reads its result at the same element");
      merge(lib.id, ci);
    }
  }
}

void FusionPolicy::fuseRows() {
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < groups_.size(); ++i) {
      Group &p = groups_[i];
      if (!p.alive || !p.hasReduction || p.external || p.sequential)
        continue;
      // Consumer groups, in program order.
      std::set<std::pair<int, int>> consumers; // (position, group)
      for (Operation *r : p.roots)
        for (Operation *u : consumerRootsOf(r))
          if (!p.members.contains(u))
            consumers.insert({position_[u], find(rootGroup_[u])});
      Operation *reduction = nullptr;
      for (Operation *r : p.roots)
        if (isa<ReduceOp, ArgReduceOp>(r))
          reduction = r;
      for (auto [pos, ci] : consumers) {
        if (find(ci) == find(p.id))
          continue;
        Group &c = group(ci);
        Operation *croot = c.roots.front();
        std::string why = !samePlace(croot, p.roots.front())
                              ? "a pipeline stage runs it in another micro-batch's place"
                              : orCycle(rowIllegality(p, c), p.id, ci);
        if (!why.empty()) {
          remark(reduction, "not fused with its consumer " + describe(croot) + ": " + why);
          continue;
        }
        remark(reduction, "fused into the row kernel of its consumer " + describe(croot) +
                              ": it reads the reduction at the same row");
        merge(ci, p.id);
        changed = true;
        break;
      }
      if (changed)
        break;
    }
  }
}

void FusionPolicy::fuseHorizontal() {
  // Loop groups reading the same (non-constant, non-scalar) value.
  llvm::MapVector<Value, SmallVector<int>> readers;
  for (Group &g : groups_) {
    if (!g.alive || g.external || g.sequential)
      continue;
    llvm::SmallPtrSet<void *, 8> seenValues;
    for (Operation *m : g.members)
      for (Value v : m->getOperands()) {
        Operation *d = v.getDefiningOp();
        if ((d && g.members.contains(d)) || (d && isa<ConstantOp>(d)) ||
            (tensorType(v).hasStaticShape() && tensorType(v).getNumElements() <= 1))
          continue;
        if (seenValues.insert(v.getAsOpaquePointer()).second)
          readers[v].push_back(g.id);
      }
  }
  auto space = [&](Group &g) -> SymShape {
    if (g.hasReduction)
      return g.rows;
    return symShapeOf(g.roots.front()->getResult(0));
  };
  for (auto &[value, gs] : readers) {
    for (size_t i = 0; i < gs.size(); ++i) {
      for (size_t j = i + 1; j < gs.size(); ++j) {
        int a = find(gs[i]), b = find(gs[j]);
        if (a == b)
          continue;
        Group &ga = group(a), &gb = group(b);
        if (ga.hasReduction != gb.hasReduction || space(ga) != space(gb))
          continue;
        // A value recomputed for the backward pass (-tcc-remat) stays there: merged with the
        // forward group it copies, it would be computed (and kept) in the forward pass again.
        if (ga.roots.front()->hasAttr(TccDialect::kRecomputedAttrName) !=
            gb.roots.front()->hasAttr(TccDialect::kRecomputedAttrName))
          continue;
        if (!samePlace(ga.roots.front(), gb.roots.front()))
          continue;
        bool sameShapes = true;
        if (!ga.hasReduction)
          for (Operation *r : llvm::concat<Operation *const>(ga.roots, gb.roots))
            sameShapes &= r->getNumResults() == 1 && symShapeOf(r->getResult(0)) == space(ga);
        if (!sameShapes)
          continue;
        if (ga.deps.count(b) || gb.deps.count(a) || pathThroughOther(a, b) ||
            pathThroughOther(b, a))
          continue;
        remark(gb.roots.front(), "fused horizontally with " + describe(ga.roots.front()) +
                                     ": same iteration space, both read one input");
        int first = position_[ga.roots.front()] < position_[gb.roots.front()] ? a : b;
        merge(first, first == a ? b : a);
      }
    }
  }
}

//===--- Materialisation -----------------------------------------------------------===//

LogicalResult FusionPolicy::materialize() {
  Block &block = func_.getBody().front();
  Operation *ret = block.getTerminator();
  // A loop group reading a view of a value it computes itself takes the reshape in (an index
  // remap in its kernel): as a separate view node it would sit between the group and itself.
  for (Group &g : groups_) {
    if (!g.alive || g.external)
      continue;
    for (bool changed = true; changed;) {
      changed = false;
      for (Operation *m : llvm::to_vector(g.members))
        for (Value v : m->getOperands()) {
          Operation *d = v.getDefiningOp();
          if (!d || g.members.contains(d) || status_.lookup(d) != Status::View)
            continue;
          Operation *source = d->getOperand(0).getDefiningOp();
          while (source && !g.members.contains(source) && status_.lookup(source) == Status::View)
            source = source->getOperand(0).getDefiningOp();
          if (source && g.members.contains(source)) {
            g.members.insert(d);
            changed = true;
          }
        }
    }
  }
  // Nodes: alive groups and views; edges: producer -> consumer.
  struct Node {
    int group = -1;
    Operation *view = nullptr;
    int position;
    SmallVector<int> succs;
    int preds = 0;
  };
  std::vector<Node> nodes;
  DenseMap<int, int> groupNode;
  DenseMap<Operation *, int> viewNode;
  for (Group &g : groups_)
    if (g.alive) {
      // Its earliest root or reduction: a reduction merged into its consumer (a weight
      // gradient's sum into the optimizer update) runs where its inputs are ready, not where the
      // update was, and the values it reads die there. (Inlined pointwise members do not
      // count: a copy of an early op would pull its consumer forward.)
      int pos = INT_MAX;
      for (Operation *r : g.roots)
        pos = std::min(pos, position_[r]);
      for (Operation *m : g.members)
        if (isa<ReduceOp, ArgReduceOp>(m))
          pos = std::min(pos, position_[m]);
      groupNode[g.id] = nodes.size();
      nodes.push_back({g.id, nullptr, pos, {}, 0});
    }
  for (Operation *op : ops_)
    if (status_[op] == Status::View) {
      viewNode[op] = nodes.size();
      nodes.push_back({-1, op, position_[op], {}, 0});
    }
  auto nodeOfValue = [&](Value v) -> int {
    Operation *d = v.getDefiningOp();
    if (!d)
      return -1;
    Status s = status_.lookup(d);
    if (s == Status::View)
      return viewNode[d];
    if (computedByGroup(s))
      return groupNode[find(rootGroup_[d])];
    return -1;
  };
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::set<int> preds;
    if (nodes[n].view) {
      preds.insert(nodeOfValue(nodes[n].view->getOperand(0)));
    } else {
      Group &g = groups_[nodes[n].group];
      for (Operation *m : g.members)
        for (Value v : m->getOperands())
          if (!(v.getDefiningOp() && g.members.contains(v.getDefiningOp())))
            preds.insert(nodeOfValue(v));
    }
    preds.erase(-1);
    preds.erase(n);
    for (int p : preds) {
      nodes[p].succs.push_back(n);
      ++nodes[n].preds;
    }
  }
  // Sends and receives (pipeline stages) keep their program order: the stages' schedules are
  // what keeps them from waiting on each other.
  SmallVector<int> pointToPoint;
  for (size_t n = 0; n < nodes.size(); ++n)
    if (!nodes[n].view && llvm::any_of(groups_[nodes[n].group].roots,
                                       [](Operation *r) { return isa<SendOp, RecvOp>(r); }))
      pointToPoint.push_back(static_cast<int>(n));
  llvm::sort(pointToPoint, [&](int a, int b) { return nodes[a].position < nodes[b].position; });
  for (size_t k = 1; k < pointToPoint.size(); ++k) {
    nodes[pointToPoint[k - 1]].succs.push_back(pointToPoint[k]);
    ++nodes[pointToPoint[k]].preds;
  }
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (size_t n = 0; n < nodes.size(); ++n)
    if (nodes[n].preds == 0)
      ready.push({nodes[n].position, n});

  // Values read outside the group computing them: by other groups, views and the return.
  DenseSet<Value> readOutside;
  for (Value v : ret->getOperands())
    readOutside.insert(v);
  for (Node &node : nodes) {
    if (node.view) {
      readOutside.insert(node.view->getOperand(0));
      continue;
    }
    Group &g = groups_[node.group];
    for (Operation *m : g.members)
      for (Value v : m->getOperands())
        if (!(v.getDefiningOp() && g.members.contains(v.getDefiningOp())))
          readOutside.insert(v);
  }

  OpBuilder b(ret);
  DenseMap<Value, Value> mapped; // old value -> new value outside fusions
  auto lookup = [&](Value v) { return mapped.count(v) ? mapped[v] : v; };
  size_t emitted = 0;
  while (!ready.empty()) {
    int n = ready.top().second;
    ready.pop();
    ++emitted;
    for (int s : nodes[n].succs)
      if (--nodes[s].preds == 0)
        ready.push({nodes[s].position, s});
    if (Operation *view = nodes[n].view) {
      Operation *clone = b.clone(*view);
      clone->setOperand(0, lookup(view->getOperand(0)));
      mapped[view->getResult(0)] = clone->getResult(0);
      continue;
    }
    Group &g = groups_[nodes[n].group];
    SmallVector<Operation *> members(g.members.begin(), g.members.end());
    llvm::sort(members, [&](Operation *x, Operation *y) { return position_[x] < position_[y]; });
    // Inputs (splat constants are cloned instead) and results (read outside).
    llvm::SetVector<Value> inputs;
    SmallVector<Operation *> splats;
    for (Operation *m : members)
      for (Value v : m->getOperands()) {
        Operation *d = v.getDefiningOp();
        if (d && g.members.contains(d))
          continue;
        auto c = d ? dyn_cast<ConstantOp>(d) : ConstantOp();
        auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
        bool elementUses = llvm::all_of(v.getUses(), [&](OpOperand &use) {
          Operation *u = use.getOwner();
          if (!g.members.contains(u))
            return true;
          OpClass cls = classify(u, target_);
          return !(cls == OpClass::Library || cls == OpClass::WholeBuffer ||
                   status_.lookup(u) == Status::Absorbed ||
                   (isa<ScatterElementsOp, ScatterNDOp, DynamicUpdateSliceOp>(u) &&
                    use.getOperandNumber() == 0));
        });
        if (dense && dense.isSplat() && elementUses) {
          if (!llvm::is_contained(splats, d))
            splats.push_back(d);
          continue;
        }
        inputs.insert(v);
      }
    SmallVector<Value> results;
    for (Operation *r : g.roots)
      for (Value v : r->getResults())
        if (readOutside.contains(v))
          results.push_back(v);
    SmallVector<Value> newInputs;
    for (Value v : inputs)
      newInputs.push_back(lookup(v));
    auto fusion = b.create<FusionOp>(g.roots.front()->getLoc(), ValueRange(results).getTypes(),
                                     newInputs, g.external ? "extern" : "loop");
    Block *body = new Block;
    fusion.getBody().push_back(body);
    IRMapping map;
    for (Value v : inputs)
      map.map(v, body->addArgument(v.getType(), v.getLoc()));
    OpBuilder bb = OpBuilder::atBlockBegin(body);
    for (Operation *c : splats)
      bb.clone(*c, map);
    for (Operation *m : members)
      bb.clone(*m, map);
    SmallVector<Value> yielded;
    for (Value v : results)
      yielded.push_back(map.lookup(v));
    bb.create<YieldOp>(fusion.getLoc(), yielded);
    for (auto [old, now] : llvm::zip(results, fusion.getResults()))
      mapped[old] = now;
  }
  if (emitted != nodes.size())
    return func_.emitError("internal: fusion groups depend on each other in a cycle (")
           << (nodes.size() - emitted) << " of " << nodes.size()
           << " groups unplaced); please report this model";
  for (OpOperand &operand : ret->getOpOperands())
    operand.set(lookup(operand.get()));
  // The old ops are now unused (constants stay where still used).
  for (Operation *op : llvm::reverse(ops_)) {
    if (isa<ConstantOp>(op) && !op->use_empty())
      continue;
    op->dropAllUses();
    op->erase();
  }
  return success();
}

LogicalResult FusionPolicy::run() {
  decide();
  buildGroups();
  fuseEpilogues();
  fuseRows();
  fuseHorizontal();
  return materialize();
}

struct FusePass : impl::FuseBase<FusePass> {
  using FuseBase::FuseBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.getBody().empty() || !llvm::hasSingleElement(func.getBody()))
      return;
    if (failed(convertIfs(func)))
      return signalPassFailure();
    for (Operation &op : func.getBody().front())
      if (isa<FusionOp>(op)) {
        op.emitError("the function is already fused");
        return signalPassFailure();
      }
    std::optional<Target> t = parseTarget(target);
    if (!t) {
      func.emitError("-tcc-fuse: unknown target '") << target << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    if (failed(FusionPolicy(func, explain, *t).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace tcc
