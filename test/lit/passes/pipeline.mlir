// RUN: tcc-opt %s -tcc-pipeline="stages=2 micro-batches=2 stage=0 explain=true" 2>&1 | FileCheck %s --check-prefix=S0
// RUN: tcc-opt %s -tcc-pipeline="stages=2 micro-batches=2 stage=1" | FileCheck %s --check-prefix=S1
// RUN: tcc-opt %s -tcc-pipeline="stages=2 micro-batches=2 stage=0 schedule=gpipe" | FileCheck %s --check-prefix=G0
// RUN: not tcc-opt %s -tcc-pipeline="stages=2 micro-batches=2 schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=BAD

// A micro-batched step in miniature: two micro-batches' forwards (tagged) of two matrix
// products, a backward (tagged with the forward op whose product it is, as autodiff does) that
// reads the forward values of both stages. The cut falls after the first product (half the
// cost); each backward op runs on its forward op's stage; 1F1B runs one forward ahead on stage
// 0, and alternates on the last stage. @fwd: an untagged op reading forward values only (as
// a collective the sharding pass inserts) runs in that micro-batch's forward, so the next
// stage gets its result before stage 0 waits for the backward.

// S0: remark: pipeline: stage 0: forward ops 0..1 of 4 (51% of the forward's cost), 64 bytes per micro-batch cross to the next
// S0: remark: pipeline: stage 1: forward ops 2..3 of 4 (49% of the forward's cost)
// S0: remark: pipeline: 4 values cross stages per step (256 bytes, each sent once per stage that reads it)
// S0-LABEL: func.func @main(%arg0
// S0: %[[H0:.*]] = tcc.matmul
// S0-NEXT: tcc.send %[[H0]] to 1 over "pp" :
// S0: %[[H1:.*]] = tcc.matmul
// S0-NEXT: tcc.send %[[H1]] to 1 over "pp" tag 1 :
// S0-NEXT: %[[E0:.*]] = tcc.recv from 1 over "pp" tag 2
// S0-NEXT: tcc.binary mul %[[E0]], %[[H0]]
// S0-NEXT: %[[E1:.*]] = tcc.recv from 1 over "pp" tag 3
// S0-NEXT: tcc.binary mul %[[E1]], %[[H1]]
// S0: %[[G:.*]] = tcc.broadcast %{{.*}} root = 0 over ["pp"]
// S0: %[[Z:.*]] = tcc.constant dense<0.000000e+00> : tensor<f32>
// S0-NEXT: %[[L:.*]] = tcc.broadcast %[[Z]] root = 1 over ["pp"]
// S0-NEXT: return %[[G]], %[[L]]

// S1-LABEL: func.func @main(%arg0
// S1-NEXT: %[[A:.*]] = tcc.recv from 0 over "pp" :
// S1-NEXT: %[[Y0:.*]] = tcc.matmul %[[A]], %arg2
// S1-NEXT: %[[L0:.*]] = tcc.reduce sum %[[Y0]]
// S1-NEXT: %[[D0:.*]] = tcc.binary mul %[[Y0]], %[[Y0]]
// S1-NEXT: %[[E0:.*]] = tcc.matmul %[[D0]], %arg2
// S1-NEXT: tcc.send %[[E0]] to 0 over "pp" tag 2
// S1-NEXT: %[[B:.*]] = tcc.recv from 0 over "pp" tag 1
// S1-NEXT: %[[Y1:.*]] = tcc.matmul %[[B]], %arg2
// S1-NEXT: %[[L1:.*]] = tcc.reduce sum %[[Y1]]
// S1-NEXT: %[[L:.*]] = tcc.binary add %[[L0]], %[[L1]]
// S1: tcc.send %{{.*}} to 0 over "pp" tag 3
// S1: tcc.broadcast %{{.*}} root = 0 over ["pp"]
// S1-NEXT: tcc.broadcast %[[L]] root = 1 over ["pp"]

// GPipe: both forwards, then both backwards, on every stage.
// G0-LABEL: func.func @main(%arg0
// G0: tcc.send %{{.*}} to 1 over "pp" :
// G0: tcc.send %{{.*}} to 1 over "pp" tag 1
// G0-NEXT: tcc.recv from 1 over "pp" tag 2

// S0-LABEL: func.func @fwd(
// S0: %[[H:.*]] = tcc.matmul
// S0-NEXT: %[[N:.*]] = tcc.unary neg %[[H]] {tcc.micro_batch = 0 : i64}
// S0-NEXT: tcc.send %[[N]] to 1 over "pp" :
// S0: tcc.matmul
// S0-NEXT: tcc.unary neg {{.*}} {tcc.micro_batch = 2 : i64}
// S0-NEXT: tcc.send {{.*}} to 1 over "pp" tag 1
// S0-NEXT: tcc.recv from 1 over "pp" tag 2

// BAD: -tcc-pipeline: schedule 'zigzag' is not gpipe or 1f1b

module attributes {tcc.mesh = #tcc.mesh<pp = 2>} {
func.func @main(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<f32>) {
  %x0 = tcc.slice %x start = [0, 0] limit = [2, 8] stride = [1, 1] {tcc.micro_batch = 0 : i64, tcc.forward_index = 0 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
  %h0 = tcc.matmul %x0, %w1 {tcc.micro_batch = 0 : i64, tcc.forward_index = 1 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %y0 = tcc.matmul %h0, %w2 {tcc.micro_batch = 0 : i64, tcc.forward_index = 2 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %l0 = tcc.reduce sum %y0 dims = [0, 1] {tcc.micro_batch = 0 : i64, tcc.forward_index = 3 : i64} : tensor<2x8xf32> -> tensor<f32>
  %x1 = tcc.slice %x start = [2, 0] limit = [4, 8] stride = [1, 1] {tcc.micro_batch = 1 : i64, tcc.forward_index = 0 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
  %h1 = tcc.matmul %x1, %w1 {tcc.micro_batch = 1 : i64, tcc.forward_index = 1 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %y1 = tcc.matmul %h1, %w2 {tcc.micro_batch = 1 : i64, tcc.forward_index = 2 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %l1 = tcc.reduce sum %y1 dims = [0, 1] {tcc.micro_batch = 1 : i64, tcc.forward_index = 3 : i64} : tensor<2x8xf32> -> tensor<f32>
  %l = tcc.binary add %l0, %l1 : tensor<f32>
  %d0 = tcc.binary mul %y0, %y0 {tcc.micro_batch = 0 : i64, tcc.backward_of = 3 : i64} : tensor<2x8xf32>
  %e0 = tcc.matmul %d0, %w2 {tcc.micro_batch = 0 : i64, tcc.backward_of = 2 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %f0 = tcc.binary mul %e0, %h0 {tcc.micro_batch = 0 : i64, tcc.backward_of = 1 : i64} : tensor<2x8xf32>
  %d1 = tcc.binary mul %y1, %y1 {tcc.micro_batch = 1 : i64, tcc.backward_of = 3 : i64} : tensor<2x8xf32>
  %e1 = tcc.matmul %d1, %w2 {tcc.micro_batch = 1 : i64, tcc.backward_of = 2 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %f1 = tcc.binary mul %e1, %h1 {tcc.micro_batch = 1 : i64, tcc.backward_of = 1 : i64} : tensor<2x8xf32>
  %g = tcc.binary add %f0, %f1 : tensor<2x8xf32>
  return %g, %l : tensor<2x8xf32>, tensor<f32>
}
func.func @fwd(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<f32>) {
  %x0 = tcc.slice %x start = [0, 0] limit = [2, 8] stride = [1, 1] {tcc.micro_batch = 0 : i64, tcc.forward_index = 0 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
  %h0 = tcc.matmul %x0, %w1 {tcc.micro_batch = 0 : i64, tcc.forward_index = 1 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %n0 = tcc.unary neg %h0 : tensor<2x8xf32>
  %y0 = tcc.matmul %n0, %w2 {tcc.micro_batch = 0 : i64, tcc.forward_index = 2 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %l0 = tcc.reduce sum %y0 dims = [0, 1] {tcc.micro_batch = 0 : i64, tcc.forward_index = 3 : i64} : tensor<2x8xf32> -> tensor<f32>
  %x1 = tcc.slice %x start = [2, 0] limit = [4, 8] stride = [1, 1] {tcc.micro_batch = 1 : i64, tcc.forward_index = 0 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
  %h1 = tcc.matmul %x1, %w1 {tcc.micro_batch = 1 : i64, tcc.forward_index = 1 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %n1 = tcc.unary neg %h1 : tensor<2x8xf32>
  %y1 = tcc.matmul %n1, %w2 {tcc.micro_batch = 1 : i64, tcc.forward_index = 2 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %l1 = tcc.reduce sum %y1 dims = [0, 1] {tcc.micro_batch = 1 : i64, tcc.forward_index = 3 : i64} : tensor<2x8xf32> -> tensor<f32>
  %l = tcc.binary add %l0, %l1 : tensor<f32>
  %d0 = tcc.binary mul %y0, %y0 {tcc.micro_batch = 0 : i64, tcc.backward_of = 3 : i64} : tensor<2x8xf32>
  %e0 = tcc.matmul %d0, %w2 {tcc.micro_batch = 0 : i64, tcc.backward_of = 2 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %f0 = tcc.binary mul %e0, %h0 {tcc.micro_batch = 0 : i64, tcc.backward_of = 1 : i64} : tensor<2x8xf32>
  %d1 = tcc.binary mul %y1, %y1 {tcc.micro_batch = 1 : i64, tcc.backward_of = 3 : i64} : tensor<2x8xf32>
  %e1 = tcc.matmul %d1, %w2 {tcc.micro_batch = 1 : i64, tcc.backward_of = 2 : i64} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %f1 = tcc.binary mul %e1, %h1 {tcc.micro_batch = 1 : i64, tcc.backward_of = 1 : i64} : tensor<2x8xf32>
  %g = tcc.binary add %f0, %f1 : tensor<2x8xf32>
  return %g, %l : tensor<2x8xf32>, tensor<f32>
}
}
