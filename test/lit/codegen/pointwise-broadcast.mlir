// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null | FileCheck %s
// RUN: tcc-opt %s -tcc-emit-cpp -o /dev/null > %t.cpp && c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror %t.cpp

// A pointwise chain with a broadcast operand indexed through tk.apply. Large enough for
// threads: the outer dims run on OpenMP threads, the innermost dim is a simd loop.

// CHECK-LABEL: // ---- kernel bias_gelu ----
// CHECK: #ifndef TCC_CPU_PRELUDE
// CHECK: TCC_EXPORT void bias_gelu(void *const *args, int32_t num_threads) {
// CHECK-NEXT: // arg 0: memref<64x32x128xf32> (read)
// CHECK-NEXT: const float *__restrict arg0 = (const float *)args[0];
// CHECK-NEXT: // arg 1: memref<4096xf32> (read)
// CHECK-NEXT: const float *__restrict arg1 = (const float *)args[1];
// CHECK-NEXT: // arg 2: memref<64x32x128xf32> (written)
// CHECK-NEXT: float *__restrict arg2 = (float *)args[2];
// CHECK-NEXT: const int tcc_threads = num_threads > 0 ? num_threads : omp_get_max_threads();
// CHECK-NEXT: // tk.parallel [64, 32, 128]
// CHECK-NEXT: #pragma omp parallel for collapse(2) schedule(static) num_threads(tcc_threads)
// CHECK-NEXT: for (int64_t i0 = 0; i0 < 64; ++i0)
// CHECK-NEXT: for (int64_t i1 = 0; i1 < 32; ++i1)
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t i2 = 0; i2 < 128; ++i2) {
// CHECK-NEXT: float v0 = arg0[i0 * 4096 + i1 * 128 + i2];
// CHECK-NEXT: int64_t v1 = i1 * 128 + i2;
// CHECK-NEXT: float v2 = arg1[v1];
// CHECK-NEXT: float v3 = v0 + v2;
// CHECK-NEXT: float v4 = v3 * 0.5f;
// CHECK-NEXT: float v5 = tcc_erff(v3);
// CHECK-NEXT: float v6 = v5 + 1.0f;
// CHECK-NEXT: float v7 = v4 * v6;
// CHECK-NEXT: arg2[i0 * 4096 + i1 * 128 + i2] = v7;
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @bias_gelu(%x: memref<64x32x128xf32>, %b: memref<4096xf32>, %y: memref<64x32x128xf32>) attributes {tk.kernel} {
  tk.parallel [64, 32, 128] {
  ^bb0(%i: index, %j: index, %k: index):
    %v = tk.load %x[%i, %j, %k] : memref<64x32x128xf32>
    %flat = tk.apply affine_map<(d0, d1) -> (d0 * 128 + d1)>(%j, %k)
    %bias = tk.load %b[%flat] : memref<4096xf32>
    %s = tk.binary add %v, %bias : f32
    %half = tk.constant 0.5 : f32
    %one = tk.constant 1.0 : f32
    %h = tk.binary mul %s, %half : f32
    %e = tk.unary erf %s : f32
    %e1 = tk.binary add %e, %one : f32
    %r = tk.binary mul %h, %e1 : f32
    tk.store %r, %y[%i, %j, %k] : memref<64x32x128xf32>
  }
  return
}

// Small kernels stay on the calling thread; size-1 dims drop out of the linear index; trailing
// dims that every load and store indexes the same row-major way run as one flat loop.
// CHECK-LABEL: // ---- kernel small ----
// CHECK: (void)num_threads;
// CHECK-NEXT: // tk.parallel [1, 8]
// CHECK-NEXT: // (the last 2 dims run as one loop of 8)
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t i1 = 0; i1 < 8; ++i1) {
// CHECK-NEXT: float v0 = arg0[i1];
// CHECK-NEXT: float v1 = (v0 < 0.0f ? 0.0f : v0);
// CHECK-NEXT: arg1[i1] = v1;
func.func @small(%x: memref<1x8xf32>, %y: memref<1x8xf32>) attributes {tk.kernel} {
  tk.parallel [1, 8] {
  ^bb0(%i: index, %j: index):
    %v = tk.load %x[%i, %j] : memref<1x8xf32>
    %z = tk.constant 0.0 : f32
    %r = tk.binary max %v, %z : f32
    tk.store %r, %y[%i, %j] : memref<1x8xf32>
  }
  return
}

// Few outer iterations: one thread team, the innermost dim is split across it.
// CHECK-LABEL: // ---- kernel wide ----
// CHECK: // tk.parallel [2, 100000]
// CHECK-NEXT: #pragma omp parallel num_threads(tcc_threads)
// CHECK-NEXT: {
// CHECK-NEXT: for (int64_t i0 = 0; i0 < 2; ++i0)
// CHECK-NEXT: #pragma omp for simd schedule(static)
// CHECK-NEXT: for (int64_t i1 = 0; i1 < 100000; ++i1) {
// (A broadcast load x[j] keeps the two dims apart.)
func.func @wide(%x: memref<100000xf32>, %y: memref<2x100000xf32>) attributes {tk.kernel} {
  tk.parallel [2, 100000] {
  ^bb0(%i: index, %j: index):
    %v = tk.load %x[%j] : memref<100000xf32>
    %r = tk.unary neg %v : f32
    tk.store %r, %y[%i, %j] : memref<2x100000xf32>
  }
  return
}

// Functions that are not kernels are skipped.
// CHECK-NOT: kernel not_a_kernel
func.func @not_a_kernel() {
  return
}

// A 7x7 feature map with a per-channel bias: the two spatial dims run as one loop of 49.
// CHECK-LABEL: // ---- kernel channel_bias ----
// CHECK: // tk.parallel [4, 7, 7]
// CHECK-NEXT: // (the last 2 dims run as one loop of 49)
// CHECK-NEXT: for (int64_t [[C:i[0-9]+]] = 0; [[C]] < 4; ++[[C]])
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t [[F:i[0-9]+]] = 0; [[F]] < 49; ++[[F]]) {
// CHECK-NEXT: float {{v[0-9]+}} = arg0{{\[}}[[C]] * 49 + 0 * 7 + [[F]]];
// CHECK-NEXT: float {{v[0-9]+}} = arg1{{\[}}[[C]]];
func.func @channel_bias(%x: memref<4x7x7xf32>, %b: memref<4xf32>, %y: memref<4x7x7xf32>) attributes {tk.kernel} {
  tk.parallel [4, 7, 7] {
  ^bb0(%c: index, %h: index, %w: index):
    %v = tk.load %x[%c, %h, %w] : memref<4x7x7xf32>
    %bias = tk.load %b[%c] : memref<4xf32>
    %r = tk.binary add %v, %bias : f32
    tk.store %r, %y[%c, %h, %w] : memref<4x7x7xf32>
  }
  return
}
