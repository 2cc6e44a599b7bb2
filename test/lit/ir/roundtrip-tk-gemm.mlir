// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// tk.gemm with and without its epilogue: the bias is printed only when present, the activation
// only when it is not none.

// CHECK-LABEL: func.func @gemm(
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg2 : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg2 bias(%arg3 : memref<8xf32>) : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %arg0, %arg1, %arg2 activation relu : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %arg8, %arg1, %arg2 bias(%arg3 : memref<8xf32>) activation gelu_tanh {alpha = 5.000000e-01 : f64, beta = 1.000000e+00 : f64, trans_a} : memref<16x4xf32>, memref<16x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    tk.gemm %arg4, %arg5, %arg6 bias(%arg7 : memref<3xf64>) activation relu : memref<2x5x4xf64>, memref<1x4x3xf64>, memref<2x5x3xf64>
func.func @gemm(%a: memref<4x16xf32>, %b: memref<16x8xf32>, %c: memref<4x8xf32>, %bias: memref<8xf32>,
                %a2: memref<2x5x4xf64>, %b2: memref<1x4x3xf64>, %c2: memref<2x5x3xf64>, %bias2: memref<3xf64>,
                %at: memref<16x4xf32>) {
  tk.gemm %a, %b, %c : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
  tk.gemm %a, %b, %c bias(%bias : memref<8xf32>) activation none : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
  tk.gemm %a, %b, %c activation relu : memref<4x16xf32>, memref<16x8xf32>, memref<4x8xf32>
  tk.gemm %at, %b, %c bias(%bias : memref<8xf32>) activation gelu_tanh {trans_a, alpha = 0.5, beta = 1.0} : memref<16x4xf32>, memref<16x8xf32>, memref<4x8xf32>
  tk.gemm %a2, %b2, %c2 bias(%bias2 : memref<3xf64>) activation relu : memref<2x5x4xf64>, memref<1x4x3xf64>, memref<2x5x3xf64>
  return
}
