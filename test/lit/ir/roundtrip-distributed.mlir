// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// The device mesh, shardings on function arguments and results, and the collective ops.

// CHECK: module attributes {tcc.mesh = #tcc.mesh<dp = 2, tp = 2>}
module attributes {tcc.mesh = #tcc.mesh<dp = 2, tp = 2>} {
// CHECK-LABEL: func.func @collectives(
// CHECK-SAME: %arg0: tensor<4x6xf32> {tcc.sharding = #tcc.sharding<{{\[\[}}dp], []]>}
// CHECK-SAME: %arg1: tensor<8x6xf32> {tcc.sharding = #tcc.sharding<{{\[\[}}dp], []] partial [tp]>}
// CHECK-SAME: -> (tensor<4x6xf32> {tcc.sharding = #tcc.sharding<{{\[\[}}], []]>}
func.func @collectives(%x: tensor<4x6xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>},
                       %y: tensor<8x6xf32> {tcc.sharding = #tcc.sharding<[[dp], []] partial [tp]>})
    -> (tensor<4x6xf32> {tcc.sharding = #tcc.sharding<[[], []]>}, tensor<4x6xi32>) {
  // CHECK-NEXT: %0 = tcc.all_reduce sum %arg0 over ["dp"] : tensor<4x6xf32>
  %0 = tcc.all_reduce sum %x over ["dp"] : tensor<4x6xf32>
  // CHECK-NEXT: %1 = tcc.all_reduce avg %0 over ["dp", "tp"] : tensor<4x6xf32>
  %1 = tcc.all_reduce avg %0 over ["dp", "tp"] : tensor<4x6xf32>
  // CHECK-NEXT: %2 = tcc.all_gather %1 dim = 1 over ["tp"] : tensor<4x6xf32> -> tensor<4x12xf32>
  %2 = tcc.all_gather %1 dim = 1 over ["tp"] : tensor<4x6xf32> -> tensor<4x12xf32>
  // CHECK-NEXT: %3 = tcc.reduce_scatter max %2 dim = 1 over ["tp"] : tensor<4x12xf32> -> tensor<4x6xf32>
  %3 = tcc.reduce_scatter max %2 dim = 1 over ["tp"] : tensor<4x12xf32> -> tensor<4x6xf32>
  // CHECK-NEXT: %4 = tcc.all_to_all %3 split_dim = 0 concat_dim = 1 over ["dp", "tp"] : tensor<4x6xf32> -> tensor<1x24xf32>
  %4 = tcc.all_to_all %3 split_dim = 0 concat_dim = 1 over ["dp", "tp"] : tensor<4x6xf32> -> tensor<1x24xf32>
  // CHECK-NEXT: %5 = tcc.broadcast %3 root = 1 over ["dp"] : tensor<4x6xf32>
  %5 = tcc.broadcast %3 root = 1 over ["dp"] : tensor<4x6xf32>
  // CHECK-NEXT: tcc.send %5 to 1 over "dp" : tensor<4x6xf32>
  tcc.send %5 to 1 over "dp" : tensor<4x6xf32>
  // CHECK-NEXT: %6 = tcc.recv from 0 over "dp" : tensor<4x6xi32>
  %6 = tcc.recv from 0 over "dp" : tensor<4x6xi32>
  // CHECK-NEXT: %7 = tcc.axis_index over ["tp", "dp"] : tensor<i64>
  %7 = tcc.axis_index over ["tp", "dp"] : tensor<i64>
  // CHECK-NEXT: %8 = tcc.all_reduce min %6 over ["tp"] : tensor<4x6xi32>
  %8 = tcc.all_reduce min %6 over ["tp"] : tensor<4x6xi32>
  return %5, %8 : tensor<4x6xf32>, tensor<4x6xi32>
}
}
