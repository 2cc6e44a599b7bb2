// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// Loops that transpose (their stores run along the innermost dim, a load along another one)
// run in 16 x 16 tiles of the two dims. With one f32 store, a whole tile is computed along
// the load's dim into a buffer and stored by tcc_transpose16; partial tiles, other element
// types and several stores run the tile's elements in place.

// Channels-last to channels-first with a bias and ReLU, 40 channels of 37 x 45 (partial tiles).
// CHECK-LABEL: // tk.kernel @to_first
// CHECK: // (a transpose: dims 1 and 3 run in tiles of 16 x 16, each computed along the first into a buffer and stored transposed)
// CHECK-NEXT: #pragma omp parallel for collapse(4)
// CHECK-NEXT: for (int64_t i0 = 0; i0 < 1; ++i0)
// CHECK-NEXT: for (int64_t i2 = 0; i2 < 37; ++i2)
// CHECK-NEXT: for (int64_t [[TB:tb[0-9]+]] = 0; [[TB]] < 40; [[TB]] += 16)
// CHECK-NEXT: for (int64_t [[LB:lb[0-9]+]] = 0; [[LB]] < 45; [[LB]] += 16) {
// CHECK-NEXT: if ([[TB]] + 16 <= 40 && [[LB]] + 16 <= 45) {
// CHECK-NEXT: alignas(64) float [[TILE:tile[0-9]+]][256];
// CHECK-NEXT: for (int64_t i3 = [[LB]]; i3 < [[LB]] + 16; ++i3)
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t i1 = [[TB]]; i1 < [[TB]] + 16; ++i1) {
// CHECK-NEXT: float [[X:v[0-9]+]] = arg1[i2 * 1800 + i3 * 40 + i1];
// CHECK:      [[TILE]][(i3 - [[LB]]) * 16 + i1 - [[TB]]] = v{{[0-9]+}};
// CHECK-NEXT: }
// CHECK-NEXT: {
// CHECK-NEXT: const int64_t i1 = [[TB]], i3 = [[LB]];
// CHECK-NEXT: tcc_transpose16([[TILE]], arg2 + i1 * 1665 + i2 * 45 + i3, 1665);
// CHECK-NEXT: }
// CHECK-NEXT: } else {
// CHECK-NEXT: for (int64_t i1 = [[TB]]; i1 < ([[TB]] + 16 < 40 ? [[TB]] + 16 : 40); ++i1)
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t i3 = [[LB]]; i3 < ([[LB]] + 16 < 45 ? [[LB]] + 16 : 45); ++i3) {
// CHECK:      arg2[i1 * 1665 + i2 * 45 + i3] = v{{[0-9]+}};
func.func @to_first(%b: memref<40xf32>, %x: memref<1x37x45x40xf32>, %y: memref<1x40x37x45xf32>) attributes {tk.kernel} {
  %c0 = tk.constant 0 : index
  %z = tk.constant 0.0 : f32
  tk.parallel [1, 40, 37, 45] {
  ^bb0(%n: index, %c: index, %h: index, %w: index):
    %v = tk.load %x[%n, %h, %w, %c] : memref<1x37x45x40xf32>
    %bb = tk.load %b[%c] : memref<40xf32>
    %s = tk.binary add %v, %bb : f32
    %r = tk.binary max %s, %z : f32
    tk.store %r, %y[%c0, %c, %h, %w] : memref<1x40x37x45xf32>
  }
  return
}

// i32: tiles, no buffer.
// CHECK-LABEL: // tk.kernel @ints
// CHECK: // (a transpose: dims 0 and 1 run in tiles of 16 x 16)
// CHECK-NEXT: for (int64_t [[TB:tb[0-9]+]] = 0; [[TB]] < 48; [[TB]] += 16)
// CHECK-NEXT: for (int64_t [[LB:lb[0-9]+]] = 0; [[LB]] < 64; [[LB]] += 16) {
// CHECK-NEXT: for (int64_t i0 = [[TB]]; i0 < ([[TB]] + 16 < 48 ? [[TB]] + 16 : 48); ++i0)
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t i1 = [[LB]]; i1 < ([[LB]] + 16 < 64 ? [[LB]] + 16 : 64); ++i1) {
// CHECK-NEXT: int32_t [[V:v[0-9]+]] = arg0[i1 * 48 + i0];
// CHECK-NEXT: arg1[i0 * 64 + i1] = [[V]];
// CHECK-NOT: tcc_transpose16(tile
func.func @ints(%x: memref<64x48xi32>, %y: memref<48x64xi32>) attributes {tk.kernel} {
  tk.parallel [48, 64] {
  ^bb0(%i: index, %j: index):
    %v = tk.load %x[%j, %i] : memref<64x48xi32>
    tk.store %v, %y[%i, %j] : memref<48x64xi32>
  }
  return
}

// Three channels (fewer than a tile): the loop as written.
// CHECK-LABEL: // tk.kernel @narrow
// CHECK: // tk.parallel [3, 50176]
// CHECK-NOT: a transpose
// CHECK: arg1[i0 * 50176 + i1] = v{{[0-9]+}};
func.func @narrow(%x: memref<50176x3xf32>, %y: memref<3x50176xf32>) attributes {tk.kernel} {
  tk.parallel [3, 50176] {
  ^bb0(%c: index, %p: index):
    %v = tk.load %x[%p, %c] : memref<50176x3xf32>
    tk.store %v, %y[%c, %p] : memref<3x50176xf32>
  }
  return
}
