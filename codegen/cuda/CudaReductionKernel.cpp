// The reduction emitter. Every reduce of a reduction fusion shares one operand shape and one set
// of axes, so one kernel computes all of them: result element o is the combination, over every
// reduced position r, of the body evaluated at (kept coordinates of o, reduced coordinates of r).
// Threads stride over r accumulating in registers (f32 for f32/f16/bf16, f64 for f64, i64 for
// integers, so i32 sums wrap exactly as on the CPU), then combine through warp shuffles and
// shared memory. Which threads share a result depends on where memory is contiguous:
// - the innermost axis is reduced ("rows"): threads of a warp take consecutive r. Short rows
//   (at most 1024 elements) get a warp per result, long ones a block per result;
// - the innermost axis is kept ("columns"): the 32 lanes of a warp take consecutive results and
//   the block's rows of 32 threads split r, then combine down each column in shared memory.
// When a block per result (or per 32 columns) would leave SMs idle and r is long (a bias
// gradient: a few columns over a whole batch of images; a loss: one result), the range of r is
// split over `parts` blocks. Each writes its partial to a workspace in the module's global
// memory and counts itself in; the last of them to arrive combines the partials in the order
// of their parts, so the result has the same bits whichever block finishes last.
#include "codegen/cuda/CudaKernels.h"
#include "codegen/cuda/CudaTarget.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdint>

using namespace mlir;

namespace smelt::codegen::cuda {

namespace {

enum class Layout { WarpPerResult, BlockPerResult, Columns };

constexpr int64_t kWarpsPerBlock = 8; // WarpPerResult: 8 results in a block of 256 threads
constexpr int64_t kShortRow = 1024;

/// How one reduce accumulates: the combiner struct of the prelude, the accumulator's type and
/// the identity it starts from.
struct Accumulator {
  const char *combiner;
  std::string type;
  std::string identity;
};

Accumulator accumulatorOf(ReduceOp reduce, CudaTarget &target) {
  rt::DType dtype = elementDType(reduce.getResult());
  ReduceKind kind = reduce.getKind();
  Accumulator acc;
  acc.combiner = kind == ReduceKind::sum   ? "SmeltSum"
                 : kind == ReduceKind::max ? "SmeltMax"
                                           : "SmeltMin";
  if (rt::isFloat(dtype)) {
    acc.type = dtype == rt::DType::f64 ? "double" : "float";
    double identity = kind == ReduceKind::sum   ? 0.0
                      : kind == ReduceKind::max ? -INFINITY
                                                : INFINITY;
    acc.identity = target.expr(target.floatConstant(identity, dtype));
    return acc;
  }
  acc.type = "int64_t";
  bool is32 = dtype == rt::DType::i32;
  int64_t lowest = is32 ? INT32_MIN : INT64_MIN, highest = is32 ? INT32_MAX : INT64_MAX;
  int64_t identity = kind == ReduceKind::sum ? 0 : kind == ReduceKind::max ? lowest : highest;
  acc.identity = target.expr(target.integerConstant(identity, rt::DType::i64));
  return acc;
}

/// Which threads share a result, and the launch that follows from it: `parts` blocks per result
/// (or per 32 columns), each over `chunk` consecutive reduced positions, when the range is split.
struct Plan {
  Layout layout = Layout::WarpPerResult;
  int64_t block = 0, grid = 0;
  int64_t parts = 1, chunk = 0;
};

/// A split gives each thread at least this many reduced elements, so that a block's partial
/// and the last block's pass over the partials cost little beside the reads.
constexpr int64_t kSplitPerThread = 16;

/// `bytesPerThread`: shared memory a thread needs to combine columns (one value per reduce).
Plan planOf(bool innermostReduced, int64_t results, int64_t length, int64_t bytesPerThread) {
  if (innermostReduced && length <= kShortRow)
    return {Layout::WarpPerResult, 32 * kWarpsPerBlock,
            (results + kWarpsPerBlock - 1) / kWarpsPerBlock};
  // Few blocks: give each more threads, so that a small grid still fills the SMs it gets.
  Plan plan;
  int64_t groups = innermostReduced ? results : (results + 31) / 32;
  if (innermostReduced) {
    plan = {Layout::BlockPerResult, results < kSmCount ? 1024 : 256, results};
  } else {
    bool wide = groups < kSmCount && length >= 256 && bytesPerThread * 1024 <= 48 * 1024;
    plan = {Layout::Columns, wide ? 1024 : 256, groups};
  }
  // Still too few to fill the SMs: split each group's range into parts, as many as fill them
  // (kThreadsPerSm a SM) while each thread keeps kSplitPerThread elements.
  if (groups == 0 || groups >= kSmCount)
    return plan;
  int64_t threadsPerGroup = innermostReduced ? plan.block : plan.block / 32;
  int64_t parts = std::min((kSmCount * (kThreadsPerSm / plan.block) + groups - 1) / groups,
                           length / (threadsPerGroup * kSplitPerThread));
  if (parts < 2)
    return plan;
  plan.chunk = (length + parts - 1) / parts;
  plan.parts = (length + plan.chunk - 1) / plan.chunk; // none empty
  plan.grid = groups * plan.parts;
  return plan;
}

} // namespace

KernelSource renderReductionKernel(FusionOp fusion, llvm::StringRef name, KernelForm form) {
  SmallVector<ReduceOp> reduces;
  for (Value value : fusion.getYield().getValues())
    reduces.push_back(value.getDefiningOp<ReduceOp>());
  ReduceOp root = reduces.front();
  ArrayRef<int64_t> shape = root.getX().getType().getShape();
  ArrayRef<int64_t> axes = root.getAxes();
  SmallVector<int64_t> keptShape, reducedShape;
  for (auto [d, size] : llvm::enumerate(shape))
    (llvm::is_contained(axes, int64_t(d)) ? reducedShape : keptShape).push_back(size);
  int64_t results = elementCount(keptShape), length = elementCount(reducedShape);

  CudaTarget target(fusion, indexTypeFor(fusion));
  const std::string &index = target.indexType();
  FusionWalk walk(fusion, target);
  SmallVector<Accumulator> accumulators;
  int64_t bytesPerThread = 0;
  for (ReduceOp reduce : reduces) {
    accumulators.push_back(accumulatorOf(reduce, target));
    bytesPerThread += accumulators.back().type == "float" ? 4 : 8;
  }
  bool innermostReduced = shape.empty() || llvm::is_contained(axes, int64_t(shape.size()) - 1);
  Plan plan = planOf(innermostReduced, results, length, bytesPerThread);
  Layout layout = plan.layout;
  int64_t block = plan.block;
  bool split = plan.parts > 1;

  // The block's result (or column group), and the reduced positions [begin, stop) it takes.
  std::string group = "blockIdx.x", first, step, end = std::to_string(length);
  if (results == 0)
    target.line("return; // no results: the launch's one block has nothing to write");
  if (split) {
    group = llvm::formatv("(blockIdx.x / {0})", plan.parts).str();
    target.line(llvm::formatv("const {0} begin = ({0})(blockIdx.x % {1}) * {2};", index, plan.parts,
                              plan.chunk));
    target.line(llvm::formatv("const {0} stop = begin + {1} < {2} ? begin + {1} : {2};", index,
                              plan.chunk, length));
    end = "stop";
  }
  std::string start = split ? "begin + " : "";
  switch (layout) {
  case Layout::WarpPerResult:
    target.line(llvm::formatv("const {0} o = ({0})blockIdx.x * {1} + threadIdx.x / 32;", index,
                              kWarpsPerBlock));
    target.line(
        llvm::formatv("if (o >= {0}) return; // whole warps leave; none is waited for", results));
    first = "threadIdx.x % 32", step = "32";
    break;
  case Layout::BlockPerResult:
    target.line(llvm::formatv("const {0} o = ({0}){1};", index, group));
    first = "threadIdx.x", step = std::to_string(block);
    break;
  case Layout::Columns:
    target.line(llvm::formatv("const {0} o = ({0}){1} * 32 + threadIdx.x % 32;", index, group));
    // Threads past the last result read nothing but still join the block's combination.
    target.line(llvm::formatv("const {0} end = o < {1} ? {2} : {3};", index, results, end,
                              split ? "begin" : "0"));
    first = "threadIdx.x / 32", step = std::to_string(block / 32), end = "end";
    break;
  }
  SmallVector<Val> kept(walk.coords(walk.linearIndex(keptShape, target.name("o"))));
  for (auto [j, acc] : llvm::enumerate(accumulators))
    target.line(llvm::formatv("{0} a{1} = {2};", acc.type, j, acc.identity));

  target.open(
      llvm::formatv("for ({0} r = {1}{2}; r < {3}; r += {4}) {{", index, start, first, end, step));
  walk.newScope(); // the loop body: only the kept coordinates (variables outside) carry over
  SmallVector<Val> reduced(walk.coords(walk.linearIndex(reducedShape, target.name("r"))));
  FusionWalk::IndexRef at = walk.reduceOperandIndex(root, kept, reduced);
  for (auto [j, reduce] : llvm::enumerate(reduces)) {
    const Accumulator &acc = accumulators[j];
    Val value = walk.emit(reduce.getX(), at);
    target.line(llvm::formatv("a{0} = {1}::combine(a{0}, ({2})({3}));", j, acc.combiner, acc.type,
                              target.expr(value)));
  }
  target.close();

  // Each thread's accumulators combined across the warp or the block (a second time, over the
  // partials, in the last block of a split range: the shared arrays are declared once).
  auto combineInBlock = [&](bool declare) {
    for (auto [j, acc] : llvm::enumerate(accumulators)) {
      switch (layout) {
      case Layout::WarpPerResult:
        target.line(llvm::formatv("a{0} = smelt_warp_reduce<{1}>(a{0});", j, acc.combiner));
        break;
      case Layout::BlockPerResult:
        if (declare)
          target.line(llvm::formatv("__shared__ {0} s{1}[32];", acc.type, j));
        target.line(llvm::formatv("a{0} = smelt_block_reduce<{1}, {2}>(a{0}, {3}, s{0});", j,
                                  acc.combiner, acc.type, acc.identity));
        break;
      case Layout::Columns:
        if (declare)
          target.line(llvm::formatv("__shared__ {0} s{1}[{2}];", acc.type, j, block));
        target.line(llvm::formatv("a{0} = smelt_column_reduce<{1}>(a{0}, s{0});", j, acc.combiner));
        break;
      }
    }
  };
  combineInBlock(/*declare=*/true);
  std::string workspace;
  if (split) {
    // One partial per block (per column of a block of columns) for each reduce, and the count
    // of each group's blocks that have written theirs; the last block resets it.
    int64_t lanes = layout == Layout::Columns ? 32 : 1;
    workspace =
        "// " + name.str() + "'s workspace: each block's partials, each group's blocks done\n";
    for (auto [j, acc] : llvm::enumerate(accumulators))
      workspace += llvm::formatv("__device__ volatile {0} {1}_partial{2}[{3}];\n", acc.type, name,
                                 j, plan.grid * lanes);
    workspace +=
        llvm::formatv("__device__ unsigned int {0}_arrived[{1}];\n", name, plan.grid / plan.parts);
    std::string slot = lanes == 1 ? "blockIdx.x" : "blockIdx.x * 32 + threadIdx.x";
    target.open(lanes == 1 ? "if (threadIdx.x == 0) {" : "if (threadIdx.x < 32) {");
    for (size_t j = 0; j < accumulators.size(); ++j)
      target.line(llvm::formatv("{0}_partial{1}[{2}] = a{1};", name, j, slot));
    target.close();
    target.line(llvm::formatv("if (!smelt_last_block(&{0}_arrived[{1}], {2})) return;", name, group,
                              plan.parts));
    // The last block's threads take the parts' partials as they took r: in a fixed order.
    for (auto [j, acc] : llvm::enumerate(accumulators))
      target.line(llvm::formatv("a{0} = {1};", j, acc.identity));
    target.open(
        llvm::formatv("for ({0} p = {1}; p < {2}; p += {3}) {{", index, first, plan.parts, step));
    target.line(llvm::formatv("const {0} at = ({0}){1} * {2} + p;", index, group, plan.parts));
    std::string partial = lanes == 1 ? "at" : "at * 32 + threadIdx.x % 32";
    for (auto [j, acc] : llvm::enumerate(accumulators))
      target.line(llvm::formatv("a{0} = {1}::combine(a{0}, ({2}){3}_partial{0}[{4}]);", j,
                                acc.combiner, acc.type, name, partial));
    target.close();
    combineInBlock(/*declare=*/false);
  }
  target.open(layout == Layout::WarpPerResult ? "if (threadIdx.x % 32 == 0) {"
              : layout == Layout::BlockPerResult
                  ? "if (threadIdx.x == 0) {"
                  : llvm::formatv("if (threadIdx.x < 32 && o < {0}) {{", results).str());
  for (auto [j, reduce] : llvm::enumerate(reduces)) {
    rt::DType dtype = elementDType(reduce.getResult());
    target.line(llvm::formatv("out{0}[o] = {1};", j,
                              narrow(dtype, llvm::formatv("({0})(a{1})", computeType(dtype), j))));
  }
  target.close();
  std::string text = workspace + kernelHeader(fusion, name, block, form) + target.take() + "}\n";
  return {std::move(text), block, std::max<int64_t>(plan.grid, 1)};
}

} // namespace smelt::codegen::cuda
