//===- GemmEpilogue.cpp - What each target's GEMM library computes after the product -===//
//
// See tcc/Passes/GemmEpilogue.h (the table, and what deliberately does not fuse).
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/GemmEpilogue.h"

#include "FusionUtils.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace tcc::fusion;

namespace tcc {

std::optional<Target> parseTarget(StringRef name) {
  if (name == "cpu")
    return Target::Cpu;
  if (name == "cuda")
    return Target::Cuda;
  return std::nullopt;
}

StringRef targetName(Target target) { return target == Target::Cpu ? "cpu" : "cuda"; }

GemmEpilogueSupport gemmEpilogueSupport(Target target, Type elementType) {
  bool gemmType = elementType.isF32() || elementType.isF64();
  switch (target) {
  case Target::Cpu: // libtccrt's sgemm applies them in its tiles; f64 GEMMs are OpenBLAS's
    if (!elementType.isF32())
      return {"OpenBLAS"};
    return {"tcc sgemm", /*alpha=*/true, /*bias=*/true, /*relu=*/true, /*geluTanh=*/true,
            /*geluErf=*/true};
  case Target::Cuda:
    if (!gemmType)
      return {"cuBLASLt"};
    // cuBLASLt's GELU epilogue is not computed to f64 precision (on an H100, 2026-11-26: up to
    // 1e-9 relative error), so an f64 GELU stays in tcc's own kernel, exact to a few ulps.
    return {"cuBLASLt", /*alpha=*/true, /*bias=*/true, /*relu=*/true,
            /*geluTanh=*/elementType.isF32()};
  }
  return {};
}

std::string GemmEpilogue::describe() const {
  std::string s = scaled ? "alpha" : "";
  if (bias)
    s += s.empty() ? "bias" : "+bias";
  if (activation != tk::GemmActivation::None)
    s += (s.empty() ? "" : "+") + tk::stringifyGemmActivation(activation).str();
  return s;
}

bool convEpilogueSupported(Target target, Type elementType) {
  return target == Target::Cpu && elementType.isF32(); // libtccrt's convolutions
}

std::string ConvEpilogue::describe() const {
  std::string s;
  auto add = [&](const char *part) { s += (s.empty() ? "" : "+") + std::string(part); };
  if (bias)
    add("bias");
  if (residual)
    add("residual");
  if (clampMin && !clampMax && *clampMin == 0.0)
    add("relu");
  else if (clampMin || clampMax)
    add("clamp");
  if (!activation.empty())
    add(activation.c_str());
  return s;
}

namespace {

/// Is `v` a splat float constant within 1e-6 (relative) of `expected`?
bool isSplatOf(Value v, double expected) {
  std::optional<double> s = splatFloatValue(v);
  return s && std::abs(*s - expected) <= 1e-6 * std::abs(expected);
}

class Matcher {
public:
  Matcher(function_ref<bool(Operation *)> inKernel, function_ref<Value(Value)> outside)
      : inKernel_(inKernel), outside_(outside) {}

  /// If `b`, added to a result of shape `shape`, is a vector along `dim` (the same for every
  /// other index): sets `vector` (and `constant`, the [shape[dim]] vector, when b is a constant)
  /// and returns true; else says why not in `stop`.
  bool matchVector(Value b, ArrayRef<int64_t> shape, int64_t dim, Value &vector,
                   DenseElementsAttr &constant, std::string &stop);
  /// A clamp bound: `op` is max or min of x (read by nothing else) and a splat number.
  std::optional<double> clampBound(BinaryOp op, Value x);
  /// If `out` is 0.5 * x * (1 + u(x)) with `kind` the last op of u (the two GELUs' common form,
  /// any order of the factors): adds those ops to `ops` and returns u's op.
  UnaryOp geluGate(Value out, Value x, UnaryKind kind, llvm::SetVector<Operation *> &ops);
  /// If `out` is the tanh GELU of `x`: adds its ops to `ops`.
  bool matchGeluTanh(Value out, Value x, llvm::SetVector<Operation *> &ops);
  /// If `out` is the erf GELU of `x`: adds its ops to `ops`.
  bool matchGeluErf(Value out, Value x, llvm::SetVector<Operation *> &ops);
  /// Is every user of `v` one of `ops`?
  static bool usedOnlyBy(Value v, const llvm::SetVector<Operation *> &ops) {
    return llvm::all_of(v.getUsers(), [&](Operation *u) { return ops.contains(u); });
  }
  template <typename OpT> OpT opInKernel(Value v) {
    auto op = v.getDefiningOp<OpT>();
    return op && inKernel_(op) ? op : OpT();
  }
  bool reachesErf(Value x, int depth);

private:
  /// The factors of a product tree of tcc.binary mul ops (in the kernel), not looking into `x`.
  void factors(Value v, Value x, SmallVectorImpl<Value> &out, llvm::SetVector<Operation *> &ops);

  /// The constant value of `v` (a constant op, or a kernel input standing for one).
  DenseElementsAttr constantOf(Value v) {
    DenseElementsAttr c;
    if (matchPattern(v, m_Constant(&c)) || (outside_ && matchPattern(outside_(v), m_Constant(&c))))
      return c;
    return {};
  }

  function_ref<bool(Operation *)> inKernel_;
  function_ref<Value(Value)> outside_;
};

bool Matcher::matchVector(Value b, ArrayRef<int64_t> shape, int64_t dim, Value &vector,
                          DenseElementsAttr &vectorConstant, std::string &stop) {
  // Follow the index remaps that broadcast the vector (the same function the kernels use).
  Index idx = spaceIndex(b.getContext(), shape);
  Value v = b;
  while (Operation *op = v.getDefiningOp()) {
    if (!inKernel_(op) || !isa<BroadcastInDimOp, ReshapeOp, TransposeOp>(op))
      break;
    std::optional<Index> sub = affineOperandIndex(op, 0, idx);
    if (!sub)
      break;
    idx = simplify(*sub, shape.size());
    v = op->getOperand(0);
  }
  int64_t rank = shape.size(), n = shape[dim];
  auto vectorType = RankedTensorType::get({n}, tensorType(v).getElementType());
  DenseElementsAttr constant = constantOf(v);
  if (constant && constant.isSplat()) { // the same value for every column
    vector = v;
    vectorConstant = DenseElementsAttr::get(vectorType, constant.getSplatValue<Attribute>());
    return true;
  }
  if (Operation *d = v.getDefiningOp(); d && inKernel_(d) && !constant) {
    stop = "the added vector is computed in the kernel (" + d->getName().getStringRef().str() +
           "): the library takes a plain vector of the output's type";
    return false;
  }
  std::optional<SmallVector<int64_t>> dims = asProjection(idx, shape, shapeOf(v));
  if (!dims) {
    stop = dim == rank - 1 ? "the added tensor is not read at the column alone"
                           : "the added tensor is not read at the channel alone";
    return false;
  }
  std::optional<int64_t> varying; // a dim other than `dim` that v varies along
  for (int64_t d : *dims)
    if (d != -1 && d != dim)
      varying = d;
  if (!varying) {
    if (tensorType(v).getNumElements() != n) { // one value for every column, not a constant
      stop = "the added value is one scalar, not a vector";
      return false;
    }
    vector = v; // a projection onto `dim` alone: its N elements in order
    return true;
  }
  // A constant whose values vary along `dim` alone (what constant folding makes of a
  // broadcast bias initializer) is that vector.
  if (constant && n > 0 && tensorType(v).getRank() == rank && dims->size() == (size_t)rank &&
      (*dims)[dim] == dim) {
    bool aligned = true; // v's dims are the result's (a projection onto the same dims)
    for (int64_t d = 0; d < rank; ++d)
      aligned = aligned && ((*dims)[d] == d || (*dims)[d] == -1);
    if (aligned)
      if (DenseElementsAttr along = constantVectorAlong(constant, dim)) {
        vector = v;
        vectorConstant = along;
        return true;
      }
  }
  if (dim == rank - 1)
    stop = "the added tensor varies along " +
           std::string(*varying == rank - 2 ? "rows" : "batches") +
           " (the library adds one vector per column, the same for every row and batch)";
  else
    stop = "the added tensor varies along dim " + std::to_string(*varying) +
           " (the library adds one value per output channel)";
  return false;
}

std::optional<double> Matcher::clampBound(BinaryOp op, Value x) {
  if (!op || !inKernel_(op) || op.getLhs() == op.getRhs() ||
      (op.getKind() != BinaryKind::Max && op.getKind() != BinaryKind::Min))
    return std::nullopt;
  std::optional<double> bound = splatFloatValue(op.getLhs() == x ? op.getRhs() : op.getLhs());
  if (!bound || std::isnan(*bound))
    return std::nullopt;
  return bound;
}

void Matcher::factors(Value v, Value x, SmallVectorImpl<Value> &out,
                      llvm::SetVector<Operation *> &ops) {
  auto mul = v == x ? BinaryOp() : opInKernel<BinaryOp>(v);
  if (!mul || mul.getKind() != BinaryKind::Mul) {
    out.push_back(v);
    return;
  }
  ops.insert(mul);
  factors(mul.getLhs(), x, out, ops);
  factors(mul.getRhs(), x, out, ops);
}

UnaryOp Matcher::geluGate(Value out, Value x, UnaryKind kind,
                          llvm::SetVector<Operation *> &ops) {
  SmallVector<Value> outer;
  factors(out, x, outer, ops);
  if (outer.size() != 3)
    return {};
  auto take = [&](function_ref<bool(Value)> pred) {
    auto it = llvm::find_if(outer, pred);
    if (it == outer.end())
      return false;
    outer.erase(it);
    return true;
  };
  if (!take([&](Value v) { return v == x; }) || !take([&](Value v) { return isSplatOf(v, 0.5); }))
    return {};
  // 1 + u
  auto onePlus = opInKernel<BinaryOp>(outer[0]);
  if (!onePlus || onePlus.getKind() != BinaryKind::Add)
    return {};
  ops.insert(onePlus);
  Value u = isSplatOf(onePlus.getLhs(), 1.0) ? onePlus.getRhs() : onePlus.getLhs();
  if (!isSplatOf(u == onePlus.getLhs() ? onePlus.getRhs() : onePlus.getLhs(), 1.0))
    return {};
  auto op = opInKernel<UnaryOp>(u);
  if (!op || op.getKind() != kind)
    return {};
  ops.insert(op);
  return op;
}

bool Matcher::matchGeluTanh(Value out, Value x, llvm::SetVector<Operation *> &ops) {
  // out = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), any order of the factors.
  constexpr double kSqrt2OverPi = 0.7978845608028654, kCubic = 0.044715;
  UnaryOp tanh = geluGate(out, x, UnaryKind::Tanh, ops);
  if (!tanh)
    return false;
  auto take = [](SmallVectorImpl<Value> &list, function_ref<bool(Value)> pred) {
    auto it = llvm::find_if(list, pred);
    if (it == list.end())
      return Value();
    Value v = *it;
    list.erase(it);
    return v;
  };
  // inner = sqrt(2/pi) * (x + 0.044715 * x^3)
  SmallVector<Value> inner;
  factors(tanh.getX(), x, inner, ops);
  if (inner.size() != 2 || !take(inner, [&](Value v) { return isSplatOf(v, kSqrt2OverPi); }))
    return false;
  auto sum = opInKernel<BinaryOp>(inner[0]);
  if (!sum || sum.getKind() != BinaryKind::Add)
    return false;
  ops.insert(sum);
  Value cubic = sum.getLhs() == x ? sum.getRhs() : sum.getLhs();
  if ((sum.getLhs() == x) == (sum.getRhs() == x))
    return false;
  // 0.044715 * x * x * x, where x^3 may be pow(x, 3)
  SmallVector<Value> terms;
  factors(cubic, x, terms, ops);
  if (!take(terms, [&](Value v) { return isSplatOf(v, kCubic); }))
    return false;
  int xs = 0;
  for (Value v : terms) {
    if (v == x) {
      ++xs;
      continue;
    }
    auto pow = opInKernel<BinaryOp>(v);
    if (!pow || pow.getKind() != BinaryKind::Pow || pow.getLhs() != x ||
        !isSplatOf(pow.getRhs(), 3.0))
      return false;
    ops.insert(pow);
    xs += 3;
  }
  return xs == 3;
}

bool Matcher::matchGeluErf(Value out, Value x, llvm::SetVector<Operation *> &ops) {
  // out = 0.5 * x * (1 + erf(x / sqrt(2))), any order of the factors; x * (1 / sqrt(2)) too.
  constexpr double kSqrt2 = 1.4142135623730951;
  UnaryOp erf = geluGate(out, x, UnaryKind::Erf, ops);
  if (!erf)
    return false;
  auto scale = opInKernel<BinaryOp>(erf.getX());
  if (!scale)
    return false;
  ops.insert(scale);
  if (scale.getKind() == BinaryKind::Div)
    return scale.getLhs() == x && isSplatOf(scale.getRhs(), kSqrt2);
  if (scale.getKind() != BinaryKind::Mul || (scale.getLhs() == x) == (scale.getRhs() == x))
    return false;
  return isSplatOf(scale.getLhs() == x ? scale.getRhs() : scale.getLhs(), 1.0 / kSqrt2);
}

bool Matcher::reachesErf(Value x, int depth) {
  if (depth == 0)
    return false;
  for (Operation *u : x.getUsers()) {
    if (!inKernel_(u) || u->getNumResults() != 1)
      continue;
    if (auto un = dyn_cast<UnaryOp>(u); un && un.getKind() == UnaryKind::Erf)
      return true;
    if (reachesErf(u->getResult(0), depth - 1))
      return true;
  }
  return false;
}

} // namespace

ConvEpilogue matchConvEpilogue(ConvOp conv, Target target,
                               function_ref<bool(Operation *)> inKernel,
                               function_ref<Value(Value)> outside) {
  ConvEpilogue ep;
  Value x = conv.getResult();
  ep.result = x;
  auto type = tensorType(x);
  if (!convEpilogueSupported(target, type.getElementType()))
    return ep;
  Matcher m(inKernel, outside);
  // The single user of x, when it is a binary op in the kernel.
  auto nextOp = [&](Value v) -> BinaryOp {
    if (!v.hasOneUse())
      return {};
    auto op = dyn_cast<BinaryOp>(*v.getUsers().begin());
    return op && inKernel(op) && op.getLhs() != op.getRhs() ? op : BinaryOp();
  };
  auto take = [&](Operation *op) {
    ep.ops.push_back(op);
    x = ep.result = op->getResult(0);
  };
  // The bias: x + B, B one value per output channel.
  if (BinaryOp add = nextOp(x); add && add.getKind() == BinaryKind::Add) {
    Value other = add.getLhs() == x ? add.getRhs() : add.getLhs();
    std::string why;
    int64_t channelDim = conv.getChannelsLast() ? type.getRank() - 1 : 1;
    if (m.matchVector(other, type.getShape(), channelDim, ep.bias, ep.biasConstant, why))
      take(add);
    else if (other.getType() != x.getType())
      ep.stop = why;
  }
  // The residual: x + R, R of x's type from outside the kernel, read at the same element.
  if (BinaryOp add = nextOp(x); add && add.getKind() == BinaryKind::Add) {
    Value other = add.getLhs() == x ? add.getRhs() : add.getLhs();
    Operation *def = other.getDefiningOp();
    if (other.getType() == x.getType() && !(def && inKernel(def))) {
      ep.residual = other;
      take(add);
      ep.stop.clear();
    } else if (ep.stop.empty() && other.getType() == x.getType()) {
      ep.stop = "the added tensor is computed in the kernel (" +
                def->getName().getStringRef().str() + "): the library reads a plain tensor";
    }
  }
  // The clamp: max(x, lo) and/or min(x, hi), in either order, lo <= hi.
  for (int i = 0; i < 2; ++i) {
    BinaryOp op = nextOp(x);
    std::optional<double> bound = m.clampBound(op, x);
    if (!bound)
      break;
    bool isMax = op.getKind() == BinaryKind::Max;
    std::optional<double> &slot = isMax ? ep.clampMin : ep.clampMax;
    std::optional<double> other = isMax ? ep.clampMax : ep.clampMin;
    if (slot || (other && (isMax ? *bound > *other : *bound < *other)))
      break;
    slot = bound;
    take(op);
  }
  // The activation. x's users are exactly the activation's ops; its result may have any.
  auto single = [&](Value v) -> Operation * {
    return v.hasOneUse() && inKernel(*v.getUsers().begin()) ? *v.getUsers().begin() : nullptr;
  };
  auto splat = [&](Value v) -> std::optional<double> {
    if (std::optional<double> s = splatFloatValue(v))
      return s;
    return outside ? splatFloatValue(outside(v)) : std::nullopt;
  };
  auto isProduct = [&](Operation *op, Value a, Value b) {
    auto mul = dyn_cast_or_null<BinaryOp>(op);
    return mul && inKernel(mul) && mul.getKind() == BinaryKind::Mul &&
           ((mul.getLhs() == a && mul.getRhs() == b) || (mul.getLhs() == b && mul.getRhs() == a));
  };
  SmallVector<Operation *> users(x.getUsers().begin(), x.getUsers().end());
  if (users.size() != 2 || !llvm::all_of(users, [&](Operation *u) { return inKernel(u); }))
    return ep;
  for (int first = 0; first < 2; ++first) {
    Operation *gateStart = users[first], *product = users[1 - first];
    // SiLU: x * sigmoid(x).
    if (auto s = dyn_cast<UnaryOp>(gateStart); s && s.getKind() == UnaryKind::Sigmoid &&
                                                single(s.getResult()) == product &&
                                                isProduct(product, x, s.getResult())) {
      ep.ops.push_back(s);
      take(product);
      ep.activation = "silu";
      return ep;
    }
    // Hard swish: x * min(max(x * a + b, 0), 1), the max and min in either order.
    auto scale = dyn_cast<BinaryOp>(gateStart);
    if (!scale || scale.getKind() != BinaryKind::Mul || scale.getLhs() == scale.getRhs())
      continue;
    std::optional<double> a = splat(scale.getLhs() == x ? scale.getRhs() : scale.getLhs());
    auto shift = dyn_cast_or_null<BinaryOp>(single(scale.getResult()));
    if (!a || !shift || shift.getKind() != BinaryKind::Add)
      continue;
    std::optional<double> b =
        splat(shift.getLhs() == scale.getResult() ? shift.getRhs() : shift.getLhs());
    if (!b)
      continue;
    SmallVector<Operation *> gate{scale, shift};
    Value g = shift.getResult();
    bool low = false, high = false;
    for (int i = 0; i < 2; ++i) {
      auto op = dyn_cast_or_null<BinaryOp>(single(g));
      std::optional<double> bound = m.clampBound(op, g);
      if (!bound)
        break;
      bool isMax = op.getKind() == BinaryKind::Max;
      if (isMax ? (low || *bound != 0.0) : (high || *bound != 1.0))
        break;
      (isMax ? low : high) = true;
      gate.push_back(op);
      g = op.getResult();
    }
    if (!low || !high || single(g) != product || !isProduct(product, x, g) ||
        !std::isfinite(*a) || !std::isfinite(*b))
      continue;
    ep.ops.append(gate.begin(), gate.end());
    take(product);
    ep.activation = "hard_swish";
    ep.activationAlpha = *a;
    ep.activationBeta = *b;
    return ep;
  }
  return ep;
}

GemmEpilogue matchGemmEpilogue(MatmulOp matmul, Target target,
                               function_ref<bool(Operation *)> inKernel,
                               function_ref<Value(Value)> outside) {
  GemmEpilogue ep;
  Value y = matmul.getResult();
  ep.result = y;
  auto type = tensorType(y);
  GemmEpilogueSupport support = gemmEpilogueSupport(target, type.getElementType());
  if (!support.any())
    return ep;
  Matcher m(inKernel, outside);
  Value x = y;

  // alpha: y * a, a * y or y / d (alpha = 1 / d, exact for powers of two, else within an ulp of
  // the division) with splat constants, y read by nothing else.
  if (support.alpha && x.hasOneUse()) {
    auto scale = dyn_cast<BinaryOp>(*x.getUsers().begin());
    if (scale && inKernel(scale) && scale.getLhs() != scale.getRhs()) {
      std::optional<double> a;
      if (scale.getKind() == BinaryKind::Mul)
        a = splatFloatValue(scale.getLhs() == x ? scale.getRhs() : scale.getLhs());
      else if (scale.getKind() == BinaryKind::Div && scale.getLhs() == x)
        if (std::optional<double> d = splatFloatValue(scale.getRhs()); d && std::isnormal(*d))
          a = 1.0 / *d;
      if (a && std::isfinite(*a)) {
        ep.alpha = *a;
        ep.scaled = true;
        ep.ops.push_back(scale);
        x = ep.result = scale.getResult();
      }
    }
  }

  // The bias: x + B or B + x, x read by nothing else.
  if (support.bias && x.hasOneUse()) {
    auto add = dyn_cast<BinaryOp>(*x.getUsers().begin());
    if (add && inKernel(add) && add.getKind() == BinaryKind::Add && add.getLhs() != add.getRhs()) {
      Value other = add.getLhs() == x ? add.getRhs() : add.getLhs();
      if (!m.matchVector(other, type.getShape(), type.getRank() - 1, ep.bias, ep.biasConstant,
                         ep.stop))
        return ep; // the activation would come after an add the library cannot do
      ep.ops.push_back(add);
      x = ep.result = add.getResult();
    }
  }

  // The activation, on x read by nothing else.
  if (support.relu && x.hasOneUse()) {
    auto max = dyn_cast<BinaryOp>(*x.getUsers().begin());
    if (max && inKernel(max) && max.getKind() == BinaryKind::Max) {
      Value other = max.getLhs() == x ? max.getRhs() : max.getLhs();
      if (other != x && isSplatOf(other, 0.0)) {
        ep.activation = tk::GemmActivation::Relu;
        ep.ops.push_back(max);
        ep.result = max.getResult();
        return ep;
      }
    }
  }
  if ((support.geluTanh || support.geluErf) && !x.use_empty()) {
    // The GELU's output is a product at most 7 ops below x (through the cube's products).
    llvm::SetVector<Operation *> reached;
    SmallVector<std::pair<Value, int>> work{{x, 0}};
    while (!work.empty()) {
      auto [v, depth] = work.pop_back_val();
      if (depth == 8)
        continue;
      for (Operation *u : v.getUsers())
        if (inKernel(u) && u->getNumResults() == 1 && reached.insert(u))
          work.push_back({u->getResult(0), depth + 1});
    }
    for (Operation *candidate : reached) {
      auto mul = dyn_cast<BinaryOp>(candidate);
      if (!mul || mul.getKind() != BinaryKind::Mul)
        continue;
      llvm::SetVector<Operation *> ops;
      tk::GemmActivation gelu = tk::GemmActivation::None;
      if (support.geluTanh && m.matchGeluTanh(mul.getResult(), x, ops))
        gelu = tk::GemmActivation::GeluTanh;
      if (gelu == tk::GemmActivation::None && support.geluErf) {
        ops.clear(); // what a failed tanh match took
        if (m.matchGeluErf(mul.getResult(), x, ops))
          gelu = tk::GemmActivation::GeluErf;
      }
      if (gelu == tk::GemmActivation::None)
        continue;
      // Only the GELU's output may be read outside it.
      bool closed = Matcher::usedOnlyBy(x, ops) && llvm::all_of(ops, [&](Operation *op) {
                      return op == mul || Matcher::usedOnlyBy(op->getResult(0), ops);
                    });
      if (!closed)
        continue;
      ep.activation = gelu;
      // Chain order: the GELU's output last.
      ops.remove(mul);
      ep.ops.append(ops.begin(), ops.end());
      ep.ops.push_back(mul);
      ep.result = mul.getResult();
      return ep;
    }
  }
  if (!support.geluErf && m.reachesErf(x, 3))
    ep.stop = "an erf GELU follows: the library's GELU is the tanh approximation";
  ep.result = x;
  return ep;
}

} // namespace tcc
