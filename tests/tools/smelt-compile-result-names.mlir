// An artifact keeps the function's result names: a result that is an argument, and a value
// returned twice, are written under their own names (a.npy, b.npy, c.npy), equal to the JIT
// path's files and to NumPy's -x.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/npy_tool.py random %t/x.npy 4,5 float32 7
// RUN: smelt run %s --input x=%t/x.npy --output-dir %t/jit | FileCheck %s
// RUN: smelt compile %s --target=cpu -o %t/names.smelt
// RUN: smelt run %t/names.smelt --input x=%t/x.npy --output-dir %t/aot | FileCheck %s
// RUN: ls %t/aot | FileCheck %s --check-prefix=FILES
// RUN: cmp %t/jit/a.npy %t/aot/a.npy && cmp %t/jit/b.npy %t/aot/b.npy && cmp %t/jit/c.npy %t/aot/c.npy
// RUN: cmp %t/x.npy %t/aot/a.npy
// RUN: %python -c "import numpy as np, sys; d = sys.argv[1]; x = np.load(d + '/x.npy').astype(np.float64); assert (np.load(d + '/aot/b.npy') == -x).all() and (np.load(d + '/aot/c.npy') == -x).all(); print('negated OK')" %t | FileCheck %s --check-prefix=NUMPY
// CHECK-DAG: wrote {{.*}}a.npy (tensor<4x5xf32>)
// CHECK-DAG: wrote {{.*}}b.npy (tensor<4x5xf32>)
// CHECK-DAG: wrote {{.*}}c.npy (tensor<4x5xf32>)
// FILES: a.npy
// FILES-NEXT: b.npy
// FILES-NEXT: c.npy
// FILES-NOT: .npy
// NUMPY: negated OK

func.func @main(%x: tensor<4x5xf32> {smelt.name = "x"})
    -> (tensor<4x5xf32> {smelt.name = "a"}, tensor<4x5xf32> {smelt.name = "b"},
        tensor<4x5xf32> {smelt.name = "c"}) {
  %y = smelt.neg %x : tensor<4x5xf32>
  return %x, %y, %y : tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>
}
