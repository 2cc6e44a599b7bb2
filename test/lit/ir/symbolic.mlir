// RUN: tcc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Symbolic dims: `?` sized by the #tcc.dims encoding, over the module's tcc.symbols.

// CHECK-LABEL: func.func @encoder
// CHECK: tcc.matmul {{.*}} -> tensor<?x?x8xf32, #tcc.dims<["batch", "seq"]>>
// CHECK: tcc.reshape {{.*}} -> tensor<?x8xf32, #tcc.dims<["batch*seq"]>>
// CHECK: tcc.concat {{.*}} -> tensor<?x8xf32, #tcc.dims<["batch*seq + 1"]>>
// CHECK: tcc.slice {{.*}} limit = [-1, 4] {{.*}} -> tensor<?x2xf32, #tcc.dims<["batch*seq"]>>
// CHECK: tcc.sym_ints ["seq", "2*seq + 1"] : tensor<2xi64>
module attributes {tcc.symbols = {batch = array<i64: 1, 64>, seq = array<i64: 16, 512>}} {
func.func @encoder(%x: tensor<?x?x8xf32, #tcc.dims<["batch", "seq"]>>, %w: tensor<?x8x8xf32, #tcc.dims<["batch"]>>, %row: tensor<1x8xf32>) -> tensor<?x8xf32, #tcc.dims<["batch*seq + 1"]>> {
  %0 = tcc.matmul %x, %w : tensor<?x?x8xf32, #tcc.dims<["batch", "seq"]>>, tensor<?x8x8xf32, #tcc.dims<["batch"]>> -> tensor<?x?x8xf32, #tcc.dims<["batch", "seq"]>>
  %1 = tcc.reshape %0 : tensor<?x?x8xf32, #tcc.dims<["batch", "seq"]>> -> tensor<?x8xf32, #tcc.dims<["batch*seq"]>>
  %2 = tcc.concat %1, %row axis = 0 : tensor<?x8xf32, #tcc.dims<["batch*seq"]>>, tensor<1x8xf32> -> tensor<?x8xf32, #tcc.dims<["batch*seq + 1"]>>
  %s = tcc.reshape %x : tensor<?x?x8xf32, #tcc.dims<["batch", "seq"]>> -> tensor<?x8xf32, #tcc.dims<["batch*seq"]>>
  %4 = tcc.slice %s start = [0, 2] limit = [-1, 4] stride = [1, 1] : tensor<?x8xf32, #tcc.dims<["batch*seq"]>> -> tensor<?x2xf32, #tcc.dims<["batch*seq"]>>
  %3 = tcc.sym_ints ["seq", "2*seq + 1"] : tensor<2xi64>
  return %2 : tensor<?x8xf32, #tcc.dims<["batch*seq + 1"]>>
}
}

// -----

// A `?` needs its expression.
func.func @bare(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{operand #0 must be tensor with static or symbolic (#tcc.dims) dims}}
  %0 = tcc.unary exp %x : tensor<?x4xf32>
  return
}

// -----

// Expressions are canonical (so that equal dims make equal types).
func.func @noncanonical(%x: tensor<?x4xf32, #tcc.dims<["seq+1"]>>) {
  // expected-error @+1 {{operand #0 must be tensor with static or symbolic (#tcc.dims) dims}}
  %0 = tcc.unary exp %x : tensor<?x4xf32, #tcc.dims<["seq+1"]>>
  return
}

// -----

// Dims are compared as expressions: batch is not seq.
func.func @mismatch(%a: tensor<4x?xf32, #tcc.dims<["batch"]>>, %b: tensor<?x4xf32, #tcc.dims<["seq"]>>) {
  // expected-error @+2 {{matmul contraction dims differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tcc.matmul %a, %b : tensor<4x?xf32, #tcc.dims<["batch"]>>, tensor<?x4xf32, #tcc.dims<["seq"]>> -> tensor<4x4xf32>
  return
}

// -----

// Element counts compared symbolically; sizes past int64 are an error, not a wrap.
func.func @count(%x: tensor<?x4xf32, #tcc.dims<["seq"]>>) {
  // expected-error @+1 {{changes the element count from seq*4 to seq*8}}
  %0 = tcc.reshape %x : tensor<?x4xf32, #tcc.dims<["seq"]>> -> tensor<?x8xf32, #tcc.dims<["seq"]>>
  return
}

// -----

func.func @overflow(%x: tensor<4611686018427387904x4xf32>) {
  // expected-error @+1 {{sizes out of range: int64 overflow}}
  %0 = tcc.reshape %x : tensor<4611686018427387904x4xf32> -> tensor<2x4611686018427387904x2xf32>
  return
}

// -----

// A symbolic dim is sliced whole (limit -1) or not at all.
func.func @slice(%x: tensor<?x4xf32, #tcc.dims<["seq"]>>) {
  // expected-error @+2 {{symbolic dim 0 (seq) must be sliced whole (start 0, limit -1, stride 1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tcc.slice %x start = [0, 0] limit = [2, 4] stride = [1, 1] : tensor<?x4xf32, #tcc.dims<["seq"]>> -> tensor<2x4xf32>
  return
}

// -----

// expected-error @+1 {{size symbol 'seq' needs a range array<i64: MIN, MAX> with 0 <= MIN <= MAX}}
module attributes {tcc.symbols = {seq = array<i64: 8, 2>}} {
}

// -----

func.func @sym_ints() {
  // expected-error @+1 {{has 1 values for 2 elements}}
  %0 = tcc.sym_ints ["seq"] : tensor<2xi64>
  return
}
