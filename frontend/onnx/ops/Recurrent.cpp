//===- Recurrent.cpp - ONNX RNN, GRU and LSTM -> tcc ----------------------------===//
//
// Each direction applies its cell once per time step. The input projections X·Wᵀ + Wb + Rb of
// all steps are one tcc.matmul up front (Rb too, but for GRU's last gate with
// linear_before_reset); per step there remain the recurrent product H·Rᵀ and the elementwise
// gates. Sequences of up to kMaxUnrolledSteps steps are unrolled: straight-line
// IR that fuses well and folds when the inputs are constant. Longer ones become a tcc.loop
// carrying H (and C) whose body reads step t's projections with tcc.dynamic_slice and stacks
// the step outputs as the loop's scan output, keeping the IR size independent of the length.
//
// The two directions of a bidirectional node run one after the other, each over all its steps:
// a step's product then reads one direction's Rᵀ, which the caches keep from step to step
// where it fits (measured on Zen 5, a bidirectional LSTM of hidden size 256: the directions
// stacked into one batched product per step, whose 2 MiB of weights no core's 1 MiB L2 holds,
// took 7.1 ms at 1 thread and 3.6 at 2; one after the other, 6.1 and 3.4).
//
// sequence_lens masks with tcc.select: at steps t >= len[b], batch row b keeps its state and
// outputs zeros; a reverse pass thus starts at its row's last valid step.
//
//===----------------------------------------------------------------------===//
#include "../NodeContext.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace tcc::onnx_import {
namespace {

/// Sequences up to this many steps are unrolled; longer ones run in a tcc.loop.
constexpr int64_t kMaxUnrolledSteps = 64;

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name; // lower case
  double alpha = 0, beta = 0;
};

/// One ONNX RNN activation function (names as in the RNN/GRU/LSTM specs).
Value activate(CoreBuilder &b, const Activation &a, Value x) {
  auto c = [&](double v) { return b.scalarLike(x, v); };
  const std::string &f = a.name;
  if (f == "sigmoid")
    return b.unary(UnaryKind::Sigmoid, x);
  if (f == "tanh")
    return b.unary(UnaryKind::Tanh, x);
  if (f == "relu")
    return b.max(x, c(0));
  if (f == "affine")
    return b.add(b.mul(x, c(a.alpha)), c(a.beta));
  if (f == "leakyrelu")
    return b.select(b.compare(CompareKind::Lt, x, c(0)), b.mul(x, c(a.alpha)), x);
  if (f == "thresholdedrelu")
    return b.select(b.compare(CompareKind::Gt, x, c(a.alpha)), x, b.splatLike(x, 0));
  if (f == "scaledtanh")
    return b.mul(b.unary(UnaryKind::Tanh, b.mul(x, c(a.beta))), c(a.alpha));
  if (f == "hardsigmoid")
    return b.min(b.max(b.add(b.mul(x, c(a.alpha)), c(a.beta)), c(0)), c(1));
  if (f == "elu")
    return b.select(b.compare(CompareKind::Lt, x, c(0)),
                    b.mul(b.sub(b.unary(UnaryKind::Exp, x), c(1)), c(a.alpha)), x);
  if (f == "softsign")
    return b.div(x, b.add(b.unary(UnaryKind::Abs, x), c(1)));
  // softplus (names are validated when parsed)
  return b.unary(UnaryKind::Log, b.add(b.unary(UnaryKind::Exp, x), c(1)));
}

/// The node's activations for each direction, with their alpha/beta: `activations` lists
/// `perDirection` functions per direction; the alpha and beta lists are consumed in that order
/// by the functions that take them (defaults are those of the ONNX operators of the same name).
std::vector<std::vector<Activation>> parseActivations(NodeContext &n, int64_t numDirections,
                                                      std::vector<std::string> defaults) {
  std::vector<std::string> names = n.attrStrings("activations");
  size_t per = defaults.size();
  if (names.empty())
    for (int64_t d = 0; d < numDirections; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() == per && numDirections == 2)
    names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per * numDirections)
    n.fail("'activations' has " + std::to_string(names.size()) + " entries, expected " +
           std::to_string(per * numDirections));
  std::vector<float> alphas = n.attrFloats("activation_alpha");
  std::vector<float> betas = n.attrFloats("activation_beta");
  size_t nextAlpha = 0, nextBeta = 0;
  auto take = [](const std::vector<float> &list, size_t &next, double fallback) {
    return next < list.size() ? (double)list[next++] : fallback;
  };
  std::vector<std::vector<Activation>> out(numDirections);
  for (size_t i = 0; i < names.size(); ++i) {
    Activation a{llvm::StringRef(names[i]).lower()};
    const std::string &f = a.name;
    if (f == "affine" || f == "scaledtanh") {
      a.alpha = take(alphas, nextAlpha, 1.0);
      a.beta = take(betas, nextBeta, f == "affine" ? 0.0 : 1.0);
    } else if (f == "leakyrelu") {
      a.alpha = take(alphas, nextAlpha, 0.01);
    } else if (f == "thresholdedrelu" || f == "elu") {
      a.alpha = take(alphas, nextAlpha, 1.0);
    } else if (f == "hardsigmoid") {
      a.alpha = take(alphas, nextAlpha, 0.2);
      a.beta = take(betas, nextBeta, 0.5);
    } else if (f != "sigmoid" && f != "tanh" && f != "relu" && f != "softsign" && f != "softplus") {
      n.fail("unsupported activation function '" + names[i] + "'");
    }
    out[i / per].push_back(a);
  }
  return out;
}

/// What every step of one direction needs, computed once outside the steps. Per-step values are
/// [1, B, ...] (the node's outputs stack the directions along that dim).
struct Direction {
  Cell cell;
  int64_t hidden;
  std::optional<double> clip;
  bool linearBeforeReset = false, inputForget = false;
  std::vector<Activation> act; // f (, g (, h))
  bool reverse = false;        // runs from the last step
  // The recurrence H·Rᵀ: Rᵀ [1, H, G*H], split in [0, split) and [split, G*H) columns for GRU,
  // whose last gate multiplies in r first. rb: the bias added to a part's product (GRU's last
  // gate with linear_before_reset: Rbh broadcast to [1, B, H]; otherwise null, Rb being in the
  // projections).
  Value rT[2], rb[2];
  Value peephole[3]; // LSTM: Pi, Po, Pf broadcast to [1, B, H], or null

  /// The time at step k of T.
  int64_t timeAt(int64_t k, int64_t T) const { return reverse ? T - 1 - k : k; }
};

struct State {
  Value h, c; // [1, B, H]; c only for LSTM
};

/// Gate k (of width H) of a [..., G*H] value.
Value gate(CoreBuilder &b, Value v, int64_t k, int64_t hidden) {
  return b.sliceDim(v, CoreBuilder::rankOf(v) - 1, k * hidden, (k + 1) * hidden);
}

bool isZero(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto splat = c ? dyn_cast<SplatElementsAttr>(c.getValue()) : nullptr;
  return splat && splat.getSplatValue<APFloat>().isZero();
}

/// One time step: the new state from the step's input projections xw [1, B, G*H] (bias
/// included).
State step(CoreBuilder &b, const Direction &d, Value xw, State prev) {
  int64_t hs = d.hidden;
  auto clip = [&](Value v) {
    if (!d.clip)
      return v;
    return b.min(b.max(v, b.scalarLike(v, -*d.clip)), b.scalarLike(v, *d.clip));
  };
  auto act = [&](size_t i, Value v) { return activate(b, d.act[i], clip(v)); };
  // H·Rᵀ + Rb over column part k, skipping the product when H is zero (the first step without
  // initial_h); null when that leaves nothing.
  bool zeroH = isZero(prev.h);
  auto product = [&](Value h, int k) -> Value {
    Value p = zeroH ? Value() : b.matmul(h, d.rT[k]);
    if (!d.rb[k])
      return p;
    return p ? b.add(p, d.rb[k]) : d.rb[k];
  };
  auto recur = [&](Value x, Value h, int k) {
    Value p = product(h, k);
    return p ? b.add(x, p) : x;
  };
  switch (d.cell) {
  case Cell::Rnn:
    return {act(0, recur(xw, prev.h, 0)), Value()};
  case Cell::Gru: {
    // Gates z, r, h: z = f(xz + H·Rzᵀ + Rbz), r = f(...), h~ = g(xh + (r·H)·Rhᵀ + Rbh) or, with
    // linear_before_reset, g(xh + r·(H·Rhᵀ + Rbh)); H' = (1 - z)·h~ + z·H.
    Value zr = recur(b.sliceDim(xw, CoreBuilder::rankOf(xw) - 1, 0, 2 * hs), prev.h, 0);
    Value z = act(0, gate(b, zr, 0, hs));
    Value r = act(0, gate(b, zr, 1, hs));
    Value xh = gate(b, xw, 2, hs);
    Value hh;
    if (!d.linearBeforeReset)
      hh = recur(xh, zeroH ? prev.h : b.mul(r, prev.h), 1);
    else if (Value p = product(prev.h, 1))
      hh = b.add(xh, b.mul(r, p));
    else
      hh = xh;
    Value candidate = act(1, hh);
    return {b.add(b.mul(b.sub(b.splatLike(z, 1), z), candidate), b.mul(z, prev.h)), Value()};
  }
  case Cell::Lstm: {
    // Gates i, o, f, c (peepholes Pi, Po, Pf): Ct = ft·Ct-1 + it·ct, Ht = ot·h(Ct).
    Value gates = recur(xw, prev.h, 0);
    auto peep = [&](Value g, int k, Value c) {
      return d.peephole[k] ? b.add(g, b.mul(d.peephole[k], c)) : g;
    };
    Value i = act(0, peep(gate(b, gates, 0, hs), 0, prev.c));
    Value f = d.inputForget ? b.sub(b.splatLike(i, 1), i)
                            : act(0, peep(gate(b, gates, 2, hs), 2, prev.c));
    Value cand = act(1, gate(b, gates, 3, hs));
    Value c = b.add(b.mul(f, prev.c), b.mul(i, cand));
    Value o = act(0, peep(gate(b, gates, 1, hs), 1, c));
    return {b.mul(o, activate(b, d.act[2], c)), c};
  }
  }
  return prev;
}

/// The step's state after masking with sequence_lens (i64 [B, 1], or null; t: i64 [1, 1, 1],
/// the step's time), and its output [1, B, H].
std::pair<State, Value> maskedStep(CoreBuilder &b, const Direction &d, Value xw, State prev,
                                   Value t, Value lens) {
  State next = step(b, d, xw, prev);
  if (!lens)
    return {next, next.h};
  int64_t B = CoreBuilder::shapeOf(lens)[0];
  Value valid = b.compare(CompareKind::Lt, b.broadcastTo(t, {1, B, 1}), b.reshape(lens, {1, B, 1}));
  Value y = b.select(valid, next.h, b.splatLike(next.h, 0));
  next.h = b.select(valid, next.h, prev.h);
  if (next.c)
    next.c = b.select(valid, next.c, prev.c);
  return {next, y};
}

/// Runs the direction over the sequence. xw: its input projections [T*B, G*H], time t in rows
/// [t*B, (t+1)*B). Returns its Y as [T, 1, B, H] (in time order; null when not needed) and the
/// final state [1, B, H].
std::pair<Value, State> runDirection(NodeContext &n, const Direction &d, Value xw, State init,
                                     Value lens, bool needY) {
  CoreBuilder &b = n.b();
  int64_t B = CoreBuilder::shapeOf(init.h)[1], H = d.hidden;
  int64_t GH = CoreBuilder::shapeOf(xw)[1], T = CoreBuilder::shapeOf(xw)[0] / B;
  // Time t's projections: row t, one contiguous slice (which the kernels read in place).
  Value xw3d = b.reshape(xw, {T, B, GH});
  if (T <= kMaxUnrolledSteps) {
    std::vector<Value> ys(T);
    State s = init;
    for (int64_t k = 0; k < T; ++k) {
      int64_t t = d.timeAt(k, T);
      auto [next, y] = maskedStep(b, d, b.sliceDim(xw3d, 0, t, t + 1), s,
                                  lens ? b.constantI64({t}, {1, 1, 1}) : Value(), lens);
      s = next;
      ys[t] = y;
    }
    if (!needY)
      return {Value(), s};
    return {b.reshape(b.concat(ys, 0), {T, 1, B, H}), s};
  }

  // tcc.loop carrying (h[, c]), with the step outputs as its scan output; iteration k reads
  // the projections of time t = k (T - 1 - k in reverse).
  OpBuilder &ob = b.builder();
  Type i1 = ob.getI1Type();
  SmallVector<Value> inits{init.h};
  if (init.c)
    inits.push_back(init.c);
  SmallVector<Type> resultTypes(ValueRange(inits).getTypes());
  if (needY)
    resultTypes.push_back(b.tensorType({T, 1, B, H}, CoreBuilder::elementTypeOf(init.h)));
  Value alwaysTrue = b.splat(b.tensorType({}, i1), 1);
  auto loop =
      ob.create<LoopOp>(b.location(), resultTypes, b.constantI64({T}, {}), alwaysTrue, inits);
  Block *body = new Block;
  loop.getBody().push_back(body);
  body->addArgument(b.tensorType({}, ob.getI64Type()), b.location());
  body->addArgument(b.tensorType({}, i1), b.location());
  for (Value v : inits)
    body->addArgument(v.getType(), b.location());
  {
    OpBuilder::InsertionGuard guard(ob);
    ob.setInsertionPointToEnd(body);
    Value k = body->getArgument(0);
    Value t = d.reverse ? b.sub(b.constantI64({T - 1}, {}), k) : k;
    Value zero = b.constantI64({0}, {});
    Value x = b.create<DynamicSliceOp>(xw3d, ValueRange{t, zero, zero},
                                       ArrayRef<int64_t>{1, B, GH});
    State prev{body->getArgument(2), init.c ? body->getArgument(3) : Value()};
    auto [next, y] = maskedStep(b, d, x, prev, lens ? b.reshape(t, {1, 1, 1}) : Value(), lens);
    SmallVector<Value> yields{alwaysTrue, next.h};
    if (next.c)
      yields.push_back(next.c);
    if (needY)
      yields.push_back(y);
    ob.create<YieldOp>(b.location(), yields);
  }
  b.verifyOrThrow(loop);
  State final{loop.getResult(0), init.c ? loop.getResult(1) : Value()};
  if (!needY)
    return {Value(), final};
  // The loop stacks in iteration order; a reverse direction ran from the last step.
  Value y = loop.getResults().back();
  if (d.reverse)
    y = b.createTyped<ReverseOp>(y.getType(), y, ArrayRef<int64_t>{0});
  return {y, final};
}

/// RNN, GRU and LSTM: inputs X, W, R, B, sequence_lens, initial_h (, initial_c, P).
void lowerRecurrent(NodeContext &n, Cell cell) {
  CoreBuilder &b = n.b();
  int64_t numGates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  std::string direction = n.attrString("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    n.fail("direction must be forward, reverse or bidirectional, got '" + direction + "'");
  int64_t D = direction == "bidirectional" ? 2 : 1;
  int64_t layout = n.attrInt("layout", 0);
  if (layout != 0 && layout != 1)
    n.fail("layout must be 0 or 1");

  auto expectShape = [&](size_t i, const char *what, ArrayRef<int64_t> shape) {
    if (n.inputShape(i) != shape) {
      std::string want;
      for (int64_t s : shape)
        want += (want.empty() ? "" : "x") + std::to_string(s);
      n.fail(std::string(what) + " must have shape " + want + ", got " +
             shapeToString(Shape(n.inputShape(i).begin(), n.inputShape(i).end())));
    }
  };
  Value x = n.input(0);
  if (n.inputRank(0) != 3 || n.inputRank(1) != 3 || n.inputRank(2) != 3)
    n.fail("X, W and R must have rank 3");
  if (!isa<FloatType>(n.inputElementType(0)))
    n.fail("X must have a floating-point type");
  Type element = n.inputElementType(0);
  if (layout == 1)
    x = b.transpose(x, {1, 0, 2}); // [T, B, I]
  int64_t T = CoreBuilder::shapeOf(x)[0], batch = CoreBuilder::shapeOf(x)[1],
          I = CoreBuilder::shapeOf(x)[2];
  int64_t H = n.inputShape(2)[2];
  if (n.hasAttr("hidden_size") && n.attrInt("hidden_size", 0) != H)
    n.fail("hidden_size is " + std::to_string(n.attrInt("hidden_size", 0)) + " but R has " +
           std::to_string(H) + " columns");
  int64_t GH = numGates * H;
  if (T == 0)
    n.fail("the sequence is empty");
  expectShape(1, "W", {D, GH, I});
  expectShape(2, "R", {D, GH, H});
  auto operand = [&](size_t i) { return b.cast(n.input(i), element); };
  Value bias = n.hasInput(3) ? (expectShape(3, "B", {D, 2 * GH}), operand(3)) : Value();
  Value lens;
  if (n.hasInput(4)) {
    expectShape(4, "sequence_lens", {batch});
    lens = b.reshape(b.cast(n.input(4), b.builder().getI64Type()), {batch, 1});
    if (auto c = n.constantInput(4)) {
      auto values = c->toInt64Vector();
      if (llvm::all_of(values, [&](int64_t v) { return v == T; }))
        lens = Value(); // every sequence is full length
    }
  }
  // Direction d's part of a [D, ...] value.
  auto row = [&](Value v, int64_t d) {
    auto shape = CoreBuilder::shapeOf(v);
    return b.reshape(b.sliceDim(v, 0, d, d + 1), shape.drop_front());
  };
  // initial_h / initial_c as [D, B, H] (null when absent: zeros).
  auto initial = [&](size_t i, const char *what) -> Value {
    if (!n.hasInput(i))
      return Value();
    if (layout == 0)
      expectShape(i, what, {D, batch, H});
    else
      expectShape(i, what, {batch, D, H});
    Value v = operand(i);
    return layout == 1 ? b.transpose(v, {1, 0, 2}) : v;
  };
  Value h0 = initial(5, "initial_h");
  Value c0 = cell == Cell::Lstm ? initial(6, "initial_c") : Value();
  Value peepholes;
  if (cell == Cell::Lstm && n.hasInput(7)) {
    expectShape(7, "P", {D, 3 * H});
    peepholes = operand(7);
  }

  std::vector<std::string> defaults;
  if (cell == Cell::Rnn)
    defaults = {"Tanh"};
  else if (cell == Cell::Gru)
    defaults = {"Sigmoid", "Tanh"};
  else
    defaults = {"Sigmoid", "Tanh", "Tanh"};
  auto activations = parseActivations(n, D, defaults);
  std::optional<double> clip;
  if (n.hasAttr("clip"))
    clip = n.attrFloat("clip", 0);

  bool needY = n.hasOutput(0);
  Value x2d = b.reshape(x, {T * batch, I});
  // Direction d's part of a [D, ...] value, keeping the dim.
  auto rowKept = [&](Value v, int64_t d) { return D == 1 ? v : b.sliceDim(v, 0, d, d + 1); };
  std::vector<Value> ys, hs, cs;
  for (int64_t d = 0; d < D; ++d) {
    Direction dir{cell, H, clip};
    dir.linearBeforeReset = n.attrInt("linear_before_reset", 0) != 0;
    dir.inputForget = n.attrInt("input_forget", 0) != 0;
    dir.act = activations[d];
    dir.reverse = direction == "reverse" || d == 1;
    // The recurrence's bias Rb is added to the projections with Wb, once, but for GRU's last
    // gate with linear_before_reset, where r multiplies it.
    const bool rbhInside = cell == Cell::Gru && dir.linearBeforeReset;
    Value w = row(operand(1), d);                     // [G*H, I]
    Value xw = b.matmul(x2d, b.transpose(w, {1, 0})); // [T*B, G*H]
    if (bias) {
      Value wb = b.sliceDim(row(bias, d), 0, 0, GH), rb = b.sliceDim(row(bias, d), 0, GH, 2 * GH);
      if (rbhInside)
        rb = b.concat({b.sliceDim(rb, 0, 0, 2 * H), b.splat(b.tensorType({H}, element), 0)}, 0);
      xw = b.add(xw, b.add(wb, rb));
    }
    Value rT = b.transpose(rowKept(operand(2), d), {0, 2, 1}); // [1, H, G*H]
    int64_t split = cell == Cell::Gru ? 2 * H : GH;
    dir.rT[0] = b.sliceDim(rT, 2, 0, split);
    if (split < GH)
      dir.rT[1] = b.sliceDim(rT, 2, split, GH);
    if (bias && rbhInside)
      dir.rb[1] = b.broadcastTo(
          b.reshape(b.sliceDim(rowKept(bias, d), 1, GH + split, 2 * GH), {1, 1, H}),
          {1, batch, H});
    for (int k = 0; peepholes && k < 3; ++k)
      dir.peephole[k] = b.broadcastTo(
          b.reshape(b.sliceDim(rowKept(peepholes, d), 1, k * H, (k + 1) * H), {1, 1, H}),
          {1, batch, H});
    auto initial = [&](Value v) {
      return v ? rowKept(v, d) : b.splat(b.tensorType({1, batch, H}, element), 0);
    };
    State init{initial(h0), cell == Cell::Lstm ? initial(c0) : Value()};
    auto [y, final] = runDirection(n, dir, xw, init, lens, needY);
    ys.push_back(y);
    hs.push_back(final.h);
    if (n.hasOutput(2))
      cs.push_back(final.c);
  }
  auto join = [&](const std::vector<Value> &parts, int64_t axis) {
    return parts.size() == 1 ? parts[0] : b.concat(parts, axis);
  };
  if (needY) {
    Value y = join(ys, 1); // [T, D, B, H]
    n.setOutput(0, layout == 1 ? b.transpose(y, {2, 0, 1, 3}) : y);
  }
  Value yh = join(hs, 0); // [D, B, H]
  n.setOutput(1, layout == 1 ? b.transpose(yh, {1, 0, 2}) : yh);
  if (cell == Cell::Lstm && n.hasOutput(2)) {
    Value yc = join(cs, 0);
    n.setOutput(2, layout == 1 ? b.transpose(yc, {1, 0, 2}) : yc);
  }
}

} // namespace

void registerRecurrentOps(OpRegistry &r) {
  r.add("RNN", [](NodeContext &n) { lowerRecurrent(n, Cell::Rnn); });
  r.add("GRU", [](NodeContext &n) { lowerRecurrent(n, Cell::Gru); });
  r.add("LSTM", [](NodeContext &n) { lowerRecurrent(n, Cell::Lstm); });
}

} // namespace tcc::onnx_import
