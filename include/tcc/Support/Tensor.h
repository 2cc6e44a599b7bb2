//===- Tensor.h - A dense host tensor with a runtime element type ---------===//
//
// The value type of the reference interpreter and of tensor I/O: an element type, a shape
// (row-major, no strides) and a shared, immutable-once-built byte buffer. Plain C++: no MLIR.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tcc {

/// Every failure in tensor kernels and I/O is reported with this exception type.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class DType : uint8_t {
  Bool, I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64,
  // Storage-only types (ONNX's float8 variants and sub-byte integers): tensors of them can be
  // moved, selected and cast to and from every type; arithmetic casts them first, as ONNX's
  // operators do. One byte per element everywhere in tcc (as numpy's ml_dtypes holds them):
  // 4- and 2-bit integers are sign- (or zero-) extended; ONNX files pack them, and tcc's
  // TensorProto reader and writer unpack and pack.
  F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, U4, I4, U2, I2
};

size_t dtypeSize(DType t);
const char *dtypeName(DType t); // "f32", "i64", "bool", ...
bool isFloat(DType t);

/// The tolerances {rtol, atol} to compare values of `t` with: the given ones, widened for 16-bit
/// floats to about two units in the last place (bf16: rtol 2^-6, atol 2^-8; f16: rtol 2^-9,
/// atol 2^-12), since a result computed in another order than its reference, or in f32 and
/// rounded once, may differ in its last bit or two. `tcc check` and `tccrt-run --compare`.
std::pair<double, double> toleranceFor(DType t, double rtol, double atol);
bool isSignedInt(DType t);
bool isUnsignedInt(DType t);
inline bool isInteger(DType t) { return isSignedInt(t) || isUnsignedInt(t); }
/// The float8 variants (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ).
bool isFloat8(DType t);
/// The 4- and 2-bit integers.
bool isSubByteInt(DType t);
/// Types tcc stores and moves but does not compute on (float8 variants, 4- and 2-bit integers).
inline bool isStorageOnly(DType t) { return isFloat8(t) || isSubByteInt(t); }

/// A float8 element's value (NaN for the NaN encodings, +-inf for E5M2's infinities).
float float8ToFloat(DType t, uint8_t bits);
/// `v` rounded to nearest even in float8 type `t`. Out-of-range values (infinities included) go
/// to the largest finite value of their sign when `saturate` (ONNX Cast's default), else to
/// infinity (E5M2) or NaN (the FN/FNUZ types, which have no infinity); NaN stays NaN.
uint8_t floatToFloat8(DType t, float v, bool saturate = true);
/// The value range of a 4- or 2-bit integer type.
std::pair<int64_t, int64_t> subByteIntRange(DType t);
/// `v` wrapped into 4- or 2-bit integer type `t` (as C's integer conversions wrap), stored
/// sign-extended (I4, I2) or zero-extended (U4, U2) in a byte.
uint8_t wrapSubByteInt(DType t, int64_t v);

/// IEEE binary16, stored as bits; arithmetic goes through float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f);
  operator float() const;
};
/// bfloat16, stored as bits; arithmetic goes through float.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f);
  operator float() const;
};

/// The C++ type used to compute on elements of type T (float for the 16-bit floats).
template <class T>
using ComputeType = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <class T> struct DTypeOf;
#define TCC_DTYPE_OF(CT, DT)                                                                   \
  template <> struct DTypeOf<CT> { static constexpr DType value = DType::DT; };
TCC_DTYPE_OF(bool, Bool)
TCC_DTYPE_OF(int8_t, I8)
TCC_DTYPE_OF(int16_t, I16)
TCC_DTYPE_OF(int32_t, I32)
TCC_DTYPE_OF(int64_t, I64)
TCC_DTYPE_OF(uint8_t, U8)
TCC_DTYPE_OF(uint16_t, U16)
TCC_DTYPE_OF(uint32_t, U32)
TCC_DTYPE_OF(uint64_t, U64)
TCC_DTYPE_OF(Half, F16)
TCC_DTYPE_OF(BFloat16, BF16)
TCC_DTYPE_OF(float, F32)
TCC_DTYPE_OF(double, F64)
#undef TCC_DTYPE_OF

/// Calls `f(T{})` with the C++ storage type T of `t`.
template <class F> decltype(auto) visitDType(DType t, F &&f) {
  switch (t) {
  case DType::Bool: return f(bool{});
  case DType::I8: return f(int8_t{});
  case DType::I16: return f(int16_t{});
  case DType::I32: return f(int32_t{});
  case DType::I64: return f(int64_t{});
  case DType::U8: return f(uint8_t{});
  case DType::U16: return f(uint16_t{});
  case DType::U32: return f(uint32_t{});
  case DType::U64: return f(uint64_t{});
  case DType::F16: return f(Half{});
  case DType::BF16: return f(BFloat16{});
  case DType::F32: return f(float{});
  case DType::F64: return f(double{});
  // Storage-only types are visited as their byte: only kernels that move data may see them
  // (the dialect's verifiers keep them from arithmetic; cast converts them explicitly).
  case DType::F8E4M3FN:
  case DType::F8E4M3FNUZ:
  case DType::F8E5M2:
  case DType::F8E5M2FNUZ:
  case DType::U4:
  case DType::U2: return f(uint8_t{});
  case DType::I4:
  case DType::I2: return f(int8_t{});
  }
  throw Error("invalid dtype");
}

using Shape = std::vector<int64_t>;
int64_t numElements(const Shape &shape);
std::string shapeToString(const Shape &shape); // "2x3x4", "scalar" for rank 0
/// Row-major strides (in elements) of `shape`.
Shape stridesOf(const Shape &shape);

class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor.
  Tensor(DType dtype, Shape shape);
  /// A tensor copying `bytes` (must be numElements * dtypeSize bytes).
  Tensor(DType dtype, Shape shape, const void *bytes);

  template <class T> static Tensor fromVector(Shape shape, const std::vector<T> &values) {
    Tensor t(DTypeOf<T>::value, std::move(shape));
    if ((int64_t)values.size() != t.numElements())
      throw Error("Tensor::fromVector: value count does not match the shape");
    for (size_t i = 0; i < values.size(); ++i)
      t.data<T>()[i] = values[i];
    return t;
  }
  template <class T> static Tensor scalar(T value) { return fromVector<T>({}, {value}); }

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t rank() const { return (int64_t)shape_.size(); }
  int64_t dim(int64_t i) const { return shape_.at(i); }
  int64_t numElements() const { return tcc::numElements(shape_); }
  size_t byteSize() const { return (size_t)numElements() * dtypeSize(dtype_); }
  /// False only for a default-constructed Tensor.
  bool defined() const { return storage_ != nullptr; }

  void *raw() { return storage_.get(); }
  const void *raw() const { return storage_.get(); }
  template <class T> T *data() {
    checkType<T>();
    return reinterpret_cast<T *>(storage_.get());
  }
  template <class T> const T *data() const {
    checkType<T>();
    return reinterpret_cast<const T *>(storage_.get());
  }

  /// Same data, new shape (element counts must match). Shares the buffer.
  Tensor reshaped(Shape shape) const;
  /// A deep copy with its own buffer.
  Tensor clone() const;
  /// Element `i` (row-major) converted to double / int64: for tests, printing and index math.
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  /// All elements converted to int64 (for index and shape tensors).
  std::vector<int64_t> toInt64Vector() const;
  std::string typeString() const; // "2x3xf32"

private:
  template <class T> void checkType() const {
    if (sizeof(T) != dtypeSize(dtype_))
      throw Error("Tensor: element access with a type of the wrong size");
  }
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<uint8_t> storage_;
};

/// Seeded random data (std::mt19937_64 seeded with `seed`, one draw per element in order):
/// floats uniform in [-1, 1), integers in [0, 8), bools fair coins. The same values on every
/// machine for a seed: `tcc run --seed S` and `tccrt-run --random S` give input i seed S + i.
Tensor randomTensor(DType dtype, const Shape &shape, uint64_t seed);

} // namespace tcc
