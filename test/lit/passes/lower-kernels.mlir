// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels -split-input-file | FileCheck %s

// The kernel IR of fused groups: one tk.parallel over the output (or the rows), scalar ops
// mirroring the tcc ops, loads at composed affine indices, reductions as tk.reduce.

// A pointwise chain with a broadcast and a transpose: one kernel, the transpose and the
// broadcast are index remaps of the loads.
// CHECK-LABEL: func.func @k0_transpose(
// CHECK-SAME:      %[[Y:.*]]: memref<3xf32>, %[[X:.*]]: memref<2x3xf32>, %[[OUT:.*]]: memref<3x2xf32>) attributes {tk.kernel}
// CHECK:         tk.parallel [3, 2] {
// CHECK-NEXT:    ^bb0(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-DAG:       %[[YV:.*]] = tk.load %[[Y]][%[[I]]] : memref<3xf32>
// CHECK-DAG:       %[[XV:.*]] = tk.load %[[X]][%[[J]], %[[I]]] : memref<2x3xf32>
// CHECK:           %[[A:.*]] = tk.binary add %[[XV]], %[[YV]] : f32
// CHECK:           %[[E:.*]] = tk.unary exp %[[A]] : f32
// CHECK:           tk.store %[[E]], %[[OUT]][%[[I]], %[[J]]] : memref<3x2xf32>
// CHECK:       func.func @pointwise(%arg0: memref<2x3xf32>, %arg1: memref<3xf32>, %arg2: memref<3x2xf32>)
// CHECK-SAME:      tk.arg_names = ["input0", "input1", "output0"], tk.num_inputs = 2 : i64, tk.program
// CHECK-NEXT:    tk.launch @k0_transpose(%arg1, %arg0, %arg2)
// CHECK-NEXT:    return
func.func @pointwise(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<3x2xf32> {
  %yb = tcc.broadcast_in_dim %y dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %a = tcc.binary add %x, %yb : tensor<2x3xf32>
  %e = tcc.unary exp %a : tensor<2x3xf32>
  %t = tcc.transpose %e perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %t : tensor<3x2xf32>
}

// -----

// A softmax row kernel: the outer tk.parallel runs over the rows, the max and the sum are
// tk.reduce over the row, the normalised row is stored by a nested tk.parallel, reading the
// max and the sum computed once per row.
// CHECK-LABEL: func.func @k0_reduce_sum(
// CHECK-SAME:      %[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>) attributes {tk.kernel}
// CHECK:         tk.parallel [4] {
// CHECK-NEXT:    ^bb0(%[[R:.*]]: index):
// CHECK-NEXT:      %[[MAX:.*]] = tk.reduce max [8] {
// CHECK-NEXT:      ^bb0(%[[K:.*]]: index):
// CHECK-NEXT:        %[[V:.*]] = tk.load %[[X]][%[[R]], %[[K]]]
// CHECK-NEXT:        tk.yield %[[V]] : f32
// CHECK-NEXT:      } : f32
// CHECK-NEXT:      %[[SUM:.*]] = tk.reduce sum [8] {
// CHECK:             tk.binary sub %{{.*}}, %[[MAX]] : f32
// CHECK:             tk.unary exp
// CHECK:           } : f32
// CHECK-NEXT:      tk.parallel [8] {
// CHECK-NEXT:      ^bb0(%[[C:.*]]: index):
// CHECK:             tk.binary sub %{{.*}}, %[[MAX]] : f32
// CHECK:             %[[D:.*]] = tk.binary div %{{.*}}, %[[SUM]] : f32
// CHECK-NEXT:        tk.store %[[D]], %[[OUT]][%[[R]], %[[C]]] : memref<4x8xf32>
// CHECK:       func.func @softmax(
// CHECK-NEXT:    tk.launch @k0_reduce_sum(%arg0, %arg1)
// CHECK-NEXT:    return
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = tcc.reduce max %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %m1 = tcc.reshape %m : tensor<4xf32> -> tensor<4x1xf32>
  %mb = tcc.broadcast_in_dim %m1 dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
  %s = tcc.binary sub %x, %mb : tensor<4x8xf32>
  %e = tcc.unary exp %s : tensor<4x8xf32>
  %sum = tcc.reduce sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %s1 = tcc.reshape %sum : tensor<4xf32> -> tensor<4x1xf32>
  %sb = tcc.broadcast_in_dim %s1 dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
  %r = tcc.binary div %e, %sb : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Padding clamps the load index into bounds and selects the pad value outside.
// CHECK:       #[[MAP:.*]] = affine_map<(d0) -> (d0 - 1)>
// CHECK-LABEL: func.func @k0_pad(
// CHECK:         tk.parallel [6] {
// CHECK-NEXT:    ^bb0(%[[I:.*]]: index):
// CHECK:           %[[J:.*]] = tk.apply #[[MAP]](%[[I]])
// CHECK-DAG:       %[[GE:.*]] = tk.compare ge %[[J]], %{{.*}} : index
// CHECK-DAG:       %[[LT:.*]] = tk.compare lt %[[J]], %{{.*}} : index
// CHECK:           %[[IN:.*]] = tk.binary and %[[GE]], %[[LT]] : i1
// CHECK:           tk.binary max %[[J]], %{{.*}} : index
// CHECK:           %[[CL:.*]] = tk.binary min %{{.*}}, %{{.*}} : index
// CHECK:           %[[V:.*]] = tk.load %{{.*}}[%[[CL]]] : memref<4xf32>
// CHECK:           tk.select %[[IN]], %[[V]], %{{.*}} : f32
func.func @pad(%x: tensor<4xf32>) -> tensor<6xf32> {
  %z = tcc.constant dense<0.0> : tensor<f32>
  %p = tcc.pad constant %x, %z low = [1] high = [1] : tensor<4xf32>, tensor<f32> -> tensor<6xf32>
  return %p : tensor<6xf32>
}

// -----

// A concat computed in a kernel is one loop per input, each storing at its offset along the
// axis (here the outer one), with no select: each element computes its own input only. Along
// the innermost axis, inputs shorter than 16 keep the select chain (short inner loops would
// cost more).
// CHECK-LABEL: func.func @k0_concat(
// CHECK-NOT:     tk.select
// CHECK:         tk.parallel [2, 8]
// CHECK:           tk.unary exp
// CHECK:           tk.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}]
// CHECK:         tk.parallel [3, 8]
// CHECK:           tk.unary tanh
// CHECK:           %[[AT:.*]] = tk.apply #{{.*}}(%{{.*}})
// CHECK:           tk.store %{{.*}}, %{{.*}}[%[[AT]], %{{.*}}]
// CHECK-LABEL: func.func @k1_concat(
// CHECK:         tk.parallel [4, 8]
// CHECK:           tk.select
func.func @concats(%a: tensor<2x8xf32>, %b: tensor<3x8xf32>, %c: tensor<4x3xf32>, %d: tensor<4x5xf32>) -> (tensor<5x8xf32>, tensor<4x8xf32>) {
  %ea = tcc.unary exp %a : tensor<2x8xf32>
  %tb = tcc.unary tanh %b : tensor<3x8xf32>
  %r = tcc.concat %ea, %tb axis = 0 : tensor<2x8xf32>, tensor<3x8xf32> -> tensor<5x8xf32>
  %ec = tcc.unary exp %c : tensor<4x3xf32>
  %s = tcc.concat %ec, %d axis = 1 : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<4x8xf32>
  return %r, %s : tensor<5x8xf32>, tensor<4x8xf32>
}
