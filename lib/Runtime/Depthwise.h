//===- Depthwise.h - Direct 2-D convolution for groups of one input channel ===//
//
// runDepthwise2dPhased computes a 2-D convolution whose groups have one input channel (depthwise,
// any channel multiplier, any stride, pad and dilation) one (image, output channel) plane at a
// time, with no bounds checks in its inner loop: the input plane is first copied into
// stride x stride zero-padded "phase" planes (phase (a, b) holds padded input rows a, a + sh, ...
// and columns b, b + sw, ...), laid out with a common row length V. Every kernel tap then reads
// one phase at a fixed offset, so output (r, c) at flat index r * V + c is a sum of the taps'
// phase values at that same flat index plus the tap's offset: one long contiguous loop over the
// whole plane (columns c >= ow of each row are computed and dropped), vectorised over the flat
// index whatever the plane's width (7..112 in MobileNets). 3x3 kernels sum their nine taps in
// registers; other kernels accumulate tap by tap.
#pragma once

#include "CpuLibrary.h"

namespace tcc::rt {

/// g: a 2-D convolution with groupIn == 1 (checked by the caller).
/// `epilogue` (null: none) is applied as each block of output rows is copied out.
void runDepthwise2dPhased(const ConvGeometry &g, const float *input, const float *weight,
                          float *output, int numThreads, const ConvEpilogue *epilogue = nullptr);

} // namespace tcc::rt
