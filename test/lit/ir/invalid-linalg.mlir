// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// Result-type inference of matmul, conv and reduce_window.

func.func @matmul_element_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf16>) {
  // expected-error @+2 {{'tcc.matmul' op failed to infer returned types}}
  // expected-error @+1 {{matmul operands differ in element type: 'tensor<4x8xf32>' vs 'tensor<8x16xf16>'}}
  %0 = tcc.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf16> -> tensor<4x16xf32>
  return
}

// -----

func.func @matmul_rank1(%a: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+2 {{'tcc.matmul' op failed to infer returned types}}
  // expected-error @+1 {{matmul operands need one rank >= 2, got 'tensor<8xf32>' and 'tensor<8xf32>'}}
  %0 = tcc.matmul %a, %b : tensor<8xf32>, tensor<8xf32> -> tensor<f32>
  return
}

// -----

// No implicit batch broadcasting: both operands have the same rank.
func.func @matmul_rank_mismatch(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+2 {{'tcc.matmul' op failed to infer returned types}}
  // expected-error @+1 {{matmul operands need one rank >= 2, got 'tensor<2x4x8xf32>' and 'tensor<8x16xf32>'}}
  %0 = tcc.matmul %a, %b : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>) {
  // expected-error @+2 {{'tcc.matmul' op failed to infer returned types}}
  // expected-error @+1 {{matmul batch dims differ: 'tensor<2x4x8xf32>' vs 'tensor<3x8x16xf32>'}}
  %0 = tcc.matmul %a, %b : tensor<2x4x8xf32>, tensor<3x8x16xf32> -> tensor<2x4x16xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<4x8xbf16>, %b: tensor<7x16xbf16>) {
  // expected-error @+2 {{'tcc.matmul' op failed to infer returned types}}
  // expected-error @+1 {{matmul contraction dims differ: 'tensor<4x8xbf16>' vs 'tensor<7x16xbf16>'}}
  %0 = tcc.matmul %a, %b : tensor<4x8xbf16>, tensor<7x16xbf16> -> tensor<4x16xbf16>
  return
}

// -----

func.func @matmul_wrong_result(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+2 {{'tcc.matmul' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.matmul' op inferred type(s) 'tensor<4x16xf32>' are incompatible with return type(s) of operation 'tensor<16x4xf32>'}}
  %0 = tcc.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<16x4xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<3x8xf32>, %w: tensor<4x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{conv needs input and weight of one rank >= 3, got 'tensor<3x8xf32>' and 'tensor<4x3xf32>'}}
  %0 = tcc.conv %x, %w {strides = array<i64>, pad_low = array<i64>, pad_high = array<i64>, lhs_dilation = array<i64>, rhs_dilation = array<i64>, groups = 1 : i64} : tensor<3x8xf32>, tensor<4x3xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @conv_rank_mismatch(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{conv needs input and weight of one rank >= 3, got 'tensor<1x3x8x8xf32>' and 'tensor<4x3x3xf32>'}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_element_type(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf16>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{conv input and weight differ in element type}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf16> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_strides_size(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{strides has 1 entries, expected 2}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_pad_low_size(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{pad_low has 4 entries, expected 2}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0, 1, 1>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_pad_high_size(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{pad_high has 1 entries, expected 2}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_lhs_dilation_size(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{lhs_dilation has 0 entries, expected 2}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_rhs_dilation_size(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{rhs_dilation has 3 entries, expected 2}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_groups_zero(%x: tensor<1x4x8xf32>, %w: tensor<6x2x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{groups = 0 must divide the input channels (4) and output channels (6)}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, lhs_dilation = array<i64: 1>, rhs_dilation = array<i64: 1>, groups = 0 : i64} : tensor<1x4x8xf32>, tensor<6x2x3xf32> -> tensor<1x6x6xf32>
  return
}

// -----

func.func @conv_groups_input_channels(%x: tensor<1x6x8xf32>, %w: tensor<8x2x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{groups = 4 must divide the input channels (6) and output channels (8)}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, lhs_dilation = array<i64: 1>, rhs_dilation = array<i64: 1>, groups = 4 : i64} : tensor<1x6x8xf32>, tensor<8x2x3xf32> -> tensor<1x8x6xf32>
  return
}

// -----

func.func @conv_groups_output_channels(%x: tensor<1x4x8xf32>, %w: tensor<5x2x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{groups = 2 must divide the input channels (4) and output channels (5)}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, lhs_dilation = array<i64: 1>, rhs_dilation = array<i64: 1>, groups = 2 : i64} : tensor<1x4x8xf32>, tensor<5x2x3xf32> -> tensor<1x5x6xf32>
  return
}

// -----

// The weight's channel dim must be input channels / groups.
func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<16x4x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{weight has 4 input channels per group, the input 3 channels in 1 groups}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<16x4x3x3xf32> -> tensor<1x16x6x6xf32>
  return
}

// -----

func.func @conv_group_channels(%x: tensor<1x8x8xf32>, %w: tensor<8x8x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{weight has 8 input channels per group, the input 8 channels in 2 groups}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, lhs_dilation = array<i64: 1>, rhs_dilation = array<i64: 1>, groups = 2 : i64} : tensor<1x8x8xf32>, tensor<8x8x3xf32> -> tensor<1x8x6xf32>
  return
}

// -----

func.func @conv_stride_zero(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{strides and dilations must be >= 1}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 0>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_dilation_zero(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{strides and dilations must be >= 1}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 0, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_wrong_result(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'tcc.conv' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.conv' op inferred type(s) 'tensor<1x4x3x3xf32>' are incompatible with return type(s) of operation 'tensor<1x4x6x6xf32>'}}
  %0 = tcc.conv %x, %w {strides = array<i64: 2, 2>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_missing_attr(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'tcc.conv' op requires attribute 'groups'}}
  %0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @reduce_window_window_size(%x: tensor<1x3x32x32xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{window has 2 entries, expected 4}}
  %0 = tcc.reduce_window max %x {window = array<i64: 3, 3>, strides = array<i64: 1, 1, 2, 2>, pad_low = array<i64: 0, 0, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1, 1, 1>} : tensor<1x3x32x32xf32> -> tensor<1x3x16x16xf32>
  return
}

// -----

func.func @reduce_window_strides_size(%x: tensor<1x3x32x32xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{strides has 2 entries, expected 4}}
  %0 = tcc.reduce_window max %x {window = array<i64: 1, 1, 3, 3>, strides = array<i64: 2, 2>, pad_low = array<i64: 0, 0, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1, 1, 1>} : tensor<1x3x32x32xf32> -> tensor<1x3x16x16xf32>
  return
}

// -----

func.func @reduce_window_pad_low_size(%x: tensor<1x3x32x32xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{pad_low has 2 entries, expected 4}}
  %0 = tcc.reduce_window max %x {window = array<i64: 1, 1, 3, 3>, strides = array<i64: 1, 1, 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1, 1, 1>} : tensor<1x3x32x32xf32> -> tensor<1x3x16x16xf32>
  return
}

// -----

func.func @reduce_window_pad_high_size(%x: tensor<1x3x32x32xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{pad_high has 5 entries, expected 4}}
  %0 = tcc.reduce_window max %x {window = array<i64: 1, 1, 3, 3>, strides = array<i64: 1, 1, 2, 2>, pad_low = array<i64: 0, 0, 1, 1>, pad_high = array<i64: 0, 0, 1, 1, 0>, dilations = array<i64: 1, 1, 1, 1>} : tensor<1x3x32x32xf32> -> tensor<1x3x16x16xf32>
  return
}

// -----

func.func @reduce_window_dilations_size(%x: tensor<1x3x32x32xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{dilations has 0 entries, expected 4}}
  %0 = tcc.reduce_window max %x {window = array<i64: 1, 1, 3, 3>, strides = array<i64: 1, 1, 2, 2>, pad_low = array<i64: 0, 0, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, dilations = array<i64>} : tensor<1x3x32x32xf32> -> tensor<1x3x16x16xf32>
  return
}

// -----

func.func @reduce_window_zero_window(%x: tensor<8xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{window, strides and dilations must be >= 1}}
  %0 = tcc.reduce_window sum %x {window = array<i64: 0>, strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, dilations = array<i64: 1>} : tensor<8xf32> -> tensor<9xf32>
  return
}

// -----

func.func @reduce_window_zero_stride(%x: tensor<8xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{window, strides and dilations must be >= 1}}
  %0 = tcc.reduce_window sum %x {window = array<i64: 2>, strides = array<i64: 0>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, dilations = array<i64: 1>} : tensor<8xf32> -> tensor<7xf32>
  return
}

// -----

func.func @reduce_window_zero_dilation(%x: tensor<8xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{window, strides and dilations must be >= 1}}
  %0 = tcc.reduce_window sum %x {window = array<i64: 2>, strides = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, dilations = array<i64: 0>} : tensor<8xf32> -> tensor<7xf32>
  return
}

// -----

// Unlike conv, reduce_window padding cannot be negative.
func.func @reduce_window_negative_pad(%x: tensor<8xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{padding must be >= 0}}
  %0 = tcc.reduce_window max %x {window = array<i64: 2>, strides = array<i64: 1>, pad_low = array<i64: -1>, pad_high = array<i64: 0>, dilations = array<i64: 1>} : tensor<8xf32> -> tensor<6xf32>
  return
}

// -----

func.func @reduce_window_wrong_result(%x: tensor<1x3x32x32xf32>) {
  // expected-error @+2 {{'tcc.reduce_window' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.reduce_window' op inferred type(s) 'tensor<1x3x16x16xf32>' are incompatible with return type(s) of operation 'tensor<1x3x15x15xf32>'}}
  %0 = tcc.reduce_window max %x {window = array<i64: 1, 1, 3, 3>, strides = array<i64: 1, 1, 2, 2>, pad_low = array<i64: 0, 0, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1, 1, 1>} : tensor<1x3x32x32xf32> -> tensor<1x3x15x15xf32>
  return
}
