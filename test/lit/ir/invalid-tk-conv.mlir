// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// tk.conv's element types: all f32, all f16 or all bf16 (the CPU runtime's runConv16).

func.func @mixed(%x: memref<1x4x8x8xbf16>, %w: memref<4x4x3x3xf32>, %y: memref<1x4x6x6xbf16>) {
  // expected-error @+1 {{'tk.conv' op operands must all be f32, all f16 or all bf16}}
  tk.conv %x, %w, %y {dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xbf16>, memref<4x4x3x3xf32>, memref<1x4x6x6xbf16>
  return
}

// -----

func.func @integers(%x: memref<1x4x8x8xi32>, %w: memref<4x4x3x3xi32>, %y: memref<1x4x6x6xi32>) {
  // expected-error @+1 {{'tk.conv' op operands must all be f32, all f16 or all bf16}}
  tk.conv %x, %w, %y {dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xi32>, memref<4x4x3x3xi32>, memref<1x4x6x6xi32>
  return
}

// -----

// Accepted: bf16 throughout.
func.func @bf16(%x: memref<1x4x8x8xbf16>, %w: memref<4x4x3x3xbf16>, %y: memref<1x4x6x6xbf16>) {
  tk.conv %x, %w, %y {dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xbf16>, memref<4x4x3x3xbf16>, memref<1x4x6x6xbf16>
  return
}

// -----

// The epilogue: a bias of one value per output channel, a residual of the output's type, a
// clamp interval; f32 only.

func.func @bias_shape(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %b: memref<1x4xf32>, %y: memref<1x4x6x6xf32>) {
  // expected-error @+1 {{'tk.conv' op bias must be a buffer of the output's element type and shape [4] (one value per output channel)}}
  tk.conv %x, %w, %y bias(%b : memref<1x4xf32>) {dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<1x4x6x6xf32>
  return
}

// -----

func.func @residual_type(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %r: memref<1x4x8x8xf32>, %y: memref<1x4x6x6xf32>) {
  // expected-error @+1 {{'tk.conv' op residual must have the output's type}}
  tk.conv %x, %w, %y residual(%r : memref<1x4x8x8xf32>) {dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<1x4x6x6xf32>
  return
}

// -----

func.func @residual_is_output(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %y: memref<1x4x6x6xf32>) {
  // expected-error @+1 {{'tk.conv' op residual must not be the output buffer}}
  tk.conv %x, %w, %y residual(%y : memref<1x4x6x6xf32>) {dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<1x4x6x6xf32>
  return
}

// -----

func.func @clamp_order(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %y: memref<1x4x6x6xf32>) {
  // expected-error @+1 {{'tk.conv' op clamp bounds must be numbers with clamp_min <= clamp_max}}
  tk.conv %x, %w, %y {clamp_min = 6.0 : f64, clamp_max = 0.0 : f64, dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<1x4x6x6xf32>
  return
}

// -----

func.func @clamp_nan(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %y: memref<1x4x6x6xf32>) {
  // expected-error @+1 {{'tk.conv' op clamp bounds must be numbers with clamp_min <= clamp_max}}
  tk.conv %x, %w, %y {clamp_min = 0x7FF8000000000000 : f64, dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<1x4x6x6xf32>
  return
}

// -----

func.func @epilogue_bf16(%x: memref<1x4x8x8xbf16>, %w: memref<4x4x3x3xbf16>, %y: memref<1x4x6x6xbf16>) {
  // expected-error @+1 {{'tk.conv' op an epilogue (bias, residual, clamp, activation) needs an f32 convolution}}
  tk.conv %x, %w, %y {clamp_min = 0.0 : f64, dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xbf16>, memref<4x4x3x3xbf16>, memref<1x4x6x6xbf16>
  return
}

// -----

// Accepted: bias, residual and ReLU6 on f32.
func.func @epilogue(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %b: memref<4xf32>, %r: memref<1x4x6x6xf32>, %y: memref<1x4x6x6xf32>) {
  tk.conv %x, %w, %y bias(%b : memref<4xf32>) residual(%r : memref<1x4x6x6xf32>) {clamp_max = 6.0 : f64, clamp_min = 0.0 : f64, dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<1x4x6x6xf32>
  return
}

// -----

func.func @activation_unknown(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %y: memref<1x4x6x6xf32>) {
  // expected-error @+1 {{'tk.conv' op activation 'gelu': expected silu or hard_swish}}
  tk.conv %x, %w, %y {activation = "gelu", dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<1x4x6x6xf32>
  return
}

// -----

func.func @hard_swish_no_gate(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %y: memref<1x4x6x6xf32>) {
  // expected-error @+1 {{'tk.conv' op activation 'hard_swish' needs finite activation_alpha and activation_beta}}
  tk.conv %x, %w, %y {activation = "hard_swish", activation_alpha = 0.5 : f64, dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<1x4x6x6xf32>
  return
}

// -----

func.func @silu_with_gate(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %y: memref<1x4x6x6xf32>) {
  // expected-error @+1 {{'tk.conv' op activation 'silu' takes no activation_alpha/activation_beta}}
  tk.conv %x, %w, %y {activation = "silu", activation_beta = 0.5 : f64, dilations = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, strides = array<i64: 1, 1>} : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<1x4x6x6xf32>
  return
}
