// RUN: tcc-opt %s -tcc-fuse -split-input-file | FileCheck %s

// A float matmul with its bias add and relu: one extern fusion. The transpose of the weight's
// last two dims goes in too (it becomes tk.gemm's trans_b).

// CHECK-LABEL: func.func @linear_relu
// CHECK:       %[[F:.*]] = tcc.fusion "extern"(%arg1, %arg0, %arg2 : tensor<8x16xf32>, tensor<4x16xf32>, tensor<8xf32>) -> (tensor<4x8xf32>) {
// CHECK:         tcc.transpose
// CHECK:         tcc.matmul
// CHECK:         tcc.binary add
// CHECK:         %[[R:.*]] = tcc.binary max
// CHECK:         tcc.yield %[[R]]
// CHECK-NOT:   tcc.fusion
// CHECK:       return %[[F]]
func.func @linear_relu(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %bias: tensor<8xf32>) -> tensor<4x8xf32> {
  %wt = tcc.transpose %w perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = tcc.matmul %x, %wt : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z = tcc.binary add %y, %bb : tensor<4x8xf32>
  %zero = tcc.constant dense<0.0> : tensor<4x8xf32>
  %r = tcc.binary max %z, %zero : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Conv + per-channel bias + relu: one extern fusion.
// CHECK-LABEL: func.func @conv_bias_relu
// CHECK:       tcc.fusion "extern"
// CHECK:         tcc.conv
// CHECK:         tcc.binary add
// CHECK:         tcc.binary max
// CHECK-NOT:   tcc.fusion
func.func @conv_bias_relu(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x6x6xf32> {
  %c = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  %bb = tcc.broadcast_in_dim %b dims = [1] : tensor<4xf32> -> tensor<1x4x6x6xf32>
  %z = tcc.binary add %c, %bb : tensor<1x4x6x6xf32>
  %zero = tcc.constant dense<0.0> : tensor<1x4x6x6xf32>
  %r = tcc.binary max %z, %zero : tensor<1x4x6x6xf32>
  return %r : tensor<1x4x6x6xf32>
}

// -----

// An integer matmul is no library call: a loop kernel (with an inner reduction) of its own.
// CHECK-LABEL: func.func @int_matmul
// CHECK:       tcc.fusion "loop"
// CHECK:         tcc.matmul
func.func @int_matmul(%a: tensor<2x3xi32>, %b: tensor<3x4xi32>) -> tensor<2x4xi32> {
  %y = tcc.matmul %a, %b : tensor<2x3xi32>, tensor<3x4xi32> -> tensor<2x4xi32>
  return %y : tensor<2x4xi32>
}
