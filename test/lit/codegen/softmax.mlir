// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// Row softmax: the outer tk.parallel runs on threads; each row has two simd reductions (max
// tracks NaN beside the vector max) and an inner simd tk.parallel.

// CHECK-LABEL: // ---- kernel softmax ----
// CHECK: // tk.parallel [512]
// CHECK-NEXT: #pragma omp parallel for schedule(static) num_threads(tcc_threads)
// CHECK-NEXT: for (int64_t i0 = 0; i0 < 512; ++i0) {
// CHECK-NEXT: // tk.reduce max [1024] : f32
// CHECK-NEXT: float acc0 = tcc_f32_from_bits(0xFF800000u);
// CHECK-NEXT: bool acc0_nan = false;
// CHECK-NEXT: #pragma omp simd reduction(max:acc0) reduction(||:acc0_nan)
// CHECK-NEXT: for (int64_t i1 = 0; i1 < 1024; ++i1) {
// CHECK-NEXT: float v0 = arg0[i0 * 1024 + i1];
// CHECK-NEXT: acc0 = v0 > acc0 ? v0 : acc0;
// CHECK-NEXT: acc0_nan = acc0_nan || (v0 != v0);
// CHECK-NEXT: }
// CHECK-NEXT: float v1 = acc0_nan ? tcc_f32_from_bits(0x7FC00000u) : acc0;
// CHECK-NEXT: // tk.reduce sum [1024] : f32
// CHECK-NEXT: float acc1 = 0.0f;
// CHECK-NEXT: #pragma omp simd reduction(+:acc1)
// CHECK-NEXT: for (int64_t i2 = 0; i2 < 1024; ++i2) {
// CHECK-NEXT: float v2 = arg0[i0 * 1024 + i2];
// CHECK-NEXT: float v3 = v2 - v1;
// CHECK-NEXT: float v4 = tcc_expf(v3);
// CHECK-NEXT: acc1 = acc1 + v4;
// CHECK-NEXT: }
// CHECK-NEXT: float v5 = acc1;
// CHECK-NEXT: // tk.parallel [1024]
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t i3 = 0; i3 < 1024; ++i3) {
// CHECK-NEXT: float v6 = arg0[i0 * 1024 + i3];
// CHECK-NEXT: float v7 = v6 - v1;
// CHECK-NEXT: float v8 = tcc_expf(v7);
// CHECK-NEXT: float v9 = v8 / v5;
// CHECK-NEXT: arg1[i0 * 1024 + i3] = v9;
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @softmax(%x: memref<512x1024xf32>, %y: memref<512x1024xf32>) attributes {tk.kernel} {
  tk.parallel [512] {
  ^bb0(%i: index):
    %m = tk.reduce max [1024] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<512x1024xf32>
      tk.yield %v : f32
    } : f32
    %s = tk.reduce sum [1024] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<512x1024xf32>
      %d = tk.binary sub %v, %m : f32
      %e = tk.unary exp %d : f32
      tk.yield %e : f32
    } : f32
    tk.parallel [1024] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<512x1024xf32>
      %d = tk.binary sub %v, %m : f32
      %e = tk.unary exp %d : f32
      %r = tk.binary div %e, %s : f32
      tk.store %r, %y[%i, %j] : memref<512x1024xf32>
    }
  }
  return
}

// Integer sums accumulate in an unsigned type (wrapping, no signed overflow); a large
// top-level reduction is split across threads.
// CHECK-LABEL: // ---- kernel total ----
// CHECK: // tk.reduce sum [1024, 1024] : i32
// CHECK-NEXT: uint32_t acc0 = 0;
// CHECK-NEXT: #pragma omp parallel for schedule(static) reduction(+:acc0) num_threads(tcc_threads)
// CHECK-NEXT: for (int64_t i0 = 0; i0 < 1024; ++i0)
// CHECK-NEXT: #pragma omp simd reduction(+:acc0)
// CHECK-NEXT: for (int64_t i1 = 0; i1 < 1024; ++i1) {
// CHECK-NEXT: int32_t v0 = arg0[i0 * 1024 + i1];
// CHECK-NEXT: acc0 = acc0 + (uint32_t)v0;
// CHECK-NEXT: }
// CHECK-NEXT: int32_t v1 = (int32_t)acc0;
// CHECK-NEXT: arg1[0] = v1;
func.func @total(%x: memref<1024x1024xi32>, %y: memref<1xi32>) attributes {tk.kernel} {
  %r = tk.reduce sum [1024, 1024] {
  ^bb0(%i: index, %j: index):
    %v = tk.load %x[%i, %j] : memref<1024x1024xi32>
    tk.yield %v : i32
  } : i32
  %c0 = tk.constant 0 : index
  tk.store %r, %y[%c0] : memref<1xi32>
  return
}
