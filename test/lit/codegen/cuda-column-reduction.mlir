// RUN: tcc-opt %s -tcc-emit-cuda -o /dev/null | FileCheck %s

// Column reductions (the reduced dim is not the contiguous one, the kept innermost dim is):
// consecutive threads (threadIdx.x) take consecutive outputs, so every load of a warp is one
// contiguous segment; with few outputs, the blockDim.y threads of a column split the reduced
// loop and combine through shared memory.

// 256 columns of 4096: blocks of 32 columns x 16 threads each.
// CHECK-LABEL: // ---- kernel column_sum ----
// CHECK-NEXT: // launch: grid [8, 1, 1] block [32, 16, 1] shared 4096 strategy column team=16
// CHECK: extern __shared__ __align__(16) unsigned char tcc_smem[];
// CHECK-NEXT: const uint32_t tcc_lane = threadIdx.y;
// CHECK-NEXT: // tk.parallel [256] (256 teams of 16 threads of a column, 32 per block)
// CHECK-NEXT: for (uint32_t tcc_base = (uint32_t)blockIdx.x * 32; tcc_base < 256; tcc_base += (uint32_t)gridDim.x * 32) {
// CHECK-NEXT: const uint32_t tcc_team = tcc_base + threadIdx.x;
// CHECK-NEXT: const int64_t [[COL:i[0-9]+]] = (int64_t)tcc_team;
// CHECK: // tk.reduce sum [4096] : f32 (split across the team)
// CHECK-NEXT: float [[ACC:acc[0-9]+]] = 0.0f;
// CHECK-NEXT: for (uint32_t [[G:tcc_g[0-9]+]] = tcc_lane; [[G]] < 4096; [[G]] += 16) {
// CHECK-NOT: tcc_vec
// CHECK: = *(arg0 + {{i[0-9]+}} * 256 + [[COL]]);
// CHECK: // combine across the team (the 16 threads of a column)
// CHECK-NEXT: ((float *)(tcc_smem))[threadIdx.y * 32 + threadIdx.x] = [[ACC]];
// CHECK-NEXT: __syncthreads();
// CHECK-NEXT: [[ACC]] = ((float *)(tcc_smem))[threadIdx.x];
// CHECK-NEXT: for (uint32_t tcc_w = 1; tcc_w < 16; ++tcc_w) {
// CHECK-NEXT: {
// CHECK-NEXT: const float [[O:acc[0-9]+_o]] = ((float *)(tcc_smem))[tcc_w * 32 + threadIdx.x];
// CHECK-NEXT: [[ACC]] = [[ACC]] + [[O]];
// CHECK: __syncthreads();
// CHECK: if (tcc_leader) *(arg1 + [[COL]]) =
func.func @column_sum(%x: memref<4096x256xf32>, %y: memref<256xf32>) attributes {tk.kernel} {
  tk.parallel [256] {
  ^bb0(%j: index):
    %s = tk.reduce sum [4096] {
    ^bb0(%i: index):
      %v = tk.load %x[%i, %j] : memref<4096x256xf32>
      tk.yield %v : f32
    } : f32
    tk.store %s, %y[%j] : memref<256xf32>
  }
  return
}

// 65536 columns: enough outputs for one thread each, the loop over rows stays sequential.
// CHECK-LABEL: // ---- kernel many_columns ----
// CHECK-NEXT: // launch: grid [256, 1, 1] block [256, 1, 1] shared 0 strategy thread
// CHECK: // tk.parallel [65536] (one thread per iteration)
// CHECK-NEXT: for (uint32_t [[G:tcc_g[0-9]+]] = (uint32_t)blockIdx.x * blockDim.x + threadIdx.x; [[G]] < 65536;
// CHECK: // tk.reduce max [64] : f32
// CHECK-NEXT: float [[ACC:acc[0-9]+]] = tcc_f32_from_bits(0xFF800000u);
// CHECK-NEXT: {
// CHECK-NEXT: for (int64_t [[I:i[0-9]+]] = 0; [[I]] < 64; ++[[I]]) {
// CHECK-NEXT: const float [[V:v[0-9]+]] = *(arg0 + [[I]] * 65536 + {{i[0-9]+}});
func.func @many_columns(%x: memref<64x65536xf32>, %y: memref<65536xf32>) attributes {tk.kernel} {
  tk.parallel [65536] {
  ^bb0(%j: index):
    %s = tk.reduce max [64] {
    ^bb0(%i: index):
      %v = tk.load %x[%i, %j] : memref<64x65536xf32>
      tk.yield %v : f32
    } : f32
    tk.store %s, %y[%j] : memref<65536xf32>
  }
  return
}
