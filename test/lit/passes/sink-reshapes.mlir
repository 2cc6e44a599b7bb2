// RUN: tcc-opt %s -tcc-sink-reshapes -split-input-file | FileCheck %s
// RUN: tcc-opt %s -tcc-sink-reshapes -tcc-fuse -tcc-lower-to-kernels -split-input-file | FileCheck %s --check-prefix=CPU

// HF GPT-2's MLP: c_fc's product on [tokens, d] viewed as [1, tokens, d], then the tanh GELU
// (the importer's scalar constants, broadcast) and the view back to [tokens, d] for c_proj. The
// GELU moves onto the product itself, the two reshapes cancel, and on the CPU the GELU goes
// into the sgemm epilogue: no kernel is left.
// CHECK-LABEL: func.func @gpt2_mlp(
// CHECK-NOT:     tcc.reshape
// CHECK:         %[[Y:.*]] = tcc.matmul %arg0, %arg1 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK:         %[[C5:.*]] = tcc.constant dense<5.000000e-01> : tensor<f32>
// CHECK:         tcc.unary tanh %{{.*}} : tensor<4x8xf32>
// CHECK:         %[[HALF:.*]] = tcc.broadcast_in_dim %[[C5]] dims = [] : tensor<f32> -> tensor<4x8xf32>
// CHECK:         %[[HX:.*]] = tcc.binary mul %[[HALF]], %[[Y]] : tensor<4x8xf32>
// CHECK:         %[[G:.*]] = tcc.binary mul %[[HX]], %{{.*}} : tensor<4x8xf32>
// CHECK-NOT:     tcc.reshape
// CHECK:         tcc.matmul %[[G]], %arg2 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CPU-LABEL:   func.func @gpt2_mlp(
// CPU-NEXT:      %[[T:.*]] = tk.alloc : memref<4x8xf32>
// CPU-NEXT:      tk.gemm %arg0, %arg1, %[[T]] activation gelu_tanh : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CPU-NEXT:      tk.gemm %[[T]], %arg2, %arg3 : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
// CPU-NEXT:      return
func.func @gpt2_mlp(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %w2: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %v = tcc.reshape %y : tensor<4x8xf32> -> tensor<1x4x8xf32>
  %c0 = tcc.constant dense<0.5> : tensor<f32>
  %half = tcc.broadcast_in_dim %c0 dims = [] : tensor<f32> -> tensor<1x4x8xf32>
  %c1 = tcc.constant dense<1.0> : tensor<f32>
  %one = tcc.broadcast_in_dim %c1 dims = [] : tensor<f32> -> tensor<1x4x8xf32>
  %c2 = tcc.constant dense<0.7978845608028654> : tensor<f32>
  %s = tcc.broadcast_in_dim %c2 dims = [] : tensor<f32> -> tensor<1x4x8xf32>
  %k = tcc.constant dense<0.044715> : tensor<1x4x8xf32>
  %xx = tcc.binary mul %v, %v : tensor<1x4x8xf32>
  %xxx = tcc.binary mul %v, %xx : tensor<1x4x8xf32>
  %kx3 = tcc.binary mul %k, %xxx : tensor<1x4x8xf32>
  %sum = tcc.binary add %v, %kx3 : tensor<1x4x8xf32>
  %inner = tcc.binary mul %s, %sum : tensor<1x4x8xf32>
  %t = tcc.unary tanh %inner : tensor<1x4x8xf32>
  %onePlus = tcc.binary add %one, %t : tensor<1x4x8xf32>
  %hx = tcc.binary mul %half, %v : tensor<1x4x8xf32>
  %g = tcc.binary mul %hx, %onePlus : tensor<1x4x8xf32>
  %g2 = tcc.reshape %g : tensor<1x4x8xf32> -> tensor<4x8xf32>
  %z = tcc.matmul %g2, %w2 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// Compare, select and cast move too (a ReLU written as a select), the reshape after the last.
// CHECK-LABEL: func.func @select_cast(
// CHECK:         %[[Z:.*]] = tcc.constant dense<0.000000e+00> : tensor<6x4xf32>
// CHECK:         %[[C:.*]] = tcc.compare lt %[[Z]], %arg0 : tensor<6x4xf32>
// CHECK:         %[[Z2:.*]] = tcc.constant dense<0.000000e+00> : tensor<6x4xf32>
// CHECK:         %[[S:.*]] = tcc.select %[[C]], %arg0, %[[Z2]] : tensor<6x4xi1>, tensor<6x4xf32>
// CHECK:         %[[H:.*]] = tcc.cast %[[S]] : tensor<6x4xf32> -> tensor<6x4xf16>
// CHECK:         %[[R:.*]] = tcc.reshape %[[H]] : tensor<6x4xf16> -> tensor<2x3x4xf16>
// CHECK:         return %[[R]]
func.func @select_cast(%x: tensor<6x4xf32>) -> tensor<2x3x4xf16> {
  %v = tcc.reshape %x : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %zero = tcc.constant dense<0.0> : tensor<2x3x4xf32>
  %c = tcc.compare lt %zero, %v : tensor<2x3x4xf32>
  %s = tcc.select %c, %v, %zero : tensor<2x3x4xi1>, tensor<2x3x4xf32>
  %h = tcc.cast %s : tensor<2x3x4xf32> -> tensor<2x3x4xf16>
  return %h : tensor<2x3x4xf16>
}

// -----

// Left alone: a bias vector's broadcast (not a scalar), and reshapes of two different shapes.
// CHECK-LABEL: func.func @left_alone(
// CHECK:         %[[V:.*]] = tcc.reshape %arg0 : tensor<4x8xf32> -> tensor<1x4x8xf32>
// CHECK:         tcc.binary add %[[V]], %{{.*}} : tensor<1x4x8xf32>
// CHECK:         %[[U:.*]] = tcc.reshape %arg2 : tensor<32xf32> -> tensor<1x4x8xf32>
// CHECK:         tcc.binary mul %[[V]], %[[U]] : tensor<1x4x8xf32>
func.func @left_alone(%x: tensor<4x8xf32>, %bias: tensor<8xf32>, %u: tensor<32xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>) {
  %v = tcc.reshape %x : tensor<4x8xf32> -> tensor<1x4x8xf32>
  %b = tcc.broadcast_in_dim %bias dims = [2] : tensor<8xf32> -> tensor<1x4x8xf32>
  %a = tcc.binary add %v, %b : tensor<1x4x8xf32>
  %ur = tcc.reshape %u : tensor<32xf32> -> tensor<1x4x8xf32>
  %m = tcc.binary mul %v, %ur : tensor<1x4x8xf32>
  return %a, %m : tensor<1x4x8xf32>, tensor<1x4x8xf32>
}
