// RUN: tcc-opt %s | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// Ops written in the generic form are printed in the custom form, and the generic form printed
// back (enums are i32 properties, unit attributes are present or absent) reads in unchanged.

// CHECK-LABEL: func.func @generic(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>, %arg2: tensor<4xi64>, %arg3: tensor<i1>) -> (tensor<2x3xi1>, tensor<3x2xf32>, tensor<f32>, tensor<2x3xf32>, tensor<4xi64>)
// CHECK-NEXT: %0 = tcc.binary sub %arg0, %arg1 : tensor<2x3xf32>
// CHECK-NEXT: %1 = tcc.unary sigmoid %0 : tensor<2x3xf32>
// CHECK-NEXT: %2 = tcc.compare ge %1, %arg1 : tensor<2x3xf32>
// CHECK-NEXT: %3 = tcc.transpose %arg0 perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK-NEXT: %4 = tcc.gather %arg0[%arg2] axis = 1 : tensor<2x3xf32>, tensor<4xi64> -> tensor<2x4xf32>
// CHECK-NEXT: %5 = tcc.reduce max %4 dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
// CHECK-NEXT: %6 = tcc.cumsum %arg2 dim = 0 {reverse} : tensor<4xi64>
// CHECK-NEXT: %7 = tcc.iota dim = 1 : tensor<2x3xi64>
// CHECK-NEXT: %8 = tcc.scatter_elements add %arg0[%7], %arg0 axis = 1 : tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
// CHECK-NEXT: %9 = tcc.if %arg3 -> (tensor<4xi64>) {
// CHECK-NEXT:   tcc.yield %6 : tensor<4xi64>
// CHECK-NEXT: } else {
// CHECK-NEXT:   tcc.yield %arg2 : tensor<4xi64>
// CHECK-NEXT: }
// CHECK-NEXT: return %2, %3, %5, %8, %9 : tensor<2x3xi1>, tensor<3x2xf32>, tensor<f32>, tensor<2x3xf32>, tensor<4xi64>

// GENERIC-LABEL: "func.func"()
// GENERIC:      %0 = "tcc.binary"(%arg0, %arg1) <{kind = 1 : i32}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// GENERIC-NEXT: %1 = "tcc.unary"(%0) <{kind = 20 : i32}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
// GENERIC-NEXT: %2 = "tcc.compare"(%1, %arg1) <{kind = 5 : i32}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
// GENERIC-NEXT: %3 = "tcc.transpose"(%arg0) <{perm = array<i64: 1, 0>}> : (tensor<2x3xf32>) -> tensor<3x2xf32>
// GENERIC-NEXT: %4 = "tcc.gather"(%arg0, %arg2) <{axis = 1 : i64}> : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x4xf32>
// GENERIC-NEXT: %5 = "tcc.reduce"(%4) <{dims = array<i64: 0, 1>, kind = 2 : i32}> : (tensor<2x4xf32>) -> tensor<f32>
// GENERIC-NEXT: %6 = "tcc.cumsum"(%arg2) <{dim = 0 : i64, reverse}> : (tensor<4xi64>) -> tensor<4xi64>
// GENERIC-NEXT: %7 = "tcc.iota"() <{dim = 1 : i64}> : () -> tensor<2x3xi64>
// GENERIC-NEXT: %8 = "tcc.scatter_elements"(%arg0, %7, %arg0) <{axis = 1 : i64, reduction = 1 : i32}> : (tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
// GENERIC-NEXT: %9 = "tcc.if"(%arg3) ({
// GENERIC-NEXT:   "tcc.yield"(%6) : (tensor<4xi64>) -> ()
// GENERIC-NEXT: }, {
// GENERIC-NEXT:   "tcc.yield"(%arg2) : (tensor<4xi64>) -> ()
// GENERIC-NEXT: }) : (tensor<i1>) -> tensor<4xi64>
// GENERIC-NEXT: "func.return"(%2, %3, %5, %8, %9) : (tensor<2x3xi1>, tensor<3x2xf32>, tensor<f32>, tensor<2x3xf32>, tensor<4xi64>) -> ()
"func.func"() <{function_type = (tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xi64>, tensor<i1>) -> (tensor<2x3xi1>, tensor<3x2xf32>, tensor<f32>, tensor<2x3xf32>, tensor<4xi64>), sym_name = "generic"}> ({
^bb0(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %i: tensor<4xi64>, %c: tensor<i1>):
  %0 = "tcc.binary"(%a, %b) <{kind = 1 : i32}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "tcc.unary"(%0) <{kind = 20 : i32}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "tcc.compare"(%1, %b) <{kind = 5 : i32}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %3 = "tcc.transpose"(%a) <{perm = array<i64: 1, 0>}> : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %4 = "tcc.gather"(%a, %i) <{axis = 1 : i64}> : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x4xf32>
  %5 = "tcc.reduce"(%4) <{dims = array<i64: 0, 1>, kind = 2 : i32}> : (tensor<2x4xf32>) -> tensor<f32>
  %6 = "tcc.cumsum"(%i) <{dim = 0 : i64, reverse}> : (tensor<4xi64>) -> tensor<4xi64>
  %7 = "tcc.iota"() <{dim = 1 : i64}> : () -> tensor<2x3xi64>
  %8 = "tcc.scatter_elements"(%a, %7, %a) <{axis = 1 : i64, reduction = 1 : i32}> : (tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %9 = "tcc.if"(%c) ({
    "tcc.yield"(%6) : (tensor<4xi64>) -> ()
  }, {
    "tcc.yield"(%i) : (tensor<4xi64>) -> ()
  }) : (tensor<i1>) -> tensor<4xi64>
  "func.return"(%2, %3, %5, %8, %9) : (tensor<2x3xi1>, tensor<3x2xf32>, tensor<f32>, tensor<2x3xf32>, tensor<4xi64>) -> ()
}) : () -> ()
