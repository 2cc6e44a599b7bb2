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
// Then a convolution whose live taps still read padding at many output positions (DeepLab's
// rate-12 branch on 16x16: all nine taps live, a quarter of its multiply-adds inside the input)
// is split: per spatial dim, the output positions fall into bands with the same live taps (at
// rate 12 on 16: rows 0-3 taps 1-2, rows 4-11 tap 1, rows 12-15 taps 0-1); each combination
// of bands is a convolution of an input slice with the weight's live taps and no padding, and
// the regions are concatenated back (kSplitBelowLiveShare, kSavedMacsPerRegion: only where
// the arithmetic saved pays for the extra calls).
//
// Left alone: transposed convolutions (lhs_dilation > 1), channels-last ones, and trims that
// would need a negative padding. Taps dead in the middle of the kernel (possible with strides)
// stay. The weight slices of a constant are folded by -tcc-fold-constants.
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Passes.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace tcc {
#define GEN_PASS_DEF_TRIMCONVTAPS
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/// Splitting by live taps: only where at most this share of the multiply-adds read inside the
/// input (a 3x3 "same" convolution on a 7x7 map reads inside with 82% of them: left whole, for
/// Winograd), into at most kMaxRegions regions, and where the multiply-adds saved (at ~40 a
/// nanosecond on one core) take longer than the regions' extra calls, input slices and
/// concatenation (~5 us a region).
constexpr double kSplitBelowLiveShare = 0.6;
constexpr double kSavedMacsPerRegion = 40.0 * 5000.0;
constexpr int64_t kMaxRegions = 16;

/// Whether tap k of a dim reads inside the input for some output position.
bool tapLive(int64_t k, int64_t input, int64_t output, int64_t stride, int64_t padLow,
             int64_t dilation) {
  const int64_t offset = k * dilation - padLow; // input position of output 0
  const int64_t first = std::max<int64_t>(0, ceilDiv(-offset, stride));
  return first < output && first * stride + offset < input;
}

/// Whether the pass looks at `conv`: static shapes, channels-first, no input dilation.
bool handled(ConvOp conv) {
  auto isStatic = [](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.hasStaticShape();
  };
  return isStatic(conv.getInput()) && isStatic(conv.getWeight()) && isStatic(conv.getResult()) &&
         !conv.getChannelsLast() &&
         llvm::all_of(conv.getLhsDilation(), [](int64_t d) { return d == 1; });
}

struct TrimConvTapsPass : impl::TrimConvTapsBase<TrimConvTapsPass> {
  using TrimConvTapsBase::TrimConvTapsBase;

  void runOnOperation() override {
    SmallVector<ConvOp> convs;
    getOperation()->walk([&](ConvOp c) { convs.push_back(c); });
    for (ConvOp conv : convs)
      split(trim(conv));
  }

  /// The trimmed convolution (or `conv` itself when nothing was trimmed).
  ConvOp trim(ConvOp conv) {
    if (!handled(conv))
      return conv;
    auto in = cast<RankedTensorType>(conv.getInput().getType());
    auto w = cast<RankedTensorType>(conv.getWeight().getType());
    auto out = cast<RankedTensorType>(conv.getType());
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
        return conv;
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
      return conv;
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
    return trimmedConv;
  }

  /// Output positions [begin, end) of one dim whose live taps are [kLo, kHi).
  struct Band {
    int64_t begin, end, kLo, kHi;
  };

  /// A convolution whose taps read padding at many output positions (every tap but the centre
  /// partly, as a dilation of 12 on a 16x16 map does, where trimming leaves all nine) becomes
  /// one convolution per region of the output with the same live taps, concatenated: each
  /// reads a slice of the input with the live slice of the weight and no padding.
  void split(ConvOp conv) {
    if (!handled(conv))
      return;
    auto in = cast<RankedTensorType>(conv.getInput().getType());
    auto w = cast<RankedTensorType>(conv.getWeight().getType());
    auto out = cast<RankedTensorType>(conv.getType());
    if (out.getNumElements() == 0)
      return;
    const size_t spatial = conv.getStrides().size();
    SmallVector<SmallVector<Band>> bands(spatial);
    double liveShare = 1.0;
    int64_t regions = 1;
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t kernel = w.getDimSize(2 + i), input = in.getDimSize(2 + i),
                    output = out.getDimSize(2 + i), stride = conv.getStrides()[i],
                    padLow = conv.getPadLow()[i], dilation = conv.getRhsDilation()[i];
      int64_t liveTaps = 0;
      for (int64_t o = 0; o < output; ++o) {
        int64_t kLo = 0, kHi = kernel; // taps k with 0 <= o * stride - padLow + k * d < input
        while (kLo < kHi && o * stride - padLow + kLo * dilation < 0)
          ++kLo;
        while (kHi > kLo && o * stride - padLow + (kHi - 1) * dilation >= input)
          --kHi;
        if (kLo == kHi)
          kLo = kHi = 0;
        liveTaps += kHi - kLo;
        if (!bands[i].empty() && bands[i].back().kLo == kLo && bands[i].back().kHi == kHi)
          bands[i].back().end = o + 1;
        else
          bands[i].push_back({o, o + 1, kLo, kHi});
      }
      liveShare *= (double)liveTaps / (double)(output * kernel);
      regions *= bands[i].size();
    }
    const double macs = (double)out.getNumElements() * (double)(w.getNumElements() / w.getDimSize(0));
    if (regions < 2 || regions > kMaxRegions || liveShare > kSplitBelowLiveShare ||
        (1.0 - liveShare) * macs < kSavedMacsPerRegion * (double)regions)
      return;
    OpBuilder b(conv);
    SmallVector<int64_t> band(spatial, 0);
    Value result = region(b, conv, bands, band, 0);
    if (explain)
      emitRemark(conv.getLoc()) << "split into " << regions << " regions by live taps: "
                                << (int)std::lround(100.0 * liveShare)
                                << "% of the multiply-adds read inside the input";
    conv.getResult().replaceAllUsesWith(result);
    conv->erase();
  }

  /// The output for the bands chosen in dims [0, dim) (`band`), concatenated over the rest.
  Value region(OpBuilder &b, ConvOp conv, ArrayRef<SmallVector<Band>> bands,
               SmallVector<int64_t> &band, size_t dim) {
    const size_t spatial = bands.size();
    Location loc = conv.getLoc();
    if (dim < spatial) {
      SmallVector<Value> parts;
      for (size_t j = 0; j < bands[dim].size(); ++j) {
        band[dim] = j;
        parts.push_back(region(b, conv, bands, band, dim + 1));
      }
      return parts.size() == 1 ? parts[0] : b.create<ConcatOp>(loc, parts, 2 + dim).getResult();
    }
    auto in = cast<RankedTensorType>(conv.getInput().getType());
    auto w = cast<RankedTensorType>(conv.getWeight().getType());
    auto out = cast<RankedTensorType>(conv.getType());
    SmallVector<int64_t> outShape(out.getShape());
    bool empty = false;
    SmallVector<int64_t> inStart(in.getRank(), 0), inLimit(in.getShape()), wStart(w.getRank(), 0),
        wLimit(w.getShape()), zeros(spatial, 0), dilation(spatial);
    for (size_t i = 0; i < spatial; ++i) {
      const Band &r = bands[i][band[i]];
      const int64_t stride = conv.getStrides()[i], padLow = conv.getPadLow()[i],
                    d = conv.getRhsDilation()[i];
      outShape[2 + i] = r.end - r.begin;
      empty |= r.kLo == r.kHi;
      inStart[2 + i] = r.begin * stride - padLow + r.kLo * d;
      inLimit[2 + i] = (r.end - 1) * stride - padLow + (r.kHi - 1) * d + 1;
      wStart[2 + i] = r.kLo;
      wLimit[2 + i] = r.kHi;
      dilation[i] = r.kHi - r.kLo > 1 ? d : 1;
    }
    auto type = RankedTensorType::get(outShape, out.getElementType());
    if (empty) // no tap reads inside the input here
      return CoreBuilder(b, loc).splat(type, 0.0);
    auto slice = [&](Value v, ArrayRef<int64_t> start, ArrayRef<int64_t> limit) -> Value {
      auto t = cast<RankedTensorType>(v.getType());
      if (llvm::all_of(start, [](int64_t s) { return s == 0; }) && limit == t.getShape())
        return v; // all of it
      return b.create<SliceOp>(loc, v, start, limit, SmallVector<int64_t>(t.getRank(), 1));
    };
    Value x = slice(conv.getInput(), inStart, inLimit);
    Value weight = slice(conv.getWeight(), wStart, wLimit);
    return b.create<ConvOp>(loc, x, weight, conv.getStrides(), zeros, zeros,
                            conv.getLhsDilation(), dilation, conv.getGroups(),
                            /*channels_last=*/false);
  }
};

} // namespace
} // namespace tcc
