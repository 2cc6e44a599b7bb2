// RUN: tcc-opt %s -tcc-shard=rank=1 | FileCheck %s
// RUN: tcc-opt %s -tcc-shard="rank=1 explain=true" 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN

// ZeRO: a gradient (a pending sum over dp: the contraction ran over the split batch) updates a
// parameter split over dp. The update is computed on the parameter's block, so the gradient is
// reduce-scattered, not all-reduced; the constant learning rate is cut at compile time.

// CHECK-LABEL: func.func @update(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>, %arg2: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[T:.*]] = tcc.transpose %arg0 perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[G:.*]] = tcc.matmul %[[T]], %arg2 : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[GS:.*]] = tcc.reduce_scatter sum %[[G]] dim = 0 over ["dp"] : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[LR:.*]] = tcc.constant dense<1.000000e-01> : tensor<4x8xf32>
// CHECK-NEXT: %[[U:.*]] = tcc.binary mul %[[GS]], %[[LR]] : tensor<4x8xf32>
// CHECK-NEXT: %[[N:.*]] = tcc.binary sub %arg1, %[[U]] : tensor<4x8xf32>
// CHECK-NEXT: return %[[N]] : tensor<4x8xf32>

// EXPLAIN: remark: collective: reduce_scatter over dp, 256 bytes per rank

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @update(%x: tensor<8x8xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>},
                  %w: tensor<8x8xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>},
                  %dy: tensor<8x8xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>})
    -> (tensor<8x8xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>}) {
  %t = tcc.transpose %x perm = [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %g = tcc.matmul %t, %dy : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %lr = tcc.constant dense<0.1> : tensor<8x8xf32>
  %u = tcc.binary mul %g, %lr : tensor<8x8xf32>
  %n = tcc.binary sub %w, %u : tensor<8x8xf32>
  return %n : tensor<8x8xf32>
}
}

