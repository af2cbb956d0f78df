// Renders the fusions of a module as one CUDA C++ source for NVRTC: a prelude, then one
// `extern "C" __global__` kernel per fusion, named like its rt::FusedKernel ("main_fusion3"),
// with every shape baked in as a constant, and one per argmax or scatter_add placed on a GPU
// ("main_argmax7"). The kernels of equivalent fusions (codegen/EquivalentFusions.h) each call one
// body they share, so it is compiled once.
//
// A kernel takes (const T *in0, ..., T *out0, ...): the fusion's inputs, then its results,
// which is the order of a fused step's buffers. Every buffer must be 16-byte aligned (cuMemAlloc
// gives 256) because loop kernels move up to 16 bytes per access. It is launched 1-D with the
// FusedKernel's cudaBlock threads per block and cudaGrid blocks, no dynamic shared memory. A split
// reduction keeps its partials in `__device__` arrays of the module (one launch at a time per
// loaded module, as a stream runs them).
#pragma once

#include "ir/SmeltDialect.h"
#include "runtime/Executable.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace smelt::codegen {

/// The source of `ops` (fusions, and ops with a kernel of their own: BuildExecutable.h's
/// kernelOpsInOrder), op i rendered as kernel kernels[i].name; fills each kernel's cudaBlock
/// and cudaGrid. The ops have passed their verifiers, so rendering cannot fail.
std::string renderCudaModule(llvm::ArrayRef<mlir::Operation *> ops,
                             llvm::MutableArrayRef<rt::FusedKernel> kernels);

} // namespace smelt::codegen
