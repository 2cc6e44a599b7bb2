//===- Winograd.h - Winograd F(m x m, 3 x 3) 2-D convolution on the CPU ---===//
//
// 3x3, stride 1, dilation 1 2-D convolutions with non-negative pads, per group: the weights go
// through U = G g G^T (cached across runs when they are a program constant), the input through
// V = B^T d B on (m+2)x(m+2) tiles, (m+2)^2 sgemms multiply U by V per tile block, and
// Y = A^T M A gives m x m output tiles (clipped at the border). runConv (CpuLibrary.cpp) picks
// this path through ConvGeometry::winogradTile, set by makeConvGeometry.
#pragma once

#include "CpuLibrary.h"

namespace tcc::rt {

/// Fills g.winogradTile / winogradBlock and returns the per-thread workspace bytes when the
/// Winograd path applies (else leaves winogradTile 0 and returns 0).
size_t planWinograd(ConvGeometry &g);

/// Floats of the transformed weights of g (all groups).
size_t winogradWeightFloats(const ConvGeometry &g);
/// U = G g G^T for every (group, output channel, input channel), layout [group][xi][oc][ic].
void winogradTransformWeights(const ConvGeometry &g, const float *weight, float *u,
                              int numThreads);
/// Packs u for the sgemms: packed[group * (m+2)^2 + xi] is the (oc x ic) matrix of (group, xi).
void winogradPackWeights(const ConvGeometry &g, const float *u, std::vector<SgemmPacked> &packed,
                         int numThreads);
/// The convolution with packed transformed weights (winogradPackWeights); workspace:
/// numThreads x g.workspaceBytes. `epilogue` (null: none) is applied by the output transform.
void runWinograd(const ConvGeometry &g, const float *input, const SgemmPacked *packed,
                 float *output, float *workspace, int numThreads,
                 const ConvEpilogue *epilogue = nullptr);

} // namespace tcc::rt
