// RUN: tcc-opt %s -tcc-column-sums -split-input-file | FileCheck %s
// RUN: tcc-opt %s -tcc-column-sums="explain=true" -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// A channels-last global average pool's sum: 64 rows of 32 contiguous channels, one GEMM row.
// CHECK-LABEL: func.func @pool(
// CHECK:         %[[ONES:.*]] = tcc.constant dense<1.000000e+00> : tensor<1x64xf32>
// CHECK:         %[[X:.*]] = tcc.reshape %arg0 : tensor<1x8x8x32xf32> -> tensor<64x32xf32>
// CHECK:         %[[S:.*]] = tcc.matmul %[[ONES]], %[[X]] : tensor<1x64xf32>, tensor<64x32xf32> -> tensor<1x32xf32>
// CHECK:         return %[[S]]
// CHECK-NOT:     tcc.reduce
// EXPLAIN: remark: a sum of 64 rows of 32 contiguous values: a GEMM row with a ones vector
func.func @pool(%x: tensor<1x8x8x32xf32>) -> tensor<1x32xf32> {
  %s = tcc.reduce sum %x dims = [1, 2] : tensor<1x8x8x32xf32> -> tensor<1x32xf32>
  return %s : tensor<1x32xf32>
}

// -----

// Two images: a batch of two GEMM rows, the ones row broadcast over it.
// CHECK-LABEL: func.func @batch(
// CHECK:         tcc.reshape %arg0 : tensor<2x6x6x16xf32> -> tensor<2x36x16xf32>
// CHECK:         tcc.matmul {{.*}} -> tensor<2x1x16xf32>
// CHECK:         tcc.reshape {{.*}} : tensor<2x1x16xf32> -> tensor<2x16xf32>
// EXPLAIN: remark: a sum of 36 rows of 16 contiguous values (batch 2): a GEMM row with a ones vector
func.func @batch(%x: tensor<2x6x6x16xf32>) -> tensor<2x16xf32> {
  %s = tcc.reduce sum %x dims = [1, 2] : tensor<2x6x6x16xf32> -> tensor<2x16xf32>
  return %s : tensor<2x16xf32>
}

// -----

// A bias gradient: the rows of a [B, C] matrix summed.
// CHECK-LABEL: func.func @bias_grad(
// CHECK:         tcc.matmul {{.*}} : tensor<1x128xf32>, tensor<128x64xf32> -> tensor<1x64xf32>
// EXPLAIN: remark: a sum of 128 rows of 64 contiguous values: a GEMM row with a ones vector
func.func @bias_grad(%dy: tensor<128x64xf32>) -> tensor<64xf32> {
  %s = tcc.reduce sum %dy dims = [0] : tensor<128x64xf32> -> tensor<64xf32>
  return %s : tensor<64xf32>
}

// -----

// Left alone: a row sum (no kept dim after the reduced ones), reduced dims that are not one
// run, fewer than 16 kept values after them, a batch too large for its rows, an i32 max and an i32 sum.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT:     tcc.matmul
// CHECK-COUNT-6: tcc.reduce
// CHECK-NOT:     tcc.matmul
// EXPLAIN-NOT: remark
func.func @left_alone(%a: tensor<4x64xf32>, %b: tensor<4x8x8x32xf32>, %c: tensor<64x8xf32>,
                      %d: tensor<64x4x32xf32>, %e: tensor<64x32xi32>) -> (tensor<4xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<64x32xf32>, tensor<32xi32>, tensor<32xi32>) {
  %0 = tcc.reduce sum %a dims = [1] : tensor<4x64xf32> -> tensor<4xf32>
  %1 = tcc.reduce sum %b dims = [0, 3] : tensor<4x8x8x32xf32> -> tensor<8x8xf32>
  %2 = tcc.reduce sum %c dims = [0] : tensor<64x8xf32> -> tensor<8xf32>
  %3 = tcc.reduce sum %d dims = [1] : tensor<64x4x32xf32> -> tensor<64x32xf32>
  %4 = tcc.reduce max %e dims = [0] : tensor<64x32xi32> -> tensor<32xi32>
  %5 = tcc.reduce sum %e dims = [0] : tensor<64x32xi32> -> tensor<32xi32>
  return %0, %1, %2, %3, %4, %5 : tensor<4xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<64x32xf32>, tensor<32xi32>, tensor<32xi32>
}
