// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// Verifiers of tcc.if, tcc.loop and tcc.yield.

func.func @if_then_yield_type(%c: tensor<i1>, %x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{'tcc.if' op then region yields ('tensor<4xf16>'), expected ('tensor<4xf32>')}}
  %0 = tcc.if %c -> (tensor<4xf32>) {
    tcc.yield %y : tensor<4xf16>
  } else {
    tcc.yield %x : tensor<4xf32>
  }
  return
}

// -----

func.func @if_else_yield_count(%c: tensor<i1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.if' op else region yields ('tensor<4xf32>', 'tensor<4xf32>'), expected ('tensor<4xf32>')}}
  %0 = tcc.if %c -> (tensor<4xf32>) {
    tcc.yield %x : tensor<4xf32>
  } else {
    tcc.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  return
}

// -----

func.func @if_yield_nothing(%c: tensor<i1>, %x: tensor<2x2xi64>) {
  // expected-error @+1 {{'tcc.if' op else region yields (), expected ('tensor<2x2xi64>')}}
  %0 = tcc.if %c -> (tensor<2x2xi64>) {
    tcc.yield %x : tensor<2x2xi64>
  } else {
    tcc.yield
  }
  return
}

// -----

// The custom form gives the condition its type, so a wrong one is a parse error.
// expected-note @+1 {{prior use here}}
func.func @if_cond_rank(%c: tensor<1xi1>) {
  // expected-error @+1 {{use of value '%c' expects different type than prior uses: 'tensor<i1>' vs 'tensor<1xi1>'}}
  tcc.if %c {
    tcc.yield
  } else {
    tcc.yield
  }
  return
}

// -----

func.func @if_cond_type(%c: tensor<i32>) {
  // expected-error @+1 {{'tcc.if' op operand #0 must be 0D tensor of 1-bit signless integer values, but got 'tensor<i32>'}}
  "tcc.if"(%c) ({
    tcc.yield
  }, {
    tcc.yield
  }) : (tensor<i32>) -> ()
  return
}

// -----

func.func @if_region_arguments(%c: tensor<i1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.if' op region #0 should have no arguments}}
  "tcc.if"(%c) ({
  ^bb0(%a: tensor<4xf32>):
    tcc.yield
  }, {
    tcc.yield
  }) : (tensor<i1>) -> ()
  return
}

// -----

func.func @if_two_blocks(%c: tensor<i1>) {
  // expected-error @+1 {{'tcc.if' op region #0 ('then_region') failed to verify constraint: region with 1 blocks}}
  "tcc.if"(%c) ({
    tcc.yield
  ^bb1:
    tcc.yield
  }, {
    tcc.yield
  }) : (tensor<i1>) -> ()
  return
}

// -----

func.func @yield_outside(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.yield' op expects parent op to be one of 'tcc.if, tcc.loop, tcc.fusion'}}
  "tcc.yield"(%x) : (tensor<4xf32>) -> ()
}

// -----

func.func @loop_fewer_results(%n: tensor<i64>, %c: tensor<i1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.loop' op has fewer results than carried values}}
  tcc.loop (%n, %c) inits(%x : tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<4xf32>):
    tcc.yield %cond, %acc : tensor<i1>, tensor<4xf32>
  }
  return
}

// -----

func.func @loop_missing_body_argument(%n: tensor<i64>, %c: tensor<i1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.loop' op body arguments must be (tensor<i64>, tensor<i1>, carried types...)}}
  %0 = tcc.loop (%n, %c) inits(%x : tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>):
    tcc.yield %cond, %x : tensor<i1>, tensor<4xf32>
  }
  return
}

// -----

func.func @loop_body_argument_type(%n: tensor<i64>, %c: tensor<i1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.loop' op body arguments must be (tensor<i64>, tensor<i1>, carried types...)}}
  %0 = tcc.loop (%n, %c) inits(%x : tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<4xf16>):
    tcc.yield %cond, %x : tensor<i1>, tensor<4xf32>
  }
  return
}

// -----

func.func @loop_body_argument_order(%n: tensor<i64>, %c: tensor<i1>) {
  // expected-error @+1 {{'tcc.loop' op body arguments must be (tensor<i64>, tensor<i1>, carried types...)}}
  tcc.loop (%n, %c) {
  ^bb0(%cond: tensor<i1>, %i: tensor<i64>):
    tcc.yield %cond : tensor<i1>
  }
  return
}

// -----

func.func @loop_result_type(%n: tensor<i64>, %c: tensor<i1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.loop' op result 0 type differs from its initial value's}}
  %0 = tcc.loop (%n, %c) inits(%x : tensor<4xf32>) -> (tensor<4xf16>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<4xf32>):
    tcc.yield %cond, %acc : tensor<i1>, tensor<4xf32>
  }
  return
}

// -----

func.func @loop_scan_rank(%n: tensor<i64>, %c: tensor<i1>) {
  // expected-error @+1 {{'tcc.loop' op scan results need a leading iteration dim}}
  %0 = tcc.loop (%n, %c) -> (tensor<f32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>):
    %1 = tcc.constant dense<1.0> : tensor<f32>
    tcc.yield %cond, %1 : tensor<i1>, tensor<f32>
  }
  return
}

// -----

// The yield must start with the condition.
func.func @loop_yield_no_cond(%n: tensor<i64>, %c: tensor<i1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.loop' op body yields ('tensor<4xf32>'), expected ('tensor<i1>', 'tensor<4xf32>')}}
  %0 = tcc.loop (%n, %c) inits(%x : tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>, %acc: tensor<4xf32>):
    tcc.yield %acc : tensor<4xf32>
  }
  return
}

// -----

// A scan element of type T stacks into a result of type [N, T...].
func.func @loop_scan_element_type(%n: tensor<i64>, %c: tensor<i1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.loop' op body yields ('tensor<i1>', 'tensor<4xf32>'), expected ('tensor<i1>', 'tensor<3xf32>')}}
  %0 = tcc.loop (%n, %c) -> (tensor<5x3xf32>) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>):
    tcc.yield %cond, %x : tensor<i1>, tensor<4xf32>
  }
  return
}

// -----

func.func @loop_max_trip_type(%n: tensor<i32>, %c: tensor<i1>) {
  // expected-error @+1 {{'tcc.loop' op operand #0 must be 0D tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  "tcc.loop"(%n, %c) ({
  ^bb0(%i: tensor<i32>, %cond: tensor<i1>):
    tcc.yield %cond : tensor<i1>
  }) : (tensor<i32>, tensor<i1>) -> ()
  return
}

// -----

func.func @loop_cond_type(%n: tensor<i64>, %c: tensor<1xi1>) {
  // expected-error @+1 {{'tcc.loop' op operand #1 must be 0D tensor of 1-bit signless integer values, but got 'tensor<1xi1>'}}
  "tcc.loop"(%n, %c) ({
  ^bb0(%i: tensor<i64>, %cond: tensor<1xi1>):
    tcc.yield %cond : tensor<1xi1>
  }) : (tensor<i64>, tensor<1xi1>) -> ()
  return
}

// -----

// Regions are checked before their blocks: a missing terminator is an error, not a crash.
func.func @if_no_terminator(%c: tensor<i1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'tcc.if' op then region must end with tcc.yield}}
  %0 = tcc.if %c -> (tensor<4xf32>) {
    %1 = tcc.unary neg %x : tensor<4xf32>
  } else {
    tcc.yield %x : tensor<4xf32>
  }
  return
}

// -----

func.func @if_empty_block(%c: tensor<i1>) {
  // expected-error @+1 {{'tcc.if' op else region must end with tcc.yield}}
  "tcc.if"(%c) ({
    tcc.yield
  }, {
  ^bb0:
  }) : (tensor<i1>) -> ()
  return
}

// -----

func.func @loop_empty_body(%n: tensor<i64>, %c: tensor<i1>) {
  // expected-error @+1 {{'tcc.loop' op body must end with tcc.yield}}
  "tcc.loop"(%n, %c) ({
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>):
  }) : (tensor<i64>, tensor<i1>) -> ()
  return
}

// -----

func.func @loop_no_terminator(%n: tensor<i64>, %c: tensor<i1>) {
  // expected-error @+1 {{'tcc.loop' op body must end with tcc.yield}}
  tcc.loop (%n, %c) {
  ^bb0(%i: tensor<i64>, %cond: tensor<i1>):
    %0 = tcc.unary not %cond : tensor<i1>
  }
  return
}
