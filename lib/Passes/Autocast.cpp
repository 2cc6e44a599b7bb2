//===- Autocast.cpp - Matrix products and attention in 16 bits -------------===//
//
// -tcc-autocast (Passes.td): torch.autocast's rule for inference, on the graph. The ops whose
// cost is multiply-adds (tcc.matmul, tcc.attention where the target's fused kernel takes the
// 16-bit op, tcc.conv where the CPU runtime has a 16-bit kernel for it) read their f32 operands converted to bf16 or f16 and give a 16-bit result that
// is converted back to f32 for its users; the libraries behind them (cuBLASLt, the generated
// attention kernel) accumulate in f32. Reductions, softmax, normalisation statistics and
// pointwise math stay in f32, as do attention ops that would be decomposed (their softmax).
// Conversions of constants (weights) fold at compile time (-tcc-fold-constants), and a
// conversion of a value just widened from the same 16-bit type is that value, so two 16-bit
// ops in a row exchange 16-bit values.
//
//===----------------------------------------------------------------------===//

#include "tcc/IR/TccDialect.h"
#include "tcc/Passes/Passes.h"
#include "tcc/Support/ConvShapes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tcc {
#define GEN_PASS_DEF_AUTOCAST
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

RankedTensorType withElementType(Value v, Type element) {
  return cast<RankedTensorType>(v.getType()).clone(element);
}

bool isF32Tensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

/// Converts f32 values to the 16-bit type, once each. Data movement (broadcast, reshape,
/// transpose, slice) is redone on the converted source rather than converting its result: a
/// weight broadcast over a batch then converts (and folds) at its own size, and a value widened
/// from the 16-bit type, then reshaped and transposed into heads, stays 16-bit throughout.
class HalfValues {
public:
  explicit HalfValues(Type half) : half_(half) {}

  Value get(Value v) {
    if (Value known = converted_.lookup(v))
      return known;
    Value result;
    Operation *def = v.getDefiningOp();
    if (auto widen = dyn_cast_or_null<CastOp>(def);
        widen && cast<RankedTensorType>(widen.getX().getType()).getElementType() == half_) {
      result = widen.getX();
    } else if (def && isa<BroadcastInDimOp, ReshapeOp, TransposeOp, SliceOp>(def) &&
               def->getNumOperands() == 1 && isF32Tensor(def->getOperand(0))) {
      Value source = get(def->getOperand(0));
      OpBuilder b(def);
      b.setInsertionPointAfterValue(source);
      if (source.getParentBlock() != def->getBlock())
        b.setInsertionPoint(def);
      Operation *copy = b.clone(*def);
      copy->setOperand(0, source);
      copy->getResult(0).setType(withElementType(v, half_));
      result = copy->getResult(0);
    } else {
      OpBuilder b(v.getContext());
      b.setInsertionPointAfterValue(v);
      result = b.create<CastOp>(v.getLoc(), withElementType(v, half_), v);
    }
    converted_[v] = result;
    return result;
  }

private:
  Type half_;
  llvm::DenseMap<Value, Value> converted_;
};

/// Whether `target` runs `conv` in 16 bits faster than in f32: the CPU runtime's im2col and
/// pointwise convolutions (16-bit GEMMs at twice the f32 rate), not those it runs with Winograd
/// in f32 (less work than that); its transposed and depthwise ones would only be widened back,
/// and CUDA's convolution kernels are f32.
bool hasHalfConvKernel(ConvOp conv, StringRef target) {
  if (target != "cpu")
    return false;
  bool transposed = llvm::any_of(conv.getLhsDilation(), [](int64_t d) { return d > 1; });
  auto w = cast<RankedTensorType>(conv.getWeight().getType());
  auto y = cast<RankedTensorType>(conv.getResult().getType());
  int64_t groupIn = w.getDimSize(1), groupOut = w.getDimSize(0) / conv.getGroups();
  std::vector<int64_t> kernel(w.getShape().drop_front(2).begin(), w.getShape().end());
  std::vector<int64_t> out(y.getShape().drop_front(2).begin(), y.getShape().end());
  std::vector<int64_t> strides(conv.getStrides().begin(), conv.getStrides().end());
  std::vector<int64_t> dilations(conv.getRhsDilation().begin(), conv.getRhsDilation().end());
  return !transposed && groupIn > 1 &&
         !winogradTileFor(kernel, strides, dilations, groupIn, groupOut, out);
}

struct AutocastPass : impl::AutocastBase<AutocastPass> {
  using AutocastBase::AutocastBase;

  void runOnOperation() override {
    if (precision == "fp32")
      return;
    if (precision != "bf16" && precision != "fp16") {
      getOperation().emitError("-tcc-autocast: unknown precision '")
          << precision << "' (expected fp32, bf16 or fp16)";
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    Type half = precision == "bf16" ? Type(BFloat16Type::get(ctx)) : Type(Float16Type::get(ctx));
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (auto m = dyn_cast<MatmulOp>(op)) {
        if (isF32Tensor(m.getResult()))
          ops.push_back(op);
      } else if (auto a = dyn_cast<AttentionOp>(op)) {
        if (isF32Tensor(a.getResult()) &&
            (allAttention || hasFusedAttentionKernel(a, half, target)))
          ops.push_back(op);
      } else if (auto c = dyn_cast<ConvOp>(op)) {
        if (isF32Tensor(c.getResult()) && hasHalfConvKernel(c, target))
          ops.push_back(op);
      }
    });
    HalfValues halves(half);
    for (Operation *op : ops) {
      // The CPU's attention kernel adds an f32 bias to its f32 scores (and decompositions of
      // 16-bit attention compute in f32): the bias stays f32 there and in training.
      auto attention = dyn_cast<AttentionOp>(op);
      OpOperand *keep = attention && (target == "cpu" || allAttention) && attention.getBias()
                            ? &attention.getBiasMutable()[0]
                            : nullptr;
      for (OpOperand &operand : op->getOpOperands())
        if (isF32Tensor(operand.get()) && &operand != keep)
          operand.set(halves.get(operand.get()));
      OpBuilder b(op);
      Value result = op->getResult(0);
      result.setType(withElementType(result, half));
      b.setInsertionPointAfter(op);
      auto back = b.create<CastOp>(op->getLoc(), withElementType(result, b.getF32Type()), result);
      result.replaceAllUsesExcept(back.getResult(), back);
    }
    // The f32 data movement that only fed converted operands is dead now.
    SmallVector<Operation *> all;
    getOperation().walk([&](Operation *op) { all.push_back(op); });
    for (Operation *op : llvm::reverse(all))
      if (isOpTriviallyDead(op))
        op->erase();
  }
};

} // namespace
} // namespace tcc
