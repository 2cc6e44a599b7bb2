// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// Type constraints shared by every op, and the constant / unary / binary / compare / select /
// cast verifiers.

// Shapes must be static.
func.func @dynamic_shape(%x: tensor<?x3xf32>) {
  // expected-error @+1 {{'tcc.unary' op operand #0 must be tensor with static or symbolic (#tcc.dims) dims of 1-bit signless integer or 8-bit signless integer or 16-bit signless integer or 32-bit signless integer or 64-bit signless integer or 8-bit unsigned integer or 16-bit unsigned integer or 32-bit unsigned integer or 64-bit unsigned integer or 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<?x3xf32>'}}
  %0 = tcc.unary exp %x : tensor<?x3xf32>
  return
}

// -----

func.func @unranked(%x: tensor<*xf32>, %y: tensor<*xf32>) {
  // expected-error-re @+1 {{'tcc.binary' op operand #0 must be tensor with static or symbolic (#tcc.dims) dims of {{.*}} values, but got 'tensor<*xf32>'}}
  %0 = "tcc.binary"(%x, %y) <{kind = 0 : i32}> : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

// Signed integers are signless: si32 is not a tcc element type, and neither are i4, f8 or index.
func.func @signed_int(%x: tensor<4xsi32>) {
  // expected-error-re @+1 {{'tcc.unary' op operand #0 must be tensor with static or symbolic (#tcc.dims) dims of {{.*}} values, but got 'tensor<4xsi32>'}}
  %0 = tcc.unary neg %x : tensor<4xsi32>
  return
}

// -----

func.func @constant_i3() {
  // expected-error-re @+1 {{'tcc.constant' op result #0 must be tensor with static or symbolic (#tcc.dims) dims of {{.*}} values, but got 'tensor<2xi3>'}}
  %0 = tcc.constant dense<[1, 2]> : tensor<2xi3>
  return
}

// -----

func.func @f8_variant_tcc_lacks(%x: tensor<4xf32>) {
  // expected-error-re @+1 {{'tcc.cast' op result #0 must be tensor with static or symbolic (#tcc.dims) dims of {{.*}} values, but got 'tensor<4xf8E4M3B11FNUZ>'}}
  %0 = tcc.cast %x : tensor<4xf32> -> tensor<4xf8E4M3B11FNUZ>
  return
}

// -----

// Storage-only element types (float8 variants, 4- and 2-bit integers) are held, moved and cast,
// never computed on: arithmetic ops take Tcc_ComputeTensor.
func.func @f8_arithmetic(%x: tensor<4xf8E4M3FN>) {
  // expected-error-re @+1 {{'tcc.binary' op operand #0 must be tensor with static or symbolic (#tcc.dims) dims of {{.*}} values, but got 'tensor<4xf8E4M3FN>'}}
  %0 = tcc.binary add %x, %x : tensor<4xf8E4M3FN>
  return
}

// -----

func.func @i4_reduction(%x: tensor<4xi4>) {
  // expected-error-re @+1 {{'tcc.reduce' op operand #0 must be tensor with static or symbolic (#tcc.dims) dims of {{.*}} values, but got 'tensor<4xi4>'}}
  %0 = tcc.reduce sum %x dims = [0] : tensor<4xi4> -> tensor<i4>
  return
}

// -----

func.func @f8_matmul(%x: tensor<4x4xf8E5M2>) {
  // expected-error-re @+1 {{'tcc.matmul' op operand #0 must be tensor with static or symbolic (#tcc.dims) dims of {{.*}} values, but got 'tensor<4x4xf8E5M2>'}}
  %0 = tcc.matmul %x, %x : tensor<4x4xf8E5M2>, tensor<4x4xf8E5M2> -> tensor<4x4xf8E5M2>
  return
}

// -----

func.func @index_type(%x: tensor<4xindex>) {
  // expected-error-re @+1 {{'tcc.reverse' op operand #0 must be tensor with static or symbolic (#tcc.dims) dims of {{.*}} values, but got 'tensor<4xindex>'}}
  %0 = tcc.reverse %x dims = [0] : tensor<4xindex>
  return
}

// -----

func.func @constant_vector() {
  // expected-error @+1 {{constant value must be a ranked tensor}}
  %0 = tcc.constant dense<1.0> : vector<4xf32>
  return
}

// -----

// An explicit result type that differs from the inferred one.
func.func @constant_wrong_type() {
  // expected-error @+2 {{'tcc.constant' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.constant' op inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<2xf16>'}}
  %0 = "tcc.constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf16>
  return
}

// -----

func.func @not_float(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.unary' op 'not' needs a bool or integer operand}}
  %0 = tcc.unary not %x : tensor<4xf32>
  return
}

// -----

func.func @neg_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{'tcc.unary' op 'neg' needs a numeric operand}}
  %0 = tcc.unary neg %x : tensor<4xi1>
  return
}

// -----

func.func @abs_bool(%x: tensor<i1>) {
  // expected-error @+1 {{'tcc.unary' op 'abs' needs a numeric operand}}
  %0 = tcc.unary abs %x : tensor<i1>
  return
}

// -----

func.func @sign_bool(%x: tensor<2x2xi1>) {
  // expected-error @+1 {{'tcc.unary' op 'sign' needs a numeric operand}}
  %0 = tcc.unary sign %x : tensor<2x2xi1>
  return
}

// -----

func.func @exp_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'tcc.unary' op 'exp' needs a float operand}}
  %0 = tcc.unary exp %x : tensor<4xi32>
  return
}

// -----

func.func @floor_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{'tcc.unary' op 'floor' needs a float operand}}
  %0 = tcc.unary floor %x : tensor<4xi1>
  return
}

// -----

func.func @unknown_unary_kind(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'tcc.unary' expected string or keyword containing one of the following enum values for attribute 'kind' [neg, abs, exp, log, sqrt, rsqrt, reciprocal, sin, cos, tan, asin, acos, atan, sinh, cosh, tanh, asinh, acosh, atanh, erf, sigmoid, floor, ceil, round, sign, not]}}
  %0 = tcc.unary relu %x : tensor<4xf32>
  return
}

// -----

func.func @unary_result_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.unary' op requires the same type for all operands and results}}
  %0 = "tcc.unary"(%x) <{kind = 2 : i32}> : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @and_float(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.binary' op 'and' needs bool or integer operands}}
  %0 = tcc.binary and %x, %x : tensor<4xf32>
  return
}

// -----

func.func @xor_bf16(%x: tensor<4xbf16>) {
  // expected-error @+1 {{'tcc.binary' op 'xor' needs bool or integer operands}}
  %0 = tcc.binary xor %x, %x : tensor<4xbf16>
  return
}

// -----

func.func @shift_signed(%x: tensor<4xi32>) {
  // expected-error @+1 {{'tcc.binary' op shifts need unsigned integer operands}}
  %0 = tcc.binary shift_left %x, %x : tensor<4xi32>
  return
}

// -----

func.func @shift_float(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.binary' op shifts need unsigned integer operands}}
  %0 = tcc.binary shift_right %x, %x : tensor<4xf32>
  return
}

// -----

func.func @shift_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{'tcc.binary' op shifts need unsigned integer operands}}
  %0 = tcc.binary shift_right %x, %x : tensor<4xi1>
  return
}

// -----

func.func @add_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{'tcc.binary' op 'add' needs numeric operands}}
  %0 = tcc.binary add %x, %x : tensor<4xi1>
  return
}

// -----

func.func @pow_bool(%x: tensor<i1>) {
  // expected-error @+1 {{'tcc.binary' op 'pow' needs numeric operands}}
  %0 = tcc.binary pow %x, %x : tensor<i1>
  return
}

// -----

// Broadcasting is explicit: operands of a binary op have one type.
func.func @binary_shapes(%x: tensor<4xf32>, %y: tensor<1xf32>) {
  // expected-error @+1 {{'tcc.binary' op requires the same type for all operands and results}}
  %0 = "tcc.binary"(%x, %y) <{kind = 0 : i32}> : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @compare_types(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{'tcc.compare' op requires all operands to have the same type}}
  %0 = "tcc.compare"(%x, %y) <{kind = 0 : i32}> : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_result_not_bool(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'tcc.compare' op result #0 must be tensor with static or symbolic (#tcc.dims) dims of 1-bit signless integer values, but got 'tensor<2x3xf32>'}}
  %0 = "tcc.compare"(%x, %x) <{kind = 2 : i32}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @compare_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'tcc.compare' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.compare' op inferred type(s) 'tensor<2x3xi1>' are incompatible with return type(s) of operation 'tensor<3x2xi1>'}}
  %0 = "tcc.compare"(%x, %x) <{kind = 2 : i32}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x2xi1>
  return
}

// -----

func.func @select_cond_shape(%c: tensor<3x2xi1>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{select condition shape 'tensor<3x2xi1>' differs from 'tensor<2x3xf32>'}}
  %0 = tcc.select %c, %x, %x : tensor<3x2xi1>, tensor<2x3xf32>
  return
}

// -----

func.func @select_cond_not_bool(%c: tensor<2x3xi32>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'tcc.select' op operand #0 must be tensor with static or symbolic (#tcc.dims) dims of 1-bit signless integer values, but got 'tensor<2x3xi32>'}}
  %0 = tcc.select %c, %x, %x : tensor<2x3xi32>, tensor<2x3xf32>
  return
}

// -----

func.func @select_branch_types(%c: tensor<2x3xi1>, %x: tensor<2x3xf32>, %y: tensor<2x3xf16>) {
  // expected-error @+1 {{'tcc.select' op failed to verify that all of {on_true, on_false} have same type}}
  %0 = "tcc.select"(%c, %x, %y) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'tcc.cast' op changes the shape from 'tensor<2x3xf32>' to 'tensor<3x2xi32>'}}
  %0 = tcc.cast %x : tensor<2x3xf32> -> tensor<3x2xi32>
  return
}

// -----

func.func @cast_rank(%x: tensor<f32>) {
  // expected-error @+1 {{'tcc.cast' op changes the shape from 'tensor<f32>' to 'tensor<1xf16>'}}
  %0 = tcc.cast %x : tensor<f32> -> tensor<1xf16>
  return
}

// -----

func.func @bitcast_width(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.bitcast' op needs element types of one width, got 'f32' (32 bits) and 'f16' (16 bits)}}
  %0 = tcc.bitcast %x : tensor<4xf32> -> tensor<4xf16>
  return
}

// -----

func.func @bitcast_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.bitcast' op changes the shape from 'tensor<4xf32>' to 'tensor<2x2xi32>'}}
  %0 = tcc.bitcast %x : tensor<4xf32> -> tensor<2x2xi32>
  return
}
