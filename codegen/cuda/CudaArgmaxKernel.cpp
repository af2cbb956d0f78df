// The argmax kernel: an argmax placed on a GPU is a kernel of its own, since it reduces to an
// index, which no reduce of a fusion carries. Result o is the first maximum of x along the axis
// at (o / inner, o % inner), a NaN counting as the largest (the prelude's smelt_argmax_beats).
// - The axis is innermost ("rows"): its elements are contiguous, so a warp takes each result;
//   lanes stride over the axis, then combine through shuffles. The order is total, so combining
//   in any order gives the answer the CPU's first-to-last walk gives.
// - Otherwise consecutive results are contiguous: a thread takes each and walks the axis as the
//   CPU does (runtime/cpu/Argmax.cpp), stopping at the first NaN.
#include "codegen/cuda/CudaKernels.h"
#include "codegen/cuda/CudaTarget.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace smelt::codegen::cuda {

namespace {

constexpr int64_t kBlock = 256;
constexpr int64_t kWarpsPerBlock = kBlock / 32;

/// What a lane that has seen no element holds: the lowest value, with an index past the axis,
/// so that every element beats it (a -inf element by its lower index).
std::string lowest(rt::DType dtype) {
  if (rt::isFloat(dtype))
    return dtype == rt::DType::f64 ? "(-SMELT_INF)" : "(-SMELT_INF_F)";
  return dtype == rt::DType::i32 ? "(-2147483647 - 1)" : "(-9223372036854775807ll - 1)";
}

} // namespace

KernelSource renderArgmaxKernel(ArgmaxOp op, llvm::StringRef name) {
  ArrayRef<int64_t> shape = op.getX().getType().getShape();
  int64_t axis = int64_t(op.getAxis());
  int64_t size = shape[axis];
  int64_t outer = elementCount(shape.take_front(axis));
  int64_t inner = elementCount(shape.drop_front(axis + 1));
  int64_t results = outer * inner;
  rt::DType dtype = elementDType(op.getX());
  std::string index = elementCount(shape) < (int64_t(1) << 30) ? "int32_t" : "int64_t";
  std::string value = computeType(dtype);
  bool rows = inner == 1;
  // Keeps element k (at `at`) when it beats the candidate held; `pad` indents it.
  auto take = [&](const std::string &at, const std::string &k, const std::string &pad) {
    return llvm::formatv("{3}const {0} v = {1};\n"
                         "{3}if (smelt_argmax_beats(v, {2}, best, bestK)) {{\n"
                         "{3}  best = v;\n"
                         "{3}  bestK = {2};\n"
                         "{3}}\n",
                         value, widen(dtype, "in0[" + at + "]"), k, pad)
        .str();
  };

  std::string body;
  int64_t units =
      rows ? (results + kWarpsPerBlock - 1) / kWarpsPerBlock : (results + kBlock - 1) / kBlock;
  int64_t grid = std::clamp<int64_t>(units, 1, kSmCount * (kThreadsPerSm / kBlock));
  if (results == 0) {
    body = "  return; // no results: the launch's one block has nothing to write\n";
  } else if (rows) {
    // Whole warps take each result, so every lane of a warp shuffles on every iteration.
    body = llvm::formatv("  const {0} lane = ({0})(threadIdx.x % 32);\n"
                         "  for ({0} o = ({0})blockIdx.x * {1} + threadIdx.x / 32; o < {2};\n"
                         "       o += ({0})gridDim.x * {1}) {{\n"
                         "    {3} best = {4};\n"
                         "    {0} bestK = {5};\n"
                         "    for ({0} k = lane; k < {5}; k += 32) {{\n",
                         index, kWarpsPerBlock, results, value, lowest(dtype), size)
               .str();
    body += take("o * " + std::to_string(size) + " + k", "k", "      ");
    body += "    }\n"
            "    for (int offset = 16; offset > 0; offset /= 2) {\n";
    body += llvm::formatv("      const {0} other = __shfl_down_sync(0xffffffffu, best, offset);\n"
                          "      const {1} otherK = __shfl_down_sync(0xffffffffu, bestK, offset);\n"
                          "      if (smelt_argmax_beats(other, otherK, best, bestK)) {{\n"
                          "        best = other;\n"
                          "        bestK = otherK;\n"
                          "      }\n"
                          "    }\n"
                          "    if (lane == 0)\n"
                          "      out0[o] = (int64_t)bestK;\n"
                          "  }\n",
                          value, index)
                .str();
  } else {
    body = llvm::formatv("  const {0} stride = ({0})(gridDim.x * blockDim.x);\n"
                         "  for ({0} o = ({0})(blockIdx.x * blockDim.x + threadIdx.x); o < {1}; o "
                         "+= stride) {{\n"
                         "    const {0} row = o / {2} * {3} + o % {2};\n"
                         "    {4} best = {5};\n"
                         "    {0} bestK = 0;\n"
                         "    for ({0} k = 1; k < {6} && best == best; ++k) {{\n",
                         index, results, inner, size * inner, value, widen(dtype, "in0[row]"), size)
               .str();
    body += take("row + k * " + std::to_string(inner), "k", "      ");
    body += "    }\n    out0[o] = (int64_t)bestK;\n  }\n";
  }
  std::string how = rows ? "a warp per result" : "a thread per result";
  std::string text =
      oneOpKernelHeader(op, name, kBlock,
                        llvm::formatv("argmax along axis {0}, {1}", axis, how).str()) +
      body + "}\n";
  return {std::move(text), kBlock, grid};
}

} // namespace smelt::codegen::cuda
