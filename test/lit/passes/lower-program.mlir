// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels -split-input-file | FileCheck %s

// The program level: library calls with their epilogue kernels, views for reshapes, copies
// for outputs that are inputs, constants as private globals.

// A batched matmul by a 2-d weight (broadcast over the batch: a view with a batch dim of 1),
// scaled (the GEMM's alpha) and added to a residual: tk.gemm writes the output buffer, then the
// epilogue kernel updates it in place.
// CHECK-LABEL: func.func @k0_gemm_epilogue(
// CHECK-SAME:      %[[C:.*]]: memref<2x4x8xf32>, %[[RES:.*]]: memref<2x4x8xf32>) attributes {tk.kernel}
// CHECK:         tk.parallel [2, 4, 8] {
// CHECK:           %[[V:.*]] = tk.load %[[C]][
// CHECK:           %[[A:.*]] = tk.binary add %[[V]], %{{.*}} : f32
// CHECK:           tk.store %[[A]], %[[C]][
// CHECK:       func.func @gemm(%arg0: memref<2x4x16xf32>, %arg1: memref<16x8xf32>, %arg2: memref<2x4x8xf32>, %arg3: memref<2x4x8xf32>)
// CHECK-NEXT:    %[[W:.*]] = tk.view %arg1 : memref<16x8xf32> to memref<1x16x8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %[[W]], %arg3 {alpha = 5.000000e-01 : f64} : memref<2x4x16xf32>, memref<1x16x8xf32>, memref<2x4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3, %arg2)
// CHECK-NEXT:    return
func.func @gemm(%x: tensor<2x4x16xf32>, %w: tensor<16x8xf32>, %r: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %wb = tcc.broadcast_in_dim %w dims = [1, 2] : tensor<16x8xf32> -> tensor<2x16x8xf32>
  %y = tcc.matmul %x, %wb : tensor<2x4x16xf32>, tensor<2x16x8xf32> -> tensor<2x4x8xf32>
  %s = tcc.constant dense<0.5> : tensor<2x4x8xf32>
  %z = tcc.binary mul %y, %s : tensor<2x4x8xf32>
  %o = tcc.binary add %z, %r : tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Reshapes are views: of an input (then copied to its output), and of an output (the kernel
// producing the reshaped value writes straight into the output through the view). An output
// that is an input is a copy; a constant is a private global.
// CHECK:       memref.global "private" constant @__tcc_constant_0 : memref<1x6xf32> = dense<{{.*}}> {alignment = 64 : i64}
// CHECK-LABEL: func.func @k0_mul(
// CHECK-LABEL: func.func @k1_sub(
// CHECK:       func.func @views(%arg0: memref<4x6xf32>, %arg1: memref<2x12xf32>, %arg2: memref<4x6xf32>, %arg3: memref<24xf32>, %arg4: memref<4x6xf32>)
// CHECK-SAME:      tk.num_inputs = 1 : i64
// CHECK-NEXT:    %[[O:.*]] = tk.view %arg1 : memref<2x12xf32> to memref<4x6xf32>
// CHECK-NEXT:    tk.launch @k0_mul(%arg0, %[[O]])
// CHECK-NEXT:    %[[G:.*]] = memref.get_global @__tcc_constant_0 : memref<1x6xf32>
// CHECK-NEXT:    tk.launch @k1_sub(%[[G]], %[[O]], %arg2)
// CHECK-NEXT:    %[[V:.*]] = tk.view %arg0 : memref<4x6xf32> to memref<24xf32>
// CHECK-NEXT:    tk.copy %[[V]], %arg3 : memref<24xf32>, memref<24xf32>
// CHECK-NEXT:    tk.copy %arg0, %arg4 : memref<4x6xf32>, memref<4x6xf32>
// CHECK-NEXT:    return
func.func @views(%x: tensor<4x6xf32>) -> (tensor<2x12xf32>, tensor<4x6xf32>, tensor<24xf32>, tensor<4x6xf32>) {
  %c = tcc.constant dense<2.0> : tensor<4x6xf32>
  %m = tcc.binary mul %x, %c : tensor<4x6xf32>
  %r = tcc.reshape %m : tensor<4x6xf32> -> tensor<2x12xf32>
  %w = tcc.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]> : tensor<1x6xf32>
  %wb = tcc.broadcast_in_dim %w dims = [0, 1] : tensor<1x6xf32> -> tensor<4x6xf32>
  %s = tcc.binary sub %m, %wb : tensor<4x6xf32>
  %flat = tcc.reshape %x : tensor<4x6xf32> -> tensor<24xf32>
  return %r, %s, %flat, %x : tensor<2x12xf32>, tensor<4x6xf32>, tensor<24xf32>, tensor<4x6xf32>
}

// -----

// topk is a library call; its indices output goes to a temporary when unused.
// CHECK-LABEL: func.func @topk(
// CHECK:         %[[I:.*]] = tk.alloc : memref<2x2xi64>
// CHECK-NEXT:    tk.topk %arg0, %arg1, %[[I]] {dim = 1 : i64, largest = true}
func.func @topk(%x: tensor<2x5xf32>) -> tensor<2x2xf32> {
  %v, %i = tcc.topk %x dim = 1 k = 2 {largest = true} : tensor<2x5xf32> -> tensor<2x2xf32>, tensor<2x2xi64>
  return %v : tensor<2x2xf32>
}

// -----

// A concat of more than 16 inputs whose inputs are contiguous slabs of the result (the steps of
// an unrolled recurrence): each input is materialised and copied into its slab (a view at its
// byte offset), instead of one kernel that loads every input for each element. The last input,
// computed by a kernel of its own, is one of them. Concats of few inputs stay in kernels.
// CHECK-LABEL: func.func @many_steps(
// CHECK:         tk.launch @k0_neg(%arg16, %[[NEG:.*]]) :
// CHECK-NEXT:    %[[V0:.*]] = tk.view %arg17 : memref<17x4xf32> to memref<1x4xf32>
// CHECK-NEXT:    tk.copy %arg0, %[[V0]] : memref<1x4xf32>, memref<1x4xf32>
// CHECK-NEXT:    %[[V1:.*]] = tk.view %arg17 {byte_offset = 16 : i64} : memref<17x4xf32> to memref<1x4xf32>
// CHECK-NEXT:    tk.copy %arg1, %[[V1]]
// CHECK:         %[[V16:.*]] = tk.view %arg17 {byte_offset = 256 : i64} : memref<17x4xf32> to memref<1x4xf32>
// CHECK-NEXT:    tk.copy %[[NEG]], %[[V16]]
// CHECK-NEXT:    tk.launch @k1_concat(%arg0, %arg1, %arg2, %arg18)
func.func @many_steps(%x0: tensor<1x4xf32>, %x1: tensor<1x4xf32>, %x2: tensor<1x4xf32>, %x3: tensor<1x4xf32>, %x4: tensor<1x4xf32>, %x5: tensor<1x4xf32>, %x6: tensor<1x4xf32>, %x7: tensor<1x4xf32>, %x8: tensor<1x4xf32>, %x9: tensor<1x4xf32>, %x10: tensor<1x4xf32>, %x11: tensor<1x4xf32>, %x12: tensor<1x4xf32>, %x13: tensor<1x4xf32>, %x14: tensor<1x4xf32>, %x15: tensor<1x4xf32>, %y: tensor<1x4xf32>) -> (tensor<17x4xf32>, tensor<3x4xf32>) {
  %x16 = tcc.unary neg %y : tensor<1x4xf32>
  %0 = tcc.concat %x0, %x1, %x2, %x3, %x4, %x5, %x6, %x7, %x8, %x9, %x10, %x11, %x12, %x13, %x14, %x15, %x16 axis = 0 : tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32> -> tensor<17x4xf32>
  %1 = tcc.concat %x0, %x1, %x2 axis = 0 : tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32> -> tensor<3x4xf32>
  return %0, %1 : tensor<17x4xf32>, tensor<3x4xf32>
}
