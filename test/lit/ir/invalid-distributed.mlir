// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// Verifiers of the mesh, shardings and collectives.

// expected-error @+1 {{a mesh needs at least one axis}}
module attributes {tcc.mesh = #tcc.mesh<>} {}

// -----

// expected-error @+1 {{mesh axis 'dp' has size 0; sizes must be >= 1}}
module attributes {tcc.mesh = #tcc.mesh<dp = 0>} {}

// -----

// expected-error @+1 {{mesh axis 'dp' appears twice}}
module attributes {tcc.mesh = #tcc.mesh<dp = 2, dp = 2>} {}

// -----

// expected-error @+1 {{'tcc.mesh' must be a #tcc.mesh on a module}}
module attributes {tcc.mesh = 3} {}

// -----

// expected-error @+1 {{argument 0 has a sharding but the module has no 'tcc.mesh'}}
func.func @no_mesh(%x: tensor<4xf32> {tcc.sharding = #tcc.sharding<[[dp]]>}) {
  return
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
// expected-error @+1 {{argument 0: sharding #tcc.sharding<[[dp]]> has 1 dims but the value has rank 2}}
func.func @rank(%x: tensor<4x2xf32> {tcc.sharding = #tcc.sharding<[[dp]]>}) {
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
// expected-error @+1 {{argument 0: sharding #tcc.sharding<[[tp]]> names mesh axis "tp", which the mesh #tcc.mesh<dp = 2> lacks}}
func.func @axis(%x: tensor<4xf32> {tcc.sharding = #tcc.sharding<[[tp]]>}) {
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
// expected-error @+1 {{argument 0: sharding #tcc.sharding<[[dp], [dp]]> uses mesh axis 'dp' twice}}
func.func @twice(%x: tensor<4x4xf32> {tcc.sharding = #tcc.sharding<[[dp], [dp]]>}) {
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
// expected-error @+1 {{argument 0: sharding #tcc.sharding<[[]] partial [dp, dp]> names mesh axis 'dp' twice}}
func.func @partial_twice(%x: tensor<4xf32> {tcc.sharding = #tcc.sharding<[[]] partial [dp, dp]>}) {
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
// expected-error @+1 {{result 0: sharding #tcc.sharding<[[dp]]> splits dim 0 (size 3) into 2 blocks, which does not divide it}}
func.func @divide(%x: tensor<3xf32>) -> (tensor<3xf32> {tcc.sharding = #tcc.sharding<[[dp]]>}) {
  return %x : tensor<3xf32>
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
// expected-error @+1 {{unknown tcc attribute 'tcc.shard' on argument 0}}
func.func @unknown(%x: tensor<4xf32> {tcc.shard = 1}) {
  return
}
}

// -----

func.func @collective_no_mesh(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.all_reduce' op needs a module with a 'tcc.mesh'}}
  %0 = tcc.all_reduce sum %x over ["dp"] : tensor<4xf32>
  return
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @no_axes(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.all_reduce' op needs at least one mesh axis}}
  %0 = tcc.all_reduce sum %x over [] : tensor<4xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @unknown_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.all_reduce' op names mesh axis "tp", which the mesh #tcc.mesh<dp = 2> lacks}}
  %0 = tcc.all_reduce max %x over ["tp"] : tensor<4xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @repeated_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.all_gather' op names mesh axis 'dp' twice}}
  %0 = tcc.all_gather %x dim = 0 over ["dp", "dp"] : tensor<4xf32> -> tensor<16xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @avg_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'tcc.all_reduce' op 'avg' needs a float operand}}
  %0 = tcc.all_reduce avg %x over ["dp"] : tensor<4xi32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @sum_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{'tcc.reduce_scatter' op 'sum' needs a numeric operand}}
  %0 = tcc.reduce_scatter sum %x dim = 0 over ["dp"] : tensor<4xi1> -> tensor<2xi1>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @gather_dim(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.all_gather' op dim 1 is out of range for rank 1}}
  %0 = tcc.all_gather %x dim = 1 over ["dp"] : tensor<4xf32> -> tensor<8xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @gather_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.all_gather' op result must be 'tensor<8xf32>' (dim 0 times the group size 2), got 'tensor<4xf32>'}}
  %0 = tcc.all_gather %x dim = 0 over ["dp"] : tensor<4xf32> -> tensor<4xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @scatter_divisible(%x: tensor<3xf32>) {
  // expected-error @+1 {{'tcc.reduce_scatter' op dim 0 (size 3) is not divisible by the group size 2}}
  %0 = tcc.reduce_scatter sum %x dim = 0 over ["dp"] : tensor<3xf32> -> tensor<1xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @scatter_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.reduce_scatter' op result must be 'tensor<2xf32>' (dim 0 divided by the group size 2), got 'tensor<4xf32>'}}
  %0 = tcc.reduce_scatter sum %x dim = 0 over ["dp"] : tensor<4xf32> -> tensor<4xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @all_to_all_dim(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'tcc.all_to_all' op concat_dim 2 is out of range for rank 2}}
  %0 = tcc.all_to_all %x split_dim = 0 concat_dim = 2 over ["dp"] : tensor<4x4xf32> -> tensor<2x8xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @all_to_all_divisible(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'tcc.all_to_all' op dim 0 (size 3) is not divisible by the group size 2}}
  %0 = tcc.all_to_all %x split_dim = 0 concat_dim = 1 over ["dp"] : tensor<3x4xf32> -> tensor<1x8xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @all_to_all_type(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'tcc.all_to_all' op result must be 'tensor<2x8xf32>' (split_dim divided by and concat_dim multiplied by the group size 2), got 'tensor<8x2xf32>'}}
  %0 = tcc.all_to_all %x split_dim = 0 concat_dim = 1 over ["dp"] : tensor<4x4xf32> -> tensor<8x2xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @root(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.broadcast' op root 2 is outside the group of 2 ranks}}
  %0 = tcc.broadcast %x root = 2 over ["dp"] : tensor<4xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<pp = 2>} {
func.func @peer(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.send' op peer 2 is outside mesh axis 'pp' of size 2}}
  tcc.send %x to 2 over "pp" : tensor<4xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<pp = 2>} {
func.func @recv_axis() {
  // expected-error @+1 {{'tcc.recv' op names mesh axis "dp", which the mesh #tcc.mesh<pp = 2> lacks}}
  %0 = tcc.recv from 0 over "dp" : tensor<4xf32>
  return
}
}

// -----

module attributes {tcc.mesh = #tcc.mesh<pp = 2>} {
func.func @axis_index() {
  // expected-error @+1 {{'tcc.axis_index' op names mesh axis "dp", which the mesh #tcc.mesh<pp = 2> lacks}}
  %0 = tcc.axis_index over ["dp"] : tensor<i64>
  return
}
}
