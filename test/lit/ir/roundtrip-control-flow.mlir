// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// Control flow: tcc.if, tcc.loop and their tcc.yield terminator.

// CHECK-LABEL: func.func @if_else(%arg0: tensor<i1>, %arg1: tensor<4xf32>, %arg2: tensor<2x2xi64>) -> (tensor<4xf32>, tensor<2x2xi64>)
// CHECK-NEXT: %0:2 = tcc.if %arg0 -> (tensor<4xf32>, tensor<2x2xi64>) {
// CHECK-NEXT:   %1 = tcc.unary neg %arg1 : tensor<4xf32>
// CHECK-NEXT:   tcc.yield %1, %arg2 : tensor<4xf32>, tensor<2x2xi64>
// CHECK-NEXT: } else {
// CHECK-NEXT:   %1 = tcc.constant dense<0> : tensor<2x2xi64>
// CHECK-NEXT:   tcc.yield %arg1, %1 : tensor<4xf32>, tensor<2x2xi64>
// CHECK-NEXT: }
// CHECK-NEXT: return %0#0, %0#1 : tensor<4xf32>, tensor<2x2xi64>
func.func @if_else(%c: tensor<i1>, %x: tensor<4xf32>, %y: tensor<2x2xi64>) -> (tensor<4xf32>, tensor<2x2xi64>) {
  %0:2 = tcc.if %c -> (tensor<4xf32>, tensor<2x2xi64>) {
    %1 = tcc.unary neg %x : tensor<4xf32>
    tcc.yield %1, %y : tensor<4xf32>, tensor<2x2xi64>
  } else {
    %2 = tcc.constant dense<0> : tensor<2x2xi64>
    tcc.yield %x, %2 : tensor<4xf32>, tensor<2x2xi64>
  }
  return %0#0, %0#1 : tensor<4xf32>, tensor<2x2xi64>
}

// An if without results, and nested ifs.
// CHECK-LABEL: func.func @if_nested(%arg0: tensor<i1>, %arg1: tensor<i1>, %arg2: tensor<f16>) -> tensor<f16>
// CHECK-NEXT: tcc.if %arg0 {
// CHECK-NEXT:   tcc.yield
// CHECK-NEXT: } else {
// CHECK-NEXT:   tcc.yield
// CHECK-NEXT: }
// CHECK-NEXT: %0 = tcc.if %arg0 -> (tensor<f16>) {
// CHECK-NEXT:   %1 = tcc.if %arg1 -> (tensor<f16>) {
// CHECK-NEXT:     tcc.yield %arg2 : tensor<f16>
// CHECK-NEXT:   } else {
// CHECK-NEXT:     %2 = tcc.unary exp %arg2 : tensor<f16>
// CHECK-NEXT:     tcc.yield %2 : tensor<f16>
// CHECK-NEXT:   }
// CHECK-NEXT:   tcc.yield %1 : tensor<f16>
// CHECK-NEXT: } else {
// CHECK-NEXT:   tcc.yield %arg2 : tensor<f16>
// CHECK-NEXT: }
// CHECK-NEXT: return %0 : tensor<f16>
func.func @if_nested(%c: tensor<i1>, %d: tensor<i1>, %x: tensor<f16>) -> tensor<f16> {
  tcc.if %c {
    tcc.yield
  } else {
    tcc.yield
  }
  %0 = tcc.if %c -> (tensor<f16>) {
    %1 = tcc.if %d -> (tensor<f16>) {
      tcc.yield %x : tensor<f16>
    } else {
      %2 = tcc.unary exp %x : tensor<f16>
      tcc.yield %2 : tensor<f16>
    }
    tcc.yield %1 : tensor<f16>
  } else {
    tcc.yield %x : tensor<f16>
  }
  return %0 : tensor<f16>
}

// A loop with two carried values and one scan output (stacked on a leading dim of 3
// iterations), and a loop with neither.
// CHECK-LABEL: func.func @loop(%arg0: tensor<i64>, %arg1: tensor<i1>, %arg2: tensor<4xf32>, %arg3: tensor<i64>) -> (tensor<4xf32>, tensor<i64>, tensor<3x4xf32>)
// CHECK-NEXT: %0:3 = tcc.loop(%arg0, %arg1) inits(%arg2, %arg3 : tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<i64>, tensor<3x4xf32>) {
// CHECK-NEXT: ^bb0(%arg4: tensor<i64>, %arg5: tensor<i1>, %arg6: tensor<4xf32>, %arg7: tensor<i64>):
// CHECK-NEXT:   %1 = tcc.binary add %arg6, %arg6 : tensor<4xf32>
// CHECK-NEXT:   %2 = tcc.binary add %arg7, %arg4 : tensor<i64>
// CHECK-NEXT:   %3 = tcc.compare lt %2, %arg0 : tensor<i64>
// CHECK-NEXT:   tcc.yield %3, %1, %2, %1 : tensor<i1>, tensor<4xf32>, tensor<i64>, tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: tcc.loop(%arg0, %arg1) {
// CHECK-NEXT: ^bb0(%arg4: tensor<i64>, %arg5: tensor<i1>):
// CHECK-NEXT:   tcc.yield %arg5 : tensor<i1>
// CHECK-NEXT: }
// CHECK-NEXT: return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<i64>, tensor<3x4xf32>
func.func @loop(%n: tensor<i64>, %c: tensor<i1>, %x: tensor<4xf32>, %s: tensor<i64>)
    -> (tensor<4xf32>, tensor<i64>, tensor<3x4xf32>) {
  %0:3 = tcc.loop (%n, %c) inits(%x, %s : tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<i64>, tensor<3x4xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<4xf32>, %sum: tensor<i64>):
    %1 = tcc.binary add %acc, %acc : tensor<4xf32>
    %2 = tcc.binary add %sum, %i : tensor<i64>
    %3 = tcc.compare lt %2, %n : tensor<i64>
    tcc.yield %3, %1, %2, %1 : tensor<i1>, tensor<4xf32>, tensor<i64>, tensor<4xf32>
  }
  tcc.loop (%n, %c) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>):
    tcc.yield %cond : tensor<i1>
  }
  return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<i64>, tensor<3x4xf32>
}

// A scan-only loop (no carried values) whose scan element is 0-d, and an if inside a loop body.
// CHECK-LABEL: func.func @loop_scan(%arg0: tensor<i64>, %arg1: tensor<i1>) -> tensor<5xi64>
// CHECK-NEXT: %0 = tcc.loop(%arg0, %arg1) -> (tensor<5xi64>) {
// CHECK-NEXT: ^bb0(%arg2: tensor<i64>, %arg3: tensor<i1>):
// CHECK-NEXT:   %1 = tcc.if %arg3 -> (tensor<i64>) {
// CHECK-NEXT:     tcc.yield %arg2 : tensor<i64>
// CHECK-NEXT:   } else {
// CHECK-NEXT:     tcc.yield %arg0 : tensor<i64>
// CHECK-NEXT:   }
// CHECK-NEXT:   tcc.yield %arg3, %1 : tensor<i1>, tensor<i64>
// CHECK-NEXT: }
// CHECK-NEXT: return %0 : tensor<5xi64>
func.func @loop_scan(%n: tensor<i64>, %c: tensor<i1>) -> tensor<5xi64> {
  %0 = tcc.loop (%n, %c) -> (tensor<5xi64>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>):
    %1 = tcc.if %cond -> (tensor<i64>) {
      tcc.yield %i : tensor<i64>
    } else {
      tcc.yield %n : tensor<i64>
    }
    tcc.yield %cond, %1 : tensor<i1>, tensor<i64>
  }
  return %0 : tensor<5xi64>
}
