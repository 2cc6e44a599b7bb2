// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels -split-input-file -verify-diagnostics | FileCheck %s

// Symbolic dims through fusion and the kernel lowering: buffers keep their #tcc.dims, loops
// over symbolic dims are bounded by tk.size values made at the kernel's entry, index maps take
// sizes as symbols, and each kernel over symbolic buffers takes the program's symbol values.

// A softmax over rows of a [batch, seq, 16] tensor after a reshape from [batch*seq, 16].
// CHECK: #map = affine_map<(d0, d1)[s0] -> (d1 + d0 * s0)>
// CHECK-LABEL: func.func @k0_reduce_sum(
// CHECK-SAME:      %{{.*}}: memref<?x16xf32, #tcc.dims<["batch*seq"]>>, %{{.*}}: memref<?x?x16xf32, #tcc.dims<["batch", "seq"]>>, %{{.*}}: memref<2xi64> {tk.symbols}) attributes {tk.kernel}
// CHECK-DAG:     %[[B:.*]] = tk.size "batch"
// CHECK-DAG:     %[[S:.*]] = tk.size "seq"
// CHECK:         tk.parallel [%[[B]], %[[S]]] {
// CHECK:           tk.apply #map(
// CHECK:           tk.reduce max [16]
// CHECK:       func.func @softmax(
// CHECK:         %[[SYMS:.*]] = tk.symbol_values : memref<2xi64>
// CHECK:         tk.launch @k0_reduce_sum(%arg0, %arg1, %[[SYMS]])
module attributes {tcc.symbols = {batch = array<i64: 1, 8>, seq = array<i64: 1, 512>}} {
func.func @softmax(%x: tensor<?x16xf32, #tcc.dims<["batch*seq"]>>) -> tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>> {
  %r = tcc.reshape %x : tensor<?x16xf32, #tcc.dims<["batch*seq"]>> -> tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>>
  %m = tcc.reduce max %r dims = [2] : tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>> -> tensor<?x?xf32, #tcc.dims<["batch", "seq"]>>
  %mb = tcc.broadcast_in_dim %m dims = [0, 1] : tensor<?x?xf32, #tcc.dims<["batch", "seq"]>> -> tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>>
  %d = tcc.binary sub %r, %mb : tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>>
  %e = tcc.unary exp %d : tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>>
  %s = tcc.reduce sum %e dims = [2] : tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>> -> tensor<?x?xf32, #tcc.dims<["batch", "seq"]>>
  %sb = tcc.broadcast_in_dim %s dims = [0, 1] : tensor<?x?xf32, #tcc.dims<["batch", "seq"]>> -> tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>>
  %y = tcc.binary div %e, %sb : tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>>
  return %y : tensor<?x?x16xf32, #tcc.dims<["batch", "seq"]>>
}
}

// -----

// A reduction over a symbolic dim: its bound is a tk.size value; the matmul is a library call
// on the symbolic buffers.
// CHECK-LABEL: func.func @k0_reduce_sum(
// CHECK:         %[[S:.*]] = tk.size "seq"
// CHECK:         tk.reduce sum [%[[S]]]
// CHECK:       func.func @pool_project(
// CHECK:         tk.gemm %{{.*}} : memref<?x?x8xf32, #tcc.dims<["batch", "seq"]>>, memref<1x8x4xf32>, memref<?x?x4xf32, #tcc.dims<["batch", "seq"]>>
module attributes {tcc.symbols = {batch = array<i64: 1, 8>, seq = array<i64: 1, 512>}} {
func.func @pool_project(%x: tensor<?x?x8xf32, #tcc.dims<["batch", "seq"]>>, %w: tensor<8x4xf32>) -> (tensor<?x8xf32, #tcc.dims<["batch"]>>, tensor<?x?x4xf32, #tcc.dims<["batch", "seq"]>>) {
  %s = tcc.reduce sum %x dims = [1] : tensor<?x?x8xf32, #tcc.dims<["batch", "seq"]>> -> tensor<?x8xf32, #tcc.dims<["batch"]>>
  %wb = tcc.broadcast_in_dim %w dims = [1, 2] : tensor<8x4xf32> -> tensor<?x8x4xf32, #tcc.dims<["batch"]>>
  %p = tcc.matmul %x, %wb : tensor<?x?x8xf32, #tcc.dims<["batch", "seq"]>>, tensor<?x8x4xf32, #tcc.dims<["batch"]>> -> tensor<?x?x4xf32, #tcc.dims<["batch", "seq"]>>
  return %s, %p : tensor<?x8xf32, #tcc.dims<["batch"]>>, tensor<?x?x4xf32, #tcc.dims<["batch", "seq"]>>
}
}

// -----

// Pads of symbolic dims compare and clamp against the run's size (tk.size); a concat along a
// symbolic axis is one loop per input, each as long as its input (past, seq), the second
// storing from offset past.
// CHECK-LABEL: func.func @k0_pad(
// CHECK:         %[[S:.*]] = tk.size "seq"
// CHECK:         tk.compare lt %{{.*}}, %[[S]] : index
// CHECK-LABEL: func.func @k1_pad(
// CHECK:         %[[S:.*]] = tk.size "seq"
// CHECK:         tk.binary min
// CHECK-LABEL: func.func @k2_concat(
// CHECK:         %[[Q:.*]] = tk.size "seq"
// CHECK:         %[[P:.*]] = tk.size "past"
// CHECK:         tk.parallel [%[[P]], 8]
// CHECK-NOT:     tk.select
// CHECK:         tk.store
// CHECK:         tk.parallel [%[[Q]], 8]
// CHECK:           %[[AT:.*]] = tk.apply #{{.*}}(%{{.*}}, %[[P]])
// CHECK:           tk.store %{{.*}}, %{{.*}}[%[[AT]], %{{.*}}]
module attributes {tcc.symbols = {past = array<i64: 1, 64>, seq = array<i64: 3, 512>}} {
func.func @padded(%x: tensor<?xf32, #tcc.dims<["seq"]>>, %p: tensor<?x8xf32, #tcc.dims<["past"]>>, %t: tensor<?x8xf32, #tcc.dims<["seq"]>>) -> (tensor<?xf32, #tcc.dims<["seq + 2"]>>, tensor<?xf32, #tcc.dims<["seq + 4"]>>, tensor<?x8xf32, #tcc.dims<["past + seq"]>>) {
  %z = tcc.constant dense<0.0> : tensor<f32>
  %a = tcc.pad constant %x, %z low = [1] high = [1] : tensor<?xf32, #tcc.dims<["seq"]>>, tensor<f32> -> tensor<?xf32, #tcc.dims<["seq + 2"]>>
  %b = tcc.pad reflect %x, %z low = [2] high = [2] : tensor<?xf32, #tcc.dims<["seq"]>>, tensor<f32> -> tensor<?xf32, #tcc.dims<["seq + 4"]>>
  %c = tcc.concat %p, %t axis = 0 : tensor<?x8xf32, #tcc.dims<["past"]>>, tensor<?x8xf32, #tcc.dims<["seq"]>> -> tensor<?x8xf32, #tcc.dims<["past + seq"]>>
  return %a, %b, %c : tensor<?xf32, #tcc.dims<["seq + 2"]>>, tensor<?xf32, #tcc.dims<["seq + 4"]>>, tensor<?x8xf32, #tcc.dims<["past + seq"]>>
}
}

// -----

// Reflect padding by 2 needs the dim larger than 2 at every size in the ranges.
module attributes {tcc.symbols = {seq = array<i64: 1, 512>}} {
func.func @reflect_short(%x: tensor<?xf32, #tcc.dims<["seq"]>>) -> tensor<?xf32, #tcc.dims<["seq + 4"]>> {
  %z = tcc.constant dense<0.0> : tensor<f32>
  // expected-error @+1 {{has a padded dim of symbolic size seq, which may be below 3 at a size in the compiled ranges (declare ranges that keep it at least 3)}}
  %b = tcc.pad reflect %x, %z low = [2] high = [2] : tensor<?xf32, #tcc.dims<["seq"]>>, tensor<f32> -> tensor<?xf32, #tcc.dims<["seq + 4"]>>
  return %b : tensor<?xf32, #tcc.dims<["seq + 4"]>>
}
}

// -----

// A concat input whose symbolic length may be 0 has nothing to clamp a read into: reported.
module attributes {tcc.symbols = {seq = array<i64: 1, 512>}} {
func.func @maybe_empty(%x: tensor<?xf32, #tcc.dims<["seq"]>>, %y: tensor<?xf32, #tcc.dims<["seq - 1"]>>) -> tensor<?xf32, #tcc.dims<["2*seq - 1"]>> {
  // expected-error @+1 {{has an input of symbolic size seq - 1, which may be below 1 at a size in the compiled ranges}}
  %c = tcc.concat %x, %y axis = 0 : tensor<?xf32, #tcc.dims<["seq"]>>, tensor<?xf32, #tcc.dims<["seq - 1"]>> -> tensor<?xf32, #tcc.dims<["2*seq - 1"]>>
  return %c : tensor<?xf32, #tcc.dims<["2*seq - 1"]>>
}
}

// -----

// A convolution kernel (f64: no library call) over symbolic spatial dims bounds its padded
// reads by the run's sizes.
// CHECK-LABEL: func.func @k0_conv(
// CHECK-DAG:     %[[H:.*]] = tk.size "h"
// CHECK:         tk.reduce sum [3, 3, 3]
// CHECK:           tk.compare lt %{{.*}}, %[[H]] : index
module attributes {tcc.symbols = {h = array<i64: 4, 64>, w = array<i64: 4, 64>}} {
func.func @conv(%x: tensor<1x3x?x?xf64, #tcc.dims<["h", "w"]>>, %w: tensor<2x3x3x3xf64>) -> tensor<1x2x?x?xf64, #tcc.dims<["h", "w"]>> {
  %y = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x?x?xf64, #tcc.dims<["h", "w"]>>, tensor<2x3x3x3xf64> -> tensor<1x2x?x?xf64, #tcc.dims<["h", "w"]>>
  return %y : tensor<1x2x?x?xf64, #tcc.dims<["h", "w"]>>
}
}

// -----

// A cumulative sum along a symbolic dim is a sequential tk.for of the run's length.
// CHECK-LABEL: func.func @k0_cumsum(
// CHECK:         %[[S:.*]] = tk.size "seq"
// CHECK:         tk.parallel [4] {
// CHECK:           tk.for %[[S]] iter_args
module attributes {tcc.symbols = {seq = array<i64: 1, 512>}} {
func.func @prefix_sum(%x: tensor<4x?xf32, #tcc.dims<["seq"]>>) -> tensor<4x?xf32, #tcc.dims<["seq"]>> {
  %c = tcc.cumsum %x dim = 1 : tensor<4x?xf32, #tcc.dims<["seq"]>>
  return %c : tensor<4x?xf32, #tcc.dims<["seq"]>>
}
}

// -----

// An arg-max along a symbolic dim: tk.arg_reduce with the run's bound.
// CHECK-LABEL: func.func @k0_arg_reduce(
// CHECK:         %[[S:.*]] = tk.size "seq"
// CHECK:         tk.arg_reduce max %[[S]] {
module attributes {tcc.symbols = {seq = array<i64: 1, 512>}} {
func.func @arg_max(%x: tensor<4x?xf32, #tcc.dims<["seq"]>>) -> tensor<4xi64> {
  %c = tcc.arg_reduce %x dim = 1 {is_max = true} : tensor<4x?xf32, #tcc.dims<["seq"]>> -> tensor<4xi64>
  return %c : tensor<4xi64>
}
}

// -----

// An arg-max along a symbolic dim that may be empty has no answer: reported.
module attributes {tcc.symbols = {seq = array<i64: 1, 512>}} {
func.func @arg_max_maybe_empty(%x: tensor<4x?xf32, #tcc.dims<["seq - 1"]>>) -> tensor<4xi64> {
  // expected-error @+1 {{has a reduced dim of symbolic size seq - 1, which may be below 1}}
  %c = tcc.arg_reduce %x dim = 1 {is_max = true} : tensor<4x?xf32, #tcc.dims<["seq - 1"]>> -> tensor<4xi64>
  return %c : tensor<4xi64>
}
}

// -----

// A padded window reduction over symbolic spatial dims clamps its reads to the run's sizes;
// a tensor of size expressions (the importer's Shape of a symbolic tensor) is computed from
// the tk.size values.
// CHECK-LABEL: func.func @k0_reduce_window(
// CHECK-DAG:     %[[H:.*]] = tk.size "h"
// CHECK:         tk.reduce max [3, 1]
// CHECK:           tk.compare lt %{{.*}}, %[[H]] : index
// CHECK-LABEL: func.func @k1_sym_ints(
// CHECK:         %[[N:.*]] = tk.size "h"
// CHECK:         tk.cast %[[N]] : index to i64
module attributes {tcc.symbols = {h = array<i64: 2, 64>}} {
func.func @pool(%x: tensor<?x4xf32, #tcc.dims<["h"]>>) -> (tensor<?x4xf32, #tcc.dims<["h"]>>, tensor<i64>) {
  %y = tcc.reduce_window max %x {window = array<i64: 3, 1>, strides = array<i64: 1, 1>, pad_low = array<i64: 1, 0>, pad_high = array<i64: 1, 0>, dilations = array<i64: 1, 1>} : tensor<?x4xf32, #tcc.dims<["h"]>> -> tensor<?x4xf32, #tcc.dims<["h"]>>
  %n = tcc.sym_ints ["h"] : tensor<i64>
  return %y, %n : tensor<?x4xf32, #tcc.dims<["h"]>>, tensor<i64>
}
}

// -----

// A window of 4 rows at a run-time start in a symbolic dim: the start is clamped into
// [0, seq - 4]. Index tuples gather rows of a symbolic table.
// CHECK-LABEL: func.func @k0_dynamic_slice(
// CHECK:         %[[S:.*]] = tk.size "seq"
// CHECK:         tk.apply #{{.*}}(%[[S]])
// CHECK:         tk.binary min
// CHECK-LABEL: func.func @k1_gather_nd(
// CHECK:         %[[S:.*]] = tk.size "seq"
// CHECK:         tk.binary min
module attributes {tcc.symbols = {n = array<i64: 1, 16>, seq = array<i64: 4, 512>}} {
func.func @windows(%x: tensor<?x8xf32, #tcc.dims<["seq"]>>, %start: tensor<i64>, %idx: tensor<?x1xi64, #tcc.dims<["n"]>>) -> (tensor<4x8xf32>, tensor<?x8xf32, #tcc.dims<["n"]>>) {
  %zero = tcc.constant dense<0> : tensor<i64>
  %w = tcc.dynamic_slice %x[%start, %zero] sizes = [4, 8] : tensor<?x8xf32, #tcc.dims<["seq"]>>, tensor<i64>, tensor<i64> -> tensor<4x8xf32>
  %g = tcc.gather_nd %x[%idx] batch_dims = 0 : tensor<?x8xf32, #tcc.dims<["seq"]>>, tensor<?x1xi64, #tcc.dims<["n"]>> -> tensor<?x8xf32, #tcc.dims<["n"]>>
  return %w, %g : tensor<4x8xf32>, tensor<?x8xf32, #tcc.dims<["n"]>>
}
}

// -----

// The window does not fit every size in the ranges (seq may be 2).
module attributes {tcc.symbols = {seq = array<i64: 2, 512>}} {
func.func @window_too_long(%x: tensor<?x8xf32, #tcc.dims<["seq"]>>, %start: tensor<i64>) -> tensor<4x8xf32> {
  %zero = tcc.constant dense<0> : tensor<i64>
  // expected-error @+1 {{has a sliced dim of symbolic size seq, which may be below 4 at a size in the compiled ranges (declare ranges that keep it at least 4)}}
  %w = tcc.dynamic_slice %x[%start, %zero] sizes = [4, 8] : tensor<?x8xf32, #tcc.dims<["seq"]>>, tensor<i64>, tensor<i64> -> tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}
}

// -----

// Scatters over symbolic dims: the updates' symbolic count is a tk.for of the run's length,
// their indices wrap and clamp against the run's sizes.
// CHECK-LABEL: func.func @k0_scatter_elements(
// CHECK:         %[[S:.*]] = tk.size "seq"
// CHECK:         tk.parallel [%{{.*}}, 8] {
// CHECK:           tk.for %[[S]] {
module attributes {tcc.symbols = {b = array<i64: 1, 4>, seq = array<i64: 1, 64>}} {
func.func @scatter(%x: tensor<?x?x8xf32, #tcc.dims<["b", "seq"]>>, %i: tensor<?x?x8xi64, #tcc.dims<["b", "seq"]>>) -> tensor<?x?x8xf32, #tcc.dims<["b", "seq"]>> {
  %y = tcc.scatter_elements add %x[%i], %x axis = 1 : tensor<?x?x8xf32, #tcc.dims<["b", "seq"]>>, tensor<?x?x8xi64, #tcc.dims<["b", "seq"]>>, tensor<?x?x8xf32, #tcc.dims<["b", "seq"]>>
  return %y : tensor<?x?x8xf32, #tcc.dims<["b", "seq"]>>
}
}

// -----

// A cache write of `new` rows at a run-time position: the update must fit the cache at every
// size in the ranges (new may be 8 rows, the cache only 4).
module attributes {tcc.symbols = {cache = array<i64: 4, 64>, new = array<i64: 1, 8>}} {
func.func @cache_write(%c: tensor<?x8xf32, #tcc.dims<["cache"]>>, %u: tensor<?x8xf32, #tcc.dims<["new"]>>, %at: tensor<i64>) -> tensor<?x8xf32, #tcc.dims<["cache"]>> {
  %z = tcc.constant dense<0> : tensor<i64>
  // expected-error @+1 {{its update's dim 0 (new) may exceed the data's (cache) at a size in the compiled ranges}}
  %y = tcc.dynamic_update_slice %c, %u[%at, %z] : tensor<?x8xf32, #tcc.dims<["cache"]>>, tensor<?x8xf32, #tcc.dims<["new"]>>, tensor<i64>, tensor<i64>
  return %y : tensor<?x8xf32, #tcc.dims<["cache"]>>
}
}
