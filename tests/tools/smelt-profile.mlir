// `smelt run --profile`: a Chrome trace (JSON that parses) with the compile's passes and phases,
// every step run as a span on cpu:0's stream with its op, shapes and bytes, the output copies,
// and the executor's memory as counter samples.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/npy_tool.py random %t/x.npy 16,32 float32 1
// RUN: %python %S/npy_tool.py random %t/b.npy 8 float32 2
// RUN: smelt run %s --input x=%t/x.npy --input b=%t/b.npy --profile %t/trace.json 2>&1 | FileCheck %s --check-prefix=STDERR
// RUN: %python %S/json_tool.py trace %t/trace.json | FileCheck %s
// `smelt train` profiles and dumps every function it compiles.
// RUN: smelt train --limit=256 --epochs=1 --batch=128 --validation-split=0 --profile %t/train.json --dump-dir %t/dump > /dev/null
// RUN: %python %S/json_tool.py trace %t/train.json | FileCheck %s --check-prefix=TRAIN
// RUN: ls %t/dump | FileCheck %s --check-prefix=DUMPS
// DUMPS: eval_step-0
// DUMPS-NEXT: train_step-0
// DUMPS-NEXT: train_step_init-0

// RUN: not smelt run %s --input x=%t/x.npy --input b=%t/b.npy --profile %t/missing/trace.json 2>&1 | FileCheck %s --check-prefix=BADPATH

// STDERR: wrote {{.*}}trace.json ({{[0-9]+}} events; open it in https://ui.perfetto.dev)
// CHECK: span compile on compiler/phases: pipeline @main {}
// CHECK: span copy on cpu:0/stream 0: copy outputs {"bytes": "512"}
// CHECK: span kernel on cpu:0/stream 0: main_fusion0 {"bytes": "1024", "device": "cpu:0", "flops": "128", "kind": "kernel", "location": "{{.*}}smelt-profile.mlir:{{[0-9]+}}:{{[0-9]+}}", "op": "mul", "shapes": "tensor<16x8xf32> -> tensor<16x8xf32>"}
// The bias add and tanh run in the matmul (smelt-fuse folds them): an op each per element.
// CHECK: span library on cpu:0/stream 0: matmul {"bytes": "3616", "device": "cpu:0", "flops": "8448", "kind": "library", "location": "{{.*}}smelt-profile.mlir:{{[0-9]+}}:{{[0-9]+}}", "op": "matmul+bias+tanh", "shapes": "tensor<16x32xf32>, tensor<32x8xf32>, tensor<8xf32> -> tensor<16x8xf32>"}
// CHECK: span pass on compiler/passes: canonicalize {}
// CHECK: span run on cpu:0/stream 0: run @main {}
// CHECK: counter memory: 5 samples, peak {{[0-9]+}}

// TRAIN: span compile on compiler/phases: pipeline @train_step_init
// TRAIN: span library on cpu:0/stream 0: matmul
// TRAIN: span run on cpu:0/stream 0: run @train_step_init
// TRAIN: counter memory:

// BADPATH: error: {{.*}}missing/trace.json: cannot write the trace

func.func @main(%x: tensor<16x32xf32> {smelt.name = "x"}, %b: tensor<8xf32> {smelt.name = "b"})
    -> tensor<16x8xf32> {
  %w = smelt.constant dense<0.25> : tensor<32x8xf32>
  %0 = smelt.matmul %x, %w : tensor<16x32xf32>, tensor<32x8xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<16x8xf32>
  %2 = smelt.add %0, %1 : tensor<16x8xf32>
  %3 = smelt.tanh %2 : tensor<16x8xf32>
  %4 = smelt.mul %3, %3 : tensor<16x8xf32>
  return %4 : tensor<16x8xf32>
}
