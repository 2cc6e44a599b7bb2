// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// tk.conv's element types: all f32, all f16 or all bf16 (the CPU runtime's runConv16).

func.func @mixed(%x: memref<1x4x8x8xbf16>, %w: memref<4x4x3x3xf32>, %y: memref<1x4x6x6xbf16>) {
  // expected-error @+1 {{'tk.conv' op operands must all be f32, all f16 or all bf16}}
  tk.conv %x, %w, %y {dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xbf16>, memref<4x4x3x3xf32>, memref<1x4x6x6xbf16>
  return
}

// -----

func.func @integers(%x: memref<1x4x8x8xi32>, %w: memref<4x4x3x3xi32>, %y: memref<1x4x6x6xi32>) {
  // expected-error @+1 {{'tk.conv' op operands must all be f32, all f16 or all bf16}}
  tk.conv %x, %w, %y {dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xi32>, memref<4x4x3x3xi32>, memref<1x4x6x6xi32>
  return
}

// -----

// Accepted: bf16 throughout.
func.func @bf16(%x: memref<1x4x8x8xbf16>, %w: memref<4x4x3x3xbf16>, %y: memref<1x4x6x6xbf16>) {
  tk.conv %x, %w, %y {dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xbf16>, memref<4x4x3x3xbf16>, memref<1x4x6x6xbf16>
  return
}
