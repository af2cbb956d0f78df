// smelt-fuse: fusion decisions on chains, diamonds, broadcasts, reductions as roots, multiple
// results, siblings, slices, pads and concats, and each veto; the second run checks the
// report's reasons. Epilogue folding (on by default) is fuse-epilogues.mlir's: off here, the
// MLP layer fuses as a kernel.
// RUN: smelt-opt %s -split-input-file -smelt-fuse=epilogues=false | FileCheck %s
// RUN: smelt-opt %s -split-input-file -smelt-fuse="epilogues=false report=-" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not smelt-opt %s -split-input-file -smelt-fuse=report=%t.missing/report.txt 2>&1 | FileCheck %s --check-prefix=BADPATH
// BADPATH: error: smelt-fuse: cannot write the report to '{{.*}}missing/report.txt': No such file or directory

// The MLP layer: the matmul stays a library call; broadcast, add and relu become one kernel.
// CHECK-LABEL: func.func @bias_relu
// CHECK: %[[MM:.+]] = smelt.matmul
// CHECK: smelt.fusion loop(%arg2, %[[MM]])
// CHECK-NEXT: ^bb0(%[[B:.+]]: tensor<16xf32>, %[[M:.+]]: tensor<4x16xf32>):
// CHECK-NEXT: %[[BB:.+]] = smelt.broadcast_in_dim %[[B]], dims = [1]
// CHECK-NEXT: %[[S:.+]] = smelt.add %[[M]], %[[BB]]
// CHECK-NEXT: %[[R:.+]] = smelt.relu %[[S]]
// CHECK-NEXT: smelt.yield %[[R]]
// REPORT-LABEL: report for @bias_relu
// REPORT: fusion 0 (loop over 4x16, 1 result, 3 ops)
// REPORT: not fused: 'matmul' {{.*}}: no kernel renders it (library op)
func.func @bias_relu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = smelt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %2 = smelt.add %0, %1 : tensor<4x16xf32>
  %3 = smelt.relu %2 : tensor<4x16xf32>
  return %3 : tensor<4x16xf32>
}

// -----

// A diamond: one kernel, the shared neg computed once.
// CHECK-LABEL: func.func @diamond
// CHECK: smelt.fusion loop
// CHECK: %[[N:.+]] = smelt.neg
// CHECK-NEXT: %[[E:.+]] = smelt.exp %[[N]]
// CHECK-NEXT: %[[T:.+]] = smelt.tanh %[[N]]
// CHECK-NEXT: smelt.add %[[E]], %[[T]]
// CHECK-NOT: smelt.fusion
// REPORT-LABEL: report for @diamond
// REPORT: fusion 0 (loop over 64, 1 result, 4 ops)
func.func @diamond(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = smelt.neg %x : tensor<64xf32>
  %b = smelt.exp %a : tensor<64xf32>
  %c = smelt.tanh %a : tensor<64xf32>
  %d = smelt.add %b, %c : tensor<64xf32>
  return %d : tensor<64xf32>
}

// -----

// A reduce is the root of its kernel and takes its operand's producers.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK: smelt.fusion reduction
// CHECK: %[[SQ:.+]] = smelt.mul
// CHECK-NEXT: smelt.reduce sum %[[SQ]] axes = [1]
func.func @sum_of_squares(%x: tensor<32x16xf32>) -> tensor<32xf32> {
  %0 = smelt.mul %x, %x : tensor<32x16xf32>
  %1 = smelt.reduce sum %0 axes = [1] : tensor<32x16xf32>
  return %1 : tensor<32xf32>
}

// -----

// No reduce into reduce: two kernels.
// CHECK-LABEL: func.func @reduce_of_reduce
// CHECK: %[[MAX:.+]] = smelt.fusion reduction(%arg0)
// CHECK: smelt.reduce max
// CHECK: smelt.fusion reduction(%[[MAX]])
// CHECK: smelt.exp
// CHECK-NEXT: smelt.reduce sum
// REPORT-LABEL: report for @reduce_of_reduce
// REPORT: not fused: 'reduce' {{.*}}: a reduce does not fuse into a reduce
func.func @reduce_of_reduce(%x: tensor<32x16xf32>) -> tensor<f32> {
  %0 = smelt.reduce max %x axes = [1] : tensor<32x16xf32>
  %1 = smelt.exp %0 : tensor<32xf32>
  %2 = smelt.reduce sum %1 axes = [0] : tensor<32xf32>
  return %2 : tensor<f32>
}

// -----

// A value also returned is an extra result of the kernel that computes it.
// CHECK-LABEL: func.func @multi_output
// CHECK: %[[F:.+]]:2 = smelt.fusion loop(%arg0, %arg1)
// CHECK: %[[E:.+]] = smelt.exp
// CHECK-NEXT: %[[S:.+]] = smelt.add %[[E]]
// CHECK-NEXT: smelt.yield %[[E]], %[[S]]
// CHECK: return %[[F]]#0, %[[F]]#1
// REPORT-LABEL: report for @multi_output
// REPORT: fused as an extra result: 'exp'
func.func @multi_output(%x: tensor<128xf32>, %y: tensor<128xf32>) -> (tensor<128xf32>, tensor<128xf32>) {
  %e = smelt.exp %x : tensor<128xf32>
  %f = smelt.add %e, %y : tensor<128xf32>
  return %e, %f : tensor<128xf32>, tensor<128xf32>
}

// -----

// Fusing %a as an extra result would make a cycle through the matmul.
// CHECK-LABEL: func.func @cycle_veto
// CHECK: %[[EXP:.+]] = smelt.fusion loop(%arg0)
// CHECK: %[[MM:.+]] = smelt.matmul %[[EXP]], %[[EXP]]
// CHECK: smelt.fusion loop(%[[EXP]], %[[MM]])
// REPORT-LABEL: report for @cycle_veto
// REPORT: not fused: 'exp' {{.*}}: its user 'matmul' {{.*}} leads back into this fusion
func.func @cycle_veto(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = smelt.exp %x : tensor<4x4xf32>
  %m = smelt.matmul %a, %a : tensor<4x4xf32>, tensor<4x4xf32>
  %c = smelt.add %a, %m : tensor<4x4xf32>
  return %c : tensor<4x4xf32>
}

// -----

// Recomputing a small exp for every element of a large broadcast costs more than it saves.
// CHECK-LABEL: func.func @recompute_veto
// CHECK: %[[E:.+]] = smelt.fusion loop(%arg0)
// CHECK: smelt.fusion loop(%[[E]], %arg1)
// REPORT-LABEL: report for @recompute_veto
// REPORT: not fused: 'exp' {{.*}}: recomputing it 4096x costs more
func.func @recompute_veto(%small: tensor<4xf32>, %big: tensor<4096x4xf32>) -> tensor<4096x4xf32> {
  %e = smelt.exp %small : tensor<4xf32>
  %b = smelt.broadcast_in_dim %e, dims = [1] : tensor<4xf32> -> tensor<4096x4xf32>
  %s = smelt.add %big, %b : tensor<4096x4xf32>
  return %s : tensor<4096x4xf32>
}

// -----

// Siblings that read the same input merge into one two-result kernel.
// CHECK-LABEL: func.func @siblings
// CHECK: smelt.fusion loop(%arg0) {{.*}} -> (tensor<256xf32>, tensor<256xf32>)
// CHECK-NOT: smelt.fusion
// REPORT-LABEL: report for @siblings
// REPORT: merged sibling: the fusion rooted at 'exp' {{.*}} (both read %arg0)
func.func @siblings(%x: tensor<256xf32>) -> (tensor<256xf32>, tensor<256xf32>) {
  %a = smelt.exp %x : tensor<256xf32>
  %b = smelt.log %x : tensor<256xf32>
  return %a, %b : tensor<256xf32>, tensor<256xf32>
}

// -----

// Sibling reductions over the same axes become one kernel.
// CHECK-LABEL: func.func @sibling_reductions
// CHECK: smelt.fusion reduction(%arg0)
// CHECK: smelt.reduce sum
// CHECK: smelt.reduce max
// CHECK-NOT: smelt.fusion
func.func @sibling_reductions(%x: tensor<32x16xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %s = smelt.reduce sum %x axes = [1] : tensor<32x16xf32>
  %m = smelt.reduce max %x axes = [1] : tensor<32x16xf32>
  return %s, %m : tensor<32xf32>, tensor<32xf32>
}

// -----

// Splat constants and iota are copied into the kernel; transpose and reshape only move indices.
// CHECK-LABEL: func.func @sources_and_remaps
// CHECK: smelt.fusion loop(%arg0)
// CHECK-DAG: smelt.constant dense<0.000000e+00>
// CHECK-DAG: smelt.iota dim = 1
// CHECK-DAG: smelt.transpose
// CHECK: smelt.reshape
// CHECK-NOT: smelt.constant
// CHECK: return
// REPORT-LABEL: report for @sources_and_remaps
// REPORT-DAG: duplicated: 'iota' {{.*}}: free to recompute
// REPORT-DAG: duplicated: 'constant' {{.*}}: free to recompute
func.func @sources_and_remaps(%x: tensor<3x4xf32>) -> tensor<12xf32> {
  %zero = smelt.constant dense<0.0> : tensor<4x3xf32>
  %i = smelt.iota dim = 1 : tensor<4x3xf32>
  %t = smelt.transpose %x, permutation = [1, 0] : tensor<3x4xf32>
  %m = smelt.max %t, %zero : tensor<4x3xf32>
  %a = smelt.add %m, %i : tensor<4x3xf32>
  %r = smelt.reshape %a : tensor<4x3xf32> -> tensor<12xf32>
  return %r : tensor<12xf32>
}

// -----

// Softmax: max, sum of exp, and the division: three kernels; exp is recomputed, never written.
// CHECK-LABEL: func.func @softmax
// CHECK: %[[MAX:.+]] = smelt.fusion reduction(%arg0)
// CHECK: %[[SUM:.+]] = smelt.fusion reduction(%[[MAX]], %arg0)
// CHECK: smelt.exp
// CHECK: smelt.fusion loop(%[[MAX]], %arg0, %[[SUM]])
// CHECK: smelt.exp
// CHECK: smelt.div
// REPORT-LABEL: report for @softmax
// REPORT: duplicated: 'exp' {{.*}}: every user is fused, so it is never written
func.func @softmax(%x: tensor<8x10xf32>) -> tensor<8x10xf32> {
  %m = smelt.reduce max %x axes = [1] : tensor<8x10xf32>
  %mb = smelt.broadcast_in_dim %m, dims = [0] : tensor<8xf32> -> tensor<8x10xf32>
  %s = smelt.sub %x, %mb : tensor<8x10xf32>
  %e = smelt.exp %s : tensor<8x10xf32>
  %t = smelt.reduce sum %e axes = [1] : tensor<8x10xf32>
  %tb = smelt.broadcast_in_dim %t, dims = [0] : tensor<8xf32> -> tensor<8x10xf32>
  %r = smelt.div %e, %tb : tensor<8x10xf32>
  return %r : tensor<8x10xf32>
}

// -----

// An embedding lookup plus positions: both gathers, the broadcast and the add are one kernel
// that reads each row from the index element (no gathered tensor is written). scatter_add (the
// gather's gradient) is a runtime step of its own, reading the kernel's second result.
// CHECK-LABEL: func.func @embedding_plus_positions
// CHECK: %[[E:[0-9]+]]:2 = smelt.fusion loop(%arg0, %arg1, %arg2, %arg3)
// CHECK-NEXT: ^bb0(%[[T:.+]]: tensor<100x16xf32>, %[[I:.+]]: tensor<4x8xi32>, %[[P:.+]]: tensor<8x16xf32>, %[[J:.+]]: tensor<8xi64>):
// CHECK-NEXT: %[[G:.+]] = smelt.gather %[[T]][%[[I]]] : tensor<100x16xf32>, tensor<4x8xi32>
// CHECK-NEXT: %[[Q:.+]] = smelt.gather %[[P]][%[[J]]] : tensor<8x16xf32>, tensor<8xi64>
// CHECK-NEXT: %[[QB:.+]] = smelt.broadcast_in_dim %[[Q]], dims = [1, 2]
// CHECK-NEXT: %[[S:.+]] = smelt.add %[[G]], %[[QB]]
// CHECK-NEXT: %[[N:.+]] = smelt.neg %[[S]]
// CHECK-NEXT: smelt.yield %[[S]], %[[N]]
// CHECK: smelt.scatter_add %[[E]]#1[%arg1] size = 100
// REPORT-LABEL: report for @embedding_plus_positions
// REPORT: fusion 0 (loop over 4x8x16, 2 results, 5 ops)
// REPORT-DAG: fused: 'gather' {{.*}} tensor<4x8x16xf32>: only used here
// REPORT-DAG: fused: 'gather' {{.*}} tensor<8x16xf32>: only used here
func.func @embedding_plus_positions(%table: tensor<100x16xf32>, %ids: tensor<4x8xi32>, %positions: tensor<8x16xf32>, %steps: tensor<8xi64>) -> (tensor<4x8x16xf32>, tensor<100x16xf32>) {
  %e = smelt.gather %table[%ids] : tensor<100x16xf32>, tensor<4x8xi32>
  %p = smelt.gather %positions[%steps] : tensor<8x16xf32>, tensor<8xi64>
  %pb = smelt.broadcast_in_dim %p, dims = [1, 2] : tensor<8x16xf32> -> tensor<4x8x16xf32>
  %s = smelt.add %e, %pb : tensor<4x8x16xf32>
  %n = smelt.neg %s : tensor<4x8x16xf32>
  %g = smelt.scatter_add %n[%ids] size = 100 : tensor<4x8x16xf32>, tensor<4x8xi32>
  return %s, %g : tensor<4x8x16xf32>, tensor<100x16xf32>
}

// -----

// An LSTM step's gates: the slices of the pre-activation, the pad and the concat of four move
// elements inside one kernel with the gates' activations.
// CHECK-LABEL: func.func @lstm_gates
// CHECK: %[[Z:.+]] = smelt.fusion loop(%arg0, %arg1)
// CHECK: smelt.add
// CHECK: smelt.fusion loop(%[[Z]], %arg2)
// CHECK-COUNT-4: smelt.slice
// CHECK: smelt.pad
// CHECK: smelt.concat
// CHECK-NOT: smelt.fusion
// REPORT-LABEL: report for @lstm_gates
// REPORT: root 'concat'
// REPORT: fused: 'pad' {{.*}}: only used here
func.func @lstm_gates(%x: tensor<8x32xf32>, %h: tensor<8x32xf32>, %b: tensor<8x6xf32>) -> tensor<8x32xf32> {
  %z = smelt.add %x, %h : tensor<8x32xf32>
  %i = smelt.slice %z [0:8:1, 0:8:1] : tensor<8x32xf32>
  %f = smelt.slice %z [0:8:1, 8:16:1] : tensor<8x32xf32>
  %g = smelt.slice %z [0:8:1, 16:24:1] : tensor<8x32xf32>
  %o = smelt.slice %z [0:8:1, 24:32:1] : tensor<8x32xf32>
  %si = smelt.logistic %i : tensor<8x8xf32>
  %tg = smelt.tanh %g : tensor<8x8xf32>
  %ig = smelt.mul %si, %tg : tensor<8x8xf32>
  %sf = smelt.logistic %f : tensor<8x8xf32>
  %so = smelt.logistic %o : tensor<8x8xf32>
  %fo = smelt.mul %sf, %so : tensor<8x8xf32>
  %p = smelt.pad %b low = [0, 1] high = [0, 1] value = 0.0 : tensor<8x6xf32>
  %e = smelt.exp %ig : tensor<8x8xf32>
  %c = smelt.concat %ig, %fo, %p, %e dim = 1 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
  return %c : tensor<8x32xf32>
}

// -----

// A concat of more than eight operands stays the CPU's copy (a fused one reads every operand
// for each element); its operands' producers fuse as usual.
// CHECK-LABEL: func.func @wide_concat
// CHECK: smelt.fusion loop
// CHECK: smelt.neg
// CHECK: smelt.concat
// CHECK-NOT: smelt.yield
// REPORT-LABEL: report for @wide_concat
// REPORT-NOT: root 'concat'
func.func @wide_concat(%x: tensor<4x2xf32>) -> tensor<4x18xf32> {
  %n = smelt.neg %x : tensor<4x2xf32>
  %c = smelt.concat %n, %x, %x, %x, %x, %x, %x, %x, %x dim = 1 : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
  return %c : tensor<4x18xf32>
}

// -----

// A slice that fuses with nothing stays the runtime's copy on the CPU (a kernel would be
// compiled for nothing); nine slices of one value stay copies too, so the kernels reading them
// do not differ by the offset alone (an unrolled recurrence's steps share one kernel).
// CHECK-LABEL: func.func @many_slices
// CHECK: smelt.slice %arg0 [0:2:1, 0:4:1]
// CHECK: smelt.fusion loop
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<2x4xf32>):
// CHECK-NEXT: smelt.exp
// REPORT-LABEL: report for @many_slices
// REPORT: not fused: 'slice' {{.*}}: one of many slices of its operand
func.func @many_slices(%x: tensor<2x36xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %s0 = smelt.slice %x [0:2:1, 0:4:1] : tensor<2x36xf32>
  %s1 = smelt.slice %x [0:2:1, 4:8:1] : tensor<2x36xf32>
  %s2 = smelt.slice %x [0:2:1, 8:12:1] : tensor<2x36xf32>
  %s3 = smelt.slice %x [0:2:1, 12:16:1] : tensor<2x36xf32>
  %s4 = smelt.slice %x [0:2:1, 16:20:1] : tensor<2x36xf32>
  %s5 = smelt.slice %x [0:2:1, 20:24:1] : tensor<2x36xf32>
  %s6 = smelt.slice %x [0:2:1, 24:28:1] : tensor<2x36xf32>
  %s7 = smelt.slice %x [0:2:1, 28:32:1] : tensor<2x36xf32>
  %s8 = smelt.slice %x [0:2:1, 32:36:1] : tensor<2x36xf32>
  %e = smelt.exp %s0 : tensor<2x4xf32>
  return %e, %s1, %s2, %s3, %s4, %s5, %s6, %s7, %s8 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// On the GPU every slice is a kernel: it has no copy step.
// CHECK-LABEL: func.func @slice_on_gpu
// CHECK: smelt.fusion loop
// CHECK: smelt.slice
func.func @slice_on_gpu(%x: tensor<4x8xf32>) -> tensor<4x2xf32> {
  %s = smelt.slice %x [0:4:1, 2:4:1] {smelt.device = "gpu:0"} : tensor<4x8xf32>
  return %s : tensor<4x2xf32>
}

// -----

// Initial weights: rng_normal fuses with what scales it, one kernel that writes the weights (on
// the GPU as well as the CPU).
// CHECK-LABEL: func.func @initial_weights
// CHECK: smelt.fusion loop() {{.*}}: () -> tensor<8x16xf32> {
// CHECK-NEXT: smelt.rng_normal seed = 3
// CHECK-NEXT: smelt.constant dense<5.000000e-01>
// CHECK-NEXT: smelt.mul
// CHECK-NEXT: smelt.yield
// CHECK-NOT: smelt.fusion
func.func @initial_weights() -> tensor<8x16xf32> {
  %n = smelt.rng_normal seed = 3, mean = 0.0, stddev = 1.0 : tensor<8x16xf32>
  %s = smelt.constant dense<0.5> : tensor<8x16xf32>
  %w = smelt.mul %n, %s : tensor<8x16xf32>
  return %w : tensor<8x16xf32>
}

// -----

// A batch norm's scale (gamma / sqrt(var + eps)) of three layers, with sqrt(var + eps) shared
// (CSE'd: the same statistics and epsilon): each scale is copied into the small kernel that
// reads a slice of its layer's activations, but not into the larger one, so it is also
// computed by a kernel of its own, which copies the sqrt. The small kernels' copies of the
// scale read the sqrt too, and (recomputing it costs them more than reading it) hold no copy
// of it: so the sqrt needs a kernel of its own, which it once lacked (Hugging Face's LeViT left
// it outside every kernel: "'smelt.add' op runs only inside a smelt.fusion kernel").
// CHECK-LABEL: func.func @scale_read_by_copies
// CHECK-NEXT: %[[SQRT:.+]] = smelt.fusion loop() {{.*}} : () -> tensor<64xf32> {
// CHECK: smelt.add
// CHECK-NEXT: smelt.sqrt
// CHECK-NEXT: smelt.yield
// CHECK: smelt.fusion loop(%[[SQRT]]) {{.*}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
func.func @scale_read_by_copies(%x: tensor<64x64xf32>, %w: tensor<12x64xf32>) -> (tensor<64x24xf32>, tensor<64x24xf32>, tensor<64x24xf32>, tensor<64x64xf32>) {
  %one = smelt.constant dense<1.0> : tensor<64xf32>
  %eps = smelt.constant dense<1.0e-5> : tensor<64xf32>
  %a = smelt.add %one, %eps : tensor<64xf32>
  %s = smelt.sqrt %a : tensor<64xf32>
  %g0 = smelt.constant dense<2.0> : tensor<64xf32>
  %d0 = smelt.div %g0, %s : tensor<64xf32>
  %b0 = smelt.broadcast_in_dim %d0, dims = [1] : tensor<64xf32> -> tensor<64x64xf32>
  %y0 = smelt.mul %x, %b0 : tensor<64x64xf32>
  %sa0 = smelt.slice %y0 [0:12:1, 0:64:1] : tensor<64x64xf32>
  %ta0 = smelt.transpose %sa0, permutation = [1, 0] : tensor<12x64xf32>
  %sb0 = smelt.slice %y0 [12:36:1, 0:64:1] : tensor<64x64xf32>
  %tb0 = smelt.transpose %sb0, permutation = [1, 0] : tensor<24x64xf32>
  %m0 = smelt.matmul %ta0, %w : tensor<64x12xf32>, tensor<12x64xf32>
  %g1 = smelt.constant dense<3.0> : tensor<64xf32>
  %d1 = smelt.div %g1, %s : tensor<64xf32>
  %b1 = smelt.broadcast_in_dim %d1, dims = [1] : tensor<64xf32> -> tensor<64x64xf32>
  %y1 = smelt.mul %m0, %b1 : tensor<64x64xf32>
  %sa1 = smelt.slice %y1 [0:12:1, 0:64:1] : tensor<64x64xf32>
  %ta1 = smelt.transpose %sa1, permutation = [1, 0] : tensor<12x64xf32>
  %sb1 = smelt.slice %y1 [12:36:1, 0:64:1] : tensor<64x64xf32>
  %tb1 = smelt.transpose %sb1, permutation = [1, 0] : tensor<24x64xf32>
  %m1 = smelt.matmul %ta1, %w : tensor<64x12xf32>, tensor<12x64xf32>
  %g2 = smelt.constant dense<4.0> : tensor<64xf32>
  %d2 = smelt.div %g2, %s : tensor<64xf32>
  %b2 = smelt.broadcast_in_dim %d2, dims = [1] : tensor<64xf32> -> tensor<64x64xf32>
  %y2 = smelt.mul %m1, %b2 : tensor<64x64xf32>
  %sa2 = smelt.slice %y2 [0:12:1, 0:64:1] : tensor<64x64xf32>
  %ta2 = smelt.transpose %sa2, permutation = [1, 0] : tensor<12x64xf32>
  %sb2 = smelt.slice %y2 [12:36:1, 0:64:1] : tensor<64x64xf32>
  %tb2 = smelt.transpose %sb2, permutation = [1, 0] : tensor<24x64xf32>
  %m2 = smelt.matmul %ta2, %w : tensor<64x12xf32>, tensor<12x64xf32>
  return %tb0, %tb1, %tb2, %m2 : tensor<64x24xf32>, tensor<64x24xf32>, tensor<64x24xf32>, tensor<64x64xf32>
}

// -----

// An unrolled recurrence's carried state: c_t = f_t c_{t-1} + g_t, where f_t and g_t come from
// a matmul of h_{t-1} = tanh(c_{t-1}). A copy of c_{t-1} in step t's kernel would recompute the
// steps before it too (each copy copies the state before it); so no copy is made once that
// chain passes 32 ops (8 steps here), and every later step is one kernel with two results,
// h_t and c_t, that reads the step's matmul and c_{t-1} alone. (Copied, an ONNX LSTM's steps
// fell apart into a kernel per op, 9 per step.)
// CHECK-LABEL: func.func @carried_state_is_not_copied
// CHECK: smelt.fusion_id = 8 : i64} : {{.*}} -> (tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK-COUNT-3: smelt.fusion loop(%{{[0-9]+}}, %{{[0-9]+}}#0) {{.*}} -> (tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK-NOT: smelt.fusion
// CHECK: return
func.func @carried_state_is_not_copied(%h0: tensor<4x16xf32>, %c0: tensor<4x16xf32>, %r: tensor<16x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %z1 = smelt.matmul %h0, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f1 = smelt.logistic %z1 : tensor<4x16xf32>
  %m1 = smelt.mul %f1, %c0 : tensor<4x16xf32>
  %g1 = smelt.tanh %z1 : tensor<4x16xf32>
  %c1 = smelt.add %m1, %g1 : tensor<4x16xf32>
  %h1 = smelt.tanh %c1 : tensor<4x16xf32>
  %z2 = smelt.matmul %h1, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f2 = smelt.logistic %z2 : tensor<4x16xf32>
  %m2 = smelt.mul %f2, %c1 : tensor<4x16xf32>
  %g2 = smelt.tanh %z2 : tensor<4x16xf32>
  %c2 = smelt.add %m2, %g2 : tensor<4x16xf32>
  %h2 = smelt.tanh %c2 : tensor<4x16xf32>
  %z3 = smelt.matmul %h2, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f3 = smelt.logistic %z3 : tensor<4x16xf32>
  %m3 = smelt.mul %f3, %c2 : tensor<4x16xf32>
  %g3 = smelt.tanh %z3 : tensor<4x16xf32>
  %c3 = smelt.add %m3, %g3 : tensor<4x16xf32>
  %h3 = smelt.tanh %c3 : tensor<4x16xf32>
  %z4 = smelt.matmul %h3, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f4 = smelt.logistic %z4 : tensor<4x16xf32>
  %m4 = smelt.mul %f4, %c3 : tensor<4x16xf32>
  %g4 = smelt.tanh %z4 : tensor<4x16xf32>
  %c4 = smelt.add %m4, %g4 : tensor<4x16xf32>
  %h4 = smelt.tanh %c4 : tensor<4x16xf32>
  %z5 = smelt.matmul %h4, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f5 = smelt.logistic %z5 : tensor<4x16xf32>
  %m5 = smelt.mul %f5, %c4 : tensor<4x16xf32>
  %g5 = smelt.tanh %z5 : tensor<4x16xf32>
  %c5 = smelt.add %m5, %g5 : tensor<4x16xf32>
  %h5 = smelt.tanh %c5 : tensor<4x16xf32>
  %z6 = smelt.matmul %h5, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f6 = smelt.logistic %z6 : tensor<4x16xf32>
  %m6 = smelt.mul %f6, %c5 : tensor<4x16xf32>
  %g6 = smelt.tanh %z6 : tensor<4x16xf32>
  %c6 = smelt.add %m6, %g6 : tensor<4x16xf32>
  %h6 = smelt.tanh %c6 : tensor<4x16xf32>
  %z7 = smelt.matmul %h6, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f7 = smelt.logistic %z7 : tensor<4x16xf32>
  %m7 = smelt.mul %f7, %c6 : tensor<4x16xf32>
  %g7 = smelt.tanh %z7 : tensor<4x16xf32>
  %c7 = smelt.add %m7, %g7 : tensor<4x16xf32>
  %h7 = smelt.tanh %c7 : tensor<4x16xf32>
  %z8 = smelt.matmul %h7, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f8 = smelt.logistic %z8 : tensor<4x16xf32>
  %m8 = smelt.mul %f8, %c7 : tensor<4x16xf32>
  %g8 = smelt.tanh %z8 : tensor<4x16xf32>
  %c8 = smelt.add %m8, %g8 : tensor<4x16xf32>
  %h8 = smelt.tanh %c8 : tensor<4x16xf32>
  %z9 = smelt.matmul %h8, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f9 = smelt.logistic %z9 : tensor<4x16xf32>
  %m9 = smelt.mul %f9, %c8 : tensor<4x16xf32>
  %g9 = smelt.tanh %z9 : tensor<4x16xf32>
  %c9 = smelt.add %m9, %g9 : tensor<4x16xf32>
  %h9 = smelt.tanh %c9 : tensor<4x16xf32>
  %z10 = smelt.matmul %h9, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f10 = smelt.logistic %z10 : tensor<4x16xf32>
  %m10 = smelt.mul %f10, %c9 : tensor<4x16xf32>
  %g10 = smelt.tanh %z10 : tensor<4x16xf32>
  %c10 = smelt.add %m10, %g10 : tensor<4x16xf32>
  %h10 = smelt.tanh %c10 : tensor<4x16xf32>
  %z11 = smelt.matmul %h10, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f11 = smelt.logistic %z11 : tensor<4x16xf32>
  %m11 = smelt.mul %f11, %c10 : tensor<4x16xf32>
  %g11 = smelt.tanh %z11 : tensor<4x16xf32>
  %c11 = smelt.add %m11, %g11 : tensor<4x16xf32>
  %h11 = smelt.tanh %c11 : tensor<4x16xf32>
  %z12 = smelt.matmul %h11, %r : tensor<4x16xf32>, tensor<16x16xf32>
  %f12 = smelt.logistic %z12 : tensor<4x16xf32>
  %m12 = smelt.mul %f12, %c11 : tensor<4x16xf32>
  %g12 = smelt.tanh %z12 : tensor<4x16xf32>
  %c12 = smelt.add %m12, %g12 : tensor<4x16xf32>
  %h12 = smelt.tanh %c12 : tensor<4x16xf32>
  return %h12, %c12 : tensor<4x16xf32>, tensor<4x16xf32>
}
