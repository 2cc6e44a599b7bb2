// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// Linear algebra and windows: matmul, conv and reduce_window. The result shapes written here
// are the inferred ones.

// CHECK-LABEL: func.func @matmul(%arg0: tensor<4x8xf32>, %arg1: tensor<8x16xf32>, %arg2: tensor<2x3x4x5xbf16>, %arg3: tensor<2x3x5x6xbf16>, %arg4: tensor<3x1xi64>, %arg5: tensor<1x3xi64>)
// CHECK-NEXT: %0 = tcc.matmul %arg0, %arg1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %1 = tcc.matmul %arg2, %arg3 : tensor<2x3x4x5xbf16>, tensor<2x3x5x6xbf16> -> tensor<2x3x4x6xbf16>
// CHECK-NEXT: %2 = tcc.matmul %arg4, %arg5 : tensor<3x1xi64>, tensor<1x3xi64> -> tensor<3x3xi64>
// CHECK-NEXT: return
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<2x3x4x5xbf16>, %d: tensor<2x3x5x6xbf16>,
                  %e: tensor<3x1xi64>, %f: tensor<1x3xi64>) {
  %0 = tcc.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %1 = tcc.matmul %c, %d : tensor<2x3x4x5xbf16>, tensor<2x3x5x6xbf16> -> tensor<2x3x4x6xbf16>
  %2 = tcc.matmul %e, %f : tensor<3x1xi64>, tensor<1x3xi64> -> tensor<3x3xi64>
  return
}

// A ResNet stem (stride 2, pad 3), a depthwise conv, a dilated 1-d conv, a transposed conv
// (lhs_dilation), negative padding, two groups, and a 3-d conv.
// CHECK-LABEL: func.func @conv(
// CHECK-NEXT: %0 = tcc.conv %arg0, %arg1 {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 3, 3>, pad_low = array<i64: 3, 3>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 2, 2>} : tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32> -> tensor<1x64x112x112xf32>
// CHECK-NEXT: %1 = tcc.conv %arg2, %arg3 {groups = 32 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<2x32x16x16xf16>, tensor<32x1x3x3xf16> -> tensor<2x32x16x16xf16>
// CHECK-NEXT: %2 = tcc.conv %arg4, %arg5 {groups = 1 : i64, lhs_dilation = array<i64: 1>, pad_high = array<i64: 0>, pad_low = array<i64: 0>, rhs_dilation = array<i64: 2>, strides = array<i64: 1>} : tensor<4x8x50xbf16>, tensor<16x8x5xbf16> -> tensor<4x16x42xbf16>
// CHECK-NEXT: %3 = tcc.conv %arg6, %arg7 {groups = 1 : i64, lhs_dilation = array<i64: 2, 2>, pad_high = array<i64: 2, 2>, pad_low = array<i64: 2, 2>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x4x5x5xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x11x11xf32>
// CHECK-NEXT: %4 = tcc.conv %arg8, %arg9 {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, -1>, pad_low = array<i64: -1, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x1x6x6xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x4x4xf32>
// CHECK-NEXT: %5 = tcc.conv %arg10, %arg11 {groups = 2 : i64, lhs_dilation = array<i64: 1>, pad_high = array<i64: 0>, pad_low = array<i64: 0>, rhs_dilation = array<i64: 1>, strides = array<i64: 1>} : tensor<1x4x8xf64>, tensor<6x2x3xf64> -> tensor<1x6x6xf64>
// CHECK-NEXT: %6 = tcc.conv %arg12, %arg13 {groups = 1 : i64, lhs_dilation = array<i64: 1, 1, 1>, pad_high = array<i64: 0, 0, 0>, pad_low = array<i64: 0, 0, 0>, rhs_dilation = array<i64: 1, 1, 1>, strides = array<i64: 2, 2, 2>} : tensor<1x2x4x4x4xf32>, tensor<3x2x2x2x2xf32> -> tensor<1x3x2x2x2xf32>
// CHECK-NEXT: return
func.func @conv(%x0: tensor<1x3x224x224xf32>, %w0: tensor<64x3x7x7xf32>,
                %x1: tensor<2x32x16x16xf16>, %w1: tensor<32x1x3x3xf16>,
                %x2: tensor<4x8x50xbf16>, %w2: tensor<16x8x5xbf16>,
                %x3: tensor<1x4x5x5xf32>, %w3: tensor<2x4x3x3xf32>,
                %x4: tensor<1x1x6x6xf32>, %w4: tensor<1x1x2x2xf32>,
                %x5: tensor<1x4x8xf64>, %w5: tensor<6x2x3xf64>,
                %x6: tensor<1x2x4x4x4xf32>, %w6: tensor<3x2x2x2x2xf32>) {
  %0 = tcc.conv %x0, %w0 {strides = array<i64: 2, 2>, pad_low = array<i64: 3, 3>, pad_high = array<i64: 3, 3>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32> -> tensor<1x64x112x112xf32>
  %1 = tcc.conv %x1, %w1 {strides = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 32 : i64} : tensor<2x32x16x16xf16>, tensor<32x1x3x3xf16> -> tensor<2x32x16x16xf16>
  %2 = tcc.conv %x2, %w2 {strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, lhs_dilation = array<i64: 1>, rhs_dilation = array<i64: 2>, groups = 1 : i64} : tensor<4x8x50xbf16>, tensor<16x8x5xbf16> -> tensor<4x16x42xbf16>
  %3 = tcc.conv %x3, %w3 {strides = array<i64: 1, 1>, pad_low = array<i64: 2, 2>, pad_high = array<i64: 2, 2>, lhs_dilation = array<i64: 2, 2>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x4x5x5xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x11x11xf32>
  %4 = tcc.conv %x4, %w4 {strides = array<i64: 1, 1>, pad_low = array<i64: -1, 0>, pad_high = array<i64: 0, -1>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x1x6x6xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x4x4xf32>
  %5 = tcc.conv %x5, %w5 {strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, lhs_dilation = array<i64: 1>, rhs_dilation = array<i64: 1>, groups = 2 : i64} : tensor<1x4x8xf64>, tensor<6x2x3xf64> -> tensor<1x6x6xf64>
  %6 = tcc.conv %x6, %w6 {strides = array<i64: 2, 2, 2>, pad_low = array<i64: 0, 0, 0>, pad_high = array<i64: 0, 0, 0>, lhs_dilation = array<i64: 1, 1, 1>, rhs_dilation = array<i64: 1, 1, 1>, groups = 1 : i64} : tensor<1x2x4x4x4xf32>, tensor<3x2x2x2x2xf32> -> tensor<1x3x2x2x2xf32>
  return
}

// Max pooling 3x3 / stride 2 / pad 1, a dilated sum window, a window larger than its dim
// (empty result), and average-pool style sum over a 1-d signal.
// CHECK-LABEL: func.func @reduce_window(%arg0: tensor<1x3x32x32xf32>, %arg1: tensor<10x10xi32>, %arg2: tensor<3xf16>)
// CHECK-NEXT: %0 = tcc.reduce_window max %arg0 {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, pad_low = array<i64: 0, 0, 1, 1>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 3, 3>} : tensor<1x3x32x32xf32> -> tensor<1x3x16x16xf32>
// CHECK-NEXT: %1 = tcc.reduce_window sum %arg1 {dilations = array<i64: 1, 2>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>, window = array<i64: 2, 2>} : tensor<10x10xi32> -> tensor<9x8xi32>
// CHECK-NEXT: %2 = tcc.reduce_window min %arg2 {dilations = array<i64: 1>, pad_high = array<i64: 0>, pad_low = array<i64: 0>, strides = array<i64: 1>, window = array<i64: 4>} : tensor<3xf16> -> tensor<0xf16>
// CHECK-NEXT: %3 = tcc.reduce_window prod %arg2 {dilations = array<i64: 1>, pad_high = array<i64: 2>, pad_low = array<i64: 0>, strides = array<i64: 3>, window = array<i64: 2>} : tensor<3xf16> -> tensor<2xf16>
// CHECK-NEXT: return
func.func @reduce_window(%x: tensor<1x3x32x32xf32>, %i: tensor<10x10xi32>, %h: tensor<3xf16>) {
  %0 = tcc.reduce_window max %x {window = array<i64: 1, 1, 3, 3>, strides = array<i64: 1, 1, 2, 2>, pad_low = array<i64: 0, 0, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1, 1, 1>} : tensor<1x3x32x32xf32> -> tensor<1x3x16x16xf32>
  %1 = tcc.reduce_window sum %i {window = array<i64: 2, 2>, strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilations = array<i64: 1, 2>} : tensor<10x10xi32> -> tensor<9x8xi32>
  %2 = tcc.reduce_window min %h {window = array<i64: 4>, strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, dilations = array<i64: 1>} : tensor<3xf16> -> tensor<0xf16>
  %3 = tcc.reduce_window prod %h {window = array<i64: 2>, strides = array<i64: 3>, pad_low = array<i64: 0>, pad_high = array<i64: 2>, dilations = array<i64: 1>} : tensor<3xf16> -> tensor<2xf16>
  return
}
