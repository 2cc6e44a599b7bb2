//===- Binding.cpp - A symbolic program's sizes, bound from its input shapes ===//
//
// A symbolic program loads unbound: its symbolic dims are -1 and it has no launch list. A
// binding solves the size symbols from the input shapes with the binder the compiler uses
// (tcc/Support/SymbolBinding.h: the same solving, ranges and messages), then derives every
// tensor's and buffer's shape at those sizes, checks the buffers' extents and derives the launch
// list (library geometries included) with the code that decodes a static program at load
// (Loader.cpp). The arena needs nothing: it was planned, and checked at load, at every size in
// the ranges. Binding the bound shapes again is a comparison (it is on the per-request path);
// a failed binding leaves the program unbound.
#include "Program.h"
#include "CudaExecutor.h"
#include "HostMemory.h"
#include "tcc/Support/ArenaPlacement.h"
#include "tcc/Support/Tensor.h" // tcc::Error, thrown by the binder

#include <algorithm>

namespace tcc::rt {

namespace {

/// "batch x seq x 768".
std::string dimsText(const std::vector<SymExpr> &dims) {
  std::string out;
  for (size_t d = 0; d < dims.size(); ++d)
    out += (d ? " x " : "") + dims[d].str();
  return out;
}

/// Sets `shape` (one entry per dim) to `dims` at `bindings`, in place: the C API hands out
/// pointers to shapes, valid as long as the program. Errors name `what`.
void evaluateShape(Shape &shape, const std::vector<SymExpr> &dims,
                   const SymbolBindings &bindings, const std::string &what) {
  for (size_t d = 0; d < dims.size(); ++d) {
    try {
      shape[d] = evaluateSym(dims[d], bindings);
    } catch (const tcc::Error &e) {
      throw Error(what + " dim " + std::to_string(d) + ": " + e.what());
    }
  }
}

/// `shape` (one entry per dim) before a binding, in place: -1 where a dim is an expression.
void clearShape(Shape &shape, const std::vector<SymExpr> &dims) {
  for (size_t d = 0; d < dims.size(); ++d)
    shape[d] = dims[d].constant().value_or(-1);
}

} // namespace

void Program::bindInputShapes(const std::vector<Shape> &shapes) {
  if (training_)
    throw Error("a training artifact's root takes no inputs (its entries run through the "
                "trainer)");
  if (shapes.size() != inputs_.size())
    throw Error("the program takes " + std::to_string(inputs_.size()) + " inputs, " +
                std::to_string(shapes.size()) + " shapes were given");
  bool same = true;
  for (size_t i = 0; i < shapes.size() && same; ++i)
    same = shapes[i] == inputs_[i].shape;
  if (same && bound())
    return;
  if (!isSymbolic()) {
    for (size_t i = 0; i < shapes.size(); ++i)
      if (shapes[i] != inputs_[i].shape)
        throw Error("input " + std::to_string(i) + " ('" + inputs_[i].name + "') has shape " +
                    shapeString(inputs_[i].dtype, shapes[i]) + ", the program was compiled for " +
                    shapeString(inputs_[i].dtype, inputs_[i].shape));
  }
  std::vector<std::vector<SymExpr>> dims;
  std::vector<std::string> names;
  for (const TensorDesc &in : inputs_) {
    dims.push_back(in.dims.empty() ? std::vector<SymExpr>(in.shape.begin(), in.shape.end())
                                   : in.dims);
    names.push_back(in.name);
  }
  try {
    symbolBindings_ = tcc::bindSymbols(dims, shapes, symbolRanges_, names);
    for (const std::string &name : symbolNames_)
      if (!symbolBindings_.count(name))
        throw Error("no input dim determines the size symbol '" + name +
                    "' (an input dim must be " + name + ", or a*" + name + " + b, alone)");
    applyBinding();
  } catch (const tcc::Error &e) {
    clearBinding();
    throw Error(e.what());
  } catch (...) {
    clearBinding();
    throw;
  }
}

void Program::applyBinding() {
  for (size_t k = 0; k < symbolNames_.size(); ++k)
    symbolValues_[k] = symbolBindings_.at(symbolNames_[k]);
  auto bind = [&](TensorDesc &t, const std::string &what) {
    if (t.dims.empty())
      return;
    evaluateShape(t.shape, t.dims, symbolBindings_, what);
    t.bytes = tensorBytes(t.dtype, t.shape, what);
  };
  for (TensorDesc &t : inputs_)
    bind(t, "input '" + t.name + "'");
  for (TensorDesc &t : outputs_)
    bind(t, "output '" + t.name + "'");
  for (size_t i = 0; i < buffers_.size(); ++i) {
    BufferDesc &b = buffers_[i];
    if (!b.dims.empty()) {
      std::string what = "buffer " + std::to_string(i);
      evaluateShape(b.shape, b.dims, symbolBindings_, what);
      b.bytes = tensorBytes(b.dtype, b.shape, what);
    }
  }
  placeArenaSlots();
  for (size_t i = 0; i < buffers_.size(); ++i) {
    BufferDesc &b = buffers_[i];
    if (b.slot >= 0) {
      uint64_t slotBytes = buffers_[arenaSlots_[b.slot].buffer].bytes;
      if (b.slotOffset > slotBytes || b.bytes > slotBytes - b.slotOffset)
        throw Error("buffer " + std::to_string(i) + " ends past its arena slot (" +
                    std::to_string(slotBytes) + " bytes)");
    }
    // Buffers in the caller's tensors move with the sizes; arena ones were checked at their
    // largest at load (checked again: an extent is cheap, and the proof is the interval bounds).
    if (b.kind == BufferKind::Input || b.kind == BufferKind::Output ||
        b.kind == BufferKind::Arena)
      checkExtent(b, i, b.bytes, baseBytes(b));
  }
  decodeLaunchList(/*shapesKnown=*/true);
  reserveWorkspace();
  bound_ = true;
  if (cuda_)
    cuda_->bind(); // device memory, the symbol values and the launch list at these sizes
}

/// The alignment of the compiler's arena plan (tk::kBufferAlignment), which a binding keeps.
constexpr int64_t kArenaAlignment = 64;

void Program::placeArenaSlots() {
  if (arenaSlots_.empty())
    return;
  std::vector<ArenaInterval> intervals;
  for (const ArenaSlotDesc &s : arenaSlots_)
    intervals.push_back({std::max<int64_t>((int64_t)buffers_[s.buffer].bytes, 1), s.first, s.last});
  uint64_t bytes = (uint64_t)placeInArena(intervals, kArenaAlignment);
  if (bytes > arenaCapacity_ && device_ == TCCRT_DEVICE_CPU) { // (CUDA: the executor's)
    void *grown = hostAllocate(bytes); // throws on failure, leaving the old arena
    hostFree(arena_);
    arena_ = grown;
    arenaCapacity_ = bytes;
  }
  arenaBytes_ = bytes;
  for (BufferDesc &b : buffers_)
    if (b.slot >= 0)
      b.offset = (uint64_t)intervals[b.slot].offset + b.slotOffset;
}

void Program::clearBinding() {
  bound_ = false;
  symbolBindings_.clear();
  std::fill(symbolValues_.begin(), symbolValues_.end(), 0);
  for (std::vector<TensorDesc> *tensors : {&inputs_, &outputs_})
    for (TensorDesc &t : *tensors)
      if (!t.dims.empty()) {
        clearShape(t.shape, t.dims);
        t.bytes = 0;
      }
  for (BufferDesc &b : buffers_)
    if (!b.dims.empty()) {
      clearShape(b.shape, b.dims);
      b.bytes = 0;
    }
  steps_.clear();
  stepNodes_.clear();
  describeSteps();
}

std::string Program::unboundMessage() const {
  const std::string what = "set the input shapes (tccrt_set_input_shapes) before running";
  for (const TensorDesc &in : inputs_)
    if (!in.dims.empty())
      return "input '" + in.name + "' has symbolic dims (" + dimsText(in.dims) + "): " + what;
  return "the program's size symbols (" + describeSymbolRanges(symbolRanges_) +
         ") are not bound: " + what;
}

} // namespace tcc::rt
