// The loop emitter: a grid-stride loop over the elements of a loop fusion, each iteration
// computing one element of every result through the shared walk. When inputs are read at the
// loop's own index (contiguous across threads), it moves 16 bytes per access instead: each
// thread loads a vector of W elements of those inputs, renders the body once per lane, and
// stores vectors; the last n % W elements go through the scalar loop. A kernel that streams
// many buffers takes narrower vectors, so that its lanes fit in registers (vectorWidth).
#include "codegen/cuda/CudaKernels.h"
#include "codegen/cuda/CudaTarget.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;

namespace smelt::codegen::cuda {

namespace {

constexpr int64_t kBlock = 256;

/// The 32-bit registers the lanes of one vector iteration may take: every lane of every
/// vector the thread loads or stores (an f64 or i64 lane takes two). Within it ptxas kept every
/// kernel of the built-in models' steps below 128 registers without a spill; sibling-merged
/// Adam updates of the GPT (64 vector inputs and 48 results, 448 lanes at width 4) held 255
/// and spilled up to 552 bytes, and mixed-precision ones of 112 lanes traded a few spilled
/// bytes for occupancy. Such a kernel needs no vectors to keep memory busy: its many buffers
/// are already that many independent loads per iteration.
constexpr int64_t kVectorLaneRegisters = 64;

/// Elements per access: 16 bytes of the widest dtype moved as vectors, at most 8 lanes (each
/// lane is a copy of the body), halved while the lanes' registers exceed kVectorLaneRegisters.
/// Vectors pay when some input is read at the loop index, or when nothing is read; a kernel
/// whose every read is remapped (a transpose) stays scalar (1).
int64_t vectorWidth(FusionOp fusion, const llvm::SmallBitVector &contiguous, int64_t n) {
  if (contiguous.none() && !fusion.getInputs().empty())
    return 1;
  size_t widest = 1;
  int64_t registersPerLane = 0;
  auto stream = [&](Value value) {
    size_t bytes = rt::byteWidth(elementDType(value));
    widest = std::max(widest, bytes);
    registersPerLane += bytes > 4 ? 2 : 1;
  };
  for (Value result : fusion.getResults())
    stream(result);
  for (unsigned input : contiguous.set_bits())
    stream(fusion.getInputs()[input]);
  int64_t width = std::min<int64_t>(8, int64_t(16 / widest));
  while (width > 1 && width * registersPerLane > kVectorLaneRegisters)
    width /= 2;
  return n >= width ? width : 1;
}

std::string vectorType(rt::DType dtype, int64_t width) {
  return llvm::formatv("SmeltVec<{0}, {1}>", storageType(dtype), width).str();
}

} // namespace

KernelSource renderLoopKernel(FusionOp fusion, llvm::StringRef name, KernelForm form) {
  ArrayRef<int64_t> shape = fusion.getIterationShape();
  int64_t n = elementCount(shape);
  CudaTarget target(fusion, indexTypeFor(fusion));
  const std::string &index = target.indexType();
  FusionWalk walk(fusion, target);
  SmallVector<Value> results(fusion.getYield().getValues());

  // Element i of every result. Rendered first: it says which inputs are read at the loop index,
  // and it is the whole loop of a scalar kernel or the tail of a vector one.
  target.setDepth(2);
  Val i = target.name("i");
  target.setLoopIndex(i);
  FusionWalk::IndexRef at = walk.linearIndex(shape, i);
  // A result written in place of an input (smelt-donate-in-place) is stored only once every
  // result of the element is computed, so that no load of the input comes after the store.
  bool inPlace = !inPlaceResults(fusion).empty();
  SmallVector<std::string> stores;
  for (auto [j, value] : llvm::enumerate(results)) {
    std::string element = narrow(elementDType(value), target.expr(walk.emit(value, at)));
    if (!inPlace) {
      target.line(llvm::formatv("out{0}[i] = {1};", j, element));
      continue;
    }
    Val computed = target.define(std::string(storageType(elementDType(value))), element);
    stores.push_back(llvm::formatv("out{0}[i] = {1};", j, target.expr(computed)).str());
  }
  for (const std::string &store : stores)
    target.line(store);
  std::string scalarBody = target.take();
  llvm::SmallBitVector contiguous = target.loadedAtLoopIndex();
  int64_t width = vectorWidth(fusion, contiguous, n);
  int64_t vectors = width > 1 ? n / width : 0;

  std::string text = kernelHeader(fusion, name, kBlock, form);
  text += llvm::formatv("  const {0} first = ({0})(blockIdx.x * blockDim.x + threadIdx.x);\n"
                        "  const {0} stride = ({0})(gridDim.x * blockDim.x);\n",
                        index);
  if (vectors > 0) {
    target.setDepth(1);
    target.open(llvm::formatv("for ({0} vi = first; vi < {1}; vi += stride) {{", index, vectors));
    for (unsigned input : contiguous.set_bits()) {
      std::string type = vectorType(elementDType(fusion.getInputs()[input]), width);
      target.line(llvm::formatv("const {0} {1} = reinterpret_cast<const {0} *>(in{2})[vi];", type,
                                CudaTarget::vectorName(input), input));
    }
    for (auto [j, value] : llvm::enumerate(results))
      target.line(llvm::formatv("{0} s{1};", vectorType(elementDType(value), width), j));
    for (int64_t lane = 0; lane < width; ++lane) {
      walk.newScope(); // each lane is its own element: nothing computed for another applies
      Val element = target.define(index, llvm::formatv("vi * {0} + {1}", width, lane));
      target.setLoopIndex(element, unsigned(lane));
      at = walk.linearIndex(shape, element);
      for (auto [j, value] : llvm::enumerate(results))
        target.line(llvm::formatv("s{0}.v[{1}] = {2};", j, lane,
                                  narrow(elementDType(value), target.expr(walk.emit(value, at)))));
    }
    for (auto [j, value] : llvm::enumerate(results))
      target.line(llvm::formatv("reinterpret_cast<{0} *>(out{1})[vi] = s{1};",
                                vectorType(elementDType(value), width), j));
    target.close();
    text += target.take();
  }
  if (vectors * width < n) {
    std::string start = vectors > 0 ? std::to_string(vectors * width) + " + first" : "first";
    text += llvm::formatv("  for ({0} i = {1}; i < {2}; i += stride) {{\n", index, start, n);
    text += scalarBody + "  }\n";
  }
  text += "}\n";
  // Enough blocks to fill every SM (the tail adds fewer than `width` elements), no more: the
  // grid-stride loop covers the rest.
  int64_t work = vectors > 0 ? vectors : n;
  int64_t grid =
      std::clamp<int64_t>((work + kBlock - 1) / kBlock, 1, kSmCount * (kThreadsPerSm / kBlock));
  return {std::move(text), kBlock, grid};
}

} // namespace smelt::codegen::cuda
