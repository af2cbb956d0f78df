// smelt-assign-buffers: arena offsets and peak bytes per device from compile-time liveness,
// worked out by hand below for each case (tests/unit/AssignBuffersTest.cpp checks the executor
// measures the same).
// RUN: smelt-opt %s -split-input-file -smelt-assign-buffers | FileCheck %s

// exp takes 1024 bytes at offset 0; reduce takes 4 more while exp's result is still live, at
// 1024: an arena of 1028.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: smelt.peak_bytes = {"cpu:0" = 1028 : i64}
// CHECK: smelt.exp %{{.*}} {smelt.arena_offsets = array<i64: 0>}
// CHECK: smelt.reduce sum %{{.*}} {smelt.arena_offsets = array<i64: 1024>}
func.func @chain(%x: tensor<256xf32>) -> tensor<f32> {
  %0 = smelt.exp %x : tensor<256xf32>
  %1 = smelt.reduce sum %0 axes = [0] : tensor<256xf32>
  return %1 : tensor<f32>
}

// -----

// The constant is held all run (64); %0 is returned, so it stays (offset 0); %1 (64 bytes) is
// live with it (offset 64) and goes back only after the reduce took its 4 bytes (offset 128):
// 64 + an arena of 132 = 196. The argument is the caller's.
// CHECK-LABEL: func.func @held
// CHECK-SAME: smelt.peak_bytes = {"cpu:0" = 196 : i64}
// CHECK: smelt.add {{.*}}smelt.arena_offsets = array<i64: 0>
// CHECK: smelt.mul {{.*}}smelt.arena_offsets = array<i64: 64>
// CHECK: smelt.reduce {{.*}}smelt.arena_offsets = array<i64: 128>
func.func @held(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<f32>) {
  %c = smelt.constant dense<1.0> : tensor<16xf32>
  %0 = smelt.add %x, %c : tensor<16xf32>
  %1 = smelt.mul %0, %0 : tensor<16xf32>
  %2 = smelt.reduce sum %1 axes = [0] : tensor<16xf32>
  return %0, %2 : tensor<16xf32>, tensor<f32>
}

// -----

// Two devices: the executor runs the schedule's segments, gpu:0 then cpu:0, each with an arena
// of its own. exp's result is what the GPU segment hands on (the copy reads it): a block of its
// own. The copy's result is the CPU segment's input, which the executor places; the sum is the
// CPU segment's (offset 0). The peak walks the whole function: the GPU holds the argument it
// reads (copied in: 2048) and exp's result (2048) until the copy read it: 4096. The CPU takes
// the copy (2048) and the sum (4): 2052.
// CHECK-LABEL: func.func @two_devices
// CHECK-SAME: smelt.peak_bytes = {"cpu:0" = 2052 : i64, "gpu:0" = 4096 : i64}
// CHECK: smelt.exp {{.*}}smelt.arena_offsets = array<i64: -1>
// CHECK: smelt.copy {{.*}}smelt.arena_offsets = array<i64: -1>
// CHECK: smelt.reduce {{.*}}smelt.arena_offsets = array<i64: 0>
func.func @two_devices(%x: tensor<512xf32>) -> tensor<f32> {
  %0 = smelt.exp %x {smelt.device = "gpu:0"} : tensor<512xf32>
  %1 = smelt.copy %0 : tensor<512xf32>
  %2 = smelt.reduce sum %1 axes = [0] : tensor<512xf32>
  return %2 : tensor<f32>
}

// -----

// Each segment places its own values from offset 0. The GPU segment: exp's result dies at tanh
// (offset 0 of its arena); tanh's is handed on to the copy (a block of its own). The CPU
// segment: neg's result (offset 0) is live with exp's (1024); the sum comes after neg's result
// died, at 0.
// CHECK-LABEL: func.func @segments
// CHECK: smelt.exp {{.*}}smelt.arena_offsets = array<i64: 0>{{.*}}"gpu:0"
// CHECK: smelt.tanh {{.*}}smelt.arena_offsets = array<i64: -1>
// CHECK: smelt.copy {{.*}}smelt.arena_offsets = array<i64: -1>
// CHECK: smelt.neg {{.*}}smelt.arena_offsets = array<i64: 0>
// CHECK: smelt.exp {{.*}}smelt.arena_offsets = array<i64: 1024>
// CHECK: smelt.reduce {{.*}}smelt.arena_offsets = array<i64: 0>
func.func @segments(%x: tensor<256xf32>) -> tensor<f32> {
  %0 = smelt.exp %x {smelt.device = "gpu:0"} : tensor<256xf32>
  %1 = smelt.tanh %0 {smelt.device = "gpu:0"} : tensor<256xf32>
  %2 = smelt.copy %1 : tensor<256xf32>
  %3 = smelt.neg %2 : tensor<256xf32>
  %4 = smelt.exp %3 : tensor<256xf32>
  %5 = smelt.reduce sum %4 axes = [0] : tensor<256xf32>
  return %5 : tensor<f32>
}

// -----

// Wholly on gpu:0: the GPU holds the argument it reads (64); the returned %0 and sum are
// blocks of their own outside the arena (offset -1: the caller may keep them on the device),
// all live at the end (68), and %1 alone is in the arena (64): 64 + 64 + 68 = 196.
// CHECK-LABEL: func.func @gpu_returned
// CHECK-SAME: smelt.peak_bytes = {"gpu:0" = 196 : i64}
// CHECK: smelt.add {{.*}}smelt.arena_offsets = array<i64: -1>
// CHECK: smelt.mul {{.*}}smelt.arena_offsets = array<i64: 0>
// CHECK: smelt.reduce {{.*}}smelt.arena_offsets = array<i64: -1>
func.func @gpu_returned(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<f32>) {
  %0 = smelt.add %x, %x {smelt.device = "gpu:0"} : tensor<16xf32>
  %1 = smelt.mul %0, %0 {smelt.device = "gpu:0"} : tensor<16xf32>
  %2 = smelt.reduce sum %1 axes = [0] {smelt.device = "gpu:0"} : tensor<16xf32>
  return %0, %2 : tensor<16xf32>, tensor<f32>
}

// -----

// An all_reduce's operand and result stay to the end of the run (the reduction may still be
// running), so when the reduce takes its 4 bytes the exp, all_reduce and neg results (64 each)
// are all live: 196. Without the collective, exp's result would have gone back after its reader.
// CHECK-LABEL: func.func @collective
// CHECK-SAME: smelt.peak_bytes = {"cpu:0" = 196 : i64}
func.func @collective(%x: tensor<16xf32>) -> tensor<f32> {
  %0 = smelt.exp %x : tensor<16xf32>
  %1 = smelt.all_reduce mean %0 replicas = 2 : tensor<16xf32>
  %2 = smelt.neg %1 : tensor<16xf32>
  %3 = smelt.reduce sum %2 axes = [0] : tensor<16xf32>
  return %3 : tensor<f32>
}

// -----

// Lowest gaps, worked out by hand: the 512-byte exp goes first, at 0; the 256-byte exp, live
// after it has gone back, at 0 too. The first sum (4 bytes, returned) is live with both: past
// them, at 512. The second sum is live with the second exp (0-256) and the first sum (512-516):
// the gap between them, at 256. An empty tensor takes no bytes, at 0. The arena: 516.
// CHECK-LABEL: func.func @gaps
// CHECK-SAME: smelt.peak_bytes = {"cpu:0" = 516 : i64}
// CHECK: smelt.exp {{.*}}smelt.arena_offsets = array<i64: 0>
// CHECK: smelt.reduce {{.*}}smelt.arena_offsets = array<i64: 512>
// CHECK: smelt.exp {{.*}}smelt.arena_offsets = array<i64: 0>
// CHECK: smelt.reduce {{.*}}smelt.arena_offsets = array<i64: 256>
// CHECK: smelt.exp {{.*}}smelt.arena_offsets = array<i64: 0>
func.func @gaps(%x: tensor<64xf32>, %y: tensor<128xf32>, %z: tensor<0xf32>)
    -> (tensor<f32>, tensor<f32>, tensor<0xf32>) {
  %0 = smelt.exp %y : tensor<128xf32>
  %1 = smelt.reduce sum %0 axes = [0] : tensor<128xf32>
  %2 = smelt.exp %x : tensor<64xf32>
  %3 = smelt.reduce sum %2 axes = [0] : tensor<64xf32>
  %4 = smelt.exp %z : tensor<0xf32>
  return %1, %3, %4 : tensor<f32>, tensor<f32>, tensor<0xf32>
}
