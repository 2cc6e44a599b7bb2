// RUN: tcc-opt %s -tcc-emit-cuda -o /dev/null | FileCheck %s

// Row reductions (the reduced dim is the contiguous one): a team of consecutive threads shares
// each row; the row's loops are split across the team in vector groups and partial results
// are combined with warp shuffles (and shared memory across the warps of a block team).

// Softmax over rows of 1000: warp teams (8 per block of 256); max propagates NaN; every lane
// gets each reduction's result and uses it in the next loop; the final loop stores float4s.
// CHECK-LABEL: // ---- kernel softmax ----
// CHECK-NEXT: // launch: grid [64, 1, 1] block [256, 1, 1] shared 0 strategy row team=32
// CHECK: TCC_EXPORT void __launch_bounds__(256) softmax(const float *__restrict__ arg0, float *__restrict__ arg1) {
// CHECK-NEXT: const uint32_t tcc_lane = threadIdx.x % 32;
// CHECK-NEXT: // tk.parallel [512] (512 teams of 32 consecutive threads, 8 per block)
// CHECK-NEXT: for (uint32_t tcc_base = (uint32_t)blockIdx.x * 8; tcc_base < 512; tcc_base += (uint32_t)gridDim.x * 8) {
// CHECK-NEXT: const uint32_t tcc_team = tcc_base + threadIdx.x / 32;
// CHECK-NEXT: const int64_t [[ROW:i[0-9]+]] = (int64_t)tcc_team;
// CHECK-NEXT: // tk.reduce max [1000] : f32 (split across the team, groups of 4, vector accesses)
// CHECK-NEXT: float [[MAX:acc[0-9]+]] = tcc_f32_from_bits(0xFF800000u);
// CHECK-NEXT: for (uint32_t [[G:tcc_g[0-9]+]] = tcc_lane; [[G]] < 250; [[G]] += 32) {
// CHECK: *reinterpret_cast<const tcc_vec<float, 4> *>(arg0 + [[ROW]] * 1000 + {{i[0-9]+}});
// CHECK: [[MAX]] = ([[V:v[0-9]+]] != [[V]] || [[V]] > [[MAX]]) ? [[V]] : [[MAX]];
// CHECK: // combine across the team (32 lanes)
// CHECK-NEXT: {
// CHECK-NEXT: const float [[O:acc[0-9]+_o]] = __shfl_xor_sync(0xffffffffu, [[MAX]], 16, 32);
// CHECK: __shfl_xor_sync(0xffffffffu, [[MAX]], 1, 32);
// CHECK: const float [[M:v[0-9]+]] = [[MAX]];
// CHECK: // tk.reduce sum [1000] : f32 (split across the team, groups of 4, vector accesses)
// CHECK: {{v[0-9]+}} - [[M]];
// CHECK: expf(
// CHECK: __shfl_xor_sync(0xffffffffu, {{acc[0-9]+}}, 16, 32);
// CHECK: // tk.parallel [1000] (split across the team, groups of 4, vector accesses)
// CHECK-NEXT: for (uint32_t [[G2:tcc_g[0-9]+]] = tcc_lane; [[G2]] < 250; [[G2]] += 32) {
// CHECK: *reinterpret_cast<tcc_vec<float, 4> *>(arg1 + [[ROW]] * 1000 + {{i[0-9]+}} - 3)
func.func @softmax(%x: memref<512x1000xf32>, %y: memref<512x1000xf32>) attributes {tk.kernel} {
  tk.parallel [512] {
  ^bb0(%i: index):
    %m = tk.reduce max [1000] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<512x1000xf32>
      tk.yield %v : f32
    } : f32
    %s = tk.reduce sum [1000] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<512x1000xf32>
      %d = tk.binary sub %v, %m : f32
      %e = tk.unary exp %d : f32
      tk.yield %e : f32
    } : f32
    tk.parallel [1000] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<512x1000xf32>
      %d = tk.binary sub %v, %m : f32
      %e = tk.unary exp %d : f32
      %r = tk.binary div %e, %s : f32
      tk.store %r, %y[%i, %j] : memref<512x1000xf32>
    }
  }
  return

// Four long rows: a block of 512 per row; warp shuffles, then the 16 warp results through
// shared memory (128 bytes: 16 floats, launched as dynamic shared memory). bf16 loads 8 at a
// time; one thread stores the row's result.
// CHECK-LABEL: // ---- kernel long_rows ----
// CHECK-NEXT: // launch: grid [4, 1, 1] block [512, 1, 1] shared 128 strategy row team=512
// CHECK: extern __shared__ __align__(16) unsigned char tcc_smem[];
// CHECK-NEXT: const uint32_t tcc_lane = threadIdx.x;
// CHECK: const bool tcc_leader = tcc_lane == 0;
// CHECK: for (uint32_t [[G:tcc_g[0-9]+]] = tcc_lane; [[G]] < 1024; [[G]] += 512) {
// CHECK: *reinterpret_cast<const tcc_vec<uint16_t, 8> *>(arg0 +
// CHECK: tcc_bf16_to_f32(
// CHECK: // combine across the block: warps, then 16 warp results
// CHECK: if ((threadIdx.x & 31u) == 0) {
// CHECK-NEXT: ((float *)(tcc_smem))[threadIdx.x >> 5] = [[ACC:acc[0-9]+]];
// CHECK-NEXT: }
// CHECK-NEXT: __syncthreads();
// CHECK-NEXT: [[ACC]] = ((float *)(tcc_smem))[0];
// CHECK-NEXT: for (uint32_t tcc_w = 1; tcc_w < 16; ++tcc_w) {
// CHECK: __syncthreads();
// CHECK: if (tcc_leader) *(arg1 + {{i[0-9]+}}) = tcc_f32_to_bf16(
}
func.func @long_rows(%x: memref<4x8192xbf16>, %y: memref<4xbf16>) attributes {tk.kernel} {
  tk.parallel [4] {
  ^bb0(%i: index):
    %s = tk.reduce sum [8192] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<4x8192xbf16>
      %f = tk.cast %v : bf16 to f32
      tk.yield %f : f32
    } : f32
    %r = tk.cast %s : f32 to bf16
    tk.store %r, %y[%i] : memref<4xbf16>
  }
  return

// Argmax over rows of 37 (no vector groups: 37 is odd); 100 rows in blocks of 8 teams: the
// last block's extra teams repeat row 99 and store nothing. Partial results travel as (value,
// position) pairs; ties go to the lower position.
// CHECK-LABEL: // ---- kernel argmax ----
// CHECK-NEXT: // launch: grid [13, 1, 1] block [256, 1, 1] shared 0 strategy row team=32
// CHECK: const bool tcc_active = tcc_base + threadIdx.x / 32 < 100;
// CHECK-NEXT: const uint32_t tcc_team = tcc_active ? tcc_base + threadIdx.x / 32 : 99;
// CHECK: const bool tcc_leader = tcc_lane == 0 && tcc_active;
// CHECK: int64_t [[AT:v[0-9]+_at]] = -1;
// CHECK: if ([[AT]] < 0 || tcc_more_extreme<float>([[Y:v[0-9]+]], [[BEST:v[0-9]+_best]], true)) {
// CHECK: const int64_t [[ATO:v[0-9]+_at_o]] = __shfl_xor_sync(0xffffffffu, [[AT]], 16, 32);
// CHECK-NEXT: if ([[ATO]] >= 0 && ([[AT]] < 0 || tcc_more_extreme<float>({{.*}}) || (!tcc_more_extreme<float>({{.*}}) && [[ATO]] < [[AT]]))) {
// CHECK: if (tcc_leader) *(arg1 + {{i[0-9]+}}) =
}
func.func @argmax(%x: memref<100x37xf32>, %y: memref<100xi64>) attributes {tk.kernel} {
  tk.parallel [100] {
  ^bb0(%i: index):
    %r = tk.arg_reduce max 37 {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<100x37xf32>
      tk.yield %v : f32
    }
    tk.store %r, %y[%i] : memref<100xi64>
  }
  return
}
