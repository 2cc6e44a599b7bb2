//===- ConvPaths.h - Which channels-last convolutions libtccrt runs directly --===//
//
// Shared by the runtime (lib/Runtime/ChannelsLast.cpp) and the layout pass that chooses
// channels-last convolutions for it (lib/Passes/Layout.cpp). Header-only, no dependencies.
#pragma once

#include <cstdint>

namespace tcc::rt {

/// A dense (one group) 2-D channels-last convolution with at most this many input values per
/// output (input channels x kernel taps: a stem's 3 x 7 x 7 = 147) runs as a direct loop over
/// the input in place, its output channels in vectors; larger ones go through channels-first
/// copies.
constexpr int64_t kDenseDirectMaxReduction = 160;

} // namespace tcc::rt
