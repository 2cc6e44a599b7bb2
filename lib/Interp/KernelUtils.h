//===- KernelUtils.h - Private helpers shared by the reference kernels ----===//
//
// Error helpers, argument checks, wrapping integer arithmetic, the scalar combiners shared by
// binary ops, reductions and scatter, and multi-index iteration.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Interp/Kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tcc::kernels::detail {

// ---- Errors and checks -----------------------------------------------------------------------

[[noreturn]] inline void fail(const std::string &op, const std::string &message) {
  throw Error(op + ": " + message);
}

[[noreturn]] inline void unsupportedDType(const std::string &op, DType t) {
  fail(op, std::string("unsupported dtype ") + dtypeName(t));
}

inline void checkDefined(const std::string &op, const Tensor &t) {
  if (!t.defined())
    fail(op, "undefined tensor operand");
}

inline void checkSameShape(const std::string &op, const Tensor &a, const Tensor &b) {
  if (a.shape() != b.shape())
    fail(op, "shape mismatch: " + a.typeString() + " vs " + b.typeString());
}

inline void checkSameDType(const std::string &op, const Tensor &a, const Tensor &b) {
  if (a.dtype() != b.dtype())
    fail(op, "dtype mismatch: " + a.typeString() + " vs " + b.typeString());
}

inline void checkAxis(const std::string &op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    fail(op, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
}

inline void checkCount(const std::string &op, const char *what, size_t count, int64_t expected) {
  if ((int64_t)count != expected)
    fail(op, std::string(what) + " has " + std::to_string(count) + " entries, expected " +
                 std::to_string(expected));
}

/// Dims must be in range and strictly increasing (hence unique).
inline void checkSortedDims(const std::string &op, const std::vector<int64_t> &dims, int64_t rank) {
  for (size_t i = 0; i < dims.size(); ++i) {
    checkAxis(op, dims[i], rank);
    if (i && dims[i] <= dims[i - 1])
      fail(op, "dims must be sorted and unique");
  }
}

/// Index tensors are I32 or I64; their values are read as int64.
inline std::vector<int64_t> readIndices(const std::string &op, const Tensor &indices) {
  checkDefined(op, indices);
  if (indices.dtype() != DType::I32 && indices.dtype() != DType::I64)
    fail(op, std::string("index tensor must be i32 or i64, got ") + dtypeName(indices.dtype()));
  return indices.toInt64Vector();
}

inline int64_t checkIndex(const std::string &op, int64_t index, int64_t dimSize) {
  if (index < 0 || index >= dimSize)
    fail(op,
         "index " + std::to_string(index) + " out of range [0, " + std::to_string(dimSize) + ")");
  return index;
}

inline int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= shape[i];
  return n;
}

// ---- Element type traits ---------------------------------------------------------------------

template <class T>
constexpr bool isFloatType =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T> constexpr bool isBoolType = std::is_same_v<T, bool>;
template <class T> constexpr bool isIntType = std::is_integral_v<T> && !isBoolType<T>;

template <class C> bool isNaN(C v) {
  if constexpr (std::is_floating_point_v<C>)
    return std::isnan(v);
  else
    return false;
}

/// Unsigned type at least as wide as `unsigned`, so integer arithmetic on it never promotes
/// to a signed type (uint16 * uint16 would otherwise overflow int).
template <class T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

/// Accumulator of matmul and conv: float / double for floats, wrapping unsigned for integers.
template <class T>
using AccType = std::conditional_t<isFloatType<T>, ComputeType<T>,
                                   std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>>;

// ---- Element conversion ----------------------------------------------------------------------

/// Rounds to float with round-to-odd (truncate, then set the last bit if inexact). Rounding
/// that result again to half or bfloat16 is then correctly rounded, which a plain
/// double -> float -> half chain is not (double rounding).
inline float roundToOddFloat(double d) {
  float f = (float)d;
  if (std::isnan(d) || (double)f == d)
    return f;
  if (std::fabs((double)f) > std::fabs(d))
    f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Integer to float with round-to-odd, for the same reason as roundToOddFloat.
template <class I> float intToFloatRoundToOdd(I v) {
  bool negative = false;
  uint64_t magnitude = (uint64_t)v;
  if constexpr (std::is_signed_v<I>) {
    negative = v < 0;
    if (negative)
      magnitude = 0 - magnitude;
  }
  if (magnitude >= (1ull << 24)) {
    int shift = 64 - __builtin_clzll(magnitude) - 24;
    uint64_t kept = magnitude >> shift;
    if (magnitude & ((1ull << shift) - 1))
      kept |= 1;
    float f = std::ldexp((float)kept, shift);
    return negative ? -f : f;
  }
  float f = (float)magnitude;
  return negative ? -f : f;
}

/// Truncates toward zero and saturates at I's range; NaN gives 0.
template <class I> I saturatingFloatToInt(double v) {
  if (std::isnan(v))
    return 0;
  const double low = (double)std::numeric_limits<I>::min(); // 0 or -2^(n-1)
  const double highExclusive = 2.0 * (double)(std::numeric_limits<I>::max() / 2 + 1); // 2^n'
  if (v <= low)
    return std::numeric_limits<I>::min();
  if (v >= highExclusive)
    return std::numeric_limits<I>::max();
  return (I)v;
}

/// Converts one element with the semantics of tcc::kernels::cast.
template <class To, class From> To convertScalar(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (isBoolType<To>) {
    return (ComputeType<From>)v != 0;
  } else if constexpr (isBoolType<From>) {
    return To(ComputeType<To>(v ? 1 : 0));
  } else if constexpr (isIntType<To>) {
    if constexpr (isIntType<From>)
      return static_cast<To>(v); // wraps
    else
      return saturatingFloatToInt<To>((double)(ComputeType<From>)v);
  } else if constexpr (std::is_same_v<To, float> || std::is_same_v<To, double>) {
    return static_cast<To>((ComputeType<From>)v);
  } else if constexpr (std::is_same_v<From, double>) {
    return To(roundToOddFloat(v));
  } else if constexpr (isIntType<From>) {
    return To(intToFloatRoundToOdd(v));
  } else {
    return To((float)v);
  }
}

// ---- Wrapping integer arithmetic (two's complement, no UB) ----------------------------------

template <class T> T wrapAdd(T a, T b) { return (T)((WrapType<T>)a + (WrapType<T>)b); }
template <class T> T wrapSub(T a, T b) { return (T)((WrapType<T>)a - (WrapType<T>)b); }
template <class T> T wrapMul(T a, T b) { return (T)((WrapType<T>)a * (WrapType<T>)b); }

// ---- Scalar combiners on compute types (callers exclude bool where meaningless) -------------

template <class C> C addValues(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return wrapAdd(a, b);
  else
    return a + b;
}

template <class C> C mulValues(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return wrapMul(a, b);
  else
    return a * b;
}

template <class C> C maxValues(C a, C b) {
  if (isNaN(a))
    return a;
  if (isNaN(b))
    return b;
  return a < b ? b : a;
}

template <class C> C minValues(C a, C b) {
  if (isNaN(a))
    return a;
  if (isNaN(b))
    return b;
  return b < a ? b : a;
}

// ---- Reductions ------------------------------------------------------------------------------

inline const char *reduceKindName(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum: return "Sum";
  case ReduceKind::Prod: return "Prod";
  case ReduceKind::Max: return "Max";
  case ReduceKind::Min: return "Min";
  }
  return "?";
}

/// Identity and combiner of reduction K on compute type C.
template <ReduceKind K, class C> struct Reducer {
  static C identity() {
    if constexpr (K == ReduceKind::Sum)
      return C(0);
    else if constexpr (K == ReduceKind::Prod)
      return C(1);
    else if constexpr (K == ReduceKind::Max)
      return std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                  : std::numeric_limits<C>::lowest();
    else
      return std::numeric_limits<C>::has_infinity ? std::numeric_limits<C>::infinity()
                                                  : std::numeric_limits<C>::max();
  }
  static C combine(C acc, C v) {
    if constexpr (K == ReduceKind::Sum)
      return addValues(acc, v);
    else if constexpr (K == ReduceKind::Prod)
      return mulValues(acc, v);
    else if constexpr (K == ReduceKind::Max)
      return maxValues(acc, v);
    else
      return minValues(acc, v);
  }
};

/// Calls `f(std::integral_constant<ReduceKind, K>{}, T{})` for the element type of `dtype`,
/// throwing for Sum/Prod on bool (Max/Min on bool are logical or/and).
template <class F>
decltype(auto) visitReduction(const std::string &op, ReduceKind kind, DType dtype, F &&f) {
  if (dtype == DType::Bool && (kind == ReduceKind::Sum || kind == ReduceKind::Prod))
    unsupportedDType(op + " " + reduceKindName(kind), dtype);
  return visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!isBoolType<T>) {
      if (kind == ReduceKind::Sum)
        return f(std::integral_constant<ReduceKind, ReduceKind::Sum>{}, tag);
      if (kind == ReduceKind::Prod)
        return f(std::integral_constant<ReduceKind, ReduceKind::Prod>{}, tag);
    }
    if (kind == ReduceKind::Max)
      return f(std::integral_constant<ReduceKind, ReduceKind::Max>{}, tag);
    return f(std::integral_constant<ReduceKind, ReduceKind::Min>{}, tag);
  });
}

// ---- Iteration -------------------------------------------------------------------------------

/// Calls `f(index)` for every multi-index of `shape` in row-major order.
template <class F> void forEachIndex(const Shape &shape, F &&f) {
  if (numElements(shape) == 0)
    return;
  std::vector<int64_t> index(shape.size(), 0);
  while (true) {
    f(static_cast<const std::vector<int64_t> &>(index));
    int64_t d = (int64_t)shape.size() - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}

/// Walks `shape` in row-major order keeping two offsets, each the dot product of the index with
/// its own strides plus a base, and calls `f(offsetA, offsetB)` for every element.
template <class F>
void forEachOffsetPair(const Shape &shape, const Shape &stridesA, int64_t baseA,
                       const Shape &stridesB, int64_t baseB, F &&f) {
  if (numElements(shape) == 0)
    return;
  int64_t rank = (int64_t)shape.size();
  if (rank == 0) {
    f(baseA, baseB);
    return;
  }
  std::vector<int64_t> index(rank, 0);
  int64_t last = rank - 1, inner = shape[last];
  int64_t innerA = stridesA[last], innerB = stridesB[last];
  int64_t a = baseA, b = baseB;
  while (true) {
    for (int64_t i = 0; i < inner; ++i)
      f(a + i * innerA, b + i * innerB);
    int64_t d = last - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        a += stridesA[d];
        b += stridesB[d];
        break;
      }
      a -= (shape[d] - 1) * stridesA[d];
      b -= (shape[d] - 1) * stridesB[d];
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}

/// Calls `f(U{})` with an unsigned integer type of `bytes` bytes: layout ops move elements
/// without looking at their values.
template <class F> decltype(auto) visitElementSize(size_t bytes, F &&f) {
  switch (bytes) {
  case 1: return f(uint8_t{});
  case 2: return f(uint16_t{});
  case 4: return f(uint32_t{});
  case 8: return f(uint64_t{});
  }
  throw Error("invalid element size");
}

/// A new tensor of `resultShape` whose element at index i is x's element at
/// srcBase + dot(i, srcStrides) (strides per result dim, may be 0 or negative).
inline Tensor stridedCopy(const Tensor &x, const Shape &resultShape, const Shape &srcStrides,
                          int64_t srcBase) {
  Tensor result(x.dtype(), resultShape);
  Shape dstStrides = stridesOf(resultShape);
  visitElementSize(dtypeSize(x.dtype()), [&](auto tag) {
    using U = decltype(tag);
    const U *src = static_cast<const U *>(x.raw());
    U *dst = static_cast<U *>(result.raw());
    forEachOffsetPair(resultShape, srcStrides, srcBase, dstStrides, 0,
                      [&](int64_t s, int64_t d) { dst[d] = src[s]; });
  });
  return result;
}

} // namespace tcc::kernels::detail
