// RUN: tcc-opt %s -tcc-fuse -tcc-lower-to-kernels | FileCheck %s

// Collectives are library steps on whole buffers. A reduction whose result is needed only
// later runs asynchronously: it starts where the program reaches it and a tk.wait finishes it
// just before the first op touching its buffers, so the independent GEMM overlaps it. A
// reduction used at once, and gathers, block.

// CHECK-LABEL: func.func @main
// CHECK: tk.gemm
// CHECK: tk.collective "all_reduce" sum %[[G:.*]], %[[R:.*]] dim = 0 dim2 = 0 over ["dp"] {async} : memref<4x4xf32>, memref<4x4xf32>
// CHECK-NEXT: tk.gemm %arg2, %arg2, %arg3
// CHECK-NEXT: tk.wait %[[G]], %[[R]] : memref<4x4xf32>, memref<4x4xf32>
// CHECK-NEXT: tk.launch @k0_gemm_epilogue(%arg3, %[[R]])
// CHECK-NEXT: tk.collective "all_gather" sum %arg3, %arg4 dim = 1 dim2 = 0 over ["dp"] : memref<4x4xf32>, memref<4x8xf32>
// CHECK-NOT: tk.wait

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @main(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>, %z: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x8xf32>) {
  %g = tcc.matmul %x, %y : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %r = tcc.all_reduce sum %g over ["dp"] : tensor<4x4xf32>
  %h = tcc.matmul %z, %z : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %s = tcc.binary add %r, %h : tensor<4x4xf32>
  %a = tcc.all_gather %s dim = 1 over ["dp"] : tensor<4x4xf32> -> tensor<4x8xf32>
  return %s, %a : tensor<4x4xf32>, tensor<4x8xf32>
}
}
