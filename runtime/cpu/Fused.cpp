// Validation and launch of fused kernels. Threads pay off only when a kernel does enough work
// to hide waking them (tens of microseconds): below kParallelElements element operations, a
// kernel runs inline on the executor's thread.
#include "runtime/cpu/Fused.h"

#include "runtime/Parallel.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>

#include <algorithm>

namespace smelt::rt::cpu {

namespace {

constexpr int64_t kParallelElements = int64_t(1) << 16;

/// The work of a launch in element operations: a loop kernel's units times the ops computing
/// each (an element reads a bounded number of inputs, whatever their sizes: an LSTM step's
/// kernel reads its slice of the whole sequence's projection; and its gates' eight
/// transcendentals and products over 64 x 128 elements pay for a second thread), or a
/// reduction's largest input.
int64_t elementOperations(const Executable &exe, const Step &step, const FusedKernel &kernel) {
  int64_t units = kernel.units;
  if (kernel.kind == "loop")
    return units * std::max<int64_t>(1, kernel.computeOps);
  int64_t most = units;
  for (BufferId id : step.operands)
    most = std::max(most, exe.buffers[id].type.numElements());
  return most;
}

} // namespace

Expected<FusedRunner> prepareFused(const Executable &exe, const Step &step) {
  // validateDataflow, which CpuExecutor::create runs first, checked the index and the step's
  // buffers against the kernel's types.
  int64_t index = std::get<KernelParams>(step.params).kernel;
  const FusedKernel &kernel = exe.kernels[size_t(index)];
  std::string what = fmt::format("{}: kernel {} ('{}')", describe(step), index, kernel.name);
  if (!exe.cpu)
    return Status::error(fmt::format("{} has no CPU code: the executable was built without "
                                     "compiling its kernels for the CPU",
                                     what));
  if (size_t(index) >= exe.cpu->entries.size() || !exe.cpu->entries[size_t(index)])
    return Status::error(
        fmt::format("{} has no entry in the CPU code ({} entries)", what, exe.cpu->entries.size()));
  if (kernel.kind != "loop" && kernel.kind != "reduction")
    return Status::error(
        fmt::format("{} has unknown kind '{}' (loop, reduction)", what, kernel.kind));
  // Every result holds one element per unit, for both kinds.
  for (size_t i = 0; i < step.results.size(); ++i) {
    const TensorType &type = exe.buffers[step.results[i]].type;
    if (type.numElements() != kernel.units)
      return Status::error(fmt::format("{} computes {} units, but result #{} is {}", what,
                                       kernel.units, i, type.str()));
  }
  CpuKernelFn entry = exe.cpu->entries[size_t(index)];
  int64_t units = kernel.units;
  bool parallel = units > 1 && elementOperations(exe, step, kernel) >= kParallelElements;
  return FusedRunner([entry, units, parallel](void *const *buffers) {
    if (!parallel) {
      entry(buffers, 0, units);
      return;
    }
    parallelFor(
        units, [&](int64_t begin, int64_t end) { entry(buffers, begin, end); });
  });
}

} // namespace smelt::rt::cpu
