// RUN: tcc-opt %s -tcc-autodiff | FileCheck %s

// Both gradients of a strided, padded, grouped convolution are convolutions.
// Input: the adjoint dilated by the stride (lhs_dilation) against the kernel regrouped to
// [C, O/groups, K...] and reversed, padded by K-1-pad_low.
// Weight: the input with the batch as channels (per group) against the adjoint as kernel,
// dilated by the stride (rhs_dilation), then transposed back to [O, C/groups, K...]. Transposes
// that only move unit dims are reshapes.

// CHECK-LABEL: func.func @conv
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x7x7xf32>, %[[W:.*]]: tensor<6x2x3x3xf32>)
// CHECK: %[[G:.*]] = tcc.broadcast_in_dim %{{.*}} dims = [] : tensor<f32> -> tensor<1x6x4x4xf32>
// CHECK: %[[W5:.*]] = tcc.reshape %[[W]] : tensor<6x2x3x3xf32> -> tensor<2x3x2x3x3xf32>
// CHECK: %[[WT:.*]] = tcc.transpose %[[W5]] perm = [0, 2, 1, 3, 4]
// CHECK: %[[WG:.*]] = tcc.reshape %[[WT]] : tensor<2x2x3x3x3xf32> -> tensor<4x3x3x3xf32>
// CHECK: %[[WR:.*]] = tcc.reverse %[[WG]] dims = [2, 3]
// CHECK: %[[GX:.*]] = tcc.conv %[[G]], %[[WR]] {groups = 2 : i64, lhs_dilation = array<i64: 2, 2>, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x6x4x4xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x7x7xf32>
// CHECK: %[[X5:.*]] = tcc.reshape %[[X]] : tensor<1x4x7x7xf32> -> tensor<1x2x2x7x7xf32>
// CHECK: %[[XT:.*]] = tcc.transpose %[[X5]] perm = [2, 1, 0, 3, 4]
// CHECK: %[[XB:.*]] = tcc.reshape %[[XT]] : tensor<2x2x1x7x7xf32> -> tensor<2x2x7x7xf32>
// CHECK: %[[GK:.*]] = tcc.reshape %[[G]] : tensor<1x6x4x4xf32> -> tensor<6x1x4x4xf32>
// CHECK: %[[GW:.*]] = tcc.conv %[[XB]], %[[GK]] {groups = 2 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, rhs_dilation = array<i64: 2, 2>, strides = array<i64: 1, 1>} : tensor<2x2x7x7xf32>, tensor<6x1x4x4xf32> -> tensor<2x6x3x3xf32>
// CHECK: %[[GWT:.*]] = tcc.transpose %[[GW]] perm = [1, 0, 2, 3] : tensor<2x6x3x3xf32> -> tensor<6x2x3x3xf32>
// CHECK: return %{{.*}}, %[[GX]], %[[GWT]]
func.func @conv(%x: tensor<1x4x7x7xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<f32> {
  %0 = tcc.conv %x, %w {strides = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 2} : tensor<1x4x7x7xf32>, tensor<6x2x3x3xf32> -> tensor<1x6x4x4xf32>
  %1 = tcc.reduce sum %0 dims = [0, 1, 2, 3] : tensor<1x6x4x4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// Only the weight is differentiated: the data is an integer argument cast to float, so no
// input-gradient convolution is built.
// CHECK-LABEL: func.func @weight_only
// CHECK: tcc.conv
// CHECK: tcc.conv
// CHECK-NOT: tcc.conv
// CHECK: return
func.func @weight_only(%x: tensor<1x1x5xi32>, %w: tensor<2x1x3xf32>) -> tensor<f32> {
  %xf = tcc.cast %x : tensor<1x1x5xi32> -> tensor<1x1x5xf32>
  %0 = tcc.conv %xf, %w {strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, lhs_dilation = array<i64: 1>, rhs_dilation = array<i64: 1>, groups = 1} : tensor<1x1x5xf32>, tensor<2x1x3xf32> -> tensor<1x2x3xf32>
  %1 = tcc.reduce sum %0 dims = [0, 1, 2] : tensor<1x2x3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
