// smelt-donate-in-place: on one GPU, a donated argument's new value is written into its buffer
// when its last reader is a loop fusion that reads it only elementwise and returns a value of
// its type; the result returned under the argument's name is preferred.
// RUN: smelt-opt %s -split-input-file -smelt-donate-in-place | FileCheck %s
// RUN: smelt-opt %s -split-input-file -smelt-donate-in-place -smelt-assign-buffers | FileCheck %s --check-prefix=PEAK

// An SGD update: w - 0.5 * g, in place of w. The GPU holds w and g (64 B each); the new w takes
// w's bytes, not 64 more.
// CHECK-LABEL: func.func @sgd
// CHECK: smelt.fusion loop(%arg0, %arg1) {smelt.device = "gpu:0", smelt.in_place = array<i64: 0>}
// PEAK-LABEL: func.func @sgd
// PEAK-SAME: smelt.peak_bytes = {"gpu:0" = 128 : i64}
func.func @sgd(%w: tensor<16xf32> {smelt.donated, smelt.name = "w"}, %g: tensor<16xf32>) -> (tensor<16xf32> {smelt.name = "w"}) {
  %new = smelt.fusion loop(%w, %g) {smelt.device = "gpu:0"} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>):
    %half = smelt.constant dense<0.5> : tensor<16xf32>
    %0 = smelt.mul %half, %b : tensor<16xf32>
    %1 = smelt.sub %a, %0 : tensor<16xf32>
    smelt.yield %1 : tensor<16xf32>
  }
  return %new : tensor<16xf32>
}

// -----

// The arguments come onto the GPU through copies and the result goes back through one (what
// placement writes for a function called from the host): the new w is written over w's copy.
// The GPU holds the copies of w and g (128 B; the arguments are the host's), not 64 B more for
// the new w; the host holds the returned copy.
// CHECK-LABEL: func.func @copied
// CHECK: smelt.fusion loop(%0, %1) {smelt.device = "gpu:0", smelt.in_place = array<i64: 0>}
// PEAK-LABEL: func.func @copied
// PEAK-SAME: smelt.peak_bytes = {"cpu:0" = 64 : i64, "gpu:0" = 128 : i64}
func.func @copied(%w: tensor<16xf32> {smelt.donated}, %g: tensor<16xf32>) -> tensor<16xf32> {
  %cw = smelt.copy %w {smelt.device = "gpu:0"} : tensor<16xf32>
  %cg = smelt.copy %g {smelt.device = "gpu:0"} : tensor<16xf32>
  %new = smelt.fusion loop(%cw, %cg) {smelt.device = "gpu:0"} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>):
    %0 = smelt.sub %a, %b : tensor<16xf32>
    smelt.yield %0 : tensor<16xf32>
  }
  %out = smelt.copy %new {smelt.device = "cpu:0"} : tensor<16xf32>
  return %out : tensor<16xf32>
}

// -----

// A host step after the GPU's makes a second segment: nothing is written in place.
// CHECK-LABEL: func.func @two_segments
// CHECK-NOT: smelt.in_place
func.func @two_segments(%w: tensor<16xf32> {smelt.donated}) -> (tensor<16xf32>, tensor<16xf32>) {
  %cw = smelt.copy %w {smelt.device = "gpu:0"} : tensor<16xf32>
  %new = smelt.fusion loop(%cw) {smelt.device = "gpu:0"} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %0 = smelt.exp %a : tensor<16xf32>
    smelt.yield %0 : tensor<16xf32>
  }
  %back = smelt.copy %new {smelt.device = "cpu:0"} : tensor<16xf32>
  %host = smelt.exp %back {smelt.device = "cpu:0"} : tensor<16xf32>
  return %new, %host : tensor<16xf32>, tensor<16xf32>
}

// -----

// Not donated: the caller keeps w, so the new value gets its own block.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: smelt.in_place
// PEAK-LABEL: func.func @kept
// PEAK-SAME: smelt.peak_bytes = {"gpu:0" = 192 : i64}
func.func @kept(%w: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  %new = smelt.fusion loop(%w, %g) {smelt.device = "gpu:0"} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>):
    %0 = smelt.sub %a, %b : tensor<16xf32>
    smelt.yield %0 : tensor<16xf32>
  }
  return %new : tensor<16xf32>
}

// -----

// Read transposed: element (i, j) of the result needs element (j, i) of w, which another thread
// may already have overwritten. Not in place.
// CHECK-LABEL: func.func @transposed
// CHECK-NOT: smelt.in_place
func.func @transposed(%w: tensor<4x4xf32> {smelt.donated}) -> tensor<4x4xf32> {
  %new = smelt.fusion loop(%w) {smelt.device = "gpu:0"} : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    %0 = smelt.transpose %a, permutation = [1, 0] : tensor<4x4xf32>
    %1 = smelt.add %a, %0 : tensor<4x4xf32>
    smelt.yield %1 : tensor<4x4xf32>
  }
  return %new : tensor<4x4xf32>
}

// -----

// The argument is also returned, or read after the update: its buffer must survive the step.
// CHECK-LABEL: func.func @returned_too
// CHECK-NOT: smelt.in_place
func.func @returned_too(%w: tensor<16xf32> {smelt.donated}) -> (tensor<16xf32>, tensor<16xf32>) {
  %new = smelt.fusion loop(%w) {smelt.device = "gpu:0"} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %0 = smelt.exp %a : tensor<16xf32>
    smelt.yield %0 : tensor<16xf32>
  }
  return %new, %w : tensor<16xf32>, tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @read_later
// CHECK-NOT: smelt.in_place
func.func @read_later(%w: tensor<16xf32> {smelt.donated}) -> (tensor<16xf32>, tensor<f32>) {
  %new = smelt.fusion loop(%w) {smelt.device = "gpu:0"} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %0 = smelt.exp %a : tensor<16xf32>
    smelt.yield %0 : tensor<16xf32>
  }
  %sum = smelt.fusion reduction(%w) {smelt.device = "gpu:0"} : (tensor<16xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<16xf32>):
    %0 = smelt.reduce sum %a axes = [0] : tensor<16xf32>
    smelt.yield %0 : tensor<f32>
  }
  return %new, %sum : tensor<16xf32>, tensor<f32>
}

// -----

// Adam's moments and parameter in one sibling-merged kernel: each new value goes in place of
// its own input, matched by name, whatever the order of the results.
// CHECK-LABEL: func.func @merged
// CHECK: smelt.in_place = array<i64: 1, 0>
func.func @merged(%w: tensor<16xf32> {smelt.donated, smelt.name = "w"}, %m: tensor<16xf32> {smelt.donated, smelt.name = "m"}, %g: tensor<16xf32>) -> (tensor<16xf32> {smelt.name = "w"}, tensor<16xf32> {smelt.name = "m"}) {
  %new:2 = smelt.fusion loop(%w, %m, %g) {smelt.device = "gpu:0"} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>, %c: tensor<16xf32>):
    %0 = smelt.add %b, %c : tensor<16xf32>
    %1 = smelt.sub %a, %0 : tensor<16xf32>
    smelt.yield %0, %1 : tensor<16xf32>, tensor<16xf32>
  }
  return %new#1, %new#0 : tensor<16xf32>, tensor<16xf32>
}

// -----

// On the CPU the caller's arguments are its own memory: nothing is written in place.
// CHECK-LABEL: func.func @on_cpu
// CHECK-NOT: smelt.in_place
func.func @on_cpu(%w: tensor<16xf32> {smelt.donated}) -> tensor<16xf32> {
  %new = smelt.fusion loop(%w) {smelt.device = "cpu:0"} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %0 = smelt.exp %a : tensor<16xf32>
    smelt.yield %0 : tensor<16xf32>
  }
  return %new : tensor<16xf32>
}
