// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// With no start indices (a 0-d operand) dynamic_slice and dynamic_update_slice print no
// dangling `,` before the (empty) start types, and the printed form parses back.


// CHECK-LABEL: func.func @rank0(%arg0: tensor<f32>, %arg1: tensor<f32>) -> (tensor<f32>, tensor<f32>)
// CHECK-NEXT: %0 = tcc.dynamic_slice %arg0[] sizes = [] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %1 = tcc.dynamic_update_slice %arg0, %arg1[] : tensor<f32>, tensor<f32>
// CHECK-NEXT: return %0, %1 : tensor<f32>, tensor<f32>
func.func @rank0(%x: tensor<f32>, %u: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %0 = "tcc.dynamic_slice"(%x) <{sizes = array<i64>}> : (tensor<f32>) -> tensor<f32>
  %1 = "tcc.dynamic_update_slice"(%x, %u) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}
