// RUN: tcc-opt %s -tcc-shard=rank=3 | FileCheck %s
// RUN: tcc-opt %s -tcc-shard="rank=0 explain=true" 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN

// Megatron MLP on a dp x tp mesh: the batch split over dp, the first weight column-parallel and
// the second row-parallel over tp. Rank 3 (dp 1, tp 1) holds 4 rows, 16 hidden features of
// each weight; one all_reduce over tp sums the row-parallel products, one over dp the loss.

// CHECK-LABEL: func.func @mlp(%arg0: tensor<4x16xf32>, %arg1: tensor<16x16xf32>, %arg2: tensor<16x16xf32>) -> (tensor<f32>, tensor<4x16xf32>)
// CHECK-NEXT: %[[H:.*]] = tcc.matmul %arg0, %arg1 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[Z:.*]] = tcc.constant dense<0.000000e+00> : tensor<4x16xf32>
// CHECK-NEXT: %[[R:.*]] = tcc.binary max %[[H]], %[[Z]] : tensor<4x16xf32>
// CHECK-NEXT: %[[Y:.*]] = tcc.matmul %[[R]], %arg2 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[YS:.*]] = tcc.all_reduce sum %[[Y]] over ["tp"] : tensor<4x16xf32>
// CHECK-NEXT: %[[T:.*]] = tcc.unary tanh %[[YS]] : tensor<4x16xf32>
// CHECK-NEXT: %[[S:.*]] = tcc.reduce sum %[[T]] dims = [0, 1] : tensor<4x16xf32> -> tensor<f32>
// CHECK-NEXT: %[[L:.*]] = tcc.all_reduce sum %[[S]] over ["dp"] : tensor<f32>
// CHECK-NEXT: return %[[L]], %[[T]] : tensor<f32>, tensor<4x16xf32>

// EXPLAIN: remark: sharding: tcc.matmul at loc("fc1"): {{\[\[}}dp], []], {{\[\[}}], [tp]] -> {{\[\[}}dp], [tp]] (matmul: batch, M and N dims keep their split; a split K leaves partial sums)
// EXPLAIN: remark: sharding: tcc.constant {{.*}} -> {{\[\[}}], []] (a source: whole, cut where consumers need)
// EXPLAIN: remark: sharding: tcc.binary at loc("relu"): {{\[\[}}dp], [tp]], {{\[\[}}dp], [tp]] -> {{\[\[}}dp], [tp]] (elementwise: every dim keeps its split)
// EXPLAIN: remark: sharding: tcc.matmul at loc("fc2"): {{\[\[}}dp], [tp]], {{\[\[}}tp], []] -> {{\[\[}}dp], []] partial [tp]
// EXPLAIN: remark: sharding: tcc.reduce at loc("loss"): {{\[\[}}dp], []] -> [] partial [dp] (sum: split reduced dims leave partial sums)
// EXPLAIN: remark: collective: all_reduce over tp, 256 bytes per rank, of 'tcc.matmul' result at loc("fc2") for 'tcc.unary' at loc("tanh")
// EXPLAIN: remark: collective: all_reduce over dp, 4 bytes per rank, of 'tcc.reduce' result at loc("loss")

module attributes {tcc.mesh = #tcc.mesh<dp = 2, tp = 2>} {
func.func @mlp(%x: tensor<8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>},
               %w1: tensor<16x32xf32> {tcc.sharding = #tcc.sharding<[[], [tp]]>},
               %w2: tensor<32x16xf32> {tcc.sharding = #tcc.sharding<[[tp], []]>})
    -> (tensor<f32>, tensor<8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>}) {
  %h = tcc.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32> loc("fc1")
  %z = tcc.constant dense<0.0> : tensor<8x32xf32>
  %r = tcc.binary max %h, %z : tensor<8x32xf32> loc("relu")
  %y = tcc.matmul %r, %w2 : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32> loc("fc2")
  %t = tcc.unary tanh %y : tensor<8x16xf32> loc("tanh")
  %s = tcc.reduce sum %t dims = [0, 1] : tensor<8x16xf32> -> tensor<f32> loc("loss")
  return %s, %t : tensor<f32>, tensor<8x16xf32>
}
}

