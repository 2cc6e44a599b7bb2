//===- Elementwise.cpp - ONNX elementwise ops and activations -> tcc --------===//
//
// Math, comparison and logical ops map to tcc.unary/binary/compare/select with numpy
// broadcasting; activations are short compositions of those.
//
//===----------------------------------------------------------------------===//
#include "../NodeContext.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace tcc::onnx_import {
namespace {

void addUnary(OpRegistry &r, const std::string &op, UnaryKind kind) {
  r.add(op, [kind](NodeContext &n) { n.setOutput(0, n.b().unary(kind, n.input(0))); });
}

void addBinary(OpRegistry &r, const std::string &op, BinaryKind kind) {
  r.add(op, [kind](NodeContext &n) { n.setOutput(0, n.b().binary(kind, n.input(0), n.input(1))); });
}

void addCompare(OpRegistry &r, const std::string &op, CompareKind kind) {
  r.add(op, [kind](NodeContext &n) { n.setOutput(0, n.b().compare(kind, n.input(0), n.input(1))); });
}

/// Folds a variadic op (Sum, Max, ...) pairwise over all inputs.
void addVariadic(OpRegistry &r, const std::string &op, BinaryKind kind, bool mean = false) {
  r.add(op, [kind, mean](NodeContext &n) {
    Value acc = n.input(0);
    for (size_t i = 1; i < n.numInputs(); ++i)
      acc = n.b().binary(kind, acc, n.input(i));
    if (mean)
      acc = n.b().div(acc, n.b().scalarLike(acc, (double)n.numInputs()));
    n.setOutput(0, acc);
  });
}

/// x < 0 ? negative(x) : x, the shape of several activations.
Value whereNegative(CoreBuilder &b, Value x, Value negative) {
  return b.select(b.compare(CompareKind::Lt, x, b.scalarLike(x, 0)), negative, x);
}

bool isFloat(Value v) { return isa<FloatType>(CoreBuilder::elementTypeOf(v)); }

/// The exponent when input 1 is a constant whose elements are all one of 2, 3 or 4.
std::optional<int> smallIntegerExponent(NodeContext &n) {
  std::optional<Tensor> y = n.constantInput(1);
  if (!y || y->numElements() == 0)
    return std::nullopt;
  double first = y->getDouble(0);
  for (int64_t i = 1; i < y->numElements(); ++i)
    if (y->getDouble(i) != first)
      return std::nullopt;
  if (first == 2 || first == 3 || first == 4)
    return (int)first;
  return std::nullopt;
}

/// Float Pow by a constant 2, 3 or 4 (GELU's x^3, squared errors) is multiplications: they
/// vectorise where pow() is a scalar libm call in every element, and x * x is pow(x, 2)
/// exactly (x^3 and x^4 within 2 ulp of a correctly rounded pow).
void lowerPow(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), y = n.input(1);
  Type xt = CoreBuilder::elementTypeOf(x);
  std::optional<int> small = isFloat(x) ? smallIntegerExponent(n) : std::nullopt;
  // (Only where the exponent does not broadcast x to a larger shape.)
  auto shape = CoreBuilder::broadcastShapes(CoreBuilder::shapeOf(x), CoreBuilder::shapeOf(y));
  if (small && succeeded(shape) && ArrayRef<int64_t>(*shape) == CoreBuilder::shapeOf(x)) {
    Value square = b.mul(x, x);
    n.setOutput(0, *small == 2 ? square : *small == 3 ? b.mul(square, x) : b.mul(square, square));
  } else if (isFloat(x)) {
    n.setOutput(0, b.binary(BinaryKind::Pow, x, b.cast(y, xt)));
  } else if (isFloat(y)) {
    // Integer base, float exponent: compute in the exponent's type, then back (numpy-like).
    Type yt = CoreBuilder::elementTypeOf(y);
    n.setOutput(0, b.cast(b.binary(BinaryKind::Pow, b.cast(x, yt), y), xt));
  } else {
    n.setOutput(0, b.binary(BinaryKind::Pow, x, b.cast(y, xt)));
  }
}

void lowerMod(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), y = n.input(1);
  Value r = b.binary(BinaryKind::Rem, x, y);
  if (n.attrInt("fmod", 0) || CoreBuilder::elementTypeOf(r).isUnsignedInteger()) {
    n.setOutput(0, r);
    return;
  }
  // Python-style modulo: the result takes the divisor's sign.
  Value zero = b.scalarLike(r, 0);
  Value nonzero = b.compare(CompareKind::Ne, r, zero);
  Value rNeg = b.compare(CompareKind::Lt, r, zero);
  Value yNeg = b.compare(CompareKind::Lt, b.broadcastTo(y, CoreBuilder::shapeOf(r)), zero);
  Value fix = b.binary(BinaryKind::And, nonzero, b.binary(BinaryKind::Xor, rNeg, yNeg));
  n.setOutput(0, b.select(fix, b.add(r, y), r));
}

void lowerClip(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0);
  Value y = x;
  if (n.opset() < 11) {
    double inf = std::numeric_limits<double>::infinity();
    y = b.max(y, b.scalarLike(x, n.attrFloat("min", -inf)));
    y = b.min(y, b.scalarLike(x, n.attrFloat("max", inf)));
  } else {
    if (n.hasInput(1))
      y = b.max(y, n.input(1));
    if (n.hasInput(2))
      y = b.min(y, n.input(2));
  }
  n.setOutput(0, y);
}

} // namespace

bool isFloat8Type(Type t) { return isa<FloatType>(t) && t.getIntOrFloatBitWidth() == 8; }

Value castMaybeSaturating(CoreBuilder &b, Value x, Type to, bool saturate) {
  Value y = b.cast(x, to);
  Type from = CoreBuilder::elementTypeOf(x);
  if (saturate || from == to || !isFloat8Type(to) || !isa<FloatType>(from))
    return y;
  // The smallest magnitude that rounds (to nearest even) beyond the largest finite value: its
  // half-way point to the next power of the mantissa, or past it where the largest value's
  // mantissa is even (E4M3FN's 448 = 1.110b x 2^8 keeps the tie at 464).
  const llvm::fltSemantics &sem = cast<FloatType>(to).getFloatSemantics();
  llvm::APFloat largest = llvm::APFloat::getLargest(sem);
  double maxFinite = largest.convertToDouble();
  int exponent = std::ilogb(maxFinite);
  double halfUlp = std::ldexp(1.0, exponent - (int)llvm::APFloat::semanticsPrecision(sem));
  bool evenMantissa = !(largest.bitcastToAPInt().getZExtValue() & 1);
  Value magnitude = b.unary(UnaryKind::Abs, x);
  Value over = b.compare(evenMantissa ? CompareKind::Gt : CompareKind::Ge, magnitude,
                         b.scalarLike(x, maxFinite + halfUlp));
  // The special values as f8 constants (a cast would saturate an infinity).
  auto f8 = [&](const llvm::APFloat &v) {
    return b.constant(DenseElementsAttr::get(RankedTensorType::get(CoreBuilder::shapeOf(y), to), v));
  };
  Value special;
  if (to.isFloat8E5M2()) // the one with infinities: +-infinity by the sign of x
    special = b.select(b.compare(CompareKind::Lt, x, b.scalarLike(x, 0.0)),
                       f8(llvm::APFloat::getInf(sem, /*Negative=*/true)),
                       f8(llvm::APFloat::getInf(sem)));
  else
    special = f8(llvm::APFloat::getNaN(sem));
  return b.select(over, special, y);
}

namespace {

void lowerCast(NodeContext &n) {
  Type to = n.elementType((int32_t)n.requireAttrInt("to"));
  n.setOutput(0, castMaybeSaturating(n.b(), n.input(0), to, n.attrInt("saturate", 1) != 0));
}

/// Unsigned operands shift as they are. Signed ones (opset 28) shift their two's-complement bits:
/// through the unsigned type of their width, a right shift of a negative value as ~(~x >> s)
/// (arithmetic); a shift by a negative amount or by the width or more gives 0, or -1 for a
/// negative value shifted right.
void lowerBitShift(NodeContext &n) {
  std::string dir = n.attrString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    n.fail("direction must be LEFT or RIGHT, got '" + dir + "'");
  BinaryKind kind = dir == "LEFT" ? BinaryKind::ShiftLeft : BinaryKind::ShiftRight;
  CoreBuilder &b = n.b();
  Value x = n.input(0), s = n.input(1);
  Type t = CoreBuilder::elementTypeOf(x);
  if ((t.isSignlessInteger() || t.isSignedInteger()) && !t.isInteger(1)) {
    unsigned width = t.getIntOrFloatBitWidth();
    Type u = b.builder().getIntegerType(width, /*isSigned=*/false);
    Value inRange = b.binary(BinaryKind::And, b.compare(CompareKind::Ge, s, b.scalarLike(s, 0)),
                             b.compare(CompareKind::Lt, s, b.scalarLike(s, width)));
    Value amount = b.cast(b.select(inRange, s, b.splatLike(s, 0)), u);
    Value bits = b.cast(x, u);
    Value negative = b.compare(CompareKind::Lt, x, b.scalarLike(x, 0));
    Value shifted;
    if (kind == BinaryKind::ShiftLeft) {
      shifted = b.cast(b.binary(kind, bits, amount), t);
      n.setOutput(0, b.select(inRange, shifted, b.splatLike(shifted, 0)));
    } else {
      Value logical = b.binary(kind, bits, amount);
      Value arithmetic = b.unary(UnaryKind::Not, b.binary(kind, b.unary(UnaryKind::Not, bits), amount));
      shifted = b.cast(b.select(negative, arithmetic, logical), t);
      Value fill = b.select(negative, b.splatLike(x, -1), b.splatLike(x, 0));
      n.setOutput(0, b.select(inRange, shifted, fill));
    }
    return;
  }
  n.setOutput(0, b.binary(kind, x, s));
}

void registerActivations(OpRegistry &r) {
  r.add("Relu", [](NodeContext &n) {
    Value x = n.input(0);
    n.setOutput(0, n.b().max(x, n.b().scalarLike(x, 0)));
  });
  r.add("LeakyRelu", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    n.setOutput(0, whereNegative(b, x, b.mul(x, b.scalarLike(x, n.attrFloat("alpha", 0.01)))));
  });
  r.add("PRelu", [](NodeContext &n) {
    Value x = n.input(0), slope = n.input(1);
    CoreBuilder &b = n.b();
    // A per-channel slope [C] for x [N, C, ...] (as old exporters write it) applies along dim 1,
    // which numpy broadcasting would not do.
    auto xs = CoreBuilder::shapeOf(x);
    if (CoreBuilder::rankOf(slope) == 1 && xs.size() > 2 && CoreBuilder::shapeOf(slope)[0] == xs[1] &&
        xs[1] != xs.back()) {
      SmallVector<int64_t> shape(xs.size() - 1, 1);
      shape[0] = xs[1];
      slope = b.reshape(slope, shape);
    }
    n.setOutput(0, whereNegative(b, x, b.broadcastTo(b.mul(x, slope), xs)));
  });
  r.add("Elu", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    Value expm1 = b.sub(b.unary(UnaryKind::Exp, x), b.scalarLike(x, 1));
    n.setOutput(0, whereNegative(b, x, b.mul(expm1, b.scalarLike(x, n.attrFloat("alpha", 1.0)))));
  });
  r.add("Selu", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    double alpha = n.attrFloat("alpha", 1.67326319217681884765625);
    double gamma = n.attrFloat("gamma", 1.05070102214813232421875);
    Value neg = b.mul(b.sub(b.unary(UnaryKind::Exp, x), b.scalarLike(x, 1)), b.scalarLike(x, alpha));
    Value pos = b.compare(CompareKind::Gt, x, b.scalarLike(x, 0));
    n.setOutput(0, b.mul(b.select(pos, x, neg), b.scalarLike(x, gamma)));
  });
  r.add("HardSigmoid", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    Value y = b.add(b.mul(x, b.scalarLike(x, n.attrFloat("alpha", 0.2))),
                    b.scalarLike(x, n.attrFloat("beta", 0.5)));
    n.setOutput(0, b.min(b.max(y, b.scalarLike(x, 0)), b.scalarLike(x, 1)));
  });
  r.add("Softplus", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    n.setOutput(0, b.unary(UnaryKind::Log, b.add(b.unary(UnaryKind::Exp, x), b.scalarLike(x, 1))));
  });
  r.add("Softsign", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    n.setOutput(0, b.div(x, b.add(b.unary(UnaryKind::Abs, x), b.scalarLike(x, 1))));
  });
  r.add("ThresholdedRelu", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    Value keep = b.compare(CompareKind::Gt, x, b.scalarLike(x, n.attrFloat("alpha", 1.0)));
    n.setOutput(0, b.select(keep, x, b.splatLike(x, 0)));
  });
  r.add("Shrink", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    double lambd = n.attrFloat("lambd", 0.5), bias = n.attrFloat("bias", 0.0);
    Value below = b.compare(CompareKind::Lt, x, b.scalarLike(x, -lambd));
    Value above = b.compare(CompareKind::Gt, x, b.scalarLike(x, lambd));
    Value y = b.select(above, b.sub(x, b.scalarLike(x, bias)), b.splatLike(x, 0));
    n.setOutput(0, b.select(below, b.add(x, b.scalarLike(x, bias)), y));
  });
  // Swish (opset 24): x * sigmoid(alpha x); SwiGLU (opset 25): swish(a) * b, shapes equal.
  r.add("Swish", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    Value gate = b.unary(UnaryKind::Sigmoid, b.mul(x, b.scalarLike(x, n.attrFloat("alpha", 1.0))));
    n.setOutput(0, b.mul(x, gate));
  });
  r.add("SwiGLU", [](NodeContext &n) {
    Value a = n.input(0), v = n.input(1);
    CoreBuilder &b = n.b();
    if (CoreBuilder::typeOf(a) != CoreBuilder::typeOf(v))
      n.fail("A and B must have the same shape and type (SwiGLU does not broadcast)");
    Value gate = b.unary(UnaryKind::Sigmoid, b.mul(a, b.scalarLike(a, n.attrFloat("alpha", 1.0))));
    n.setOutput(0, b.mul(b.mul(a, gate), v));
  });
  // Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)), in x's own type (ONNX 1.12's
  // function body has f32 constants only).
  r.add("Celu", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    Value alpha = b.scalarLike(x, n.attrFloat("alpha", 1.0));
    Value negative = b.mul(alpha, b.sub(b.unary(UnaryKind::Exp, b.div(x, alpha)), b.scalarLike(x, 1)));
    n.setOutput(0, b.add(b.max(x, b.scalarLike(x, 0)), b.min(negative, b.scalarLike(x, 0))));
  });
  r.add("Mish", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    Value softplus = b.unary(UnaryKind::Log, b.add(b.unary(UnaryKind::Exp, x), b.scalarLike(x, 1)));
    n.setOutput(0, b.mul(x, b.unary(UnaryKind::Tanh, softplus)));
  });
  r.add("Gelu", [](NodeContext &n) {
    Value x = n.input(0);
    CoreBuilder &b = n.b();
    Value half = b.scalarLike(x, 0.5), one = b.scalarLike(x, 1);
    if (n.attrString("approximate", "none") == "tanh") {
      Value inner = b.mul(b.scalarLike(x, 0.7978845608028654),
                          b.add(x, b.mul(b.scalarLike(x, 0.044715), b.mul(x, b.mul(x, x)))));
      n.setOutput(0, b.mul(b.mul(half, x), b.add(one, b.unary(UnaryKind::Tanh, inner))));
    } else {
      Value erf = b.unary(UnaryKind::Erf, b.mul(x, b.scalarLike(x, 0.7071067811865476)));
      n.setOutput(0, b.mul(b.mul(half, x), b.add(one, erf)));
    }
  });
}

} // namespace

void registerElementwiseOps(OpRegistry &r) {
  addUnary(r, "Neg", UnaryKind::Neg);
  addUnary(r, "Abs", UnaryKind::Abs);
  addUnary(r, "Exp", UnaryKind::Exp);
  addUnary(r, "Log", UnaryKind::Log);
  addUnary(r, "Sqrt", UnaryKind::Sqrt);
  addUnary(r, "Reciprocal", UnaryKind::Reciprocal);
  addUnary(r, "Sin", UnaryKind::Sin);
  addUnary(r, "Cos", UnaryKind::Cos);
  addUnary(r, "Tan", UnaryKind::Tan);
  addUnary(r, "Asin", UnaryKind::Asin);
  addUnary(r, "Acos", UnaryKind::Acos);
  addUnary(r, "Atan", UnaryKind::Atan);
  addUnary(r, "Sinh", UnaryKind::Sinh);
  addUnary(r, "Cosh", UnaryKind::Cosh);
  addUnary(r, "Tanh", UnaryKind::Tanh);
  addUnary(r, "Asinh", UnaryKind::Asinh);
  addUnary(r, "Acosh", UnaryKind::Acosh);
  addUnary(r, "Atanh", UnaryKind::Atanh);
  addUnary(r, "Erf", UnaryKind::Erf);
  addUnary(r, "Sigmoid", UnaryKind::Sigmoid);
  addUnary(r, "Floor", UnaryKind::Floor);
  addUnary(r, "Ceil", UnaryKind::Ceil);
  addUnary(r, "Round", UnaryKind::Round);
  addUnary(r, "Sign", UnaryKind::Sign);
  addUnary(r, "Not", UnaryKind::Not);
  addUnary(r, "BitwiseNot", UnaryKind::Not);

  addBinary(r, "Add", BinaryKind::Add);
  addBinary(r, "Sub", BinaryKind::Sub);
  addBinary(r, "Mul", BinaryKind::Mul);
  addBinary(r, "Div", BinaryKind::Div);
  addBinary(r, "And", BinaryKind::And);
  addBinary(r, "Or", BinaryKind::Or);
  addBinary(r, "Xor", BinaryKind::Xor);
  addBinary(r, "BitwiseAnd", BinaryKind::And);
  addBinary(r, "BitwiseOr", BinaryKind::Or);
  addBinary(r, "BitwiseXor", BinaryKind::Xor);
  r.add("Pow", lowerPow);
  r.add("Mod", lowerMod);
  r.add("BitShift", lowerBitShift);

  addCompare(r, "Equal", CompareKind::Eq);
  addCompare(r, "Less", CompareKind::Lt);
  addCompare(r, "LessOrEqual", CompareKind::Le);
  addCompare(r, "Greater", CompareKind::Gt);
  addCompare(r, "GreaterOrEqual", CompareKind::Ge);
  r.add("IsNaN", [](NodeContext &n) {
    n.setOutput(0, n.b().compare(CompareKind::Ne, n.input(0), n.input(0)));
  });
  r.add("IsInf", [](NodeContext &n) {
    CoreBuilder &b = n.b();
    Value x = n.input(0);
    double inf = std::numeric_limits<double>::infinity();
    Value pos = b.compare(CompareKind::Eq, x, b.scalarLike(x, inf));
    Value neg = b.compare(CompareKind::Eq, x, b.scalarLike(x, -inf));
    bool detectPos = n.attrInt("detect_positive", 1), detectNeg = n.attrInt("detect_negative", 1);
    Value falseMask = b.splat(CoreBuilder::typeOf(pos), 0);
    n.setOutput(0, b.binary(BinaryKind::Or, detectPos ? pos : falseMask, detectNeg ? neg : falseMask));
  });

  addVariadic(r, "Sum", BinaryKind::Add);
  addVariadic(r, "Max", BinaryKind::Max);
  addVariadic(r, "Min", BinaryKind::Min);
  addVariadic(r, "Mean", BinaryKind::Add, /*mean=*/true);

  r.add("Where", [](NodeContext &n) {
    n.setOutput(0, n.b().select(n.input(0), n.input(1), n.input(2)));
  });
  r.add("Clip", lowerClip);
  r.add("Cast", lowerCast);
  // BitCast (opset 26): each element's bits as another type of the same width.
  r.add("BitCast", [](NodeContext &n) {
    Value x = n.input(0);
    Type to = n.elementType((int32_t)n.requireAttrInt("to"));
    auto width = [](Type t) { return t.isInteger(1) ? 8u : t.getIntOrFloatBitWidth(); };
    Type from = CoreBuilder::elementTypeOf(x);
    if (width(from) != width(to))
      n.fail("the element types must have one width, got " + std::to_string(width(from)) +
             " and " + std::to_string(width(to)) + " bits");
    n.setOutput(0, n.b().createTyped<BitcastOp>(
                       RankedTensorType::get(CoreBuilder::shapeOf(x), to), x));
  });
  // ai.onnx.ml Binarizer: 1 where x > threshold, else 0, in x's type.
  r.add("Binarizer", [](NodeContext &n) {
    CoreBuilder &b = n.b();
    Value x = n.input(0);
    Value above = b.compare(CompareKind::Gt, x, b.scalarLike(x, n.attrFloat("threshold", 0.0)));
    n.setOutput(0, b.cast(above, CoreBuilder::elementTypeOf(x)));
  }, "ai.onnx.ml");
  r.add("CastLike", [](NodeContext &n) {
    n.setOutput(0, castMaybeSaturating(n.b(), n.input(0), n.inputElementType(1),
                                       n.attrInt("saturate", 1) != 0));
  });

  registerActivations(r);
}

} // namespace tcc::onnx_import
