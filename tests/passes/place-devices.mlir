// smelt-place-devices: default device, builder scopes, soft fallback with reasons, strict
// placement, copies at device boundaries, the summary, and fusion that stays on one device.
// RUN: smelt-opt %s -split-input-file -smelt-place-devices=devices=cpu:0,gpu:0 | FileCheck %s --check-prefix=HASGPU
// RUN: smelt-opt %s -split-input-file -smelt-place-devices="no-gpu-reason={libcuda.so.1 not found}" | FileCheck %s --check-prefix=CPUONLY
// RUN: smelt-opt %s -split-input-file -smelt-place-devices="devices=cpu:0,gpu:0 log-device-placement" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LOG
// RUN: not smelt-opt %s -split-input-file -smelt-place-devices="devices=cpu:0,gpu:0 strict" 2>&1 | FileCheck %s --check-prefix=STRICT
// RUN: smelt-opt %s -split-input-file -smelt-place-devices=devices=cpu:0,gpu:0 -smelt-fuse | FileCheck %s --check-prefix=FUSED
// RUN: smelt-opt %s -split-input-file -smelt-place-devices=devices=cpu:0,gpu:0 -smelt-fuse=one-op-per-kernel | FileCheck %s --check-prefix=UNFUSED

// The matmul, relu and argmax (a kernel of its own) run on the GPU; the exp asked for the CPU.
// Arguments come from and results go to the host, through copies.
// HASGPU-LABEL: func.func @mlp_head
// HASGPU-SAME: smelt.placement = "3 ops on gpu:0, 1 op on cpu:0, 4 copies"
// HASGPU-DAG: %[[W:.+]] = smelt.copy %arg1 {smelt.device = "gpu:0"}
// HASGPU-DAG: %[[X:.+]] = smelt.copy %arg0 {smelt.device = "gpu:0"}
// HASGPU: %[[MM:.+]] = smelt.matmul %[[X]], %[[W]] {smelt.device = "gpu:0"}
// HASGPU: %[[R:.+]] = smelt.relu %[[MM]] {smelt.device = "gpu:0"}
// HASGPU: %[[HOST:.+]] = smelt.copy %[[R]] {smelt.device = "cpu:0"}
// HASGPU: %[[AM:.+]] = smelt.argmax %[[R]] axis = 1 {smelt.device = "gpu:0"}
// HASGPU: %[[AMHOST:.+]] = smelt.copy %[[AM]] {smelt.device = "cpu:0"}
// HASGPU: %[[E:.+]] = smelt.exp %[[HOST]] {smelt.device = "cpu:0"}
// HASGPU: return %[[E]], %[[AMHOST]]
// Without a GPU everything is on the CPU, and the summary says why.
// CPUONLY-LABEL: func.func @mlp_head
// CPUONLY-SAME: smelt.placement = "4 ops on cpu:0 (no GPU: libcuda.so.1 not found)"
// CPUONLY-NOT: smelt.copy
// LOG: @mlp_head 'matmul' at {{.*}}place-devices.mlir:{{[0-9]+}}: gpu:0
// LOG: @mlp_head 'argmax' at {{.*}}: gpu:0
// LOG: @mlp_head 'exp' at {{.*}}: cpu:0
// The relu folds into the GPU's matmul (a cuBLASLt epilogue); the CPU's exp is a kernel there.
// FUSED-LABEL: func.func @mlp_head
// FUSED: smelt.matmul {{.*}} activation relu {smelt.device = "gpu:0"}
// FUSED: smelt.fusion loop({{.*}}) {smelt.device = "cpu:0"
// FUSED: smelt.exp
// Without fusion the relu still runs on the GPU, as a kernel of its own.
// UNFUSED-LABEL: func.func @mlp_head
// UNFUSED: smelt.matmul {{.*}}smelt.device = "gpu:0"
// UNFUSED: smelt.fusion loop{{.*}}smelt.device = "gpu:0"
// UNFUSED-NEXT: ^bb0
// UNFUSED-NEXT: smelt.relu
// UNFUSED-NEXT: smelt.yield
func.func @mlp_head(%x: tensor<8x10xf32>, %w: tensor<10x10xf32>) -> (tensor<8x10xf32>, tensor<8xi64>) {
  %0 = smelt.matmul %x, %w : tensor<8x10xf32>, tensor<10x10xf32>
  %1 = smelt.relu %0 : tensor<8x10xf32>
  %2 = smelt.argmax %1 axis = 1 : tensor<8x10xf32>
  %3 = smelt.exp %1 {smelt.device = "cpu:0"} : tensor<8x10xf32>
  return %3, %2 : tensor<8x10xf32>, tensor<8xi64>
}

// -----

// A dtype the GPU has no kernel for and a device that does not exist fall back with reasons;
// rng_normal, a kernel on the GPU as on the CPU (it fuses), stays on gpu:0.
// HASGPU-LABEL: func.func @fallbacks
// HASGPU-SAME: smelt.placement = "2 ops on gpu:0, 2 ops on cpu:0 (conv2d: no GPU kernel for 'conv2d' in f64; neg: gpu:1 does not exist), 3 copies"
// HASGPU: smelt.rng_normal {{.*}}{smelt.device = "gpu:0"}
// HASGPU: smelt.conv2d {{.*}}{smelt.device = "cpu:0"}
// HASGPU: smelt.neg {{.*}}{smelt.device = "cpu:0"}
// HASGPU: smelt.abs {{.*}}{smelt.device = "gpu:0"}
// CPUONLY-LABEL: func.func @fallbacks
// CPUONLY-SAME: smelt.placement = "4 ops on cpu:0 (neg: gpu:1 does not exist (libcuda.so.1 not found))"
// LOG: @fallbacks 'rng_normal' at {{.*}}: gpu:0
// LOG-NEXT: @fallbacks 'conv2d' at {{.*}}: cpu:0 (wanted gpu:0: no GPU kernel for 'conv2d' in f64)
// STRICT: error: 'smelt.conv2d' op cannot run on gpu:0: no GPU kernel for 'conv2d' in f64 (strict placement)
func.func @fallbacks(%x: tensor<1x4x4x1xf64>, %w: tensor<3x3x1x1xf64>, %y: tensor<4xf32>) -> (tensor<1x2x2x1xf64>, tensor<4xf32>, tensor<4xf32>) {
  %n = smelt.rng_normal seed = 7, mean = 0.0, stddev = 1.0 : tensor<4xf32>
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] : tensor<1x4x4x1xf64>, tensor<3x3x1x1xf64>
  %1 = smelt.neg %y {smelt.device = "gpu:1"} : tensor<4xf32>
  %2 = smelt.abs %1 : tensor<4xf32>
  return %0, %2, %n : tensor<1x2x2x1xf64>, tensor<4xf32>, tensor<4xf32>
}

// -----

// An iota that no kernel absorbs (a result) becomes a kernel of its own: only kernels compute.
// FUSED-LABEL: func.func @positions
// FUSED: %[[IOTA:.+]] = smelt.fusion loop() {smelt.device = "gpu:0"
// FUSED: smelt.iota dim = 1
// FUSED: smelt.copy %[[IOTA]] {smelt.device = "cpu:0"}
// UNFUSED-LABEL: func.func @positions
// UNFUSED: smelt.fusion loop() {{.*}}smelt.device = "gpu:0"
// UNFUSED: smelt.iota
func.func @positions() -> tensor<4x8xi32> {
  %0 = smelt.iota dim = 1 : tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

// An embedding and its gradient, all on the GPU: the gather inside a kernel, scatter_add a
// kernel of its own (docs/ops.md) that no fusion takes in.
// HASGPU-LABEL: func.func @embedding_gradient
// HASGPU-SAME: smelt.placement = "3 ops on gpu:0, 3 copies"
// HASGPU: smelt.gather {{.*}}{smelt.device = "gpu:0"}
// HASGPU: smelt.neg {{.*}}{smelt.device = "gpu:0"}
// HASGPU: smelt.scatter_add {{.*}}{smelt.device = "gpu:0"}
// FUSED-LABEL: func.func @embedding_gradient
// FUSED: smelt.fusion loop({{.*}}) {smelt.device = "gpu:0"
// FUSED-NEXT: ^bb0
// FUSED-NEXT: smelt.gather
// FUSED-NEXT: smelt.neg
// FUSED: smelt.scatter_add {{.*}}{smelt.device = "gpu:0"}
func.func @embedding_gradient(%table: tensor<100x16xf32>, %ids: tensor<4x8xi32>) -> tensor<100x16xf32> {
  %0 = smelt.gather %table[%ids] : tensor<100x16xf32>, tensor<4x8xi32>
  %1 = smelt.neg %0 : tensor<4x8x16xf32>
  %2 = smelt.scatter_add %1[%ids] size = 100 : tensor<4x8x16xf32>, tensor<4x8xi32>
  return %2 : tensor<100x16xf32>
}

// -----

// cuDNN's pooling pads both sides of a dimension alike: TensorFlow's SAME max pooling at
// stride 2 (padding [0, 1, 0, 1]) and its gradient fall back to the CPU, saying why, where the
// symmetric average pooling stays on the GPU.
// HASGPU-LABEL: func.func @asymmetric_pooling
// HASGPU-SAME: smelt.placement = "2 ops on cpu:0, 1 op on gpu:0 (max_pool2d: asymmetric padding [0, 1, 0, 1]: cuDNN's pooling pads both sides alike; max_pool2d_backward: asymmetric padding [0, 1, 0, 1]: cuDNN's pooling pads both sides alike)
// HASGPU: smelt.max_pool2d {{.*}}{smelt.device = "cpu:0"}
// HASGPU: smelt.max_pool2d_backward {{.*}}{smelt.device = "cpu:0"}
// HASGPU: smelt.avg_pool2d {{.*}}{smelt.device = "gpu:0"}
// STRICT: error: 'smelt.max_pool2d' op cannot run on gpu:0: asymmetric padding [0, 1, 0, 1]: cuDNN's pooling pads both sides alike (strict placement)
func.func @asymmetric_pooling(%x: tensor<1x6x6x8xf32>, %dy: tensor<1x3x3x8xf32>) -> (tensor<1x3x3x8xf32>, tensor<1x6x6x8xf32>, tensor<1x3x3x8xf32>) {
  %0 = smelt.max_pool2d %x window = [3, 3] strides = [2, 2] padding = [0, 1, 0, 1] : tensor<1x6x6x8xf32>
  %1 = smelt.max_pool2d_backward %x, %dy window = [3, 3] strides = [2, 2] padding = [0, 1, 0, 1] : tensor<1x6x6x8xf32>, tensor<1x3x3x8xf32>
  %2 = smelt.avg_pool2d %x window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<1x6x6x8xf32>
  return %0, %1, %2 : tensor<1x3x3x8xf32>, tensor<1x6x6x8xf32>, tensor<1x3x3x8xf32>
}
