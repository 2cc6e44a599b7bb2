// RUN: tcc-opt %s -tcc-fuse -split-input-file | FileCheck %s

// -tcc-fuse: a softmax row (max, exp-sub, sum, div) and a layer-norm row (mean, variance,
// normalise, scale and shift) each become ONE loop fusion: the consumers read the reductions
// at the same row, and the cheap exp-sub is recomputed rather than materialised.

// CHECK-LABEL: func.func @softmax
// CHECK:       %[[F:.*]] = tcc.fusion "loop"(%arg0 : tensor<4x8xf32>) -> (tensor<4x8xf32>) {
// CHECK:         tcc.reduce max
// CHECK:         tcc.unary exp
// CHECK:         tcc.reduce sum
// CHECK:         %[[D:.*]] = tcc.binary div
// CHECK:         tcc.yield %[[D]] : tensor<4x8xf32>
// CHECK-NEXT:  }
// CHECK-NOT:   tcc.fusion
// CHECK:       return %[[F]]
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = tcc.reduce max %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %m1 = tcc.reshape %m : tensor<4xf32> -> tensor<4x1xf32>
  %mb = tcc.broadcast_in_dim %m1 dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
  %s = tcc.binary sub %x, %mb : tensor<4x8xf32>
  %e = tcc.unary exp %s : tensor<4x8xf32>
  %sum = tcc.reduce sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %s1 = tcc.reshape %sum : tensor<4xf32> -> tensor<4x1xf32>
  %sb = tcc.broadcast_in_dim %s1 dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
  %r = tcc.binary div %e, %sb : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @layer_norm
// CHECK:       %[[F:.*]] = tcc.fusion "loop"(%arg0, %arg1, %arg2 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>) {
// CHECK-DAG:     tcc.constant dense<8.000000e+00> : tensor<2xf32>
// CHECK:         tcc.reduce sum
// CHECK:         tcc.reduce sum
// CHECK:         tcc.unary rsqrt
// CHECK:         %[[Y:.*]] = tcc.binary add
// CHECK:         tcc.yield %[[Y]] : tensor<2x8xf32>
// CHECK-NEXT:  }
// CHECK-NOT:   tcc.fusion
// CHECK:       return %[[F]]
func.func @layer_norm(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %s = tcc.reduce sum %x dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
  %n = tcc.constant dense<8.0> : tensor<2xf32>
  %mean = tcc.binary div %s, %n : tensor<2xf32>
  %m1 = tcc.reshape %mean : tensor<2xf32> -> tensor<2x1xf32>
  %mb = tcc.broadcast_in_dim %m1 dims = [0, 1] : tensor<2x1xf32> -> tensor<2x8xf32>
  %d = tcc.binary sub %x, %mb : tensor<2x8xf32>
  %sq = tcc.binary mul %d, %d : tensor<2x8xf32>
  %vs = tcc.reduce sum %sq dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
  %var = tcc.binary div %vs, %n : tensor<2xf32>
  %eps = tcc.constant dense<1.0e-5> : tensor<2xf32>
  %ve = tcc.binary add %var, %eps : tensor<2xf32>
  %r = tcc.unary rsqrt %ve : tensor<2xf32>
  %r1 = tcc.reshape %r : tensor<2xf32> -> tensor<2x1xf32>
  %rb = tcc.broadcast_in_dim %r1 dims = [0, 1] : tensor<2x1xf32> -> tensor<2x8xf32>
  %y = tcc.binary mul %d, %rb : tensor<2x8xf32>
  %gb = tcc.broadcast_in_dim %g dims = [1] : tensor<8xf32> -> tensor<2x8xf32>
  %bb = tcc.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<2x8xf32>
  %yg = tcc.binary mul %y, %gb : tensor<2x8xf32>
  %out = tcc.binary add %yg, %bb : tensor<2x8xf32>
  return %out : tensor<2x8xf32>
}

// -----

// A softmax over the middle dim of a 3-d tensor (rows are dims 0 and 2): still one kernel.
// CHECK-LABEL: func.func @softmax_axis1
// CHECK-COUNT-1: tcc.fusion "loop"
// CHECK-NOT:   tcc.fusion
func.func @softmax_axis1(%x: tensor<3x4x5xf32>) -> tensor<3x4x5xf32> {
  %m = tcc.reduce max %x dims = [1] : tensor<3x4x5xf32> -> tensor<3x5xf32>
  %m1 = tcc.reshape %m : tensor<3x5xf32> -> tensor<3x1x5xf32>
  %mb = tcc.broadcast_in_dim %m1 dims = [0, 1, 2] : tensor<3x1x5xf32> -> tensor<3x4x5xf32>
  %s = tcc.binary sub %x, %mb : tensor<3x4x5xf32>
  %e = tcc.unary exp %s : tensor<3x4x5xf32>
  %sum = tcc.reduce sum %e dims = [1] : tensor<3x4x5xf32> -> tensor<3x5xf32>
  %s1 = tcc.reshape %sum : tensor<3x5xf32> -> tensor<3x1x5xf32>
  %sb = tcc.broadcast_in_dim %s1 dims = [0, 1, 2] : tensor<3x1x5xf32> -> tensor<3x4x5xf32>
  %r = tcc.binary div %e, %sb : tensor<3x4x5xf32>
  return %r : tensor<3x4x5xf32>
}
