// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// 16-bit floats live in memory as uint16_t bits and are computed in float; every op that
// produces an f16/bf16 value rounds once (ops whose result is an operand, like max and neg,
// need no rounding). Reductions accumulate in float and round at the end.

// CHECK-LABEL: // ---- kernel half ----
// CHECK: const uint16_t *__restrict arg0 = (const uint16_t *)args[0];
// CHECK: uint16_t *__restrict arg1 = (uint16_t *)args[1];
// CHECK: uint16_t *__restrict arg2 = (uint16_t *)args[2];
// CHECK: float v0 = tcc_f16_to_f32(arg0[i0 * 64 + i1]);
// CHECK-NEXT: float v1 = tcc_round_f16(v0 * 1.5f);
// CHECK-NEXT: float v2 = tcc_round_f16(tcc_expf(v1));
// CHECK-NEXT: float v3 = tcc_max<float>(v2, v0);
// CHECK-NEXT: float v4 = -v3;
// CHECK-NEXT: float v5 = tcc_round_bf16(v4);
// CHECK-NEXT: arg1[i0 * 64 + i1] = tcc_f32_to_f16(v4);
// CHECK-NEXT: arg2[i0 * 64 + i1] = tcc_f32_to_bf16(v5);
// CHECK: // tk.reduce sum [64] : f16
// CHECK-NEXT: float acc0 = 0.0f;
// CHECK: acc0 = acc0 + v6;
// CHECK: float v7 = tcc_round_f16(acc0);
func.func @half(%x: memref<8x64xf16>, %y: memref<8x64xf16>, %z: memref<8x64xbf16>, %s: memref<8xf16>) attributes {tk.kernel} {
  tk.parallel [8] {
  ^bb0(%i: index):
    tk.parallel [64] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<8x64xf16>
      %c = tk.constant 1.5 : f16
      %m = tk.binary mul %v, %c : f16
      %e = tk.unary exp %m : f16
      %mx = tk.binary max %e, %v : f16
      %n = tk.unary neg %mx : f16
      %b = tk.cast %n : f16 to bf16
      tk.store %n, %y[%i, %j] : memref<8x64xf16>
      tk.store %b, %z[%i, %j] : memref<8x64xbf16>
    }
    %r = tk.reduce sum [64] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<8x64xf16>
      tk.yield %v : f16
    } : f16
    tk.store %r, %s[%i] : memref<8xf16>
  }
  return
}

// Casts: f64 goes to 16 bits through a round-to-odd float (no double rounding), wide integers
// to bf16 likewise; floats to integers saturate.
// CHECK-LABEL: // ---- kernel casts ----
// CHECK: float v1 = tcc_round_f16(tcc_f64_to_f32_rto(v0));
// CHECK: float v3 = tcc_round_bf16(tcc_int_to_f32_rto<int64_t>(v2));
// CHECK: int8_t v4 = tcc_sat_cast<int8_t>(v1);
// CHECK: bool v5 = (v1 != 0);
func.func @casts(%d: memref<4xf64>, %i: memref<4xi64>, %h: memref<4xf16>, %b: memref<4xbf16>, %q: memref<4xi8>, %p: memref<4xi1>) attributes {tk.kernel} {
  tk.parallel [4] {
  ^bb0(%k: index):
    %dv = tk.load %d[%k] : memref<4xf64>
    %hv = tk.cast %dv : f64 to f16
    %iv = tk.load %i[%k] : memref<4xi64>
    %bv = tk.cast %iv : i64 to bf16
    %qv = tk.cast %hv : f16 to i8
    %pv = tk.cast %hv : f16 to i1
    tk.store %hv, %h[%k] : memref<4xf16>
    tk.store %bv, %b[%k] : memref<4xbf16>
    tk.store %qv, %q[%k] : memref<4xi8>
    tk.store %pv, %p[%k] : memref<4xi1>
  }
  return
}
