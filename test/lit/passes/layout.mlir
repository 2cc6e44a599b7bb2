// RUN: tcc-opt %s -tcc-layout=mode=nhwc -split-input-file | FileCheck %s
// RUN: tcc-opt %s -tcc-layout=mode=nchw -split-input-file | FileCheck %s --check-prefix=OFF
// RUN: tcc-opt %s -tcc-layout=mode=auto -split-input-file | FileCheck %s --check-prefix=AUTO
// RUN: tcc-opt %s -tcc-layout="mode=auto explain=true" -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// An inverted-residual block (1x1 expand + bias + ReLU6, 3x3 depthwise, 1x1 project, + the
// block's input): every convolution channels-last, the bias and the clamp bounds re-laid out
// (constants, broadcasts), one layout copy in (the argument, which the residual add reads too:
// the same copy) and one out (the result). Forced off, nothing changes. Auto: a 6x6 map is small enough for
// both kinds to gain more than the two copies cost.
// CHECK-LABEL: func.func @block(
// CHECK:         %[[IN:.*]] = tcc.transpose %arg0 perm = [0, 2, 3, 1] {tcc.layout} : tensor<1x8x6x6xf32> -> tensor<1x6x6x8xf32>
// CHECK:         %[[Y1:.*]] = tcc.conv %[[IN]], %{{.*}} {channels_last,
// CHECK:         %[[B:.*]] = tcc.transpose %{{.*}} perm = [0, 2, 3, 1] : tensor<1x16x1x1xf32> -> tensor<1x1x1x16xf32>
// CHECK:         %[[BB:.*]] = tcc.broadcast_in_dim %[[B]] dims = [0, 1, 2, 3] : tensor<1x1x1x16xf32> -> tensor<1x6x6x16xf32>
// CHECK:         %[[A:.*]] = tcc.binary add %[[Y1]], %[[BB]] : tensor<1x6x6x16xf32>
// CHECK:         tcc.broadcast_in_dim %{{.*}} dims = [2] : tensor<1xf32> -> tensor<1x6x6x16xf32>
// CHECK:         tcc.binary max %[[A]], %{{.*}} : tensor<1x6x6x16xf32>
// CHECK:         %[[C:.*]] = tcc.binary min
// CHECK:         %[[Y2:.*]] = tcc.conv %[[C]], %{{.*}} {channels_last, groups = 16 : i64
// CHECK:         %[[Y3:.*]] = tcc.conv %[[Y2]], %{{.*}} {channels_last, groups = 1 : i64
// CHECK:         %[[O:.*]] = tcc.binary add %[[IN]], %[[Y3]] : tensor<1x6x6x8xf32>
// CHECK:         %[[OUT:.*]] = tcc.transpose %[[O]] perm = [0, 3, 1, 2] {tcc.layout} : tensor<1x6x6x8xf32> -> tensor<1x8x6x6xf32>
// CHECK-NEXT:    return %[[OUT]]
// OFF-LABEL:   func.func @block(
// OFF-NOT:       tcc.transpose
// OFF-NOT:       channels_last
// AUTO-LABEL:  func.func @block(
// AUTO-COUNT-3:  channels_last
// EXPLAIN-COUNT-3: remark: channels-last: its region saves ~0.7 us of convolution, its layout copies cost ~0.2 us
func.func @block(%x: tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32> {
  %w1 = tcc.constant dense<0.5> : tensor<16x8x1x1xf32>
  %w2 = tcc.constant dense<0.25> : tensor<16x1x3x3xf32>
  %w3 = tcc.constant dense<0.125> : tensor<8x16x1x1xf32>
  %b1 = tcc.constant dense<[[[[1.0]], [[2.0]], [[3.0]], [[4.0]], [[1.0]], [[2.0]], [[3.0]], [[4.0]], [[1.0]], [[2.0]], [[3.0]], [[4.0]], [[1.0]], [[2.0]], [[3.0]], [[4.0]]]]> : tensor<1x16x1x1xf32>
  %zero = tcc.constant dense<0.0> : tensor<1xf32>
  %six = tcc.constant dense<6.0> : tensor<1xf32>
  %y1 = tcc.conv %x, %w1 {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x8x6x6xf32>, tensor<16x8x1x1xf32> -> tensor<1x16x6x6xf32>
  %bb = tcc.broadcast_in_dim %b1 dims = [0, 1, 2, 3] : tensor<1x16x1x1xf32> -> tensor<1x16x6x6xf32>
  %a1 = tcc.binary add %y1, %bb : tensor<1x16x6x6xf32>
  %zb = tcc.broadcast_in_dim %zero dims = [3] : tensor<1xf32> -> tensor<1x16x6x6xf32>
  %sb = tcc.broadcast_in_dim %six dims = [3] : tensor<1xf32> -> tensor<1x16x6x6xf32>
  %r1 = tcc.binary max %a1, %zb : tensor<1x16x6x6xf32>
  %c1 = tcc.binary min %r1, %sb : tensor<1x16x6x6xf32>
  %y2 = tcc.conv %c1, %w2 {groups = 16 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x16x6x6xf32>, tensor<16x1x3x3xf32> -> tensor<1x16x6x6xf32>
  %y3 = tcc.conv %y2, %w3 {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x16x6x6xf32>, tensor<8x16x1x1xf32> -> tensor<1x8x6x6xf32>
  %o = tcc.binary add %x, %y3 : tensor<1x8x6x6xf32>
  return %o : tensor<1x8x6x6xf32>
}

// -----

// Pooling, padding, concatenation and a global average (a reduction over the spatial dims)
// between channels-last values: permuted window, pads, axis and dims; the [N, C] mean needs no
// copy. Not moved: a reshape (its result is channels-first again: one copy).
// Auto: the depthwise convolution on an 8x8 map gains (~0.37 us) more than its two copies (a
// 4x8x8 input, a 8x5x5 result) cost.
// EXPLAIN:     remark: channels-last: its region saves ~0.4 us of convolution, its layout copies cost ~0.2 us
// CHECK-LABEL: func.func @agnostic(
// CHECK:         %[[Y:.*]] = tcc.conv %{{.*}} {channels_last, groups = 4
// CHECK:         %[[P:.*]] = tcc.reduce_window max %[[Y]] {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 1, 1, 0>, pad_low = array<i64: 0, 1, 1, 0>, strides = array<i64: 1, 2, 2, 1>, window = array<i64: 1, 3, 3, 1>} : tensor<1x8x8x4xf32> -> tensor<1x4x4x4xf32>
// CHECK:         %[[Q:.*]] = tcc.pad constant %[[P]], %{{.*}} low = [0, 1, 0, 0] high = [0, 0, 1, 0] : tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x5x5x4xf32>
// CHECK:         %[[C:.*]] = tcc.concat %[[Q]], %[[Q]] axis = 3 : tensor<1x5x5x4xf32>, tensor<1x5x5x4xf32> -> tensor<1x5x5x8xf32>
// CHECK:         %[[T:.*]] = tcc.transpose %[[C]] perm = [0, 3, 1, 2] {tcc.layout}
// CHECK:         %[[M:.*]] = tcc.reduce sum %[[C]] dims = [1, 2] : tensor<1x5x5x8xf32> -> tensor<1x8xf32>
// CHECK:         tcc.reshape %[[T]]
// CHECK:         return %[[M]],
func.func @agnostic(%x: tensor<1x4x8x8xf32>, %w: tensor<4x1x3x3xf32>) -> (tensor<1x8xf32>, tensor<1x200xf32>) {
  %y = tcc.conv %x, %w {groups = 4 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x4x8x8xf32>, tensor<4x1x3x3xf32> -> tensor<1x4x8x8xf32>
  %p = tcc.reduce_window max %y {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, pad_low = array<i64: 0, 0, 1, 1>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 3, 3>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  %zero = tcc.constant dense<0.0> : tensor<f32>
  %q = tcc.pad constant %p, %zero low = [0, 0, 1, 0] high = [0, 0, 0, 1] : tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x5x5xf32>
  %c = tcc.concat %q, %q axis = 1 : tensor<1x4x5x5xf32>, tensor<1x4x5x5xf32> -> tensor<1x8x5x5xf32>
  %m = tcc.reduce sum %c dims = [2, 3] : tensor<1x8x5x5xf32> -> tensor<1x8xf32>
  %r = tcc.reshape %c : tensor<1x8x5x5xf32> -> tensor<1x200xf32>
  return %m, %r : tensor<1x8xf32>, tensor<1x200xf32>
}

// -----

// Auto on a 56x56 map: the depthwise convolution gains little there and the pointwise one loses
// (its input would be packed once more), less than the two 400 KB copies its staying apart
// would need, so both are one region; it loses. Tried again without the pointwise one, the
// depthwise one alone gains less than its copies cost, and nothing changes.
// AUTO-LABEL:  func.func @large(
// AUTO-NOT:      channels_last
// EXPLAIN:     remark: stays channels-first: its region saves ~15.4 us of convolution, its layout copies cost ~66.9 us
// EXPLAIN:     remark: stays channels-first: its region saves ~7.3 us of convolution, its layout copies cost ~66.9 us; it loses ~8.0 us itself, and the region was tried again without it
func.func @large(%x: tensor<1x32x56x56xf32>, %w1: tensor<32x1x3x3xf32>, %w2: tensor<32x32x1x1xf32>) -> tensor<1x32x56x56xf32> {
  %y = tcc.conv %x, %w1 {groups = 32 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x32x56x56xf32>, tensor<32x1x3x3xf32> -> tensor<1x32x56x56xf32>
  %z = tcc.conv %y, %w2 {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x32x56x56xf32>, tensor<32x32x1x1xf32> -> tensor<1x32x56x56xf32>
  return %z : tensor<1x32x56x56xf32>
}

// -----

// Two channels-last convolutions that meet in one product (a squeeze-excitation's gate times its
// features, as EfficientNet and MobileNetV3 have): both copies sink below the product together,
// and the one whose last user moved with the other is dropped, not touched again (a use after
// free once, which crashed on EfficientNet-B0). The input they share is copied once.
// AUTO-LABEL:  func.func @meet(
// CHECK-LABEL: func.func @meet(
// CHECK:         %[[IN:.*]] = tcc.transpose %arg0 perm = [0, 2, 3, 1] {tcc.layout}
// CHECK:         %[[A:.*]] = tcc.conv %[[IN]], %{{.*}} {channels_last,
// CHECK-NOT:     tcc.transpose
// CHECK:         %[[B:.*]] = tcc.conv %[[IN]], %{{.*}} {channels_last,
// CHECK:         %[[M:.*]] = tcc.binary mul %[[A]], %[[B]] : tensor<1x4x4x8xf32>
// CHECK:         %[[OUT:.*]] = tcc.transpose %[[M]] perm = [0, 3, 1, 2] {tcc.layout}
// CHECK-NEXT:    return %[[OUT]]
// CHECK-NOT:     tcc.transpose
func.func @meet(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %w1 = tcc.constant dense<0.5> : tensor<8x8x1x1xf32>
  %w2 = tcc.constant dense<0.25> : tensor<8x1x3x3xf32>
  %a = tcc.conv %x, %w1 {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32> -> tensor<1x8x4x4xf32>
  %b = tcc.conv %x, %w2 {groups = 8 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x8x4x4xf32>, tensor<8x1x3x3xf32> -> tensor<1x8x4x4xf32>
  %m = tcc.binary mul %a, %b : tensor<1x8x4x4xf32>
  return %m : tensor<1x8x4x4xf32>
}

// -----

// Auto on a squeeze-excitation's FC (a 1x1 convolution on a 1x1 map): channels-first it runs a
// 16-column GEMM tile for one column; channels-last it is one row over packed weights, and its
// copies move 4 KB. It goes channels-last.
// CHECK-LABEL: func.func @squeeze_fc(
// AUTO-LABEL:  func.func @squeeze_fc(
// AUTO:          tcc.conv {{.*}}channels_last
// EXPLAIN:     remark: channels-last: its region saves ~69.1 us of convolution, its layout copies cost ~0.4 us
func.func @squeeze_fc(%x: tensor<1x960x1x1xf32>, %w: tensor<240x960x1x1xf32>) -> tensor<1x240x1x1xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x960x1x1xf32>, tensor<240x960x1x1xf32> -> tensor<1x240x1x1xf32>
  return %y : tensor<1x240x1x1xf32>
}

// -----

// Auto on a large pointwise convolution (1024 -> 1024 channels on 28x28): channels-last loses
// more than copies of its input and result would cost, so it is no candidate at all.
// CHECK-LABEL: func.func @large_weights(
// AUTO-LABEL:  func.func @large_weights(
// AUTO-NOT:      channels_last
// EXPLAIN:     remark: stays channels-first: channels-last would cost ~2055.2 us more, more than copies of its input and result (~535.2 us)
func.func @large_weights(%x: tensor<1x1024x28x28xf32>, %w: tensor<1024x1024x1x1xf32>) -> tensor<1x1024x28x28xf32> {
  %y = tcc.conv %x, %w {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x1024x28x28xf32>, tensor<1024x1024x1x1xf32> -> tensor<1x1024x28x28xf32>
  return %y : tensor<1x1024x28x28xf32>
}

// -----

// A stem (a dense 7x7 convolution on the image's 3 channels: the runtime's direct channels-last
// loop) followed by pooling and a pointwise convolution on the 56x56 map, which loses
// channels-last (~128 us) less than the two copies that leaving it channels-first would need;
// the region pays as a whole (copies at ~24 GB/s): the image copied in, the pointwise
// convolution's result out. (At half that copy speed the region did not pay, and was tried
// again without the pointwise convolution; the region rule itself is pinned by @large.)
// AUTO-LABEL:  func.func @stem(
// AUTO:          %[[IN:.*]] = tcc.transpose %arg0 perm = [0, 2, 3, 1] {tcc.layout} : tensor<1x3x224x224xf32> -> tensor<1x224x224x3xf32>
// AUTO:          %[[Y:.*]] = tcc.conv %[[IN]], %{{.*}} {channels_last, groups = 1
// AUTO:          %[[P:.*]] = tcc.reduce_window max %[[Y]]
// AUTO:          %[[Z:.*]] = tcc.conv %[[P]], %{{.*}} {channels_last, groups = 1
// AUTO:          %[[OUT:.*]] = tcc.transpose %[[Z]] perm = [0, 3, 1, 2] {tcc.layout} : tensor<1x56x56x256xf32> -> tensor<1x256x56x56xf32>
// AUTO-NEXT:     return %[[OUT]]
// EXPLAIN-COUNT-2: remark: channels-last: its region saves ~620.8 us of convolution, its layout copies cost ~317.8 us
func.func @stem(%x: tensor<1x3x224x224xf32>, %w1: tensor<64x3x7x7xf32>, %w2: tensor<256x64x1x1xf32>) -> tensor<1x256x56x56xf32> {
  %y = tcc.conv %x, %w1 {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 3, 3>, pad_low = array<i64: 3, 3>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 2, 2>} : tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32> -> tensor<1x64x112x112xf32>
  %p = tcc.reduce_window max %y {dilations = array<i64: 1, 1, 1, 1>, pad_high = array<i64: 0, 0, 1, 1>, pad_low = array<i64: 0, 0, 1, 1>, strides = array<i64: 1, 1, 2, 2>, window = array<i64: 1, 1, 3, 3>} : tensor<1x64x112x112xf32> -> tensor<1x64x56x56xf32>
  %z = tcc.conv %p, %w2 {groups = 1 : i64, lhs_dilation = array<i64: 1, 1>, pad_high = array<i64: 0, 0>, pad_low = array<i64: 0, 0>, rhs_dilation = array<i64: 1, 1>, strides = array<i64: 1, 1>} : tensor<1x64x56x56xf32>, tensor<256x64x1x1xf32> -> tensor<1x256x56x56xf32>
  return %z : tensor<1x256x56x56xf32>
}
