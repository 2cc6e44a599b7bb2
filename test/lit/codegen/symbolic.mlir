// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// Buffers with symbolic dims (a #tcc.dims memory space) and loops bounded by tk.size: the
// kernel reads the run's symbol values from its tk.symbols argument, strides and bounds are
// expressions of them, and threading is decided at run time by the actual work.

module attributes {tcc.symbols = {batch = array<i64: 1, 8>, seq = array<i64: 1, 512>}} {
// CHECK-LABEL: TCC_EXPORT void row_sum(void *const *args, int32_t num_threads) {
// CHECK: const int64_t *__restrict arg2 = (const int64_t *)args[2];
// CHECK-NEXT: const int64_t tcc_sym_batch = arg2[0];
// CHECK: const int64_t tcc_sym_seq = arg2[1];
// CHECK: int64_t v0 = (tcc_sym_batch * tcc_sym_seq);
// CHECK: // tk.parallel [v0]
// CHECK-NEXT: #pragma omp parallel for simd schedule(static) num_threads(tcc_threads) if((double)v0 * {{.*}} >= 65536.000000)
// CHECK-NEXT: for (int64_t i0 = 0; i0 < v0; ++i0) {
// CHECK: // tk.reduce sum [64] : f32
// CHECK: arg0[i0 * 64 + i1]
// CHECK: arg1[i0] =
func.func @row_sum(%x: memref<?x64xf32, #tcc.dims<["batch*seq"]>>,
                   %y: memref<?xf32, #tcc.dims<["batch*seq"]>>,
                   %syms: memref<2xi64> {tk.symbols}) attributes {tk.kernel} {
  %n = tk.size "batch*seq"
  tk.parallel [%n] {
  ^bb0(%i: index):
    %s = tk.reduce sum [64] {
    ^bb0(%k: index):
      %v = tk.load %x[%i, %k] : memref<?x64xf32, #tcc.dims<["batch*seq"]>>
      tk.yield %v : f32
    } : f32
    tk.store %s, %y[%i] : memref<?xf32, #tcc.dims<["batch*seq"]>>
  }
  return
}

// CHECK-LABEL: TCC_EXPORT void transpose(void *const *args, int32_t num_threads) {
// CHECK: const int64_t tcc_size0 = (16 * tcc_sym_seq);
// CHECK: // tk.parallel [v0, 16, v1]
// CHECK: #pragma omp parallel for collapse(2) {{.*}} if((double)v0 * (double)16 * (double)v1 * {{.*}})
// CHECK: arg0[i0 * tcc_size0 + i2 * 16 + i1]
// CHECK: arg1[i0 * tcc_size0 + i1 * tcc_sym_seq + i2]
func.func @transpose(%x: memref<?x?x16xf32, #tcc.dims<["batch", "seq"]>>,
                     %y: memref<?x16x?xf32, #tcc.dims<["batch", "seq"]>>,
                     %syms: memref<2xi64> {tk.symbols}) attributes {tk.kernel} {
  %b = tk.size "batch"
  %s = tk.size "seq"
  tk.parallel [%b, 16, %s] {
  ^bb0(%i: index, %j: index, %k: index):
    %v = tk.load %x[%i, %k, %j] : memref<?x?x16xf32, #tcc.dims<["batch", "seq"]>>
    tk.store %v, %y[%i, %j, %k] : memref<?x16x?xf32, #tcc.dims<["batch", "seq"]>>
  }
  return
}
// A column reduction (a sum over rows, read along the columns) with symbolic columns: blocks of
// 256, a run-time count for each; threads by the run-time work (see reduce-columns.mlir).
// CHECK-LABEL: TCC_EXPORT void sum_over_rows_symbolic(void *const *args, int32_t num_threads) {
// CHECK: #pragma omp parallel for schedule(static) num_threads(tcc_threads) if(
// CHECK-NEXT: for (int64_t [[JB:jb[0-9]+]] = 0; [[JB]] < [[S:v[0-9]+]]; [[JB]] += 256) {
// CHECK-NEXT: const int64_t {{jn[0-9]+}} = [[S]] - [[JB]] < 256 ? [[S]] - [[JB]] : 256;
func.func @sum_over_rows_symbolic(%x: memref<64x?xf32, #tcc.dims<["seq"]>>,
                                  %y: memref<?xf32, #tcc.dims<["seq"]>>,
                                  %syms: memref<2xi64> {tk.symbols}) attributes {tk.kernel} {
  %n = tk.size "seq"
  tk.parallel [%n] {
  ^bb0(%c: index):
    %s = tk.reduce sum [64] {
    ^bb0(%r: index):
      %v = tk.load %x[%r, %c] : memref<64x?xf32, #tcc.dims<["seq"]>>
      tk.yield %v : f32
    } : f32
    tk.store %s, %y[%c] : memref<?xf32, #tcc.dims<["seq"]>>
  }
  return
}
}
