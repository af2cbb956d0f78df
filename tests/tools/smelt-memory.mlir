// Memory policies in `smelt run`: each device's peak and what it holds are printed; a limit
// that a buffer passes fails before the run, naming the buffer; a limit the live buffers pass
// together fails as the run takes its arena (smelt-assign-buffers laid the buffers out in one
// block), naming it, its size and the limit; bad flags quote themselves.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/npy_tool.py random %t/x.npy 256,256 float32 1
// RUN: smelt run %s --input x=%t/x.npy 2>&1 | FileCheck %s --check-prefix=GROW
// RUN: smelt run %s --input x=%t/x.npy --memory=preallocate=0.5 --memory-limit=cpu:0=8MiB 2>&1 | FileCheck %s --check-prefix=PREALLOCATE
// RUN: not smelt run %s --input x=%t/x.npy --memory-limit=200KiB 2>&1 | FileCheck %s --check-prefix=TOO-BIG
// RUN: not smelt run %s --input x=%t/x.npy --memory-limit=cpu:0=600KiB 2>&1 | FileCheck %s --check-prefix=DURING
// RUN: not smelt run %s --input x=%t/x.npy --memory=preallocate=1.5 2>&1 | FileCheck %s --check-prefix=BAD-FRACTION
// RUN: not smelt run %s --input x=%t/x.npy --memory-limit=tpu:0=1GiB 2>&1 | FileCheck %s --check-prefix=BAD-DEVICE
// RUN: not smelt run %s --input x=%t/x.npy --logical-gpus=2GiB,lots 2>&1 | FileCheck %s --check-prefix=BAD-LOGICAL

// Three 256 KiB values live at once at most: %a and %b while %c is written.
// GROW: ran @main: 4 steps
// GROW-NEXT: memory: cpu:0 (grow): peak 768.0 KiB, in use 0 B in 0 buffers, {{.*}} held (limit {{.*}} GiB)
// PREALLOCATE: memory: cpu:0 (preallocate 50%): peak 768.0 KiB, in use 0 B in 0 buffers, 4.0 MiB held (limit 4.0 MiB)
// TOO-BIG: error: cpu:0: buffer b1 ({{.*}}smelt-memory.mlir:{{[0-9]+}}:{{[0-9]+}}, tensor<256x256xf32>) needs 256.0 KiB, more than the device's memory limit of 200.0 KiB (grow, limit 200.0 KiB)
// DURING: error: cpu:0: out of memory for the arena of @main (4 buffers): it needs 768.0 KiB (more than the limit). The limit is 600.0 KiB (grow)
// BAD-FRACTION: error: --memory=preallocate=1.5: write 'grow' or 'preallocate[=FRACTION]' with FRACTION in (0, 1]
// BAD-DEVICE: error: --memory-limit=tpu:0=1GiB: 'tpu:0' is not a device (cpu:0, gpu:N)
// BAD-LOGICAL: error: --logical-gpus=2GiB,lots: give each logical GPU's memory limit, e.g. 4GiB,4GiB ('lots' is not a size

func.func @main(%x: tensor<256x256xf32> {smelt.name = "x"}) -> tensor<256x256xf32> {
  %a = smelt.exp %x : tensor<256x256xf32>
  %b = smelt.matmul %a, %x : tensor<256x256xf32>, tensor<256x256xf32>
  %c = smelt.matmul %b, %a : tensor<256x256xf32>, tensor<256x256xf32>
  %d = smelt.exp %c : tensor<256x256xf32>
  return %d : tensor<256x256xf32>
}
