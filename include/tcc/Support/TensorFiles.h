//===- TensorFiles.h - Tensors in .npy files and serialized TensorProtos --===//
//
// Reading and writing tensors without protobuf or MLIR, for tools that link only libtccrt
// (tccrt-run) and for `tcc train`'s .npy data:
//   - NumPy .npy files (format versions 1-3, C order);
//   - serialized ONNX TensorProto messages (the .pb files of ONNX's backend-test data sets),
//     decoded straight from the protobuf wire format. Only the fields a plain tensor uses are
//     read (dims, data_type, name, raw_data and the typed data fields); the checks match
//     tcc::readTensorFile (frontend/onnx, through protobuf), which a unit test compares this
//     reader with on every test-data file of Debian's libonnx-testdata.
// Every failure throws tcc::Error naming the file (`what`) and the problem.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace tcc {

/// A .npy file (format versions 1-3, C order, little-endian, big-endian or single-byte types:
/// b1, u1, i1, u2, i2, u4, i4, u8, i8, f2, f4, f8).
Tensor parseNpy(const std::vector<uint8_t> &bytes, const std::string &what);
/// `t` as a version 1.0 .npy file (little-endian). bfloat16 has no .npy type: an error.
std::vector<uint8_t> toNpyBytes(const Tensor &t);

/// A serialized ONNX TensorProto. `name` (if not null) receives the tensor's name.
Tensor parseTensorProto(const std::vector<uint8_t> &bytes, const std::string &what,
                        std::string *name = nullptr);
/// `t` as a serialized TensorProto named `name`, data in raw_data; the same bytes protobuf
/// writes for tcc::tensorToProto (dims unpacked, fields in number order).
std::vector<uint8_t> toTensorProtoBytes(const Tensor &t, const std::string &name);

/// The whole file (an error naming it if it cannot be read).
std::vector<uint8_t> readFileBytes(const std::string &path);
/// Writes `bytes` to `path`, replacing it.
void writeFileBytes(const std::string &path, const std::vector<uint8_t> &bytes);

// ---- Pieces shared with the other tensor-file readers (tcc train's IDX files in
// lib/Driver/Data.cpp, tcc::readTensorFile in frontend/onnx) ---------------------------------

inline constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

/// Copies `count` elements of `elemSize` bytes, reversing the bytes of each when `swap`.
void copyElements(uint8_t *dst, const uint8_t *src, int64_t count, size_t elemSize, bool swap);

/// The element count of `shape` as a file's header declares it, or an error naming `what` when
/// a dimension is negative, the size overflows or the data does not fill exactly `available`
/// bytes.
int64_t checkedElementCount(const Shape &shape, size_t elemSize, size_t available,
                            const std::string &what);

/// `text` as a dimension size (a .npy header's shape, tcc's --input-shape): a non-negative
/// integer in std::stoll's syntax filling all of `text`, or nullopt.
std::optional<int64_t> parseDimension(const std::string &text);

/// Converts one value of a TensorProto's int32_data field to the storage type T (bool, 8/16-bit
/// integers, int32, or the bits of float16/bfloat16), or returns false if it does not fit.
template <class T> bool fromInt32Field(int32_t value, T &out) {
  if constexpr (std::is_same_v<T, bool>) {
    out = value != 0;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    // The 16 bits of the value; writers use unsigned, and some sign-extended, patterns.
    if (value < std::numeric_limits<int16_t>::min() || value > 0xFFFF)
      return false;
    out.bits = (uint16_t)value;
  } else {
    if (value < (int64_t)std::numeric_limits<T>::min() ||
        value > (int64_t)std::numeric_limits<T>::max())
      return false;
    out = (T)value;
  }
  return true;
}

/// The bytes ONNX packs `elements` values of `t` into (raw_data, or int32_data values of a byte
/// each): 4-bit integers two to a byte, 2-bit four, first element in the low bits; other types
/// dtypeSize(t) each.
uint64_t onnxPackedByteSize(DType t, int64_t elements);
/// Unpacks ONNX's packed 4- or 2-bit integers into `out` (a byte per element, extended by type).
void unpackSubByteInts(const uint8_t *packed, Tensor &out);
/// Packs a tensor of 4- or 2-bit integers as ONNX stores them.
std::vector<uint8_t> packSubByteInts(const Tensor &t);

/// True if `bytes` start with the .npy magic.
bool isNpy(const std::vector<uint8_t> &bytes);
/// A tensor file: .npy when it starts with the .npy magic, else a serialized TensorProto.
/// `name` (if not null) receives the TensorProto's name ("" for .npy).
Tensor loadTensorFile(const std::string &path, std::string *name = nullptr);

} // namespace tcc
