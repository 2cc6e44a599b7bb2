// RUN: not tcc-opt %s -tcc-emit-cpp -o /dev/null 2>&1 | FileCheck %s

// The emitter names the op it cannot emit (the reference kernels define shifts only on
// unsigned integers).
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
