//===- ConvShapes.h - Which convolutions the CPU runtime runs with Winograd --===//
//
// One statement of the rule, for the runtime (Winograd.cpp's planWinograd) and the compiler
// (the Autocast pass keeps these convolutions f32: F(4x4, 3x3) does 2-2.9x less work than the
// im2col GEMM, more than a bf16 GEMM's 2x). Header-only: the runtime links no MLIR.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tcc {

/// The Winograd output tile m (F(m x m, 3 x 3): 4, or 2 for outputs of 6 x 6 to 11 x 11) for a
/// 2-D convolution with these kernel dims, strides, dilations, channels per group and output
/// dims; 0 when it runs as im2col + GEMM instead. 3x3, stride 1, undilated, at least 8 channels
/// per group each way, an output of at least 6 x 6. Measured (tccrt-bench, 1 / 2 threads, vs
/// im2col + sgemm, Zen 4): 64ch @56x56 2.5x / 2x faster, 128ch @28x28 2.9x / 2.2x, 256ch
/// @14x14 2x / 2.1x; F(4x4) on fewer tiles (512ch @7x7: 2x2 tiles) was 1.9x slower than
/// im2col, F(2x2) there 1.9x faster (3.25 -> 1.68 ms on one thread).
inline int64_t winogradTileFor(const std::vector<int64_t> &kernel,
                               const std::vector<int64_t> &strides,
                               const std::vector<int64_t> &dilations, int64_t groupIn,
                               int64_t groupOut, const std::vector<int64_t> &outSpatial) {
  if (kernel.size() != 2 || kernel[0] != 3 || kernel[1] != 3 || strides[0] != 1 ||
      strides[1] != 1 || dilations[0] != 1 || dilations[1] != 1)
    return 0;
  // Small channel counts leave the GEMMs too thin to pay for the transforms.
  if (groupIn < 8 || groupOut < 8)
    return 0;
  int64_t smallest = std::min(outSpatial[0], outSpatial[1]);
  if (smallest < 6)
    return 0;
  return smallest < 12 ? 2 : 4;
}

} // namespace tcc
