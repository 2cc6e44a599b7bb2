// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// Verifiers and result-type inference of the layout ops. Inference errors are followed by the
// generic "failed to infer returned types".

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'tcc.reshape' op changes the element count from 6 to 8}}
  %0 = tcc.reshape %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'tcc.reshape' op changes the element type}}
  %0 = tcc.reshape %x : tensor<2x3xf32> -> tensor<6xi32>
  return
}

// -----

func.func @transpose_wrong_result(%x: tensor<2x3x4xf16>) {
  // expected-error @+2 {{'tcc.transpose' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.transpose' op inferred type(s) 'tensor<4x2x3xf16>' are incompatible with return type(s) of operation 'tensor<2x3x4xf16>'}}
  %0 = tcc.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf16> -> tensor<2x3x4xf16>
  return
}

// -----

func.func @transpose_perm_size(%x: tensor<2x3x4xf16>) {
  // expected-error @+2 {{'tcc.transpose' op failed to infer returned types}}
  // expected-error @+1 {{perm has 2 entries, expected 3}}
  %0 = tcc.transpose %x perm = [1, 0] : tensor<2x3x4xf16> -> tensor<3x2xf16>
  return
}

// -----

func.func @transpose_perm_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'tcc.transpose' op failed to infer returned types}}
  // expected-error @+1 {{perm entry 2 is out of range for rank 2}}
  %0 = tcc.transpose %x perm = [2, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_perm_negative(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'tcc.transpose' op failed to infer returned types}}
  // expected-error @+1 {{perm entry -1 is out of range for rank 2}}
  %0 = tcc.transpose %x perm = [-1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_perm_twice(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'tcc.transpose' op failed to infer returned types}}
  // expected-error @+1 {{perm entry 1 appears twice}}
  %0 = tcc.transpose %x perm = [1, 1] : tensor<2x3xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @broadcast_element_type(%x: tensor<3xf32>) {
  // expected-error @+1 {{'tcc.broadcast_in_dim' op changes the element type}}
  %0 = tcc.broadcast_in_dim %x dims = [1] : tensor<3xf32> -> tensor<2x3xf16>
  return
}

// -----

func.func @broadcast_dims_size(%x: tensor<3xf32>) {
  // expected-error @+1 {{'tcc.broadcast_in_dim' op dims has 2 entries, expected 1}}
  %0 = tcc.broadcast_in_dim %x dims = [0, 1] : tensor<3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_dims_range(%x: tensor<3xf32>) {
  // expected-error @+1 {{'tcc.broadcast_in_dim' op dims entry 2 is out of range for rank 2}}
  %0 = tcc.broadcast_in_dim %x dims = [2] : tensor<3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_dims_negative(%x: tensor<3xf32>) {
  // expected-error @+1 {{'tcc.broadcast_in_dim' op dims entry -1 is out of range for rank 2}}
  %0 = tcc.broadcast_in_dim %x dims = [-1] : tensor<3xf32> -> tensor<2x3xf32>
  return
}

// -----

// dims must be strictly increasing: broadcast_in_dim does not transpose.
func.func @broadcast_dims_decreasing(%x: tensor<3x2xf32>) {
  // expected-error @+1 {{'tcc.broadcast_in_dim' op dims must be strictly increasing}}
  %0 = tcc.broadcast_in_dim %x dims = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_dims_repeated(%x: tensor<3x3xf32>) {
  // expected-error @+1 {{'tcc.broadcast_in_dim' op dims must be strictly increasing}}
  %0 = tcc.broadcast_in_dim %x dims = [1, 1] : tensor<3x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_size(%x: tensor<3xf32>) {
  // expected-error @+1 {{'tcc.broadcast_in_dim' op operand dim 0 of size 3 cannot broadcast to size 4}}
  %0 = tcc.broadcast_in_dim %x dims = [1] : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_start_size(%x: tensor<8x6xf32>) {
  // expected-error @+2 {{'tcc.slice' op failed to infer returned types}}
  // expected-error @+1 {{start has 1 entries, expected 2}}
  %0 = tcc.slice %x start = [0] limit = [8, 6] stride = [1, 1] : tensor<8x6xf32> -> tensor<8x6xf32>
  return
}

// -----

func.func @slice_limit_size(%x: tensor<8x6xf32>) {
  // expected-error @+2 {{'tcc.slice' op failed to infer returned types}}
  // expected-error @+1 {{limit has 3 entries, expected 2}}
  %0 = tcc.slice %x start = [0, 0] limit = [8, 6, 1] stride = [1, 1] : tensor<8x6xf32> -> tensor<8x6xf32>
  return
}

// -----

func.func @slice_stride_size(%x: tensor<8x6xf32>) {
  // expected-error @+2 {{'tcc.slice' op failed to infer returned types}}
  // expected-error @+1 {{stride has 0 entries, expected 2}}
  %0 = tcc.slice %x start = [0, 0] limit = [8, 6] stride = [] : tensor<8x6xf32> -> tensor<8x6xf32>
  return
}

// -----

func.func @slice_stride_zero(%x: tensor<8x6xf32>) {
  // expected-error @+2 {{'tcc.slice' op failed to infer returned types}}
  // expected-error @+1 {{stride must be >= 1, got 0 in dim 1}}
  %0 = tcc.slice %x start = [0, 0] limit = [8, 6] stride = [1, 0] : tensor<8x6xf32> -> tensor<8x6xf32>
  return
}

// -----

func.func @slice_limit_out_of_range(%x: tensor<8x6xf32>) {
  // expected-error @+2 {{'tcc.slice' op failed to infer returned types}}
  // expected-error @+1 {{slice [2, 7) is out of range for dim 1 of size 6}}
  %0 = tcc.slice %x start = [0, 2] limit = [8, 7] stride = [1, 1] : tensor<8x6xf32> -> tensor<8x5xf32>
  return
}

// -----

func.func @slice_negative_start(%x: tensor<8x6xf32>) {
  // expected-error @+2 {{'tcc.slice' op failed to infer returned types}}
  // expected-error @+1 {{slice [-1, 8) is out of range for dim 0 of size 8}}
  %0 = tcc.slice %x start = [-1, 0] limit = [8, 6] stride = [1, 1] : tensor<8x6xf32> -> tensor<9x6xf32>
  return
}

// -----

func.func @slice_start_after_limit(%x: tensor<8x6xf32>) {
  // expected-error @+2 {{'tcc.slice' op failed to infer returned types}}
  // expected-error @+1 {{slice [5, 3) is out of range for dim 0 of size 8}}
  %0 = tcc.slice %x start = [5, 0] limit = [3, 6] stride = [1, 1] : tensor<8x6xf32> -> tensor<0x6xf32>
  return
}

// -----

func.func @slice_wrong_result(%x: tensor<8x6xf32>) {
  // expected-error @+2 {{'tcc.slice' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.slice' op inferred type(s) 'tensor<4x6xf32>' are incompatible with return type(s) of operation 'tensor<3x6xf32>'}}
  %0 = tcc.slice %x start = [1, 0] limit = [8, 6] stride = [2, 1] : tensor<8x6xf32> -> tensor<3x6xf32>
  return
}

// -----

func.func @reverse_dim_range(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{dims entry 2 is out of range for rank 2}}
  %0 = tcc.reverse %x dims = [2] : tensor<2x3xi32>
  return
}

// -----

func.func @reverse_dim_twice(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{dims entry 0 appears twice}}
  %0 = tcc.reverse %x dims = [0, 1, 0] : tensor<2x3xi32>
  return
}

// -----

func.func @concat_no_inputs() {
  // expected-error @+2 {{'tcc.concat' op failed to infer returned types}}
  // expected-error @+1 {{concat needs at least one input}}
  %0 = "tcc.concat"() <{axis = 0 : i64}> : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'tcc.concat' op failed to infer returned types}}
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = tcc.concat %x, %x axis = 2 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_element_type(%x: tensor<2x3xf32>, %y: tensor<2x3xf16>) {
  // expected-error @+2 {{'tcc.concat' op failed to infer returned types}}
  // expected-error @+1 {{concat inputs differ in element type or rank: 'tensor<2x3xf32>' vs 'tensor<2x3xf16>'}}
  %0 = tcc.concat %x, %y axis = 0 : tensor<2x3xf32>, tensor<2x3xf16> -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_rank(%x: tensor<2x3xf32>, %y: tensor<2x3x1xf32>) {
  // expected-error @+2 {{'tcc.concat' op failed to infer returned types}}
  // expected-error @+1 {{concat inputs differ in element type or rank: 'tensor<2x3xf32>' vs 'tensor<2x3x1xf32>'}}
  %0 = tcc.concat %x, %y axis = 0 : tensor<2x3xf32>, tensor<2x3x1xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_other_dim(%x: tensor<2x3xf32>, %y: tensor<2x4xf32>) {
  // expected-error @+2 {{'tcc.concat' op failed to infer returned types}}
  // expected-error @+1 {{concat inputs differ in dim 1: 'tensor<2x3xf32>' vs 'tensor<2x4xf32>'}}
  %0 = tcc.concat %x, %y axis = 0 : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_wrong_result(%x: tensor<2x3xf32>, %y: tensor<2x4xf32>) {
  // expected-error @+2 {{'tcc.concat' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.concat' op inferred type(s) 'tensor<2x7xf32>' are incompatible with return type(s) of operation 'tensor<2x8xf32>'}}
  %0 = tcc.concat %x, %y axis = 1 : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @pad_value_rank(%x: tensor<4xf32>, %v: tensor<1xf32>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{padding value must be a 0-d tensor of 'f32'}}
  %0 = tcc.pad constant %x, %v low = [1] high = [1] : tensor<4xf32>, tensor<1xf32> -> tensor<6xf32>
  return
}

// -----

func.func @pad_value_type(%x: tensor<4xf32>, %v: tensor<f16>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{padding value must be a 0-d tensor of 'f32'}}
  %0 = tcc.pad constant %x, %v low = [1] high = [1] : tensor<4xf32>, tensor<f16> -> tensor<6xf32>
  return
}

// -----

func.func @pad_low_size(%x: tensor<4x4xf32>, %v: tensor<f32>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{low has 1 entries, expected 2}}
  %0 = tcc.pad constant %x, %v low = [1] high = [1, 1] : tensor<4x4xf32>, tensor<f32> -> tensor<6x6xf32>
  return
}

// -----

func.func @pad_high_size(%x: tensor<4x4xf32>, %v: tensor<f32>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{high has 3 entries, expected 2}}
  %0 = tcc.pad constant %x, %v low = [1, 1] high = [1, 1, 1] : tensor<4x4xf32>, tensor<f32> -> tensor<6x6xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<4x4xf32>, %v: tensor<f32>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{padding must be >= 0, got -1 and 2 in dim 1}}
  %0 = tcc.pad constant %x, %v low = [0, -1] high = [0, 2] : tensor<4x4xf32>, tensor<f32> -> tensor<4x5xf32>
  return
}

// -----

func.func @pad_reflect_too_large(%x: tensor<1x3x4x4xf32>, %v: tensor<f32>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{reflect padding 1/4 needs a dim larger than it, dim 3 has size 4}}
  %0 = tcc.pad reflect %x, %v low = [0, 0, 1, 1] high = [0, 0, 1, 4] : tensor<1x3x4x4xf32>, tensor<f32> -> tensor<1x3x6x9xf32>
  return
}

// -----

func.func @pad_reflect_size_one(%x: tensor<1x5xf32>, %v: tensor<f32>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{reflect padding 1/0 needs a dim larger than it, dim 0 has size 1}}
  %0 = tcc.pad reflect %x, %v low = [1, 0] high = [0, 0] : tensor<1x5xf32>, tensor<f32> -> tensor<2x5xf32>
  return
}

// -----

func.func @pad_edge_empty(%x: tensor<0x3xi64>, %v: tensor<i64>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{cannot pad an empty dim 0 in edge or wrap mode}}
  %0 = tcc.pad edge %x, %v low = [1, 0] high = [0, 0] : tensor<0x3xi64>, tensor<i64> -> tensor<1x3xi64>
  return
}

// -----

func.func @pad_wrap_empty(%x: tensor<3x0xi64>, %v: tensor<i64>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{cannot pad an empty dim 1 in edge or wrap mode}}
  %0 = tcc.pad wrap %x, %v low = [0, 0] high = [0, 2] : tensor<3x0xi64>, tensor<i64> -> tensor<3x2xi64>
  return
}

// -----

func.func @pad_wrong_result(%x: tensor<4xf32>, %v: tensor<f32>) {
  // expected-error @+2 {{'tcc.pad' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.pad' op inferred type(s) 'tensor<7xf32>' are incompatible with return type(s) of operation 'tensor<6xf32>'}}
  %0 = tcc.pad constant %x, %v low = [1] high = [2] : tensor<4xf32>, tensor<f32> -> tensor<6xf32>
  return
}

// -----

func.func @unknown_pad_mode(%x: tensor<4xf32>, %v: tensor<f32>) {
  // expected-error @+1 {{custom op 'tcc.pad' expected string or keyword containing one of the following enum values for attribute 'mode' [constant, reflect, edge, wrap]}}
  %0 = tcc.pad symmetric %x, %v low = [1] high = [1] : tensor<4xf32>, tensor<f32> -> tensor<6xf32>
  return
}

// -----

func.func @iota_dim() {
  // expected-error @+1 {{'tcc.iota' op dim 2 is out of range for rank 2}}
  %0 = tcc.iota dim = 2 : tensor<2x3xi64>
  return
}

// -----

// Negative dims are reported as such (I64Attr getters are unsigned).
func.func @iota_negative_dim() {
  // expected-error @+1 {{'tcc.iota' op dim -1 is out of range for rank 2}}
  %0 = tcc.iota dim = -1 : tensor<2x3xi64>
  return
}

// -----

func.func @iota_scalar() {
  // expected-error @+1 {{'tcc.iota' op dim 0 is out of range for rank 0}}
  %0 = tcc.iota dim = 0 : tensor<i64>
  return
}

// -----

func.func @iota_bool() {
  // expected-error @+1 {{'tcc.iota' op needs a numeric result type}}
  %0 = tcc.iota dim = 0 : tensor<4xi1>
  return
}

// -----

func.func @dynamic_slice_starts(%x: tensor<10x8xf32>, %i: tensor<i64>) {
  // expected-error @+2 {{'tcc.dynamic_slice' op failed to infer returned types}}
  // expected-error @+1 {{needs 2 start indices, got 1}}
  %0 = tcc.dynamic_slice %x[%i] sizes = [3, 8] : tensor<10x8xf32>, tensor<i64> -> tensor<3x8xf32>
  return
}

// -----

func.func @dynamic_slice_sizes(%x: tensor<10x8xf32>, %i: tensor<i64>) {
  // expected-error @+2 {{'tcc.dynamic_slice' op failed to infer returned types}}
  // expected-error @+1 {{sizes has 1 entries, expected 2}}
  %0 = tcc.dynamic_slice %x[%i, %i] sizes = [3] : tensor<10x8xf32>, tensor<i64>, tensor<i64> -> tensor<3xf32>
  return
}

// -----

func.func @dynamic_slice_too_large(%x: tensor<10x8xf32>, %i: tensor<i64>) {
  // expected-error @+2 {{'tcc.dynamic_slice' op failed to infer returned types}}
  // expected-error @+1 {{slice size 9 does not fit dim 1 of size 8}}
  %0 = tcc.dynamic_slice %x[%i, %i] sizes = [3, 9] : tensor<10x8xf32>, tensor<i64>, tensor<i64> -> tensor<3x9xf32>
  return
}

// -----

func.func @dynamic_slice_negative(%x: tensor<10x8xf32>, %i: tensor<i64>) {
  // expected-error @+2 {{'tcc.dynamic_slice' op failed to infer returned types}}
  // expected-error @+1 {{slice size -1 does not fit dim 0 of size 10}}
  %0 = "tcc.dynamic_slice"(%x, %i, %i) <{sizes = array<i64: -1, 8>}> : (tensor<10x8xf32>, tensor<i64>, tensor<i64>) -> tensor<10x8xf32>
  return
}

// -----

// Start indices are 0-d i32 / i64 tensors.
func.func @dynamic_slice_start_rank(%x: tensor<10x8xf32>, %i: tensor<1xi64>) {
  // expected-error @+1 {{'tcc.dynamic_slice' op operand #1 must be variadic of 0D tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<1xi64>'}}
  %0 = tcc.dynamic_slice %x[%i, %i] sizes = [3, 8] : tensor<10x8xf32>, tensor<1xi64>, tensor<1xi64> -> tensor<3x8xf32>
  return
}

// -----

func.func @dynamic_slice_start_type(%x: tensor<10x8xf32>, %i: tensor<ui64>) {
  // expected-error @+1 {{'tcc.dynamic_slice' op operand #1 must be variadic of 0D tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<ui64>'}}
  %0 = tcc.dynamic_slice %x[%i, %i] sizes = [3, 8] : tensor<10x8xf32>, tensor<ui64>, tensor<ui64> -> tensor<3x8xf32>
  return
}

// -----

func.func @dynamic_update_slice_starts(%x: tensor<10x8xf32>, %u: tensor<3x8xf32>, %i: tensor<i32>) {
  // expected-error @+1 {{needs 2 start indices, got 3}}
  %0 = tcc.dynamic_update_slice %x, %u[%i, %i, %i] : tensor<10x8xf32>, tensor<3x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>
  return
}

// -----

func.func @dynamic_update_slice_type(%x: tensor<10x8xf32>, %u: tensor<3x8xf16>, %i: tensor<i32>) {
  // expected-error @+1 {{update 'tensor<3x8xf16>' does not match 'tensor<10x8xf32>'}}
  %0 = tcc.dynamic_update_slice %x, %u[%i, %i] : tensor<10x8xf32>, tensor<3x8xf16>, tensor<i32>, tensor<i32>
  return
}

// -----

func.func @dynamic_update_slice_rank(%x: tensor<10x8xf32>, %u: tensor<8xf32>, %i: tensor<i32>) {
  // expected-error @+1 {{update 'tensor<8xf32>' does not match 'tensor<10x8xf32>'}}
  %0 = tcc.dynamic_update_slice %x, %u[%i, %i] : tensor<10x8xf32>, tensor<8xf32>, tensor<i32>, tensor<i32>
  return
}

// -----

func.func @dynamic_update_slice_too_large(%x: tensor<10x8xf32>, %u: tensor<3x9xf32>, %i: tensor<i32>) {
  // expected-error @+1 {{update 'tensor<3x9xf32>' does not fit in 'tensor<10x8xf32>'}}
  %0 = tcc.dynamic_update_slice %x, %u[%i, %i] : tensor<10x8xf32>, tensor<3x9xf32>, tensor<i32>, tensor<i32>
  return
}
