//===- CudaLibraryKernels.h - CUDA kernels for tk's library ops -----------===//
//
// On the CPU, tk.conv and tk.topk are library calls run by libtccrt. On CUDA the compiler
// generates a kernel for each instead (the CUDA runtime only launches kernels, runs GEMMs
// through cuBLASLt and copies), specialised on the op's static shapes and attributes:
//  * emitCudaConv: an implicit-GEMM convolution (f32 in, f32 accumulate): the output
//    [N, OC, spatial...] is the GEMM (OC/group) x (N * outSpatial) over K = (IC/group) *
//    kernelSize, whose B operand is gathered from the input on the fly (no im2col buffer).
//  * emitCudaTopK: sorted top-k along `dim`, ties and NaN ordered exactly as the reference
//    (CpuLibrary.h's runTopK).
//  * emitCudaAttention: FlashAttention-2's forward pass on tensor cores (mma.sync, sm_80+) for
//    f16/bf16 with f32 accumulation (CudaAttentionKernel.cpp); cudaAttentionUnsupported says
//    why an op is out of its reach (empty when it is not). `alignment` is the smallest byte
//    alignment of the op's buffers (16 or more: vector loads).
//  * emitCudaAttentionGrad: FlashAttention-2's backward pass for the same attentions, as two
//    kernels launched in turn: dQ with each query row's log-sum-exp and dO.O (written to the
//    op's workspace), then dK and dV per block of keys, summed over the group's query heads
//    (no atomics: deterministic).
// The returned kernel is an NVRTC translation unit like CudaEmitter's (same prelude), whose
// __global__ function takes the op's buffers in operand order, (input, weight, output) and
// (input, values, indices), as typed device pointers; it covers its work with grid-stride loops
// so any grid of at least one block is correct. Kernel names are "conv_<16 hex>" and
// "topk_<16 hex>", from a hash of the geometry: equal geometries give equal kernels (compile
// once). Throws tcc::Error naming the op for what it cannot generate.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Codegen/CudaEmitter.h"

#include <array>

namespace tcc::tk {
class ConvOp;
class TopKOp;
class AttentionOp;
class AttentionGradOp;
} // namespace tcc::tk

namespace tcc::codegen {

CudaKernel emitCudaConv(tk::ConvOp op);
CudaKernel emitCudaTopK(tk::TopKOp op);
CudaKernel emitCudaAttention(tk::AttentionOp op, unsigned alignment);
std::string cudaAttentionUnsupported(tk::AttentionOp op);
std::array<CudaKernel, 2> emitCudaAttentionGrad(tk::AttentionGradOp op, unsigned alignment);

} // namespace tcc::codegen
