// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// Layout ops: reshape, transpose, broadcast_in_dim, slice, reverse, concat, pad, iota,
// dynamic_slice and dynamic_update_slice. Result types written here are the ones the ops infer
// (or verify), so a change in inference makes this test fail to parse.

// CHECK-LABEL: func.func @reshape(%arg0: tensor<2x3x4xf32>, %arg1: tensor<i64>, %arg2: tensor<0x5xui8>)
// CHECK-NEXT: %0 = tcc.reshape %arg0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %1 = tcc.reshape %arg0 : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK-NEXT: %2 = tcc.reshape %arg1 : tensor<i64> -> tensor<1x1xi64>
// CHECK-NEXT: %3 = tcc.reshape %arg2 : tensor<0x5xui8> -> tensor<5x0x3xui8>
// CHECK-NEXT: return
func.func @reshape(%x: tensor<2x3x4xf32>, %s: tensor<i64>, %e: tensor<0x5xui8>) {
  %0 = tcc.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = tcc.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %2 = tcc.reshape %s : tensor<i64> -> tensor<1x1xi64>
  %3 = tcc.reshape %e : tensor<0x5xui8> -> tensor<5x0x3xui8>
  return
}

// CHECK-LABEL: func.func @transpose(%arg0: tensor<2x3x4xf16>, %arg1: tensor<f32>)
// CHECK-NEXT: %0 = tcc.transpose %arg0 perm = [2, 0, 1] : tensor<2x3x4xf16> -> tensor<4x2x3xf16>
// CHECK-NEXT: %1 = tcc.transpose %arg0 perm = [1, 0, 2] : tensor<2x3x4xf16> -> tensor<3x2x4xf16>
// CHECK-NEXT: %2 = tcc.transpose %arg0 perm = [0, 1, 2] : tensor<2x3x4xf16> -> tensor<2x3x4xf16>
// CHECK-NEXT: %3 = tcc.transpose %arg1 perm = [] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: return
func.func @transpose(%x: tensor<2x3x4xf16>, %s: tensor<f32>) {
  %0 = tcc.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf16> -> tensor<4x2x3xf16>
  %1 = tcc.transpose %x perm = [1, 0, 2] : tensor<2x3x4xf16> -> tensor<3x2x4xf16>
  %2 = tcc.transpose %x perm = [0, 1, 2] : tensor<2x3x4xf16> -> tensor<2x3x4xf16>
  %3 = tcc.transpose %s perm = [] : tensor<f32> -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @broadcast_in_dim(%arg0: tensor<3xf32>, %arg1: tensor<1x4xi64>, %arg2: tensor<i1>)
// CHECK-NEXT: %0 = tcc.broadcast_in_dim %arg0 dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %1 = tcc.broadcast_in_dim %arg1 dims = [0, 2] : tensor<1x4xi64> -> tensor<5x6x4xi64>
// CHECK-NEXT: %2 = tcc.broadcast_in_dim %arg2 dims = [] : tensor<i1> -> tensor<2x2xi1>
// CHECK-NEXT: return
func.func @broadcast_in_dim(%x: tensor<3xf32>, %y: tensor<1x4xi64>, %p: tensor<i1>) {
  %0 = tcc.broadcast_in_dim %x dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %1 = tcc.broadcast_in_dim %y dims = [0, 2] : tensor<1x4xi64> -> tensor<5x6x4xi64>
  %2 = tcc.broadcast_in_dim %p dims = [] : tensor<i1> -> tensor<2x2xi1>
  return
}

// Result size per dim is ceil((limit - start) / stride).
// CHECK-LABEL: func.func @slice(%arg0: tensor<8x6xbf16>)
// CHECK-NEXT: %0 = tcc.slice %arg0 start = [1, 0] limit = [7, 6] stride = [2, 1] : tensor<8x6xbf16> -> tensor<3x6xbf16>
// CHECK-NEXT: %1 = tcc.slice %arg0 start = [0, 1] limit = [8, 6] stride = [3, 4] : tensor<8x6xbf16> -> tensor<3x2xbf16>
// CHECK-NEXT: %2 = tcc.slice %arg0 start = [4, 6] limit = [4, 6] stride = [1, 1] : tensor<8x6xbf16> -> tensor<0x0xbf16>
// CHECK-NEXT: return
func.func @slice(%x: tensor<8x6xbf16>) {
  %0 = tcc.slice %x start = [1, 0] limit = [7, 6] stride = [2, 1] : tensor<8x6xbf16> -> tensor<3x6xbf16>
  %1 = tcc.slice %x start = [0, 1] limit = [8, 6] stride = [3, 4] : tensor<8x6xbf16> -> tensor<3x2xbf16>
  %2 = tcc.slice %x start = [4, 6] limit = [4, 6] stride = [1, 1] : tensor<8x6xbf16> -> tensor<0x0xbf16>
  return
}

// CHECK-LABEL: func.func @reverse(%arg0: tensor<2x3x4xi32>)
// CHECK-NEXT: %0 = tcc.reverse %arg0 dims = [0, 2] : tensor<2x3x4xi32>
// CHECK-NEXT: %1 = tcc.reverse %arg0 dims = [1] : tensor<2x3x4xi32>
// CHECK-NEXT: %2 = tcc.reverse %arg0 dims = [] : tensor<2x3x4xi32>
// CHECK-NEXT: return
func.func @reverse(%x: tensor<2x3x4xi32>) {
  %0 = tcc.reverse %x dims = [0, 2] : tensor<2x3x4xi32>
  %1 = tcc.reverse %x dims = [1] : tensor<2x3x4xi32>
  %2 = tcc.reverse %x dims = [] : tensor<2x3x4xi32>
  return
}

// CHECK-LABEL: func.func @concat(%arg0: tensor<2x3xf32>, %arg1: tensor<2x5xf32>, %arg2: tensor<4x3xf32>, %arg3: tensor<0x3xf32>)
// CHECK-NEXT: %0 = tcc.concat %arg0, %arg1 axis = 1 : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %1 = tcc.concat %arg0, %arg2, %arg3, %arg0 axis = 0 : tensor<2x3xf32>, tensor<4x3xf32>, tensor<0x3xf32>, tensor<2x3xf32> -> tensor<8x3xf32>
// CHECK-NEXT: %2 = tcc.concat %arg1 axis = 0 : tensor<2x5xf32> -> tensor<2x5xf32>
// CHECK-NEXT: return
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %c: tensor<4x3xf32>, %e: tensor<0x3xf32>) {
  %0 = tcc.concat %a, %b axis = 1 : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x8xf32>
  %1 = tcc.concat %a, %c, %e, %a axis = 0 : tensor<2x3xf32>, tensor<4x3xf32>, tensor<0x3xf32>, tensor<2x3xf32> -> tensor<8x3xf32>
  %2 = tcc.concat %b axis = 0 : tensor<2x5xf32> -> tensor<2x5xf32>
  return
}

// Every pad mode; reflect needs each padding to be smaller than its dim.
// CHECK-LABEL: func.func @pad(%arg0: tensor<1x3x4x4xf32>, %arg1: tensor<f32>, %arg2: tensor<5xi64>, %arg3: tensor<i64>)
// CHECK-NEXT: %0 = tcc.pad constant %arg0, %arg1 low = [0, 0, 1, 2] high = [0, 0, 1, 0] : tensor<1x3x4x4xf32>, tensor<f32> -> tensor<1x3x6x6xf32>
// CHECK-NEXT: %1 = tcc.pad reflect %arg0, %arg1 low = [0, 0, 3, 1] high = [0, 0, 2, 3] : tensor<1x3x4x4xf32>, tensor<f32> -> tensor<1x3x9x8xf32>
// CHECK-NEXT: %2 = tcc.pad edge %arg2, %arg3 low = [7] high = [0] : tensor<5xi64>, tensor<i64> -> tensor<12xi64>
// CHECK-NEXT: %3 = tcc.pad wrap %arg2, %arg3 low = [2] high = [9] : tensor<5xi64>, tensor<i64> -> tensor<16xi64>
// CHECK-NEXT: return
func.func @pad(%x: tensor<1x3x4x4xf32>, %v: tensor<f32>, %i: tensor<5xi64>, %z: tensor<i64>) {
  %0 = tcc.pad constant %x, %v low = [0, 0, 1, 2] high = [0, 0, 1, 0] : tensor<1x3x4x4xf32>, tensor<f32> -> tensor<1x3x6x6xf32>
  %1 = tcc.pad reflect %x, %v low = [0, 0, 3, 1] high = [0, 0, 2, 3] : tensor<1x3x4x4xf32>, tensor<f32> -> tensor<1x3x9x8xf32>
  %2 = tcc.pad edge %i, %z low = [7] high = [0] : tensor<5xi64>, tensor<i64> -> tensor<12xi64>
  %3 = tcc.pad wrap %i, %z low = [2] high = [9] : tensor<5xi64>, tensor<i64> -> tensor<16xi64>
  return
}

// CHECK-LABEL: func.func @iota()
// CHECK-NEXT: %0 = tcc.iota dim = 0 : tensor<8xi64>
// CHECK-NEXT: %1 = tcc.iota dim = 1 : tensor<2x3xf32>
// CHECK-NEXT: %2 = tcc.iota dim = 2 : tensor<2x3x4xui8>
// CHECK-NEXT: return %0, %1, %2 : tensor<8xi64>, tensor<2x3xf32>, tensor<2x3x4xui8>
func.func @iota() -> (tensor<8xi64>, tensor<2x3xf32>, tensor<2x3x4xui8>) {
  %0 = tcc.iota dim = 0 : tensor<8xi64>
  %1 = tcc.iota dim = 1 : tensor<2x3xf32>
  %2 = tcc.iota dim = 2 : tensor<2x3x4xui8>
  return %0, %1, %2 : tensor<8xi64>, tensor<2x3xf32>, tensor<2x3x4xui8>
}

// Start indices are 0-d i32 or i64 tensors, one per dim.
// CHECK-LABEL: func.func @dynamic_slice(%arg0: tensor<10x8xf16>, %arg1: tensor<i64>, %arg2: tensor<i32>)
// CHECK-NEXT: %0 = tcc.dynamic_slice %arg0[%arg1, %arg2] sizes = [3, 8] : tensor<10x8xf16>, tensor<i64>, tensor<i32> -> tensor<3x8xf16>
// CHECK-NEXT: %1 = tcc.dynamic_slice %arg0[%arg1, %arg1] sizes = [0, 1] : tensor<10x8xf16>, tensor<i64>, tensor<i64> -> tensor<0x1xf16>
// CHECK-NEXT: return
func.func @dynamic_slice(%x: tensor<10x8xf16>, %i: tensor<i64>, %j: tensor<i32>) {
  %0 = tcc.dynamic_slice %x[%i, %j] sizes = [3, 8] : tensor<10x8xf16>, tensor<i64>, tensor<i32> -> tensor<3x8xf16>
  %1 = tcc.dynamic_slice %x[%i, %i] sizes = [0, 1] : tensor<10x8xf16>, tensor<i64>, tensor<i64> -> tensor<0x1xf16>
  return
}

// CHECK-LABEL: func.func @dynamic_update_slice(%arg0: tensor<10x8xf32>, %arg1: tensor<3x8xf32>, %arg2: tensor<i64>, %arg3: tensor<i32>)
// CHECK-NEXT: %0 = tcc.dynamic_update_slice %arg0, %arg1[%arg2, %arg3] : tensor<10x8xf32>, tensor<3x8xf32>, tensor<i64>, tensor<i32>
// CHECK-NEXT: return %0 : tensor<10x8xf32>
func.func @dynamic_update_slice(%x: tensor<10x8xf32>, %u: tensor<3x8xf32>, %i: tensor<i64>, %j: tensor<i32>) -> tensor<10x8xf32> {
  %0 = tcc.dynamic_update_slice %x, %u[%i, %j] : tensor<10x8xf32>, tensor<3x8xf32>, tensor<i64>, tensor<i32>
  return %0 : tensor<10x8xf32>
}
