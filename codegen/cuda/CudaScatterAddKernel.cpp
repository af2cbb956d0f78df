// The scatter_add kernel: a scatter_add placed on a GPU is a kernel of its own. It is
// deterministic without atomics: each result element (row r, column d) has one owner thread,
// which adds the updates into it in index order b = 0, 1, ..., exactly as the CPU does
// (runtime/cpu/ScatterAdd.cpp), so the bits are the CPU's whatever the launch or the schedule.
//
// A thread owns column d of a block of `rowsPerThread` consecutive rows, with a sum for each in
// local memory (f32 for f16 and bf16, rounded once at the end). It walks every index, clamps it
// into [0, rows) and, when the row falls in its block, adds updates[b, d]. Consecutive threads
// take consecutive columns, so the update loads are coalesced and an index load is one value
// for the whole warp; each update is read by one thread. Fewer rows per thread mean more
// threads, but each walks every index: rowsPerThread is the fewest (at most kMaxRowsPerThread)
// that leave no more threads than the GPU runs at once.
#include "codegen/cuda/CudaKernels.h"
#include "codegen/cuda/CudaTarget.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;

namespace smelt::codegen::cuda {

namespace {

constexpr int64_t kBlock = 256;
constexpr int64_t kMaxRowsPerThread = 32;

} // namespace

KernelSource renderScatterAddKernel(ScatterAddOp op, llvm::StringRef name) {
  auto result = cast<RankedTensorType>(op.getResult().getType());
  int64_t rows = result.getDimSize(0);
  int64_t columns = elementCount(result.getShape().drop_front());
  int64_t count = elementCount(op.getIndices().getType().getShape());
  int64_t threadsAtOnce = kSmCount * kThreadsPerSm;
  int64_t rowsPerThread = std::clamp<int64_t>((rows * columns + threadsAtOnce - 1) / threadsAtOnce,
                                              1, kMaxRowsPerThread);
  int64_t rowBlocks = (rows + rowsPerThread - 1) / rowsPerThread;
  int64_t owners = rowBlocks * columns;
  int64_t largest = std::max({owners * rowsPerThread, count * columns, count});
  std::string index = largest < (int64_t(1) << 30) ? "int32_t" : "int64_t";
  rt::DType dtype = elementDType(op.getResult());
  std::string sum = computeType(dtype);

  std::string body = llvm::formatv(
      "  const {0} stride = ({0})(gridDim.x * blockDim.x);\n"
      "  for ({0} t = ({0})(blockIdx.x * blockDim.x + threadIdx.x); t < {1}; t += stride) {{\n"
      "    const {0} d = t % {2};\n"
      "    const {0} first = t / {2} * {3};\n"
      "    {4} sums[{3}];\n"
      "    for (int r = 0; r < {3}; ++r)\n"
      "      sums[r] = 0;\n"
      "    for ({0} b = 0; b < {5}; ++b) {{\n"
      "      const int64_t at = (int64_t)in1[b];\n"
      "      const {0} r = ({0})(at < 0 ? 0 : at > {6} ? {6} : at) - first;\n"
      "      if (r >= 0 && r < {3})\n"
      "        sums[r] += {7};\n"
      "    }\n"
      "    for (int r = 0; r < {3} && first + r < {8}; ++r)\n"
      "      out0[(first + r) * {2} + d] = {9};\n"
      "  }\n",
      index, owners, columns, rowsPerThread, sum, count, rows - 1,
      widen(dtype, "in0[b * " + std::to_string(columns) + " + d]"), rows, narrow(dtype, "sums[r]"));
  if (owners == 0)
    body = "  return; // an empty result: nothing to write\n";
  std::string how =
      llvm::formatv("{0} rows x 1 column per thread, indices in order", rowsPerThread).str();
  int64_t grid =
      std::clamp<int64_t>((owners + kBlock - 1) / kBlock, 1, kSmCount * (kThreadsPerSm / kBlock));
  return {oneOpKernelHeader(op, name, kBlock, "scatter_add, " + how) + body + "}\n", kBlock, grid};
}

} // namespace smelt::codegen::cuda
