//===- ScalarEmitter.cpp - tk scalar ops as C expressions -----------------===//
//
// See ScalarEmitter.h. The expressions mirror the reference kernels op by op; where the C
// operator would differ (signed overflow, division by zero, out-of-range float->int, shifts
// past the width) they call the prelude's helpers instead.
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/ScalarEmitter.h"

#include "tcc/IR/TkDialect.h"
#include "tcc/Support/Tensor.h"

#include "mlir/IR/AffineExprVisitor.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mlir;
using namespace tcc;
using namespace tcc::codegen;

namespace {

/// How a scalar type computes.
enum class Cat { Bool, Signed, Unsigned, Float, Index };

Cat category(Type t) {
  if (t.isIndex())
    return Cat::Index;
  if (auto i = dyn_cast<IntegerType>(t)) {
    if (i.getWidth() == 1)
      return Cat::Bool;
    return i.isUnsigned() ? Cat::Unsigned : Cat::Signed;
  }
  if (isa<FloatType>(t))
    return Cat::Float;
  throw Error("tk codegen: unsupported scalar type");
}

bool isF16(Type t) { return t.isF16(); }
bool isBF16(Type t) { return t.isBF16(); }
bool isHalfLike(Type t) { return t.isF16() || t.isBF16(); }
bool isFloat8Type(Type t) { return isa<FloatType>(t) && t.getIntOrFloatBitWidth() == 8; }
/// The prelude's name for a float8 type ("f8e4m3fn", ...): tcc_<name>_to_f32 and the like.
std::string float8Name(Type t) {
  if (t.isFloat8E4M3FN()) return "f8e4m3fn";
  if (t.isFloat8E4M3FNUZ()) return "f8e4m3fnuz";
  if (t.isFloat8E5M2()) return "f8e5m2";
  if (t.isFloat8E5M2FNUZ()) return "f8e5m2fnuz";
  throw Error("tk codegen: unsupported float8 type " + typeString(t));
}
/// 4- and 2-bit integers live in a byte (sign- or zero-extended).
bool isSubByteIntType(Type t) {
  auto i = dyn_cast<IntegerType>(t);
  return i && (i.getWidth() == 4 || i.getWidth() == 2);
}
unsigned bitWidth(Type t) { return t.isIndex() ? 64 : t.getIntOrFloatBitWidth(); }

/// `'tk.binary' add` and the like, for messages.
std::string opName(Operation *op) {
  std::string kind = llvm::TypeSwitch<Operation *, std::string>(op)
                         .Case([](tk::UnaryOp u) { return stringifyUnaryKind(u.getKind()).str(); })
                         .Case([](tk::BinaryOp b) { return stringifyBinaryKind(b.getKind()).str(); })
                         .Case([](tk::CompareOp c) { return stringifyCompareKind(c.getKind()).str(); })
                         .Default([](Operation *) { return std::string(); });
  return "'" + op->getName().getStringRef().str() + "'" + (kind.empty() ? "" : " " + kind);
}

/// Unsigned type wrapping arithmetic on `t` is done in.
std::string wrapType(Type t) { return bitWidth(t) <= 32 ? "uint32_t" : "uint64_t"; }

std::string paren(const std::string &s) { return "(" + s + ")"; }

} // namespace

std::string tcc::codegen::typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

std::string ScalarEmitter::computeType(Type type) const {
  switch (category(type)) {
  case Cat::Bool: return "bool";
  case Cat::Index: return "int64_t";
  case Cat::Signed:
  case Cat::Unsigned: {
    unsigned w = isSubByteIntType(type) ? 8 : bitWidth(type);
    if (w != 8 && w != 16 && w != 32 && w != 64)
      throw Error("tk codegen: unsupported integer type " + typeString(type));
    return std::string(category(type) == Cat::Unsigned ? "uint" : "int") + std::to_string(w) +
           "_t";
  }
  case Cat::Float:
    if (type.isF64())
      return "double";
    if (type.isF32() || isHalfLike(type) || isFloat8Type(type))
      return "float";
    throw Error("tk codegen: unsupported float type " + typeString(type));
  }
  return "";
}

std::string ScalarEmitter::storageType(Type type) const {
  if (isHalfLike(type))
    return "uint16_t";
  if (category(type) == Cat::Bool || isFloat8Type(type))
    return "uint8_t";
  return computeType(type);
}

std::string ScalarEmitter::fresh(StringRef prefix) {
  unsigned n = counters[prefix.str()]++;
  return (prefix + Twine(n)).str();
}

const std::string &ScalarEmitter::name(Value value) const {
  auto it = names.find(value);
  if (it == names.end()) {
    std::string where;
    if (Operation *def = value.getDefiningOp())
      where = " defined by " + opName(def);
    throw Error("tk codegen: value" + where + " has no C name (not emitted before its use)");
  }
  return it->second;
}

// ---- Literals ----------------------------------------------------------------------------------

std::string ScalarEmitter::floatLiteral(double value, bool isDouble) const {
  if (std::isnan(value) || std::isinf(value)) {
    char buf[64];
    if (isDouble) {
      uint64_t bits;
      std::memcpy(&bits, &value, 8);
      std::snprintf(buf, sizeof buf, "tcc_f64_from_bits(0x%016llXull)", (unsigned long long)bits);
    } else {
      float f = (float)value;
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      std::snprintf(buf, sizeof buf, "tcc_f32_from_bits(0x%08Xu)", bits);
    }
    return buf;
  }
  char buf[64];
  // Shortest decimal that reads back exactly, else hex.
  bool exact = false;
  for (int digits = isDouble ? 15 : 6; digits <= (isDouble ? 17 : 9) && !exact; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, value);
    exact = isDouble ? std::strtod(buf, nullptr) == value
                     : std::strtof(buf, nullptr) == (float)value;
  }
  if (!exact)
    std::snprintf(buf, sizeof buf, "%a", value);
  std::string s = buf;
  if (s.find_first_of(".eEpx") == std::string::npos)
    s += ".0";
  if (!isDouble)
    s += "f";
  return s[0] == '-' ? paren(s) : s;
}

std::string ScalarEmitter::literal(TypedAttr value) const {
  Type type = value.getType();
  if (auto f = dyn_cast<FloatAttr>(value)) {
    // f16/bf16/f32 values are exact in float.
    return floatLiteral(f.getValueAsDouble(), type.isF64());
  }
  auto i = dyn_cast<IntegerAttr>(value);
  if (!i)
    throw Error("tk codegen: unsupported constant attribute");
  switch (category(type)) {
  case Cat::Bool: return i.getValue().isZero() ? "false" : "true";
  case Cat::Unsigned: {
    uint64_t v = i.getValue().getZExtValue();
    std::string s = std::to_string(v);
    if (bitWidth(type) == 64)
      return s + "ull";
    return bitWidth(type) == 32 ? s + "u" : s;
  }
  case Cat::Signed:
  case Cat::Index: {
    int64_t v = i.getValue().getSExtValue();
    if (v == INT64_MIN)
      return "(-9223372036854775807LL - 1)";
    std::string s = std::to_string(v);
    if (v < INT32_MIN || v > INT32_MAX)
      s += "LL";
    else if (v == INT32_MIN)
      return "(-2147483647 - 1)";
    return v < 0 ? paren(s) : s;
  }
  case Cat::Float: break;
  }
  throw Error("tk codegen: unsupported constant");
}

std::string ScalarEmitter::quietNaN(Type type) const {
  return type.isF64() ? "tcc_f64_from_bits(0x7FF8000000000000ull)" : "tcc_f32_from_bits(0x7FC00000u)";
}

// ---- Expressions -------------------------------------------------------------------------------

std::string ScalarEmitter::mathFn(StringRef name, Type computeIn) const {
  std::string fn = name.str();
  if (!computeIn.isF64())
    fn += "f";
  return target == Target::Cpu ? "__builtin_" + fn : fn;
}

std::string ScalarEmitter::roundTo(Type type, const std::string &floatValue) const {
  if (isF16(type))
    return "tcc_round_f16(" + floatValue + ")";
  if (isBF16(type))
    return "tcc_round_bf16(" + floatValue + ")";
  if (isFloat8Type(type))
    return "tcc_round_" + float8Name(type) + "(" + floatValue + ")";
  return floatValue;
}

std::string ScalarEmitter::unaryExpr(UnaryKind kind, Type type, const std::string &x) const {
  Cat cat = category(type);
  if (cat == Cat::Float) {
    bool dbl = type.isF64();
    std::string one = dbl ? "1.0" : "1.0f", zero = dbl ? "0.0" : "0.0f";
    std::string raw;
    // On the CPU, f32 (and f16/bf16, computed in f32) exp/log/tanh/erf/sigmoid call the
    // prelude's vectorisable approximations (within 2-3 ulp of libm, see
    // ScalarPrelude.cpp); f64 and CUDA keep the math library.
    if (target == Target::Cpu && !dbl) {
      const char *approx = nullptr;
      switch (kind) {
      case UnaryKind::Exp: approx = "tcc_expf"; break;
      case UnaryKind::Log: approx = "tcc_logf"; break;
      case UnaryKind::Tanh: approx = "tcc_tanhf"; break;
      case UnaryKind::Erf: approx = "tcc_erff"; break;
      case UnaryKind::Sigmoid: approx = "tcc_sigmoidf"; break;
      default: break;
      }
      if (approx)
        return roundTo(type, std::string(approx) + "(" + x + ")");
    }
    switch (kind) {
    case UnaryKind::Neg: return "-" + x; // exact: no rounding needed
    case UnaryKind::Abs: return mathFn("fabs", type) + "(" + x + ")";
    case UnaryKind::Exp: raw = mathFn("exp", type) + "(" + x + ")"; break;
    case UnaryKind::Log: raw = mathFn("log", type) + "(" + x + ")"; break;
    case UnaryKind::Sqrt: raw = mathFn("sqrt", type) + "(" + x + ")"; break;
    case UnaryKind::Rsqrt: raw = one + " / " + mathFn("sqrt", type) + "(" + x + ")"; break;
    case UnaryKind::Reciprocal: raw = one + " / " + x; break;
    case UnaryKind::Sin: raw = mathFn("sin", type) + "(" + x + ")"; break;
    case UnaryKind::Cos: raw = mathFn("cos", type) + "(" + x + ")"; break;
    case UnaryKind::Tan: raw = mathFn("tan", type) + "(" + x + ")"; break;
    case UnaryKind::Asin: raw = mathFn("asin", type) + "(" + x + ")"; break;
    case UnaryKind::Acos: raw = mathFn("acos", type) + "(" + x + ")"; break;
    case UnaryKind::Atan: raw = mathFn("atan", type) + "(" + x + ")"; break;
    case UnaryKind::Sinh: raw = mathFn("sinh", type) + "(" + x + ")"; break;
    case UnaryKind::Cosh: raw = mathFn("cosh", type) + "(" + x + ")"; break;
    case UnaryKind::Tanh: raw = mathFn("tanh", type) + "(" + x + ")"; break;
    case UnaryKind::Asinh: raw = mathFn("asinh", type) + "(" + x + ")"; break;
    case UnaryKind::Acosh: raw = mathFn("acosh", type) + "(" + x + ")"; break;
    case UnaryKind::Atanh: raw = mathFn("atanh", type) + "(" + x + ")"; break;
    case UnaryKind::Erf: raw = mathFn("erf", type) + "(" + x + ")"; break;
    case UnaryKind::Sigmoid:
      raw = one + " / (" + one + " + " + mathFn("exp", type) + "(-" + x + "))";
      break;
    // On the CPU through the prelude's nearbyint-based helpers: GCC does not vectorise
    // floor/ceil under -ftrapping-math.
    case UnaryKind::Floor:
      raw = (target == Target::Cpu ? (dbl ? "tcc_floor(" : "tcc_floorf(")
                                   : mathFn("floor", type) + "(") + x + ")";
      break;
    case UnaryKind::Ceil:
      raw = (target == Target::Cpu ? (dbl ? "tcc_ceil(" : "tcc_ceilf(")
                                   : mathFn("ceil", type) + "(") + x + ")";
      break;
    // nearbyint rounds in the default mode: to nearest, ties to even.
    case UnaryKind::Round: raw = mathFn("nearbyint", type) + "(" + x + ")"; break;
    case UnaryKind::Sign: // NaN and signed zeros map to themselves
      return "(" + x + " > " + zero + " ? " + one + " : " + x + " < " + zero + " ? -" + one +
             " : " + x + ")";
    case UnaryKind::Not: return "";
    }
    return roundTo(type, raw);
  }
  if (cat == Cat::Bool)
    return kind == UnaryKind::Not ? "!" + x : "";
  std::string t = computeType(type), u = wrapType(type);
  bool isSigned = cat != Cat::Unsigned;
  if (cat == Cat::Index) {
    switch (kind) {
    case UnaryKind::Neg: return "-" + x;
    case UnaryKind::Abs: return "(" + x + " < 0 ? -" + x + " : " + x + ")";
    case UnaryKind::Sign: return "(int64_t)((" + x + " > 0) - (" + x + " < 0))";
    default: return "";
    }
  }
  switch (kind) {
  case UnaryKind::Neg: return "(" + t + ")((" + u + ")0 - (" + u + ")" + x + ")";
  case UnaryKind::Abs:
    if (!isSigned)
      return x;
    return "(" + x + " < 0 ? (" + t + ")((" + u + ")0 - (" + u + ")" + x + ") : " + x + ")";
  case UnaryKind::Sign:
    if (!isSigned)
      return "(" + t + ")(" + x + " > 0)";
    return "(" + t + ")((" + x + " > 0) - (" + x + " < 0))";
  case UnaryKind::Not: return "(" + t + ")~" + x;
  default: return "";
  }
}

std::string ScalarEmitter::binaryExpr(BinaryKind kind, Type type, const std::string &a,
                                      const std::string &b) const {
  Cat cat = category(type);
  std::string t = computeType(type);
  auto helper = [&](const char *fn) { return std::string(fn) + "<" + t + ">(" + a + ", " + b + ")"; };
  if (cat == Cat::Float) {
    std::string raw;
    switch (kind) {
    case BinaryKind::Add: raw = a + " + " + b; break;
    case BinaryKind::Sub: raw = a + " - " + b; break;
    case BinaryKind::Mul: raw = a + " * " + b; break;
    case BinaryKind::Div: raw = a + " / " + b; break;
    case BinaryKind::Rem: raw = mathFn("fmod", type) + "(" + a + ", " + b + ")"; break;
    case BinaryKind::Pow: raw = mathFn("pow", type) + "(" + a + ", " + b + ")"; break;
    case BinaryKind::Max: return helper("tcc_max"); // one of the operands: exact
    case BinaryKind::Min: return helper("tcc_min");
    default: return "";
    }
    return isHalfLike(type) ? roundTo(type, raw) : raw;
  }
  if (cat == Cat::Bool) {
    switch (kind) {
    case BinaryKind::And:
    case BinaryKind::Min: return a + " && " + b;
    case BinaryKind::Or:
    case BinaryKind::Max: return a + " || " + b;
    case BinaryKind::Xor: return a + " != " + b;
    default: return "";
    }
  }
  if (cat == Cat::Index) {
    switch (kind) {
    case BinaryKind::Add: return a + " + " + b;
    case BinaryKind::Sub: return a + " - " + b;
    case BinaryKind::Mul: return a + " * " + b;
    case BinaryKind::Div: return helper("tcc_div");
    case BinaryKind::Rem: return helper("tcc_rem");
    case BinaryKind::Max: return helper("tcc_max");
    case BinaryKind::Min: return helper("tcc_min");
    default: return "";
    }
  }
  // Integers wrap: signed and narrow types compute in an unsigned type of >= 32 bits.
  std::string u = wrapType(type);
  bool plain = cat == Cat::Unsigned && bitWidth(type) >= 32;
  auto wrapped = [&](const char *op) {
    if (plain)
      return a + " " + op + " " + b;
    return "(" + t + ")((" + u + ")" + a + " " + op + " (" + u + ")" + b + ")";
  };
  switch (kind) {
  case BinaryKind::Add: return wrapped("+");
  case BinaryKind::Sub: return wrapped("-");
  case BinaryKind::Mul: return wrapped("*");
  case BinaryKind::Div: return helper("tcc_div");
  case BinaryKind::Rem: return helper("tcc_rem");
  case BinaryKind::Pow: return helper("tcc_ipow");
  case BinaryKind::Max: return "(" + a + " < " + b + " ? " + b + " : " + a + ")";
  case BinaryKind::Min: return "(" + b + " < " + a + " ? " + b + " : " + a + ")";
  case BinaryKind::And: return "(" + t + ")(" + a + " & " + b + ")";
  case BinaryKind::Or: return "(" + t + ")(" + a + " | " + b + ")";
  case BinaryKind::Xor: return "(" + t + ")(" + a + " ^ " + b + ")";
  case BinaryKind::ShiftLeft: return cat == Cat::Unsigned ? helper("tcc_shl") : "";
  case BinaryKind::ShiftRight: return cat == Cat::Unsigned ? helper("tcc_shr") : "";
  }
  return "";
}

std::string ScalarEmitter::castExpr(Type from, Type to, const std::string &x) const {
  if (from == to)
    return x;
  Cat cf = category(from), ct = category(to);
  std::string t = computeType(to);
  if (ct == Cat::Bool)
    return "(" + x + " != 0)";
  if (cf == Cat::Bool) {
    if (ct == Cat::Float)
      return to.isF64() ? "(" + x + " ? 1.0 : 0.0)" : "(" + x + " ? 1.0f : 0.0f)";
    return "(" + t + ")" + x;
  }
  if (isSubByteIntType(to)) { // wraps, from floats after a saturating truncation to int64
    std::string wide = cf == Cat::Float ? "tcc_sat_cast<int64_t>(" + x + ")" : "(int64_t)" + x;
    std::string bits = std::to_string(bitWidth(to));
    return (to.isUnsignedInteger() ? "tcc_wrap_u" : "tcc_wrap_i") + bits + "(" + wide + ")";
  }
  if (ct != Cat::Float) { // to an integer or index
    if (cf == Cat::Float)
      return "tcc_sat_cast<" + t + ">(" + x + ")";
    return "(" + t + ")" + x; // integers wrap
  }
  // To a float type.
  if (cf != Cat::Float) { // from an integer
    if (to.isF32() || to.isF64())
      return "(" + t + ")" + x;
    // int -> f16: (float)x is exact below 2^24 and rounds to >= 65520 (f16 inf) above, so one
    // float rounding is harmless. bf16 keeps 8 bits: wide integers need round-to-odd first.
    if (isF16(to) || bitWidth(from) <= 16)
      return roundTo(to, "(float)" + x);
    return roundTo(to, "tcc_int_to_f32_rto<" + computeType(from) + ">(" + x + ")");
  }
  // Float to float.
  if (to.isF64())
    return "(double)" + x;
  if (to.isF32())
    return from.isF64() ? "(float)" + x : x;
  if (from.isF64())
    return roundTo(to, "tcc_f64_to_f32_rto(" + x + ")");
  return roundTo(to, x);
}

namespace {
/// Prints an AffineExpr as C over int64_t operands, with parentheses only where needed.
struct AffinePrinter {
  ArrayRef<std::string> dims, symbols;

  static bool isSum(AffineExpr e) { return e.getKind() == AffineExprKind::Add; }
  /// `e` as an operand of `*` or `-`: sums need parentheses.
  std::string operand(AffineExpr e) { return isSum(e) ? "(" + print(e) + ")" : print(e); }

  std::string print(AffineExpr e) {
    switch (e.getKind()) {
    case AffineExprKind::Constant: {
      int64_t v = cast<AffineConstantExpr>(e).getValue();
      return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
    }
    case AffineExprKind::DimId: return dims[cast<AffineDimExpr>(e).getPosition()];
    case AffineExprKind::SymbolId: return symbols[cast<AffineSymbolExpr>(e).getPosition()];
    default: break;
    }
    auto bin = cast<AffineBinaryOpExpr>(e);
    AffineExpr lhs = bin.getLHS(), rhs = bin.getRHS();
    switch (e.getKind()) {
    case AffineExprKind::Add: {
      // a + (-k) -> a - k; a + b * -1 -> a - b
      if (auto c = dyn_cast<AffineConstantExpr>(rhs); c && c.getValue() < 0)
        return print(lhs) + " - " + std::to_string(-c.getValue());
      if (auto m = dyn_cast<AffineBinaryOpExpr>(rhs); m && m.getKind() == AffineExprKind::Mul)
        if (auto c = dyn_cast<AffineConstantExpr>(m.getRHS()); c && c.getValue() == -1)
          return print(lhs) + " - " + operand(m.getLHS());
      return print(lhs) + " + " + print(rhs);
    }
    case AffineExprKind::Mul: return operand(lhs) + " * " + operand(rhs);
    case AffineExprKind::FloorDiv: return "tcc_floordiv(" + print(lhs) + ", " + print(rhs) + ")";
    case AffineExprKind::CeilDiv: return "tcc_ceildiv(" + print(lhs) + ", " + print(rhs) + ")";
    case AffineExprKind::Mod: return "tcc_mod(" + print(lhs) + ", " + print(rhs) + ")";
    default: break;
    }
    throw Error("tk codegen: unsupported affine expression");
  }
};
} // namespace

std::string ScalarEmitter::affine(AffineExpr expr, ArrayRef<std::string> dims,
                                  ArrayRef<std::string> symbols) const {
  return AffinePrinter{dims, symbols}.print(expr);
}

bool ScalarEmitter::isScalarOp(Operation *op) {
  return isa<tk::ConstantOp, tk::UnaryOp, tk::BinaryOp, tk::CompareOp, tk::SelectOp, tk::CastOp,
             tk::BitcastOp, tk::ApplyOp, tk::SizeOp>(op);
}

std::string ScalarEmitter::sizeExpr(const SymExpr &e) {
  using Kind = SymExpr::AtomKind;
  if (std::optional<int64_t> c = e.constant())
    return *c < 0 ? "(" + std::to_string(*c) + ")" : std::to_string(*c);
  std::string sum;
  for (const SymExpr::TermView &term : e.terms()) {
    std::vector<std::string> factors;
    for (const auto &[atom, power] : term.factors) {
      std::string a;
      if (atom.kind == Kind::Symbol) {
        a = symbolLocal(atom.name);
      } else {
        std::string x = sizeExpr(atom.operands[0]), y = sizeExpr(atom.operands[1]);
        switch (atom.kind) {
        case Kind::FloorDiv: a = "tcc_floordiv(" + x + ", " + y + ")"; break;
        case Kind::CeilDiv: a = "tcc_ceildiv(" + x + ", " + y + ")"; break;
        case Kind::Mod: a = "tcc_mod(" + x + ", " + y + ")"; break;
        case Kind::Max: a = "(" + x + " > " + y + " ? " + x + " : " + y + ")"; break;
        case Kind::Min: a = "(" + x + " < " + y + " ? " + x + " : " + y + ")"; break;
        case Kind::Symbol: break;
        }
      }
      for (int64_t p = 0; p < power; ++p)
        factors.push_back(a);
    }
    std::string t;
    if (factors.empty() || term.coeff != 1)
      t = term.coeff < 0 ? "(" + std::to_string(term.coeff) + ")" : std::to_string(term.coeff);
    for (const std::string &f : factors)
      t += (t.empty() ? "" : " * ") + f;
    sum += (sum.empty() ? "" : " + ") + t;
  }
  return "(" + sum + ")";
}

/// A float max or min with a constant operand that is not NaN, as one comparison and select:
/// what tcc_max and tcc_min compute then (a NaN operand, the other one, wins; equal operands
/// give the first), which GCC otherwise vectorises as a dozen mask operations (a ReLU, a
/// clamp, a hard swish's). Empty for any other op.
std::string ScalarEmitter::maxMinOfConstant(Operation *binary) const {
  auto b = cast<tk::BinaryOp>(binary);
  if (category(b.getType()) != Cat::Float ||
      (b.getKind() != BinaryKind::Max && b.getKind() != BinaryKind::Min))
    return "";
  auto constant = [](Value v) {
    auto c = v.getDefiningOp<tk::ConstantOp>();
    auto f = c ? dyn_cast<FloatAttr>(c.getValue()) : FloatAttr();
    return f && !f.getValue().isNaN();
  };
  const bool max = b.getKind() == BinaryKind::Max;
  const std::string x = name(b.getLhs()), y = name(b.getRhs());
  if (constant(b.getRhs())) // max: x < c ? c : x; min: c < x ? c : x (a NaN x is kept)
    return max ? "(" + x + " < " + y + " ? " + y + " : " + x + ")"
               : "(" + y + " < " + x + " ? " + y + " : " + x + ")";
  if (constant(b.getLhs())) // max: y when c < y or y is NaN, else c
    return max ? "((" + x + " < " + y + " || " + y + " != " + y + ") ? " + y + " : " + x + ")"
               : "((" + y + " < " + x + " || " + y + " != " + y + ") ? " + y + " : " + x + ")";
  return "";
}

std::string ScalarEmitter::expression(Operation *op) const {
  auto fail = [&](const std::string &why) -> std::string {
    throw Error("tk codegen: cannot emit " + opName(op) + ": " + why);
  };
  try {
    std::string e =
        llvm::TypeSwitch<Operation *, std::string>(op)
            .Case([&](tk::ConstantOp c) { return literal(cast<TypedAttr>(c.getValue())); })
            .Case([&](tk::UnaryOp u) {
              return unaryExpr(u.getKind(), u.getType(), name(u.getX()));
            })
            .Case([&](tk::BinaryOp b) {
              if (std::string e = maxMinOfConstant(b); !e.empty())
                return e;
              return binaryExpr(b.getKind(), b.getType(), name(b.getLhs()), name(b.getRhs()));
            })
            .Case([&](tk::CompareOp c) {
              static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
              return name(c.getLhs()) + " " + ops[(unsigned)c.getKind()] + " " +
                     name(c.getRhs());
            })
            .Case([&](tk::SelectOp s) {
              return name(s.getCond()) + " ? " + name(s.getOnTrue()) + " : " +
                     name(s.getOnFalse());
            })
            .Case([&](tk::BitcastOp c) {
              // The stored bits of x (as a store would write them), read as the result's
              // storage type, then loaded as a value of it.
              Type from = c.getX().getType(), to = c.getType();
              std::string bits = "tcc_bit_cast<" + storageType(to) + ", " + storageType(from) +
                                 ">(" + storeValue(from, name(c.getX())) + ")";
              return loadValue(to, bits);
            })
            .Case([&](tk::CastOp c) {
              return castExpr(c.getX().getType(), c.getType(), name(c.getX()));
            })
            .Case([&](tk::SizeOp size) {
              return sizeExpr(*SymExpr::parse(size.getExpr())); // verified
            })
            .Case([&](tk::ApplyOp a) {
              AffineMap map = a.getMap();
              std::vector<std::string> dims, syms;
              for (auto [i, v] : llvm::enumerate(a.getOperands()))
                (i < map.getNumDims() ? dims : syms).push_back(name(v));
              return affine(map.getResult(0), dims, syms);
            })
            .Default([&](Operation *) { return fail("not a scalar op"); });
    if (e.empty())
      fail("unsupported for type " + typeString(op->getResult(0).getType()));
    return e;
  } catch (const Error &e) {
    std::string msg = e.what();
    if (msg.find("cannot emit") != std::string::npos)
      throw;
    return fail(msg);
  }
}

std::string ScalarEmitter::symbolLocals(func::FuncOp kernel, const std::string &symbolsPointer) {
  std::string out;
  auto module = kernel->getParentOfType<ModuleOp>();
  auto symbols = module ? module->getAttrOfType<DictionaryAttr>(TccDialect::kSymbolsAttrName)
                        : DictionaryAttr{};
  if (!symbols)
    throw Error("tk codegen: kernel '" + kernel.getSymName().str() +
                "' takes size symbols but the module declares none");
  for (auto [i, entry] : llvm::enumerate(symbols.getValue())) {
    std::string local = symbolLocal(entry.getName().getValue());
    out += "  const int64_t " + local + " = " + symbolsPointer + "[" + std::to_string(i) +
           "];\n  (void)" + local + ";\n";
  }
  return out;
}

std::string ScalarEmitter::sizeLocal(const SymExpr &e) const {
  if (e.isConstant())
    return sizeExpr(e);
  if (std::optional<std::string> name = e.symbolName())
    return symbolLocal(*name);
  auto [it, added] = sizeLocals_.emplace(e.str(), "tcc_size" + std::to_string(sizeLocals_.size()));
  if (added)
    sizeDeclarations_.push_back("const int64_t " + it->second + " = " + sizeExpr(e) + ";");
  return it->second;
}

std::string ScalarEmitter::linearIndex(MemRefType type, ValueRange indices) const {
  if (!type.hasStaticShape()) {
    SymShape dims = tk::bufferDims(type);
    SymExpr stride(1);
    std::vector<std::string> terms;
    for (int64_t d = (int64_t)dims.size() - 1; d >= 0; --d) {
      if (dims[d] != SymExpr(1)) {
        std::string idx = name(indices[d]);
        terms.push_back(stride == SymExpr(1) ? idx : idx + " * " + sizeLocal(stride));
      }
      stride *= dims[d];
    }
    std::string s;
    for (auto it = terms.rbegin(); it != terms.rend(); ++it)
      s += (s.empty() ? "" : " + ") + *it;
    return s.empty() ? "0" : s;
  }
  ArrayRef<int64_t> shape = type.getShape();
  std::string s;
  int64_t stride = 1;
  std::vector<std::string> terms;
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    if (shape[d] != 1) { // a size-1 dim can only be indexed by 0
      std::string idx = name(indices[d]);
      terms.push_back(stride == 1 ? idx : idx + " * " + std::to_string(stride));
    }
    stride *= shape[d];
  }
  if (terms.empty())
    return "0";
  for (auto it = terms.rbegin(); it != terms.rend(); ++it)
    s += (s.empty() ? "" : " + ") + *it;
  return s;
}

std::string ScalarEmitter::loadValue(Type elementType, const std::string &element) const {
  if (isF16(elementType))
    return "tcc_f16_to_f32(" + element + ")";
  if (isBF16(elementType))
    return "tcc_bf16_to_f32(" + element + ")";
  if (isFloat8Type(elementType))
    return "tcc_" + float8Name(elementType) + "_to_f32(" + element + ")";
  if (category(elementType) == Cat::Bool)
    return "(" + element + " != 0)";
  return element;
}

std::string ScalarEmitter::storeValue(Type elementType, const std::string &value) const {
  if (isF16(elementType))
    return "tcc_f32_to_f16(" + value + ")";
  if (isBF16(elementType))
    return "tcc_f32_to_bf16(" + value + ")";
  if (isFloat8Type(elementType))
    return "tcc_f32_to_" + float8Name(elementType) + "(" + value + ")";
  if (category(elementType) == Cat::Bool)
    return "(uint8_t)" + value;
  return value;
}

// ---- Reductions --------------------------------------------------------------------------------

std::string ScalarEmitter::accumulatorType(ReduceKind kind, Type type) const {
  Cat cat = category(type);
  if ((kind == ReduceKind::Sum || kind == ReduceKind::Prod) &&
      (cat == Cat::Signed || (cat == Cat::Unsigned && bitWidth(type) < 32)))
    return wrapType(type);
  return computeType(type);
}

std::string ScalarEmitter::reduceIdentity(ReduceKind kind, Type type) const {
  Cat cat = category(type);
  if (cat == Cat::Bool) {
    if (kind == ReduceKind::Max)
      return "false";
    if (kind == ReduceKind::Min)
      return "true";
    throw Error("tk codegen: cannot emit a sum or product reduction of i1");
  }
  if (cat == Cat::Float) {
    bool dbl = type.isF64();
    switch (kind) {
    case ReduceKind::Sum: return dbl ? "0.0" : "0.0f";
    case ReduceKind::Prod: return dbl ? "1.0" : "1.0f";
    case ReduceKind::Max: return floatLiteral(-INFINITY, dbl);
    case ReduceKind::Min: return floatLiteral(INFINITY, dbl);
    }
  }
  if (kind == ReduceKind::Sum)
    return "0";
  if (kind == ReduceKind::Prod)
    return "1";
  unsigned w = bitWidth(type);
  bool isSigned = cat != Cat::Unsigned;
  if (kind == ReduceKind::Max) {
    if (!isSigned)
      return "0";
    return w == 64 ? "(-9223372036854775807LL - 1)"
           : w == 32 ? "(-2147483647 - 1)"
                     : "(-" + std::to_string(1ll << (w - 1)) + ")";
  }
  if (isSigned)
    return w == 64 ? "9223372036854775807LL" : std::to_string((1ll << (w - 1)) - 1);
  return w == 64 ? "18446744073709551615ull"
         : w == 32 ? "4294967295u"
                   : std::to_string((1ll << w) - 1);
}

std::string ScalarEmitter::reduceCombine(ReduceKind kind, Type type, const std::string &acc,
                                         const std::string &value) const {
  Cat cat = category(type);
  std::string acct = accumulatorType(kind, type);
  std::string v = acct == computeType(type) ? value : "(" + acct + ")" + value;
  switch (kind) {
  case ReduceKind::Sum: return acc + " + " + v;
  case ReduceKind::Prod: return acc + " * " + v;
  case ReduceKind::Max:
    if (cat == Cat::Bool)
      return acc + " || " + v;
    return v + " > " + acc + " ? " + v + " : " + acc;
  case ReduceKind::Min:
    if (cat == Cat::Bool)
      return acc + " && " + v;
    return v + " < " + acc + " ? " + v + " : " + acc;
  }
  return "";
}

std::string ScalarEmitter::reduceResult(ReduceKind kind, Type type, const std::string &acc) const {
  if (isHalfLike(type))
    return roundTo(type, acc);
  if (accumulatorType(kind, type) != computeType(type))
    return "(" + computeType(type) + ")" + acc;
  return acc;
}

bool ScalarEmitter::reductionTracksNaN(ReduceKind kind, Type type) {
  return (kind == ReduceKind::Max || kind == ReduceKind::Min) && isa<FloatType>(type);
}

std::string ScalarEmitter::moreExtreme(Type type, bool largest, const std::string &a,
                                       const std::string &b) const {
  return "tcc_more_extreme<" + computeType(type) + ">(" + a + ", " + b + ", " +
         (largest ? "true" : "false") + ")";
}
