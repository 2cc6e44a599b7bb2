//===- Import.h - The ONNX graph importer's internals ----------------------===//
#pragma once

#include "NodeContext.h"

#include "tcc/Frontend/OnnxImporter.h"

#include "mlir/IR/Builders.h"
#include "onnx/defs/schema.h"

namespace tcc::onnx_import {

/// Names bound to values in one (sub)graph; lookups fall back to the enclosing graph. A name is
/// bound either to a tensor (`values`) or to a sequence (`sequences`), never both.
struct Scope {
  std::map<std::string, mlir::Value> values;
  Scope *parent;
  std::map<std::string, SequenceValue> sequences;
};

class GraphImporter {
public:
  const SymbolRanges &symbolRanges() const { return symbols_; }
  /// Whether a value named `name` is needed: a graph output, read by a node that the graph's
  /// outputs depend on, or read in a subgraph or model-local function.
  bool isRead(const std::string &name) const;
  GraphImporter(mlir::MLIRContext &ctx, const onnx::ModelProto &model, const ImportOptions &options,
                const std::set<std::string> &specialized);

  ImportedModel run();

  mlir::OpBuilder &builder() { return builder_; }
  /// The tensor bound to `name`, or null if it is unbound or bound to a sequence.
  mlir::Value lookup(const std::string &name) const;
  /// The sequence bound to `name`, or null if it is unbound or bound to a tensor.
  const SequenceValue *lookupSequence(const std::string &name) const;
  void define(const std::string &name, mlir::Value v);
  void defineSequence(const std::string &name, SequenceValue seq);
  mlir::Type elementType(int32_t onnxType) const;
  std::optional<mlir::Type> inferredElementType(const std::string &name) const;
  mlir::Location nodeLocation(const onnx::NodeProto &node);
  /// Input `v`'s compile-time value; may throw NeedsInputValues to restart specialized.
  Tensor requireConstant(NodeContext &ctx, mlir::Value v, const std::string &what);
  std::vector<mlir::Value> importSubgraph(const onnx::GraphProto &graph, mlir::Block &block);
  /// Imports `graph` at the current insertion point with its inputs bound to `inputs`;
  /// `label` prefixes its node names in messages.
  std::vector<mlir::Value> inlineSubgraph(const onnx::GraphProto &graph,
                                          llvm::ArrayRef<mlir::Value> inputs,
                                          const std::string &label);
  /// Import options (training mode, ...).
  const ImportOptions &options() const { return options_; }
  /// Training mode: the 0-d ui64 rng key, @main's last argument (added on first use).
  mlir::Value rngKey();
  /// Whether `v`, bound to `name`, is the @main argument of buffer initializer `name`.
  bool isBuffer(const std::string &name, mlir::Value v) const;
  /// Training mode: `next` is the value @main returns for buffer `name`.
  void updateBuffer(NodeContext &ctx, const std::string &name, mlir::Value next);
  /// A number unique to each random op of the model (in import order), which mixes into the
  /// key so that ops draw independent streams.
  uint64_t nextRngStream() { return ++rngStreams_; }
  /// Display name of a node for messages (with the enclosing function-expansion path).
  std::string nodeName(const onnx::NodeProto &node) const;

private:
  void collectValueInfo(const onnx::GraphProto &graph);
  void importNodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes);
  void importNode(const onnx::NodeProto &node);
  /// Imports `fn`'s body for the node of `ctx` (a function-defined operator: its schema's body,
  /// or a model-local function); `defaultOf` gives an attribute's default value (or null)
  /// where the node leaves an attribute the body refers to unset.
  void expandFunction(NodeContext &ctx, const onnx::FunctionProto &fn,
                      const std::function<const onnx::AttributeProto *(const std::string &)> &defaultOf);
  mlir::Value constantFromProto(const onnx::TensorProto &t, mlir::Location loc);
  /// A graph input's type; its dynamic dims become size symbols (symbols_).
  mlir::RankedTensorType inputType(const onnx::ValueInfoProto &in);
  /// The size symbol of a graph input's dynamic dim: its dim_param made an identifier (one
  /// symbol per distinct dim_param), or `<input>_d<dim>` for an unnamed one.
  std::string symbolFor(const std::string &input, int dim, const std::string &dimParam);
  /// A dim_param that is an expression a*s + b of one size symbol (torch.export writes
  /// `2*s3` for a dim it derived from another): that expression over s's symbol.
  std::optional<SymExpr> derivedDim(const std::string &dimParam);
  std::optional<NeedsInputValues> inputsFeeding(mlir::Value v) const;
  /// The binding of `name` in the innermost scope that has one: {tensor, sequence}, at most one
  /// of them non-null.
  std::pair<mlir::Value, const SequenceValue *> find(const std::string &name) const;
  /// The outputs of a (sub)graph, which must all be tensors.
  std::vector<mlir::Value> graphOutputs(const onnx::GraphProto &graph, const std::string &what);

  mlir::MLIRContext &ctx_;
  const onnx::ModelProto &model_;
  const ImportOptions &options_;
  const std::set<std::string> &specialized_;
  /// Size symbols of the graph inputs' dynamic dims, with their ranges (the module's
  /// tcc.symbols), and the symbol of each dim_param.
  SymbolRanges symbols_;
  /// The names isRead accepts, collected on first use.
  mutable std::optional<std::set<std::string>> readNames_;
  std::map<std::string, std::string> symbolOfDimParam_;
  mlir::OpBuilder builder_;
  std::map<std::string, int64_t> opsets_;
  std::map<std::string, const onnx::TypeProto *> valueInfo_;
  Scope *scope_ = nullptr;
  std::string prefix_; // "outer/" while expanding a function-defined node
  mlir::Block *mainBlock_ = nullptr;
  std::vector<std::string> inputNames_;
  std::vector<std::string> parameterNames_; // the arguments after the graph inputs
  std::vector<std::string> bufferNames_;    // the arguments after the parameters
  std::map<std::string, mlir::Value> bufferNext_;
  mlir::Value rngKey_;
  uint64_t rngStreams_ = 0;
};

} // namespace tcc::onnx_import
