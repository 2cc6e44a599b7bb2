// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// A reduction over trailing dims that are contiguous in every buffer it reads (a global
// average pool over [H, W]) runs as one simd loop over H * W: one sum across lanes at its end,
// not one per row. The leading reduced dims read as 0, the last as the flattened index.
// CHECK-LABEL: // ---- kernel pool ----
// CHECK: // tk.reduce sum [16, 16] : f32
// CHECK-NEXT: float acc0 = 0.0f;
// CHECK-NEXT: #pragma omp simd reduction(+:acc0)
// CHECK-NEXT: for (int64_t [[I:i[0-9]+]] = 0; [[I]] < 256; ++[[I]]) {
// CHECK-NEXT: float v0 = arg0[i1 * 256 + 0 * 16 + [[I]]];
// CHECK-NEXT: acc0 = acc0 + v0;
// CHECK-NEXT: }
func.func @pool(%arg0: memref<1x960x16x16xf32>, %arg1: memref<1x960xf32>) attributes {tk.kernel} {
  %c0 = tk.constant 0 : index
  tk.parallel [1, 960] {
  ^bb0(%n: index, %c: index):
    %s = tk.reduce sum [16, 16] {
    ^bb0(%y: index, %x: index):
      %v = tk.load %arg0[%c0, %c, %y, %x] : memref<1x960x16x16xf32>
      tk.yield %v : f32
    } : f32
    tk.store %s, %arg1[%c0, %c] : memref<1x960xf32>
  }
  return
}

// Not flattened: the reduced dims cover part of the rows (8 of 16 columns), or an index is
// also used in arithmetic.
// CHECK-LABEL: // ---- kernel part ----
// CHECK: // tk.reduce sum [16, 8] : f32
// CHECK-NEXT: float acc0 = 0.0f;
// CHECK-NEXT: for (int64_t i2 = 0; i2 < 16; ++i2)
// CHECK-NEXT: #pragma omp simd reduction(+:acc0)
// CHECK-NEXT: for (int64_t i3 = 0; i3 < 8; ++i3) {
// CHECK-LABEL: // ---- kernel weighted ----
// CHECK: // tk.reduce sum [16, 16] : f32
// CHECK-NEXT: float acc0 = 0.0f;
// CHECK-NEXT: for (int64_t i2 = 0; i2 < 16; ++i2)
// CHECK-NEXT: #pragma omp simd reduction(+:acc0)
// CHECK-NEXT: for (int64_t i3 = 0; i3 < 16; ++i3) {
func.func @part(%arg0: memref<1x960x16x16xf32>, %arg1: memref<1x960xf32>) attributes {tk.kernel} {
  %c0 = tk.constant 0 : index
  tk.parallel [1, 960] {
  ^bb0(%n: index, %c: index):
    %s = tk.reduce sum [16, 8] {
    ^bb0(%y: index, %x: index):
      %v = tk.load %arg0[%c0, %c, %y, %x] : memref<1x960x16x16xf32>
      tk.yield %v : f32
    } : f32
    tk.store %s, %arg1[%c0, %c] : memref<1x960xf32>
  }
  return
}
func.func @weighted(%arg0: memref<1x960x16x16xf32>, %arg1: memref<1x960xf32>) attributes {tk.kernel} {
  %c0 = tk.constant 0 : index
  tk.parallel [1, 960] {
  ^bb0(%n: index, %c: index):
    %s = tk.reduce sum [16, 16] {
    ^bb0(%y: index, %x: index):
      %v = tk.load %arg0[%c0, %c, %y, %x] : memref<1x960x16x16xf32>
      %w = tk.cast %x : index to f32
      %p = tk.binary mul %v, %w : f32
      tk.yield %p : f32
    } : f32
    tk.store %s, %arg1[%c0, %c] : memref<1x960xf32>
  }
  return
}
