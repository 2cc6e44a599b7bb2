// RUN: tcc-opt %s -split-input-file -tcc-shard -verify-diagnostics

// expected-error @+1 {{-tcc-shard needs a module with a 'tcc.mesh'}}
module {
}


// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @already_spmd(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'tcc.all_reduce' op is already a per-rank op: sharding takes a program of the whole mesh, without collectives}}
  %0 = tcc.all_reduce sum %x over ["dp"] : tensor<4xf32>
  return %0 : tensor<4xf32>
}
}
