// RUN: tcc-opt %s -tcc-trim-conv-taps -split-input-file | FileCheck %s
// RUN: tcc-opt %s -tcc-trim-conv-taps="explain=true" -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// DeepLab's atrous pyramid at its largest rates: on a 16x16 map a 3x3 kernel at dilation 24
// (padding 24) reads inside the input with its centre tap alone. It becomes a 1x1 convolution
// of the weight's centre, without padding or dilation.
// CHECK-LABEL: func.func @centre(
// CHECK:         %[[W:.*]] = tcc.slice %arg1 start = [0, 0, 1, 1] limit = [4, 8, 2, 2] stride = [1, 1, 1, 1] : tensor<4x8x3x3xf32> -> tensor<4x8x1x1xf32>
// CHECK:         %[[Y:.*]] = tcc.conv %arg0, %[[W]] {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x8x16x16xf32>, tensor<4x8x1x1xf32> -> tensor<1x4x16x16xf32>
// CHECK:         return %[[Y]]
// EXPLAIN: remark: kernel 3x3 trimmed to 1x1: the other taps only read padding
func.func @centre(%x: tensor<1x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) -> tensor<1x4x16x16xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 24, 24>, pad_low = array<i64: 24, 24>, rhs_dilation = array<i64: 24, 24>, strides = array<i64: 1, 1>} : tensor<1x8x16x16xf32>, tensor<4x8x3x3xf32> -> tensor<1x4x16x16xf32>
  return %y : tensor<1x4x16x16xf32>
}

// -----

// At dilation 12 every tap reads the 16x16 map somewhere: nothing changes.
// CHECK-LABEL: func.func @all_live(
// CHECK-NOT:     tcc.slice
// CHECK:         tcc.conv %arg0, %arg1 {{.*}}pad_high = array<i64: 12, 12>, pad_low = array<i64: 12, 12>, rhs_dilation = array<i64: 12, 12>
func.func @all_live(%x: tensor<1x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) -> tensor<1x4x16x16xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 12, 12>, pad_low = array<i64: 12, 12>, rhs_dilation = array<i64: 12, 12>, strides = array<i64: 1, 1>} : tensor<1x8x16x16xf32>, tensor<4x8x3x3xf32> -> tensor<1x4x16x16xf32>
  return %y : tensor<1x4x16x16xf32>
}

// -----

// 1-D, kernel 5 at dilation 4 on 6 positions with 8 of padding each side: taps 0 and 4 read
// only padding; taps 1-3 stay, with 4 of padding each side and the dilation kept.
// CHECK-LABEL: func.func @one_dim(
// CHECK:         %[[W:.*]] = tcc.slice %arg1 start = [0, 0, 1] limit = [2, 3, 4] stride = [1, 1, 1]
// CHECK:         tcc.conv %arg0, %[[W]] {groups = 1 : i64, lhs_dilation = array<i64: 1>, pad_high = array<i64: 4>, pad_low = array<i64: 4>, rhs_dilation = array<i64: 4>, strides = array<i64: 1>} : tensor<1x3x6xf32>, tensor<2x3x3xf32> -> tensor<1x2x6xf32>
// EXPLAIN: remark: kernel 5 trimmed to 3: the other taps only read padding
func.func @one_dim(%x: tensor<1x3x6xf32>, %w: tensor<2x3x5xf32>) -> tensor<1x2x6xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1>, pad_high = array<i64: 8>, pad_low = array<i64: 8>, rhs_dilation = array<i64: 4>, strides = array<i64: 1>} : tensor<1x3x6xf32>, tensor<2x3x5xf32> -> tensor<1x2x6xf32>
  return %y : tensor<1x2x6xf32>
}

// -----

// A transposed convolution (lhs_dilation 2) is left alone.
// CHECK-LABEL: func.func @transposed(
// CHECK-NOT:     tcc.slice
func.func @transposed(%x: tensor<1x2x2x2xf32>, %w: tensor<2x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 2, 2>, pad_high = array<i64: 8, 8>, pad_low = array<i64: 8, 8>, rhs_dilation = array<i64: 8, 8>, strides = array<i64: 1, 1>} : tensor<1x2x2x2xf32>, tensor<2x2x3x3xf32> -> tensor<1x2x3x3xf32>
  return %y : tensor<1x2x3x3xf32>
}

// -----

// Dilation 12 on a 16x16 map: every tap reads inside somewhere (nothing to trim), but only a
// quarter of the multiply-adds do. Per dim, rows 0-3 see taps 1-2, rows 4-11 tap 1, rows 12-15
// taps 0-1: nine regions, each a convolution of an input slice with the weight's live taps and
// no padding, concatenated along the width, then the height.
// CHECK-LABEL: func.func @split(
// CHECK:         %[[W0:.*]] = tcc.slice %arg1 start = [0, 0, 1, 1] limit = [64, 64, 3, 3] stride = [1, 1, 1, 1] : tensor<64x64x3x3xf32> -> tensor<64x64x2x2xf32>
// CHECK:         %[[C0:.*]] = tcc.conv %arg0, %[[W0]] {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 12, 12>, strides = array<i64: 1, 1>} : tensor<1x64x16x16xf32>, tensor<64x64x2x2xf32> -> tensor<1x64x4x4xf32>
// CHECK:         %[[X1:.*]] = tcc.slice %arg0 start = [0, 0, 0, 4] limit = [1, 64, 16, 12] stride = [1, 1, 1, 1] : tensor<1x64x16x16xf32> -> tensor<1x64x16x8xf32>
// CHECK:         %[[W1:.*]] = tcc.slice %arg1 start = [0, 0, 1, 1] limit = [64, 64, 3, 2]
// CHECK:         tcc.conv %[[X1]], %[[W1]] {{.*}}rhs_dilation = array<i64: 12, 1>{{.*}} -> tensor<1x64x4x8xf32>
// CHECK:         tcc.conv {{.*}} -> tensor<1x64x4x4xf32>
// CHECK:         %[[ROW0:.*]] = tcc.concat {{.*}} axis = 3 : tensor<1x64x4x4xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x4xf32> -> tensor<1x64x4x16xf32>
// CHECK-COUNT-3: tcc.conv
// CHECK:         tcc.concat {{.*}} axis = 3 {{.*}} -> tensor<1x64x8x16xf32>
// CHECK-COUNT-3: tcc.conv
// CHECK:         tcc.concat {{.*}} axis = 3 {{.*}} -> tensor<1x64x4x16xf32>
// CHECK:         %[[Y:.*]] = tcc.concat %[[ROW0]], {{.*}} axis = 2 {{.*}} -> tensor<1x64x16x16xf32>
// CHECK:         return %[[Y]]
// EXPLAIN: remark: split into 9 regions by live taps: 25% of the multiply-adds read inside the input
func.func @split(%x: tensor<1x64x16x16xf32>, %w: tensor<64x64x3x3xf32>) -> tensor<1x64x16x16xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 12, 12>, pad_low = array<i64: 12, 12>, rhs_dilation = array<i64: 12, 12>, strides = array<i64: 1, 1>} : tensor<1x64x16x16xf32>, tensor<64x64x3x3xf32> -> tensor<1x64x16x16xf32>
  return %y : tensor<1x64x16x16xf32>
}

// -----

// The same rate on a few channels: the multiply-adds saved would not pay for nine calls.
// CHECK-LABEL: func.func @too_small(
// CHECK-NOT:     tcc.concat
// CHECK:         tcc.conv %arg0, %arg1
func.func @too_small(%x: tensor<1x8x16x16xf32>, %w: tensor<4x8x3x3xf32>) -> tensor<1x4x16x16xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 12, 12>, pad_low = array<i64: 12, 12>, rhs_dilation = array<i64: 12, 12>, strides = array<i64: 1, 1>} : tensor<1x8x16x16xf32>, tensor<4x8x3x3xf32> -> tensor<1x4x16x16xf32>
  return %y : tensor<1x4x16x16xf32>
}
