// RUN: tcc-opt %s -split-input-file -verify-diagnostics

// Result-type inference of tcc.attention (tcc/Support/AttentionShapes.h) and tk.attention's
// verifier.

func.func @element_types(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf16>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention needs q, k and v of one float type, got 'tensor<2x4x8xf32>', 'tensor<2x4x8xf16>', 'tensor<2x4x8xf16>'}}
  %0 = tcc.attention %q, %k, %k {scale = 1.0 : f64} : tensor<2x4x8xf32>, tensor<2x4x8xf16>, tensor<2x4x8xf16> -> tensor<2x4x8xf32>
  return
}

// -----

func.func @integers(%q: tensor<2x4x8xi32>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention needs q, k and v of one float type}}
  %0 = tcc.attention %q, %q, %q {scale = 1.0 : f64} : tensor<2x4x8xi32>, tensor<2x4x8xi32>, tensor<2x4x8xi32> -> tensor<2x4x8xi32>
  return
}

// -----

func.func @rank2(%q: tensor<4x8xf32>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention: q [4, 8], k [4, 8] and v [4, 8] need one rank >= 3}}
  %0 = tcc.attention %q, %q, %q {scale = 1.0 : f64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Grouped-query: 6 query heads cannot share 4 key/value heads.
func.func @groups(%q: tensor<1x6x4x8xf32>, %k: tensor<1x4x4x8xf32>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention: batch dim 1 of k [1, 4, 4, 8] and v [1, 4, 4, 8] must be equal and divide q's [1, 6, 4, 8]}}
  %0 = tcc.attention %q, %k, %k {scale = 1.0 : f64} : tensor<1x6x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32> -> tensor<1x6x4x8xf32>
  return
}

// -----

func.func @head_size(%q: tensor<2x4x8xf32>, %k: tensor<2x4x6xf32>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention: the head sizes of q [2, 4, 8] and k [2, 4, 6] differ}}
  %0 = tcc.attention %q, %k, %k {scale = 1.0 : f64} : tensor<2x4x8xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  return
}

// -----

func.func @key_length(%q: tensor<2x4x8xf32>, %v: tensor<2x5x8xf32>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention: the key lengths of k [2, 4, 8] and v [2, 5, 8] differ}}
  %0 = tcc.attention %q, %q, %v {scale = 1.0 : f64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x5x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

func.func @mask_shape(%q: tensor<2x4x8xf32>, %m: tensor<2x4x3xi1>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention: mask [2, 4, 3] does not broadcast to the scores [2, 4, 4]}}
  %0 = tcc.attention %q, %q, %q mask(%m : tensor<2x4x3xi1>) {scale = 1.0 : f64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

func.func @mask_type(%q: tensor<2x4x8xf32>, %m: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'tcc.attention' op operand #3 must be tensor with static or symbolic (#tcc.dims) dims of 1-bit signless integer values}}
  %0 = tcc.attention %q, %q, %q mask(%m : tensor<2x4x4xf32>) {scale = 1.0 : f64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

func.func @bias_type(%q: tensor<2x4x8xf32>, %b: tensor<2x4x4xf16>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention bias must be of q's type 'f32'}}
  %0 = tcc.attention %q, %q, %q bias(%b : tensor<2x4x4xf16>) {scale = 1.0 : f64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

func.func @bias_rank(%q: tensor<2x4x8xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention: bias [4, 4] does not broadcast to the scores [2, 4, 4]}}
  %0 = tcc.attention %q, %q, %q bias(%b : tensor<4x4xf32>) {scale = 1.0 : f64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

func.func @tk_output(%q: memref<2x4x8xf32>, %o: memref<2x4x4xf32>) {
  // expected-error @+1 {{'tk.attention' op output must be [B..., Lq, Dv]}}
  tk.attention %q, %q, %q -> %o {scale = 1.0 : f64, masked_value = 0.0 : f64} : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x4x4xf32>
  return
}

// -----

func.func @tk_groups(%q: memref<1x6x4x8xf32>, %k: memref<1x4x4x8xf32>, %o: memref<1x6x4x8xf32>) {
  // expected-error @+1 {{'tk.attention' op batch dim 1 of k [1, 4, 4, 8] and v [1, 4, 4, 8] must be equal and divide q's [1, 6, 4, 8]}}
  tk.attention %q, %k, %k -> %o {scale = 1.0 : f64, masked_value = 0.0 : f64} : memref<1x6x4x8xf32>, memref<1x4x4x8xf32>, memref<1x4x4x8xf32>, memref<1x6x4x8xf32>
  return
}

// -----

// Symbolic sizes are compared as expressions: keys of length t and values of length s differ.
func.func @symbolic_key_lengths(%q: tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, %k: tensor<?x4x?x8xf32, #tcc.dims<["b", "t"]>>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention: the key lengths of k [b, 4, t, 8] and v [b, 4, s, 8] differ}}
  %0 = tcc.attention %q, %k, %q {scale = 1.0 : f64} : tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, tensor<?x4x?x8xf32, #tcc.dims<["b", "t"]>>, tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>> -> tensor<?x4x?x8xf32, #tcc.dims<["b", "s"]>>
  return
}

// -----

// A key/value batch dim must divide the query's exactly: b*2 heads do not divide b*3.
func.func @symbolic_groups(%q: tensor<?x?x8xf32, #tcc.dims<["b*3", "s"]>>, %kv: tensor<?x?x8xf32, #tcc.dims<["b*2", "s"]>>) {
  // expected-error @+2 {{'tcc.attention' op failed to infer returned types}}
  // expected-error @+1 {{attention: batch dim 0 of k [b*2, s, 8] and v [b*2, s, 8] must be equal and divide q's [b*3, s, 8]}}
  %0 = tcc.attention %q, %kv, %kv {scale = 1.0 : f64} : tensor<?x?x8xf32, #tcc.dims<["b*3", "s"]>>, tensor<?x?x8xf32, #tcc.dims<["b*2", "s"]>>, tensor<?x?x8xf32, #tcc.dims<["b*2", "s"]>> -> tensor<?x?x8xf32, #tcc.dims<["b*3", "s"]>>
  return
}

// -----

// tk.attention checks its symbolic buffers with the same rules.
func.func @tk_symbolic_output(%q: memref<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, %o: memref<?x4x?x8xf32, #tcc.dims<["b", "t"]>>) {
  // expected-error @+1 {{'tk.attention' op output must be [B..., Lq, Dv]}}
  tk.attention %q, %q, %q -> %o {masked_value = 0xFFF0000000000000 : f64, scale = 1.0 : f64} : memref<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, memref<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, memref<?x4x?x8xf32, #tcc.dims<["b", "s"]>>, memref<?x4x?x8xf32, #tcc.dims<["b", "t"]>>
  return
}

// -----

func.func @grad_wrong_output(%q: tensor<2x4x8xf32>, %o: tensor<2x4x7xf32>) {
  // expected-error@+2 {{attention_grad's output and grad must be the attention's result type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = tcc.attention_grad %q, %q, %q, %o, %o {scale = 1.0 : f64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x7xf32>, tensor<2x4x7xf32> -> tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  return
}

// -----

func.func @tk_grad_shapes(%q: memref<2x4x8xf32>, %k: memref<2x6x8xf32>, %o: memref<2x4x8xf32>, %g: memref<2x6x8xf32>) {
  // expected-error @+1 {{'tk.attention_grad' op grad_q, grad_k and grad_v must have the shapes of q, k and v}}
  tk.attention_grad %q, %k, %k, %o, %o -> %g, %k, %k {scale = 1.0 : f64, masked_value = 0.0 : f64} : memref<2x4x8xf32>, memref<2x6x8xf32>, memref<2x6x8xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x6x8xf32>, memref<2x6x8xf32>, memref<2x6x8xf32>
  return
}

// -----

func.func @tk_grad_mixed(%q: memref<2x4x8xf32>, %q16: memref<2x4x8xbf16>) {
  // expected-error @+1 {{'tk.attention_grad' op q, k, v, the output and every gradient must have one element type}}
  tk.attention_grad %q, %q, %q, %q, %q16 -> %q, %q, %q {scale = 1.0 : f64, masked_value = 0.0 : f64} : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x4x8xbf16>, memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>
  return
}

// -----

func.func @tk_grad_workspace(%q: memref<2x4x8xbf16>, %w: memref<2x4x3xf32>) {
  // expected-error @+1 {{'tk.attention_grad' op the workspace must be f32 [B..., Lq, 2]}}
  tk.attention_grad %q, %q, %q, %q, %q -> %q, %q, %q workspace(%w : memref<2x4x3xf32>) {scale = 1.0 : f64, masked_value = 0.0 : f64} : memref<2x4x8xbf16>, memref<2x4x8xbf16>, memref<2x4x8xbf16>, memref<2x4x8xbf16>, memref<2x4x8xbf16>, memref<2x4x8xbf16>, memref<2x4x8xbf16>, memref<2x4x8xbf16>
  return
}
