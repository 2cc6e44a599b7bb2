// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// (f64: an f32 pool like this one is a CPU library call, tk.pool.)
// A 3x3 max pool (stride 2, pad 1) after a ReLU: the window reduction runs as plain loops inside
// the output nest, whose innermost dim (the output row) is the simd loop; a simd loop over the
// 3 positions of a window row would leave the output row scalar.

// CHECK-LABEL: // ---- kernel k0_reduce_window ----
// CHECK:       // tk.parallel [1, 32, 28, 28]
// CHECK-NEXT:  #pragma omp parallel for collapse(3) schedule(static) num_threads(tcc_threads)
// CHECK-NEXT:  for (int64_t i0 = 0; i0 < 1; ++i0)
// CHECK-NEXT:  for (int64_t i1 = 0; i1 < 32; ++i1)
// CHECK-NEXT:  for (int64_t i2 = 0; i2 < 28; ++i2)
// CHECK-NEXT:  #pragma omp simd
// CHECK-NEXT:  for (int64_t i3 = 0; i3 < 28; ++i3) {
// CHECK:       // tk.reduce max [1, 1, 3, 3] : f64
// CHECK-NOT:   #pragma
// CHECK:       for (int64_t i7 = 0; i7 < 3; ++i7) {
// CHECK:       arg1[
func.func @pool(%x: tensor<1x32x56x56xf64>) -> tensor<1x32x28x28xf64> {
  %zero = tcc.constant dense<0.0> : tensor<1x32x56x56xf64>
  %r = tcc.binary max %x, %zero : tensor<1x32x56x56xf64>
  %p = tcc.reduce_window max %r {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, pad_low = array<i64: 0, 0, 1, 1>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 3, 3>} : tensor<1x32x56x56xf64> -> tensor<1x32x28x28xf64>
  return %p : tensor<1x32x28x28xf64>
}
