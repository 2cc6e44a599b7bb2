// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// tk.for: a sequential loop; carried values are locals updated at the end of each iteration
// (through temporaries when there are several, since a yield may read another carried value).

// CHECK-LABEL: // ---- kernel cumsum ----
// CHECK: // tk.parallel [4]
// CHECK-NEXT: for (int64_t i0 = 0; i0 < 4; ++i0) {
// CHECK-NEXT: // tk.for 10
// CHECK-NEXT: int32_t c0 = 0;
// CHECK-NEXT: for (int64_t i1 = 0; i1 < 10; ++i1) {
// CHECK-NEXT: int32_t v0 = arg0[i0 * 10 + i1];
// CHECK-NEXT: int32_t v1 = (int32_t)((uint32_t)c0 + (uint32_t)v0);
// CHECK-NEXT: arg1[i0 * 10 + i1] = v1;
// CHECK-NEXT: c0 = v1;
// CHECK-NEXT: }
func.func @cumsum(%x: memref<4x10xi32>, %o: memref<4x10xi32>) attributes {tk.kernel} {
  tk.parallel [4] {
  ^bb0(%i: index):
    %z = tk.constant 0 : i32
    %r = tk.for 10 iter_args(%z : i32) {
    ^bb0(%j: index, %acc: i32):
      %v = tk.load %x[%i, %j] : memref<4x10xi32>
      %s = tk.binary add %acc, %v : i32
      tk.store %s, %o[%i, %j] : memref<4x10xi32>
      tk.yield %s : i32
    } : i32
  }
  return
}

// CHECK-LABEL: // ---- kernel swap ----
// CHECK: // tk.for 3
// CHECK-NEXT: double c0 = 1.0;
// CHECK-NEXT: double c1 = 2.0;
// CHECK-NEXT: for (int64_t i0 = 0; i0 < 3; ++i0) {
// CHECK-NEXT: double n0 = c1;
// CHECK-NEXT: double n1 = c0;
// CHECK-NEXT: c0 = n0;
// CHECK-NEXT: c1 = n1;
// CHECK-NEXT: }
// CHECK-NEXT: arg0[0] = c0;
// CHECK-NEXT: arg0[1] = c1;
func.func @swap(%o: memref<2xf64>) attributes {tk.kernel} {
  %a = tk.constant 1.0 : f64
  %b = tk.constant 2.0 : f64
  %r:2 = tk.for 3 iter_args(%a, %b : f64, f64) {
  ^bb0(%j: index, %p: f64, %q: f64):
    tk.yield %q, %p : f64, f64
  } : f64, f64
  %c0 = tk.constant 0 : index
  %c1 = tk.constant 1 : index
  tk.store %r#0, %o[%c0] : memref<2xf64>
  tk.store %r#1, %o[%c1] : memref<2xf64>
  return
}
