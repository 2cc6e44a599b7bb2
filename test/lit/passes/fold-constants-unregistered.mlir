// RUN: tcc-opt %s -allow-unregistered-dialect -tcc-fold-constants | FileCheck %s

// An unregistered op has no dialect: the pass must not crash on it.


// Ops of other (here unregistered) dialects are left alone, and tcc ops around them still fold.
// CHECK-LABEL: func.func @unregistered()
// CHECK-NEXT: %0 = tcc.constant dense<[1, 2]> : tensor<2xi32>
// CHECK-NEXT: %1 = "test.op"(%0) : (tensor<2xi32>) -> tensor<2xi32>
// CHECK-NEXT: %2 = tcc.constant dense<[2, 4]> : tensor<2xi32>
// CHECK-NEXT: %3 = tcc.binary add %1, %2 : tensor<2xi32>
// CHECK-NEXT: return %3 : tensor<2xi32>
func.func @unregistered() -> tensor<2xi32> {
  %a = tcc.constant dense<[1, 2]> : tensor<2xi32>
  %0 = "test.op"(%a) : (tensor<2xi32>) -> tensor<2xi32>
  %1 = tcc.binary add %a, %a : tensor<2xi32>
  %2 = tcc.binary add %0, %1 : tensor<2xi32>
  return %2 : tensor<2xi32>
}
