//===- Pipeline.h - Model loading, import and evaluation for the CLI -------===//
#pragma once

#include "tcc/Frontend/OnnxImporter.h"
#include "tcc/Frontend/OnnxModel.h"
#include "tcc/Support/Tensor.h"

#include "mlir/IR/MLIRContext.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tcc {

/// An ONNX model to load: a file, or its serialized bytes (held by the caller; external data
/// is then read relative to `baseDir`, the current directory if empty).
struct ModelSource {
  ModelSource(std::string path) : path(std::move(path)) {}
  ModelSource(const char *path) : path(path) {}
  static ModelSource fromBytes(const void *data, size_t size, std::string baseDir = "") {
    ModelSource s("");
    s.data = data, s.size = size, s.baseDir = std::move(baseDir);
    return s;
  }
  /// Reads and checks it (loadOnnxModel / parseOnnxModel).
  onnx::ModelProto load() const;

  std::string path;
  const void *data = nullptr;
  size_t size = 0;
  std::string baseDir;
};

/// Graph inputs (initializers excluded) with their declared element type and dims (-1 when
/// dynamic), in order.
struct GraphInput {
  std::string name;
  DType dtype;
  std::vector<int64_t> dims;
};
std::vector<GraphInput> graphInputs(const onnx::ModelProto &model);

/// One dim of an --input-shape: a size (min == max), or an inclusive range `LO..HI` (`LO..`:
/// no upper bound) that keeps the dim symbolic.
struct DimRange {
  int64_t min = 0, max = 0;
  bool fixed() const { return min == max; }
};
/// Parses `NAME=D0xD1x...` where each D is a size or a range (`ids=1..64x16..512`).
std::pair<std::string, std::vector<DimRange>> parseInputShapeSpec(const std::string &spec);

/// Random input data for `input` with the given shape: floats uniform in [-1, 1), integers in
/// [0, 8), bools fair coins. Deterministic for a seed.
Tensor randomInput(DType dtype, const Shape &shape, uint64_t seed);

/// An ONNX model imported for concrete inputs.
struct LoadedModel {
  std::unique_ptr<mlir::MLIRContext> context;
  ImportedModel imported;
  std::vector<Tensor> inputs; // in graph-input order (given, else random)
};

struct LoadOptions {
  std::vector<Tensor> inputs;                // given inputs, in graph-input order (may be fewer)
  std::map<std::string, Shape> inputShapes;  // --input-shape with sizes
  /// --input-shape with ranges: those dims stay symbolic, with these bounds (keepSymbolicDims
  /// only; the other dims are fixed).
  std::map<std::string, std::vector<DimRange>> inputRanges;
  /// Adds one --input-shape `NAME=D0xD1x...` (sizes or ranges): to inputShapes when every dim
  /// is a size, else to inputRanges.
  void addInputShape(const std::string &spec);
  uint64_t seed = 0;
  /// Whether the import may specialise on the values of inputs drawn at random (fine when the
  /// same values are then run; not for an artifact that must accept any value).
  bool specializeOnRandomInputs = true;
  /// Inputs with dynamic dims that no given input or `inputShapes` fixes keep them as size
  /// symbols (tcc/IR/SymbolicShape.h) instead of failing; no input is drawn for them (their
  /// entry in PreparedModel::inputs is an empty tensor).
  bool keepSymbolicDims = false;
};

/// An ONNX model prepared for concrete inputs, not yet imported.
struct PreparedModel {
  onnx::ModelProto model;
  std::vector<Tensor> inputs;  // in graph-input order (given, else random)
  ImportOptions importOptions; // the input values the import may specialise on
};

/// Loads and prepares (fixes dims, shape inference, opset upgrade) `path`. Inputs not given are
/// drawn at random (their shapes must be static or fixed by `inputShapes`).
PreparedModel prepareModel(const ModelSource &source, const LoadOptions &options);

/// prepareModel, then the import.
LoadedModel loadModel(const ModelSource &source, const LoadOptions &options);

/// Evaluates the imported model with the reference interpreter.
std::vector<Tensor> interpret(LoadedModel &model);

} // namespace tcc
