//===- ChannelsLast.h - Convolutions on [N, S..., C] tensors ----------------===//
//
// The layout pass (lib/Passes/Layout.cpp) gives the CPU's pointwise and depthwise convolutions
// channels-last input and output, where they are one GEMM and one vector loop:
//  - 1x1, stride 1, unpadded, one group: out[N*S, K] = in[N*S, C] x W^T (W [K, C] packed once
//    as the sgemm's B): the rows are the positions, so a 7x7 map with 960 channels is 49 rows
//    of whole 32-column panels, where the channels-first GEMM had 49 columns (77% of two
//    panels). The per-channel bias is the sgemm's column bias; the residual and the clamp
//    are applied in its tiles.
//  - 2-D depthwise (one input and one output channel per group): per output position, the sum
//    over taps of the input's channel vector times the tap's weights ([tap][C], rearranged
//    once), vectorised over channels, no padded copies; the epilogue follows in the same pass.
//  - Dense (one group) 2-D with at most kDenseDirectMaxReduction input values per output (a
//    stem on an image's 3 channels): a direct loop over the input in place, the output
//    channels in vectors, weights rearranged once to [ky][kx][c][K]; no im2col copy, and the
//    epilogue in registers.
//  - Anything else: transposed to channels-first, run by runConv, transposed back (correct,
//    not faster; the pass does not choose these).
#pragma once

#include "CpuLibrary.h"
#include "tcc/Runtime/ConvPaths.h"

namespace tcc::rt {

/// How runConvChannelsLast runs a convolution (the cases above).
enum class ChannelsLastPath { Pointwise, Depthwise, DenseDirect, ThroughChannelsFirst };
ChannelsLastPath channelsLastPath(const ConvGeometry &g);
/// "1x1 gemm", "depthwise", "direct" or "via channels-first" (profiles name the path).
const char *channelsLastPathName(ChannelsLastPath path);

/// runConv for g.channelsLast (g itself describes the channels-first convolution): input
/// [N, S..., C], output [N, S'..., K], weight [K, C/groups, kernel...]; the epilogue's bias is
/// per output channel, its residual in the output's layout.
void runConvChannelsLast(const ConvGeometry &g, const float *input, const float *weight,
                         float *output, float *workspace, int numThreads, PackedOperand *cache,
                         bool weightIsConstant, const ConvEpilogue *epilogue);

} // namespace tcc::rt
