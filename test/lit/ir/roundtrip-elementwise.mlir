// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// RUN: tcc-opt %s -mlir-print-op-generic | tcc-opt | FileCheck %s

// Constants, elementwise unary / binary / compare, select and cast: parsed, printed, and parsed
// again (also through the generic form) without change.

// CHECK-LABEL: func.func @constants()
// CHECK-NEXT: %0 = tcc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK-NEXT: %1 = tcc.constant dense<[0, -1, 2, 9223372036854775807]> : tensor<4xi64>
// CHECK-NEXT: %2 = tcc.constant dense<1.500000e+00> : tensor<f16>
// CHECK-NEXT: %3 = tcc.constant dense<[true, false, true]> : tensor<3xi1>
// CHECK-NEXT: %4 = tcc.constant dense<[0, 255]> : tensor<2xui8>
// CHECK-NEXT: %5 = tcc.constant dense<0.000000e+00> : tensor<2x2xbf16>
// CHECK-NEXT: %6 = tcc.constant dense<> : tensor<0x3xi32>
// CHECK-NEXT: return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3xf32>, tensor<4xi64>, tensor<f16>, tensor<3xi1>, tensor<2xui8>, tensor<2x2xbf16>, tensor<0x3xi32>
func.func @constants() -> (tensor<2x3xf32>, tensor<4xi64>, tensor<f16>, tensor<3xi1>, tensor<2xui8>, tensor<2x2xbf16>, tensor<0x3xi32>) {
  %0 = tcc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %1 = tcc.constant dense<[0, -1, 2, 9223372036854775807]> : tensor<4xi64>
  %2 = tcc.constant dense<1.5> : tensor<f16>
  %3 = tcc.constant dense<[true, false, true]> : tensor<3xi1>
  %4 = tcc.constant dense<[0, 255]> : tensor<2xui8>
  %5 = tcc.constant dense<0.0> : tensor<2x2xbf16>
  %6 = tcc.constant dense<> : tensor<0x3xi32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3xf32>, tensor<4xi64>, tensor<f16>, tensor<3xi1>, tensor<2xui8>, tensor<2x2xbf16>, tensor<0x3xi32>
}

// CHECK-LABEL: func.func @unary_float(%arg0: tensor<2x3xf32>, %arg1: tensor<8xf16>, %arg2: tensor<4x4xbf16>, %arg3: tensor<f64>)
// CHECK-NEXT: %0 = tcc.unary exp %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %1 = tcc.unary log %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %2 = tcc.unary sqrt %arg1 : tensor<8xf16>
// CHECK-NEXT: %3 = tcc.unary rsqrt %arg2 : tensor<4x4xbf16>
// CHECK-NEXT: %4 = tcc.unary reciprocal %arg3 : tensor<f64>
// CHECK-NEXT: %5 = tcc.unary sin %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %6 = tcc.unary cos %arg1 : tensor<8xf16>
// CHECK-NEXT: %7 = tcc.unary tan %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %8 = tcc.unary asin %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %9 = tcc.unary acos %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %10 = tcc.unary atan %arg2 : tensor<4x4xbf16>
// CHECK-NEXT: %11 = tcc.unary sinh %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %12 = tcc.unary cosh %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %13 = tcc.unary tanh %arg1 : tensor<8xf16>
// CHECK-NEXT: %14 = tcc.unary asinh %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %15 = tcc.unary acosh %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %16 = tcc.unary atanh %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %17 = tcc.unary erf %arg3 : tensor<f64>
// CHECK-NEXT: %18 = tcc.unary sigmoid %arg2 : tensor<4x4xbf16>
// CHECK-NEXT: %19 = tcc.unary floor %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %20 = tcc.unary ceil %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %21 = tcc.unary round %arg1 : tensor<8xf16>
// CHECK-NEXT: %22 = tcc.unary neg %arg0 : tensor<2x3xf32>
// CHECK-NEXT: %23 = tcc.unary abs %arg2 : tensor<4x4xbf16>
// CHECK-NEXT: %24 = tcc.unary sign %arg3 : tensor<f64>
// CHECK-NEXT: return
func.func @unary_float(%x: tensor<2x3xf32>, %h: tensor<8xf16>, %b: tensor<4x4xbf16>, %d: tensor<f64>) {
  %0 = tcc.unary exp %x : tensor<2x3xf32>
  %1 = tcc.unary log %x : tensor<2x3xf32>
  %2 = tcc.unary sqrt %h : tensor<8xf16>
  %3 = tcc.unary rsqrt %b : tensor<4x4xbf16>
  %4 = tcc.unary reciprocal %d : tensor<f64>
  %5 = tcc.unary sin %x : tensor<2x3xf32>
  %6 = tcc.unary cos %h : tensor<8xf16>
  %7 = tcc.unary tan %x : tensor<2x3xf32>
  %8 = tcc.unary asin %x : tensor<2x3xf32>
  %9 = tcc.unary acos %x : tensor<2x3xf32>
  %10 = tcc.unary atan %b : tensor<4x4xbf16>
  %11 = tcc.unary sinh %x : tensor<2x3xf32>
  %12 = tcc.unary cosh %x : tensor<2x3xf32>
  %13 = tcc.unary tanh %h : tensor<8xf16>
  %14 = tcc.unary asinh %x : tensor<2x3xf32>
  %15 = tcc.unary acosh %x : tensor<2x3xf32>
  %16 = tcc.unary atanh %x : tensor<2x3xf32>
  %17 = tcc.unary erf %d : tensor<f64>
  %18 = tcc.unary sigmoid %b : tensor<4x4xbf16>
  %19 = tcc.unary floor %x : tensor<2x3xf32>
  %20 = tcc.unary ceil %x : tensor<2x3xf32>
  %21 = tcc.unary round %h : tensor<8xf16>
  %22 = tcc.unary neg %x : tensor<2x3xf32>
  %23 = tcc.unary abs %b : tensor<4x4xbf16>
  %24 = tcc.unary sign %d : tensor<f64>
  return
}

// `not` is logical on i1 and bitwise on integers; neg / abs / sign take any number.
// CHECK-LABEL: func.func @unary_int(%arg0: tensor<5xi1>, %arg1: tensor<2x2xi32>, %arg2: tensor<3xui8>, %arg3: tensor<i64>)
// CHECK-NEXT: %0 = tcc.unary not %arg0 : tensor<5xi1>
// CHECK-NEXT: %1 = tcc.unary not %arg1 : tensor<2x2xi32>
// CHECK-NEXT: %2 = tcc.unary not %arg2 : tensor<3xui8>
// CHECK-NEXT: %3 = tcc.unary neg %arg1 : tensor<2x2xi32>
// CHECK-NEXT: %4 = tcc.unary abs %arg3 : tensor<i64>
// CHECK-NEXT: %5 = tcc.unary sign %arg2 : tensor<3xui8>
// CHECK-NEXT: return
func.func @unary_int(%p: tensor<5xi1>, %i: tensor<2x2xi32>, %u: tensor<3xui8>, %s: tensor<i64>) {
  %0 = tcc.unary not %p : tensor<5xi1>
  %1 = tcc.unary not %i : tensor<2x2xi32>
  %2 = tcc.unary not %u : tensor<3xui8>
  %3 = tcc.unary neg %i : tensor<2x2xi32>
  %4 = tcc.unary abs %s : tensor<i64>
  %5 = tcc.unary sign %u : tensor<3xui8>
  return
}

// CHECK-LABEL: func.func @binary(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>, %arg2: tensor<4xi64>, %arg3: tensor<4xi64>, %arg4: tensor<8xui8>, %arg5: tensor<8xui8>, %arg6: tensor<3xi1>, %arg7: tensor<3xi1>, %arg8: tensor<16xbf16>)
// CHECK-NEXT: %0 = tcc.binary add %arg0, %arg1 : tensor<2x3xf32>
// CHECK-NEXT: %1 = tcc.binary sub %arg2, %arg3 : tensor<4xi64>
// CHECK-NEXT: %2 = tcc.binary mul %arg8, %arg8 : tensor<16xbf16>
// CHECK-NEXT: %3 = tcc.binary div %arg2, %arg3 : tensor<4xi64>
// CHECK-NEXT: %4 = tcc.binary rem %arg0, %arg1 : tensor<2x3xf32>
// CHECK-NEXT: %5 = tcc.binary pow %arg0, %arg1 : tensor<2x3xf32>
// CHECK-NEXT: %6 = tcc.binary max %arg4, %arg5 : tensor<8xui8>
// CHECK-NEXT: %7 = tcc.binary min %arg0, %arg1 : tensor<2x3xf32>
// CHECK-NEXT: %8 = tcc.binary and %arg6, %arg7 : tensor<3xi1>
// CHECK-NEXT: %9 = tcc.binary or %arg2, %arg3 : tensor<4xi64>
// CHECK-NEXT: %10 = tcc.binary xor %arg4, %arg5 : tensor<8xui8>
// CHECK-NEXT: %11 = tcc.binary shift_left %arg4, %arg5 : tensor<8xui8>
// CHECK-NEXT: %12 = tcc.binary shift_right %arg4, %arg5 : tensor<8xui8>
// CHECK-NEXT: return
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %i: tensor<4xi64>, %j: tensor<4xi64>,
                  %u: tensor<8xui8>, %v: tensor<8xui8>, %p: tensor<3xi1>, %q: tensor<3xi1>,
                  %h: tensor<16xbf16>) {
  %0 = tcc.binary add %a, %b : tensor<2x3xf32>
  %1 = tcc.binary sub %i, %j : tensor<4xi64>
  %2 = tcc.binary mul %h, %h : tensor<16xbf16>
  %3 = tcc.binary div %i, %j : tensor<4xi64>
  %4 = tcc.binary rem %a, %b : tensor<2x3xf32>
  %5 = tcc.binary pow %a, %b : tensor<2x3xf32>
  %6 = tcc.binary max %u, %v : tensor<8xui8>
  %7 = tcc.binary min %a, %b : tensor<2x3xf32>
  %8 = tcc.binary and %p, %q : tensor<3xi1>
  %9 = tcc.binary or %i, %j : tensor<4xi64>
  %10 = tcc.binary xor %u, %v : tensor<8xui8>
  %11 = tcc.binary shift_left %u, %v : tensor<8xui8>
  %12 = tcc.binary shift_right %u, %v : tensor<8xui8>
  return
}

// Comparisons infer an i1 tensor of the operand shape.
// CHECK-LABEL: func.func @compare(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>, %arg2: tensor<4xi64>, %arg3: tensor<4xui8>, %arg4: tensor<f16>)
// CHECK-NEXT: %0 = tcc.compare eq %arg0, %arg1 : tensor<2x3xf32>
// CHECK-NEXT: %1 = tcc.compare ne %arg2, %arg2 : tensor<4xi64>
// CHECK-NEXT: %2 = tcc.compare lt %arg3, %arg3 : tensor<4xui8>
// CHECK-NEXT: %3 = tcc.compare le %arg4, %arg4 : tensor<f16>
// CHECK-NEXT: %4 = tcc.compare gt %arg0, %arg1 : tensor<2x3xf32>
// CHECK-NEXT: %5 = tcc.compare ge %arg2, %arg2 : tensor<4xi64>
// CHECK-NEXT: return %0, %1, %2, %3, %4, %5 : tensor<2x3xi1>, tensor<4xi1>, tensor<4xi1>, tensor<i1>, tensor<2x3xi1>, tensor<4xi1>
func.func @compare(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %i: tensor<4xi64>, %u: tensor<4xui8>, %h: tensor<f16>)
    -> (tensor<2x3xi1>, tensor<4xi1>, tensor<4xi1>, tensor<i1>, tensor<2x3xi1>, tensor<4xi1>) {
  %0 = tcc.compare eq %a, %b : tensor<2x3xf32>
  %1 = tcc.compare ne %i, %i : tensor<4xi64>
  %2 = tcc.compare lt %u, %u : tensor<4xui8>
  %3 = tcc.compare le %h, %h : tensor<f16>
  %4 = tcc.compare gt %a, %b : tensor<2x3xf32>
  %5 = tcc.compare ge %i, %i : tensor<4xi64>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3xi1>, tensor<4xi1>, tensor<4xi1>, tensor<i1>, tensor<2x3xi1>, tensor<4xi1>
}

// CHECK-LABEL: func.func @select(%arg0: tensor<2x3xi1>, %arg1: tensor<2x3xf32>, %arg2: tensor<2x3xf32>, %arg3: tensor<i1>, %arg4: tensor<ui8>)
// CHECK-NEXT: %0 = tcc.select %arg0, %arg1, %arg2 : tensor<2x3xi1>, tensor<2x3xf32>
// CHECK-NEXT: %1 = tcc.select %arg3, %arg4, %arg4 : tensor<i1>, tensor<ui8>
// CHECK-NEXT: return %0, %1 : tensor<2x3xf32>, tensor<ui8>
func.func @select(%c: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %s: tensor<i1>, %u: tensor<ui8>)
    -> (tensor<2x3xf32>, tensor<ui8>) {
  %0 = tcc.select %c, %a, %b : tensor<2x3xi1>, tensor<2x3xf32>
  %1 = tcc.select %s, %u, %u : tensor<i1>, tensor<ui8>
  return %0, %1 : tensor<2x3xf32>, tensor<ui8>
}

// CHECK-LABEL: func.func @cast(%arg0: tensor<2x3xf32>, %arg1: tensor<4xi1>, %arg2: tensor<8xui8>)
// CHECK-NEXT: %0 = tcc.cast %arg0 : tensor<2x3xf32> -> tensor<2x3xi32>
// CHECK-NEXT: %1 = tcc.cast %arg0 : tensor<2x3xf32> -> tensor<2x3xbf16>
// CHECK-NEXT: %2 = tcc.cast %arg1 : tensor<4xi1> -> tensor<4xf16>
// CHECK-NEXT: %3 = tcc.cast %arg2 : tensor<8xui8> -> tensor<8xi64>
// CHECK-NEXT: %4 = tcc.cast %arg0 : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT: return
func.func @cast(%x: tensor<2x3xf32>, %p: tensor<4xi1>, %u: tensor<8xui8>) {
  %0 = tcc.cast %x : tensor<2x3xf32> -> tensor<2x3xi32>
  %1 = tcc.cast %x : tensor<2x3xf32> -> tensor<2x3xbf16>
  %2 = tcc.cast %p : tensor<4xi1> -> tensor<4xf16>
  %3 = tcc.cast %u : tensor<8xui8> -> tensor<8xi64>
  %4 = tcc.cast %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// Storage-only element types: cast to and from them, select, move, constants.
// CHECK-LABEL: func.func @storage_only_types(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xi1>, %arg2: tensor<4xui4>)
// CHECK-NEXT: %0 = tcc.cast %arg0 : tensor<2x3xf32> -> tensor<2x3xf8E4M3FN>
// CHECK-NEXT: %1 = tcc.constant dense<4.480000e+02> : tensor<2x3xf8E4M3FN>
// CHECK-NEXT: %2 = tcc.select %arg1, %0, %1 : tensor<2x3xi1>, tensor<2x3xf8E4M3FN>
// CHECK-NEXT: %3 = tcc.transpose %2 perm = [1, 0] : tensor<2x3xf8E4M3FN> -> tensor<3x2xf8E4M3FN>
// CHECK-NEXT: %4 = tcc.cast %3 : tensor<3x2xf8E4M3FN> -> tensor<3x2xf8E5M2FNUZ>
// CHECK-NEXT: %5 = tcc.cast %arg2 : tensor<4xui4> -> tensor<4xi2>
// CHECK-NEXT: %6 = tcc.cast %5 : tensor<4xi2> -> tensor<4xf16>
// CHECK-NEXT: return
func.func @storage_only_types(%x: tensor<2x3xf32>, %c: tensor<2x3xi1>, %q: tensor<4xui4>)
    -> (tensor<3x2xf8E5M2FNUZ>, tensor<4xf16>) {
  %0 = tcc.cast %x : tensor<2x3xf32> -> tensor<2x3xf8E4M3FN>
  %1 = tcc.constant dense<448.0> : tensor<2x3xf8E4M3FN>
  %2 = tcc.select %c, %0, %1 : tensor<2x3xi1>, tensor<2x3xf8E4M3FN>
  %3 = tcc.transpose %2 perm = [1, 0] : tensor<2x3xf8E4M3FN> -> tensor<3x2xf8E4M3FN>
  %4 = tcc.cast %3 : tensor<3x2xf8E4M3FN> -> tensor<3x2xf8E5M2FNUZ>
  %5 = tcc.cast %q : tensor<4xui4> -> tensor<4xi2>
  %6 = tcc.cast %5 : tensor<4xi2> -> tensor<4xf16>
  return %4, %6 : tensor<3x2xf8E5M2FNUZ>, tensor<4xf16>
}

// CHECK-LABEL: func.func @bitcast(%arg0: tensor<3xf32>, %arg1: tensor<4xi1>, %arg2: tensor<2xf16>)
// CHECK-NEXT: %0 = tcc.bitcast %arg0 : tensor<3xf32> -> tensor<3xi32>
// CHECK-NEXT: %1 = tcc.bitcast %arg1 : tensor<4xi1> -> tensor<4xui8>
// CHECK-NEXT: %2 = tcc.bitcast %arg2 : tensor<2xf16> -> tensor<2xbf16>
// CHECK-NEXT: return
func.func @bitcast(%x: tensor<3xf32>, %p: tensor<4xi1>, %h: tensor<2xf16>)
    -> (tensor<3xi32>, tensor<4xui8>, tensor<2xbf16>) {
  %0 = tcc.bitcast %x : tensor<3xf32> -> tensor<3xi32>
  %1 = tcc.bitcast %p : tensor<4xi1> -> tensor<4xui8>
  %2 = tcc.bitcast %h : tensor<2xf16> -> tensor<2xbf16>
  return %0, %1, %2 : tensor<3xi32>, tensor<4xui8>, tensor<2xbf16>
}
