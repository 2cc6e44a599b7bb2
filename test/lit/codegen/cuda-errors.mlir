// RUN: not tcc-opt %s -tcc-emit-cuda -split-input-file -o /dev/null 2>&1 | FileCheck %s

// The CUDA emitter reports what it cannot emit on the kernel, naming the op, like the CPU one.

// CHECK: error: tk codegen: cannot emit 'tk.binary' shift_left: unsupported for type i32
func.func @signed_shift(%a: memref<4xi32>) attributes {tk.kernel} {
  tk.parallel [4] {
  ^bb0(%i: index):
    %x = tk.load %a[%i] : memref<4xi32>
    %s = tk.binary shift_left %x, %x : i32
    tk.store %s, %a[%i] : memref<4xi32>
  }
  return
}

// -----

// CHECK: error: tk codegen: kernel name 'bad-name' is not a C identifier
func.func @"bad-name"(%a: memref<4xf32>) attributes {tk.kernel} {
  return
}

// -----

// CHECK: error: tk codegen: cannot emit 'tk.binary' shift_left: unsupported for type i64
// (inside a row reduction split across a team)
func.func @in_a_row(%a: memref<4x64xi64>, %y: memref<4xi64>) attributes {tk.kernel} {
  tk.parallel [4] {
  ^bb0(%i: index):
    %r = tk.reduce sum [64] {
    ^bb0(%j: index):
      %x = tk.load %a[%i, %j] : memref<4x64xi64>
      %s = tk.binary shift_left %x, %x : i64
      tk.yield %s : i64
    } : i64
    tk.store %r, %y[%i] : memref<4xi64>
  }
  return
}
