//===- KernelsElementwise.cpp - unary, binary, compare, select, cast ------===//

#include "KernelUtils.h"

namespace tcc::kernels {
using namespace detail;

namespace {

const char *unaryKindName(UnaryKind kind) {
  static const char *const names[] = {
      "Neg",   "Abs",  "Exp",     "Log",   "Sqrt", "Rsqrt", "Reciprocal", "Sin",   "Cos",
      "Tan",   "Asin", "Acos",    "Atan",  "Sinh", "Cosh",  "Tanh",       "Asinh", "Acosh",
      "Atanh", "Erf",  "Sigmoid", "Floor", "Ceil", "Round", "Sign",       "Not"};
  auto i = (size_t)kind;
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

const char *binaryKindName(BinaryKind kind) {
  static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Rem",       "Pow",       "Max",
                                      "Min", "And", "Or",  "Xor", "ShiftLeft", "ShiftRight"};
  auto i = (size_t)kind;
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

[[noreturn]] void unsupportedUnary(UnaryKind kind, DType t) {
  unsupportedDType(std::string("unary ") + unaryKindName(kind), t);
}

[[noreturn]] void unsupportedBinary(BinaryKind kind, DType t) {
  unsupportedDType(std::string("binary ") + binaryKindName(kind), t);
}

/// out[i] = f(x[i]) computed on ComputeType<T>, rounded once to T.
template <class T, class F> Tensor mapUnary(const Tensor &x, F f) {
  Tensor result(x.dtype(), x.shape());
  const T *in = x.data<T>();
  T *out = result.data<T>();
  for (int64_t i = 0, n = x.numElements(); i < n; ++i)
    out[i] = T(f((ComputeType<T>)in[i]));
  return result;
}

/// out[i] = f(a[i], b[i]) computed on ComputeType<T>, rounded once to T.
template <class T, class F> Tensor mapBinary(const Tensor &a, const Tensor &b, F f) {
  Tensor result(a.dtype(), a.shape());
  const T *lhs = a.data<T>();
  const T *rhs = b.data<T>();
  T *out = result.data<T>();
  for (int64_t i = 0, n = a.numElements(); i < n; ++i)
    out[i] = T(f((ComputeType<T>)lhs[i], (ComputeType<T>)rhs[i]));
  return result;
}

// ---- Unary -----------------------------------------------------------------------------------

template <class T> Tensor unaryFloat(UnaryKind kind, const Tensor &x) {
  using C = ComputeType<T>;
  switch (kind) {
  case UnaryKind::Neg: return mapUnary<T>(x, [](C v) { return -v; });
  case UnaryKind::Abs: return mapUnary<T>(x, [](C v) { return std::fabs(v); });
  case UnaryKind::Exp: return mapUnary<T>(x, [](C v) { return std::exp(v); });
  case UnaryKind::Log: return mapUnary<T>(x, [](C v) { return std::log(v); });
  case UnaryKind::Sqrt: return mapUnary<T>(x, [](C v) { return std::sqrt(v); });
  case UnaryKind::Rsqrt: return mapUnary<T>(x, [](C v) { return C(1) / std::sqrt(v); });
  case UnaryKind::Reciprocal: return mapUnary<T>(x, [](C v) { return C(1) / v; });
  case UnaryKind::Sin: return mapUnary<T>(x, [](C v) { return std::sin(v); });
  case UnaryKind::Cos: return mapUnary<T>(x, [](C v) { return std::cos(v); });
  case UnaryKind::Tan: return mapUnary<T>(x, [](C v) { return std::tan(v); });
  case UnaryKind::Asin: return mapUnary<T>(x, [](C v) { return std::asin(v); });
  case UnaryKind::Acos: return mapUnary<T>(x, [](C v) { return std::acos(v); });
  case UnaryKind::Atan: return mapUnary<T>(x, [](C v) { return std::atan(v); });
  case UnaryKind::Sinh: return mapUnary<T>(x, [](C v) { return std::sinh(v); });
  case UnaryKind::Cosh: return mapUnary<T>(x, [](C v) { return std::cosh(v); });
  case UnaryKind::Tanh: return mapUnary<T>(x, [](C v) { return std::tanh(v); });
  case UnaryKind::Asinh: return mapUnary<T>(x, [](C v) { return std::asinh(v); });
  case UnaryKind::Acosh: return mapUnary<T>(x, [](C v) { return std::acosh(v); });
  case UnaryKind::Atanh: return mapUnary<T>(x, [](C v) { return std::atanh(v); });
  case UnaryKind::Erf: return mapUnary<T>(x, [](C v) { return std::erf(v); });
  case UnaryKind::Sigmoid: return mapUnary<T>(x, [](C v) { return C(1) / (C(1) + std::exp(-v)); });
  case UnaryKind::Floor: return mapUnary<T>(x, [](C v) { return std::floor(v); });
  case UnaryKind::Ceil: return mapUnary<T>(x, [](C v) { return std::ceil(v); });
  // nearbyint rounds in the current mode, which is round-to-nearest-even by default.
  case UnaryKind::Round: return mapUnary<T>(x, [](C v) { return std::nearbyint(v); });
  case UnaryKind::Sign:
    // NaN and signed zeros map to themselves.
    return mapUnary<T>(x, [](C v) { return v > 0 ? C(1) : v < 0 ? C(-1) : v; });
  case UnaryKind::Not: break;
  }
  unsupportedUnary(kind, x.dtype());
}

template <class T> Tensor unaryInt(UnaryKind kind, const Tensor &x) {
  switch (kind) {
  case UnaryKind::Neg: return mapUnary<T>(x, [](T v) { return wrapSub(T(0), v); });
  case UnaryKind::Abs:
    return mapUnary<T>(x, [](T v) {
      if constexpr (std::is_signed_v<T>)
        return v < 0 ? wrapSub(T(0), v) : v; // abs(min) wraps to min
      else
        return v;
    });
  case UnaryKind::Sign:
    return mapUnary<T>(x, [](T v) {
      if constexpr (std::is_signed_v<T>)
        return T(v > 0 ? 1 : v < 0 ? -1 : 0);
      else
        return T(v > 0 ? 1 : 0);
    });
  case UnaryKind::Not: return mapUnary<T>(x, [](T v) { return T(~v); });
  default: break;
  }
  unsupportedUnary(kind, x.dtype());
}

Tensor unaryBool(UnaryKind kind, const Tensor &x) {
  if (kind == UnaryKind::Not)
    return mapUnary<bool>(x, [](bool v) { return !v; });
  unsupportedUnary(kind, x.dtype());
}

// ---- Binary ----------------------------------------------------------------------------------

/// base^exponent by repeated squaring, wrapping. A negative exponent gives the truncated
/// reciprocal: 1 or -1 for base 1 / -1, else 0.
template <class T> T intPow(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1)
        return 1;
      if (base == -1)
        return (exponent & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  auto e = (std::make_unsigned_t<T>)exponent;
  while (e) {
    if (e & 1)
      result = wrapMul(result, base);
    base = wrapMul(base, base);
    e >>= 1;
  }
  return result;
}

template <class T> T checkedIntDiv(T a, T b) {
  if (b == 0)
    throw Error("binary Div: integer division by zero");
  if constexpr (std::is_signed_v<T>)
    if (b == -1)
      return wrapSub(T(0), a); // min / -1 overflows
  return T(a / b);
}

template <class T> T checkedIntRem(T a, T b) {
  if (b == 0)
    throw Error("binary Rem: integer remainder by zero");
  if constexpr (std::is_signed_v<T>)
    if (b == -1)
      return 0; // min % -1 overflows
  return T(a % b);
}

template <class T> Tensor binaryFloat(BinaryKind kind, const Tensor &a, const Tensor &b) {
  using C = ComputeType<T>;
  switch (kind) {
  case BinaryKind::Add: return mapBinary<T>(a, b, [](C x, C y) { return x + y; });
  case BinaryKind::Sub: return mapBinary<T>(a, b, [](C x, C y) { return x - y; });
  case BinaryKind::Mul: return mapBinary<T>(a, b, [](C x, C y) { return x * y; });
  case BinaryKind::Div: return mapBinary<T>(a, b, [](C x, C y) { return x / y; });
  case BinaryKind::Rem: return mapBinary<T>(a, b, [](C x, C y) { return std::fmod(x, y); });
  case BinaryKind::Pow: return mapBinary<T>(a, b, [](C x, C y) { return std::pow(x, y); });
  case BinaryKind::Max: return mapBinary<T>(a, b, maxValues<C>);
  case BinaryKind::Min: return mapBinary<T>(a, b, minValues<C>);
  default: break;
  }
  unsupportedBinary(kind, a.dtype());
}

template <class T> Tensor binaryInt(BinaryKind kind, const Tensor &a, const Tensor &b) {
  switch (kind) {
  case BinaryKind::Add: return mapBinary<T>(a, b, wrapAdd<T>);
  case BinaryKind::Sub: return mapBinary<T>(a, b, wrapSub<T>);
  case BinaryKind::Mul: return mapBinary<T>(a, b, wrapMul<T>);
  case BinaryKind::Div: return mapBinary<T>(a, b, checkedIntDiv<T>);
  case BinaryKind::Rem: return mapBinary<T>(a, b, checkedIntRem<T>);
  case BinaryKind::Pow: return mapBinary<T>(a, b, intPow<T>);
  case BinaryKind::Max: return mapBinary<T>(a, b, maxValues<T>);
  case BinaryKind::Min: return mapBinary<T>(a, b, minValues<T>);
  case BinaryKind::And: return mapBinary<T>(a, b, [](T x, T y) { return T(x & y); });
  case BinaryKind::Or: return mapBinary<T>(a, b, [](T x, T y) { return T(x | y); });
  case BinaryKind::Xor: return mapBinary<T>(a, b, [](T x, T y) { return T(x ^ y); });
  case BinaryKind::ShiftLeft:
    if constexpr (std::is_unsigned_v<T>)
      return mapBinary<T>(
          a, b, [](T x, T y) { return y >= sizeof(T) * 8 ? T(0) : T((WrapType<T>)x << y); });
    break;
  case BinaryKind::ShiftRight:
    if constexpr (std::is_unsigned_v<T>)
      return mapBinary<T>(a, b, [](T x, T y) { return y >= sizeof(T) * 8 ? T(0) : T(x >> y); });
    break;
  }
  unsupportedBinary(kind, a.dtype());
}

Tensor binaryBool(BinaryKind kind, const Tensor &a, const Tensor &b) {
  switch (kind) {
  case BinaryKind::And: return mapBinary<bool>(a, b, [](bool x, bool y) { return x && y; });
  case BinaryKind::Or: return mapBinary<bool>(a, b, [](bool x, bool y) { return x || y; });
  case BinaryKind::Xor: return mapBinary<bool>(a, b, [](bool x, bool y) { return x != y; });
  case BinaryKind::Max: return mapBinary<bool>(a, b, [](bool x, bool y) { return x || y; });
  case BinaryKind::Min: return mapBinary<bool>(a, b, [](bool x, bool y) { return x && y; });
  default: break;
  }
  unsupportedBinary(kind, a.dtype());
}

// ---- Compare ---------------------------------------------------------------------------------

template <class T, class F> Tensor mapCompare(const Tensor &a, const Tensor &b, F f) {
  Tensor result(DType::Bool, a.shape());
  const T *lhs = a.data<T>();
  const T *rhs = b.data<T>();
  bool *out = result.data<bool>();
  for (int64_t i = 0, n = a.numElements(); i < n; ++i)
    out[i] = f((ComputeType<T>)lhs[i], (ComputeType<T>)rhs[i]);
  return result;
}

template <class T> Tensor compareTyped(CompareKind kind, const Tensor &a, const Tensor &b) {
  using C = ComputeType<T>;
  switch (kind) {
  case CompareKind::Eq: return mapCompare<T>(a, b, [](C x, C y) { return x == y; });
  case CompareKind::Ne: return mapCompare<T>(a, b, [](C x, C y) { return x != y; });
  case CompareKind::Lt: return mapCompare<T>(a, b, [](C x, C y) { return x < y; });
  case CompareKind::Le: return mapCompare<T>(a, b, [](C x, C y) { return x <= y; });
  case CompareKind::Gt: return mapCompare<T>(a, b, [](C x, C y) { return x > y; });
  case CompareKind::Ge: return mapCompare<T>(a, b, [](C x, C y) { return x >= y; });
  }
  throw Error("compare: invalid comparison kind");
}

void checkBinaryOperands(const std::string &op, const Tensor &a, const Tensor &b) {
  checkDefined(op, a);
  checkDefined(op, b);
  checkSameDType(op, a, b);
  checkSameShape(op, a, b);
}

} // namespace

Tensor unary(UnaryKind kind, const Tensor &x) {
  checkDefined("unary", x);
  return visitDType(x.dtype(), [&](auto tag) -> Tensor {
    using T = decltype(tag);
    if constexpr (isFloatType<T>)
      return unaryFloat<T>(kind, x);
    else if constexpr (isIntType<T>)
      return unaryInt<T>(kind, x);
    else
      return unaryBool(kind, x);
  });
}

Tensor binary(BinaryKind kind, const Tensor &lhs, const Tensor &rhs) {
  checkBinaryOperands(std::string("binary ") + binaryKindName(kind), lhs, rhs);
  return visitDType(lhs.dtype(), [&](auto tag) -> Tensor {
    using T = decltype(tag);
    if constexpr (isFloatType<T>)
      return binaryFloat<T>(kind, lhs, rhs);
    else if constexpr (isIntType<T>)
      return binaryInt<T>(kind, lhs, rhs);
    else
      return binaryBool(kind, lhs, rhs);
  });
}

Tensor compare(CompareKind kind, const Tensor &lhs, const Tensor &rhs) {
  checkBinaryOperands("compare", lhs, rhs);
  return visitDType(
      lhs.dtype(), [&](auto tag) -> Tensor { return compareTyped<decltype(tag)>(kind, lhs, rhs); });
}

Tensor select(const Tensor &cond, const Tensor &a, const Tensor &b) {
  checkDefined("select", cond);
  checkBinaryOperands("select", a, b);
  if (cond.dtype() != DType::Bool)
    fail("select", std::string("condition must be bool, got ") + dtypeName(cond.dtype()));
  checkSameShape("select", cond, a);
  Tensor result(a.dtype(), a.shape());
  const bool *c = cond.data<bool>();
  visitElementSize(dtypeSize(a.dtype()), [&](auto tag) {
    using U = decltype(tag);
    const U *x = static_cast<const U *>(a.raw());
    const U *y = static_cast<const U *>(b.raw());
    U *out = static_cast<U *>(result.raw());
    for (int64_t i = 0, n = a.numElements(); i < n; ++i)
      out[i] = c[i] ? x[i] : y[i];
  });
  return result;
}

/// Casts from or to a storage-only type: float8 through f32 (its values are exact in f32),
/// 4- and 2-bit integers through their byte (already sign- or zero-extended); into those
/// integers, values wrap as integer conversions do (floats are truncated first, saturating).
static Tensor castStorageOnly(const Tensor &x, DType to) {
  const DType from = x.dtype();
  if (isFloat8(from)) {
    Tensor wide(DType::F32, x.shape());
    const auto *in = static_cast<const uint8_t *>(x.raw());
    float *out = wide.data<float>();
    for (int64_t i = 0, n = x.numElements(); i < n; ++i)
      out[i] = float8ToFloat(from, in[i]);
    return to == DType::F32 ? wide : cast(wide, to);
  }
  if (isSubByteInt(from)) {
    Tensor carrier(subByteIntRange(from).first < 0 ? DType::I8 : DType::U8,
                   x.shape(), x.raw());
    return cast(carrier, to);
  }
  Tensor result(to, x.shape());
  auto *out = static_cast<uint8_t *>(result.raw());
  if (isFloat8(to)) {
    Tensor wide = x.dtype() == DType::F32 ? x : cast(x, DType::F32);
    const float *in = wide.data<float>();
    for (int64_t i = 0, n = x.numElements(); i < n; ++i)
      out[i] = floatToFloat8(to, in[i]);
  } else { // to a 4- or 2-bit integer
    Tensor wide = x.dtype() == DType::I64 ? x : cast(x, DType::I64);
    const int64_t *in = wide.data<int64_t>();
    for (int64_t i = 0, n = x.numElements(); i < n; ++i)
      out[i] = wrapSubByteInt(to, in[i]);
  }
  return result;
}

Tensor bitcast(const Tensor &x, DType to) {
  checkDefined("bitcast", x);
  if (dtypeSize(x.dtype()) != dtypeSize(to))
    fail("bitcast", std::string("element sizes differ: ") + dtypeName(x.dtype()) + " and " +
                        dtypeName(to));
  Tensor result(to, x.shape(), x.raw());
  auto *bytes = static_cast<uint8_t *>(result.raw());
  if (to == DType::Bool)
    for (size_t i = 0; i < result.byteSize(); ++i)
      bytes[i] = bytes[i] != 0;
  if (isSubByteInt(to))
    for (int64_t i = 0; i < result.numElements(); ++i)
      bytes[i] = wrapSubByteInt(to, bytes[i]);
  return result;
}

Tensor cast(const Tensor &x, DType to) {
  checkDefined("cast", x);
  if (x.dtype() != to && (isStorageOnly(x.dtype()) || isStorageOnly(to)))
    return castStorageOnly(x, to);
  Tensor result(to, x.shape());
  visitDType(x.dtype(), [&](auto fromTag) {
    using From = decltype(fromTag);
    visitDType(to, [&](auto toTag) {
      using To = decltype(toTag);
      const From *in = x.data<From>();
      To *out = result.data<To>();
      for (int64_t i = 0, n = x.numElements(); i < n; ++i)
        out[i] = convertScalar<To>(in[i]);
    });
  });
  return result;
}

} // namespace tcc::kernels
