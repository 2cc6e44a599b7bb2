// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// tk.arg_reduce: the first index wins ties unless select_last_index; NaN beats everything.

// CHECK-LABEL: // ---- kernel argmax_first ----
// CHECK: // tk.arg_reduce max [16]
// CHECK-NEXT: int64_t v0 = 0;
// CHECK-NEXT: float v0_best = 0;
// CHECK-NEXT: for (int64_t i1 = 0; i1 < 16; ++i1) {
// CHECK-NEXT: float v1 = arg0[i0 * 16 + i1];
// CHECK-NEXT: if (i1 == 0 || tcc_more_extreme<float>(v1, v0_best, true)) {
// CHECK-NEXT: v0_best = v1;
// CHECK-NEXT: v0 = i1;
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: arg1[i0] = v0;
func.func @argmax_first(%x: memref<8x16xf32>, %o: memref<8xi64>) attributes {tk.kernel} {
  tk.parallel [8] {
  ^bb0(%i: index):
    %a = tk.arg_reduce max 16 {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<8x16xf32>
      tk.yield %v : f32
    }
    tk.store %a, %o[%i] : memref<8xi64>
  }
  return
}

// CHECK-LABEL: // ---- kernel argmin_last ----
// CHECK: // tk.arg_reduce min [5] (last index)
// CHECK: uint16_t v0_best = 0;
// CHECK: uint16_t v1 = arg0[i1 * 3 + i0];
// CHECK-NEXT: if (i1 == 0 || !tcc_more_extreme<uint16_t>(v0_best, v1, false)) {
func.func @argmin_last(%x: memref<5x3xui16>, %o: memref<3xi64>) attributes {tk.kernel} {
  tk.parallel [3] {
  ^bb0(%i: index):
    %a = tk.arg_reduce min 5 {
    ^bb0(%j: index):
      %v = tk.load %x[%j, %i] : memref<5x3xui16>
      tk.yield %v : ui16
    } {select_last_index}
    tk.store %a, %o[%i] : memref<3xi64>
  }
  return
}
