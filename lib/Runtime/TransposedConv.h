//===- TransposedConv.h - Convolutions over a dilated input (GEMM + col2im) -===//
//
// A tk.conv whose lhs_dilation is above 1 in some spatial dim: what ONNX ConvTranspose (the
// upsampling head of detection and segmentation models) and the input gradient of a strided
// convolution lower to. Convolving the dilated input directly would multiply by the inserted
// zeros: s^r times the useful work for lhs_dilation s in r dims. Instead, per (image, group),
// one sgemm computes, for every input pixel, what it contributes to each (output channel,
// kernel tap):
//
//   cols[(o, k), i] = sum_c W[o, c, k] x[c, i]     (A = the weights as [(o, k), c], packed once)
//
// and col2im adds each column to the output pixel that tap reaches (the pixel whose window
// reads input pixel i at tap k; none when it falls outside the output or between strides).
// Only the useful products are computed. Input pixels go in column tiles that keep `cols` about
// the size of L2; the sgemm is threaded, and col2im splits output channels over the threads, so
// no two threads add to one output element and the result does not depend on the thread count.
#pragma once

#include "CpuLibrary.h"

namespace tcc::rt {

/// Fills g.transposedTile and returns the workspace bytes (one workspace, not per thread) when
/// g has an lhs_dilation above 1 (else returns 0).
size_t planTransposedConv(ConvGeometry &g);

/// Packs the weights of each group as sgemm's A operand, (groupOut x kernelSize) x groupIn.
void transposedConvPackWeights(const ConvGeometry &g, const float *weight,
                               std::vector<SgemmPacked> &packed, int numThreads);

/// The convolution with the packed weights; `workspace` holds g.workspaceBytes.
void runTransposedConv(const ConvGeometry &g, const float *input, const SgemmPacked *packed,
                       float *output, float *workspace, int numThreads);

} // namespace tcc::rt
