// RUN: not tcc-opt %s -tcc-fuse=target=rocm 2>&1 | FileCheck %s --check-prefix=FUSE
// RUN: not tcc-opt %s -tcc-fuse -tcc-lower-to-kernels=target=gpu 2>&1 | FileCheck %s --check-prefix=LOWER

// The passes' target must be one they know (tcc/Passes/GemmEpilogue.h).
// FUSE: error: -tcc-fuse: unknown target 'rocm' (expected cpu or cuda)
// LOWER: error: -tcc-lower-to-kernels: unknown target 'gpu' (expected cpu or cuda)
func.func @main(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %y = tcc.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
