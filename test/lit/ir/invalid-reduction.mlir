// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// Verifiers and result-type inference of reduce, arg_reduce, cumsum and topk.

func.func @reduce_unsorted(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{'tcc.reduce' op failed to infer returned types}}
  // expected-error @+1 {{dims entry must be sorted, got [2, 0]}}
  %0 = tcc.reduce sum %x dims = [2, 0] : tensor<2x3x4xf32> -> tensor<3xf32>
  return
}

// -----

func.func @reduce_duplicate(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{'tcc.reduce' op failed to infer returned types}}
  // expected-error @+1 {{dims entry 1 appears twice}}
  %0 = tcc.reduce max %x dims = [1, 1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reduce_out_of_range(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{'tcc.reduce' op failed to infer returned types}}
  // expected-error @+1 {{dims entry 3 is out of range for rank 3}}
  %0 = tcc.reduce min %x dims = [0, 3] : tensor<2x3x4xf32> -> tensor<3x4xf32>
  return
}

// -----

// Reduced dims are removed, not kept as size 1.
func.func @reduce_keepdims(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{'tcc.reduce' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.reduce' op inferred type(s) 'tensor<2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x1x4xf32>'}}
  %0 = tcc.reduce sum %x dims = [1] : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  return
}

// -----

func.func @unknown_reduce_kind(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{custom op 'tcc.reduce' expected string or keyword containing one of the following enum values for attribute 'kind' [sum, prod, max, min]}}
  %0 = tcc.reduce mean %x dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @arg_reduce_dim(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'tcc.arg_reduce' op failed to infer returned types}}
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = tcc.arg_reduce %x dim = 2 {is_max = true} : tensor<2x3xf32> -> tensor<2xi64>
  return
}

// -----

func.func @arg_reduce_empty(%x: tensor<2x0xf32>) {
  // expected-error @+2 {{'tcc.arg_reduce' op failed to infer returned types}}
  // expected-error @+1 {{cannot take the arg max/min of an empty dim}}
  %0 = tcc.arg_reduce %x dim = 1 {is_max = false} : tensor<2x0xf32> -> tensor<2xi64>
  return
}

// -----

func.func @arg_reduce_i32_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'tcc.arg_reduce' op result #0 must be tensor with static or symbolic (#tcc.dims) dims of 64-bit signless integer values, but got 'tensor<2xi32>'}}
  %0 = tcc.arg_reduce %x dim = 1 {is_max = true} : tensor<2x3xf32> -> tensor<2xi32>
  return
}

// -----

func.func @arg_reduce_missing_is_max(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'tcc.arg_reduce' op requires attribute 'is_max'}}
  %0 = tcc.arg_reduce %x dim = 1 : tensor<2x3xf32> -> tensor<2xi64>
  return
}

// -----

func.func @cumsum_dim(%x: tensor<2x5xf32>) {
  // expected-error @+1 {{'tcc.cumsum' op dim 2 is out of range}}
  %0 = tcc.cumsum %x dim = 2 : tensor<2x5xf32>
  return
}

// -----

func.func @cumsum_negative_dim(%x: tensor<2x5xf32>) {
  // expected-error @+1 {{'tcc.cumsum' op dim -1 is out of range}}
  %0 = tcc.cumsum %x dim = -1 : tensor<2x5xf32>
  return
}

// -----

func.func @cumsum_bool(%x: tensor<5xi1>) {
  // expected-error @+1 {{'tcc.cumsum' op needs a numeric operand}}
  %0 = tcc.cumsum %x dim = 0 {exclusive} : tensor<5xi1>
  return
}

// -----

func.func @topk_dim(%x: tensor<3x10xf32>) {
  // expected-error @+2 {{'tcc.topk' op failed to infer returned types}}
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %v, %i = tcc.topk %x dim = 2 k = 1 {largest = true} : tensor<3x10xf32> -> tensor<3x1xf32>, tensor<3x1xi64>
  return
}

// -----

func.func @topk_k_too_large(%x: tensor<3x10xf32>) {
  // expected-error @+2 {{'tcc.topk' op failed to infer returned types}}
  // expected-error @+1 {{k = 11 is out of range for a dim of size 10}}
  %v, %i = tcc.topk %x dim = 1 k = 11 {largest = true} : tensor<3x10xf32> -> tensor<3x11xf32>, tensor<3x11xi64>
  return
}

// -----

func.func @topk_k_negative(%x: tensor<3x10xf32>) {
  // expected-error @+2 {{'tcc.topk' op failed to infer returned types}}
  // expected-error @+1 {{k = -1 is out of range for a dim of size 3}}
  %v, %i = "tcc.topk"(%x) <{dim = 0 : i64, k = -1 : i64, largest = true}> : (tensor<3x10xf32>) -> (tensor<3x10xf32>, tensor<3x10xi64>)
  return
}

// -----

func.func @topk_wrong_values(%x: tensor<3x10xf32>) {
  // expected-error @+2 {{'tcc.topk' op failed to infer returned types}}
  // expected-error @+1 {{'tcc.topk' op inferred type(s) 'tensor<3x4xf32>', 'tensor<3x4xi64>' are incompatible with return type(s) of operation 'tensor<3x4xf16>', 'tensor<3x4xi64>'}}
  %v, %i = tcc.topk %x dim = 1 k = 4 {largest = true} : tensor<3x10xf32> -> tensor<3x4xf16>, tensor<3x4xi64>
  return
}
