// RUN: tcc-opt %s -tcc-shard=rank=3 | FileCheck %s
// RUN: tcc-opt %s -tcc-shard="rank=0 explain=true" 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN

// Attention on a dp x tp mesh: the batch over dp, the query heads over tp (Megatron's heads),
// grouped-query keys and values (2 heads for 4) over tp as well, a padding mask over dp.
// Every rank attends its own heads of its own sequences: no collective. Rank 3 (dp 1, tp 1)
// holds 2 sequences, query heads 2-3 and key/value head 1.

// CHECK-LABEL: func.func @heads(%arg0: tensor<2x2x8x16xf32>, %arg1: tensor<2x1x8x16xf32>, %arg2: tensor<2x1x8x16xf32>, %arg3: tensor<2x1x1x8xi1>) -> tensor<2x2x8x16xf32>
// CHECK-NEXT: %[[O:.*]] = tcc.attention %arg0, %arg1, %arg2 mask(%arg3 : tensor<2x1x1x8xi1>) {causal, scale = 2.500000e-01 : f64} : tensor<2x2x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32> -> tensor<2x2x8x16xf32>
// CHECK-NEXT: return %[[O]]

// Query rows split over tp with whole keys (sequence parallelism of the queries): the rows
// stay split, no collective.
// CHECK-LABEL: func.func @rows(%arg0: tensor<4x4x16xf32>, %arg1: tensor<4x8x16xf32>) -> tensor<4x4x16xf32>
// CHECK-NEXT: %[[R:.*]] = tcc.attention %arg0, %arg1, %arg1 {scale = 1.000000e+00 : f64} : tensor<4x4x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32> -> tensor<4x4x16xf32>
// CHECK-NEXT: return %[[R]]

// Keys split along their length: gathered first (the softmax needs every key of a row).
// CHECK-LABEL: func.func @keys(%arg0: tensor<4x8x16xf32>, %arg1: tensor<4x4x16xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[K:.*]] = tcc.all_gather %arg1 dim = 1 over ["tp"]
// CHECK-NEXT: tcc.attention %arg0, %[[K]], %[[K]]

// The gradient keeps the batch and head splits: each rank differentiates its own heads.
// CHECK-LABEL: func.func @grad_heads(%arg0: tensor<2x2x8x16xf32>, %arg1: tensor<2x1x8x16xf32>, %arg2: tensor<2x2x8x16xf32>, %arg3: tensor<2x2x8x16xf32>) -> (tensor<2x2x8x16xf32>, tensor<2x1x8x16xf32>)
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = tcc.attention_grad %arg0, %arg1, %arg1, %arg2, %arg3 {causal, scale = 2.500000e-01 : f64} : tensor<2x2x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32> -> tensor<2x2x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32>
// CHECK-NEXT: return

// Split query rows are gathered for the gradient: dK sums over every row.
// CHECK-LABEL: func.func @grad_rows(
// CHECK:      tcc.all_gather %arg0 dim = 1 over ["tp"]
// CHECK:      tcc.attention_grad {{.*}} -> tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>

// EXPLAIN: remark: sharding: tcc.attention at loc("attn"): {{\[\[}}dp], [tp], [], []], {{\[\[}}dp], [tp], [], []], {{\[\[}}dp], [tp], [], []], {{\[\[}}dp], [], [], []] -> {{\[\[}}dp], [tp], [], []] (attention: batch dims and query rows keep q's split

module attributes {tcc.mesh = #tcc.mesh<dp = 2, tp = 2>} {
func.func @heads(%q: tensor<4x4x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>},
                 %k: tensor<4x2x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>},
                 %v: tensor<4x2x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>},
                 %m: tensor<4x1x1x8xi1> {tcc.sharding = #tcc.sharding<[[dp], [], [], []]>})
    -> (tensor<4x4x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>}) {
  %o = tcc.attention %q, %k, %v mask(%m : tensor<4x1x1x8xi1>) {causal, scale = 0.25 : f64} : tensor<4x4x8x16xf32>, tensor<4x2x8x16xf32>, tensor<4x2x8x16xf32> -> tensor<4x4x8x16xf32> loc("attn")
  return %o : tensor<4x4x8x16xf32>
}

func.func @rows(%q: tensor<4x8x16xf32> {tcc.sharding = #tcc.sharding<[[], [tp], []]>},
                %k: tensor<4x8x16xf32>)
    -> (tensor<4x8x16xf32> {tcc.sharding = #tcc.sharding<[[], [tp], []]>}) {
  %o = tcc.attention %q, %k, %k {scale = 1.0 : f64} : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32> -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}

func.func @keys(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32> {tcc.sharding = #tcc.sharding<[[], [tp], []]>})
    -> tensor<4x8x16xf32> {
  %o = tcc.attention %q, %k, %k {scale = 1.0 : f64} : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32> -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}

func.func @grad_heads(%q: tensor<4x4x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>},
                      %k: tensor<4x2x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>},
                      %o: tensor<4x4x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>},
                      %g: tensor<4x4x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>})
    -> (tensor<4x4x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>},
        tensor<4x2x8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>}) {
  %dq, %dk, %dv = tcc.attention_grad %q, %k, %k, %o, %g {causal, scale = 0.25 : f64} : tensor<4x4x8x16xf32>, tensor<4x2x8x16xf32>, tensor<4x2x8x16xf32>, tensor<4x4x8x16xf32>, tensor<4x4x8x16xf32> -> tensor<4x4x8x16xf32>, tensor<4x2x8x16xf32>, tensor<4x2x8x16xf32>
  return %dq, %dk : tensor<4x4x8x16xf32>, tensor<4x2x8x16xf32>
}

func.func @grad_rows(%q: tensor<4x8x16xf32> {tcc.sharding = #tcc.sharding<[[], [tp], []]>},
                     %k: tensor<4x8x16xf32>, %o: tensor<4x8x16xf32>, %g: tensor<4x8x16xf32>)
    -> tensor<4x8x16xf32> {
  %dq, %dk, %dv = tcc.attention_grad %q, %k, %k, %o, %g {scale = 1.0 : f64} : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32> -> tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>
  return %dk : tensor<4x8x16xf32>
}
}
