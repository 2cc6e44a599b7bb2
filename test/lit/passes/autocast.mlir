// RUN: tcc-opt %s -tcc-autocast=precision=bf16 | FileCheck %s
// RUN: tcc-opt %s '-tcc-autocast=precision=fp16 target=cpu' | FileCheck %s --check-prefix=CPU
// RUN: tcc-opt %s '-tcc-autocast=precision=bf16 target=cpu' | FileCheck %s --check-prefix=CPUBF16
// RUN: tcc-opt %s -tcc-autocast | FileCheck %s --check-prefix=FP32
// RUN: not tcc-opt %s -tcc-autocast=precision=int8 2>&1 | FileCheck %s --check-prefix=BAD

// A projection (a weight broadcast over the batch), its heads, attention the CUDA kernel takes
// in 16 bits (head dim 16) and one it does not (head dim 72).
// CHECK-LABEL: func.func @block(
// CHECK-DAG: %[[V:.*]] = tcc.cast %arg3 : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xbf16>
// CHECK-DAG: %[[K:.*]] = tcc.cast %arg2 : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xbf16>
// The weight converts before its broadcast (so it folds at its own size).
// CHECK-DAG: %[[W:.*]] = tcc.cast %arg1 : tensor<64x64xf32> -> tensor<64x64xbf16>
// CHECK-DAG: %[[WB:.*]] = tcc.broadcast_in_dim %[[W]] dims = [1, 2] : tensor<64x64xbf16> -> tensor<2x64x64xbf16>
// CHECK-DAG: %[[X:.*]] = tcc.cast %arg0 : tensor<2x8x64xf32> -> tensor<2x8x64xbf16>
// CHECK: %[[Y:.*]] = tcc.matmul %[[X]], %[[WB]] : tensor<2x8x64xbf16>, tensor<2x64x64xbf16> -> tensor<2x8x64xbf16>
// The heads of the 16-bit product stay 16-bit; the f32 copy feeds only the function's result.
// CHECK: %[[R:.*]] = tcc.reshape %[[Y]] : tensor<2x8x64xbf16> -> tensor<2x8x4x16xbf16>
// CHECK: %[[Q:.*]] = tcc.transpose %[[R]] perm = [0, 2, 1, 3] : tensor<2x8x4x16xbf16> -> tensor<2x4x8x16xbf16>
// CHECK: %[[Y32:.*]] = tcc.cast %[[Y]] : tensor<2x8x64xbf16> -> tensor<2x8x64xf32>
// CHECK: %[[A:.*]] = tcc.attention %[[Q]], %[[K]], %[[V]] mask(%arg4 : tensor<2x1x1x8xi1>) {causal, scale = 2.500000e-01 : f64} : tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xbf16>
// CHECK: %[[A32:.*]] = tcc.cast %[[A]] : tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xf32>
// CHECK: %[[B:.*]] = tcc.attention %arg5, %arg5, %arg5 {scale = 1.000000e-01 : f64} : tensor<1x1x8x72xf32>, tensor<1x1x8x72xf32>, tensor<1x1x8x72xf32> -> tensor<1x1x8x72xf32>
// CHECK: return %[[Y32]], %[[A32]], %[[B]]

// On the CPU no attention kernel takes f16: only the product converts. The CPU kernel takes
// bf16 attention without a bias, at any head size.
// CPU: tcc.matmul {{.*}} -> tensor<2x8x64xf16>
// CPU: tcc.attention {{.*}} -> tensor<2x4x8x16xf32>
// CPU: tcc.attention {{.*}} -> tensor<1x1x8x72xf32>
// CPUBF16: tcc.matmul {{.*}} -> tensor<2x8x64xbf16>
// CPUBF16: tcc.attention {{.*}} -> tensor<2x4x8x16xbf16>
// CPUBF16: tcc.attention {{.*}} -> tensor<1x1x8x72xbf16>

// FP32-NOT: tcc.cast
// BAD: unknown precision 'int8' (expected fp32, bf16 or fp16)
func.func @block(%x: tensor<2x8x64xf32>, %w: tensor<64x64xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %pad: tensor<2x1x1x8xi1>, %q72: tensor<1x1x8x72xf32>) -> (tensor<2x8x64xf32>, tensor<2x4x8x16xf32>, tensor<1x1x8x72xf32>) {
  %wb = tcc.broadcast_in_dim %w dims = [1, 2] : tensor<64x64xf32> -> tensor<2x64x64xf32>
  %y = tcc.matmul %x, %wb : tensor<2x8x64xf32>, tensor<2x64x64xf32> -> tensor<2x8x64xf32>
  %r = tcc.reshape %y : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %q = tcc.transpose %r perm = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %a = tcc.attention %q, %k, %v mask(%pad : tensor<2x1x1x8xi1>) {causal, scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %b = tcc.attention %q72, %q72, %q72 {scale = 0.1 : f64} : tensor<1x1x8x72xf32>, tensor<1x1x8x72xf32>, tensor<1x1x8x72xf32> -> tensor<1x1x8x72xf32>
  return %y, %a, %b : tensor<2x8x64xf32>, tensor<2x4x8x16xf32>, tensor<1x1x8x72xf32>
}

// An additive bias: the CPU kernel adds it to its f32 scores, so it stays f32 there; CUDA's
// kernel reads it in q's type, so it converts with q.
// CHECK-LABEL: func.func @bias(
// CHECK: %[[B16:.*]] = tcc.cast %arg1 : tensor<1x2x8x8xf32> -> tensor<1x2x8x8xbf16>
// CHECK: tcc.attention {{.*}} bias(%[[B16]] : tensor<1x2x8x8xbf16>) {{.*}} -> tensor<1x2x8x16xbf16>
// CPUBF16-LABEL: func.func @bias(
// CPUBF16: tcc.attention {{.*}} bias(%arg1 : tensor<1x2x8x8xf32>) {{.*}} -> tensor<1x2x8x16xbf16>
func.func @bias(%q: tensor<1x2x8x16xf32>, %b: tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32> {
  %a = tcc.attention %q, %q, %q bias(%b : tensor<1x2x8x8xf32>) {scale = 0.25 : f64} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return %a : tensor<1x2x8x16xf32>
}
