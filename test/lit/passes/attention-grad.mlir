// RUN: tcc-opt %s -tcc-autodiff | FileCheck %s --check-prefix=AD
// RUN: tcc-opt %s -tcc-autodiff | tcc-opt -mlir-print-op-generic | tcc-opt | FileCheck %s --check-prefix=AD
// RUN: tcc-opt %s -tcc-autodiff -tcc-decompose-attention=target=cpu | FileCheck %s --check-prefix=CPU
// RUN: tcc-opt %s -tcc-autodiff -tcc-decompose-attention=target=cuda | FileCheck %s --check-prefix=CORE

// Attention's gradient with respect to q, k and v is one tcc.attention_grad reading the
// forward's result; the CPU keeps the f32 one (its runtime has a fused backward pass), CUDA
// decomposes it into core ops in f32 and keeps 16-bit ones with head dims its generated
// kernels take (@bf16_d16; the training artifacts' tk.attention_grad:
// cli/grad-attention.test, cli/cuda-train-emulated.test).
// AD-LABEL: func.func @grouped_causal(
// AD:       %[[OUT:.*]] = tcc.attention %arg0, %arg1, %arg2 {causal
// AD:       %{{.*}}, %{{.*}}, %{{.*}} = tcc.attention_grad %arg0, %arg1, %arg2, %[[OUT]], %{{.*}} {causal, scale = 3.500000e-01 : f64} : tensor<2x4x16x8xf32>, tensor<2x2x32x8xf32>, tensor<2x2x32x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>, tensor<2x2x32x8xf32>, tensor<2x2x32x8xf32>
// CPU-LABEL: func.func @grouped_causal(
// CPU:       tcc.attention_grad
// CORE-LABEL: func.func @grouped_causal(
// CORE-NOT:   tcc.attention_grad
// CORE:       tcc.matmul
// CORE:       return
func.func @grouped_causal(%q: tensor<2x4x16x8xf32>, %k: tensor<2x2x32x8xf32>, %v: tensor<2x2x32x8xf32>) -> tensor<f32> {
  %0 = tcc.attention %q, %k, %v {causal, scale = 0.35 : f64} : tensor<2x4x16x8xf32>, tensor<2x2x32x8xf32>, tensor<2x2x32x8xf32> -> tensor<2x4x16x8xf32>
  %1 = tcc.reduce sum %0 dims = [0, 1, 2, 3] : tensor<2x4x16x8xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// A differentiated bias needs the scores' own gradient: the rule is written in core ops.
// AD-LABEL: func.func @learned_bias(
// AD-NOT:   tcc.attention_grad
// AD:       return
func.func @learned_bias(%q: tensor<1x2x8x4xf32>, %bias: tensor<1x2x8x8xf32>) -> tensor<f32> {
  %0 = tcc.attention %q, %q, %q bias(%bias : tensor<1x2x8x8xf32>) {scale = 0.5 : f64} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  %1 = tcc.reduce sum %0 dims = [0, 1, 2, 3] : tensor<1x2x8x4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// A mask (not differentiable) travels with the gradient.
// AD-LABEL: func.func @masked(
// AD:       tcc.attention_grad %arg0, %arg0, %arg0, %{{.*}}, %{{.*}} mask(%arg1 : tensor<1x1x1x8xi1>) {masked_value = -1.000000e+09 : f64, scale = 5.000000e-01 : f64}
func.func @masked(%q: tensor<1x2x8x4xf32>, %m: tensor<1x1x1x8xi1>) -> tensor<f32> {
  %0 = tcc.attention %q, %q, %q mask(%m : tensor<1x1x1x8xi1>) {masked_value = -1.0e9 : f64, scale = 0.5 : f64} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  %1 = tcc.reduce sum %0 dims = [0, 1, 2, 3] : tensor<1x2x8x4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// CUDA's generated backward kernels take 16-bit attention with head dims multiples of 16 (and an
// f32 or 16-bit bias); head dims of 8 decompose. The CPU's takes both.
// CPU-LABEL: func.func @bf16_d16(
// CPU:       tcc.attention_grad {{.*}} : tensor<1x2x32x16xbf16>
// CORE-LABEL: func.func @bf16_d16(
// CORE:       tcc.attention_grad {{.*}} : tensor<1x2x32x16xbf16>
// CORE:       return
func.func @bf16_d16(%q: tensor<1x2x32x16xbf16>) -> tensor<bf16> {
  %0 = tcc.attention %q, %q, %q {causal, scale = 0.25 : f64} : tensor<1x2x32x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x16xbf16> -> tensor<1x2x32x16xbf16>
  %1 = tcc.reduce sum %0 dims = [0, 1, 2, 3] : tensor<1x2x32x16xbf16> -> tensor<bf16>
  return %1 : tensor<bf16>
}
// CPU-LABEL: func.func @bf16_d8(
// CPU:       tcc.attention_grad {{.*}} : tensor<1x2x32x8xbf16>
// CORE-LABEL: func.func @bf16_d8(
// CORE-NOT:   tcc.attention_grad
// CORE:       tcc.matmul
// CORE:       return
func.func @bf16_d8(%q: tensor<1x2x32x8xbf16>) -> tensor<bf16> {
  %0 = tcc.attention %q, %q, %q {scale = 0.25 : f64} : tensor<1x2x32x8xbf16>, tensor<1x2x32x8xbf16>, tensor<1x2x32x8xbf16> -> tensor<1x2x32x8xbf16>
  %1 = tcc.reduce sum %0 dims = [0, 1, 2, 3] : tensor<1x2x32x8xbf16> -> tensor<bf16>
  return %1 : tensor<bf16>
}
