//===- Tensor.cpp - A dense host tensor with a runtime element type -------===//

#include "tcc/Support/Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <random>

namespace tcc {

// ---- Element types --------------------------------------------------------------------------

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::Bool:
  case DType::I8:
  case DType::U8:
  case DType::F8E4M3FN:
  case DType::F8E4M3FNUZ:
  case DType::F8E5M2:
  case DType::F8E5M2FNUZ:
  case DType::U4:
  case DType::I4:
  case DType::U2:
  case DType::I2: return 1;
  case DType::I16:
  case DType::U16:
  case DType::F16:
  case DType::BF16: return 2;
  case DType::I32:
  case DType::U32:
  case DType::F32: return 4;
  case DType::I64:
  case DType::U64:
  case DType::F64: return 8;
  }
  throw Error("invalid dtype");
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::Bool: return "bool";
  case DType::I8: return "i8";
  case DType::I16: return "i16";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  case DType::U8: return "u8";
  case DType::U16: return "u16";
  case DType::U32: return "u32";
  case DType::U64: return "u64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F8E4M3FN: return "f8E4M3FN";
  case DType::F8E4M3FNUZ: return "f8E4M3FNUZ";
  case DType::F8E5M2: return "f8E5M2";
  case DType::F8E5M2FNUZ: return "f8E5M2FNUZ";
  case DType::U4: return "u4";
  case DType::I4: return "i4";
  case DType::U2: return "u2";
  case DType::I2: return "i2";
  }
  throw Error("invalid dtype");
}

std::pair<double, double> toleranceFor(DType t, double rtol, double atol) {
  if (t == DType::BF16)
    return {std::max(rtol, 1.0 / 64), std::max(atol, 1.0 / 256)};
  if (t == DType::F16)
    return {std::max(rtol, 1.0 / 512), std::max(atol, 1.0 / 4096)};
  if (t == DType::F8E4M3FN || t == DType::F8E4M3FNUZ) // one unit in the last place
    return {std::max(rtol, 1.0 / 8), std::max(atol, 1.0 / 512)};
  if (t == DType::F8E5M2 || t == DType::F8E5M2FNUZ)
    return {std::max(rtol, 1.0 / 4), std::max(atol, 1.0 / 32768)};
  return {rtol, atol};
}

bool isFloat(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}

bool isSignedInt(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}

bool isUnsignedInt(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}

bool isFloat8(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E4M3FNUZ || t == DType::F8E5M2 ||
         t == DType::F8E5M2FNUZ;
}

bool isSubByteInt(DType t) {
  return t == DType::U4 || t == DType::I4 || t == DType::U2 || t == DType::I2;
}

// ---- float8 ------------------------------------------------------------------------------------

namespace {
/// How a float8 type encodes: exponent and mantissa widths, bias, largest finite value, and its
/// special values: E5M2 is IEEE-like (infinities, NaNs at exponent 31); FN has no infinity and
/// one NaN per sign (all bits of exponent and mantissa set); FNUZ has no infinity, no negative
/// zero, and one NaN, the bits of negative zero (0x80).
struct Float8Format {
  int mantissaBits, bias;
  double maxFinite;
  enum { Ieee, Fn, Fnuz } kind;
};

Float8Format float8Format(DType t) {
  switch (t) {
  case DType::F8E4M3FN: return {3, 7, 448.0, Float8Format::Fn};
  case DType::F8E4M3FNUZ: return {3, 8, 240.0, Float8Format::Fnuz};
  case DType::F8E5M2: return {2, 15, 57344.0, Float8Format::Ieee};
  case DType::F8E5M2FNUZ: return {2, 16, 57344.0, Float8Format::Fnuz};
  default: throw Error(std::string("not a float8 type: ") + dtypeName(t));
  }
}
} // namespace

float float8ToFloat(DType t, uint8_t bits) {
  const Float8Format f = float8Format(t);
  const int m = f.mantissaBits, e = 7 - m;
  const bool negative = bits & 0x80;
  const int exponent = (bits >> m) & ((1 << e) - 1), mantissa = bits & ((1 << m) - 1);
  const float nan = negative ? -std::numeric_limits<float>::quiet_NaN() // the code's sign
                             : std::numeric_limits<float>::quiet_NaN();
  if (f.kind == Float8Format::Fnuz && bits == 0x80)
    return nan;
  if (f.kind == Float8Format::Fn && exponent == (1 << e) - 1 && mantissa == (1 << m) - 1)
    return nan;
  if (f.kind == Float8Format::Ieee && exponent == (1 << e) - 1)
    return mantissa ? nan : (negative ? -INFINITY : INFINITY);
  const double value = exponent == 0
                           ? std::ldexp((double)mantissa, 1 - f.bias - m)
                           : std::ldexp((double)(mantissa + (1 << m)), exponent - f.bias - m);
  return (float)(negative ? -value : value);
}

uint8_t floatToFloat8(DType t, float v, bool saturate) {
  const Float8Format f = float8Format(t);
  const int m = f.mantissaBits;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const uint8_t nanBits = f.kind == Float8Format::Fnuz ? 0x80
                          : f.kind == Float8Format::Fn ? (uint8_t)(sign | 0x7f)
                                                       : (uint8_t)(sign | 0x7e);
  if (std::isnan(v))
    return nanBits;
  double a = std::fabs((double)v);
  if (!std::isinf(a)) {
    // Round to m mantissa bits at a's exponent (at the smallest normal one for subnormals).
    int exponent = std::max(std::ilogb(a == 0 ? 1.0 : a), 1 - f.bias);
    double quantum = std::ldexp(1.0, exponent - m);
    a = std::nearbyint(a / quantum) * quantum; // ties to even (the default rounding mode)
  }
  if (a > f.maxFinite) {
    if (saturate)
      a = f.maxFinite;
    else
      return f.kind == Float8Format::Ieee ? (uint8_t)(sign | 0x7c) : nanBits;
  }
  if (a == 0)
    return f.kind == Float8Format::Fnuz ? 0 : sign;
  const int exponent = std::ilogb(a);
  if (exponent < 1 - f.bias) // subnormal
    return sign | (uint8_t)std::ldexp(a, f.bias - 1 + m);
  const int mantissa = (int)std::ldexp(a, m - exponent) - (1 << m);
  return sign | (uint8_t)((exponent + f.bias) << m) | (uint8_t)mantissa;
}

std::pair<int64_t, int64_t> subByteIntRange(DType t) {
  switch (t) {
  case DType::U4: return {0, 15};
  case DType::I4: return {-8, 7};
  case DType::U2: return {0, 3};
  case DType::I2: return {-2, 1};
  default: throw Error(std::string("not a 4- or 2-bit integer type: ") + dtypeName(t));
  }
}

uint8_t wrapSubByteInt(DType t, int64_t v) {
  const auto [lo, hi] = subByteIntRange(t);
  const uint64_t span = (uint64_t)(hi - lo + 1);
  uint64_t u = (uint64_t)v & (span - 1);
  int64_t r = lo < 0 && u >= span / 2 ? (int64_t)u - (int64_t)span : (int64_t)u;
  return (uint8_t)(int8_t)r;
}

// ---- 16-bit floats ---------------------------------------------------------------------------

static uint32_t floatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

static float bitsToFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

/// Shifts `value` right by `shift` bits, rounding to nearest, ties to even.
static uint32_t shiftRightRoundEven(uint32_t value, int shift) {
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1)))
    ++kept;
  return kept;
}

Half::Half(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7FFFFFFF;
  if (absx > 0x7F800000) { // NaN: keep it quiet and keep the payload's top bits
    bits = sign | 0x7E00 | (uint16_t)((absx >> 13) & 0x3FF);
    return;
  }
  int exponent = (int)(absx >> 23) - 127;
  if (exponent > 15) { // |f| >= 65536 (or inf): beyond the rounding range of the largest half
    bits = sign | 0x7C00;
    return;
  }
  if (exponent >= -14) { // normal half; a mantissa carry may round up into the exponent / inf
    uint32_t rebased = absx - ((uint32_t)(127 - 15) << 23);
    bits = sign | (uint16_t)shiftRightRoundEven(rebased, 13);
    return;
  }
  if (absx <= 0x33000000) { // |f| <= 2^-25: rounds to zero (2^-25 is a tie, zero is even)
    bits = sign;
    return;
  }
  // Subnormal half: the value in units of 2^-24 is mantissa * 2^(exponent + 1).
  uint32_t mantissa = (absx & 0x7FFFFF) | 0x800000;
  bits = sign | (uint16_t)shiftRightRoundEven(mantissa, -exponent - 1);
}

Half::operator float() const {
  uint32_t sign = (uint32_t)(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1F;
  uint32_t mantissa = bits & 0x3FF;
  if (exponent == 0x1F)
    return bitsToFloat(sign | 0x7F800000 | (mantissa << 13));
  if (exponent == 0) {
    float magnitude = std::ldexp((float)mantissa, -24);
    return sign ? -magnitude : magnitude;
  }
  return bitsToFloat(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

BFloat16::BFloat16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000) { // NaN: truncating could turn it into inf, so force quiet
    bits = (uint16_t)((x >> 16) | 0x0040);
    return;
  }
  // Same exponent range as float, so rounding the low 16 bits is all (carries reach inf).
  uint32_t rounding = 0x7FFF + ((x >> 16) & 1);
  bits = (uint16_t)((x + rounding) >> 16);
}

BFloat16::operator float() const { return bitsToFloat((uint32_t)bits << 16); }

// ---- Shapes ----------------------------------------------------------------------------------

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error("negative dimension in shape " + shapeToString(shape));
    if (__builtin_mul_overflow(n, d, &n))
      throw Error("element count overflows in shape " + shapeToString(shape));
  }
  return n;
}

std::string shapeToString(const Shape &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

Shape stridesOf(const Shape &shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

// ---- Tensor ----------------------------------------------------------------------------------

static constexpr std::align_val_t kAlignment{64};

/// A zero-filled, 64-byte aligned buffer of at least one byte.
static std::shared_ptr<uint8_t> allocateZeroed(size_t bytes) {
  size_t size = bytes ? bytes : 1;
  void *p = ::operator new(size, kAlignment);
  std::memset(p, 0, size);
  return std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p),
                                  [](uint8_t *q) { ::operator delete(q, kAlignment); });
}

static size_t checkedByteSize(DType dtype, const Shape &shape) {
  size_t bytes;
  if (__builtin_mul_overflow((size_t)numElements(shape), dtypeSize(dtype), &bytes))
    throw Error("tensor byte size overflows for shape " + shapeToString(shape));
  return bytes;
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  storage_ = allocateZeroed(checkedByteSize(dtype_, shape_));
}

Tensor::Tensor(DType dtype, Shape shape, const void *bytes) : Tensor(dtype, std::move(shape)) {
  size_t size = byteSize();
  if (size == 0)
    return;
  if (!bytes)
    throw Error("Tensor: null data pointer");
  std::memcpy(storage_.get(), bytes, size);
  // Only 0 and 1 are valid bool objects; normalize so that reading data<bool>() is defined.
  if (dtype_ == DType::Bool)
    for (size_t i = 0; i < size; ++i)
      storage_.get()[i] = storage_.get()[i] != 0;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (!defined())
    throw Error("Tensor::reshaped: undefined tensor");
  if (tcc::numElements(shape) != numElements())
    throw Error("Tensor::reshaped: cannot reshape " + typeString() + " to " + shapeToString(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  if (!defined())
    return Tensor();
  return Tensor(dtype_, shape_, storage_.get());
}

/// Truncates toward zero, saturating at the int64 range; NaN gives 0.
static int64_t saturatingToInt64(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9223372036854775808.0) // 2^63
    return std::numeric_limits<int64_t>::max();
  if (v < -9223372036854775808.0)
    return std::numeric_limits<int64_t>::min();
  return (int64_t)v;
}

template <class T> static int64_t elementToInt64(T v) {
  if constexpr (std::is_integral_v<T>)
    return (int64_t)v; // u64 above INT64_MAX wraps
  else
    return saturatingToInt64((double)(ComputeType<T>)v);
}

static void checkElementIndex(const Tensor &t, int64_t i) {
  if (!t.defined())
    throw Error("Tensor: element access on an undefined tensor");
  if (i < 0 || i >= t.numElements())
    throw Error("Tensor: element index " + std::to_string(i) + " out of range for " +
                t.typeString());
}

double Tensor::getDouble(int64_t i) const {
  checkElementIndex(*this, i);
  if (isFloat8(dtype_))
    return float8ToFloat(dtype_, static_cast<const uint8_t *>(raw())[i]);
  return visitDType(dtype_, [&](auto tag) -> double {
    using T = decltype(tag);
    return (double)(ComputeType<T>)data<T>()[i];
  });
}

int64_t Tensor::getInt(int64_t i) const {
  checkElementIndex(*this, i);
  if (isFloat8(dtype_))
    return saturatingToInt64(getDouble(i));
  return visitDType(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    return elementToInt64(data<T>()[i]);
  });
}

std::vector<int64_t> Tensor::toInt64Vector() const {
  if (!defined())
    throw Error("Tensor::toInt64Vector: undefined tensor");
  std::vector<int64_t> values((size_t)numElements());
  if (isFloat8(dtype_)) {
    for (int64_t i = 0; i < numElements(); ++i)
      values[i] = getInt(i);
    return values;
  }
  visitDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T *p = data<T>();
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = elementToInt64(p[i]);
  });
  return values;
}

std::string Tensor::typeString() const {
  if (shape_.empty())
    return dtypeName(dtype_);
  return shapeToString(shape_) + "x" + dtypeName(dtype_);
}

Tensor randomTensor(DType dtype, const Shape &shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor t(dtype, shape);
  if (isStorageOnly(dtype)) { // float8: uniform in [-1, 1) rounded; integers: their range
    auto *p = static_cast<uint8_t *>(t.raw());
    for (int64_t i = 0; i < t.numElements(); ++i) {
      if (isFloat8(dtype)) {
        p[i] = floatToFloat8(dtype, (float)std::uniform_real_distribution<double>(-1.0, 1.0)(rng));
      } else {
        const auto [lo, hi] = subByteIntRange(dtype);
        p[i] = wrapSubByteInt(dtype, lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1)));
      }
    }
    return t;
  }
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = t.data<T>();
    for (int64_t i = 0; i < t.numElements(); ++i) {
      if constexpr (std::is_same_v<T, bool>)
        p[i] = rng() & 1;
      else if constexpr (std::is_integral_v<T>)
        p[i] = static_cast<T>(rng() % 8);
      else
        p[i] = T(static_cast<float>(std::uniform_real_distribution<double>(-1.0, 1.0)(rng)));
    }
  });
  return t;
}

} // namespace tcc
