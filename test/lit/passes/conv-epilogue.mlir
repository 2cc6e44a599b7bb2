// RUN: tcc-opt %s -tcc-fold-conv-affine -tcc-fuse -tcc-lower-to-kernels -split-input-file | FileCheck %s
// RUN: tcc-opt %s -tcc-fold-conv-affine -tcc-fuse -tcc-lower-to-kernels=target=cuda -split-input-file | FileCheck %s --check-prefix=CUDA

// Convolution epilogues (GemmEpilogue.h, ConvEpilogue): on the CPU, a per-channel bias, a
// residual and a clamp are tk.conv's own, applied as the library writes its output; what does
// not fit stays an epilogue kernel. CUDA convolutions keep their epilogue in a kernel.

// Bias, residual, ReLU: one tk.conv, no kernel.
// CHECK-LABEL: func.func @bias_residual_relu(
// CHECK-NOT:     tk.launch
// CHECK:         tk.conv %arg0, %arg1, %arg4 bias(%{{.*}} : memref<4xf32>) residual(%arg3 : memref<1x4x6x6xf32>) {clamp_min = 0.000000e+00 : f64,
// CHECK-NOT:     tk.launch
// CHECK:         return
// CUDA-LABEL: func.func @bias_residual_relu(
// CUDA:         tk.conv %arg0, %arg1, %arg4 {dilations
// CUDA-NEXT:    tk.launch @k0_conv_epilogue
func.func @bias_residual_relu(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<1x4x1x1xf32>, %r: tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  %bb = tcc.broadcast_in_dim %b dims = [0, 1, 2, 3] : tensor<1x4x1x1xf32> -> tensor<1x4x6x6xf32>
  %yb = tcc.binary add %y, %bb : tensor<1x4x6x6xf32>
  %yr = tcc.binary add %r, %yb : tensor<1x4x6x6xf32>
  %zero = tcc.constant dense<0.0> : tensor<1x4x6x6xf32>
  %o = tcc.binary max %yr, %zero : tensor<1x4x6x6xf32>
  return %o : tensor<1x4x6x6xf32>
}

// -----

// An inference batch norm (x - mean) * a * gamma + beta after a convolution with constant
// weights folds into the weights (W * a * gamma per output channel) and one bias
// (beta - mean * a * gamma); with ReLU6 after it, the whole chain is tk.conv's.
// CHECK-DAG:   memref.global "private" constant @{{.*}} : memref<2x1x1x1xf32> = dense<{{\[\[\[\[}}1.000000e+00]]], {{\[\[\[}}6.000000e+00]]]]>
// CHECK-DAG:   memref.global "private" constant @{{.*}} : memref<1x2x1x1xf32> = dense<{{\[\[\[\[}}9.500000e+00]], {{\[\[}}1.600000e+01]]]]>
// CHECK-LABEL: func.func @batch_norm_relu6(
// CHECK-NOT:     tk.launch
// CHECK:         tk.conv %arg0, %{{.*}}, %arg1 bias(%{{.*}} : memref<2xf32>) {clamp_max = 6.000000e+00 : f64, clamp_min = 0.000000e+00 : f64,
// CHECK-NEXT:    return
func.func @batch_norm_relu6(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = tcc.constant dense<[[[[2.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32> -> tensor<1x2x4x4xf32>
  %mean = tcc.constant dense<[[[1.0]], [[2.0]]]> : tensor<2x1x1xf32>
  %a = tcc.constant dense<[[[0.25]], [[4.0]]]> : tensor<2x1x1xf32>
  %gamma = tcc.constant dense<[[[2.0]], [[0.5]]]> : tensor<2x1x1xf32>
  %beta = tcc.constant dense<[[[10.0]], [[20.0]]]> : tensor<2x1x1xf32>
  %mb = tcc.broadcast_in_dim %mean dims = [1, 2, 3] : tensor<2x1x1xf32> -> tensor<1x2x4x4xf32>
  %ab = tcc.broadcast_in_dim %a dims = [1, 2, 3] : tensor<2x1x1xf32> -> tensor<1x2x4x4xf32>
  %gb = tcc.broadcast_in_dim %gamma dims = [1, 2, 3] : tensor<2x1x1xf32> -> tensor<1x2x4x4xf32>
  %bb = tcc.broadcast_in_dim %beta dims = [1, 2, 3] : tensor<2x1x1xf32> -> tensor<1x2x4x4xf32>
  %0 = tcc.binary sub %y, %mb : tensor<1x2x4x4xf32>
  %1 = tcc.binary mul %0, %ab : tensor<1x2x4x4xf32>
  %2 = tcc.binary mul %1, %gb : tensor<1x2x4x4xf32>
  %3 = tcc.binary add %2, %bb : tensor<1x2x4x4xf32>
  %lo = tcc.constant dense<0.0> : tensor<1xf32>
  %hi = tcc.constant dense<6.0> : tensor<1xf32>
  %lob = tcc.broadcast_in_dim %lo dims = [3] : tensor<1xf32> -> tensor<1x2x4x4xf32>
  %hib = tcc.broadcast_in_dim %hi dims = [3] : tensor<1xf32> -> tensor<1x2x4x4xf32>
  %4 = tcc.binary max %3, %lob : tensor<1x2x4x4xf32>
  %5 = tcc.binary min %4, %hib : tensor<1x2x4x4xf32>
  return %5 : tensor<1x2x4x4xf32>
}

// -----

// What stays a kernel: a clamp whose bounds cross (max(x, 6) then min(., 0): only the max is
// the conv's), a residual computed in the kernel, a bias added after the residual.
// CHECK-LABEL: func.func @k0_conv_epilogue(
// CHECK:         tk.binary min
// CHECK-LABEL: func.func @k1_conv_epilogue(
// CHECK:         tk.binary mul
// CHECK:         tk.binary add
// CHECK-LABEL: func.func @k2_conv_epilogue(
// CHECK:         tk.binary add
// CHECK-LABEL: func.func @partial(
// CHECK:         tk.conv %arg0, %arg1, %arg4 {clamp_min = 6.000000e+00 : f64,
// CHECK-NEXT:    tk.launch @k0_conv_epilogue(%arg4)
// CHECK:         tk.conv %arg0, %arg1, %arg5 {dilations
// CHECK-NEXT:    tk.launch @k1_conv_epilogue(%arg5, %arg3)
// CHECK:         tk.conv %arg0, %arg1, %arg6 residual(%arg3 : memref<1x4x6x6xf32>) {dilations
// CHECK-NEXT:    tk.launch @k2_conv_epilogue(%arg6, %arg2)
func.func @partial(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>, %r: tensor<1x4x6x6xf32>) -> (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  %six = tcc.constant dense<6.0> : tensor<1x4x6x6xf32>
  %zero = tcc.constant dense<0.0> : tensor<1x4x6x6xf32>
  %a = tcc.binary max %y, %six : tensor<1x4x6x6xf32>
  %o1 = tcc.binary min %a, %zero : tensor<1x4x6x6xf32>
  %y2 = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  %two = tcc.constant dense<2.0> : tensor<1x4x6x6xf32>
  %r2 = tcc.binary mul %r, %two : tensor<1x4x6x6xf32>
  %o2 = tcc.binary add %y2, %r2 : tensor<1x4x6x6xf32>
  %y3 = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  %y3r = tcc.binary add %y3, %r : tensor<1x4x6x6xf32>
  %bb = tcc.broadcast_in_dim %b dims = [1, 2, 3] : tensor<4x1x1xf32> -> tensor<1x4x6x6xf32>
  %o3 = tcc.binary add %y3r, %bb : tensor<1x4x6x6xf32>
  return %o1, %o2, %o3 : tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>
}

// -----

// SiLU after the bias (EfficientNet), read by two consumers (a squeeze-excitation's mean and
// its scaling): tk.conv's activation, its result what both read; on CUDA a kernel.
// CHECK-LABEL: func.func @silu(
// CHECK:         tk.conv %arg0, %arg1, %arg3 bias(%arg2 : memref<4xf32>) {activation = "silu",
// CHECK-NOT:     sigmoid
// CHECK:         return
// CUDA-LABEL: func.func @silu(
// CUDA:         tk.launch @k{{[0-9]+}}_conv_epilogue
func.func @silu(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> (tensor<1x4x6x6xf32>, tensor<1x4xf32>) {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  %bb = tcc.broadcast_in_dim %b dims = [1] : tensor<4xf32> -> tensor<1x4x6x6xf32>
  %yb = tcc.binary add %y, %bb : tensor<1x4x6x6xf32>
  %s = tcc.unary sigmoid %yb : tensor<1x4x6x6xf32>
  %a = tcc.binary mul %yb, %s : tensor<1x4x6x6xf32>
  %m = tcc.reduce sum %a dims = [2, 3] : tensor<1x4x6x6xf32> -> tensor<1x4xf32>
  return %a, %m : tensor<1x4x6x6xf32>, tensor<1x4xf32>
}

// -----

// Hard swish as ONNX's function writes it, x * HardSigmoid(x) with alpha 1/6 and beta 1/2
// (MobileNetV3), the clamp's max and min in either order: tk.conv's activation with its gate.
// CHECK-LABEL: func.func @hard_swish(
// CHECK:         tk.conv %arg0, %arg1, %arg2 {activation = "hard_swish", activation_alpha = 0.1666666716337204 : f64, activation_beta = 5.000000e-01 : f64,
// CHECK-NOT:     tk.launch
// CHECK:         return
func.func @hard_swish(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  %sixth = tcc.constant dense<0.166666672> : tensor<1x4x6x6xf32>
  %half = tcc.constant dense<0.5> : tensor<1x4x6x6xf32>
  %zero = tcc.constant dense<0.0> : tensor<1x4x6x6xf32>
  %one = tcc.constant dense<1.0> : tensor<1x4x6x6xf32>
  %g0 = tcc.binary mul %y, %sixth : tensor<1x4x6x6xf32>
  %g1 = tcc.binary add %g0, %half : tensor<1x4x6x6xf32>
  %g2 = tcc.binary min %g1, %one : tensor<1x4x6x6xf32>
  %g3 = tcc.binary max %g2, %zero : tensor<1x4x6x6xf32>
  %o = tcc.binary mul %g3, %y : tensor<1x4x6x6xf32>
  return %o : tensor<1x4x6x6xf32>
}

// -----

// Not an activation: a gate clamped to [0, 2] (a hard swish is clamped to [0, 1]); the chain
// stays an epilogue kernel.
// CHECK-LABEL: func.func @not_hard_swish(
// CHECK:         tk.conv %arg0, %arg1, %arg2 {dilations
// CHECK-NEXT:    tk.launch @k{{[0-9]+}}_conv_epilogue
func.func @not_hard_swish(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  %sixth = tcc.constant dense<0.166666672> : tensor<1x4x6x6xf32>
  %half = tcc.constant dense<0.5> : tensor<1x4x6x6xf32>
  %zero = tcc.constant dense<0.0> : tensor<1x4x6x6xf32>
  %two = tcc.constant dense<2.0> : tensor<1x4x6x6xf32>
  %g0 = tcc.binary mul %y, %sixth : tensor<1x4x6x6xf32>
  %g1 = tcc.binary add %g0, %half : tensor<1x4x6x6xf32>
  %g2 = tcc.binary max %g1, %zero : tensor<1x4x6x6xf32>
  %g3 = tcc.binary min %g2, %two : tensor<1x4x6x6xf32>
  %o = tcc.binary mul %y, %g3 : tensor<1x4x6x6xf32>
  return %o : tensor<1x4x6x6xf32>
}
