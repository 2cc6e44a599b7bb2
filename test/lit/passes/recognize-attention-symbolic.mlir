// RUN: tcc-opt %s -split-input-file -tcc-recognize-attention | FileCheck %s
// RUN: tcc-opt %s -split-input-file -tcc-recognize-attention -tcc-decompose-attention=target=cuda | FileCheck %s --check-prefix=DECOMP
// RUN: tcc-opt %s -split-input-file -tcc-recognize-attention -tcc-decompose-attention=target=cpu -tcc-fuse -tcc-lower-to-kernels | FileCheck %s --check-prefix=LOWER

// Attention over symbolic batch and sequence sizes is recognised as over fixed ones: shapes are
// compared as size expressions, and causal masks that exporters compute from the sequence
// length (no constant to fold) are read as predicates over the score's row i and column j.

// triu(ones(s, s), 1) as torch exports it (j - i >= 1, selected into a bool), filled with -inf
// by masked_fill: `causal`, and the predicate's ops are gone.
// CHECK-LABEL: func.func @computed_triu(
// CHECK-NOT:   tcc.compare
// CHECK:       tcc.attention %arg0, %{{.*}}, %arg2 {causal, scale = 1.000000e+00 : f64} : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
// CHECK-NEXT:  return

// The decomposition (no fused kernel for f32 on CUDA) builds the causal triangle from iotas over
// the symbolic scores.
// DECOMP-LABEL: func.func @computed_triu(
// DECOMP:       tcc.iota dim = 3 : tensor<?x4x?x?xi64, #tcc.dims<["b", "s", "s"]>>
// DECOMP:       tcc.compare le
// DECOMP:       tcc.reduce max
// DECOMP:       tcc.matmul
// DECOMP-NOT:   tcc.attention

// On the CPU it is one tk.attention on the symbolic buffers.
// LOWER-LABEL: func.func @computed_triu(
// LOWER:       tk.attention %arg0, %{{.*}}, %arg2 -> %{{.*}} {causal, {{.*}}} : memref<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, memref<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, memref<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, memref<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
module attributes {tcc.symbols = {b = array<i64: 1, 8>, s = array<i64: 1, 64>}} {
func.func @computed_triu(%q: tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, %k: tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, %v: tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>) -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> {
  %kt = tcc.transpose %k perm = [0, 1, 3, 2] : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x8x?xf32, #tcc.dims<["b", "s"]>>
  %sc = tcc.matmul %q, %kt : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x4x8x?xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %i = tcc.iota dim = 0 : tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %j = tcc.iota dim = 1 : tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %d = tcc.binary sub %j, %i : tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %c1 = tcc.constant dense<1> : tensor<i64>
  %one = tcc.broadcast_in_dim %c1 dims = [] : tensor<i64> -> tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %ge = tcc.compare ge %d, %one : tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %ct = tcc.constant dense<true> : tensor<i1>
  %t = tcc.broadcast_in_dim %ct dims = [] : tensor<i1> -> tensor<?x?xi1, #tcc.dims<["s", "s"]>>
  %cf = tcc.constant dense<false> : tensor<i1>
  %f = tcc.broadcast_in_dim %cf dims = [] : tensor<i1> -> tensor<?x?xi1, #tcc.dims<["s", "s"]>>
  %above = tcc.select %ge, %t, %f : tensor<?x?xi1, #tcc.dims<["s", "s"]>>, tensor<?x?xi1, #tcc.dims<["s", "s"]>>
  %aboveb = tcc.broadcast_in_dim %above dims = [2, 3] : tensor<?x?xi1, #tcc.dims<["s", "s"]>> -> tensor<?x4x?x?xi1, #tcc.dims<["b", "s", "s"]>>
  %cinf = tcc.constant dense<0xFF800000> : tensor<f32>
  %ninf = tcc.broadcast_in_dim %cinf dims = [] : tensor<f32> -> tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %m = tcc.select %aboveb, %ninf, %sc : tensor<?x4x?x?xi1, #tcc.dims<["b", "s", "s"]>>, tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %e = tcc.unary exp %m : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %sum = tcc.reduce sum %e dims = [3] : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>> -> tensor<?x4x?xf32, #tcc.dims<["b", "s"]>>
  %sumb = tcc.broadcast_in_dim %sum dims = [0, 1, 2] : tensor<?x4x?xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %p = tcc.binary div %e, %sumb : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %o = tcc.matmul %p, %v : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>, tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
  return %o : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
}

}

// -----

// The same with the other triangle (keep j >= i, i.e. i - j >= 1 is removed): not causal, the
// predicate stays a boolean mask.
// CHECK-LABEL: func.func @anti_causal(
// CHECK:       tcc.compare ge
// CHECK:       tcc.attention %arg0, %{{.*}}, %arg2 mask(%{{.*}} : tensor<1x1x?x?xi1, #tcc.dims<["s", "s"]>>) {scale = 1.000000e+00 : f64}
module attributes {tcc.symbols = {b = array<i64: 1, 8>, s = array<i64: 1, 64>}} {
func.func @anti_causal(%q: tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, %k: tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, %v: tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>) -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> {
  %kt = tcc.transpose %k perm = [0, 1, 3, 2] : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x8x?xf32, #tcc.dims<["b", "s"]>>
  %sc = tcc.matmul %q, %kt : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x4x8x?xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %i = tcc.iota dim = 0 : tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %j = tcc.iota dim = 1 : tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %d = tcc.binary sub %i, %j : tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %c1 = tcc.constant dense<1> : tensor<i64>
  %one = tcc.broadcast_in_dim %c1 dims = [] : tensor<i64> -> tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %below = tcc.compare ge %d, %one : tensor<?x?xi64, #tcc.dims<["s", "s"]>>
  %belowb = tcc.broadcast_in_dim %below dims = [2, 3] : tensor<?x?xi1, #tcc.dims<["s", "s"]>> -> tensor<?x4x?x?xi1, #tcc.dims<["b", "s", "s"]>>
  %cinf = tcc.constant dense<0xFF800000> : tensor<f32>
  %ninf = tcc.broadcast_in_dim %cinf dims = [] : tensor<f32> -> tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %m = tcc.select %belowb, %ninf, %sc : tensor<?x4x?x?xi1, #tcc.dims<["b", "s", "s"]>>, tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %e = tcc.unary exp %m : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %sum = tcc.reduce sum %e dims = [3] : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>> -> tensor<?x4x?xf32, #tcc.dims<["b", "s"]>>
  %sumb = tcc.broadcast_in_dim %sum dims = [0, 1, 2] : tensor<?x4x?xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %p = tcc.binary div %e, %sumb : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %o = tcc.matmul %p, %v : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>, tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
  return %o : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
}

}

// -----

// GPT-2 as transformers writes it: the upper-left s x s corner of a constant triangle of the
// longest sequence (bias[:, :, :s, :s]: gathers of iotas; s <= 4, the triangle's side),
// where(corner, scores, -inf), and keys and values of 2 heads repeated to the 4 query heads:
// `causal`, read unrepeated. Where s may pass the triangle's side (the gathers would read
// clamped rows), the corner is no triangle: it stays a mask.
// RUN: sed 's/s = array<i64: 1, 4>/s = array<i64: 1, 64>/' %s | tcc-opt -split-input-file -tcc-recognize-attention | FileCheck %s --check-prefix=BEYOND
// BEYOND-LABEL: func.func @sliced_triangle_gqa(
// BEYOND:       tcc.attention %arg0, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<1x1x?x?xi1, #tcc.dims<["s", "s"]>>) {scale = 1.000000e+00 : f64}
// CHECK-LABEL: func.func @sliced_triangle_gqa(
// CHECK-NOT:   tcc.gather
// CHECK-NOT:   tcc.broadcast_in_dim
// CHECK:       tcc.attention %arg0, %{{.*}}, %{{.*}} {causal, scale = 1.000000e+00 : f64} : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x2x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x2x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
module attributes {tcc.symbols = {b = array<i64: 1, 8>, s = array<i64: 1, 4>}} {
func.func @sliced_triangle_gqa(%q: tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, %k2: tensor<?x2x?x8xf32, #tcc.dims<["b", "s"]>>, %v2: tensor<?x2x?x8xf32, #tcc.dims<["b", "s"]>>) -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> {
  %k2b = tcc.reshape %k2 : tensor<?x2x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x2x1x?x8xf32, #tcc.dims<["b", "s"]>>
  %kw = tcc.broadcast_in_dim %k2b dims = [0, 1, 2, 3, 4] : tensor<?x2x1x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x2x2x?x8xf32, #tcc.dims<["b", "s"]>>
  %k = tcc.reshape %kw : tensor<?x2x2x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
  %v2b = tcc.reshape %v2 : tensor<?x2x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x2x1x?x8xf32, #tcc.dims<["b", "s"]>>
  %vw = tcc.broadcast_in_dim %v2b dims = [0, 1, 2, 3, 4] : tensor<?x2x1x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x2x2x?x8xf32, #tcc.dims<["b", "s"]>>
  %v = tcc.reshape %vw : tensor<?x2x2x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
  %kt = tcc.transpose %k perm = [0, 1, 3, 2] : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x8x?xf32, #tcc.dims<["b", "s"]>>
  %sc = tcc.matmul %q, %kt : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x4x8x?xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %tri = tcc.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %rows = tcc.iota dim = 0 : tensor<?xi64, #tcc.dims<["s"]>>
  %g1 = tcc.gather %tri[%rows] axis = 2 : tensor<1x1x4x4xi1>, tensor<?xi64, #tcc.dims<["s"]>> -> tensor<1x1x?x4xi1, #tcc.dims<["s"]>>
  %cols = tcc.iota dim = 0 : tensor<?xi64, #tcc.dims<["s"]>>
  %corner = tcc.gather %g1[%cols] axis = 3 : tensor<1x1x?x4xi1, #tcc.dims<["s"]>>, tensor<?xi64, #tcc.dims<["s"]>> -> tensor<1x1x?x?xi1, #tcc.dims<["s", "s"]>>
  %cornerb = tcc.broadcast_in_dim %corner dims = [0, 1, 2, 3] : tensor<1x1x?x?xi1, #tcc.dims<["s", "s"]>> -> tensor<?x4x?x?xi1, #tcc.dims<["b", "s", "s"]>>
  %cinf = tcc.constant dense<0xFF800000> : tensor<f32>
  %ninf = tcc.broadcast_in_dim %cinf dims = [] : tensor<f32> -> tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %m = tcc.select %cornerb, %sc, %ninf : tensor<?x4x?x?xi1, #tcc.dims<["b", "s", "s"]>>, tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %e = tcc.unary exp %m : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %sum = tcc.reduce sum %e dims = [3] : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>> -> tensor<?x4x?xf32, #tcc.dims<["b", "s"]>>
  %sumb = tcc.broadcast_in_dim %sum dims = [0, 1, 2] : tensor<?x4x?xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %p = tcc.binary div %e, %sumb : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>
  %o = tcc.matmul %p, %v : tensor<?x4x?x?xf32, #tcc.dims<["b", "s", "s"]>>, tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
  return %o : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
}
}
