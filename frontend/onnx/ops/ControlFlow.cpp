//===- ControlFlow.cpp - ONNX If, Loop and Scan -> tcc.if / tcc.loop ----------===//
//
// Subgraphs are imported by inlining: a graph is imported into a scratch block whose arguments
// stand for its inputs, then its ops move to the builder's insertion point and the arguments are
// replaced by the actual values. The one primitive serves region bodies (tcc.if branches, tcc.loop
// bodies, where Scan first slices out its elements) and straight-line code (an If with a
// compile-time condition, an unrolled Loop).
//
// - If: tcc.if with both branches. When the condition is a compile-time constant only the taken
//   branch is imported, inline; that also allows branches of different types (which otherwise
//   makes the condition required at compile time).
// - Loop: tcc.loop (body arguments (iteration, cond, carried...)). Absent M is INT64_MAX, absent
//   cond true. Scan outputs get one row per iteration, so they need M at compile time; if the
//   condition ends the loop earlier, the interpreter reports the mismatch at run time. When the
//   body cannot be a loop body (it needs the iteration number at compile time, e.g. as a Slice
//   start, or a carried value changes shape) and M is known, the loop is unrolled instead (at
//   most kMaxUnrolledIterations), each copy of the body seeing its iteration number as a
//   constant, and stopping where the condition folds to false.
// - Scan: a tcc.loop over the (static) sequence length whose body takes element t of each scan
//   input with tcc.dynamic_slice; the loop stacks the scan outputs, which are then reversed and
//   transposed into place. Scan-8 runs one such loop per batch row, masking iterations past the
//   row's sequence_lens with tcc.select. Scan is never unrolled: its body sees no iteration
//   number, so one copy of the body always works, and unrolling would only grow the IR with the
//   sequence length.
//
//===----------------------------------------------------------------------===//
#include "../NodeContext.h"

#include "tcc/Frontend/OnnxModel.h"
#include "tcc/Interp/Interpreter.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

using namespace mlir;

namespace tcc::onnx_import {
namespace {

/// Loops whose body must be unrolled are unrolled up to this many iterations.
constexpr int64_t kMaxUnrolledIterations = 1024;

std::string str(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

/// A block under construction. Until it moves to its op (whose result types are only known once
/// the block is built), it lives in a region of a placeholder tcc.if at the builder's insertion
/// point, so that it is part of the IR: verifying the ops built in it (a tcc.if in a loop body,
/// say) sees where the values they use are defined. The placeholder goes away in any case; when
/// an import failed, the block goes with it.
class ScratchBlock {
public:
  explicit ScratchBlock(CoreBuilder &b) {
    Value unused = b.splat(RankedTensorType::get({}, b.builder().getI1Type()), 1);
    holder_ = b.builder().create<IfOp>(b.location(), TypeRange{}, unused);
    block_ = new Block;
    holder_.getThenRegion().push_back(block_);
  }
  ScratchBlock(const ScratchBlock &) = delete;
  ScratchBlock &operator=(const ScratchBlock &) = delete;
  ~ScratchBlock() {
    Operation *cond = holder_.getCond().getDefiningOp();
    if (block_)
      block_->dropAllDefinedValueUses();
    holder_->erase();
    cond->erase();
  }
  Block *get() { return block_; }
  /// Moves the block to the end of `region`.
  void moveTo(Region &region) {
    region.getBlocks().splice(region.end(), holder_.getThenRegion().getBlocks(), block_);
    block_ = nullptr;
  }

private:
  IfOp holder_;
  Block *block_;
};

RankedTensorType scalarType(Type element) { return RankedTensorType::get({}, element); }

Value boolConstant(CoreBuilder &b, bool value) {
  return b.splat(scalarType(b.builder().getI1Type()), value ? 1 : 0);
}

/// A one-element value as a 0-d tensor of `element` type.
Value toScalar(NodeContext &n, Value v, Type element, const std::string &what) {
  auto type = CoreBuilder::typeOf(v);
  if (type.getNumElements() != 1)
    n.fail(what + " must have one element, got " + str(type));
  if (type.getRank() != 0)
    v = n.b().reshape(v, {});
  return n.b().cast(v, element);
}

/// Imports `graph` at the end of `block`, its inputs bound to `inputs` (constants stay
/// constants, so the body folds where it can).
std::vector<Value> inlineInto(NodeContext &n, Block *block, const onnx::GraphProto &graph,
                              ArrayRef<Value> inputs) {
  OpBuilder::InsertionGuard guard(n.b().builder());
  n.b().builder().setInsertionPointToEnd(block);
  return n.inlineSubgraph(graph, inputs, "");
}

void yieldAtEnd(NodeContext &n, Block *block, ArrayRef<Value> values) {
  OpBuilder::InsertionGuard guard(n.b().builder());
  n.b().builder().setInsertionPointToEnd(block);
  n.b().builder().create<YieldOp>(n.b().location(), ValueRange(values));
}

void setOutputs(NodeContext &n, ArrayRef<Value> values) {
  for (size_t i = 0; i < values.size() && i < n.numOutputs(); ++i)
    n.setOutput(i, values[i]);
}

/// Values of one type stacked on a new leading dim.
Value stack(NodeContext &n, ArrayRef<Value> values, const std::string &what) {
  SmallVector<Value> rows;
  for (Value v : values) {
    if (v.getType() != values.front().getType())
      n.fail(what + " changes type across iterations (" + str(values.front().getType()) + " vs " +
             str(v.getType()) + ")");
    SmallVector<int64_t> shape{1};
    llvm::append_range(shape, CoreBuilder::shapeOf(v));
    rows.push_back(n.b().reshape(v, shape));
  }
  return rows.size() == 1 ? rows.front() : n.b().concat(rows, 0);
}

// ---- If ----

void lowerIf(NodeContext &n) {
  const onnx::GraphProto &thenGraph = n.attrGraph("then_branch");
  const onnx::GraphProto &elseGraph = n.attrGraph("else_branch");
  auto importTaken = [&](const Tensor &cond) {
    setOutputs(n, n.inlineSubgraph(cond.getInt(0) ? thenGraph : elseGraph, {}, ""));
  };
  if (auto cond = n.constantInput(0)) {
    if (cond->numElements() != 1)
      n.fail("the condition must have one element, got " + cond->typeString());
    importTaken(*cond);
    return;
  }
  Value cond = toScalar(n, n.input(0), n.b().builder().getI1Type(), "the condition");

  // Both branches; if that is impossible, the condition must be known at compile time.
  ScratchBlock thenBlock(n.b()), elseBlock(n.b());
  std::vector<Value> thenOut, elseOut;
  std::string problem;
  try {
    thenOut = inlineInto(n, thenBlock.get(), thenGraph, {});
    elseOut = inlineInto(n, elseBlock.get(), elseGraph, {});
  } catch (const Error &e) {
    problem = std::string("a branch cannot be imported: ") + e.what();
  }
  if (problem.empty() && thenOut.size() != elseOut.size())
    n.fail("the branches have different numbers of outputs (" + std::to_string(thenOut.size()) +
           " and " + std::to_string(elseOut.size()) + ")");
  SmallVector<Type> types;
  for (size_t i = 0; problem.empty() && i < thenOut.size(); ++i) {
    if (thenOut[i].getType() != elseOut[i].getType())
      problem = "output " + std::to_string(i) + " is " + str(thenOut[i].getType()) +
                " in the then branch but " + str(elseOut[i].getType()) + " in the else branch";
    types.push_back(thenOut[i].getType());
  }
  if (!problem.empty()) {
    importTaken(n.requireConstantInput(0, "the condition (" + problem + ")"));
    return;
  }
  yieldAtEnd(n, thenBlock.get(), thenOut);
  yieldAtEnd(n, elseBlock.get(), elseOut);
  auto ifOp = n.b().builder().create<IfOp>(n.b().location(), types, cond);
  thenBlock.moveTo(ifOp.getThenRegion());
  elseBlock.moveTo(ifOp.getElseRegion());
  n.b().verifyOrThrow(ifOp);
  setOutputs(n, SmallVector<Value>(ifOp.getResults()));
}

// ---- Loop ----

struct LoopSetup {
  const onnx::GraphProto *body;
  size_t numCarried, numScans;
  Value maxTrip, cond; // 0-d i64 / i1
  std::vector<Value> inits;
  std::optional<int64_t> maxTripValue; // when known at compile time
  std::optional<bool> condValue;
};

/// The loop as a tcc.loop; throws tcc::Error if the body cannot be a loop body.
void buildLoopOp(NodeContext &n, const LoopSetup &s) {
  CoreBuilder &b = n.b();
  Type i1 = b.builder().getI1Type(), i64 = b.builder().getI64Type();
  ScratchBlock body(b);
  body.get()->addArgument(scalarType(i64), b.location());
  body.get()->addArgument(scalarType(i1), b.location());
  for (Value v : s.inits)
    body.get()->addArgument(v.getType(), b.location());
  std::vector<Value> out =
      inlineInto(n, body.get(), *s.body, SmallVector<Value>(body.get()->getArguments()));

  SmallVector<Value> yields;
  SmallVector<Type> resultTypes;
  {
    OpBuilder::InsertionGuard guard(b.builder());
    b.builder().setInsertionPointToEnd(body.get());
    yields.push_back(toScalar(n, out[0], i1, "the body's condition output"));
  }
  for (size_t i = 0; i < s.numCarried; ++i) {
    Type init = s.inits[i].getType(), next = out[1 + i].getType();
    if (init != next)
      throw Error("loop-carried value " + std::to_string(i) + " is " + str(init) +
                  " initially but " + str(next) + " after an iteration");
    yields.push_back(out[1 + i]);
    resultTypes.push_back(init);
  }
  // Scan outputs have one row per iteration: the trip count is known when there are any.
  int64_t trips = s.condValue == false ? 0 : std::max<int64_t>(0, s.maxTripValue.value_or(0));
  for (size_t i = 0; i < s.numScans; ++i) {
    Value element = out[1 + s.numCarried + i];
    SmallVector<int64_t> shape{trips};
    llvm::append_range(shape, CoreBuilder::shapeOf(element));
    resultTypes.push_back(b.tensorType(shape, CoreBuilder::elementTypeOf(element)));
    yields.push_back(element);
  }
  yieldAtEnd(n, body.get(), yields);
  auto loop = b.builder().create<LoopOp>(b.location(), resultTypes, s.maxTrip, s.cond, s.inits);
  body.moveTo(loop.getBody());
  b.verifyOrThrow(loop);
  setOutputs(n, SmallVector<Value>(loop.getResults()));
}

/// The loop unrolled: the body is imported once per iteration with a constant iteration number.
/// Iterations run while the body's condition output folds to true; a run-time condition is
/// supported without scan outputs (later iterations are masked with tcc.select).
void unrollLoop(NodeContext &n, const LoopSetup &s, const std::string &why) {
  CoreBuilder &b = n.b();
  auto cannot = [&](const std::string &reason) {
    n.fail("the body cannot be a loop body (" + why +
           ") and the loop cannot be unrolled: " + reason);
  };
  if (!s.maxTripValue)
    cannot("its trip count M is not known at compile time");
  std::optional<Value> running; // run-time "the loop is still running"; none while known true
  std::optional<bool> condValue = s.condValue;
  if (!condValue && s.numScans)
    condValue = n.requireConstantInput(1, "the condition of an unrolled Loop with scan outputs")
                    .getInt(0) != 0;
  if (!condValue)
    running = s.cond;
  Value alwaysTrue = boolConstant(b, true);
  std::vector<Value> carried = s.inits;
  std::vector<std::vector<Value>> scans(s.numScans);
  int64_t i = 0;
  for (; condValue != false && i < *s.maxTripValue; ++i) {
    if (i == kMaxUnrolledIterations)
      cannot("it runs more than " + std::to_string(kMaxUnrolledIterations) + " iterations");
    // A body only runs while the condition holds, so its cond input is true.
    std::vector<Value> args{b.constantI64({i}, {}), alwaysTrue};
    args.insert(args.end(), carried.begin(), carried.end());
    std::vector<Value> out = n.inlineSubgraph(*s.body, args, "");
    Value cond = toScalar(n, out[0], b.builder().getI1Type(), "the body's condition output");
    if (running) {
      // Iterations after the condition failed leave the carried values as they were.
      for (size_t k = 0; k < s.numCarried; ++k) {
        if (out[1 + k].getType() != carried[k].getType())
          cannot("loop-carried value " + std::to_string(k) +
                 " changes type and the condition is "
                 "only known at run time");
        carried[k] = b.select(*running, out[1 + k], carried[k]);
      }
      running = b.binary(BinaryKind::And, *running, cond);
      continue;
    }
    std::copy(out.begin() + 1, out.begin() + 1 + s.numCarried, carried.begin());
    for (size_t k = 0; k < s.numScans; ++k)
      scans[k].push_back(out[1 + s.numCarried + k]);
    if (auto c = cond.getDefiningOp<ConstantOp>()) {
      if (!tensorFromAttr(c.getValue()).getInt(0)) {
        ++i;
        break;
      }
    } else if (s.numScans) {
      cannot("its condition output is computed at run time, so the number of rows of its scan "
             "outputs is unknown");
    } else {
      running = cond;
    }
  }
  std::vector<Value> results = carried;
  if (i == 0 && s.numScans) {
    // No iteration: the scan outputs are empty. Import the body aside, only to learn their types.
    ScratchBlock aside(b);
    std::vector<Value> out;
    {
      OpBuilder::InsertionGuard guard(b.builder());
      b.builder().setInsertionPointToEnd(aside.get());
      std::vector<Value> args{b.constantI64({0}, {}), alwaysTrue};
      args.insert(args.end(), carried.begin(), carried.end());
      out = n.inlineSubgraph(*s.body, args, "");
    }
    for (size_t k = 0; k < s.numScans; ++k) {
      auto type = CoreBuilder::typeOf(out[1 + s.numCarried + k]);
      Shape shape{0};
      shape.insert(shape.end(), type.getShape().begin(), type.getShape().end());
      results.push_back(n.constant(Tensor(dtypeFromType(type.getElementType()), shape)));
    }
  }
  for (size_t k = 0; i > 0 && k < s.numScans; ++k)
    results.push_back(stack(n, scans[k], "scan output " + std::to_string(k)));
  setOutputs(n, results);
}

void lowerLoop(NodeContext &n) {
  CoreBuilder &b = n.b();
  LoopSetup s;
  s.body = &n.attrGraph("body");
  s.numCarried = n.numInputs() > 2 ? n.numInputs() - 2 : 0;
  if ((size_t)s.body->input_size() != 2 + s.numCarried)
    n.fail("the body has " + std::to_string(s.body->input_size()) + " inputs, expected " +
           std::to_string(2 + s.numCarried) + " (iteration number, condition, " +
           std::to_string(s.numCarried) + " loop-carried values)");
  if ((size_t)s.body->output_size() < 1 + s.numCarried)
    n.fail("the body has " + std::to_string(s.body->output_size()) +
           " outputs, expected at least " + std::to_string(1 + s.numCarried) +
           " (condition, loop-carried values)");
  s.numScans = s.body->output_size() - 1 - s.numCarried;
  for (size_t i = 0; i < s.numCarried; ++i)
    s.inits.push_back(n.input(2 + i));

  Type i1 = b.builder().getI1Type(), i64 = b.builder().getI64Type();
  auto known = [&](size_t i) -> std::optional<int64_t> {
    if (auto t = n.constantInput(i)) {
      if (t->numElements() != 1)
        n.fail("input " + std::to_string(i) + " must have one element, got " + t->typeString());
      return t->getInt(0);
    }
    return std::nullopt;
  };
  if (n.hasInput(0)) {
    s.maxTrip = toScalar(n, n.input(0), i64, "the trip count M");
    s.maxTripValue = known(0);
  } else {
    s.maxTripValue = std::numeric_limits<int64_t>::max();
    s.maxTrip = b.constantI64({*s.maxTripValue}, {});
  }
  if (n.hasInput(1)) {
    s.cond = toScalar(n, n.input(1), i1, "the condition");
    if (auto c = known(1))
      s.condValue = *c != 0;
  } else {
    s.condValue = true;
    s.cond = boolConstant(b, true);
  }
  // Scan outputs are stacked with one row per iteration: the trip count must be static.
  if (s.numScans && s.condValue != false) {
    if (!n.hasInput(0))
      n.fail("a Loop with scan outputs needs its trip count M (scan outputs have static shapes)");
    if (!s.maxTripValue) {
      Tensor m = n.requireConstantInput(0, "the trip count M of a Loop with scan outputs");
      s.maxTripValue = m.getInt(0);
    }
  }

  try {
    buildLoopOp(n, s);
  } catch (const Error &e) {
    unrollLoop(n, s, e.what());
  }
}

// ---- Scan ----

} // namespace

ScanResult buildScanLoop(NodeContext &n, const ScanBody &body, ArrayRef<Value> states,
                         ArrayRef<Value> xs, ArrayRef<int64_t> axes, ArrayRef<int64_t> reversed,
                         int64_t length, Value seqLen) {
  CoreBuilder &b = n.b();
  Type i1 = b.builder().getI1Type(), i64 = b.builder().getI64Type();
  ScratchBlock block(b);
  Block *blk = block.get();
  blk->addArgument(scalarType(i64), b.location());
  blk->addArgument(scalarType(i1), b.location());
  for (Value v : states)
    blk->addArgument(v.getType(), b.location());

  SmallVector<Value> yields;
  SmallVector<Type> resultTypes;
  for (Value v : states)
    resultTypes.push_back(v.getType());
  {
    OpBuilder::InsertionGuard guard(b.builder());
    b.builder().setInsertionPointToEnd(blk);
    Value t = blk->getArgument(0);
    Value zero; // the start index of the other dims
    Value active = seqLen ? b.compare(CompareKind::Lt, t, seqLen) : Value();
    Value last; // the index read first when reversed
    SmallVector<Value> inputs(blk->getArguments().drop_front(2));
    for (size_t j = 0; j < xs.size(); ++j) {
      if (reversed[j] && !last)
        last = seqLen ? b.sub(seqLen, b.constantI64({1}, {})) : b.constantI64({length - 1}, {});
      Value index = reversed[j] ? b.sub(last, t) : t;
      auto shape = CoreBuilder::shapeOf(xs[j]);
      if (!zero && shape.size() > 1)
        zero = b.constantI64({0}, {});
      SmallVector<Value> starts(shape.size(), zero);
      starts[axes[j]] = index;
      SmallVector<int64_t> sizes(shape), elementShape(shape);
      sizes[axes[j]] = 1;
      elementShape.erase(elementShape.begin() + axes[j]);
      Value slice = b.create<DynamicSliceOp>(xs[j], starts, sizes);
      inputs.push_back(b.reshape(slice, elementShape));
    }
    std::vector<Value> out = body(inputs);
    if (out.size() < states.size())
      n.fail("the body has " + std::to_string(out.size()) + " outputs, fewer than the " +
             std::to_string(states.size()) + " state variables");
    yields.push_back(boolConstant(b, true));
    for (size_t k = 0; k < states.size(); ++k) {
      if (out[k].getType() != states[k].getType())
        n.fail("state variable " + std::to_string(k) + " is " + str(states[k].getType()) +
               " initially but the body gives " + str(out[k].getType()));
      yields.push_back(active ? b.select(active, out[k], blk->getArgument(2 + k)) : out[k]);
    }
    for (size_t k = states.size(); k < out.size(); ++k) {
      Value element = out[k];
      yields.push_back(active ? b.select(active, element, b.splatLike(element, 0)) : element);
      SmallVector<int64_t> shape{length};
      llvm::append_range(shape, CoreBuilder::shapeOf(element));
      resultTypes.push_back(b.tensorType(shape, CoreBuilder::elementTypeOf(element)));
    }
    b.builder().create<YieldOp>(b.location(), ValueRange(yields));
  }
  auto loop = b.builder().create<LoopOp>(b.location(), resultTypes, b.constantI64({length}, {}),
                                         boolConstant(b, true), states);
  block.moveTo(loop.getBody());
  b.verifyOrThrow(loop);
  ScanResult r;
  for (Value v : loop.getResults().take_front(states.size()))
    r.finalStates.push_back(v);
  for (Value v : loop.getResults().drop_front(states.size()))
    r.stacked.push_back(v);
  return r;
}

namespace {

/// The body of a Scan: its ONNX graph, imported inline into the loop's block.
ScanBody graphBody(NodeContext &n, const onnx::GraphProto &graph) {
  return [&n, &graph](ArrayRef<Value> inputs) { return n.inlineSubgraph(graph, inputs, ""); };
}

std::vector<int64_t> flagsAttr(NodeContext &n, const std::string &name, size_t count) {
  std::vector<int64_t> flags = n.attrInts(name, std::vector<int64_t>(count, 0));
  if (flags.size() != count)
    n.fail("attribute '" + name + "' has " + std::to_string(flags.size()) + " entries, expected " +
           std::to_string(count));
  return flags;
}

/// Scan-9+: no batch; scan axes and directions per input and output.
void lowerScan(NodeContext &n) {
  CoreBuilder &b = n.b();
  const onnx::GraphProto &body = n.attrGraph("body");
  int64_t numScanInputs = n.requireAttrInt("num_scan_inputs");
  if (numScanInputs < 1 || numScanInputs > (int64_t)n.numInputs())
    n.fail("num_scan_inputs is " + std::to_string(numScanInputs) + " but the node has " +
           std::to_string(n.numInputs()) + " inputs");
  size_t numStates = n.numInputs() - numScanInputs;
  if ((size_t)body.output_size() < numStates)
    n.fail("the body has fewer outputs than state variables");
  size_t numScanOutputs = body.output_size() - numStates;
  std::vector<Value> states, xs;
  for (size_t i = 0; i < numStates; ++i)
    states.push_back(n.input(i));
  std::vector<int64_t> axes = flagsAttr(n, "scan_input_axes", numScanInputs);
  std::vector<int64_t> directions = flagsAttr(n, "scan_input_directions", numScanInputs);
  int64_t length = -1;
  for (int64_t j = 0; j < numScanInputs; ++j) {
    Value x = n.input(numStates + j);
    axes[j] = n.normalizeAxis(axes[j], CoreBuilder::rankOf(x));
    int64_t len = CoreBuilder::shapeOf(x)[axes[j]];
    if (length >= 0 && len != length)
      n.fail("scan inputs have different sequence lengths (" + std::to_string(length) + " and " +
             std::to_string(len) + ")");
    length = len;
    xs.push_back(x);
  }
  ScanResult r = buildScanLoop(n, graphBody(n, body), states, xs, axes, directions, length, Value());

  std::vector<int64_t> outAxes = flagsAttr(n, "scan_output_axes", numScanOutputs);
  std::vector<int64_t> outDirections = flagsAttr(n, "scan_output_directions", numScanOutputs);
  std::vector<Value> results = r.finalStates;
  for (size_t k = 0; k < numScanOutputs; ++k) {
    Value y = r.stacked[k];
    // Prepending each element = appending, then reversing the iteration dim.
    if (outDirections[k])
      y = b.createTyped<ReverseOp>(y.getType(), y, SmallVector<int64_t>{0});
    int64_t rank = CoreBuilder::rankOf(y);
    int64_t axis = n.normalizeAxis(outAxes[k], rank);
    if (axis != 0) {
      SmallVector<int64_t> perm;
      for (int64_t d = 0; d < rank; ++d)
        perm.push_back(d < axis ? d + 1 : d == axis ? 0 : d);
      y = b.transpose(y, perm);
    }
    results.push_back(y);
  }
  setOutputs(n, results);
}

/// Scan-8: batch dim 0 and sequence dim 1 on every scan input, optional per-batch
/// sequence_lens; one loop per batch element, whose results are stacked.
void lowerScan8(NodeContext &n) {
  CoreBuilder &b = n.b();
  const onnx::GraphProto &body = n.attrGraph("body");
  int64_t numScanInputs = n.requireAttrInt("num_scan_inputs");
  if (numScanInputs < 1 || numScanInputs + 1 > (int64_t)n.numInputs())
    n.fail("num_scan_inputs is " + std::to_string(numScanInputs) + " but the node has " +
           std::to_string(n.numInputs()) + " inputs");
  size_t numStates = n.numInputs() - 1 - numScanInputs;
  if ((size_t)body.output_size() < numStates)
    n.fail("the body has fewer outputs than state variables");
  size_t numScanOutputs = body.output_size() - numStates;
  std::vector<int64_t> directions = flagsAttr(n, "directions", numScanInputs);

  std::vector<Value> states, xs;
  for (size_t i = 0; i < numStates; ++i)
    states.push_back(n.input(1 + i));
  int64_t batch = -1, length = -1;
  for (int64_t j = 0; j < numScanInputs; ++j) {
    Value x = n.input(1 + numStates + j);
    auto shape = CoreBuilder::shapeOf(x);
    if (shape.size() < 2)
      n.fail("scan input " + std::to_string(j) + " needs batch and sequence dims");
    if ((batch >= 0 && shape[0] != batch) || (length >= 0 && shape[1] != length))
      n.fail("scan inputs differ in batch size or sequence length");
    batch = shape[0];
    length = shape[1];
    xs.push_back(x);
  }
  for (Value s : states)
    if (CoreBuilder::rankOf(s) < 1 || CoreBuilder::shapeOf(s)[0] != batch)
      n.fail("state variables need the batch dim (" + std::to_string(batch) + ") first");

  // sequence_lens, unless absent or all equal to the sequence length.
  Value lens;
  if (n.hasInput(0)) {
    lens = n.input(0);
    if (CoreBuilder::shapeOf(lens) != ArrayRef<int64_t>{batch})
      n.fail("sequence_lens must have shape [" + std::to_string(batch) + "]");
    lens = b.cast(lens, b.builder().getI64Type());
    if (auto c = n.constantInput(0)) {
      auto values = c->toInt64Vector();
      if (llvm::all_of(values, [&](int64_t v) { return v == length; }))
        lens = Value();
    }
  }

  auto row = [&](Value v, int64_t i) {
    auto shape = CoreBuilder::shapeOf(v);
    return b.reshape(b.sliceDim(v, 0, i, i + 1), shape.drop_front());
  };
  std::vector<std::vector<Value>> perBatch(numStates + numScanOutputs);
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<Value> s, x;
    for (Value v : states)
      s.push_back(row(v, i));
    for (Value v : xs)
      x.push_back(row(v, i));
    ScanResult r = buildScanLoop(n, graphBody(n, body), s, x, std::vector<int64_t>(numScanInputs, 0), directions,
                                 length, lens ? row(lens, i) : Value());
    for (size_t k = 0; k < numStates; ++k)
      perBatch[k].push_back(r.finalStates[k]);
    for (size_t k = 0; k < numScanOutputs; ++k)
      perBatch[numStates + k].push_back(r.stacked[k]);
  }
  if (batch == 0)
    n.fail("a batch of zero sequences is not supported");
  std::vector<Value> results;
  for (auto &values : perBatch)
    results.push_back(stack(n, values, "a Scan output"));
  setOutputs(n, results);
}

} // namespace

void registerControlFlowOps(OpRegistry &r) {
  r.add("If", lowerIf);
  r.add("Loop", lowerLoop);
  r.add("Scan", [](NodeContext &n) { n.opset() < 9 ? lowerScan8(n) : lowerScan(n); });
}

} // namespace tcc::onnx_import
