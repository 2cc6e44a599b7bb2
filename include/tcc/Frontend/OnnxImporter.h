//===- OnnxImporter.h - ONNX model -> tcc dialect ---------------------------===//
//
// Imports an ONNX graph into a `func.func @main` of tcc core ops. Every ONNX operator is
// decomposed into the core set in frontend/onnx/ops (one lowering per operator); operators
// without a lowering but with an ONNX function body are expanded through that body.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace tcc {

struct ImportOptions {
  /// Concrete values of graph inputs. Used only where the model needs a value at compile time
  /// (a Reshape's shape, a Range's limits, ...): such inputs are specialized on their value.
  std::map<std::string, Tensor> inputValues;
  /// Largest result (in elements) the importer folds into a constant.
  int64_t maxFoldElements = 1 << 20;
  /// Initializers imported as function arguments after the graph inputs, in initializer order,
  /// instead of as constants (so nothing folds them: they can be trained or differentiated).
  /// One whose value the model needs at compile time (a Dropout ratio, a Reshape's shape) stays
  /// a constant and is left out of ImportedModel::parameterIndices.
  std::set<std::string> parameterInitializers;
  /// Initializers imported as function arguments after the parameters, in initializer order:
  /// state the model updates in training mode but that has no gradient (BatchNormalization's
  /// running mean and variance). In training mode @main returns their next values after the
  /// graph outputs.
  std::set<std::string> bufferInitializers;
  /// Training mode: Dropout drops (scaled by 1/(1-ratio)) with a counter-based generator keyed by
  /// one more trailing argument, a 0-d ui64 (ImportedModel::rngKeyArgument), when the model has
  /// any Dropout with a nonzero ratio. Otherwise Dropout is the identity, as in inference.
  /// BatchNormalization normalizes with the batch's statistics and moves its running statistics
  /// (when they are buffers) towards them with the node's momentum, as ONNX's training mode.
  bool training = false;
  /// Training mode, for a forward that computes micro-batch `microBatch` of a batch split along
  /// the leading dim (pipeline parallelism): Dropout's counters continue where the previous
  /// micro-batches' stop (element i of this micro-batch's input is element microBatch * size + i
  /// of the whole batch's), so the micro-batches drop what the whole batch would.
  int64_t microBatch = 0;
  int64_t microBatches = 1; // how many there are
  /// With data parallelism too (TrainingOptions::microBatchShards): the micro-batch's rows are
  /// `microBatchShards` equal blocks, block d being rows [m*b, (m+1)*b) of the whole batch's
  /// d-th block of rows (b = the block's rows), and the counters follow each row to its place
  /// in the whole batch.
  int64_t microBatchShards = 1;
  /// Ranges of the size symbols of dynamic input dims (tcc/IR/SymbolicShape.h), by dim_param,
  /// or `<input>_d<dim>` for a dim without one. Each symbol is its dim_param made an identifier
  /// (or `<input>_d<dim>`); symbols not listed range over 1 and up.
  std::map<std::string, std::pair<int64_t, int64_t>> symbolRanges;
};

struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<std::string> inputNames;  // graph inputs (initializers excluded), in order
  std::vector<std::string> outputNames; // graph outputs, in order
  std::set<std::string> specializedInputs; // inputs whose values were baked in
  /// ImportOptions::parameterInitializers present in the model, in argument order (they follow
  /// the graph inputs): their indices in graph.initializer.
  std::vector<int64_t> parameterIndices;
  /// ImportOptions::bufferInitializers present in the model, in argument order (after the
  /// parameters): their indices in graph.initializer. In training mode @main returns one more
  /// result per buffer, its next value, after the graph outputs, in this order.
  std::vector<int64_t> bufferIndices;
  /// Training mode: the argument number of the rng key (the last one), or -1 if none is needed.
  int64_t rngKeyArgument = -1;
};

/// One operator the importer cannot handle, with every node that uses it.
struct UnsupportedOp {
  std::string domain, opType;
  int64_t opset;
  std::vector<std::string> nodes;
};

/// Every (domain, op type, opset) of the model (subgraphs included) that has no lowering.
std::vector<UnsupportedOp> findUnsupportedOps(const onnx::ModelProto &model);
/// The one-paragraph error listing `ops`.
std::string describeUnsupportedOps(const std::vector<UnsupportedOp> &ops);

/// Imports a prepared model (see prepareOnnxModel: static input shapes, shape inference done).
/// Throws tcc::Error naming the node, op and reason on failure. Checks unsupported ops first.
ImportedModel importOnnxModel(mlir::MLIRContext &ctx, const onnx::ModelProto &model,
                              const ImportOptions &options = {});

/// Registers the dialects the imported IR uses.
void registerImportDialects(mlir::MLIRContext &ctx);

} // namespace tcc
