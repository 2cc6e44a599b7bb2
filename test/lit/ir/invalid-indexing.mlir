// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// Result-type inference of gather, gather_elements, gather_nd, scatter_elements and scatter_nd.

// Indices are i32 or i64 tensors.
func.func @gather_float_indices(%x: tensor<5x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{'tcc.gather' op operand #1 must be tensor with static or symbolic (#tcc.dims) dims of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = tcc.gather %x[%i] axis = 0 : tensor<5x4xf32>, tensor<3xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_unsigned_indices(%x: tensor<5x4xf32>, %i: tensor<3xui32>) {
  // expected-error @+1 {{'tcc.gather' op operand #1 must be tensor with static or symbolic (#tcc.dims) dims of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xui32>'}}
  %0 = tcc.gather %x[%i] axis = 0 : tensor<5x4xf32>, tensor<3xui32> -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_axis(%x: tensor<5x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{'tcc.gather' op failed to infer returned types}}
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = tcc.gather %x[%i] axis = 2 : tensor<5x4xf32>, tensor<3xi64> -> tensor<5x4x3xf32>
  return
}

// -----

func.func @gather_negative_axis(%x: tensor<5x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{'tcc.gather' op failed to infer returned types}}
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %0 = tcc.gather %x[%i] axis = -1 : tensor<5x4xf32>, tensor<3xi64> -> tensor<5x3xf32>
  return
}

// -----

func.func @gather_wrong_result(%x: tensor<5x4xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+2 {{'tcc.gather' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.gather' op inferred type(s) 'tensor<5x2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x3x4xf32>'}}
  %0 = tcc.gather %x[%i] axis = 1 : tensor<5x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return
}

// -----

func.func @gather_elements_axis(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>) {
  // expected-error @+2 {{'tcc.gather_elements' op failed to infer returned types}}
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = tcc.gather_elements %x[%i] axis = 2 : tensor<3x4xf32>, tensor<3x2xi64> -> tensor<3x2xf32>
  return
}

// -----

func.func @gather_elements_rank(%x: tensor<3x4xf32>, %i: tensor<6xi64>) {
  // expected-error @+2 {{'tcc.gather_elements' op failed to infer returned types}}
  // expected-error @+1 {{indices rank 1 differs from data rank 2}}
  %0 = tcc.gather_elements %x[%i] axis = 0 : tensor<3x4xf32>, tensor<6xi64> -> tensor<6xf32>
  return
}

// -----

func.func @gather_nd_scalar_indices(%x: tensor<3x4xf32>, %i: tensor<i64>) {
  // expected-error @+2 {{'tcc.gather_nd' op failed to infer returned types}}
  // expected-error @+1 {{indices must have rank >= 1}}
  %0 = tcc.gather_nd %x[%i] batch_dims = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<f32>
  return
}

// -----

func.func @gather_nd_batch_dims(%x: tensor<3x4xf32>, %i: tensor<3x1xi64>) {
  // expected-error @+2 {{'tcc.gather_nd' op failed to infer returned types}}
  // expected-error @+1 {{batch_dims 2 is out of range}}
  %0 = tcc.gather_nd %x[%i] batch_dims = 2 : tensor<3x4xf32>, tensor<3x1xi64> -> tensor<3xf32>
  return
}

// -----

func.func @gather_nd_negative_batch_dims(%x: tensor<3x4xf32>, %i: tensor<3x1xi64>) {
  // expected-error @+2 {{'tcc.gather_nd' op failed to infer returned types}}
  // expected-error @+1 {{batch_dims -1 is out of range}}
  %0 = tcc.gather_nd %x[%i] batch_dims = -1 : tensor<3x4xf32>, tensor<3x1xi64> -> tensor<3xf32>
  return
}

// -----

// The index depth (last dim of indices) is larger than the data rank.
func.func @gather_nd_depth(%x: tensor<3x4xf32>, %i: tensor<5x3xi64>) {
  // expected-error @+2 {{'tcc.gather_nd' op failed to infer returned types}}
  // expected-error @+1 {{index depth 3 does not fit data rank 2 with 0 batch dims}}
  %0 = tcc.gather_nd %x[%i] batch_dims = 0 : tensor<3x4xf32>, tensor<5x3xi64> -> tensor<5xf32>
  return
}

// -----

func.func @gather_nd_depth_with_batch(%x: tensor<2x3x4xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+2 {{'tcc.gather_nd' op failed to infer returned types}}
  // expected-error @+1 {{index depth 3 does not fit data rank 3 with 1 batch dims}}
  %0 = tcc.gather_nd %x[%i] batch_dims = 1 : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<2xf32>
  return
}

// -----

func.func @gather_nd_zero_depth(%x: tensor<3x4xf32>, %i: tensor<5x0xi64>) {
  // expected-error @+2 {{'tcc.gather_nd' op failed to infer returned types}}
  // expected-error @+1 {{index depth 0 does not fit data rank 2 with 0 batch dims}}
  %0 = tcc.gather_nd %x[%i] batch_dims = 0 : tensor<3x4xf32>, tensor<5x0xi64> -> tensor<5x3x4xf32>
  return
}

// -----

func.func @gather_nd_batch_mismatch(%x: tensor<2x3x4xf32>, %i: tensor<5x1xi64>) {
  // expected-error @+2 {{'tcc.gather_nd' op failed to infer returned types}}
  // expected-error @+1 {{batch dim 0 differs between data and indices}}
  %0 = tcc.gather_nd %x[%i] batch_dims = 1 : tensor<2x3x4xf32>, tensor<5x1xi64> -> tensor<5x4xf32>
  return
}

// -----

func.func @scatter_elements_axis(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{axis 3 is out of range for rank 2}}
  %0 = tcc.scatter_elements none %x[%i], %u axis = 3 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
  return
}

// -----

func.func @scatter_elements_negative_axis(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %0 = tcc.scatter_elements none %x[%i], %u axis = -1 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
  return
}

// -----

func.func @scatter_elements_shape(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+1 {{indices 'tensor<2x4xi64>' and updates 'tensor<2x3xf32>' must have one shape of the data's rank}}
  %0 = tcc.scatter_elements add %x[%i], %u axis = 0 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x3xf32>
  return
}

// -----

func.func @scatter_elements_rank(%x: tensor<3x4xf32>, %i: tensor<8xi64>, %u: tensor<8xf32>) {
  // expected-error @+1 {{indices 'tensor<8xi64>' and updates 'tensor<8xf32>' must have one shape of the data's rank}}
  %0 = tcc.scatter_elements add %x[%i], %u axis = 0 : tensor<3x4xf32>, tensor<8xi64>, tensor<8xf32>
  return
}

// -----

func.func @scatter_elements_type(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf16>) {
  // expected-error @+1 {{updates element type differs from the data's}}
  %0 = tcc.scatter_elements max %x[%i], %u axis = 0 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf16>
  return
}

// -----

func.func @scatter_elements_result(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+2 {{'tcc.scatter_elements' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.scatter_elements' op inferred type(s) 'tensor<3x4xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  %0 = "tcc.scatter_elements"(%x, %i, %u) <{axis = 0 : i64, reduction = 0 : i32}> : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @unknown_scatter_reduction(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{custom op 'tcc.scatter_elements' expected string or keyword containing one of the following enum values for attribute 'reduction' [none, add, mul, max, min]}}
  %0 = tcc.scatter_elements sum %x[%i], %u axis = 0 : tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>
  return
}

// -----

func.func @scatter_nd_depth(%x: tensor<4x4xi32>, %i: tensor<2x3xi64>, %u: tensor<2xi32>) {
  // expected-error @+1 {{index depth does not fit data rank 2}}
  %0 = tcc.scatter_nd none %x[%i], %u : tensor<4x4xi32>, tensor<2x3xi64>, tensor<2xi32>
  return
}

// -----

func.func @scatter_nd_scalar_indices(%x: tensor<4x4xi32>, %i: tensor<i64>, %u: tensor<4xi32>) {
  // expected-error @+1 {{index depth does not fit data rank 2}}
  %0 = tcc.scatter_nd none %x[%i], %u : tensor<4x4xi32>, tensor<i64>, tensor<4xi32>
  return
}

// -----

// updates must have shape indices[:-1] ++ data[depth:] = [2, 4].
func.func @scatter_nd_shape(%x: tensor<4x4xi32>, %i: tensor<2x1xi64>, %u: tensor<2x3xi32>) {
  // expected-error @+1 {{updates 'tensor<2x3xi32>' do not match the expected shape [2, 4]}}
  %0 = tcc.scatter_nd add %x[%i], %u : tensor<4x4xi32>, tensor<2x1xi64>, tensor<2x3xi32>
  return
}

// -----

func.func @scatter_nd_type(%x: tensor<4x4xi32>, %i: tensor<2x2xi64>, %u: tensor<2xi64>) {
  // expected-error @+1 {{updates 'tensor<2xi64>' do not match the expected shape [2]}}
  %0 = tcc.scatter_nd mul %x[%i], %u : tensor<4x4xi32>, tensor<2x2xi64>, tensor<2xi64>
  return
}

// -----

// scatter_nd infers its type while parsing, before the type constraints are checked: a
// dynamic index depth must be rejected, not used as a (huge) count.
func.func @scatter_nd_dynamic_depth(%x: tensor<4x4xi32>, %i: tensor<2x?xi64>, %u: tensor<2xi32>) {
  // expected-error @+1 {{the index depth (the indices' last dim) must be fixed, got 'tensor<2x?xi64>'}}
  %0 = tcc.scatter_nd none %x[%i], %u : tensor<4x4xi32>, tensor<2x?xi64>, tensor<2xi32>
  return
}
