// RUN: tcc-opt %s -tcc-shard=rank=0 | FileCheck %s

// Data parallel: two weight gradients (contractions over the split batch: pending sums) are
// reduced as soon as they exist, and being used only after both, share one bucket: one flat
// all_reduce, placed where the second was.

// CHECK-LABEL: func.func @grads
// CHECK: %[[G1:.*]] = tcc.matmul
// CHECK-NOT: tcc.all_reduce
// CHECK: %[[G2:.*]] = tcc.matmul
// CHECK-NEXT: %[[F1:.*]] = tcc.reshape %[[G1]] : tensor<4x4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[F2:.*]] = tcc.reshape %[[G2]] : tensor<4x2xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[C:.*]] = tcc.concat %[[F1]], %[[F2]] axis = 0 : tensor<16xf32>, tensor<8xf32> -> tensor<24xf32>
// CHECK-NEXT: %[[R:.*]] = tcc.all_reduce sum %[[C]] over ["dp"] : tensor<24xf32>
// CHECK-NEXT: %[[S1:.*]] = tcc.slice %[[R]] start = [0] limit = [16] stride = [1] : tensor<24xf32> -> tensor<16xf32>
// CHECK-NEXT: tcc.reshape %[[S1]] : tensor<16xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[S2:.*]] = tcc.slice %[[R]] start = [16] limit = [24] stride = [1] : tensor<24xf32> -> tensor<8xf32>
// CHECK-NEXT: tcc.reshape %[[S2]] : tensor<8xf32> -> tensor<4x2xf32>
// CHECK-NOT: tcc.all_reduce

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @grads(%x: tensor<8x4xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>},
                 %dy: tensor<8x4xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>},
                 %dz: tensor<8x2xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>},
                 %w1: tensor<4x4xf32>, %w2: tensor<4x2xf32>) -> (tensor<4x4xf32>, tensor<4x2xf32>) {
  %xt = tcc.transpose %x perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %g1 = tcc.matmul %xt, %dy : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %g2 = tcc.matmul %xt, %dz : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  %u1 = tcc.binary sub %w1, %g1 : tensor<4x4xf32>
  %u2 = tcc.binary sub %w2, %g2 : tensor<4x2xf32>
  return %u1, %u2 : tensor<4x4xf32>, tensor<4x2xf32>
}
}
