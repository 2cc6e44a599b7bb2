// RUN: tcc-opt -tcc-fuse %s | FileCheck %s

// A tcc.loop with scan results runs as many times as their leading dim says: -tcc-fuse unrolls
// it (iteration numbers become constants, scan elements are stacked with a concat) and fuses
// the copies like any other ops. No tcc.loop is left.

// CHECK-LABEL: func.func @scan_sum
// CHECK-NOT: tcc.loop
// CHECK: tcc.fusion
// CHECK: tcc.concat
func.func @scan_sum(%init: tensor<2xf32>, %xs: tensor<3x2xf32>) -> (tensor<2xf32>, tensor<3x2xf32>) {
  %n = tcc.constant dense<3> : tensor<i64>
  %t = tcc.constant dense<true> : tensor<i1>
  %r:2 = tcc.loop (%n, %t) inits(%init : tensor<2xf32>) -> (tensor<2xf32>, tensor<3x2xf32>) {
  ^bb0(%i: tensor<i64>, %c: tensor<i1>, %acc: tensor<2xf32>):
    %zero = tcc.constant dense<0> : tensor<i64>
    %row = tcc.dynamic_slice %xs[%i, %zero] sizes = [1, 2] : tensor<3x2xf32>, tensor<i64>, tensor<i64> -> tensor<1x2xf32>
    %v = tcc.reshape %row : tensor<1x2xf32> -> tensor<2xf32>
    %next = tcc.binary add %acc, %v : tensor<2xf32>
    tcc.yield %c, %next, %next : tensor<i1>, tensor<2xf32>, tensor<2xf32>
  }
  return %r#0, %r#1 : tensor<2xf32>, tensor<3x2xf32>
}
