// RUN: tcc-opt %s -tcc-autodiff | FileCheck %s

// -tcc-autodiff appends d loss / d arg for every float argument. Adjoints of values with
// several uses are summed; a float argument the loss does not depend on gets zeros; integer
// arguments get nothing.

// CHECK-LABEL: func.func @dense
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32>, %[[W:.*]]: tensor<3x5xf32>, %[[B:.*]]: tensor<5xf32>, %{{.*}}: tensor<2xf32>, %{{.*}}: tensor<2xi64>)
// CHECK-SAME: -> (tensor<f32>, tensor<4x3xf32>, tensor<3x5xf32>, tensor<5xf32>, tensor<2xf32>)
// CHECK: %[[H:.*]] = tcc.binary add
// CHECK: %[[E:.*]] = tcc.unary exp %[[H]]
// CHECK: %[[L:.*]] = tcc.reduce sum
// The loss's adjoint is 1, broadcast back over the summed dims.
// CHECK: %[[ONE:.*]] = tcc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[G:.*]] = tcc.broadcast_in_dim %[[ONE]] dims = [] : tensor<f32> -> tensor<4x5xf32>
// mul(e, h): each operand gets g times the other; exp's VJP multiplies by its result.
// CHECK: %[[GE:.*]] = tcc.binary mul %[[G]], %[[H]]
// CHECK: %[[GH1:.*]] = tcc.binary mul %[[G]], %[[E]]
// CHECK: %[[GH2:.*]] = tcc.binary mul %[[GE]], %[[E]]
// h is used twice: its adjoints are summed.
// CHECK: %[[GH:.*]] = tcc.binary add %[[GH1]], %[[GH2]]
// broadcast_in_dim's VJP sums over the broadcast dim.
// CHECK: %[[GB:.*]] = tcc.reduce sum %[[GH]] dims = [0] : tensor<4x5xf32> -> tensor<5xf32>
// matmul: dX = G W^T, dW = X^T G.
// CHECK: %[[WT:.*]] = tcc.transpose %[[W]] perm = [1, 0]
// CHECK: %[[GX:.*]] = tcc.matmul %[[GH]], %[[WT]]
// CHECK: %[[XT:.*]] = tcc.transpose %[[X]] perm = [1, 0]
// CHECK: %[[GW:.*]] = tcc.matmul %[[XT]], %[[GH]]
// CHECK: %[[ZERO:.*]] = tcc.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK: return %[[L]], %[[GX]], %[[GW]], %[[GB]], %[[ZERO]]
func.func @dense(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>, %b: tensor<5xf32>, %unused: tensor<2xf32>,
                 %i: tensor<2xi64>) -> tensor<f32> {
  %0 = tcc.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  %1 = tcc.broadcast_in_dim %b dims = [1] : tensor<5xf32> -> tensor<4x5xf32>
  %2 = tcc.binary add %0, %1 : tensor<4x5xf32>
  %3 = tcc.unary exp %2 : tensor<4x5xf32>
  %4 = tcc.binary mul %3, %2 : tensor<4x5xf32>
  %5 = tcc.reduce sum %4 dims = [0, 1] : tensor<4x5xf32> -> tensor<f32>
  return %5 : tensor<f32>
}

// Activity: only the path from %x is differentiated. The constant operand of the mul gets no
// adjoint, and the comparison (piecewise constant) is not differentiated at all.
// CHECK-LABEL: func.func @activity
// CHECK: %[[C:.*]] = tcc.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]>
// CHECK: %[[CMP:.*]] = tcc.compare gt
// CHECK: tcc.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NOT: tcc.compare
// CHECK: %[[S:.*]] = tcc.select %[[CMP]], %{{.*}}, %{{.*}}
// CHECK-NEXT: %[[GX:.*]] = tcc.binary mul %[[S]], %[[C]]
// CHECK-NEXT: return %{{.*}}, %[[GX]] : tensor<f32>, tensor<3xf32>
func.func @activity(%x: tensor<3xf32>) -> tensor<f32> {
  %c = tcc.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %0 = tcc.binary mul %x, %c : tensor<3xf32>
  %1 = tcc.compare gt %0, %c : tensor<3xf32>
  %z = tcc.constant dense<0.0> : tensor<3xf32>
  %2 = tcc.select %1, %0, %z : tensor<3xi1>, tensor<3xf32>
  %3 = tcc.reduce sum %2 dims = [0] : tensor<3xf32> -> tensor<f32>
  return %3 : tensor<f32>
}

// Strided slice: the adjoint is interleaved with zeros (reshape, pad, reshape, slice), then
// padded into place.
// CHECK-LABEL: func.func @strided_slice
// CHECK: %[[G:.*]] = tcc.broadcast_in_dim %{{.*}} dims = [] : tensor<f32> -> tensor<3xf32>
// CHECK: %[[R:.*]] = tcc.reshape %[[G]] : tensor<3xf32> -> tensor<3x1xf32>
// CHECK: %[[P:.*]] = tcc.pad constant %[[R]], %{{.*}} low = [0, 0] high = [0, 1] : tensor<3x1xf32>, tensor<f32> -> tensor<3x2xf32>
// CHECK: %[[M:.*]] = tcc.reshape %[[P]] : tensor<3x2xf32> -> tensor<6xf32>
// CHECK: %[[S:.*]] = tcc.slice %[[M]] start = [0] limit = [5] stride = [1]
// CHECK: %[[GX:.*]] = tcc.pad constant %[[S]], %{{.*}} low = [1] high = [2] : tensor<5xf32>, tensor<f32> -> tensor<8xf32>
// CHECK: return %{{.*}}, %[[GX]]
func.func @strided_slice(%x: tensor<8xf32>) -> tensor<f32> {
  %0 = tcc.slice %x start = [1] limit = [6] stride = [2] : tensor<8xf32> -> tensor<3xf32>
  %1 = tcc.reduce sum %0 dims = [0] : tensor<3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// Max pooling: each window tap is a strided slice of the (-inf padded) input; the first tap
// equal to the maximum that no earlier tap matched takes the adjoint.
// CHECK-LABEL: func.func @max_pool
// CHECK: tcc.pad constant %{{.*}}, %{{.*}} low = [1] high = [0] {{.*}} -> tensor<5xf32>
// CHECK: %[[T0:.*]] = tcc.slice %{{.*}} start = [0] limit = [3] stride = [2]
// CHECK: %[[HIT0:.*]] = tcc.compare eq %[[T0]], %[[Y:.*]] :
// CHECK: %[[T1:.*]] = tcc.slice %{{.*}} start = [1] limit = [4] stride = [2]
// CHECK: %[[HIT1:.*]] = tcc.compare eq %[[T1]], %[[Y]] :
// CHECK: %[[NOT:.*]] = tcc.unary not %[[HIT0]]
// CHECK: %[[FIRST:.*]] = tcc.binary and %[[HIT1]], %[[NOT]]
// CHECK: tcc.select %[[FIRST]]
// CHECK: tcc.slice %{{.*}} start = [1] limit = [5] stride = [1] : tensor<5xf32> -> tensor<4xf32>
func.func @max_pool(%x: tensor<4xf32>) -> tensor<f32> {
  %0 = tcc.reduce_window max %x {window = array<i64: 2>, strides = array<i64: 2>, pad_low = array<i64: 1>, pad_high = array<i64: 0>, dilations = array<i64: 1>} : tensor<4xf32> -> tensor<2xf32>
  %1 = tcc.reduce sum %0 dims = [0] : tensor<2xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// Functions whose result is not a single 0-d float are left alone.
// CHECK-LABEL: func.func @not_a_loss
// CHECK-SAME: -> tensor<3xf32>
func.func @not_a_loss(%x: tensor<3xf32>) -> tensor<3xf32> {
  return %x : tensor<3xf32>
}
