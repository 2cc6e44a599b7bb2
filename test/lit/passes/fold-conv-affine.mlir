// RUN: tcc-opt %s -tcc-fold-conv-affine=explain=true -split-input-file -verify-diagnostics | FileCheck %s

// Per-channel arithmetic after a convolution with constant weights folds into the weights and
// one bias; anything else is left as it is.

// (y / s - c) * -1 with per-channel s and splat c: scale -1/s, shift c. A splat scale applies
// to every channel.
// CHECK-LABEL: func.func @div_sub_mul(
// CHECK:         %[[W:.*]] = tcc.constant dense<{{\[\[\[\[}}-5.000000e-01]]], {{\[\[\[}}-2.500000e-01]]]]> : tensor<2x1x1x1xf32>
// CHECK-NEXT:    %[[Y:.*]] = tcc.conv %arg0, %[[W]]
// CHECK-NEXT:    %[[B:.*]] = tcc.constant dense<3.000000e+00> : tensor<1x2x1x1xf32>
// CHECK:         %[[BB:.*]] = tcc.broadcast_in_dim %[[B]]
// CHECK:         %[[O:.*]] = tcc.binary add %[[Y]], %[[BB]]
// CHECK-NEXT:    return %[[O]]
func.func @div_sub_mul(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = tcc.constant dense<[[[[2.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>
  // expected-remark @+1 {{3 per-channel ops after this convolution folded into its weights and one bias}}
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32> -> tensor<1x2x4x4xf32>
  %s = tcc.constant dense<[[[4.0]], [[8.0]]]> : tensor<2x1x1xf32>
  %sb = tcc.broadcast_in_dim %s dims = [1, 2, 3] : tensor<2x1x1xf32> -> tensor<1x2x4x4xf32>
  %c = tcc.constant dense<3.0> : tensor<1x2x4x4xf32>
  %m = tcc.constant dense<-1.0> : tensor<1x2x4x4xf32>
  %0 = tcc.binary div %y, %sb : tensor<1x2x4x4xf32>
  %1 = tcc.binary sub %0, %c : tensor<1x2x4x4xf32>
  %2 = tcc.binary mul %1, %m : tensor<1x2x4x4xf32>
  return %2 : tensor<1x2x4x4xf32>
}

// -----

// Left alone: weights that are an argument; a convolution whose result is read twice; a
// constant divided by the convolution; a vector varying along a spatial dim; a single add
// (already a bias).
// CHECK-LABEL: func.func @left_alone(
// CHECK:         tcc.conv %arg0, %arg1
// CHECK-NEXT:    tcc.binary mul
// CHECK-NEXT:    tcc.conv
// CHECK-NEXT:    tcc.binary mul
// CHECK-NEXT:    tcc.conv
// CHECK-NEXT:    tcc.binary div
// CHECK-NEXT:    tcc.conv
// CHECK:         tcc.binary mul
// CHECK-NEXT:    tcc.conv
// CHECK-NEXT:    tcc.binary add
func.func @left_alone(%x: tensor<1x1x4x4xf32>, %wa: tensor<2x1x1x1xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %w = tcc.constant dense<[[[[2.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>
  %k = tcc.constant dense<2.0> : tensor<1x2x4x4xf32>
  %y0 = tcc.conv %x, %wa {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32> -> tensor<1x2x4x4xf32>
  %o0 = tcc.binary mul %y0, %k : tensor<1x2x4x4xf32>
  %y1 = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32> -> tensor<1x2x4x4xf32>
  %o1 = tcc.binary mul %y1, %k : tensor<1x2x4x4xf32>
  %y2 = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32> -> tensor<1x2x4x4xf32>
  %o2 = tcc.binary div %k, %y2 : tensor<1x2x4x4xf32>
  %y3 = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32> -> tensor<1x2x4x4xf32>
  %v = tcc.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %vb = tcc.broadcast_in_dim %v dims = [3] : tensor<4xf32> -> tensor<1x2x4x4xf32>
  %o3 = tcc.binary mul %y3, %vb : tensor<1x2x4x4xf32>
  %y4 = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32> -> tensor<1x2x4x4xf32>
  %o4 = tcc.binary add %y4, %k : tensor<1x2x4x4xf32>
  return %o0, %y1, %o1, %o2, %o3, %o4 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}
