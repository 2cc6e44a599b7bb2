// RUN: tcc-opt %s -split-input-file -tcc-fuse -tcc-lower-to-kernels | FileCheck %s

// ZeRO-3's parameter gathers are prefetched one gather ahead, as FSDP does: each starts just
// before the first use of the previous one's output, so it runs while the previous layer
// computes, and a tk.wait finishes it just before its own first use. Its output buffer's alloc
// moves up with it. The first gather, having nothing to overlap but the second's start, is
// async too.

// CHECK-LABEL: func.func @main
// CHECK: tk.collective "all_gather" sum %arg1, %[[A1:[0-9]+]] dim = 0 dim2 = 0 over ["dp"] {async}
// CHECK-NEXT: tk.alloc
// CHECK-NEXT: %[[A2:[0-9]+]] = tk.alloc
// CHECK-NEXT: tk.collective "all_gather" sum %arg2, %[[A2]] dim = 0 dim2 = 0 over ["dp"] {async}
// CHECK-NEXT: tk.wait %arg1, %[[A1]]
// CHECK-NEXT: tk.gemm %arg0, %[[A1]], %[[H:[0-9]+]] :
// CHECK-NEXT: tk.alloc
// CHECK-NEXT: %[[A3:[0-9]+]] = tk.alloc
// CHECK-NEXT: tk.collective "all_gather" sum %arg3, %[[A3]] dim = 1 dim2 = 0 over ["dp"] {async}
// CHECK-NEXT: tk.wait %arg2, %[[A2]]
// CHECK-NEXT: tk.gemm %[[H]], %[[A2]], %[[Y:[0-9]+]] :
// CHECK-NEXT: tk.wait %arg3, %[[A3]]
// CHECK-NEXT: tk.gemm %[[Y]], %[[A3]], %arg4
module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @main(%x: tensor<4x4xf32>, %w1: tensor<2x4xf32>, %w2: tensor<2x4xf32>, %w3: tensor<4x2xf32>) -> (tensor<4x4xf32>) {
  %a1 = tcc.all_gather %w1 dim = 0 over ["dp"] : tensor<2x4xf32> -> tensor<4x4xf32>
  %h = tcc.matmul %x, %a1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %a2 = tcc.all_gather %w2 dim = 0 over ["dp"] : tensor<2x4xf32> -> tensor<4x4xf32>
  %y = tcc.matmul %h, %a2 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %a3 = tcc.all_gather %w3 dim = 1 over ["dp"] : tensor<4x2xf32> -> tensor<4x4xf32>
  %z = tcc.matmul %y, %a3 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %z : tensor<4x4xf32>
}
}

// -----

// A gather whose input is written in between (here an output the program fills first) stays
// where it is.
// CHECK-LABEL: func.func @main
// CHECK: tk.collective "all_gather" sum %arg1, %[[A1:.*]] dim = 0 dim2 = 0 over ["dp"] :
// CHECK-NEXT: tk.gemm %arg0, %[[A1]], %arg2
// CHECK-NEXT: tk.gemm %arg0, %arg0, %arg3
// CHECK-NEXT: tk.collective "all_gather" sum %arg3, %arg4 dim = 0 dim2 = 0 over ["dp"] :
// CHECK-NEXT: return
module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @main(%x: tensor<4x4xf32>, %w1: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>) {
  %a1 = tcc.all_gather %w1 dim = 0 over ["dp"] : tensor<2x4xf32> -> tensor<4x4xf32>
  %h = tcc.matmul %x, %a1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %s = tcc.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %a2 = tcc.all_gather %s dim = 0 over ["dp"] : tensor<4x4xf32> -> tensor<8x4xf32>
  return %h, %s, %a2 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>
}
}

// -----

// A shard prepared by one op (ZeRO-3 transposes a weight's shard before gathering it) moves up
// with its gather when what that op reads is ready.
// CHECK-LABEL: func.func @main
// CHECK: tk.collective "all_gather" sum %arg1, %[[A1:[0-9]+]] dim = 0 dim2 = 0 over ["dp"] {async}
// CHECK: tk.launch @{{.*}}transpose(%arg2, %[[T:[0-9]+]])
// CHECK: tk.collective "all_gather" sum %[[T]], %[[A2:[0-9]+]] dim = 1 dim2 = 0 over ["dp"] {async}
// CHECK-NEXT: tk.wait %arg1, %[[A1]]
// CHECK-NEXT: tk.gemm %arg0, %[[A1]], %[[H:[0-9]+]] :
// CHECK-NEXT: tk.wait %[[T]], %[[A2]]
// CHECK-NEXT: tk.gemm %[[H]], %[[A2]]
module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @main(%x: tensor<4x4xf32>, %w1: tensor<2x4xf32>, %w2: tensor<2x4xf32>) -> (tensor<4x4xf32>) {
  %a1 = tcc.all_gather %w1 dim = 0 over ["dp"] : tensor<2x4xf32> -> tensor<4x4xf32>
  %h = tcc.matmul %x, %a1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %t = tcc.transpose %w2 perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %a2 = tcc.all_gather %t dim = 1 over ["dp"] : tensor<4x2xf32> -> tensor<4x4xf32>
  %y = tcc.matmul %h, %a2 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
}
