// RUN: tcc-opt %s -split-input-file -tcc-autodiff -verify-diagnostics

// Ops on the path from an argument to the loss that have no gradient are errors reported at the
// op (whose location names the ONNX node).

func.func @active_loop(%x: tensor<3xf32>) -> tensor<f32> {
  %n = tcc.constant dense<2> : tensor<i64>
  %c = tcc.constant dense<true> : tensor<i1>
  // expected-error @+1 {{'tcc.loop' op has no gradient: ops with regions (tcc.if, tcc.loop, tcc.fusion) are not differentiated}}
  %r = tcc.loop (%n, %c) inits(%x : tensor<3xf32>) -> (tensor<3xf32>) {
  ^bb0(%it: tensor<i64>, %cond: tensor<i1>, %v: tensor<3xf32>):
    %d = tcc.binary mul %v, %v : tensor<3xf32>
    tcc.yield %cond, %d : tensor<i1>, tensor<3xf32>
  }
  %s = tcc.reduce sum %r dims = [0] : tensor<3xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// An if whose regions only read the argument (no operand) is active too.
func.func @captured_by_if(%x: tensor<3xf32>, %p: tensor<i1>) -> tensor<f32> {
  // expected-error @+1 {{'tcc.if' op has no gradient}}
  %r = tcc.if %p -> (tensor<3xf32>) {
    %n = tcc.unary neg %x : tensor<3xf32>
    tcc.yield %n : tensor<3xf32>
  } else {
    tcc.yield %x : tensor<3xf32>
  }
  %s = tcc.reduce sum %r dims = [0] : tensor<3xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @scatter_max(%x: tensor<4xf32>, %u: tensor<2xf32>) -> tensor<f32> {
  %i = tcc.constant dense<[[1], [3]]> : tensor<2x1xi64>
  // expected-error @+1 {{'tcc.scatter_nd' op has no gradient: scatter_nd with a max reduction}}
  %0 = tcc.scatter_nd max %x[%i], %u : tensor<4xf32>, tensor<2x1xi64>, tensor<2xf32>
  %1 = tcc.reduce sum %0 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

func.func @scatter_elements_mul(%x: tensor<4xf32>, %u: tensor<2xf32>) -> tensor<f32> {
  %i = tcc.constant dense<[1, 3]> : tensor<2xi64>
  // expected-error @+1 {{'tcc.scatter_elements' op has no gradient: scatter_elements with a mul reduction}}
  %0 = tcc.scatter_elements mul %x[%i], %u axis = 0 : tensor<4xf32>, tensor<2xi64>, tensor<2xf32>
  %1 = tcc.reduce sum %0 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A loop the loss does not depend on through float values is not differentiated: no error.
func.func @inactive_loop(%x: tensor<3xf32>) -> tensor<f32> {
  %n = tcc.constant dense<2> : tensor<i64>
  %c = tcc.constant dense<true> : tensor<i1>
  %k = tcc.constant dense<1.0> : tensor<3xf32>
  %r = tcc.loop (%n, %c) inits(%k : tensor<3xf32>) -> (tensor<3xf32>) {
  ^bb0(%it: tensor<i64>, %cond: tensor<i1>, %v: tensor<3xf32>):
    %d = tcc.binary add %v, %v : tensor<3xf32>
    tcc.yield %cond, %d : tensor<i1>, tensor<3xf32>
  }
  %m = tcc.binary mul %r, %x : tensor<3xf32>
  %s = tcc.reduce sum %m dims = [0] : tensor<3xf32> -> tensor<f32>
  return %s : tensor<f32>
}
