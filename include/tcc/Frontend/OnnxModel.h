//===- OnnxModel.h - Loading, preparing and converting ONNX protos --------===//
//
// The protobuf-level layer of the ONNX frontend: reads a model file (resolving external data),
// brings it to a supported opset and concrete input shapes, runs ONNX shape inference, and
// converts between onnx::TensorProto and tcc::Tensor. Every failure throws tcc::Error.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tcc {

/// Reads and parses the model at `path` and checks that it has a graph, an ir_version and an
/// opset_import. Tensors stored as external data (initializers, Constant attributes, tensors in
/// subgraphs and in model-local functions) are loaded from files relative to the model's
/// directory and become raw_data tensors with data_location DEFAULT.
onnx::ModelProto loadOnnxModel(const std::string &path);

/// The same for a model given as its serialized bytes; external data is read from files relative
/// to `baseDir` (the current directory if empty).
onnx::ModelProto parseOnnxModel(const void *data, size_t size, const std::string &baseDir = "");

struct PrepareOptions {
  /// Concrete shapes for graph inputs, by input name.
  std::map<std::string, Shape> inputShapes;
  /// Models whose default-domain opset is below this are upgraded with ONNX's version converter.
  int64_t minimumOpset = 7;
};

/// Fixes the input shapes in `opts.inputShapes`, checks that the graph is wired in topological
/// order and that known operators match their schemas, upgrades an old default-domain opset with
/// ONNX's version converter, and runs ONNX shape inference (non-strict: unknown operators and
/// node-level inference failures are skipped), which fills graph.value_info.
void prepareOnnxModel(onnx::ModelProto &model, const PrepareOptions &opts);

/// TensorProto.DataType values newer than ONNX 1.12's onnx.proto (its enum stops at BFLOAT16;
/// the field is an int32, so files from newer exporters parse and carry these codes).
enum NewerOnnxElemType : int32_t {
  kOnnxFloat8E4M3FN = 17, kOnnxFloat8E4M3FNUZ = 18, kOnnxFloat8E5M2 = 19,
  kOnnxFloat8E5M2FNUZ = 20, kOnnxUInt4 = 21, kOnnxInt4 = 22, kOnnxFloat4E2M1 = 23,
  kOnnxFloat8E8M0 = 24, kOnnxUInt2 = 25, kOnnxInt2 = 26
};
/// Whether `elemType` is a defined TensorProto.DataType (UNDEFINED is not), up to INT2.
inline bool isValidOnnxElemType(int32_t elemType) { return elemType >= 1 && elemType <= kOnnxInt2; }

/// The tcc element type of an ONNX TensorProto_DataType, or nullopt when tcc has none
/// (string, complex, undefined...).
std::optional<DType> dtypeFromOnnx(int32_t elemType);
int32_t dtypeToOnnx(DType dtype);
/// "float", "int64", "string", "complex64"...; "unknown type N" for values outside the enum.
std::string onnxElemTypeName(int32_t elemType);

/// Converts a TensorProto holding its data in raw_data or in the typed field for its type.
/// External data must have been resolved (loadOnnxModel does it).
Tensor tensorFromProto(const onnx::TensorProto &t);
/// A TensorProto named `name` with the data in raw_data.
onnx::TensorProto tensorToProto(const Tensor &t, const std::string &name);

/// Reads a serialized TensorProto (the .pb files of ONNX's test data sets). `name`, when given,
/// receives the tensor's name. Files holding sequences, optionals or maps are rejected.
Tensor readTensorFile(const std::string &path, std::string *name = nullptr);
void writeTensorFile(const Tensor &t, const std::string &name, const std::string &path);

} // namespace tcc
