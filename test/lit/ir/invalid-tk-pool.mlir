// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// tk.pool: f32, rank 4, max or sum, per-dim attributes, at most two adjacent pooled dims, the
// output shape reduce_window infers.

func.func @f64(%x: memref<1x2x8x8xf64>, %y: memref<1x2x4x4xf64>) {
  // expected-error @+1 {{'tk.pool' op input and output must be f32}}
  tk.pool max %x, %y {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 0, 0>, pad_low = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 2, 2>} : memref<1x2x8x8xf64>, memref<1x2x4x4xf64>
  return
}

// -----

func.func @kind(%x: memref<1x2x8x8xf32>, %y: memref<1x2x4x4xf32>) {
  // expected-error @+1 {{'tk.pool' op kind must be max or sum}}
  tk.pool min %x, %y {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 0, 0>, pad_low = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 2, 2>} : memref<1x2x8x8xf32>, memref<1x2x4x4xf32>
  return
}

// -----

func.func @three_dims(%x: memref<1x4x8x8xf32>, %y: memref<1x2x4x4xf32>) {
  // expected-error @+1 {{'tk.pool' op it pools at most two adjacent dims}}
  tk.pool max %x, %y {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 0, 0>, pad_low = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 2, 2, 2>, window = array<i64: 1, 2, 2, 2>} : memref<1x4x8x8xf32>, memref<1x2x4x4xf32>
  return
}

// -----

func.func @shape(%x: memref<1x2x8x8xf32>, %y: memref<1x2x4x3xf32>) {
  // expected-error @+1 {{'tk.pool' op output dim 3 must be 4}}
  tk.pool max %x, %y {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 0, 0>, pad_low = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 2, 2>} : memref<1x2x8x8xf32>, memref<1x2x4x3xf32>
  return
}

// -----

// Accepted: a channels-last 3x3 stride-2 padded sum pool.
func.func @nhwc(%x: memref<1x8x8x3xf32>, %y: memref<1x4x4x3xf32>) {
  tk.pool sum %x, %y {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 1, 1, 0>, pad_low = array<i64: 0, 1, 1, 0>, strides = array<i64: 1, 2, 2, 1>, window = array<i64: 1, 3, 3, 1>} : memref<1x8x8x3xf32>, memref<1x4x4x3xf32>
  return
}
