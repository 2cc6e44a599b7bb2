// RUN: tcc-opt -tcc-plan-memory %s -split-input-file -verify-diagnostics | FileCheck %s

// Temporaries with symbolic dims are planned at every size symbol's max: one static arena
// holds every size the program accepts. Each alloc keeps its lifetime (positions in the
// program), with which the runtime places them again at the sizes of each binding.

// seq <= 100: a [seq] f32 buffer takes at most 400 bytes, the next one starts at 448.
// CHECK-LABEL: func.func @main
// CHECK-SAME: tk.arena_bytes = 896 : i64
// CHECK: tk.alloc {offset = 0 : i64, tk.lifetime = array<i64: 1, 4>}
// CHECK: tk.alloc {offset = 448 : i64, tk.lifetime = array<i64: 3, 5>}
module attributes {tcc.symbols = {seq = array<i64: 1, 100>}} {
func.func @k(%a: memref<?xf32, #tcc.dims<["seq"]>>, %b: memref<?xf32, #tcc.dims<["seq"]>>, %s: memref<1xi64> {tk.symbols}) attributes {tk.kernel} {
  return
}
func.func @main(%in: memref<?xf32, #tcc.dims<["seq"]>>, %out: memref<?xf32, #tcc.dims<["seq"]>>) attributes {tk.program, tk.num_inputs = 1 : i64} {
  %syms = tk.symbol_values : memref<1xi64>
  %a = tk.alloc : memref<?xf32, #tcc.dims<["seq"]>>
  tk.launch @k(%in, %a, %syms) : memref<?xf32, #tcc.dims<["seq"]>>, memref<?xf32, #tcc.dims<["seq"]>>, memref<1xi64>
  %b = tk.alloc : memref<?xf32, #tcc.dims<["seq"]>>
  tk.launch @k(%a, %b, %syms) : memref<?xf32, #tcc.dims<["seq"]>>, memref<?xf32, #tcc.dims<["seq"]>>, memref<1xi64>
  tk.launch @k(%b, %out, %syms) : memref<?xf32, #tcc.dims<["seq"]>>, memref<?xf32, #tcc.dims<["seq"]>>, memref<1xi64>
  return
}
}

// -----

// Without an upper bound there is no static plan: the error says how to declare one.
module attributes {tcc.symbols = {seq = array<i64: 1, 9223372036854775807>}} {
func.func @main(%in: memref<?xf32, #tcc.dims<["seq"]>>) attributes {tk.program, tk.num_inputs = 1 : i64} {
  // expected-error @+1 {{has no practical upper bound over the size symbols' ranges (seq >= 1): declare them, e.g. --input-shape NAME=1..64x16..512}}
  %a = tk.alloc : memref<?xf32, #tcc.dims<["seq"]>>
  return
}
}
