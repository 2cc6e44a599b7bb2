//===- Sequence.cpp - ONNX sequence ops -> tcc ------------------------------===//
//
// A sequence that lives inside the model is a compile-time list of tcc values (static length,
// each element its own value; see SequenceValue), so the sequence ops emit no sequence IR:
// SequenceEmpty/Construct/Insert/Erase/At/Length and Identity only rearrange the list (their
// positions must be compile-time constants), SplitToSequence is one tcc.slice per element (plus
// a reshape dropping the axis when keepdims=0), ConcatFromSequence one tcc.concat of the
// elements (reshaped to add the new axis when new_axis=1), and SequenceMap imports its body
// once per element.
//
//===----------------------------------------------------------------------===//
#include "../NodeContext.h"

#include "tcc/Interp/Interpreter.h"

using namespace mlir;

namespace tcc::onnx_import {
namespace {

std::string str(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

/// The compile-time position input i (a scalar int32/int64) in [-n, last], normalized to
/// [0, last] (last is n - 1 for reading a position, n for inserting at one).
int64_t positionInput(NodeContext &n, size_t i, int64_t size, int64_t last) {
  Tensor t = n.requireConstantInput(i, "the position");
  if (!isInteger(t.dtype()) || t.numElements() != 1)
    n.fail("the position must be a scalar integer, got " + t.typeString());
  int64_t pos = t.getInt(0);
  if (pos < -size || pos > last)
    n.fail("position " + std::to_string(pos) + " is out of range [" + std::to_string(-size) +
           ", " + std::to_string(last) + "] for a sequence of " + std::to_string(size) +
           " tensor(s)");
  return pos < 0 ? pos + size : pos;
}

/// Fails unless `v` has the sequence's element type (when that is known).
void checkElementType(NodeContext &n, Type seqElement, Value v, const std::string &what) {
  Type t = CoreBuilder::elementTypeOf(v);
  if (seqElement && t != seqElement)
    n.fail(what + " has element type " + str(t) + ", but the sequence holds " + str(seqElement));
}

void lowerSequenceEmpty(NodeContext &n) {
  n.setOutputSequence(0, {}, n.elementType((int32_t)n.attrInt("dtype", onnx::TensorProto::FLOAT)));
}

void lowerSequenceConstruct(NodeContext &n) {
  if (n.numInputs() == 0)
    n.fail("needs at least one input");
  std::vector<Value> elements;
  for (size_t i = 0; i < n.numInputs(); ++i) {
    elements.push_back(n.input(i));
    checkElementType(n, CoreBuilder::elementTypeOf(elements.front()), elements.back(),
                     "input " + std::to_string(i));
  }
  n.setOutputSequence(0, std::move(elements));
}

void lowerSequenceInsert(NodeContext &n) {
  std::vector<Value> elements = n.inputSequence(0);
  Type element = n.inputSequenceElementType(0);
  Value x = n.input(1);
  checkElementType(n, element, x, "the inserted tensor");
  int64_t size = elements.size();
  int64_t pos = n.hasInput(2) ? positionInput(n, 2, size, size) : size;
  elements.insert(elements.begin() + pos, x);
  n.setOutputSequence(0, std::move(elements), element);
}

void lowerSequenceErase(NodeContext &n) {
  std::vector<Value> elements = n.inputSequence(0);
  int64_t size = elements.size();
  if (size == 0)
    n.fail("cannot erase from an empty sequence");
  int64_t pos = n.hasInput(1) ? positionInput(n, 1, size, size - 1) : size - 1;
  elements.erase(elements.begin() + pos);
  n.setOutputSequence(0, std::move(elements), n.inputSequenceElementType(0));
}

void lowerSequenceAt(NodeContext &n) {
  std::vector<Value> elements = n.inputSequence(0);
  int64_t size = elements.size();
  if (size == 0)
    n.fail("the sequence is empty");
  n.setOutput(0, elements[positionInput(n, 1, size, size - 1)]);
}

void lowerSequenceLength(NodeContext &n) {
  n.setOutput(0, n.b().constantI64({(int64_t)n.inputSequence(0).size()}, {}));
}

/// Slices along `axis` at the given sizes (from split: a scalar chunk size, the last chunk
/// smaller, or 1-D sizes that partition the dim) or, without split, in size-1 chunks whose axis
/// keepdims=0 drops.
void lowerSplitToSequence(NodeContext &n) {
  Value x = n.input(0);
  SymShape shape = n.inputDims(0);
  int64_t axis = n.normalizeAxis(n.attrInt("axis", 0), shape.size());
  if (!shape[axis].isConstant())
    n.fail("cannot split symbolic dim " + std::to_string(axis) + " (" + shape[axis].str() +
           ") into a sequence");
  int64_t dim = *shape[axis].constant();
  std::vector<int64_t> sizes;
  bool keepDims = true;
  if (n.hasInput(1)) {
    std::vector<int64_t> split = n.requireInts(1, "split");
    int64_t splitRank = n.inputRank(1);
    if (splitRank == 0) {
      int64_t chunk = split.front();
      if (chunk <= 0)
        n.fail("the scalar split must be positive, got " + std::to_string(chunk));
      for (int64_t start = 0; start < dim; start += chunk)
        sizes.push_back(std::min(chunk, dim - start));
    } else if (splitRank == 1) {
      int64_t total = 0;
      for (int64_t s : split) {
        if (s < 0)
          n.fail("split sizes must not be negative, got " + std::to_string(s));
        total += s;
      }
      if (total != dim)
        n.fail("split sizes sum to " + std::to_string(total) + ", but dim " +
               std::to_string(axis) + " has size " + std::to_string(dim));
      sizes = split;
    } else {
      n.fail("split must be a scalar or 1-D, got rank " + std::to_string(splitRank));
    }
  } else {
    sizes.assign(dim, 1);
    keepDims = n.attrInt("keepdims", 1) != 0;
  }
  SymShape dropped = shape;
  dropped.erase(dropped.begin() + axis);
  std::vector<Value> elements;
  int64_t start = 0;
  for (int64_t size : sizes) {
    Value part = n.b().sliceDim(x, axis, start, start + size);
    elements.push_back(keepDims ? part : n.b().reshapeToDims(part, dropped));
    start += size;
  }
  n.setOutputSequence(0, std::move(elements), CoreBuilder::elementTypeOf(x));
}

/// One tcc.concat of the elements along `axis`; with new_axis=1 (numpy.stack) each element is
/// first reshaped to have a size-1 dim at `axis`.
void lowerConcatFromSequence(NodeContext &n) {
  std::vector<Value> elements = n.inputSequence(0);
  if (elements.empty())
    n.fail("cannot concatenate an empty sequence (its shape is unknown)");
  bool newAxis = n.attrInt("new_axis", 0) != 0;
  int64_t rank = CoreBuilder::rankOf(elements.front());
  int64_t axis = n.normalizeAxis(n.requireAttrInt("axis"), newAxis ? rank + 1 : rank);
  if (newAxis)
    for (Value &e : elements) {
      SmallVector<int64_t> shape(CoreBuilder::shapeOf(e));
      if ((int64_t)shape.size() != rank)
        n.fail("the elements have different ranks and cannot be stacked");
      shape.insert(shape.begin() + axis, 1);
      e = n.b().reshape(e, shape);
    }
  n.setOutput(0, elements.size() == 1 ? elements.front() : n.b().concat(elements, axis));
}

/// The body is imported inline once per element of the first sequence, with the i-th elements
/// of the sequence inputs and the tensor inputs unchanged; output j collects the body's j-th
/// outputs.
void lowerSequenceMap(NodeContext &n) {
  const onnx::GraphProto &body = n.attrGraph("body");
  size_t count = n.inputSequence(0).size();
  std::vector<std::optional<std::vector<Value>>> sequences; // per input; nullopt for tensors
  for (size_t i = 0; i < n.numInputs(); ++i) {
    if (!n.inputIsSequence(i)) {
      sequences.push_back(std::nullopt);
      continue;
    }
    sequences.push_back(n.inputSequence(i));
    if (sequences.back()->size() != count)
      n.fail("sequence input " + std::to_string(i) + " has " +
             std::to_string(sequences.back()->size()) + " tensors, but the first has " +
             std::to_string(count));
  }
  if ((size_t)body.output_size() != n.numOutputs())
    n.fail("the body has " + std::to_string(body.output_size()) + " outputs, but the node has " +
           std::to_string(n.numOutputs()));
  std::vector<std::vector<Value>> outputs(n.numOutputs());
  for (size_t k = 0; k < count; ++k) {
    std::vector<Value> inputs;
    for (size_t i = 0; i < n.numInputs(); ++i)
      inputs.push_back(sequences[i] ? (*sequences[i])[k] : n.input(i));
    std::vector<Value> results = n.inlineSubgraph(body, inputs, "[" + std::to_string(k) + "]");
    for (size_t j = 0; j < results.size(); ++j)
      outputs[j].push_back(results[j]);
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    // An empty input gives empty outputs, whose element type is the one the body declares.
    Type element;
    if (outputs[j].empty()) {
      const auto &type = body.output(j).type();
      if (!type.has_tensor_type() || !type.tensor_type().has_elem_type())
        n.fail("the body's output " + std::to_string(j) + " has no declared element type");
      element = n.elementType(type.tensor_type().elem_type());
    }
    n.setOutputSequence(j, std::move(outputs[j]), element);
  }
}

/// OptionalHasElement / OptionalGetElement (opsets 15, 18): tcc holds no optional values, so
/// an optional is a present tensor or sequence, or an input left empty (no element).
void lowerOptionalHasElement(NodeContext &n) {
  n.setOutput(0, n.b().splat(RankedTensorType::get({}, n.b().builder().getI1Type()),
                             n.hasInput(0) ? 1 : 0));
}

void lowerOptionalGetElement(NodeContext &n) {
  if (!n.hasInput(0))
    n.fail("the optional input is empty: it has no element to get");
  if (n.inputIsSequence(0))
    n.setOutputSequence(0, n.inputSequence(0), n.inputSequenceElementType(0));
  else
    n.setOutput(0, n.input(0));
}

} // namespace

void registerSequenceOps(OpRegistry &r) {
  r.add("OptionalHasElement", lowerOptionalHasElement);
  r.add("OptionalGetElement", lowerOptionalGetElement);
  r.add("SequenceEmpty", lowerSequenceEmpty);
  r.add("SequenceConstruct", lowerSequenceConstruct);
  r.add("SequenceInsert", lowerSequenceInsert);
  r.add("SequenceErase", lowerSequenceErase);
  r.add("SequenceAt", lowerSequenceAt);
  r.add("SequenceLength", lowerSequenceLength);
  r.add("SplitToSequence", lowerSplitToSequence);
  r.add("ConcatFromSequence", lowerConcatFromSequence);
  r.add("SequenceMap", lowerSequenceMap);
}

} // namespace tcc::onnx_import
