// RUN: tcc-opt %s -canonicalize | FileCheck %s

// The folders of lib/IR/TccOps.cpp, run by -canonicalize (which also merges equal constants,
// hoists constants to the start of the block, and erases unused pure ops).

// constant: equal constants are merged, unused ones erased.
// CHECK-LABEL: func.func @constants()
// CHECK-NEXT: %0 = tcc.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %0, %0 : tensor<2xf32>, tensor<2xf32>
// CHECK-NEXT: }
func.func @constants() -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = tcc.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %1 = tcc.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %2 = tcc.constant dense<[3.0, 4.0]> : tensor<2xf32>
  return %0, %1 : tensor<2xf32>, tensor<2xf32>
}

// binary: x + 0, x - 0, x * 1 and x / 1 with a splat right operand fold to x.
// CHECK-LABEL: func.func @binary_identities(%arg0: tensor<4xf32>, %arg1: tensor<2x3xi64>, %arg2: tensor<8xui8>, %arg3: tensor<3xbf16>)
// CHECK-NOT: tcc.binary
// CHECK-NOT: tcc.constant
// CHECK: return %arg0, %arg0, %arg0, %arg0, %arg1, %arg1, %arg1, %arg2, %arg3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<8xui8>, tensor<3xbf16>
// CHECK-NEXT: }
func.func @binary_identities(%x: tensor<4xf32>, %i: tensor<2x3xi64>, %u: tensor<8xui8>, %b: tensor<3xbf16>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<8xui8>, tensor<3xbf16>) {
  %zero = tcc.constant dense<0.0> : tensor<4xf32>
  %negzero = tcc.constant dense<-0.0> : tensor<4xf32>
  %one = tcc.constant dense<1.0> : tensor<4xf32>
  %izero = tcc.constant dense<0> : tensor<2x3xi64>
  %ione = tcc.constant dense<1> : tensor<2x3xi64>
  %uzero = tcc.constant dense<0> : tensor<8xui8>
  %bone = tcc.constant dense<1.0> : tensor<3xbf16>
  %0 = tcc.binary add %x, %negzero : tensor<4xf32>
  %1 = tcc.binary sub %x, %zero : tensor<4xf32>
  %2 = tcc.binary mul %x, %one : tensor<4xf32>
  %3 = tcc.binary div %x, %one : tensor<4xf32>
  %4 = tcc.binary add %i, %izero : tensor<2x3xi64>
  %5 = tcc.binary mul %i, %ione : tensor<2x3xi64>
  %6 = tcc.binary div %i, %ione : tensor<2x3xi64>
  %7 = tcc.binary sub %u, %uzero : tensor<8xui8>
  %8 = tcc.binary mul %b, %bone : tensor<3xbf16>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8
      : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<8xui8>, tensor<3xbf16>
}

// Not identities: 0 + x (the constant is on the left), x * 0, x + 1, a non-splat constant,
// x / 0, logical ops on i1, and pow.
// CHECK-LABEL: func.func @binary_kept(%arg0: tensor<4xf32>, %arg1: tensor<2x3xi64>, %arg2: tensor<3xi1>)
// CHECK-NEXT: %0 = tcc.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT: %1 = tcc.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT: %2 = tcc.constant dense<[0.000000e+00, 0.000000e+00, 0.000000e+00, 1.000000e+00]> : tensor<4xf32>
// CHECK-NEXT: %3 = tcc.constant dense<0> : tensor<2x3xi64>
// CHECK-NEXT: %4 = tcc.constant dense<false> : tensor<3xi1>
// CHECK-NEXT: %5 = tcc.binary add %0, %arg0 : tensor<4xf32>
// CHECK-NEXT: %6 = tcc.binary mul %arg0, %0 : tensor<4xf32>
// CHECK-NEXT: %7 = tcc.binary add %arg0, %1 : tensor<4xf32>
// CHECK-NEXT: %8 = tcc.binary add %arg0, %2 : tensor<4xf32>
// CHECK-NEXT: %9 = tcc.binary div %arg1, %3 : tensor<2x3xi64>
// CHECK-NEXT: %10 = tcc.binary or %arg2, %4 : tensor<3xi1>
// CHECK-NEXT: %11 = tcc.binary pow %arg0, %1 : tensor<4xf32>
// CHECK-NEXT: return %5, %6, %7, %8, %9, %10, %11 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xi64>, tensor<3xi1>, tensor<4xf32>
func.func @binary_kept(%x: tensor<4xf32>, %i: tensor<2x3xi64>, %p: tensor<3xi1>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xi64>, tensor<3xi1>, tensor<4xf32>) {
  %zero = tcc.constant dense<0.0> : tensor<4xf32>
  %one = tcc.constant dense<1.0> : tensor<4xf32>
  %mixed = tcc.constant dense<[0.0, 0.0, 0.0, 1.0]> : tensor<4xf32>
  %izero = tcc.constant dense<0> : tensor<2x3xi64>
  %false = tcc.constant dense<false> : tensor<3xi1>
  %0 = tcc.binary add %zero, %x : tensor<4xf32>
  %1 = tcc.binary mul %x, %zero : tensor<4xf32>
  %2 = tcc.binary add %x, %one : tensor<4xf32>
  %3 = tcc.binary add %x, %mixed : tensor<4xf32>
  %4 = tcc.binary div %i, %izero : tensor<2x3xi64>
  %5 = tcc.binary or %p, %false : tensor<3xi1>
  %6 = tcc.binary pow %x, %one : tensor<4xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xi64>, tensor<3xi1>, tensor<4xf32>
}

// cast to the same type folds; a real conversion stays.
// CHECK-LABEL: func.func @cast(%arg0: tensor<2x3xf32>)
// CHECK-NEXT: %0 = tcc.cast %arg0 : tensor<2x3xf32> -> tensor<2x3xf16>
// CHECK-NEXT: return %arg0, %0 : tensor<2x3xf32>, tensor<2x3xf16>
func.func @cast(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf16>) {
  %0 = tcc.cast %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = tcc.cast %x : tensor<2x3xf32> -> tensor<2x3xf16>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf16>
}

// reshape: to the same type folds; reshape(reshape(x)) becomes one reshape (or x when it is
// back to x's type); a constant is reshaped in place.
// CHECK-LABEL: func.func @reshape(%arg0: tensor<2x3x4xf32>)
// CHECK-NEXT: %0 = tcc.constant dense<{{\[\[}}1, 2], [3, 4], [5, 6]]> : tensor<3x2xi32>
// CHECK-NEXT: %1 = tcc.reshape %arg0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: return %arg0, %1, %arg0, %0 : tensor<2x3x4xf32>, tensor<6x4xf32>, tensor<2x3x4xf32>, tensor<3x2xi32>
func.func @reshape(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<6x4xf32>, tensor<2x3x4xf32>, tensor<3x2xi32>) {
  %0 = tcc.reshape %x : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %1 = tcc.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %2 = tcc.reshape %1 : tensor<24xf32> -> tensor<6x4xf32>
  %3 = tcc.reshape %x : tensor<2x3x4xf32> -> tensor<4x6xf32>
  %4 = tcc.reshape %3 : tensor<4x6xf32> -> tensor<2x3x4xf32>
  %c = tcc.constant dense<[1, 2, 3, 4, 5, 6]> : tensor<6xi32>
  %5 = tcc.reshape %c : tensor<6xi32> -> tensor<3x2xi32>
  return %0, %2, %4, %5 : tensor<2x3x4xf32>, tensor<6x4xf32>, tensor<2x3x4xf32>, tensor<3x2xi32>
}

// A reshape chain whose inner reshape has another use keeps it.
// CHECK-LABEL: func.func @reshape_shared(%arg0: tensor<2x3xf16>)
// CHECK-NEXT: %0 = tcc.reshape %arg0 : tensor<2x3xf16> -> tensor<6xf16>
// CHECK-NEXT: %1 = tcc.reshape %arg0 : tensor<2x3xf16> -> tensor<3x2xf16>
// CHECK-NEXT: return %0, %1 : tensor<6xf16>, tensor<3x2xf16>
func.func @reshape_shared(%x: tensor<2x3xf16>) -> (tensor<6xf16>, tensor<3x2xf16>) {
  %0 = tcc.reshape %x : tensor<2x3xf16> -> tensor<6xf16>
  %1 = tcc.reshape %0 : tensor<6xf16> -> tensor<3x2xf16>
  return %0, %1 : tensor<6xf16>, tensor<3x2xf16>
}

// transpose with the identity permutation folds.
// CHECK-LABEL: func.func @transpose(%arg0: tensor<2x3xf32>, %arg1: tensor<i64>)
// CHECK-NEXT: %0 = tcc.transpose %arg0 perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK-NEXT: return %arg0, %0, %arg1 : tensor<2x3xf32>, tensor<3x2xf32>, tensor<i64>
func.func @transpose(%x: tensor<2x3xf32>, %s: tensor<i64>) -> (tensor<2x3xf32>, tensor<3x2xf32>, tensor<i64>) {
  %0 = tcc.transpose %x perm = [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = tcc.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %2 = tcc.transpose %s perm = [] : tensor<i64> -> tensor<i64>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<3x2xf32>, tensor<i64>
}

// Transposing a 1x1 dims pair is a permutation but not the identity: it stays.
// CHECK-LABEL: func.func @transpose_unit_dims(%arg0: tensor<1x1xf32>)
// CHECK-NEXT: %0 = tcc.transpose %arg0 perm = [1, 0] : tensor<1x1xf32> -> tensor<1x1xf32>
// CHECK-NEXT: return %0 : tensor<1x1xf32>
func.func @transpose_unit_dims(%x: tensor<1x1xf32>) -> tensor<1x1xf32> {
  %0 = tcc.transpose %x perm = [1, 0] : tensor<1x1xf32> -> tensor<1x1xf32>
  return %0 : tensor<1x1xf32>
}

// broadcast_in_dim: to the same type folds; of a splat constant becomes a splat constant; of a
// non-splat constant stays.
// CHECK-LABEL: func.func @broadcast(%arg0: tensor<2x3xf32>)
// CHECK-NEXT: %0 = tcc.constant dense<true> : tensor<4x2xi1>
// CHECK-NEXT: %1 = tcc.constant dense<7> : tensor<2x3xi64>
// CHECK-NEXT: %2 = tcc.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK-NEXT: %3 = tcc.broadcast_in_dim %arg0 dims = [1, 2] : tensor<2x3xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: %4 = tcc.broadcast_in_dim %2 dims = [1] : tensor<3xi64> -> tensor<2x3xi64>
// CHECK-NEXT: return %arg0, %3, %1, %4, %0 : tensor<2x3xf32>, tensor<4x2x3xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<4x2xi1>
func.func @broadcast(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<4x2x3xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<4x2xi1>) {
  %0 = tcc.broadcast_in_dim %x dims = [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = tcc.broadcast_in_dim %x dims = [1, 2] : tensor<2x3xf32> -> tensor<4x2x3xf32>
  %s = tcc.constant dense<7> : tensor<1xi64>
  %2 = tcc.broadcast_in_dim %s dims = [1] : tensor<1xi64> -> tensor<2x3xi64>
  %n = tcc.constant dense<[1, 2, 3]> : tensor<3xi64>
  %3 = tcc.broadcast_in_dim %n dims = [1] : tensor<3xi64> -> tensor<2x3xi64>
  %t = tcc.constant dense<true> : tensor<i1>
  %4 = tcc.broadcast_in_dim %t dims = [] : tensor<i1> -> tensor<4x2xi1>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<4x2x3xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<4x2xi1>
}

// slice of the whole tensor with unit strides folds.
// CHECK-LABEL: func.func @slice(%arg0: tensor<8x6xf32>)
// CHECK-NEXT: %0 = tcc.slice %arg0 start = [1, 0] limit = [8, 6] stride = [1, 1] : tensor<8x6xf32> -> tensor<7x6xf32>
// CHECK-NEXT: %1 = tcc.slice %arg0 start = [0, 0] limit = [8, 6] stride = [2, 1] : tensor<8x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT: return %arg0, %0, %1 : tensor<8x6xf32>, tensor<7x6xf32>, tensor<4x6xf32>
func.func @slice(%x: tensor<8x6xf32>) -> (tensor<8x6xf32>, tensor<7x6xf32>, tensor<4x6xf32>) {
  %0 = tcc.slice %x start = [0, 0] limit = [8, 6] stride = [1, 1] : tensor<8x6xf32> -> tensor<8x6xf32>
  %1 = tcc.slice %x start = [1, 0] limit = [8, 6] stride = [1, 1] : tensor<8x6xf32> -> tensor<7x6xf32>
  %2 = tcc.slice %x start = [0, 0] limit = [8, 6] stride = [2, 1] : tensor<8x6xf32> -> tensor<4x6xf32>
  return %0, %1, %2 : tensor<8x6xf32>, tensor<7x6xf32>, tensor<4x6xf32>
}

// concat of a single input folds.
// CHECK-LABEL: func.func @concat(%arg0: tensor<2x3xf32>)
// CHECK-NEXT: %0 = tcc.concat %arg0, %arg0 axis = 0 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT: return %arg0, %0 : tensor<2x3xf32>, tensor<4x3xf32>
func.func @concat(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<4x3xf32>) {
  %0 = tcc.concat %x axis = 0 : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = tcc.concat %x, %x axis = 0 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<4x3xf32>
}

// Folds compose: cast(x) to the same type, then reshape to the same shape, then a transpose
// with the identity permutation, then + 0: all gone.
// CHECK-LABEL: func.func @compose(%arg0: tensor<4x4xf16>)
// CHECK-NEXT: return %arg0 : tensor<4x4xf16>
// CHECK-NEXT: }
func.func @compose(%x: tensor<4x4xf16>) -> tensor<4x4xf16> {
  %zero = tcc.constant dense<0.0> : tensor<4x4xf16>
  %0 = tcc.cast %x : tensor<4x4xf16> -> tensor<4x4xf16>
  %1 = tcc.reshape %0 : tensor<4x4xf16> -> tensor<16xf16>
  %2 = tcc.reshape %1 : tensor<16xf16> -> tensor<4x4xf16>
  %3 = tcc.transpose %2 perm = [0, 1] : tensor<4x4xf16> -> tensor<4x4xf16>
  %4 = tcc.binary sub %3, %zero : tensor<4x4xf16>
  return %4 : tensor<4x4xf16>
}

// Unused pure ops are erased.
// CHECK-LABEL: func.func @dead(%arg0: tensor<2x3xf32>)
// CHECK-NEXT: return %arg0 : tensor<2x3xf32>
// CHECK-NEXT: }
func.func @dead(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = tcc.unary exp %x : tensor<2x3xf32>
  %1 = tcc.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %x : tensor<2x3xf32>
}
