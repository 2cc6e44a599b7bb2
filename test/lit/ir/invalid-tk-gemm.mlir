// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// tk.gemm's verifier: shapes, element types, and the epilogue's bias ([N], the result's type).

func.func @bias_shape(%a: memref<4x16xf32>, %b: memref<16x8xf32>, %c: memref<4x8xf32>, %bias: memref<4xf32>) {
  // expected-error @+1 {{'tk.gemm' op bias must be a buffer of the result's element type and shape [8] (one value per column), got 'memref<4xf32>'}}
  tk.gemm %a, %b, %c bias(%bias : memref<4xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
  return
}

// -----

func.func @bias_rank(%a: memref<4x16xf32>, %b: memref<16x8xf32>, %c: memref<4x8xf32>, %bias: memref<1x8xf32>) {
  // expected-error @+1 {{'tk.gemm' op bias must be a buffer of the result's element type and shape [8] (one value per column), got 'memref<1x8xf32>'}}
  tk.gemm %a, %b, %c bias(%bias : memref<1x8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
  return
}

// -----

func.func @bias_type(%a: memref<4x16xf32>, %b: memref<16x8xf32>, %c: memref<4x8xf32>, %bias: memref<8xf16>) {
  // expected-error @+1 {{'tk.gemm' op bias must be a buffer of the result's element type and shape [8] (one value per column), got 'memref<8xf16>'}}
  tk.gemm %a, %b, %c bias(%bias : memref<8xf16>) activation relu : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
  return
}

// -----

func.func @activation_name(%a: memref<4x16xf32>, %b: memref<16x8xf32>, %c: memref<4x8xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'activation' [none, relu, gelu_tanh, gelu_erf]}}
  tk.gemm %a, %b, %c activation gelu : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
  return
}

// -----

func.func @shapes(%a: memref<4x16xf32>, %b: memref<8x8xf32>, %c: memref<4x8xf32>) {
  // expected-error @+1 {{'tk.gemm' op matrix shapes do not agree}}
  tk.gemm %a, %b, %c : memref<4x16xf32>, memref<8x8xf32>, memref<4x8xf32>
  return
}

// -----

func.func @element_types(%a: memref<4x16xi32>, %b: memref<16x8xi32>, %c: memref<4x8xi32>) {
  // expected-error @+1 {{'tk.gemm' op operands must all be f32, f64, f16 or bf16 (one type)}}
  tk.gemm %a, %b, %c : memref<4x16xi32>, memref<16x8xi32>, memref<4x8xi32>
  return
}

// -----

func.func @mixed_element_types(%a: memref<4x16xf16>, %b: memref<16x8xf16>, %c: memref<4x8xf32>) {
  // expected-error @+1 {{'tk.gemm' op operands must all be f32, f64, f16 or bf16 (one type)}}
  tk.gemm %a, %b, %c : memref<4x16xf16>, memref<16x8xf16>, memref<4x8xf32>
  return
}

// -----

func.func @batch(%a: memref<2x4x16xf32>, %b: memref<3x16x8xf32>, %c: memref<2x4x8xf32>) {
  // expected-error @+1 {{'tk.gemm' op batch dim 0 does not broadcast to the result}}
  tk.gemm %a, %b, %c : memref<2x4x16xf32>, memref<3x16x8xf32>, memref<2x4x8xf32>
  return
}
