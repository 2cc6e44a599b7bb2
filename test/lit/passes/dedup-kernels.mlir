// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels -canonicalize -cse -tcc-dedup-kernels | FileCheck %s
// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels -canonicalize -cse | FileCheck %s --check-prefix=BEFORE

// Two steps of a recurrence, as an unrolled loop leaves them: each reads its own row of x
// (a contiguous slice at a compile-time start) in the epilogue of a matmul. Each row is a view
// of x at its byte offset (row 1: 32 bytes, row 2: 64), so the two epilogue kernels are the
// same function, and -tcc-dedup-kernels keeps one: both launches call it.
// BEFORE-COUNT-2: func.func @k{{[0-9]+}}_gemm_epilogue
// CHECK:     func.func @[[K:k[0-9]+_gemm_epilogue]](%{{.*}}: memref<1x8xf32>, %{{.*}}: memref<1x8xf32>)
// CHECK-NOT: tk.constant 1 : i64
// CHECK:       tk.unary tanh
// CHECK-NOT: func.func @k
// CHECK:     func.func @steps(%[[X:.*]]: memref<4x8xf32>,
// CHECK:       %[[ROW1:.*]] = tk.view %[[X]] {byte_offset = 32 : i64} : memref<4x8xf32> to memref<1x8xf32>
// CHECK:       tk.launch @[[K]](%{{.*}}, %[[ROW1]])
// CHECK:       %[[ROW2:.*]] = tk.view %[[X]] {byte_offset = 64 : i64} : memref<4x8xf32> to memref<1x8xf32>
// CHECK:       tk.launch @[[K]](%{{.*}}, %[[ROW2]])
func.func @steps(%x: tensor<4x8xf32>, %h0: tensor<1x8xf32>, %w: tensor<8x8xf32>) -> tensor<1x8xf32> {
  %c0 = tcc.constant dense<0> : tensor<i64>
  %c1 = tcc.constant dense<1> : tensor<i64>
  %c2 = tcc.constant dense<2> : tensor<i64>
  %s0 = tcc.dynamic_slice %x[%c1, %c0] sizes = [1, 8] : tensor<4x8xf32>, tensor<i64>, tensor<i64> -> tensor<1x8xf32>
  %p0 = tcc.matmul %h0, %w : tensor<1x8xf32>, tensor<8x8xf32> -> tensor<1x8xf32>
  %a0 = tcc.binary add %s0, %p0 : tensor<1x8xf32>
  %h1 = tcc.unary tanh %a0 : tensor<1x8xf32>
  %s1 = tcc.dynamic_slice %x[%c2, %c0] sizes = [1, 8] : tensor<4x8xf32>, tensor<i64>, tensor<i64> -> tensor<1x8xf32>
  %p1 = tcc.matmul %h1, %w : tensor<1x8xf32>, tensor<8x8xf32> -> tensor<1x8xf32>
  %a1 = tcc.binary add %s1, %p1 : tensor<1x8xf32>
  %h2 = tcc.unary tanh %a1 : tensor<1x8xf32>
  return %h2 : tensor<1x8xf32>
}
