//===- NodeContext.h - What an ONNX op lowering sees -----------------------===//
//
// Each ONNX operator has one lowering, `void(NodeContext &)`, registered by op type in
// frontend/onnx/ops/*.cpp. A lowering reads the node's inputs (as tcc values), attributes and
// compile-time-constant inputs, emits core ops through `b()` (a CoreBuilder positioned at the
// node, located at the node's name), and sets the node's outputs. Every failure goes through
// fail(), which names the node, op and opset.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/CoreBuilder.h"
#include "tcc/Support/Tensor.h"

#include "onnx/onnx_pb.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tcc::onnx_import {

/// A failure to import, already phrased for the user (names the node).
class ImportError : public Error {
public:
  using Error::Error;
};

/// Thrown when a value needed at compile time is computed from graph inputs whose concrete
/// values are available, or from parameter initializers: the import restarts with those inputs
/// specialized and those parameters imported as constants.
struct NeedsInputValues {
  std::set<std::string> inputs;
  std::set<std::string> parameters;
};

class GraphImporter;

/// An ONNX sequence that lives inside the model: a compile-time list of tensors (static length,
/// each element its own tcc value). Sequences never cross a graph or subgraph boundary.
struct SequenceValue {
  std::vector<mlir::Value> elements;
  /// The declared element type (SequenceEmpty's dtype, or that of the elements).
  mlir::Type elementType;
};

class NodeContext {
public:
  NodeContext(GraphImporter &graph, const onnx::NodeProto &node, int64_t opset);

  const onnx::NodeProto &node() const { return node_; }
  const std::string &opType() const { return node_.op_type(); }
  /// The opset version of the node's domain in force for this node.
  int64_t opset() const { return opset_; }
  CoreBuilder &b() { return builder_; }
  mlir::MLIRContext *context() { return builder_.context(); }

  // ---- Inputs (ONNX optional inputs may be absent: an empty name or a shorter list) ----
  size_t numInputs() const { return node_.input_size(); }
  bool hasInput(size_t i) const { return i < (size_t)node_.input_size() && !node_.input(i).empty(); }
  mlir::Value input(size_t i);
  mlir::RankedTensorType inputType(size_t i) { return CoreBuilder::typeOf(input(i)); }
  /// Input i's static dims; fails for an input with symbolic dims (lowerings that handle them
  /// read inputDims).
  llvm::ArrayRef<int64_t> inputShape(size_t i);
  /// Input i's dims, symbolic ones included (tcc/IR/SymbolicShape.h).
  SymShape inputDims(size_t i) { return symbolicShape(input(i)); }
  int64_t inputRank(size_t i) { return inputType(i).getRank(); }
  mlir::Type inputElementType(size_t i) { return inputType(i).getElementType(); }
  /// Input i's value if it is a compile-time constant.
  std::optional<Tensor> constantInput(size_t i);
  /// Input i's value, which must be computable at compile time (`what` names it in errors).
  Tensor requireConstantInput(size_t i, const std::string &what);
  /// The same, converted to int64 values.
  std::vector<int64_t> requireInts(size_t i, const std::string &what);
  /// Input i's int64 values as expressions of the size symbols: a constant, or integers the
  /// importer computed from symbolic dims (a tcc.sym_ints: `Shape` of a tensor with symbolic
  /// dims and arithmetic on it). Fails like requireConstantInput otherwise.
  std::vector<SymExpr> requireDims(size_t i, const std::string &what);
  /// The ranges of the graph's size symbols (what the importer may assume about them).
  const SymbolRanges &symbolRanges() const;
  /// Whether input i is bound to a sequence (input() fails for it, inputSequence() does not).
  bool inputIsSequence(size_t i);
  /// Input i's elements; fails if it is a tensor.
  std::vector<mlir::Value> inputSequence(size_t i);
  /// Input i's element type (known even when the sequence is empty); fails if it is a tensor.
  mlir::Type inputSequenceElementType(size_t i);

  // ---- Attributes ----
  const onnx::AttributeProto *attr(const std::string &name) const;
  bool hasAttr(const std::string &name) const { return attr(name) != nullptr; }
  int64_t attrInt(const std::string &name, int64_t fallback) const;
  double attrFloat(const std::string &name, double fallback) const;
  std::string attrString(const std::string &name, const std::string &fallback) const;
  std::vector<int64_t> attrInts(const std::string &name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> attrFloats(const std::string &name, std::vector<float> fallback = {}) const;
  std::vector<std::string> attrStrings(const std::string &name) const;
  Tensor attrTensor(const std::string &name) const;
  const onnx::GraphProto &attrGraph(const std::string &name) const;
  /// Fails with a clear message if the attribute is missing.
  int64_t requireAttrInt(const std::string &name) const;

  // ---- Outputs ----
  size_t numOutputs() const { return node_.output_size(); }
  /// Whether output i is used (present with a non-empty name).
  bool hasOutput(size_t i) const { return i < (size_t)node_.output_size() && !node_.output(i).empty(); }
  /// Whether output i is present and needed (a graph output depends on it, or a subgraph or
  /// function reads it). An optional output nothing needs need not be computed.
  bool outputUsed(size_t i) const;
  void setOutput(size_t i, mlir::Value v);
  /// Binds output i to a sequence; `elementType` defaults to that of the first element.
  void setOutputSequence(size_t i, std::vector<mlir::Value> elements,
                         mlir::Type elementType = {});

  // ---- Helpers ----
  /// A tcc.constant holding `t` (values computed at compile time).
  mlir::Value constant(const Tensor &t);
  [[noreturn]] void fail(const std::string &reason) const;
  /// Maps an ONNX axis in [-rank, rank) to [0, rank), failing with a clear message otherwise.
  int64_t normalizeAxis(int64_t axis, int64_t rank) const;
  /// normalizeAxis for each of `axes` (order kept), failing on an axis given twice.
  llvm::SmallVector<int64_t> normalizeAxes(llvm::ArrayRef<int64_t> axes, int64_t rank) const;
  /// The tcc element type of an ONNX TensorProto_DataType, failing for unsupported ones.
  mlir::Type elementType(int32_t onnxType) const;
  /// The element type ONNX shape inference gives output i, if known.
  std::optional<mlir::Type> inferredOutputElementType(size_t i) const;

  // ---- Training mode (ImportOptions::training) ----
  bool training() const;
  /// The 0-d ui64 rng key argument of @main (added on first use).
  mlir::Value rngKey();
  /// A stream number unique to this random op within the model.
  uint64_t nextRngStream();
  /// ImportOptions::microBatch.
  int64_t microBatch() const;
  /// ImportOptions::microBatches.
  int64_t microBatches() const;
  /// ImportOptions::microBatchShards.
  int64_t microBatchShards() const;
  /// Whether input i is a buffer initializer's @main argument (ImportOptions::bufferInitializers).
  bool inputIsBuffer(size_t i);
  /// Training mode: `next` becomes buffer input i's next value (returned by @main).
  void updateBuffer(size_t i, mlir::Value next);

  // ---- Subgraphs (If, Loop, Scan) ----
  /// Imports `graph` into `block` (whose arguments are bound to the graph's inputs, in order)
  /// and returns the values of its outputs. Names of enclosing graphs stay visible.
  std::vector<mlir::Value> importSubgraph(const onnx::GraphProto &graph, mlir::Block &block);
  /// Imports `graph` inline at the node (no region), its inputs bound to `inputs`, and returns
  /// its outputs; `label` names this instance of the graph in messages.
  std::vector<mlir::Value> inlineSubgraph(const onnx::GraphProto &graph,
                                          llvm::ArrayRef<mlir::Value> inputs,
                                          const std::string &label);

private:
  const SequenceValue &sequence(size_t i);

  GraphImporter &graph_;
  const onnx::NodeProto &node_;
  int64_t opset_;
  CoreBuilder builder_;
};

using OpLowering = std::function<void(NodeContext &)>;

/// Lowerings by (domain, op type). Domain "" is the default ONNX domain.
class OpRegistry {
public:
  void add(const std::string &opType, OpLowering lowering, const std::string &domain = "");
  const OpLowering *find(const std::string &domain, const std::string &opType) const;

private:
  std::map<std::pair<std::string, std::string>, OpLowering> lowerings_;
};

/// The registry of every lowering (built once, from the register* functions below).
const OpRegistry &opRegistry();

/// The product of `dims` (an element count); a tcc::Error when it overflows int64 (shapes in a
/// model are untrusted: the fuzzer reached a Reshape to dims whose product overflowed).
int64_t dimsProduct(llvm::ArrayRef<int64_t> dims);

/// mean(x) over dims, keeping them as size 1 (ops/Reduction.cpp; the normalisations use it).
mlir::Value meanKeep(CoreBuilder &b, mlir::Value x, llvm::ArrayRef<int64_t> dims);
/// A 0-d value of `like`'s element type holding `count` (an element count, symbolic or not):
/// a constant, or a tcc.sym_ints cast (ops/Reduction.cpp).
mlir::Value scalarCount(CoreBuilder &b, mlir::Value like, const SymExpr &count);

/// What a scan loop's body computes from (states..., elements...): the next states, then the
/// scan elements of the iteration.
using ScanBody = std::function<std::vector<mlir::Value>(llvm::ArrayRef<mlir::Value>)>;
struct ScanResult {
  std::vector<mlir::Value> finalStates;
  std::vector<mlir::Value> stacked; // scan outputs, [length, element...] in iteration order
};
/// A tcc.loop of `length` iterations running `body` on (states..., elements...), where iteration
/// t reads element t (or length-1-t when reversed) along axes[j] of xs[j] with tcc.dynamic_slice.
/// With `seqLen` (a 0-d i64), iterations t >= seqLen keep the states and give zero scan elements,
/// and reversed inputs are read from seqLen-1 down. (ONNX's Scan and the recurrences of
/// LinearAttention; frontend/onnx/ops/ControlFlow.cpp.)
ScanResult buildScanLoop(NodeContext &n, const ScanBody &body, llvm::ArrayRef<mlir::Value> states,
                         llvm::ArrayRef<mlir::Value> xs, llvm::ArrayRef<int64_t> axes,
                         llvm::ArrayRef<int64_t> reversed, int64_t length, mlir::Value seqLen);

/// Whether `t` is one of the float8 types (ops/Elementwise.cpp).
bool isFloat8Type(mlir::Type t);

/// Each element of x along `axis` repeated `reps` times in a row ([.., n, ..] -> [.., n * reps,
/// ..]): a reshape, a broadcast and a reshape (ops/Shape.cpp).
mlir::Value repeatInterleave(CoreBuilder &b, mlir::Value x, int64_t axis, int64_t reps);

/// `x` converted to `to`. Into a float8 type, out-of-range values saturate (to the largest
/// finite value of their sign) when `saturate`, as tcc.cast does, and otherwise become infinity
/// (E5M2) or NaN (the FN/FNUZ types), ONNX Cast's `saturate=0`.
mlir::Value castMaybeSaturating(CoreBuilder &b, mlir::Value x, mlir::Type to, bool saturate);

// One per file in frontend/onnx/ops/.
void registerElementwiseOps(OpRegistry &r);
void registerShapeOps(OpRegistry &r);
void registerReductionOps(OpRegistry &r);
void registerNNOps(OpRegistry &r);
void registerControlFlowOps(OpRegistry &r);
void registerRecurrentOps(OpRegistry &r);
void registerMiscOps(OpRegistry &r);
void registerSequenceOps(OpRegistry &r);
void registerTransformerOps(OpRegistry &r);

} // namespace tcc::onnx_import
