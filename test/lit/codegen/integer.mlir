// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// Integers wrap (signed arithmetic goes through unsigned types), division and remainder by
// zero give 0 instead of trapping, unused values are dropped, shifts past the width give 0; index arithmetic from
// tk.apply rounds floordiv/ceildiv toward -inf/+inf and mod takes the divisor's sign.

// CHECK-LABEL: // ---- kernel ints ----
// CHECK: int8_t v2 = (int8_t)((uint32_t)v0 * (uint32_t)v1);
// CHECK-NEXT: int8_t v3 = tcc_div<int8_t>(v2, v1);
// CHECK-NEXT: int8_t v4 = tcc_rem<int8_t>(v3, (-3));
// CHECK-NEXT: uint32_t v5 = (uint32_t)v4;
// CHECK-NEXT: uint32_t v6 = tcc_shl<uint32_t>(v5, 33u);
// CHECK-NEXT: uint32_t v7 = v6 - v5;
// CHECK-NEXT: bool v8 = v7 < 4294967295u;
// CHECK-NEXT: arg2[i0] = (uint8_t)v8;
func.func @ints(%a: memref<16xi8>, %b: memref<16xi8>, %c: memref<16xi1>) attributes {tk.kernel} {
  tk.parallel [16] {
  ^bb0(%i: index):
    %x = tk.load %a[%i] : memref<16xi8>
    %y = tk.load %b[%i] : memref<16xi8>
    %m = tk.binary mul %x, %y : i8
    %d = tk.binary div %m, %y : i8
    %k = tk.constant -3 : i8
    %r = tk.binary rem %d, %k : i8
    %u = tk.cast %r : i8 to ui32
    %n = tk.constant 33 : ui32
    %s = tk.binary shift_left %u, %n : ui32
    %t = tk.binary sub %s, %u : ui32
    %big = tk.constant 4294967295 : ui32
    %lt = tk.compare lt %t, %big : ui32
    %unused = tk.cast %lt : i1 to ui8
    tk.store %lt, %c[%i] : memref<16xi1>
  }
  return
}

// CHECK-LABEL: // ---- kernel index_math ----
// CHECK: int64_t v0 = tcc_floordiv(i0 - 6, 4);
// CHECK-NEXT: int64_t v1 = tcc_mod(i0 - 6, 4);
// CHECK-NEXT: int64_t v2 = tcc_ceildiv(i0 * 3 + i1, 4) - 1;
// CHECK-NEXT: int64_t v3 = tcc_div<int64_t>(v0, v1);
// CHECK-NEXT: int64_t v4 = v3 + v2;
// CHECK-NEXT: int64_t v5 = (int64_t)v4;
func.func @index_math(%o: memref<12x3xi64>) attributes {tk.kernel} {
  tk.parallel [12, 3] {
  ^bb0(%i: index, %j: index):
    %f = tk.apply affine_map<(d0) -> ((d0 - 6) floordiv 4)>(%i)
    %m = tk.apply affine_map<(d0) -> ((d0 - 6) mod 4)>(%i)
    %c = tk.apply affine_map<(d0)[s0] -> ((d0 * 3 + s0) ceildiv 4 - 1)>(%i, %j)
    %q = tk.binary div %f, %m : index
    %s = tk.binary add %q, %c : index
    %v = tk.cast %s : index to i64
    tk.store %v, %o[%i, %j] : memref<12x3xi64>
  }
  return
}
