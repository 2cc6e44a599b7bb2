//===- FoldConvAffine.cpp - Per-channel scales and shifts into a convolution --------===//
//
// Batch-normalization folding, in its general form. An inference BatchNormalization after a
// convolution is imported as per-channel arithmetic on its output:
//
//   ((conv(x, W) - mean) * (1 / sqrt(var + eps))) * gamma + beta
//
// Any chain of +, -, * and / by per-output-channel constants (a splat, or a constant broadcast
// along the channel dim alone) is one affine map per channel, y = A[k] * conv + B[k]. When W is
// a constant, A folds into the weights (W'[k, ...] = A[k] * W[k, ...], computed in double and
// rounded once) and the chain becomes one add of the bias B, broadcast from [1, K, 1, ...]:
// what the convolution libraries apply in their output tiles (GemmEpilogue.h, ConvEpilogue).
// The rounding differs from the chain's (as in every runtime that folds batch norm: ONNX
// Runtime, TensorRT, torch.fx's fuse): a few ulps of the output.
//
// Left alone: convolutions whose weights are not constants (training graphs), chains whose
// values are read elsewhere (the folded values would no longer exist), divisions of a constant
// by the chain, non-f32 convolutions, and a chain of one add (already a bias).
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Passes.h"
#include "FusionUtils.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

namespace tcc {
#define GEN_PASS_DEF_FOLDCONVAFFINE
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

/// The per-channel values of `v`, an operand of an op on a tensor of `shape` whose dim 1 is the
/// channel: K values, or one (a splat). None when v is not a constant constant along every
/// other dim.
std::optional<std::vector<double>> channelValues(Value v, ArrayRef<int64_t> shape) {
  const int64_t channels = shape[1];
  SmallVector<int64_t> dims; // result dim of each of the constant's dims
  if (auto b = v.getDefiningOp<BroadcastInDimOp>()) {
    dims.assign(b.getDims().begin(), b.getDims().end());
    v = b.getX();
  } else {
    for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
      dims.push_back(d);
  }
  auto c = v.getDefiningOp<ConstantOp>();
  auto attr = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!attr || !attr.getElementType().isF32())
    return std::nullopt;
  if (attr.isSplat())
    return std::vector<double>{attr.getSplatValue<float>()};
  // The constant's dim that becomes the channel dim; its values must vary along it alone (a
  // per-channel vector, broadcast or already folded into a full tensor).
  auto channelDim = llvm::find(dims, 1);
  if (channelDim == dims.end() || attr.getType().getDimSize(channelDim - dims.begin()) != channels)
    return std::nullopt;
  DenseElementsAttr vector =
      fusion::constantVectorAlong(attr, channelDim - dims.begin());
  if (!vector)
    return std::nullopt;
  std::vector<double> values;
  for (float x : vector.getValues<float>())
    values.push_back(x);
  return values;
}

struct FoldConvAffinePass : impl::FoldConvAffineBase<FoldConvAffinePass> {
  using FoldConvAffineBase::FoldConvAffineBase;

  void runOnOperation() override {
    SmallVector<ConvOp> convs;
    getOperation()->walk([&](ConvOp c) { convs.push_back(c); });
    for (ConvOp conv : convs)
      fold(conv);
  }

  void fold(ConvOp conv) {
    auto type = cast<RankedTensorType>(conv.getType());
    auto weightOp = conv.getWeight().getDefiningOp<ConstantOp>();
    auto weights = weightOp ? dyn_cast<DenseElementsAttr>(weightOp.getValue()) : nullptr;
    if (!type.getElementType().isF32() || !weights || type.getRank() < 3)
      return;
    const int64_t channels = type.getDimSize(1);
    std::vector<double> scale(channels, 1.0), shift(channels, 0.0);
    SmallVector<Operation *> chain;
    bool affine = false; // a scale or a subtraction: more than a bias
    Value last = conv.getResult();
    while (last.hasOneUse()) {
      auto op = dyn_cast<BinaryOp>(*last.getUsers().begin());
      if (!op || op.getLhs() == op.getRhs())
        break;
      bool lastIsLhs = op.getLhs() == last;
      std::optional<std::vector<double>> c =
          channelValues(lastIsLhs ? op.getRhs() : op.getLhs(), type.getShape());
      if (!c)
        break;
      auto at = [&](int64_t k) { return (*c)[c->size() == 1 ? 0 : k]; };
      BinaryKind kind = op.getKind();
      if (kind == BinaryKind::Div && (!lastIsLhs || llvm::any_of(*c, [](double v) {
                                        return v == 0.0 || !std::isfinite(v);
                                      })))
        break;
      if (kind != BinaryKind::Add && kind != BinaryKind::Sub && kind != BinaryKind::Mul &&
          kind != BinaryKind::Div)
        break;
      for (int64_t k = 0; k < channels; ++k) {
        double v = at(k);
        switch (kind) {
        case BinaryKind::Add:
          shift[k] += v;
          break;
        case BinaryKind::Sub: // last - v, or v - last
          if (lastIsLhs) {
            shift[k] -= v;
          } else {
            scale[k] = -scale[k];
            shift[k] = v - shift[k];
          }
          break;
        case BinaryKind::Mul:
          scale[k] *= v;
          shift[k] *= v;
          break;
        default: // Div: last / v
          scale[k] /= v;
          shift[k] /= v;
          break;
        }
      }
      affine |= kind != BinaryKind::Add;
      chain.push_back(op);
      last = op.getResult();
    }
    if (chain.empty() || (!affine && chain.size() == 1))
      return;
    if (llvm::any_of(scale, [](double v) { return !std::isfinite(v); }) ||
        llvm::any_of(shift, [](double v) { return !std::isfinite(v); }))
      return;

    // W'[k, ...] = scale[k] * W[k, ...].
    OpBuilder b(conv);
    std::vector<float> w(weights.getValues<float>().begin(), weights.getValues<float>().end());
    const int64_t perChannel = channels ? (int64_t)w.size() / channels : 0;
    for (int64_t k = 0; k < channels; ++k)
      for (int64_t i = 0; i < perChannel; ++i)
        w[k * perChannel + i] = (float)(scale[k] * w[k * perChannel + i]);
    auto wType = cast<RankedTensorType>(weights.getType());
    Value newWeight = b.create<ConstantOp>(
        weightOp.getLoc(), DenseElementsAttr::get(wType, ArrayRef<float>(w)));
    conv.getWeightMutable().set(newWeight);
    if (weightOp->use_empty())
      weightOp->erase();

    // The chain becomes conv + bias (nothing when every shift is 0).
    Value replacement = conv.getResult();
    if (llvm::any_of(shift, [](double v) { return v != 0.0; })) {
      b.setInsertionPointAfter(conv);
      CoreBuilder cb(b, chain.back()->getLoc());
      SmallVector<int64_t> biasShape(type.getRank(), 1);
      biasShape[1] = channels;
      std::vector<float> bias(shift.begin(), shift.end());
      Value biasValue = cb.constant(DenseElementsAttr::get(
          RankedTensorType::get(biasShape, type.getElementType()), ArrayRef<float>(bias)));
      replacement = cb.add(conv.getResult(), cb.broadcastTo(biasValue, type.getShape()));
    }
    last.replaceAllUsesWith(replacement);
    for (Operation *op : llvm::reverse(chain)) {
      SmallVector<Value> operands(op->getOperands());
      op->erase();
      for (Value v : operands) // the per-channel constants and their broadcasts
        for (Operation *d = v.getDefiningOp(); d && d->use_empty() && isa<ConstantOp,
                                                   BroadcastInDimOp>(d);) {
          Value x = isa<BroadcastInDimOp>(d) ? d->getOperand(0) : Value();
          d->erase();
          d = x ? x.getDefiningOp() : nullptr;
        }
    }
    if (explain)
      emitRemark(conv.getLoc()) << chain.size()
                        << " per-channel ops after this convolution folded into its weights"
                        << (replacement == conv.getResult() ? "" : " and one bias");
  }
};

} // namespace
} // namespace tcc
