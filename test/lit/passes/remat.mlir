// RUN: tcc-opt %s -tcc-remat -split-input-file | FileCheck %s
// RUN: tcc-opt %s -tcc-remat='explain=true' --mlir-print-op-on-diagnostic=false -split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// -tcc-remat: a training step's forward values that the backward pass reads are recomputed
// there from the kept ones (matrix products, arguments, constants), right before their first
// backward use. The forward ops stay as they were; the copies carry tcc.recomputed.

// REMARK: remark: remat: recomputed before its first backward use (64 bytes)
// REMARK: remark: remat: recomputed before its first backward use (64 bytes)
// REMARK: remark: remat: saved activations 128 bytes -> 64 bytes
// REMARK: remark: remat: kept for the backward pass (32 bytes)
// REMARK: remark: remat: saved activations 32 bytes -> 32 bytes
// CHECK-LABEL: func.func @step
// CHECK: %[[H:.*]] = tcc.matmul %arg2, %arg0
// CHECK: %[[A:.*]] = tcc.binary add %[[H]]
// CHECK: %[[T:.*]] = tcc.unary tanh %[[A]]
// CHECK: %[[LOSS:.*]] = tcc.reduce sum %[[T]]
// CHECK: %[[B2:.*]] = tcc.broadcast_in_dim %arg1 dims = [1] {tcc.recomputed}
// CHECK: %[[A2:.*]] = tcc.binary add %[[H]], %[[B2]] {tcc.recomputed}
// CHECK: %[[T2:.*]] = tcc.unary tanh %[[A2]] {tcc.recomputed}
// CHECK: tcc.binary mul %[[T2]], %[[T2]]
// CHECK: tcc.binary mul {{.*}}, %[[A2]]
// CHECK: return {{.*}}, %[[LOSS]]
func.func @step(%w: tensor<4x8xf32>, %b: tensor<8xf32>, %x: tensor<2x4xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %h = tcc.matmul %x, %w : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %bb = tcc.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<2x8xf32>
  %a = tcc.binary add %h, %bb : tensor<2x8xf32>
  %t = tcc.unary tanh %a : tensor<2x8xf32>
  %loss = tcc.reduce sum %t dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  %one = tcc.constant dense<1.0> : tensor<2x8xf32>
  %t2 = tcc.binary mul %t, %t : tensor<2x8xf32>
  %d = tcc.binary sub %one, %t2 : tensor<2x8xf32>
  %e = tcc.binary mul %d, %a : tensor<2x8xf32>
  %xt = tcc.transpose %x perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %gw = tcc.matmul %xt, %e : tensor<4x2xf32>, tensor<2x8xf32> -> tensor<4x8xf32>
  return %gw, %loss : tensor<4x8xf32>, tensor<f32>
}

// -----

// A value the backward pass reads that is a matrix product is kept; constants are not
// activations; a value only returned (not read after the loss) is not saved.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: tcc.recomputed
func.func @kept(%w: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<2x4xf32>, tensor<f32>) {
  %h = tcc.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %c = tcc.constant dense<2.0> : tensor<2x4xf32>
  %s = tcc.binary mul %h, %c : tensor<2x4xf32>
  %loss = tcc.reduce sum %s dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  %g = tcc.binary mul %h, %c : tensor<2x4xf32>
  %xt = tcc.transpose %x perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %gw = tcc.matmul %xt, %g : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  return %gw, %s, %loss : tensor<4x4xf32>, tensor<2x4xf32>, tensor<f32>
}
