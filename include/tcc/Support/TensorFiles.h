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
#include <string>
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

/// True if `bytes` start with the .npy magic.
bool isNpy(const std::vector<uint8_t> &bytes);
/// A tensor file: .npy when it starts with the .npy magic, else a serialized TensorProto.
/// `name` (if not null) receives the TensorProto's name ("" for .npy).
Tensor loadTensorFile(const std::string &path, std::string *name = nullptr);

} // namespace tcc
