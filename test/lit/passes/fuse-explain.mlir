// RUN: tcc-opt %s -tcc-fuse=explain=true -split-input-file -verify-diagnostics | FileCheck %s

// With explain, every fusion decision is a remark naming its reason.

// The consumer reads the row sum of x at its column index: fusing would walk x's rows across
// the consumer's, so the reduction stays a kernel of its own.
// CHECK-LABEL: func.func @transposed_read
// CHECK-COUNT-2: tcc.fusion "loop"
func.func @transposed_read(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-remark @below {{not fused with its consumer 'tcc.binary add': would read the reduction at a transposed index}}
  %s = tcc.reduce sum %x dims = [1] : tensor<4x4xf32> -> tensor<4xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %b = tcc.broadcast_in_dim %s dims = [1] : tensor<4xf32> -> tensor<4x4xf32>
  // expected-remark @below {{materialised: its value is needed in memory}}
  %y = tcc.binary add %x, %b : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// CHECK-LABEL: func.func @row_read
// CHECK-COUNT-1: tcc.fusion "loop"
// CHECK-NOT: tcc.fusion
func.func @row_read(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-remark @below {{fused into the row kernel of its consumer 'tcc.binary add': it reads the reduction at the same row}}
  %s = tcc.reduce sum %x dims = [1] : tensor<4x4xf32> -> tensor<4xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %b = tcc.broadcast_in_dim %s dims = [0] : tensor<4xf32> -> tensor<4x4xf32>
  // expected-remark @below {{materialised: its value is needed in memory}}
  %y = tcc.binary add %x, %b : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// A cheap value used by two kernels is recomputed in both; the two kernels, over the same
// elements and reading the same input, are then fused horizontally (one kernel, two results).
// CHECK-LABEL: func.func @recompute
// CHECK: tcc.fusion "loop"(%arg0 : tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
// CHECK-NOT: tcc.fusion
func.func @recompute(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  // expected-remark @below {{recomputed in each of its 2 consumer kernels: cheap (1 ops, no reduction)}}
  %e = tcc.unary exp %x : tensor<16xf32>
  // expected-remark @below {{materialised: its value is needed in memory}}
  %a = tcc.unary neg %e : tensor<16xf32>
  // expected-remark @below {{materialised: its value is needed in memory}}
  // expected-remark @below {{fused horizontally with 'tcc.unary neg': same iteration space, both read one input}}
  %b = tcc.unary abs %e : tensor<16xf32>
  return %a, %b : tensor<16xf32>, tensor<16xf32>
}

// -----

// A tcc.loop left after if-conversion is an error naming the op.
func.func @loop(%n: tensor<i64>, %c: tensor<i1>, %x: tensor<f32>) -> tensor<f32> {
  // expected-error @below {{tcc.loop whose trip count is not known at compile time (or exceeds 1024 iterations) is not supported by the compiled backends}}
  %r = tcc.loop (%n, %c) inits(%x : tensor<f32>) -> (tensor<f32>) {
  ^bb0(%i: tensor<i64>, %cc: tensor<i1>, %v: tensor<f32>):
    tcc.yield %cc, %v : tensor<i1>, tensor<f32>
  }
  return %r : tensor<f32>
}

// -----

// (f64: f32 pools with overlapping or padded windows are CPU library calls, tk.pool.)
// A pool whose windows overlap (3x3, stride 2) reads each input about 2.25 times: a producer of
// more than one op (a scale, then ReLU) is written once, not recomputed per read; one op still
// inlines. A pool of disjoint windows (2x2, stride 2) reads each input once and takes the chain.
// CHECK-LABEL: func.func @overlapping_pool
// CHECK-COUNT-2: tcc.fusion "loop"
// CHECK-NOT: tcc.fusion
func.func @overlapping_pool(%x: tensor<1x2x8x8xf64>, %s: tensor<1x2x8x8xf64>) -> tensor<1x2x4x4xf64> {
  // expected-remark @below {{inlined into its consumer's kernel}}
  %m = tcc.binary mul %x, %s : tensor<1x2x8x8xf64>
  // expected-remark @below {{materialised: read many times per element by a windowed consumer and too costly to recompute}}
  %r = tcc.binary max %m, %x : tensor<1x2x8x8xf64>
  %p = tcc.reduce_window max %r {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, pad_low = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 3, 3>} : tensor<1x2x8x8xf64> -> tensor<1x2x4x4xf64>
  return %p : tensor<1x2x4x4xf64>
}

// -----

// CHECK-LABEL: func.func @overlapping_pool_one_op
// CHECK-COUNT-1: tcc.fusion "loop"
// CHECK-NOT: tcc.fusion
func.func @overlapping_pool_one_op(%x: tensor<1x2x8x8xf64>) -> tensor<1x2x4x4xf64> {
  // expected-remark @below {{inlined into its consumer's kernel}}
  %n = tcc.unary neg %x : tensor<1x2x8x8xf64>
  %q = tcc.reduce_window max %n {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, pad_low = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 3, 3>} : tensor<1x2x8x8xf64> -> tensor<1x2x4x4xf64>
  return %q : tensor<1x2x4x4xf64>
}

// -----

// CHECK-LABEL: func.func @disjoint_pool
// CHECK-COUNT-1: tcc.fusion "loop"
// CHECK-NOT: tcc.fusion
func.func @disjoint_pool(%x: tensor<1x2x8x8xf32>, %s: tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32> {
  // expected-remark @below {{inlined into its consumer's kernel}}
  %m = tcc.binary mul %x, %s : tensor<1x2x8x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %r = tcc.binary max %m, %x : tensor<1x2x8x8xf32>
  %u = tcc.reduce_window max %r {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 0, 0>, pad_low = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 2, 2>} : tensor<1x2x8x8xf32> -> tensor<1x2x4x4xf32>
  return %u : tensor<1x2x4x4xf32>
}

// -----

// A squeeze-excitation (EfficientNet, MobileNetV3): a SiLU after a convolution read by the mean
// and by the scaling, whose kernels the gate's convolution keeps apart. Its sigmoid is too costly
// to recompute in both: the SiLU is computed once, in the convolution's epilogue.
// CHECK-LABEL: func.func @squeeze_excite
// CHECK: tcc.fusion "extern"
// CHECK: tcc.conv
// CHECK: tcc.unary sigmoid
// CHECK: tcc.binary mul
// CHECK: tcc.fusion "loop"
// CHECK-NOT: tcc.unary sigmoid
// CHECK: tcc.reduce sum
func.func @squeeze_excite(%x: tensor<1x8x4x4xf32>, %w: tensor<8x1x3x3xf32>, %g: tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32> {
  %y = tcc.conv %x, %w {groups = 8 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x8x4x4xf32>, tensor<8x1x3x3xf32> -> tensor<1x8x4x4xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %s = tcc.unary sigmoid %y : tensor<1x8x4x4xf32>
  // expected-remark @below {{materialised: used by 2 kernels and too costly to recompute (10 ops)}}
  // expected-remark @below {{fused into the epilogue of 'tcc.conv': reads its result at the same element}}
  %a = tcc.binary mul %y, %s : tensor<1x8x4x4xf32>
  %m = tcc.reduce sum %a dims = [2, 3] : tensor<1x8x4x4xf32> -> tensor<1x8xf32>
  // expected-remark @below {{a free view of its operand}}
  %m4 = tcc.reshape %m : tensor<1x8xf32> -> tensor<1x8x1x1xf32>
  %z = tcc.conv %m4, %g {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x8x1x1xf32>, tensor<8x8x1x1xf32> -> tensor<1x8x1x1xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %zb = tcc.broadcast_in_dim %z dims = [0, 1, 2, 3] : tensor<1x8x1x1xf32> -> tensor<1x8x4x4xf32>
  // expected-remark @below {{materialised: its value is needed in memory}}
  // expected-remark @below {{not fused into the epilogue of 'tcc.conv': its iteration space differs}}
  %o = tcc.binary mul %a, %zb : tensor<1x8x4x4xf32>
  return %o : tensor<1x8x4x4xf32>
}

// -----

// A squeeze-excitation's gate: the sigmoid of a [1, 8, 1, 1] value scales a [1, 8, 8, 8] one.
// Inlined, the consumer would compute the sigmoid 64 times per gate value; it is materialised
// (computed once), while the cheap bias add broadcast the same way stays inlined.
// CHECK-LABEL: func.func @gate
// CHECK: tcc.fusion "loop"
// CHECK: tcc.unary sigmoid
// CHECK: tcc.fusion "loop"
// CHECK-NOT: tcc.unary sigmoid
// CHECK: tcc.binary mul
func.func @gate(%x: tensor<1x8x8x8xf32>, %g: tensor<1x8x1x1xf32>, %b: tensor<1x8x1x1xf32>) -> tensor<1x8x8x8xf32> {
  // expected-remark @below {{inlined into its consumer's kernel}}
  %a = tcc.binary add %g, %b : tensor<1x8x1x1xf32>
  // expected-remark @below {{materialised: a transcendental broadcast to 64x its elements in its consumer kernel (computed once, not per element)}}
  %s = tcc.unary sigmoid %a : tensor<1x8x1x1xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %sb = tcc.broadcast_in_dim %s dims = [0, 1, 2, 3] : tensor<1x8x1x1xf32> -> tensor<1x8x8x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %bb = tcc.broadcast_in_dim %b dims = [0, 1, 2, 3] : tensor<1x8x1x1xf32> -> tensor<1x8x8x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %t = tcc.binary add %x, %bb : tensor<1x8x8x8xf32>
  // expected-remark @below {{materialised: its value is needed in memory}}
  %o = tcc.binary mul %t, %sb : tensor<1x8x8x8xf32>
  return %o : tensor<1x8x8x8xf32>
}

// -----

// A separable resize: the first axis's result is read by the second axis's two taps. Inlined,
// each output element would gather the input four times; it is written once instead.
// CHECK-LABEL: func.func @resize_taps
// CHECK: tcc.fusion "loop"
// CHECK: tcc.gather %{{.*}} axis = 3
// CHECK: tcc.fusion "loop"
// CHECK-NOT: axis = 3
// CHECK: tcc.gather %{{.*}} axis = 2
func.func @resize_taps(%x: tensor<1x2x4x4xf32>, %i0: tensor<8xi64>, %i1: tensor<8xi64>, %w0: tensor<1x1x1x8xf32>, %w1: tensor<1x1x1x8xf32>, %h0: tensor<1x1x8x1xf32>, %h1: tensor<1x1x8x1xf32>) -> tensor<1x2x8x8xf32> {
  // expected-remark @below {{inlined into its consumer's kernel}}
  %a = tcc.gather %x[%i0] axis = 3 : tensor<1x2x4x4xf32>, tensor<8xi64> -> tensor<1x2x4x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %wa = tcc.broadcast_in_dim %w0 dims = [0, 1, 2, 3] : tensor<1x1x1x8xf32> -> tensor<1x2x4x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %am = tcc.binary mul %a, %wa : tensor<1x2x4x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %b = tcc.gather %x[%i1] axis = 3 : tensor<1x2x4x4xf32>, tensor<8xi64> -> tensor<1x2x4x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %wb = tcc.broadcast_in_dim %w1 dims = [0, 1, 2, 3] : tensor<1x1x1x8xf32> -> tensor<1x2x4x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %bm = tcc.binary mul %b, %wb : tensor<1x2x4x8xf32>
  // expected-remark @below {{materialised: read by 2 gathers (taps) for each element they make, and not free to recompute}}
  %w = tcc.binary add %am, %bm : tensor<1x2x4x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %c = tcc.gather %w[%i0] axis = 2 : tensor<1x2x4x8xf32>, tensor<8xi64> -> tensor<1x2x8x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %hc = tcc.broadcast_in_dim %h0 dims = [0, 1, 2, 3] : tensor<1x1x8x1xf32> -> tensor<1x2x8x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %cm = tcc.binary mul %c, %hc : tensor<1x2x8x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %d = tcc.gather %w[%i1] axis = 2 : tensor<1x2x4x8xf32>, tensor<8xi64> -> tensor<1x2x8x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %hd = tcc.broadcast_in_dim %h1 dims = [0, 1, 2, 3] : tensor<1x1x8x1xf32> -> tensor<1x2x8x8xf32>
  // expected-remark @below {{inlined into its consumer's kernel}}
  %dm = tcc.binary mul %d, %hd : tensor<1x2x8x8xf32>
  // expected-remark @below {{materialised: its value is needed in memory}}
  %y = tcc.binary add %cm, %dm : tensor<1x2x8x8xf32>
  return %y : tensor<1x2x8x8xf32>
}
