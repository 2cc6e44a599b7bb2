// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// Indexing ops: gather, gather_elements, gather_nd, scatter_elements and scatter_nd.

// gather: result shape is x[:axis] ++ indices ++ x[axis+1:].
// CHECK-LABEL: func.func @gather(%arg0: tensor<5x4x3xf32>, %arg1: tensor<2x6xi64>, %arg2: tensor<i32>, %arg3: tensor<1000x64xbf16>, %arg4: tensor<8x16xi64>)
// CHECK-NEXT: %0 = tcc.gather %arg0[%arg1] axis = 0 : tensor<5x4x3xf32>, tensor<2x6xi64> -> tensor<2x6x4x3xf32>
// CHECK-NEXT: %1 = tcc.gather %arg0[%arg1] axis = 1 : tensor<5x4x3xf32>, tensor<2x6xi64> -> tensor<5x2x6x3xf32>
// CHECK-NEXT: %2 = tcc.gather %arg0[%arg2] axis = 2 : tensor<5x4x3xf32>, tensor<i32> -> tensor<5x4xf32>
// CHECK-NEXT: %3 = tcc.gather %arg3[%arg4] axis = 0 : tensor<1000x64xbf16>, tensor<8x16xi64> -> tensor<8x16x64xbf16>
// CHECK-NEXT: return
func.func @gather(%x: tensor<5x4x3xf32>, %i: tensor<2x6xi64>, %s: tensor<i32>,
                  %table: tensor<1000x64xbf16>, %tokens: tensor<8x16xi64>) {
  %0 = tcc.gather %x[%i] axis = 0 : tensor<5x4x3xf32>, tensor<2x6xi64> -> tensor<2x6x4x3xf32>
  %1 = tcc.gather %x[%i] axis = 1 : tensor<5x4x3xf32>, tensor<2x6xi64> -> tensor<5x2x6x3xf32>
  %2 = tcc.gather %x[%s] axis = 2 : tensor<5x4x3xf32>, tensor<i32> -> tensor<5x4xf32>
  %3 = tcc.gather %table[%tokens] axis = 0 : tensor<1000x64xbf16>, tensor<8x16xi64> -> tensor<8x16x64xbf16>
  return
}

// gather_elements: result shape is the indices' shape.
// CHECK-LABEL: func.func @gather_elements(%arg0: tensor<3x4xi64>, %arg1: tensor<3x2xi32>, %arg2: tensor<7x4xi64>)
// CHECK-NEXT: %0 = tcc.gather_elements %arg0[%arg1] axis = 1 : tensor<3x4xi64>, tensor<3x2xi32> -> tensor<3x2xi64>
// CHECK-NEXT: %1 = tcc.gather_elements %arg0[%arg2] axis = 0 : tensor<3x4xi64>, tensor<7x4xi64> -> tensor<7x4xi64>
// CHECK-NEXT: return
func.func @gather_elements(%x: tensor<3x4xi64>, %i: tensor<3x2xi32>, %j: tensor<7x4xi64>) {
  %0 = tcc.gather_elements %x[%i] axis = 1 : tensor<3x4xi64>, tensor<3x2xi32> -> tensor<3x2xi64>
  %1 = tcc.gather_elements %x[%j] axis = 0 : tensor<3x4xi64>, tensor<7x4xi64> -> tensor<7x4xi64>
  return
}

// gather_nd: result shape is indices[:-1] ++ x[batch_dims + depth:].
// CHECK-LABEL: func.func @gather_nd(%arg0: tensor<2x3x4x5xf16>, %arg1: tensor<6x2xi64>, %arg2: tensor<2x7x3xi64>, %arg3: tensor<2x4xi32>)
// CHECK-NEXT: %0 = tcc.gather_nd %arg0[%arg1] batch_dims = 0 : tensor<2x3x4x5xf16>, tensor<6x2xi64> -> tensor<6x4x5xf16>
// CHECK-NEXT: %1 = tcc.gather_nd %arg0[%arg2] batch_dims = 1 : tensor<2x3x4x5xf16>, tensor<2x7x3xi64> -> tensor<2x7xf16>
// CHECK-NEXT: %2 = tcc.gather_nd %arg0[%arg3] batch_dims = 0 : tensor<2x3x4x5xf16>, tensor<2x4xi32> -> tensor<2xf16>
// CHECK-NEXT: return
func.func @gather_nd(%x: tensor<2x3x4x5xf16>, %i: tensor<6x2xi64>, %j: tensor<2x7x3xi64>, %k: tensor<2x4xi32>) {
  %0 = tcc.gather_nd %x[%i] batch_dims = 0 : tensor<2x3x4x5xf16>, tensor<6x2xi64> -> tensor<6x4x5xf16>
  %1 = tcc.gather_nd %x[%j] batch_dims = 1 : tensor<2x3x4x5xf16>, tensor<2x7x3xi64> -> tensor<2x7xf16>
  %2 = tcc.gather_nd %x[%k] batch_dims = 0 : tensor<2x3x4x5xf16>, tensor<2x4xi32> -> tensor<2xf16>
  return
}

// scatter_elements: every reduction; the result has the data's type.
// CHECK-LABEL: func.func @scatter_elements(%arg0: tensor<3x4xf32>, %arg1: tensor<2x4xi64>, %arg2: tensor<2x4xf32>)
// CHECK-NEXT: %0 = tcc.scatter_elements none %arg0[%arg1], %arg2 axis = 0 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
// CHECK-NEXT: %1 = tcc.scatter_elements add %arg0[%arg1], %arg2 axis = 1 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
// CHECK-NEXT: %2 = tcc.scatter_elements mul %0[%arg1], %arg2 axis = 0 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
// CHECK-NEXT: %3 = tcc.scatter_elements max %1[%arg1], %arg2 axis = 0 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
// CHECK-NEXT: %4 = tcc.scatter_elements min %arg0[%arg1], %arg2 axis = 1 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
// CHECK-NEXT: return %2, %3, %4 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
func.func @scatter_elements(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>)
    -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %0 = tcc.scatter_elements none %x[%i], %u axis = 0 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
  %1 = tcc.scatter_elements add %x[%i], %u axis = 1 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
  %2 = tcc.scatter_elements mul %0[%i], %u axis = 0 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
  %3 = tcc.scatter_elements max %1[%i], %u axis = 0 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
  %4 = tcc.scatter_elements min %x[%i], %u axis = 1 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
  return %2, %3, %4 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// scatter_nd: updates have shape indices[:-1] ++ x[depth:].
// CHECK-LABEL: func.func @scatter_nd(%arg0: tensor<4x4x4xi32>, %arg1: tensor<2x1xi64>, %arg2: tensor<2x4x4xi32>, %arg3: tensor<3x3xi64>, %arg4: tensor<3xi32>, %arg5: tensor<8xui8>, %arg6: tensor<8x1xi32>, %arg7: tensor<8xui8>)
// CHECK-NEXT: %0 = tcc.scatter_nd none %arg0[%arg1], %arg2 : tensor<4x4x4xi32>, tensor<2x1xi64>, tensor<2x4x4xi32>
// CHECK-NEXT: %1 = tcc.scatter_nd add %0[%arg3], %arg4 : tensor<4x4x4xi32>, tensor<3x3xi64>, tensor<3xi32>
// CHECK-NEXT: %2 = tcc.scatter_nd max %arg5[%arg6], %arg7 : tensor<8xui8>, tensor<8x1xi32>, tensor<8xui8>
// CHECK-NEXT: return %1, %2 : tensor<4x4x4xi32>, tensor<8xui8>
func.func @scatter_nd(%x: tensor<4x4x4xi32>, %i: tensor<2x1xi64>, %u: tensor<2x4x4xi32>,
                      %j: tensor<3x3xi64>, %v: tensor<3xi32>,
                      %y: tensor<8xui8>, %k: tensor<8x1xi32>, %w: tensor<8xui8>) -> (tensor<4x4x4xi32>, tensor<8xui8>) {
  %0 = tcc.scatter_nd none %x[%i], %u : tensor<4x4x4xi32>, tensor<2x1xi64>, tensor<2x4x4xi32>
  %1 = tcc.scatter_nd add %0[%j], %v : tensor<4x4x4xi32>, tensor<3x3xi64>, tensor<3xi32>
  %2 = tcc.scatter_nd max %y[%k], %w : tensor<8xui8>, tensor<8x1xi32>, tensor<8xui8>
  return %1, %2 : tensor<4x4x4xi32>, tensor<8xui8>
}
