//===- Layout.cpp - Channels-last convolutions, and layout changes sunk and cancelled -===//
//
// ONNX graphs are channels-first (NCHW). The CPU runtime's pointwise and depthwise convolutions
// are faster channels-last (lib/Runtime/ChannelsLast.h: a 1x1 convolution is then one GEMM
// whose rows are the positions; a depthwise one a loop vectorised over channels, with no padded
// copies). This pass gives each convolution the layout the cost model picks, and moves the
// layout changes that it needs to where they cost least:
//
//  1. Choice. A candidate is an f32 2-D convolution without input dilation that is pointwise
//     (1x1, stride 1, unpadded, one group), depthwise (one input and one output channel per
//     group) or dense with small filters (one group, at most kDenseDirectMaxReduction input
//     values per output: a stem on an image's channels). `mode=nhwc` takes every candidate, `mode=nchw` none, `mode=auto` the candidates
//     of each region whose estimated gain beats the layout copies at its edges (step 4);
//     a candidate expected to lose joins a region when it loses less than the two copies
//     that keeping it channels-first would need.
//  2. Rewrite. A chosen conv(x) becomes to_first(conv_cl(to_last(x))): tcc.conv with
//     `channels_last` between two transposes marked `tcc.layout`.
//  3. Sinking. A marked to_first transpose moves below each user that does not care about
//     the layout: element-wise ops (unary, binary, compare, select, cast; their other
//     operands must be marked transposes too, or constants and broadcasts, which are re-laid
//     out at compile time), pooling (reduce_window, its window permuted), reductions (their
//     dims permuted), concatenation (its axis permuted) and padding. The user is rebuilt on
//     the channels-last values and one marked to_first follows it. A to_last of a to_first
//     cancels: between two channels-last convolutions joined by element-wise work, no copy is
//     left. Repeated until nothing moves.
//  4. Auto. Regions are the sets of chosen convolutions connected through sunk ops. A region
//     is kept when sum over its convolutions of the estimated time saved exceeds the time of
//     the marked transposes left at its edges (bytes moved at a copy's speed); otherwise its
//     convolutions are restored (the pass runs again without them).
//
// The marked transposes that remain are the layout copies; `--report` counts them
// (layout_copies, layout_copy_bytes) and `explain` prints every decision as a remark.
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Passes.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Runtime/ConvPaths.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"

#include <cstdio>

namespace tcc {
#define GEN_PASS_DEF_LAYOUT
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

/// [0, r-1, 1, ..., r-2]: channels-last to channels-first (result dim i = operand dim p[i]).
SmallVector<int64_t> toFirstPerm(int64_t rank) {
  SmallVector<int64_t> p{0, rank - 1};
  for (int64_t d = 1; d + 1 < rank; ++d)
    p.push_back(d);
  return p;
}
/// [0, 2, ..., r-1, 1]: channels-first to channels-last.
SmallVector<int64_t> toLastPerm(int64_t rank) {
  SmallVector<int64_t> p{0};
  for (int64_t d = 2; d < rank; ++d)
    p.push_back(d);
  p.push_back(1);
  return p;
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The channels-last type of a channels-first value of type t (toFirst: last -> first).
RankedTensorType permuted(RankedTensorType t, ArrayRef<int64_t> toFirst) {
  SmallVector<int64_t> shape(t.getRank());
  for (size_t i = 0; i < toFirst.size(); ++i)
    shape[toFirst[i]] = t.getDimSize(i);
  return RankedTensorType::get(shape, t.getElementType());
}

/// Is `op` a transpose this pass made, with permutation `perm`?
bool isLayoutTranspose(Operation *op, ArrayRef<int64_t> perm) {
  auto t = dyn_cast_or_null<TransposeOp>(op);
  return t && t->hasAttr(kLayoutCopyAttrName) && t.getPerm() == perm;
}

/// Where channels-first dim d lives channels-last (to_first's perm maps last -> first: first
/// dim i = last dim perm[i]).
int64_t lastDimOf(ArrayRef<int64_t> toFirst, int64_t d) { return toFirst[d]; }

/// A per-dim attribute of the channels-first op, for the channels-last one.
SmallVector<int64_t> permuteAttr(ArrayRef<int64_t> first, ArrayRef<int64_t> toFirst) {
  SmallVector<int64_t> last(first.size());
  for (size_t i = 0; i < first.size(); ++i)
    last[lastDimOf(toFirst, i)] = first[i];
  return last;
}

/// Whether conv is a dense one with small filters, which the runtime runs channels-last as a
/// direct loop (kDenseDirectMaxReduction): a stem on the image's few channels.
bool isDenseDirect(ConvOp c) {
  auto w = typeOf(c.getWeight());
  return c.getGroups() == 1 && w.getRank() == 4 &&
         (w.getDimSize(2) > 1 || w.getDimSize(3) > 1) &&
         w.getNumElements() / std::max<int64_t>(1, w.getDimSize(0)) <=
             rt::kDenseDirectMaxReduction;
}

/// Whether conv is one the runtime runs faster channels-last.
bool isCandidate(ConvOp c) {
  auto x = typeOf(c.getInput()), w = typeOf(c.getWeight());
  if (c.getChannelsLast() || !x.getElementType().isF32() || x.getRank() != 4 ||
      llvm::any_of(c.getLhsDilation(), [](int64_t d) { return d != 1; }))
    return false;
  int64_t groups = c.getGroups(), cin = x.getDimSize(1), cout = w.getDimSize(0);
  bool pointwise = groups == 1 && w.getDimSize(2) == 1 && w.getDimSize(3) == 1 &&
                   llvm::all_of(c.getStrides(), [](int64_t s) { return s == 1; }) &&
                   llvm::all_of(c.getPadLow(), [](int64_t p) { return p == 0; }) &&
                   llvm::all_of(c.getPadHigh(), [](int64_t p) { return p == 0; });
  bool depthwise = groups == cin && groups == cout && w.getDimSize(1) == 1;
  return pointwise || depthwise || isDenseDirect(c);
}

/// Estimated time (ns) a candidate saves channels-last (negative: it loses), fitted to 295
/// convolutions of MobileNetV2/V3, EfficientNet-B0, ResNet-50, CenterNet and DeepLabV3 on an
/// AMD EPYC (Zen 4), 1 thread, each timed in both layouts (`tcc profile --layout nchw|nhwc`):
///  - depthwise, per multiply-add: the channels-first path copies every plane into padded
///    phase planes first, and the channels-last one (AVX-512) keeps a 3x3 filter's weights and
///    a group of columns' inputs in registers; refitted on a Zen 5 to the 63 depthwise layers
///    of these models (`--layout nchw|nhwc`): ~0.16 ns saved on maps of at most 64 output
///    positions, ~0.052 up to 256, ~0.037 up to 1024, ~0.017 on larger ones; strided, 1.6
///    times that and at least ~0.045 (the channels-first path's phase planes cost most);
///  - pointwise, as a share of the channels-first GEMM (~40 multiply-adds a ns): on one
///    position (a squeeze-excitation's FC) channels-first runs a 16-column tile for one
///    column: ~0.3 ns a multiply-add saved; up to 28 output channels channels-first reads the
///    input in place and channels-last fills a fraction of its 32-column tiles: ~60% lost; with
///    weights of at most 160k values, whole 14-row tiles save ~20% on maps of at most 64
///    positions, ~10% up to 200; larger weights on at most 64 positions ~5%; otherwise ~10%
///    lost (large maps, large weights: the rows-as-positions GEMM packs the input and blocks
///    worse);
///  - dense with small filters (a stem; 10 shapes from 3 to 16 input channels, 1x1 to 7x7):
///    channels-first, an im2col GEMM of short k at ~35 multiply-adds a ns; channels-last, the
///    direct loop at ~45 on the output channels rounded up to vectors of 16.
double estimatedGainNs(ConvOp c) {
  auto y = typeOf(c.getResult()), w = typeOf(c.getWeight());
  double outputs = (double)y.getNumElements();
  double positions = outputs / (double)std::max<int64_t>(1, y.getDimSize(0) * y.getDimSize(1));
  double macs = outputs * (double)(w.getNumElements() / std::max<int64_t>(1, w.getDimSize(0)));
  if (isDenseDirect(c)) {
    // Channels-first, the im2col GEMM of a short k runs at ~35 multiply-adds a ns; the direct
    // loop at ~45 on the output channels rounded up to whole vectors of 16.
    int64_t cout = w.getDimSize(0);
    return macs / 35.0 - macs * (double)((cout + 15) / 16 * 16) / (double)cout / 45.0;
  }
  if (c.getGroups() > 1) { // depthwise
    const double perMac = positions <= 64     ? 0.16
                          : positions <= 256  ? 0.052
                          : positions <= 1024 ? 0.037
                                              : 0.017;
    if (llvm::any_of(c.getStrides(), [](int64_t s) { return s > 1; }))
      return std::max(1.6 * perMac, 0.045) * macs;
    return perMac * macs;
  }
  constexpr double kMacsPerNs = 40.0;
  double gemmNs = macs / kMacsPerNs;
  int64_t cin = w.getDimSize(1), cout = w.getDimSize(0);
  if (positions == 1)
    return 0.3 * macs;
  if (cout <= 28)
    return -0.6 * gemmNs;
  bool smallWeights = cin * cout <= 160 * 1024;
  if (positions <= 64)
    return (smallWeights ? 0.2 : 0.05) * gemmNs;
  if (positions <= 200 && smallWeights)
    return 0.1 * gemmNs;
  return -0.1 * gemmNs;
}

/// "12.3" for 12345 ns.
std::string microseconds(double ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", ns / 1000);
  return text;
}

/// Estimated time (ns) of a layout copy of `bytes`: read and written at ~24 GB/s (the
/// generated transposes, in 16x16 tiles through registers, measured 19-33 GB/s with their fused
/// element-wise work in DeepLabV3: 960x16x16 to channels-last 62 us, back with a hard swish
/// and a scale 104 us; Zen 5, 1 thread).
double copyNs(int64_t bytes) { return 2.0 * (double)bytes / 24.0; }

/// What leaving c channels-first between channels-last neighbours would cost: copies of its
/// input and its result. A candidate that loses less than that joins its neighbours' region
/// (whose gain it lowers) rather than cut it in two.
double copiesAroundNs(ConvOp c) {
  return copyNs(CoreBuilder::bytesOf(c.getInput())) + copyNs(CoreBuilder::bytesOf(c.getResult()));
}

class LayoutRewriter {
public:
  LayoutRewriter(func::FuncOp f, bool explain) : f_(f), explain_(explain) {}

  /// Steps 2 and 3 for `chosen`.
  void run(ArrayRef<ConvOp> chosen) {
    for (ConvOp c : chosen)
      rewriteConv(c);
    while (!work_.empty()) {
      TransposeOp t = work_.pop_back_val();
      if (t->use_empty()) {
        t->erase();
        continue;
      }
      sink(t);
    }
  }

  /// Marked transposes left, for step 4 and the report.
  SmallVector<TransposeOp> copies() {
    SmallVector<TransposeOp> out;
    f_.walk([&](TransposeOp t) {
      if (t->hasAttr(kLayoutCopyAttrName))
        out.push_back(t);
    });
    return out;
  }

private:
  TransposeOp mark(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> perm) {
    auto t = b.create<TransposeOp>(loc, x, perm);
    t->setAttr(kLayoutCopyAttrName, b.getUnitAttr());
    return t;
  }

  /// A layout copy `perm` of v made already, before b's insertion point (a block's input read
  /// by two channels-last convolutions, or by one and the block's residual add); null if none.
  static Value existingCopy(OpBuilder &b, Value v, ArrayRef<int64_t> perm) {
    Operation *at = b.getInsertionBlock()->empty() ? nullptr : &*b.getInsertionPoint();
    for (Operation *u : v.getUsers())
      if (isLayoutTranspose(u, perm) && at && u->getBlock() == at->getBlock() &&
          u->isBeforeInBlock(at))
        return u->getResult(0);
    return {};
  }

  /// to_last(v): cancels against a marked to_first, or reuses an earlier to_last of v.
  Value toLast(OpBuilder &b, Location loc, Value v) {
    int64_t rank = typeOf(v).getRank();
    if (isLayoutTranspose(v.getDefiningOp(), toFirstPerm(rank)))
      return v.getDefiningOp()->getOperand(0);
    if (Value copy = existingCopy(b, v, toLastPerm(rank)))
      return copy;
    return mark(b, loc, v, toLastPerm(rank));
  }

  void rewriteConv(ConvOp c) {
    OpBuilder b(c);
    Location loc = c.getLoc();
    Value x = toLast(b, loc, c.getInput());
    auto conv = b.create<ConvOp>(loc, x, c.getWeight(), c.getStrides(), c.getPadLow(),
                                 c.getPadHigh(), c.getLhsDilation(), c.getRhsDilation(),
                                 c.getGroups(), /*channels_last=*/true);
    TransposeOp back = mark(b, loc, conv.getResult(), toFirstPerm(4));
    c.getResult().replaceAllUsesWith(back.getResult());
    c->erase();
    work_.push_back(back);
    if (explain_)
      emitRemark(conv.getLoc(), "channels-last convolution");
  }

  /// The channels-last form of `v`, an operand of a user of a sunk to_first: a marked to_first
  /// (its input), or something re-laid out at compile time (a constant, a broadcast); null when
  /// it would need a copy.
  Value relaid(OpBuilder &b, Value v, ArrayRef<int64_t> toFirst) {
    Operation *d = v.getDefiningOp();
    if (isLayoutTranspose(d, toFirst))
      return d->getOperand(0);
    SmallVector<int64_t> toLast(toFirst.size());
    for (size_t i = 0; i < toFirst.size(); ++i)
      toLast[toFirst[i]] = i;
    if (Value copy = existingCopy(b, v, toLast)) // made for another user already
      return copy;
    if (auto c = dyn_cast_or_null<ConstantOp>(d)) {
      auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
      if (attr && attr.isSplat()) // any shape: the splat of the permuted type
        return b.create<ConstantOp>(
            c.getLoc(), SplatElementsAttr::get(permuted(typeOf(v), toFirst),
                                               attr.getSplatValue<Attribute>()));
      return b.create<TransposeOp>(c.getLoc(), v, toLast); // folded by -tcc-fold-constants
    }
    if (auto bc = dyn_cast_or_null<BroadcastInDimOp>(d)) {
      // Operand dim i went to first dim dims[i], now to last dim toFirst[dims[i]]; the dims
      // must increase, so the operand is transposed to that order first.
      ArrayRef<int64_t> dims = bc.getDims();
      SmallVector<int64_t> order = llvm::to_vector(llvm::seq<int64_t>(0, dims.size()));
      llvm::sort(order, [&](int64_t a, int64_t c2) { return toFirst[dims[a]] < toFirst[dims[c2]]; });
      SmallVector<int64_t> newDims;
      for (int64_t i : order)
        newDims.push_back(toFirst[dims[i]]);
      Value x = bc.getX();
      if (!llvm::equal(order, llvm::seq<int64_t>(0, order.size())))
        x = b.create<TransposeOp>(bc.getLoc(), x, order);
      return b.create<BroadcastInDimOp>(bc.getLoc(), permuted(typeOf(v), toFirst), x, newDims);
    }
    return {};
  }

  /// Step 3 for one user of `t` (a marked to_first); true if it moved below.
  bool sinkInto(TransposeOp t, Operation *user) {
    ArrayRef<int64_t> toFirst = t.getPerm();
    OpBuilder b(user);
    Location loc = user->getLoc();
    Operation *rebuilt = nullptr;
    auto permutedShape = [&](Value v) { return permuted(typeOf(v), toFirst); };
    if (isa<UnaryOp, BinaryOp, CompareOp, SelectOp, CastOp>(user)) {
      SmallVector<Value> operands;
      for (Value o : user->getOperands()) {
        if (typeOf(o).getRank() != (int64_t)toFirst.size())
          return false;
        Value r = relaid(b, o, toFirst);
        if (!r)
          return false;
        operands.push_back(r);
      }
      OperationState state(loc, user->getName(), operands,
                           TypeRange{permutedShape(user->getResult(0))}, user->getAttrs());
      rebuilt = b.create(state);
    } else if (auto w = dyn_cast<ReduceWindowOp>(user)) {
      rebuilt = b.create<ReduceWindowOp>(
          loc, w.getKind(), t.getX(),
          permuteAttr(w.getWindow(), toFirst), permuteAttr(w.getStrides(), toFirst),
          permuteAttr(w.getPadLow(), toFirst), permuteAttr(w.getPadHigh(), toFirst),
          permuteAttr(w.getDilations(), toFirst));
    } else if (auto p = dyn_cast<PadOp>(user); p && p.getX() == t.getResult()) {
      rebuilt = b.create<PadOp>(loc, t.getX(), p.getValue(),
                                permuteAttr(p.getLow(), toFirst), permuteAttr(p.getHigh(), toFirst),
                                p.getMode());
    } else if (auto c = dyn_cast<ConcatOp>(user)) {
      SmallVector<Value> inputs;
      for (Value in : c.getInputs()) {
        Value r = relaid(b, in, toFirst);
        if (!r)
          return false;
        inputs.push_back(r);
      }
      rebuilt = b.create<ConcatOp>(loc, inputs, lastDimOf(toFirst, c.getAxis()));
    } else if (auto r = dyn_cast<ReduceOp>(user)) {
      // Reduced dims permuted; the kept dims keep their relative order or get a transpose.
      SmallVector<int64_t> dims;
      for (int64_t d : r.getDims())
        dims.push_back(lastDimOf(toFirst, d));
      llvm::sort(dims);
      auto red = b.create<ReduceOp>(loc, r.getKind(), t.getX(), dims);
      SmallVector<int64_t> keptLast; // channels-last dims kept, in the first layout's order
      for (int64_t d = 0; d < (int64_t)toFirst.size(); ++d)
        if (!llvm::is_contained(r.getDims(), d))
          keptLast.push_back(lastDimOf(toFirst, d));
      SmallVector<int64_t> sorted = keptLast;
      llvm::sort(sorted);
      Value result = red.getResult();
      if (sorted != keptLast) { // result dim i = reduced dim at the position of keptLast[i]
        SmallVector<int64_t> perm;
        for (int64_t d : keptLast)
          perm.push_back(llvm::find(sorted, d) - sorted.begin());
        result = mark(b, loc, result, perm).getResult();
      }
      r.getResult().replaceAllUsesWith(result);
      eraseUser(r, t);
      return true;
    } else {
      return false;
    }
    TransposeOp back = mark(b, loc, rebuilt->getResult(0), toFirst);
    user->getResult(0).replaceAllUsesWith(back.getResult());
    eraseUser(user, t);
    work_.push_back(back);
    return true;
  }

  /// Erases a user that moved below `t`. Its other marked operands lost a user: they are queued
  /// again, and run() erases those left without users or tries them again (what blocked them
  /// may have been this user). Never erased here: one may already wait in the queue.
  void eraseUser(Operation *user, TransposeOp t) {
    SmallVector<Value> operands(user->getOperands());
    user->erase();
    for (Value o : operands) {
      auto other = o.getDefiningOp<TransposeOp>();
      if (other && other != t && other->hasAttr(kLayoutCopyAttrName) &&
          !llvm::is_contained(work_, other))
        work_.push_back(other);
    }
  }

  /// Sinks t below every user that allows it, and cancels to_last(t).
  void sink(TransposeOp t) {
    SmallVector<int64_t> toLastP = toLastPerm(t.getPerm().size());
    bool moved = true;
    while (moved && !t->use_empty()) {
      moved = false;
      for (Operation *user : llvm::make_early_inc_range(t->getUsers())) {
        if (isLayoutTranspose(user, toLastP)) { // to_last(to_first(x)) = x
          user->getResult(0).replaceAllUsesWith(t.getX());
          user->erase();
          moved = true;
          break;
        }
        if (sinkInto(t, user)) {
          moved = true;
          break;
        }
      }
    }
    if (t->use_empty())
      t->erase();
  }

  func::FuncOp f_;
  bool explain_;
  SmallVector<TransposeOp> work_;
};

struct LayoutPass : impl::LayoutBase<LayoutPass> {
  using LayoutBase::LayoutBase;

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (mode != "auto" && mode != "nhwc" && mode != "nchw") {
      f.emitError("-tcc-layout: mode '") << mode << "': expected auto, nhwc or nchw";
      return signalPassFailure();
    }
    if (mode == "nchw")
      return;
    SmallVector<ConvOp> candidates;
    f.walk([&](ConvOp c) {
      if (isCandidate(c))
        candidates.push_back(c);
    });
    if (candidates.empty())
      return;
    if (mode == "nhwc") {
      LayoutRewriter(f, explain).run(candidates);
    } else {
      // auto: the candidates expected to gain, then their regions' copies (step 4).
      SmallVector<ConvOp> gaining;
      for (ConvOp c : candidates) {
        double gain = estimatedGainNs(c), copies = copiesAroundNs(c);
        if (gain > -copies)
          gaining.push_back(c);
        else if (explain)
          emitRemark(c.getLoc()) << "stays channels-first: channels-last would cost ~"
                                 << microseconds(-gain) << " us more, more than copies of its "
                                 << "input and result (~" << microseconds(copies) << " us)";
      }
      if (!gaining.empty())
        chooseAndRewrite(f, gaining);
    }
    eraseDeadOps(f);
  }

  /// The broadcasts and constants the rewritten ops no longer read.
  static void eraseDeadOps(func::FuncOp f) {
    SmallVector<Operation *> ops;
    f.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : llvm::reverse(ops))
      if (isa<ConstantOp, BroadcastInDimOp, TransposeOp>(op) && op->use_empty())
        op->erase();
  }

  /// What step 4 finds for one candidate: its region's estimated gain and copy cost.
  struct RegionEstimate {
    double gain = 0, cost = 0;
    bool pays() const { return gain > cost; }
  };

  /// Step 4 on a copy of f with `candidates` channels-last: each one's region estimate.
  static SmallVector<RegionEstimate> estimateRegions(func::FuncOp f,
                                                     ArrayRef<ConvOp> candidates) {
    // The same convolutions in a detached copy (erased below): walk order matches.
    llvm::DenseSet<Operation *> given;
    for (ConvOp c : candidates)
      given.insert(c);
    SmallVector<int64_t> positions; // of the given convs among all convs, in walk order
    int64_t index = 0;
    f.walk([&](ConvOp c) {
      if (given.contains(c))
        positions.push_back(index);
      ++index;
    });
    auto trial = cast<func::FuncOp>(f->clone());
    SmallVector<ConvOp> all, trialConvs;
    trial.walk([&](ConvOp c) { all.push_back(c); });
    for (int64_t p : positions)
      trialConvs.push_back(all[p]);
    LayoutRewriter trialRewriter(trial, /*explain=*/false);
    trialRewriter.run(trialConvs);
    // Channels-last values, in program order: a channels-last conv's result, a to_last copy,
    // and whatever is computed from one (but for a to_first copy).
    llvm::DenseSet<Value> last;
    llvm::EquivalenceClasses<Operation *> regions;
    SmallVector<Operation *> convs; // the trial's channels-last convs, in program order
    trial.walk([&](Operation *op) {
      regions.insert(op);
      auto t = dyn_cast<TransposeOp>(op);
      bool copy = t && t->hasAttr(kLayoutCopyAttrName);
      if (auto c = dyn_cast<ConvOp>(op); c && c.getChannelsLast())
        convs.push_back(op);
      bool anyLast = false;
      for (Value v : op->getOperands())
        if (last.contains(v)) {
          anyLast = true;
          if (!copy)
            regions.unionSets(v.getDefiningOp(), op);
        }
      bool result = copy ? t.getPerm() == ArrayRef<int64_t>(toLastPerm(t.getPerm().size()))
                         : anyLast || (isa<ConvOp>(op) && cast<ConvOp>(op).getChannelsLast());
      if (result)
        for (Value r : op->getResults())
          last.insert(r);
    });
    llvm::DenseMap<Operation *, RegionEstimate> byLeader;
    for (auto [op, original] : llvm::zip(convs, candidates))
      byLeader[regions.getLeaderValue(op)].gain += estimatedGainNs(ConvOp(original));
    for (TransposeOp t : trialRewriter.copies()) {
      int64_t bytes = CoreBuilder::bytesOf(t.getResult());
      // The channels-last side: the producer of a to_first's input, the user of a to_last.
      Operation *side = last.contains(t.getX()) ? t.getX().getDefiningOp()
                        : t->use_empty()        ? nullptr
                                                : *t->getUsers().begin();
      if (side)
        byLeader[regions.getLeaderValue(side)].cost += copyNs(bytes);
    }
    SmallVector<RegionEstimate> out;
    for (Operation *op : convs)
      out.push_back(byLeader[regions.getLeaderValue(op)]);
    trial->erase();
    return out;
  }

  /// Step 4: keep the regions that pay, rewrite those on the function. A region that does not
  /// pay is tried again without its members expected to lose (a stem that gains, joined
  /// through pooling to large pointwise convolutions that lose), until every region left
  /// pays or has no such member.
  void chooseAndRewrite(func::FuncOp f, ArrayRef<ConvOp> candidates) {
    SmallVector<ConvOp> trying(candidates);
    SmallVector<RegionEstimate> estimates;
    llvm::DenseMap<Operation *, RegionEstimate> dropped; // with the estimate that dropped it
    while (true) {
      estimates = estimateRegions(f, trying);
      SmallVector<ConvOp> next;
      for (auto [conv, e] : llvm::zip(trying, estimates)) {
        if (!e.pays() && estimatedGainNs(conv) <= 0)
          dropped[conv] = e;
        else
          next.push_back(conv);
      }
      if (next.size() == trying.size() || next.empty())
        break;
      trying = std::move(next);
    }
    SmallVector<ConvOp> chosen;
    for (ConvOp conv : candidates) {
      auto it = llvm::find(trying, conv);
      RegionEstimate e = it != trying.end() ? estimates[it - trying.begin()] : dropped[conv];
      bool keep = it != trying.end() && e.pays();
      if (explain) {
        InFlightDiagnostic d = emitRemark(conv.getLoc());
        d << (keep ? "channels-last" : "stays channels-first") << ": its region saves ~"
          << microseconds(e.gain) << " us of convolution, its layout copies cost ~"
          << microseconds(e.cost) << " us";
        if (dropped.count(conv))
          d << "; it loses ~" << microseconds(-estimatedGainNs(conv))
            << " us itself, and the region was tried again without it";
      }
      if (keep)
        chosen.push_back(conv);
    }
    LayoutRewriter(f, /*explain=*/false).run(chosen);
  }
};

} // namespace
} // namespace tcc
