// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels -split-input-file | FileCheck %s
// RUN: tcc-opt %s -tcc-fuse=target=cuda -tcc-lower-to-kernels=target=cuda -split-input-file | FileCheck %s --check-prefix=CUDA

// On the CPU, an f32 pool with padded or overlapping windows is a library call (tk.pool: the
// runtime's runPool), its element-wise consumers an epilogue kernel; one of disjoint unpadded
// windows stays a loop kernel (affine loads, its producers fused in). CUDA generates them all.
// CHECK-LABEL: func.func @k0_pool_epilogue(
// CHECK:       func.func @padded(%arg0: memref<1x4x8x8xf32>, %arg1: memref<1x4x4x4xf32>)
// CHECK-NEXT:    tk.pool max %arg0, %arg1 {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, pad_low = array<i64: 0, 0, 1, 1>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 3, 3>} : memref<1x4x8x8xf32>, memref<1x4x4x4xf32>
// CHECK-NEXT:    tk.launch @k0_pool_epilogue(%arg1)
// CUDA-LABEL:  func.func @padded(
// CUDA-NOT:      tk.pool
func.func @padded(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %p = tcc.reduce_window max %x {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, pad_low = array<i64: 0, 0, 1, 1>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 3, 3>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  %two = tcc.constant dense<2.0> : tensor<1x4x4x4xf32>
  %o = tcc.binary mul %p, %two : tensor<1x4x4x4xf32>
  return %o : tensor<1x4x4x4xf32>
}

// -----

// CHECK-LABEL: func.func @k0_reduce_window(
// CHECK:       func.func @disjoint(
// CHECK-NOT:     tk.pool
// CHECK:         tk.launch @k0_reduce_window
func.func @disjoint(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %zero = tcc.constant dense<0.0> : tensor<1x4x8x8xf32>
  %r = tcc.binary max %x, %zero : tensor<1x4x8x8xf32>
  %p = tcc.reduce_window max %r {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 0, 0>, pad_low = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  return %p : tensor<1x4x4x4xf32>
}

// -----

// A channels-last sum pool (an average pool after the layout pass): pooled dims 1 and 2.
// CHECK-LABEL: func.func @nhwc(
// CHECK:         tk.pool sum %arg0, %arg1 {{.*}} window = array<i64: 1, 3, 3, 1>} : memref<1x8x8x16xf32>, memref<1x8x8x16xf32>
func.func @nhwc(%x: tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32> {
  %p = tcc.reduce_window sum %x {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 1, 1, 0>, pad_low = array<i64: 0, 1, 1, 0>, strides = array<i64: 1, 1, 1, 1>, window = array<i64: 1, 3, 3, 1>} : tensor<1x8x8x16xf32> -> tensor<1x8x8x16xf32>
  return %p : tensor<1x8x8x16xf32>
}
