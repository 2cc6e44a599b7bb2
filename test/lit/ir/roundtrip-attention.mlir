// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// tcc.attention: plain, grouped-query with a causal triangle and a padding mask filled with a
// finite value, rank 3 with a bias; the result shapes written here are the inferred ones.

// CHECK-LABEL: func.func @attention(
// CHECK-NEXT: %0 = tcc.attention %arg0, %arg1, %arg2 {scale = 1.250000e-01 : f64} : tensor<2x4x16x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x64xf32> -> tensor<2x4x16x64xf32>
// CHECK-NEXT: %1 = tcc.attention %arg0, %arg3, %arg4 mask(%arg5 : tensor<2x1x1x32xi1>) {causal, masked_value = -1.000000e+09 : f64, scale = 5.000000e-01 : f64} : tensor<2x4x16x64xf32>, tensor<2x2x32x64xf32>, tensor<2x2x32x16xf32> -> tensor<2x4x16x16xf32>
// CHECK-NEXT: %2 = tcc.attention %arg6, %arg6, %arg6 bias(%arg7 : tensor<1x5x5xf16>) {scale = 1.000000e+00 : f64} : tensor<3x5x8xf16>, tensor<3x5x8xf16>, tensor<3x5x8xf16> -> tensor<3x5x8xf16>
// CHECK-NEXT: return
func.func @attention(%q: tensor<2x4x16x64xf32>, %k: tensor<2x4x32x64xf32>, %v: tensor<2x4x32x64xf32>,
                     %kg: tensor<2x2x32x64xf32>, %vg: tensor<2x2x32x16xf32>, %pad: tensor<2x1x1x32xi1>,
                     %x: tensor<3x5x8xf16>, %bias: tensor<1x5x5xf16>) {
  %0 = tcc.attention %q, %k, %v {scale = 0.125 : f64} : tensor<2x4x16x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x64xf32> -> tensor<2x4x16x64xf32>
  %1 = tcc.attention %q, %kg, %vg mask(%pad : tensor<2x1x1x32xi1>) {causal, masked_value = -1.0e9 : f64, scale = 0.5 : f64} : tensor<2x4x16x64xf32>, tensor<2x2x32x64xf32>, tensor<2x2x32x16xf32> -> tensor<2x4x16x16xf32>
  %2 = tcc.attention %x, %x, %x bias(%bias : tensor<1x5x5xf16>) {scale = 1.0 : f64} : tensor<3x5x8xf16>, tensor<3x5x8xf16>, tensor<3x5x8xf16> -> tensor<3x5x8xf16>
  return
}

// Symbolic sizes: the result's dims are expressions of q's and v's; grouped-query heads over a
// symbolic batch.
// CHECK-LABEL: func.func @symbolic(
// CHECK-NEXT: %0 = tcc.attention %arg0, %arg1, %arg1 mask(%arg2 : tensor<?x1x1x?xi1, #tcc.dims<["b", "t"]>>) {scale = 1.000000e+00 : f64} : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x2x?x8xf32, #tcc.dims<["b", "t"]>>, tensor<?x2x?x8xf32, #tcc.dims<["b", "t"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
func.func @symbolic(%q: tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, %kv: tensor<?x2x?x8xf32, #tcc.dims<["b", "t"]>>,
                    %pad: tensor<?x1x1x?xi1, #tcc.dims<["b", "t"]>>) {
  %0 = tcc.attention %q, %kv, %kv mask(%pad : tensor<?x1x1x?xi1, #tcc.dims<["b", "t"]>>) {scale = 1.0 : f64} : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x2x?x8xf32, #tcc.dims<["b", "t"]>>, tensor<?x2x?x8xf32, #tcc.dims<["b", "t"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
  return
}
