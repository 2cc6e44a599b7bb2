// RUN: tcc-opt %s -tcc-shard=rank=2 -verify-diagnostics

// expected-error @+1 {{-tcc-shard: rank 2 is outside the mesh's 2 ranks}}
module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
}
