// RUN: tcc-opt -tcc-plan-memory %s | FileCheck %s

// Buffers live at the same time get disjoint bytes; a buffer whose lifetime ended (including
// the uses of its views) is reused; offsets are 64-byte aligned and the arena is as large as
// the largest set of simultaneously live buffers needs.

func.func @k1(%a: memref<100xf32>, %b: memref<100xf32>) attributes {tk.kernel} {
  return
}
func.func @k2(%a: memref<10x10xf32>, %b: memref<100xf32>) attributes {tk.kernel} {
  return
}

// CHECK-LABEL: func.func @main
// CHECK-SAME: tk.arena_bytes = 896 : i64
func.func @main(%in: memref<100xf32>, %out: memref<100xf32>) attributes {tk.program, tk.num_inputs = 1 : i64} {
  // CHECK: %[[A:.*]] = tk.alloc {offset = 0 : i64}
  %a = tk.alloc : memref<100xf32>
  tk.launch @k1(%in, %a) : memref<100xf32>, memref<100xf32>
  // B is live with A (A is read while B is written): next aligned slot after 400 bytes.
  // CHECK: %[[B:.*]] = tk.alloc {offset = 448 : i64}
  %b = tk.alloc : memref<100xf32>
  %av = tk.view %a : memref<100xf32> to memref<10x10xf32>
  tk.launch @k2(%av, %b) : memref<10x10xf32>, memref<100xf32>
  // A's last use was through its view: C reuses offset 0.
  // CHECK: tk.alloc {offset = 0 : i64}
  %c = tk.alloc : memref<100xf32>
  tk.launch @k1(%b, %c) : memref<100xf32>, memref<100xf32>
  // D overlaps C only: placed after it.
  // CHECK: tk.alloc {offset = 448 : i64}
  %d = tk.alloc : memref<100xf32>
  tk.launch @k1(%c, %d) : memref<100xf32>, memref<100xf32>
  tk.copy %d, %out : memref<100xf32>, memref<100xf32>
  return
}
