//===- TrimConvTaps.cpp - Drops the kernel taps that only ever read padding ---------===//
//
// A dilated convolution on a map smaller than its dilation reads padding with its outer taps at
// every output position: DeepLabV3's atrous pyramid (3x3 kernels at dilations 12, 24 and 36 on
// a 16x16 map at 256x256) spends 8 of its 9 taps on zeros at the two largest rates, two thirds of
// the model's arithmetic. Per spatial dim, the leading and trailing taps that no output position
// reads inside the input are dropped: the weight is sliced to the live taps, and the padding on
// each side shrinks by the dilated span of the taps dropped there, so every output reads the
// same input elements as before (the output size is unchanged). A dim left with one tap has
// dilation 1 (it no longer matters), so a pyramid branch whose live taps are the centre becomes
// a 1x1 convolution.
//
// Left alone: transposed convolutions (lhs_dilation > 1), channels-last ones, and trims that
// would need a negative padding. Taps dead in the middle of the kernel (possible with strides)
// stay. The weight slice of a constant is folded by -tcc-fold-constants.
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Passes.h"
#include "tcc/IR/TccDialect.h"

#include "mlir/IR/Builders.h"

namespace tcc {
#define GEN_PASS_DEF_TRIMCONVTAPS
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/// Whether tap k of a dim reads inside the input for some output position.
bool tapLive(int64_t k, int64_t input, int64_t output, int64_t stride, int64_t padLow,
             int64_t dilation) {
  const int64_t offset = k * dilation - padLow; // input position of output 0
  const int64_t first = std::max<int64_t>(0, ceilDiv(-offset, stride));
  return first < output && first * stride + offset < input;
}

struct TrimConvTapsPass : impl::TrimConvTapsBase<TrimConvTapsPass> {
  using TrimConvTapsBase::TrimConvTapsBase;

  void runOnOperation() override {
    SmallVector<ConvOp> convs;
    getOperation()->walk([&](ConvOp c) { convs.push_back(c); });
    for (ConvOp conv : convs)
      trim(conv);
  }

  void trim(ConvOp conv) {
    auto in = dyn_cast<RankedTensorType>(conv.getInput().getType());
    auto w = dyn_cast<RankedTensorType>(conv.getWeight().getType());
    auto out = dyn_cast<RankedTensorType>(conv.getType());
    if (!in || !w || !out || !in.hasStaticShape() || !w.hasStaticShape() ||
        !out.hasStaticShape() || conv.getChannelsLast() ||
        llvm::any_of(conv.getLhsDilation(), [](int64_t d) { return d != 1; }))
      return;
    const size_t spatial = conv.getStrides().size();
    SmallVector<int64_t> padLow(conv.getPadLow()), padHigh(conv.getPadHigh()),
        dilation(conv.getRhsDilation());
    SmallVector<int64_t> first(spatial), last(spatial);
    bool trimmed = false;
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t kernel = w.getDimSize(2 + i), input = in.getDimSize(2 + i),
                    output = out.getDimSize(2 + i), stride = conv.getStrides()[i];
      auto live = [&](int64_t k) {
        return tapLive(k, input, output, stride, padLow[i], dilation[i]);
      };
      int64_t lo = 0, hi = kernel - 1;
      while (lo <= hi && !live(lo))
        ++lo;
      while (hi >= lo && !live(hi))
        --hi;
      if (lo > hi) // every tap reads padding: leave such a degenerate convolution alone
        return;
      const int64_t newLow = padLow[i] - lo * dilation[i];
      const int64_t newHigh = padHigh[i] - (kernel - 1 - hi) * dilation[i];
      first[i] = 0;
      last[i] = kernel - 1;
      if ((lo == 0 && hi == kernel - 1) || newLow < 0 || newHigh < 0)
        continue; // nothing to trim, or only with a negative padding
      first[i] = lo;
      last[i] = hi;
      trimmed = true;
      padLow[i] = newLow;
      padHigh[i] = newHigh;
      if (lo == hi)
        dilation[i] = 1;
    }
    if (!trimmed)
      return;
    OpBuilder b(conv);
    SmallVector<int64_t> start(w.getRank(), 0), limit(w.getShape()), step(w.getRank(), 1);
    for (size_t i = 0; i < spatial; ++i) {
      start[2 + i] = first[i];
      limit[2 + i] = last[i] + 1;
    }
    Value weight = b.create<SliceOp>(conv.getLoc(), conv.getWeight(), start, limit, step);
    auto trimmedConv = b.create<ConvOp>(conv.getLoc(), conv.getInput(), weight,
                                        conv.getStrides(), padLow, padHigh,
                                        conv.getLhsDilation(), dilation, conv.getGroups(),
                                        /*channels_last=*/false);
    if (explain) {
      std::string from, to;
      for (size_t i = 0; i < spatial; ++i) {
        from += (i ? "x" : "") + std::to_string(w.getDimSize(2 + i));
        to += (i ? "x" : "") + std::to_string(last[i] - first[i] + 1);
      }
      emitRemark(conv.getLoc()) << "kernel " << from << " trimmed to " << to
                                << ": the other taps only read padding";
    }
    conv.getResult().replaceAllUsesWith(trimmedConv.getResult());
    conv->erase();
  }
};

} // namespace
} // namespace tcc
