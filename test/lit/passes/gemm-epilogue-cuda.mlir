// RUN: tcc-opt %s -tcc-fuse=target=cuda -tcc-lower-to-kernels=target=cuda -split-input-file | FileCheck %s
// RUN: tcc-opt %s '-tcc-fuse=target=cuda explain=true' -split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN
// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels -split-input-file | FileCheck %s --check-prefix=CPU
// RUN: tcc-opt %s '-tcc-fuse=explain=true' -split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=CPU-EXPLAIN

// GEMM epilogues on CUDA: a bias vector (one value per column), then ReLU or tanh GELU, go into
// tk.gemm (cuBLASLt's BIAS / RELU / GELU epilogues, tcc/Passes/GemmEpilogue.h); only what
// follows is a generated kernel. On the CPU, libtccrt's sgemm takes alpha, the bias, ReLU and
// both GELUs of f32 products, and f64 products (OpenBLAS) keep every epilogue.

// Linear + ReLU: one tk.gemm with the bias and relu, no kernel.
// CHECK-LABEL: func.func @linear_relu(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 bias(%arg2 : memref<8xf32>) activation relu {trans_b} : memref<4x16xf32>, memref<8x16xf32>, memref<4x8xf32>
// CHECK-NEXT:    return
// EXPLAIN: remark: bias+relu fused into the cuBLASLt epilogue
// CPU-LABEL:   func.func @linear_relu(
// CPU-NEXT:      tk.gemm %arg0, %arg1, %arg3 bias(%arg2 : memref<8xf32>) activation relu {trans_b} : memref<4x16xf32>, memref<8x16xf32>, memref<4x8xf32>
// CPU-NEXT:      return
// CPU-EXPLAIN: remark: bias+relu fused into the tcc sgemm epilogue
func.func @linear_relu(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %bias: tensor<8xf32>) -> tensor<4x8xf32> {
  %wt = tcc.transpose %w perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = tcc.matmul %x, %wt : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z = tcc.binary add %y, %bb : tensor<4x8xf32>
  %zero = tcc.constant dense<0.0> : tensor<4x8xf32>
  %r = tcc.binary max %z, %zero : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Linear + GELU(approximate="tanh") exactly as the ONNX importer builds it (rank-0 constants
// broadcast to the shape, frontend/onnx/ops/Elementwise.cpp), the bias on the left of the add.
// CHECK-LABEL: func.func @linear_gelu_tanh(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 bias(%arg2 : memref<8xf32>) activation gelu_tanh : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    return
// EXPLAIN: remark: bias+gelu_tanh fused into the cuBLASLt epilogue
// CPU-LABEL:   func.func @linear_gelu_tanh(
// CPU-NEXT:      tk.gemm %arg0, %arg1, %arg3 bias(%arg2 : memref<8xf32>) activation gelu_tanh : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CPU-NEXT:      return
// CPU-EXPLAIN: remark: bias+gelu_tanh fused into the tcc sgemm epilogue
func.func @linear_gelu_tanh(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %v = tcc.binary add %bb, %y : tensor<4x8xf32>
  %c0 = tcc.constant dense<0.5> : tensor<f32>
  %half = tcc.broadcast_in_dim %c0 dims = [] : tensor<f32> -> tensor<4x8xf32>
  %c1 = tcc.constant dense<1.0> : tensor<f32>
  %one = tcc.broadcast_in_dim %c1 dims = [] : tensor<f32> -> tensor<4x8xf32>
  %c2 = tcc.constant dense<0.7978845608028654> : tensor<f32>
  %s = tcc.broadcast_in_dim %c2 dims = [] : tensor<f32> -> tensor<4x8xf32>
  %c3 = tcc.constant dense<0.044715> : tensor<f32>
  %k = tcc.broadcast_in_dim %c3 dims = [] : tensor<f32> -> tensor<4x8xf32>
  %xx = tcc.binary mul %v, %v : tensor<4x8xf32>
  %xxx = tcc.binary mul %v, %xx : tensor<4x8xf32>
  %kx3 = tcc.binary mul %k, %xxx : tensor<4x8xf32>
  %sum = tcc.binary add %v, %kx3 : tensor<4x8xf32>
  %inner = tcc.binary mul %s, %sum : tensor<4x8xf32>
  %t = tcc.unary tanh %inner : tensor<4x8xf32>
  %onePlus = tcc.binary add %one, %t : tensor<4x8xf32>
  %hx = tcc.binary mul %half, %v : tensor<4x8xf32>
  %g = tcc.binary mul %hx, %onePlus : tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// In f64 cuBLASLt's GELU is not exact to f64 precision: the bias goes into the epilogue, the
// GELU stays in a kernel.
// CHECK-LABEL: func.func @linear_gelu_tanh_f64(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 bias(%arg2 : memref<8xf64>) : memref<4x16xf64>, memref<16x8xf64>, memref<4x8xf64>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3)
// EXPLAIN: remark: bias fused into the cuBLASLt epilogue
func.func @linear_gelu_tanh_f64(%x: tensor<4x16xf64>, %w: tensor<16x8xf64>, %bias: tensor<8xf64>) -> tensor<4x8xf64> {
  %y = tcc.matmul %x, %w : tensor<4x16xf64>, tensor<16x8xf64> -> tensor<4x8xf64>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf64> -> tensor<4x8xf64>
  %v = tcc.binary add %bb, %y : tensor<4x8xf64>
  %c0 = tcc.constant dense<0.5> : tensor<f64>
  %half = tcc.broadcast_in_dim %c0 dims = [] : tensor<f64> -> tensor<4x8xf64>
  %c1 = tcc.constant dense<1.0> : tensor<f64>
  %one = tcc.broadcast_in_dim %c1 dims = [] : tensor<f64> -> tensor<4x8xf64>
  %c2 = tcc.constant dense<0.7978845608028654> : tensor<f64>
  %s = tcc.broadcast_in_dim %c2 dims = [] : tensor<f64> -> tensor<4x8xf64>
  %c3 = tcc.constant dense<0.044715> : tensor<f64>
  %k = tcc.broadcast_in_dim %c3 dims = [] : tensor<f64> -> tensor<4x8xf64>
  %xx = tcc.binary mul %v, %v : tensor<4x8xf64>
  %xxx = tcc.binary mul %v, %xx : tensor<4x8xf64>
  %kx3 = tcc.binary mul %k, %xxx : tensor<4x8xf64>
  %sum = tcc.binary add %v, %kx3 : tensor<4x8xf64>
  %inner = tcc.binary mul %s, %sum : tensor<4x8xf64>
  %t = tcc.unary tanh %inner : tensor<4x8xf64>
  %onePlus = tcc.binary add %one, %t : tensor<4x8xf64>
  %hx = tcc.binary mul %half, %v : tensor<4x8xf64>
  %g = tcc.binary mul %hx, %onePlus : tensor<4x8xf64>
  return %g : tensor<4x8xf64>
}

// -----

// The tanh GELU as PyTorch decomposes it (other factor orders, x^3 as pow(x, 3)), no bias: the
// activation alone.
// CHECK-LABEL: func.func @gelu_tanh_pow(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg2 activation gelu_tanh : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    return
// EXPLAIN: remark: gelu_tanh fused into the cuBLASLt epilogue
func.func @gelu_tanh_pow(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %v = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %half = tcc.constant dense<0.5> : tensor<4x8xf32>
  %one = tcc.constant dense<1.0> : tensor<4x8xf32>
  %three = tcc.constant dense<3.0> : tensor<4x8xf32>
  %s = tcc.constant dense<0.797884583> : tensor<4x8xf32>
  %k = tcc.constant dense<0.044715> : tensor<4x8xf32>
  %p = tcc.binary pow %v, %three : tensor<4x8xf32>
  %kx3 = tcc.binary mul %p, %k : tensor<4x8xf32>
  %sum = tcc.binary add %kx3, %v : tensor<4x8xf32>
  %inner = tcc.binary mul %sum, %s : tensor<4x8xf32>
  %t = tcc.unary tanh %inner : tensor<4x8xf32>
  %onePlus = tcc.binary add %t, %one : tensor<4x8xf32>
  %xo = tcc.binary mul %v, %onePlus : tensor<4x8xf32>
  %g = tcc.binary mul %xo, %half : tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// ReLU alone, written max(0, x).
// CHECK-LABEL: func.func @relu_only(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg2 activation relu : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    return
func.func @relu_only(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %zero = tcc.constant dense<0.0> : tensor<4x8xf32>
  %r = tcc.binary max %zero, %y : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// The erf GELU (ONNX Gelu's default) is not what cuBLASLt's GELU computes: the bias fuses, the
// GELU stays in the epilogue kernel, which reads the biased product from the output buffer.
// CHECK-LABEL: func.func @k0_gemm_epilogue(
// CHECK-SAME:      %[[C:.*]]: memref<4x8xf32>) attributes {tk.kernel}
// CHECK:         tk.load %[[C]]
// CHECK:         tk.unary erf
// CHECK:         tk.store {{.*}}, %[[C]]
// CHECK-LABEL: func.func @linear_gelu_erf(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 bias(%arg2 : memref<8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3)
// CHECK-NEXT:    return
// EXPLAIN: remark: bias fused into the cuBLASLt epilogue; not what follows: an erf GELU follows: the library's GELU is the tanh approximation
// The CPU's sgemm computes the erf GELU itself (here 0.5 x times 1 + erf(x * 1/sqrt(2))).
// CPU-LABEL:   func.func @linear_gelu_erf(
// CPU-NEXT:      tk.gemm %arg0, %arg1, %arg3 bias(%arg2 : memref<8xf32>) activation gelu_erf : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CPU-NEXT:      return
// CPU-EXPLAIN: remark: bias+gelu_erf fused into the tcc sgemm epilogue
func.func @linear_gelu_erf(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %v = tcc.binary add %y, %bb : tensor<4x8xf32>
  %half = tcc.constant dense<0.5> : tensor<4x8xf32>
  %one = tcc.constant dense<1.0> : tensor<4x8xf32>
  %r2 = tcc.constant dense<0.7071067811865476> : tensor<4x8xf32>
  %hx = tcc.binary mul %half, %v : tensor<4x8xf32>
  %sx = tcc.binary mul %v, %r2 : tensor<4x8xf32>
  %e = tcc.unary erf %sx : tensor<4x8xf32>
  %onePlus = tcc.binary add %one, %e : tensor<4x8xf32>
  %g = tcc.binary mul %hx, %onePlus : tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// torch's nn.GELU() as exported, op for op: x * (erf(x / sqrt(2)) + 1) * 0.5. A divisor other
// than sqrt(2) keeps the GELU a kernel (on CUDA both are kernels).
// CHECK-LABEL: func.func @linear_gelu_erf_torch(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 bias(%arg2 : memref<8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3)
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg4 bias(%arg2 : memref<8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k1_gemm_epilogue(%arg4)
// CPU-LABEL:   func.func @linear_gelu_erf_torch(
// CPU-NEXT:      tk.gemm %arg0, %arg1, %arg3 bias(%arg2 : memref<8xf32>) activation gelu_erf : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CPU-NEXT:      tk.gemm %arg0, %arg1, %arg4 bias(%arg2 : memref<8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CPU-NEXT:      tk.launch @k0_gemm_epilogue(%arg4)
// CPU-NEXT:      return
func.func @linear_gelu_erf_torch(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %v = tcc.binary add %y, %bb : tensor<4x8xf32>
  %half = tcc.constant dense<0.5> : tensor<4x8xf32>
  %one = tcc.constant dense<1.0> : tensor<4x8xf32>
  %sqrt2 = tcc.constant dense<1.4142135623730951> : tensor<4x8xf32>
  %sx = tcc.binary div %v, %sqrt2 : tensor<4x8xf32>
  %e = tcc.unary erf %sx : tensor<4x8xf32>
  %onePlus = tcc.binary add %e, %one : tensor<4x8xf32>
  %xg = tcc.binary mul %v, %onePlus : tensor<4x8xf32>
  %g = tcc.binary mul %xg, %half : tensor<4x8xf32>
  %y2 = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %v2 = tcc.binary add %y2, %bb : tensor<4x8xf32>
  %three = tcc.constant dense<3.0> : tensor<4x8xf32>
  %sx2 = tcc.binary div %v2, %three : tensor<4x8xf32>
  %e2 = tcc.unary erf %sx2 : tensor<4x8xf32>
  %onePlus2 = tcc.binary add %e2, %one : tensor<4x8xf32>
  %xg2 = tcc.binary mul %v2, %onePlus2 : tensor<4x8xf32>
  %g2 = tcc.binary mul %xg2, %half : tensor<4x8xf32>
  return %g, %g2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Bias, then something cuBLASLt does not compute (a sigmoid and a residual add): the bias is
// fused, the rest is the epilogue kernel (which no longer reads the bias).
// CHECK-LABEL: func.func @k0_gemm_epilogue(
// CHECK-SAME:      %[[C:.*]]: memref<4x8xf32>, %[[RES:.*]]: memref<4x8xf32>) attributes {tk.kernel}
// CHECK:         tk.unary sigmoid
// CHECK:         tk.binary add
// CHECK-LABEL: func.func @bias_then_other(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg4 bias(%arg2 : memref<8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg4, %arg3)
// CHECK-NEXT:    return
// EXPLAIN: remark: bias fused into the cuBLASLt epilogue
func.func @bias_then_other(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf32>, %res: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z = tcc.binary add %y, %bb : tensor<4x8xf32>
  %s = tcc.unary sigmoid %z : tensor<4x8xf32>
  %o = tcc.binary add %s, %res : tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}

// -----

// A per-row bias ([M] broadcast along the columns) is not cuBLASLt's per-column vector: nothing
// fuses, the add and the relu are the epilogue kernel.
// CHECK-LABEL: func.func @row_bias(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3, %arg2)
// EXPLAIN: remark: nothing fused into the cuBLASLt epilogue: the added tensor varies along rows (the library adds one vector per column, the same for every row and batch)
func.func @row_bias(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<4xf32>) -> tensor<4x8xf32> {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %z = tcc.binary add %y, %bb : tensor<4x8xf32>
  %zero = tcc.constant dense<0.0> : tensor<4x8xf32>
  %r = tcc.binary max %z, %zero : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// A bias of another element type (cast in the kernel) is not a plain vector of the output's
// type: it stays in the kernel, and so does the relu after it.
// CHECK-LABEL: func.func @f16_bias(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3, %arg2)
// EXPLAIN: remark: nothing fused into the cuBLASLt epilogue: the added vector is computed in the kernel (tcc.cast): the library takes a plain vector of the output's type
func.func @f16_bias(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf16>) -> tensor<4x8xf32> {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %b32 = tcc.cast %bias : tensor<8xf16> -> tensor<8xf32>
  %bb = tcc.broadcast_in_dim %b32 dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z = tcc.binary add %y, %bb : tensor<4x8xf32>
  %zero = tcc.constant dense<0.0> : tensor<4x8xf32>
  %r = tcc.binary max %z, %zero : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// The product is also a graph output: cuBLASLt would overwrite it, so nothing fuses.
// CHECK-LABEL: func.func @product_read_elsewhere(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3, %arg2, %arg4)
func.func @product_read_elsewhere(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z = tcc.binary add %y, %bb : tensor<4x8xf32>
  %zero = tcc.constant dense<0.0> : tensor<4x8xf32>
  %r = tcc.binary max %z, %zero : tensor<4x8xf32>
  return %y, %r : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Batched: a [2, 4, 16] x [16, 8] product (the weight broadcast over the batch) with an [8]
// bias, the same for both batches: cuBLASLt adds it to every row of every batch.
// CHECK-LABEL: func.func @batched_bias_relu(
// CHECK-NEXT:    %[[W:.*]] = tk.view %arg1 : memref<16x8xf32> to memref<1x16x8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %[[W]], %arg3 bias(%arg2 : memref<8xf32>) activation relu : memref<2x4x16xf32>, memref<1x16x8xf32>, memref<2x4x8xf32>
// CHECK-NEXT:    return
func.func @batched_bias_relu(%x: tensor<2x4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %wb = tcc.broadcast_in_dim %w dims = [1, 2] : tensor<16x8xf32> -> tensor<2x16x8xf32>
  %y = tcc.matmul %x, %wb : tensor<2x4x16xf32>, tensor<2x16x8xf32> -> tensor<2x4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [2] : tensor<8xf32> -> tensor<2x4x8xf32>
  %z = tcc.binary add %y, %bb : tensor<2x4x8xf32>
  %zero = tcc.constant dense<0.0> : tensor<2x4x8xf32>
  %r = tcc.binary max %z, %zero : tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}

// -----

// Batched with a bias per batch ([2, 1, 8]): cuBLASLt's bias is one vector for all batches, so
// it stays in the kernel.
// CHECK-LABEL: func.func @batched_bias_per_batch(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 : memref<2x4x16xf32>, memref<2x16x8xf32>, memref<2x4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3, %arg2)
// EXPLAIN: remark: nothing fused into the cuBLASLt epilogue: the added tensor varies along batches (the library adds one vector per column, the same for every row and batch)
func.func @batched_bias_per_batch(%x: tensor<2x4x16xf32>, %w: tensor<2x16x8xf32>, %bias: tensor<2x1x8xf32>) -> tensor<2x4x8xf32> {
  %y = tcc.matmul %x, %w : tensor<2x4x16xf32>, tensor<2x16x8xf32> -> tensor<2x4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [0, 1, 2] : tensor<2x1x8xf32> -> tensor<2x4x8xf32>
  %z = tcc.binary add %y, %bb : tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// ONNX Gemm with C of shape [1, N] (broadcast to [M, N] by the importer): the bias is C's buffer
// seen as [N].
// CHECK-LABEL: func.func @onnx_gemm_c_1xn(
// CHECK-NEXT:    %[[B:.*]] = tk.view %arg2 : memref<1x8xf32> to memref<8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 bias(%[[B]] : memref<8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    return
func.func @onnx_gemm_c_1xn(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>, %c: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %y = tcc.matmul %a, %b : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %cb = tcc.broadcast_in_dim %c dims = [0, 1] : tensor<1x8xf32> -> tensor<4x8xf32>
  %z = tcc.binary add %y, %cb : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// ONNX Gemm with a constant C of shape [N] (an initializer) and a scalar splat C: constants in
// memory; the splat becomes an [N] constant.
// CHECK:       memref.global "private" constant @[[SPLAT:.*]] : memref<8xf64> = dense<2.500000e-01>
// CHECK:       memref.global "private" constant @[[C:.*]] : memref<8xf32> = dense<[1.000000e+00, 2.000000e+00
// CHECK-LABEL: func.func @onnx_gemm_const_c(
// CHECK-NEXT:    %[[CB:.*]] = memref.get_global @[[C]] : memref<8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 bias(%[[CB]] : memref<8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    %[[SB:.*]] = memref.get_global @[[SPLAT]] : memref<8xf64>
// CHECK-NEXT:    tk.gemm %arg2, %arg2, %arg4 bias(%[[SB]] : memref<8xf64>) activation relu : memref<8x8xf64>, memref<8x8xf64>, memref<8x8xf64>
// CHECK-NEXT:    return
// On the CPU the f32 product takes its bias; the f64 one (OpenBLAS) keeps its epilogue kernel.
// CPU-LABEL:   func.func @onnx_gemm_const_c(
// CPU:           tk.gemm %arg0, %arg1, %arg3 bias(%{{.*}} : memref<8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CPU-NEXT:      tk.gemm %arg2, %arg2, %arg4 : memref<8x8xf64>, memref<8x8xf64>, memref<8x8xf64>
// CPU-NEXT:      tk.launch @k0_gemm_epilogue(%arg4)
func.func @onnx_gemm_const_c(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>, %d: tensor<8x8xf64>) -> (tensor<4x8xf32>, tensor<8x8xf64>) {
  %y = tcc.matmul %a, %b : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %c = tcc.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  %cb = tcc.broadcast_in_dim %c dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z = tcc.binary add %y, %cb : tensor<4x8xf32>
  %y2 = tcc.matmul %d, %d : tensor<8x8xf64>, tensor<8x8xf64> -> tensor<8x8xf64>
  %q = tcc.constant dense<0.25> : tensor<8x8xf64>
  %z2 = tcc.binary add %y2, %q : tensor<8x8xf64>
  %zero = tcc.constant dense<0.0> : tensor<8x8xf64>
  %r2 = tcc.binary max %z2, %zero : tensor<8x8xf64>
  return %z, %r2 : tensor<4x8xf32>, tensor<8x8xf64>
}

// -----

// Linear -> ReLU -> Linear -> ReLU: each GEMM computes its bias and relu; the second reads what
// the first wrote.
// CHECK-LABEL: func.func @mlp(
// CHECK-NEXT:    %[[H:.*]] = tk.alloc : memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %[[H]] bias(%arg2 : memref<8xf32>) activation relu : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %[[H]], %arg3, %arg5 bias(%arg4 : memref<2xf32>) activation relu : memref<4x8xf32>, memref<8x2xf32>, memref<4x2xf32>
// CHECK-NEXT:    return
func.func @mlp(%x: tensor<4x16xf32>, %w1: tensor<16x8xf32>, %b1: tensor<8xf32>, %w2: tensor<8x2xf32>, %b2: tensor<2xf32>) -> tensor<4x2xf32> {
  %y1 = tcc.matmul %x, %w1 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb1 = tcc.broadcast_in_dim %b1 dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z1 = tcc.binary add %y1, %bb1 : tensor<4x8xf32>
  %zero1 = tcc.constant dense<0.0> : tensor<4x8xf32>
  %h = tcc.binary max %z1, %zero1 : tensor<4x8xf32>
  %y2 = tcc.matmul %h, %w2 : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  %bb2 = tcc.broadcast_in_dim %b2 dims = [1] : tensor<2xf32> -> tensor<4x2xf32>
  %z2 = tcc.binary add %y2, %bb2 : tensor<4x2xf32>
  %zero2 = tcc.constant dense<0.0> : tensor<4x2xf32>
  %r = tcc.binary max %z2, %zero2 : tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}

// -----

// A consumer that cannot join the GEMM's epilogue (a row softmax) reads what cuBLASLt computed:
// bias+relu in the GEMM, the softmax one row kernel.
// CHECK-LABEL: func.func @linear_relu_softmax(
// CHECK-NEXT:    %[[H:.*]] = tk.alloc : memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %[[H]] bias(%arg2 : memref<8xf32>) activation relu : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k0_reduce_sum(%[[H]], %arg3)
// CHECK-NEXT:    return
func.func @linear_relu_softmax(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z = tcc.binary add %y, %bb : tensor<4x8xf32>
  %zero = tcc.constant dense<0.0> : tensor<4x8xf32>
  %r = tcc.binary max %z, %zero : tensor<4x8xf32>
  %m = tcc.reduce max %r dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %mb = tcc.broadcast_in_dim %m dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %d = tcc.binary sub %r, %mb : tensor<4x8xf32>
  %e = tcc.unary exp %d : tensor<4x8xf32>
  %s = tcc.reduce sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %sb = tcc.broadcast_in_dim %s dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %o = tcc.binary div %e, %sb : tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}

// -----

// Constant folding turns a broadcast bias initializer into a full [M, N] constant (the ONNX
// importer folds as it builds): a constant whose rows all hold one vector is that vector, its
// own [N] constant. A constant whose rows differ is not a bias.
// CHECK:       memref.global "private" constant @[[BV:.*]] : memref<8xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00]>
// CHECK-LABEL: func.func @folded_bias(
// CHECK:         %[[B:.*]] = memref.get_global @[[BV]] : memref<8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg2 bias(%[[B]] : memref<8xf32>) activation relu : memref<2x4x16xf32>, memref<2x16x8xf32>, memref<2x4x8xf32>
// CHECK:         tk.gemm %arg0, %arg1, %arg3 : memref<2x4x16xf32>, memref<2x16x8xf32>, memref<2x4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3, %{{.*}})
// EXPLAIN: remark: bias+relu fused into the cuBLASLt epilogue
// EXPLAIN: remark: nothing fused into the cuBLASLt epilogue: the added tensor varies along rows
func.func @folded_bias(%x: tensor<2x4x16xf32>, %w: tensor<2x16x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %y = tcc.matmul %x, %w : tensor<2x4x16xf32>, tensor<2x16x8xf32> -> tensor<2x4x8xf32>
  %b = tcc.constant dense<[[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]], [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]]> : tensor<2x4x8xf32>
  %z = tcc.binary add %y, %b : tensor<2x4x8xf32>
  %zero = tcc.constant dense<0.0> : tensor<2x4x8xf32>
  %r = tcc.binary max %z, %zero : tensor<2x4x8xf32>
  %y2 = tcc.matmul %x, %w : tensor<2x4x16xf32>, tensor<2x16x8xf32> -> tensor<2x4x8xf32>
  %c = tcc.constant dense<[[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]], [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0]]]> : tensor<2x4x8xf32>
  %z2 = tcc.binary add %y2, %c : tensor<2x4x8xf32>
  return %r, %z2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// A product scaled by a constant (ONNX Gemm's alpha, attention's 1/sqrt(d)) is tk.gemm's alpha;
// a scale by a tensor is not.
// CHECK-LABEL: func.func @alpha(
// CHECK-NEXT:    %[[S:.*]] = tk.alloc : memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %[[S]] {alpha = 1.250000e-01 : f64} : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k0_reduce_sum(%[[S]], %arg3)
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg4 bias(%arg2 : memref<8xf32>) activation gelu_tanh {alpha = 5.000000e-01 : f64} : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg5 : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k1_gemm_epilogue(%arg5, %arg2)
// CHECK-NEXT:    return
// EXPLAIN: remark: alpha fused into the cuBLASLt epilogue
// EXPLAIN: remark: alpha+bias+gelu_tanh fused into the cuBLASLt epilogue
// CPU-LABEL:   func.func @alpha(
// CPU:           tk.gemm %arg0, %arg1, %{{.*}} {alpha = 1.250000e-01 : f64} : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CPU:           tk.gemm %arg0, %arg1, %arg4 bias(%arg2 : memref<8xf32>) activation gelu_tanh {alpha = 5.000000e-01 : f64}
// CPU:           return
func.func @alpha(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %scale = tcc.constant dense<0.125> : tensor<4x8xf32>
  %s = tcc.binary mul %scale, %y : tensor<4x8xf32>
  %e = tcc.unary exp %s : tensor<4x8xf32>
  %sum = tcc.reduce sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %sb = tcc.broadcast_in_dim %sum dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %p = tcc.binary div %e, %sb : tensor<4x8xf32>
  %y2 = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %half = tcc.constant dense<0.5> : tensor<4x8xf32>
  %v0 = tcc.binary mul %y2, %half : tensor<4x8xf32>
  %bb = tcc.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %v = tcc.binary add %v0, %bb : tensor<4x8xf32>
  %one = tcc.constant dense<1.0> : tensor<4x8xf32>
  %s2 = tcc.constant dense<0.7978845608028654> : tensor<4x8xf32>
  %k = tcc.constant dense<0.044715> : tensor<4x8xf32>
  %xx = tcc.binary mul %v, %v : tensor<4x8xf32>
  %xxx = tcc.binary mul %v, %xx : tensor<4x8xf32>
  %kx3 = tcc.binary mul %k, %xxx : tensor<4x8xf32>
  %sum2 = tcc.binary add %v, %kx3 : tensor<4x8xf32>
  %inner = tcc.binary mul %s2, %sum2 : tensor<4x8xf32>
  %t = tcc.unary tanh %inner : tensor<4x8xf32>
  %onePlus = tcc.binary add %one, %t : tensor<4x8xf32>
  %hx = tcc.binary mul %half, %v : tensor<4x8xf32>
  %g = tcc.binary mul %hx, %onePlus : tensor<4x8xf32>
  %y3 = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %q = tcc.binary mul %y3, %bb : tensor<4x8xf32>
  return %p, %g, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Attention's scale written as a division by a constant is alpha = 1/d; a constant divided by
// the product is not a scale.
// CHECK-LABEL: func.func @alpha_div(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg2 {alpha = 1.250000e-01 : f64} : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg3 : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.launch @k0_gemm_epilogue(%arg3)
// CHECK-NEXT:    return
func.func @alpha_div(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %d = tcc.constant dense<8.0> : tensor<4x8xf32>
  %s = tcc.binary div %y, %d : tensor<4x8xf32>
  %y2 = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %r = tcc.binary div %d, %y2 : tensor<4x8xf32>
  return %s, %r : tensor<4x8xf32>, tensor<4x8xf32>
}
