// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// Reductions and scans: reduce, arg_reduce, cumsum and topk.

// CHECK-LABEL: func.func @reduce(%arg0: tensor<2x3x4xf32>, %arg1: tensor<5x6xi64>, %arg2: tensor<7xbf16>)
// CHECK-NEXT: %0 = tcc.reduce sum %arg0 dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %1 = tcc.reduce prod %arg1 dims = [0, 1] : tensor<5x6xi64> -> tensor<i64>
// CHECK-NEXT: %2 = tcc.reduce max %arg0 dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
// CHECK-NEXT: %3 = tcc.reduce min %arg2 dims = [0] : tensor<7xbf16> -> tensor<bf16>
// CHECK-NEXT: %4 = tcc.reduce sum %arg1 dims = [] : tensor<5x6xi64> -> tensor<5x6xi64>
// CHECK-NEXT: return
func.func @reduce(%x: tensor<2x3x4xf32>, %i: tensor<5x6xi64>, %b: tensor<7xbf16>) {
  %0 = tcc.reduce sum %x dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %1 = tcc.reduce prod %i dims = [0, 1] : tensor<5x6xi64> -> tensor<i64>
  %2 = tcc.reduce max %x dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
  %3 = tcc.reduce min %b dims = [0] : tensor<7xbf16> -> tensor<bf16>
  %4 = tcc.reduce sum %i dims = [] : tensor<5x6xi64> -> tensor<5x6xi64>
  return
}

// The result is always i64, with the reduced dim removed.
// CHECK-LABEL: func.func @arg_reduce(%arg0: tensor<2x3x4xf32>, %arg1: tensor<9xui8>)
// CHECK-NEXT: %0 = tcc.arg_reduce %arg0 dim = 1 {is_max = true} : tensor<2x3x4xf32> -> tensor<2x4xi64>
// CHECK-NEXT: %1 = tcc.arg_reduce %arg0 dim = 2 {is_max = false, select_last_index} : tensor<2x3x4xf32> -> tensor<2x3xi64>
// CHECK-NEXT: %2 = tcc.arg_reduce %arg1 dim = 0 {is_max = true, select_last_index} : tensor<9xui8> -> tensor<i64>
// CHECK-NEXT: return
func.func @arg_reduce(%x: tensor<2x3x4xf32>, %u: tensor<9xui8>) {
  %0 = tcc.arg_reduce %x dim = 1 {is_max = true} : tensor<2x3x4xf32> -> tensor<2x4xi64>
  %1 = tcc.arg_reduce %x dim = 2 {is_max = false, select_last_index} : tensor<2x3x4xf32> -> tensor<2x3xi64>
  %2 = tcc.arg_reduce %u dim = 0 {is_max = true, select_last_index} : tensor<9xui8> -> tensor<i64>
  return
}

// CHECK-LABEL: func.func @cumsum(%arg0: tensor<2x5xf32>, %arg1: tensor<6xi32>)
// CHECK-NEXT: %0 = tcc.cumsum %arg0 dim = 1 : tensor<2x5xf32>
// CHECK-NEXT: %1 = tcc.cumsum %arg0 dim = 0 {exclusive} : tensor<2x5xf32>
// CHECK-NEXT: %2 = tcc.cumsum %arg1 dim = 0 {reverse} : tensor<6xi32>
// CHECK-NEXT: %3 = tcc.cumsum %arg1 dim = 0 {exclusive, reverse} : tensor<6xi32>
// CHECK-NEXT: return
func.func @cumsum(%x: tensor<2x5xf32>, %i: tensor<6xi32>) {
  %0 = tcc.cumsum %x dim = 1 : tensor<2x5xf32>
  %1 = tcc.cumsum %x dim = 0 {exclusive} : tensor<2x5xf32>
  %2 = tcc.cumsum %i dim = 0 {reverse} : tensor<6xi32>
  %3 = tcc.cumsum %i dim = 0 {exclusive, reverse} : tensor<6xi32>
  return
}

// Values keep the element type, indices are i64; dim shrinks to k.
// CHECK-LABEL: func.func @topk(%arg0: tensor<3x10xf32>, %arg1: tensor<5xi64>)
// CHECK-NEXT: %values, %indices = tcc.topk %arg0 dim = 1 k = 4 {largest = true} : tensor<3x10xf32> -> tensor<3x4xf32>, tensor<3x4xi64>
// CHECK-NEXT: %values_0, %indices_1 = tcc.topk %arg0 dim = 0 k = 3 {largest = false} : tensor<3x10xf32> -> tensor<3x10xf32>, tensor<3x10xi64>
// CHECK-NEXT: %values_2, %indices_3 = tcc.topk %arg1 dim = 0 k = 0 {largest = true} : tensor<5xi64> -> tensor<0xi64>, tensor<0xi64>
// CHECK-NEXT: return %values, %indices_1 : tensor<3x4xf32>, tensor<3x10xi64>
func.func @topk(%x: tensor<3x10xf32>, %i: tensor<5xi64>) -> (tensor<3x4xf32>, tensor<3x10xi64>) {
  %v0, %i0 = tcc.topk %x dim = 1 k = 4 {largest = true} : tensor<3x10xf32> -> tensor<3x4xf32>, tensor<3x4xi64>
  %v1, %i1 = tcc.topk %x dim = 0 k = 3 {largest = false} : tensor<3x10xf32> -> tensor<3x10xf32>, tensor<3x10xi64>
  %v2, %i2 = tcc.topk %i dim = 0 k = 0 {largest = true} : tensor<5xi64> -> tensor<0xi64>, tensor<0xi64>
  return %v0, %i1 : tensor<3x4xf32>, tensor<3x10xi64>
}
