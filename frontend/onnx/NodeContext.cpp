//===- NodeContext.cpp - What an ONNX op lowering sees ----------------------===//
#include "Import.h"

#include "tcc/Frontend/OnnxModel.h"
#include "tcc/Interp/Interpreter.h"

using namespace mlir;

namespace tcc::onnx_import {

NodeContext::NodeContext(GraphImporter &graph, const onnx::NodeProto &node, int64_t opset)
    : graph_(graph), node_(node), opset_(opset),
      builder_(graph.builder(), graph.nodeLocation(node)) {}

std::string GraphImporter::nodeName(const onnx::NodeProto &node) const {
  return prefix_ + (node.name().empty() ? "<unnamed " + node.op_type() + ">" : node.name());
}

void NodeContext::fail(const std::string &reason) const {
  throw ImportError("node '" + graph_.nodeName(node_) + "' (" +
                    (node_.domain().empty() ? "" : node_.domain() + "::") + node_.op_type() +
                    ", opset " + std::to_string(opset_) + "): " + reason);
}

Value NodeContext::input(size_t i) {
  if (!hasInput(i))
    fail("input " + std::to_string(i) + " is required but missing");
  Value v = graph_.lookup(node_.input(i));
  if (!v && graph_.lookupSequence(node_.input(i)))
    fail("input '" + node_.input(i) + "' is a sequence, the op needs a tensor");
  if (!v)
    fail("input '" + node_.input(i) + "' is not defined before this node");
  if (!isa<RankedTensorType>(v.getType()))
    fail("input '" + node_.input(i) + "' is not a tensor");
  return v;
}

bool NodeContext::inputIsSequence(size_t i) {
  return hasInput(i) && graph_.lookupSequence(node_.input(i));
}

const SequenceValue &NodeContext::sequence(size_t i) {
  if (!hasInput(i))
    fail("input " + std::to_string(i) + " is required but missing");
  const SequenceValue *seq = graph_.lookupSequence(node_.input(i));
  if (!seq && graph_.lookup(node_.input(i)))
    fail("input '" + node_.input(i) + "' is a tensor, the op needs a sequence");
  if (!seq)
    fail("input '" + node_.input(i) + "' is not defined before this node");
  return *seq;
}

std::vector<Value> NodeContext::inputSequence(size_t i) { return sequence(i).elements; }

Type NodeContext::inputSequenceElementType(size_t i) { return sequence(i).elementType; }

std::optional<Tensor> NodeContext::constantInput(size_t i) {
  if (auto c = input(i).getDefiningOp<ConstantOp>())
    return tensorFromAttr(c.getValue());
  return std::nullopt;
}

Tensor NodeContext::requireConstantInput(size_t i, const std::string &what) {
  return graph_.requireConstant(*this, input(i), what + " (input '" + node_.input(i) + "')");
}

llvm::ArrayRef<int64_t> NodeContext::inputShape(size_t i) {
  RankedTensorType t = inputType(i);
  if (!t.hasStaticShape())
    fail("input " + std::to_string(i) + " ('" + node_.input(i) + "') has symbolic dims " +
         shapeString(symbolicShape(t)) + ", which this operator does not take yet: fix the "
         "model's sizes (tcc compile --input-shape NAME=D0xD1x...)");
  return t.getShape();
}

const SymbolRanges &NodeContext::symbolRanges() const { return graph_.symbolRanges(); }

bool NodeContext::outputUsed(size_t i) const {
  return hasOutput(i) && graph_.isRead(node_.output(i));
}

std::vector<SymExpr> NodeContext::requireDims(size_t i, const std::string &what) {
  if (auto s = input(i).getDefiningOp<SymIntsOp>())
    return s.getExprs();
  std::vector<int64_t> ints = requireInts(i, what);
  return std::vector<SymExpr>(ints.begin(), ints.end());
}

std::vector<int64_t> NodeContext::requireInts(size_t i, const std::string &what) {
  Tensor t = requireConstantInput(i, what);
  if (!isInteger(t.dtype()))
    fail(what + " must be an integer tensor, got " + dtypeName(t.dtype()));
  return t.toInt64Vector();
}

const onnx::AttributeProto *NodeContext::attr(const std::string &name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::attrInt(const std::string &name, int64_t fallback) const {
  const auto *a = attr(name);
  return a ? a->i() : fallback;
}

int64_t NodeContext::requireAttrInt(const std::string &name) const {
  const auto *a = attr(name);
  if (!a)
    fail("required attribute '" + name + "' is missing");
  return a->i();
}

double NodeContext::attrFloat(const std::string &name, double fallback) const {
  const auto *a = attr(name);
  return a ? a->f() : fallback;
}

std::string NodeContext::attrString(const std::string &name, const std::string &fallback) const {
  const auto *a = attr(name);
  return a ? a->s() : fallback;
}

std::vector<int64_t> NodeContext::attrInts(const std::string &name,
                                           std::vector<int64_t> fallback) const {
  const auto *a = attr(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}

std::vector<float> NodeContext::attrFloats(const std::string &name,
                                           std::vector<float> fallback) const {
  const auto *a = attr(name);
  return a ? std::vector<float>(a->floats().begin(), a->floats().end()) : fallback;
}

std::vector<std::string> NodeContext::attrStrings(const std::string &name) const {
  const auto *a = attr(name);
  return a ? std::vector<std::string>(a->strings().begin(), a->strings().end())
           : std::vector<std::string>{};
}

Tensor NodeContext::attrTensor(const std::string &name) const {
  const auto *a = attr(name);
  if (!a || !a->has_t())
    fail("tensor attribute '" + name + "' is missing");
  try {
    return tensorFromProto(a->t());
  } catch (const Error &e) {
    fail("attribute '" + name + "': " + e.what());
  }
}

const onnx::GraphProto &NodeContext::attrGraph(const std::string &name) const {
  const auto *a = attr(name);
  if (!a || !a->has_g())
    fail("graph attribute '" + name + "' is missing");
  return a->g();
}

void NodeContext::setOutput(size_t i, Value v) {
  if (!hasOutput(i))
    return;
  graph_.define(node_.output(i), v);
}

void NodeContext::setOutputSequence(size_t i, std::vector<Value> elements, Type elementType) {
  if (!hasOutput(i))
    return;
  if (!elementType && !elements.empty())
    elementType = CoreBuilder::elementTypeOf(elements.front());
  graph_.defineSequence(node_.output(i), SequenceValue{std::move(elements), elementType});
}

bool NodeContext::training() const { return graph_.options().training; }

Value NodeContext::rngKey() { return graph_.rngKey(); }

uint64_t NodeContext::nextRngStream() { return graph_.nextRngStream(); }

int64_t NodeContext::microBatch() const { return graph_.options().microBatch; }

int64_t NodeContext::microBatches() const { return graph_.options().microBatches; }

int64_t NodeContext::microBatchShards() const { return graph_.options().microBatchShards; }

bool NodeContext::inputIsBuffer(size_t i) {
  return hasInput(i) && graph_.isBuffer(node_.input(i), graph_.lookup(node_.input(i)));
}

void NodeContext::updateBuffer(size_t i, Value next) {
  graph_.updateBuffer(*this, node_.input(i), next);
}

Value NodeContext::constant(const Tensor &t) {
  return builder_.constant(attrFromTensor(context(), t));
}

int64_t NodeContext::normalizeAxis(int64_t axis, int64_t rank) const {
  if (axis < -rank || axis >= rank)
    fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

llvm::SmallVector<int64_t> NodeContext::normalizeAxes(llvm::ArrayRef<int64_t> axes,
                                                      int64_t rank) const {
  llvm::SmallVector<int64_t> out;
  for (int64_t a : axes) {
    int64_t d = normalizeAxis(a, rank);
    if (llvm::is_contained(out, d))
      fail("axis " + std::to_string(a) + " is repeated");
    out.push_back(d);
  }
  return out;
}

Type NodeContext::elementType(int32_t onnxType) const {
  try {
    return graph_.elementType(onnxType);
  } catch (const Error &e) {
    fail(e.what());
  }
}

std::optional<Type> NodeContext::inferredOutputElementType(size_t i) const {
  if (!hasOutput(i))
    return std::nullopt;
  return graph_.inferredElementType(node_.output(i));
}

std::vector<Value> NodeContext::importSubgraph(const onnx::GraphProto &graph, Block &block) {
  return graph_.importSubgraph(graph, block);
}

std::vector<Value> NodeContext::inlineSubgraph(const onnx::GraphProto &graph,
                                               llvm::ArrayRef<Value> inputs,
                                               const std::string &label) {
  if ((size_t)graph.input_size() != inputs.size())
    fail("subgraph '" + graph.name() + "' has " + std::to_string(graph.input_size()) +
         " inputs, but " + std::to_string(inputs.size()) + " values are bound to them");
  return graph_.inlineSubgraph(graph, inputs, graph_.nodeName(node_) + label);
}

int64_t dimsProduct(llvm::ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(p, d, &p))
      throw Error("the element count of shape " + shapeToString(Shape(dims.begin(), dims.end())) +
                  " overflows a 64-bit integer");
  return p;
}

} // namespace tcc::onnx_import
