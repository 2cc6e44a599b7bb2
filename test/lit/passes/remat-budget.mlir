// RUN: tcc-opt %s -tcc-remat='budget=0' | FileCheck %s
// RUN: tcc-opt %s -tcc-remat='budget=0 explain=true' --mlir-print-op-on-diagnostic=false 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: tcc-opt %s -tcc-remat | FileCheck %s --check-prefix=AUTO

// -tcc-remat with a budget the cheap recomputations cannot meet: only block boundaries are
// kept (here the last, a2: 1 in 4 of the boundaries of this chain) and the block before
// it is recomputed whole, its matrix product included, just before its backward pass.

// REMARK: remark: remat: 4 block boundaries, 1 in 4 kept, the blocks between them recomputed (budget 0 bytes)
// REMARK: remark: remat: kept for the backward pass (32 bytes)
// REMARK: remark: remat: recomputed before its first backward use (32 bytes)
// REMARK: remark: remat: saved activations 64 bytes -> 32 bytes

// CHECK-LABEL: func.func @blocks
// CHECK: %[[H1:.*]] = tcc.matmul %arg2, %arg0
// CHECK: %[[A1:.*]] = tcc.unary tanh %[[H1]]
// CHECK: %[[H2:.*]] = tcc.matmul %[[A1]], %arg1
// CHECK: %[[A2:.*]] = tcc.unary tanh %[[H2]]
// CHECK: tcc.binary mul %[[A2]], %[[A2]]
// CHECK: %[[H1C:.*]] = tcc.matmul %arg2, %arg0 {tcc.recomputed}
// CHECK: %[[A1C:.*]] = tcc.unary tanh %[[H1C]] {tcc.recomputed}
// CHECK: tcc.transpose %[[A1C]]

// Without a budget the matrix products stay: a1 is recomputed from the kept h1.
// AUTO: %[[H1:.*]] = tcc.matmul %arg2, %arg0
// AUTO: tcc.unary tanh %[[H1]] {tcc.recomputed}
// AUTO-NOT: tcc.matmul {{.*}} {tcc.recomputed}
func.func @blocks(%w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>) {
  %h1 = tcc.matmul %x, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a1 = tcc.unary tanh %h1 : tensor<2x4xf32>
  %h2 = tcc.matmul %a1, %w2 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a2 = tcc.unary tanh %h2 : tensor<2x4xf32>
  %loss = tcc.reduce sum %a2 dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  %one = tcc.constant dense<1.0> : tensor<2x4xf32>
  %sq2 = tcc.binary mul %a2, %a2 : tensor<2x4xf32>
  %g2 = tcc.binary sub %one, %sq2 : tensor<2x4xf32>
  %a1t = tcc.transpose %a1 perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %dw2 = tcc.matmul %a1t, %g2 : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %w2t = tcc.transpose %w2 perm = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %ga1 = tcc.matmul %g2, %w2t : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %sq1 = tcc.binary mul %a1, %a1 : tensor<2x4xf32>
  %d1 = tcc.binary sub %one, %sq1 : tensor<2x4xf32>
  %g1 = tcc.binary mul %ga1, %d1 : tensor<2x4xf32>
  %xt = tcc.transpose %x perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %dw1 = tcc.matmul %xt, %g1 : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  return %dw1, %dw2, %loss : tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>
}
