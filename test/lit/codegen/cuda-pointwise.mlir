// RUN: tcc-opt %s -tcc-emit-cuda -o /dev/null | FileCheck %s

// Pointwise kernels: the outer tk.parallel is a grid-stride loop over groups of V consecutive
// iterations, one thread per group; loads and stores the IR proves contiguous and 16-byte
// aligned become tcc_vec accesses (the first lane of each chunk loads it, the last stores it).

// A GELU epilogue with a broadcast bias and an f16 result: groups of 8 (16 bytes of f16), the
// f32 operands in two float4 chunks each; the bias index (j * 128 + k) is contiguous too.
// CHECK-LABEL: // ---- kernel bias_gelu ----
// CHECK-NEXT: // launch: grid [128, 1, 1] block [256, 1, 1] shared 0 strategy pointwise vec=8
// CHECK: #ifndef TCC_CUDA_PRELUDE
// CHECK: TCC_EXPORT void __launch_bounds__(256) bias_gelu(const float *__restrict__ arg0, const float *__restrict__ arg1, uint16_t *__restrict__ arg2) {
// CHECK-NEXT: // tk.parallel [64, 32, 128] (one thread per group, groups of 8, vector accesses)
// CHECK-NEXT: for (uint32_t [[G:tcc_g[0-9]+]] = (uint32_t)blockIdx.x * blockDim.x + threadIdx.x; [[G]] < 32768; [[G]] += (uint32_t)gridDim.x * blockDim.x) {
// CHECK-NEXT: const uint32_t [[R:tcc_r[0-9]+]] = [[G]] / 16;
// CHECK-NEXT: const int64_t [[J:i[0-9]+]] = (int64_t)([[R]] % 32);
// CHECK-NEXT: const uint32_t [[R1:tcc_r[0-9]+]] = [[R]] / 32;
// CHECK-NEXT: const int64_t [[I:i[0-9]+]] = (int64_t)[[R1]];
// CHECK-NEXT: const uint32_t [[F:tcc_f[0-9]+]] = ([[G]] % 16) * 8;
// CHECK-NEXT: tcc_vec<float, 4> [[X:tcc_v[0-9]+]][2];
// CHECK-NEXT: tcc_vec<float, 4> [[B:tcc_v[0-9]+]][2];
// CHECK-NEXT: tcc_vec<uint16_t, 8> [[OUT:tcc_v[0-9]+]][1];
// CHECK-NEXT: #pragma unroll
// CHECK-NEXT: for (int [[L:tcc_l[0-9]+]] = 0; [[L]] < 8; ++[[L]]) {
// CHECK: if ([[L]] % 4 == 0) [[X]]{{\[}}[[L]] / 4] = *reinterpret_cast<const tcc_vec<float, 4> *>(arg0 + [[I]] * 4096 + [[J]] * 128 + [[K:i[0-9]+]]);
// CHECK: if ([[L]] % 4 == 0) [[B]]{{\[}}[[L]] / 4] = *reinterpret_cast<const tcc_vec<float, 4> *>(arg1 + {{v[0-9]+}});
// CHECK: erff(
// CHECK: [[OUT]]{{\[}}[[L]] / 8].v{{\[}}[[L]] % 8] = tcc_f32_to_f16(
// CHECK-NEXT: if ([[L]] % 8 == 7) *reinterpret_cast<tcc_vec<uint16_t, 8> *>(arg2 + [[I]] * 4096 + [[J]] * 128 + [[K]] - 7) = [[OUT]]{{\[}}[[L]] / 8];
func.func @bias_gelu(%x: memref<64x32x128xf32>, %b: memref<4096xf32>, %y: memref<64x32x128xf16>) attributes {tk.kernel} {
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
    %c = tk.cast %r : f32 to f16
    tk.store %c, %y[%i, %j, %k] : memref<64x32x128xf16>
  }
  return

// 3 x 7: no dim divides into groups of 4, the flat 21 does with a tail: full groups walk the
// flat index with vector accesses, the last one element by element.
// CHECK-LABEL: // ---- kernel odd ----
// CHECK-NEXT: // launch: grid [1, 1, 1] block [32, 1, 1] shared 0 strategy pointwise vec=4
// CHECK: for (uint32_t [[G:tcc_g[0-9]+]] = {{.*}}; [[G]] < 6;
// CHECK-NEXT: const uint32_t [[F:tcc_f[0-9]+]] = [[G]] * 4;
// CHECK-NEXT: if ([[F]] + 4 <= 21) {
// CHECK: tcc_vec<float, 4>
// CHECK: } else {
// CHECK-NOT: tcc_vec
// CHECK: if ({{tcc_f[0-9]+}} < 21) {
// CHECK: *(arg1 + {{.*}}) = {{v[0-9]+}};
}
func.func @odd(%x: memref<3x7xf32>, %y: memref<3x7xf32>) attributes {tk.kernel} {
  tk.parallel [3, 7] {
  ^bb0(%i: index, %j: index):
    %v = tk.load %x[%i, %j] : memref<3x7xf32>
    %r = tk.unary neg %v : f32
    tk.store %r, %y[%i, %j] : memref<3x7xf32>
  }
  return
}

// The input is a view 4 bytes into a program input: only 4-byte aligned, so it is loaded
// element by element, while the aligned output is still stored as float4.
// CHECK-LABEL: // ---- kernel copy ----
// CHECK-NEXT: // launch: {{.*}} strategy pointwise vec=4
// CHECK: // arg 0: memref<64xf32> (read), 4-byte aligned
// CHECK-NEXT: // arg 1: memref<64xf32> (written), 16-byte aligned
// CHECK-NOT: tcc_vec<float, 4> *>(arg0
// CHECK: const float [[V:v[0-9]+]] = *(arg0 + [[I:i[0-9]+]]);
// CHECK: *reinterpret_cast<tcc_vec<float, 4> *>(arg1 + [[I]] - 3)
func.func @copy(%x: memref<64xf32>, %y: memref<64xf32>) attributes {tk.kernel} {
  tk.parallel [64] {
  ^bb0(%i: index):
    %v = tk.load %x[%i] : memref<64xf32>
    tk.store %v, %y[%i] : memref<64xf32>
  }
  return
}
func.func @main(%in: memref<65xf32>, %out: memref<64xf32>) attributes {tk.program, tk.num_inputs = 1 : i64} {
  %v = tk.view %in {byte_offset = 4 : i64} : memref<65xf32> to memref<64xf32>
  tk.launch @copy(%v, %out) : memref<64xf32>, memref<64xf32>
  return
}
