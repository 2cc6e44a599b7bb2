// RUN: tcc-opt %s -tcc-fold-constants | FileCheck %s
// RUN: tcc-opt %s -tcc-fold-constants=max-elements=4 | FileCheck %s --check-prefix=SMALL
// RUN: tcc-opt %s -tcc-fold-constants -canonicalize | FileCheck %s --check-prefix=CLEAN

// -tcc-fold-constants evaluates ops whose operands are all tcc.constant with the reference
// kernels and replaces them by constants. It does not erase the (now dead) operand constants:
// that is -canonicalize's job.

// CHECK-LABEL: func.func @add()
// CHECK-NEXT: %0 = tcc.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-NEXT: %1 = tcc.constant dense<[5.000000e-01, 2.500000e-01, -3.000000e+00, 1.000000e+01]> : tensor<4xf32>
// CHECK-NEXT: %2 = tcc.constant dense<[1.500000e+00, 2.250000e+00, 0.000000e+00, 1.400000e+01]> : tensor<4xf32>
// CHECK-NEXT: return %2 : tensor<4xf32>
func.func @add() -> tensor<4xf32> {
  %a = tcc.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = tcc.constant dense<[0.5, 0.25, -3.0, 10.0]> : tensor<4xf32>
  %0 = tcc.binary add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @transpose()
// CHECK-NEXT: %0 = tcc.constant dense<{{\[\[}}1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
// CHECK-NEXT: %1 = tcc.constant dense<{{\[\[}}1, 4], [2, 5], [3, 6]]> : tensor<3x2xi32>
// CHECK-NEXT: return %1 : tensor<3x2xi32>
func.func @transpose() -> tensor<3x2xi32> {
  %a = tcc.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %0 = tcc.transpose %a perm = [1, 0] : tensor<2x3xi32> -> tensor<3x2xi32>
  return %0 : tensor<3x2xi32>
}

// CHECK-LABEL: func.func @reduce()
// CHECK-NEXT: %0 = tcc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK-NEXT: %1 = tcc.constant dense<[6.000000e+00, 1.500000e+01]> : tensor<2xf32>
// CHECK-NEXT: %2 = tcc.constant dense<[4.000000e+00, 5.000000e+00, 6.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %1, %2 : tensor<2xf32>, tensor<3xf32>
func.func @reduce() -> (tensor<2xf32>, tensor<3xf32>) {
  %a = tcc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %0 = tcc.reduce sum %a dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
  %1 = tcc.reduce max %a dims = [0] : tensor<2x3xf32> -> tensor<3xf32>
  return %0, %1 : tensor<2xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @gather()
// CHECK-NEXT: %0 = tcc.constant dense<{{\[\[}}10, 11], [20, 21], [30, 31]]> : tensor<3x2xi64>
// CHECK-NEXT: %1 = tcc.constant dense<[2, 0, 2, 1]> : tensor<4xi32>
// CHECK-NEXT: %2 = tcc.constant dense<{{\[\[}}30, 31], [10, 11], [30, 31], [20, 21]]> : tensor<4x2xi64>
// CHECK-NEXT: return %2 : tensor<4x2xi64>
func.func @gather() -> tensor<4x2xi64> {
  %a = tcc.constant dense<[[10, 11], [20, 21], [30, 31]]> : tensor<3x2xi64>
  %i = tcc.constant dense<[2, 0, 2, 1]> : tensor<4xi32>
  %0 = tcc.gather %a[%i] axis = 0 : tensor<3x2xi64>, tensor<4xi32> -> tensor<4x2xi64>
  return %0 : tensor<4x2xi64>
}

// f32 -> i32 truncates toward zero; f32 -> f16 rounds to nearest.
// CHECK-LABEL: func.func @cast()
// CHECK-NEXT: %0 = tcc.constant dense<[1.900000e+00, -1.900000e+00, 5.000000e-01, -5.000000e-01, 2.500000e+00, 1.009900e+02]> : tensor<6xf32>
// CHECK-NEXT: %1 = tcc.constant dense<[1, -1, 0, 0, 2, 100]> : tensor<6xi32>
// CHECK-NEXT: %2 = tcc.constant dense<[1.000000e-01, 6.550400e+04]> : tensor<2xf32>
// CHECK-NEXT: %3 = tcc.constant dense<[9.997550e-02, 6.550400e+04]> : tensor<2xf16>
// CHECK-NEXT: return %1, %3 : tensor<6xi32>, tensor<2xf16>
func.func @cast() -> (tensor<6xi32>, tensor<2xf16>) {
  %a = tcc.constant dense<[1.9, -1.9, 0.5, -0.5, 2.5, 100.99]> : tensor<6xf32>
  %0 = tcc.cast %a : tensor<6xf32> -> tensor<6xi32>
  %b = tcc.constant dense<[0.1, 65504.0]> : tensor<2xf32>
  %1 = tcc.cast %b : tensor<2xf32> -> tensor<2xf16>
  return %0, %1 : tensor<6xi32>, tensor<2xf16>
}

// One walk folds a whole chain: mul, then transpose, then reduce.
// CHECK-LABEL: func.func @chain()
// CHECK-NEXT: %0 = tcc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: %1 = tcc.constant dense<2.000000e+00> : tensor<2x2xf32>
// CHECK-NEXT: %2 = tcc.constant dense<{{\[\[}}2.000000e+00, 4.000000e+00], [6.000000e+00, 8.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: %3 = tcc.constant dense<{{\[\[}}2.000000e+00, 6.000000e+00], [4.000000e+00, 8.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: %4 = tcc.constant dense<[4.000000e+00, 8.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %4 : tensor<2xf32>
// Followed by -canonicalize, only the result is left.
// CLEAN-LABEL: func.func @chain()
// CLEAN-NEXT: %0 = tcc.constant dense<[4.000000e+00, 8.000000e+00]> : tensor<2xf32>
// CLEAN-NEXT: return %0 : tensor<2xf32>
// CLEAN-NEXT: }
func.func @chain() -> tensor<2xf32> {
  %a = tcc.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = tcc.constant dense<2.0> : tensor<2x2xf32>
  %0 = tcc.binary mul %a, %b : tensor<2x2xf32>
  %1 = tcc.transpose %0 perm = [1, 0] : tensor<2x2xf32> -> tensor<2x2xf32>
  %2 = tcc.reduce max %1 dims = [0] : tensor<2x2xf32> -> tensor<2xf32>
  return %2 : tensor<2xf32>
}

// Element types keep their semantics: ui8 wraps, bf16 abs, compare gives i1. An op without
// operands (iota) and one with two results (topk) fold too.
// CHECK-LABEL: func.func @types()
// CHECK-NEXT: %0 = tcc.constant dense<[250, 10, 3]> : tensor<3xui8>
// CHECK-NEXT: %1 = tcc.constant dense<[10, 250, 3]> : tensor<3xui8>
// CHECK-NEXT: %2 = tcc.constant dense<[4, 4, 6]> : tensor<3xui8>
// CHECK-NEXT: %3 = tcc.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-NEXT: %4 = tcc.constant dense<[1.500000e+00, -2.250000e+00]> : tensor<2xbf16>
// CHECK-NEXT: %5 = tcc.constant dense<[1.500000e+00, 2.250000e+00]> : tensor<2xbf16>
// CHECK-NEXT: %6 = tcc.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<5xf32>
// CHECK-NEXT: %7 = tcc.constant dense<[4.000000e+00, 3.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: %8 = tcc.constant dense<[4, 3]> : tensor<2xi64>
// CHECK-NEXT: return %2, %3, %5, %7, %8 : tensor<3xui8>, tensor<3xi1>, tensor<2xbf16>, tensor<2xf32>, tensor<2xi64>
func.func @types() -> (tensor<3xui8>, tensor<3xi1>, tensor<2xbf16>, tensor<2xf32>, tensor<2xi64>) {
  %a = tcc.constant dense<[250, 10, 3]> : tensor<3xui8>
  %b = tcc.constant dense<[10, 250, 3]> : tensor<3xui8>
  %0 = tcc.binary add %a, %b : tensor<3xui8>
  %1 = tcc.compare gt %a, %b : tensor<3xui8>
  %c = tcc.constant dense<[1.5, -2.25]> : tensor<2xbf16>
  %2 = tcc.unary abs %c : tensor<2xbf16>
  %3 = tcc.iota dim = 0 : tensor<5xf32>
  %v, %i = tcc.topk %3 dim = 0 k = 2 {largest = true} : tensor<5xf32> -> tensor<2xf32>, tensor<2xi64>
  return %0, %1, %2, %v, %i : tensor<3xui8>, tensor<3xi1>, tensor<2xbf16>, tensor<2xf32>, tensor<2xi64>
}

// Ops with a non-constant operand stay, and so do their users; constant subexpressions next to
// them fold.
// CHECK-LABEL: func.func @non_constant(%arg0: tensor<4xf32>)
// CHECK-NEXT: %0 = tcc.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT: %1 = tcc.binary add %arg0, %0 : tensor<4xf32>
// CHECK-NEXT: %2 = tcc.constant dense<2.71828175> : tensor<4xf32>
// CHECK-NEXT: %3 = tcc.binary mul %1, %2 : tensor<4xf32>
// CHECK-NEXT: %4 = tcc.reduce sum %3 dims = [0] : tensor<4xf32> -> tensor<f32>
// CHECK-NEXT: return %4 : tensor<f32>
func.func @non_constant(%x: tensor<4xf32>) -> tensor<f32> {
  %a = tcc.constant dense<1.0> : tensor<4xf32>
  %0 = tcc.binary add %x, %a : tensor<4xf32>
  %1 = tcc.unary exp %a : tensor<4xf32>
  %2 = tcc.binary mul %0, %1 : tensor<4xf32>
  %3 = tcc.reduce sum %2 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %3 : tensor<f32>
}

// Ops with regions are not evaluated, even with a constant condition; ops inside regions are.
// CHECK-LABEL: func.func @regions()
// CHECK-NEXT: %0 = tcc.constant dense<true> : tensor<i1>
// CHECK-NEXT: %1 = tcc.constant dense<[1, 2]> : tensor<2xi64>
// CHECK-NEXT: %2 = tcc.if %0 -> (tensor<2xi64>) {
// CHECK-NEXT:   %3 = tcc.constant dense<[2, 4]> : tensor<2xi64>
// CHECK-NEXT:   tcc.yield %3 : tensor<2xi64>
// CHECK-NEXT: } else {
// CHECK-NEXT:   tcc.yield %1 : tensor<2xi64>
// CHECK-NEXT: }
// CHECK-NEXT: return %2 : tensor<2xi64>
func.func @regions() -> tensor<2xi64> {
  %c = tcc.constant dense<true> : tensor<i1>
  %a = tcc.constant dense<[1, 2]> : tensor<2xi64>
  %0 = tcc.if %c -> (tensor<2xi64>) {
    %1 = tcc.binary add %a, %a : tensor<2xi64>
    tcc.yield %1 : tensor<2xi64>
  } else {
    tcc.yield %a : tensor<2xi64>
  }
  return %0 : tensor<2xi64>
}

// An op whose evaluation fails (index out of range: kernels take indices in [0, dim)) is left
// alone rather than folded or reported.
// CHECK-LABEL: func.func @gather_out_of_range()
// CHECK-NEXT: %0 = tcc.constant dense<{{\[\[}}10, 11], [20, 21], [30, 31]]> : tensor<3x2xi64>
// CHECK-NEXT: %1 = tcc.constant dense<[1, 3]> : tensor<2xi64>
// CHECK-NEXT: %2 = tcc.gather %0[%1] axis = 0 : tensor<3x2xi64>, tensor<2xi64> -> tensor<2x2xi64>
// CHECK-NEXT: %3 = tcc.constant dense<-1> : tensor<1xi64>
// CHECK-NEXT: %4 = tcc.gather %0[%3] axis = 0 : tensor<3x2xi64>, tensor<1xi64> -> tensor<1x2xi64>
// CHECK-NEXT: %5 = tcc.reduce sum %2 dims = [0] : tensor<2x2xi64> -> tensor<2xi64>
// CHECK-NEXT: return %5, %4 : tensor<2xi64>, tensor<1x2xi64>
func.func @gather_out_of_range() -> (tensor<2xi64>, tensor<1x2xi64>) {
  %a = tcc.constant dense<[[10, 11], [20, 21], [30, 31]]> : tensor<3x2xi64>
  %i = tcc.constant dense<[1, 3]> : tensor<2xi64>
  %0 = tcc.gather %a[%i] axis = 0 : tensor<3x2xi64>, tensor<2xi64> -> tensor<2x2xi64>
  %j = tcc.constant dense<-1> : tensor<1xi64>
  %1 = tcc.gather %a[%j] axis = 0 : tensor<3x2xi64>, tensor<1xi64> -> tensor<1x2xi64>
  %2 = tcc.reduce sum %0 dims = [0] : tensor<2x2xi64> -> tensor<2xi64>
  return %2, %1 : tensor<2xi64>, tensor<1x2xi64>
}

// max-elements bounds the result size: with 4, the 8-element broadcast stays, and so does the
// reduce that uses it; the 4-element iota (at the limit) and the 0-d neg fold, the 5-element
// iota does not. By default everything folds.
// CHECK-LABEL: func.func @max_elements()
// CHECK-NEXT: %0 = tcc.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %1 = tcc.constant dense<1.000000e+00> : tensor<2x4xf32>
// CHECK-NEXT: %2 = tcc.constant dense<8.000000e+00> : tensor<f32>
// CHECK-NEXT: %3 = tcc.constant dense<-1.000000e+00> : tensor<f32>
// CHECK-NEXT: %4 = tcc.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
// CHECK-NEXT: %5 = tcc.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi32>
// CHECK-NEXT: return %2, %3, %4, %5 : tensor<f32>, tensor<f32>, tensor<4xi32>, tensor<5xi32>
// SMALL-LABEL: func.func @max_elements()
// SMALL-NEXT: %0 = tcc.constant dense<1.000000e+00> : tensor<f32>
// SMALL-NEXT: %1 = tcc.broadcast_in_dim %0 dims = [] : tensor<f32> -> tensor<2x4xf32>
// SMALL-NEXT: %2 = tcc.reduce sum %1 dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
// SMALL-NEXT: %3 = tcc.constant dense<-1.000000e+00> : tensor<f32>
// SMALL-NEXT: %4 = tcc.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
// SMALL-NEXT: %5 = tcc.iota dim = 0 : tensor<5xi32>
// SMALL-NEXT: return %2, %3, %4, %5 : tensor<f32>, tensor<f32>, tensor<4xi32>, tensor<5xi32>
func.func @max_elements() -> (tensor<f32>, tensor<f32>, tensor<4xi32>, tensor<5xi32>) {
  %a = tcc.constant dense<1.0> : tensor<f32>
  %0 = tcc.broadcast_in_dim %a dims = [] : tensor<f32> -> tensor<2x4xf32>
  %1 = tcc.reduce sum %0 dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  %2 = tcc.unary neg %a : tensor<f32>
  %3 = tcc.iota dim = 0 : tensor<4xi32>
  %4 = tcc.iota dim = 0 : tensor<5xi32>
  return %1, %2, %3, %4 : tensor<f32>, tensor<f32>, tensor<4xi32>, tensor<5xi32>
}

// Above max-elements, a transpose / reverse / reshape of a constant that has no other use still
// folds (it replaces that constant: no growth): the reverse, then the first transpose; the
// second transpose stays, its operand is also returned. (The constants left without uses go
// with the next canonicalization.)
// SMALL-LABEL: func.func @rearranged_weights()
// SMALL:      %[[T:.*]] = tcc.constant dense<{{\[\[}}1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>
// SMALL-NEXT: %[[R:.*]] = tcc.transpose %[[T]] perm = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
// SMALL-NEXT: return %[[R]], %[[T]] : tensor<2x3xf32>, tensor<3x2xf32>
func.func @rearranged_weights() -> (tensor<2x3xf32>, tensor<3x2xf32>) {
  %w = tcc.constant dense<[[3.0, 2.0, 1.0], [6.0, 5.0, 4.0]]> : tensor<2x3xf32>
  %0 = tcc.reverse %w dims = [1] : tensor<2x3xf32>
  %1 = tcc.transpose %0 perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %2 = tcc.transpose %1 perm = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
  return %2, %1 : tensor<2x3xf32>, tensor<3x2xf32>
}
