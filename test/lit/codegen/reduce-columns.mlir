// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// Column reductions: nested loops that read along the outer loop's innermost dim, not their
// own, are interchanged. The innermost dim runs in blocks (at most 256 columns, equal and
// rounded up to 16), each nested loop's dims outside a simd loop over the block's columns, one
// accumulator per column. A max takes a NaN into its accumulator (no flag on the side).

// A max over the batch of [4096, 512]: two blocks of 256, split over threads.
// CHECK-LABEL: // ---- kernel max_over_batch ----
// CHECK: // tk.parallel [512]
// CHECK-NEXT: // (nested loops read along the last dim: it runs in blocks of 256 columns
// CHECK-NEXT: #pragma omp parallel for schedule(static) num_threads(tcc_threads)
// CHECK-NEXT: for (int64_t [[JB:jb[0-9]+]] = 0; [[JB]] < 512; [[JB]] += 256) {
// CHECK-NEXT: // tk.reduce max [4096] : f32 (per column)
// CHECK-NEXT: float [[ACC:acc[0-9]+]][256];
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t [[J:j[0-9]+]] = 0; [[J]] < 256; ++[[J]]) {
// CHECK-NEXT: [[ACC]][[[J]]] = tcc_f32_from_bits(0xFF800000u);
// CHECK-NEXT: }
// CHECK-NEXT: for (int64_t [[R:i[0-9]+]] = 0; [[R]] < 4096; ++[[R]]) {
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t [[J]] = 0; [[J]] < 256; ++[[J]]) {
// CHECK-NEXT: float [[V:v[0-9]+]] = arg0[[[R]] * 512 + ([[JB]] + [[J]])];
// CHECK-NEXT: [[ACC]][[[J]]] = ([[V]] != [[V]]) ? [[V]] : [[V]] > [[ACC]][[[J]]] ? [[V]] : [[ACC]][[[J]]];
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t [[J]] = 0; [[J]] < 256; ++[[J]]) {
// CHECK-NEXT: arg1[([[JB]] + [[J]])] = (([[ACC]][[[J]]] != [[ACC]][[[J]]]) ? tcc_f32_from_bits(0x7FC00000u) : [[ACC]][[[J]]]);
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NOT: reduction(
func.func @max_over_batch(%x: memref<4096x512xf32>, %y: memref<512xf32>) attributes {tk.kernel} {
  tk.parallel [512] {
  ^bb0(%c: index):
    %m = tk.reduce max [4096] {
    ^bb0(%r: index):
      %v = tk.load %x[%r, %c] : memref<4096x512xf32>
      tk.yield %v : f32
    } : f32
    tk.store %m, %y[%c] : memref<512xf32>
  }
  return
}

// A softmax over the classes of [1, 21, 64, 64]: [64, 64] run as one loop of 4096 columns,
// 16 blocks of 256. The max is kept in an array for the sum and the stores that follow.
// CHECK-LABEL: // ---- kernel softmax_classes ----
// CHECK: // (the last 2 dims run as one loop of 4096)
// CHECK-NEXT: // (nested loops read along the last dim: it runs in blocks of 256 columns
// CHECK-NEXT: #pragma omp parallel for collapse(2) schedule(static) num_threads(tcc_threads)
// CHECK-NEXT: for (int64_t i0 = 0; i0 < 1; ++i0)
// CHECK-NEXT: for (int64_t [[JB:jb[0-9]+]] = 0; [[JB]] < 4096; [[JB]] += 256) {
// CHECK: // tk.reduce max [21] : f32 (per column)
// CHECK: float [[V:v[0-9]+]] = arg0[[[C:i[0-9]+]] * 4096 + 0 * 64 + ([[JB]] + [[J:j[0-9]+]])];
// CHECK: float [[MAX:col[0-9]+]][256];
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t [[J]] = 0; [[J]] < 256; ++[[J]]) {
// CHECK: [[MAX]][[[J]]] = [[M:v[0-9]+]];
// CHECK-NEXT: }
// CHECK-NEXT: // tk.reduce sum [21] : f32 (per column)
// CHECK: float [[E:v[0-9]+]] = arg0[[[C2:i[0-9]+]] * 4096 + 0 * 64 + ([[JB]] + [[J]])];
// CHECK-NEXT: float [[D:v[0-9]+]] = [[E]] - [[MAX]][[[J]]];
// CHECK: // tk.parallel [21] (per column)
// CHECK-NEXT: for (int64_t [[K:i[0-9]+]] = 0; [[K]] < 21; ++[[K]]) {
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t [[J]] = 0; [[J]] < 256; ++[[J]]) {
// CHECK: arg1[[[K]] * 4096 + 0 * 64 + ([[JB]] + [[J]])] =
func.func @softmax_classes(%x: memref<1x21x64x64xf32>, %y: memref<1x21x64x64xf32>) attributes {tk.kernel} {
  %c0 = tk.constant 0 : index
  tk.parallel [1, 64, 64] {
  ^bb0(%n: index, %h: index, %w: index):
    %m = tk.reduce max [21] {
    ^bb0(%c: index):
      %v = tk.load %x[%c0, %c, %h, %w] : memref<1x21x64x64xf32>
      tk.yield %v : f32
    } : f32
    %half = tk.constant 5.000000e-01 : f32
    %shift = tk.binary mul %m, %half : f32
    %s = tk.reduce sum [21] {
    ^bb0(%c: index):
      %v = tk.load %x[%c0, %c, %h, %w] : memref<1x21x64x64xf32>
      %d = tk.binary sub %v, %shift : f32
      %e = tk.unary exp %d : f32
      tk.yield %e : f32
    } : f32
    tk.parallel [21] {
    ^bb0(%c: index):
      %v = tk.load %x[%c0, %c, %h, %w] : memref<1x21x64x64xf32>
      %d = tk.binary sub %v, %shift : f32
      %e = tk.unary exp %d : f32
      %q = tk.binary div %e, %s : f32
      tk.store %q, %y[%c0, %c, %h, %w] : memref<1x21x64x64xf32>
    }
  }
  return
}

// An argmax over the classes, 1000 columns: 4 blocks of 256, the last one 232 (a run-time
// count); the best value and its index per column.
// CHECK-LABEL: // ---- kernel argmax_classes ----
// CHECK: for (int64_t [[JB:jb[0-9]+]] = 0; [[JB]] < 1000; [[JB]] += 256) {
// CHECK-NEXT: const int64_t [[N:jn[0-9]+]] = 1000 - [[JB]] < 256 ? 1000 - [[JB]] : 256;
// CHECK-NEXT: // tk.arg_reduce max [19] (per column)
// CHECK-NEXT: int64_t [[A:v[0-9]+]][256];
// CHECK-NEXT: float [[A]]_best[256];
// CHECK: for (int64_t [[K:i[0-9]+]] = 0; [[K]] < 19; ++[[K]]) {
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t [[J:j[0-9]+]] = 0; [[J]] < [[N]]; ++[[J]]) {
// CHECK-NEXT: float [[V:v[0-9]+]] = arg0[[[K]] * 1000 + ([[JB]] + [[J]])];
// CHECK-NEXT: const bool [[B:better[0-9]+]] = [[K]] == 0 || tcc_more_extreme<float>([[V]], [[A]]_best[[[J]]], true);
// CHECK-NEXT: [[A]]_best[[[J]]] = [[B]] ? [[V]] : [[A]]_best[[[J]]];
// CHECK-NEXT: [[A]][[[J]]] = [[B]] ? [[K]] : [[A]][[[J]]];
// CHECK: arg1[([[JB]] + [[J]])] = [[A]][[[J]]];
func.func @argmax_classes(%x: memref<19x1000xf32>, %y: memref<1000xi64>) attributes {tk.kernel} {
  tk.parallel [1000] {
  ^bb0(%w: index):
    %a = tk.arg_reduce max 19 {
    ^bb0(%c: index):
      %v = tk.load %x[%c, %w] : memref<19x1000xf32>
      tk.yield %v : f32
    }
    tk.store %a, %y[%w] : memref<1000xi64>
  }
  return
}

// 144 channels of a channels-last pool: one block of 144 (not 128 and a remainder of 16).
// CHECK-LABEL: // ---- kernel pool_channels_last ----
// CHECK: for (int64_t [[JB:jb[0-9]+]] = 0; [[JB]] < 144; [[JB]] += 144) {
// CHECK-NEXT: // tk.reduce sum [7, 7] : f32 (per column)
// CHECK-NEXT: float {{acc[0-9]+}}[144];
func.func @pool_channels_last(%x: memref<1x7x7x144xf32>, %y: memref<1x144xf32>) attributes {tk.kernel} {
  %c0 = tk.constant 0 : index
  tk.parallel [1, 144] {
  ^bb0(%n: index, %c: index):
    %s = tk.reduce sum [7, 7] {
    ^bb0(%h: index, %w: index):
      %v = tk.load %x[%c0, %h, %w, %c] : memref<1x7x7x144xf32>
      tk.yield %v : f32
    } : f32
    tk.store %s, %y[%c0, %c] : memref<1x144xf32>
  }
  return
}

// Not interchanged: a row reduction (the reduce reads along its own dim), and a column
// reduction over fewer than 16 columns.
// CHECK-LABEL: // ---- kernel row_max ----
// CHECK-NOT: blocks of
// CHECK: #pragma omp simd reduction(max:acc0) reduction(||:acc0_nan)
// CHECK-LABEL: // ---- kernel few_columns ----
// CHECK-NOT: blocks of
// CHECK: #pragma omp simd reduction(+:acc0)
func.func @row_max(%x: memref<512x4096xf32>, %y: memref<512xf32>) attributes {tk.kernel} {
  tk.parallel [512] {
  ^bb0(%r: index):
    %m = tk.reduce max [4096] {
    ^bb0(%c: index):
      %v = tk.load %x[%r, %c] : memref<512x4096xf32>
      tk.yield %v : f32
    } : f32
    tk.store %m, %y[%r] : memref<512xf32>
  }
  return
}
func.func @few_columns(%x: memref<4096x8xf32>, %y: memref<8xf32>) attributes {tk.kernel} {
  tk.parallel [8] {
  ^bb0(%c: index):
    %s = tk.reduce sum [4096] {
    ^bb0(%r: index):
      %v = tk.load %x[%r, %c] : memref<4096x8xf32>
      tk.yield %v : f32
    } : f32
    tk.store %s, %y[%c] : memref<8xf32>
  }
  return
}
