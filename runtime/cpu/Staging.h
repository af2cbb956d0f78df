// Runs a kernel written for one float dtype on steps of another: operands converted to scratch
// buffers, the result converted back (rounding to nearest even). oneDNN kernels stage f16/bf16
// through f32; the plain loops for pooling gradients stage everything through f64.
#pragma once

#include "runtime/cpu/Kernels.h"

namespace smelt::rt::cpu {

/// Wraps `kernel`, written for `staging` operands and result, so it runs on a step of `types`;
/// when every type already is `staging` it returns `kernel` itself.
Kernel stagedThrough(DType staging, Kernel kernel, const StepTypes &types);


} // namespace smelt::rt::cpu
