// The artifact tests' samples (ArtifactSamples.h).
#include "ArtifactSamples.h"

#include "RuntimeTestUtil.h"

#include <fmt/format.h>

#include <limits>

namespace smelt::rt::test {

using Ints = std::vector<int64_t>;
using Bytes = std::vector<uint8_t>;

Bytes randomBytes(size_t n) {
  Bytes bytes(n);
  for (uint8_t &b : bytes)
    b = uint8_t(rng()());
  return bytes;
}

Bytes bytesOf(const HostTensor &t) {
  const uint8_t *p = static_cast<const uint8_t *>(t.raw());
  return Bytes(p, p + t.byteSize());
}

namespace {

/// The types of buffers `ids`: what a kernel reading or writing them was compiled for.
std::vector<TensorType> typesOf(const Executable &exe, std::vector<BufferId> ids) {
  std::vector<TensorType> types;
  for (BufferId id : ids)
    types.push_back(exe.buffers[size_t(id)].type);
  return types;
}

} // namespace

Constant randomConstant(const Executable &exe, BufferId id) {
  return {id, bytesOf(randomTensor(exe.buffers[id].type.dtype, exe.buffers[id].type.shape))};
}

Executable everything() {
  Executable exe;
  exe.name = fmt::format("everything_{}", rng()() % 1000);
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                          DType::i32, DType::i64, DType::i1};
  for (int i = 0; i < 25; ++i) {
    Ints shape(rng()() % 4);
    for (int64_t &d : shape)
      d = int64_t(1 + rng()() % 5);
    if (i == 13)
      shape = {3, 0, 2};
    exe.buffers.push_back({{dtypes[i % 7], shape}, fmt::format("%{} at m.mlir:{}:3", i, i + 1)});
  }
  exe.inputs = {0, 1};
  for (BufferId id = 2; id <= 8; ++id) // one constant of each dtype
    exe.constants.push_back(randomConstant(exe, id));
  exe.kernels = {{"main_fusion0", "loop", 37, typesOf(exe, {9, 2}), typesOf(exe, {10, 11}),
                  "broadcast_in_dim+add+mul", 2, 256, 4},
                 {"main_fusion1", "reduction", 5, typesOf(exe, {10}), typesOf(exe, {12, 13, 3}),
                  "exp+reduce", 2, 128, 5}};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto step = [&](StepOp op, StepParams params, std::vector<BufferId> operands,
                  std::vector<BufferId> results, std::string location) {
    Step s;
    s.op = op;
    s.params = std::move(params);
    s.operands = std::move(operands);
    s.results = std::move(results);
    s.location = std::move(location);
    exe.steps.push_back(std::move(s));
  };
  // Every parameter kind at its edges: flags, integers, floats (NaN, -0.0, -inf, a draw),
  // empty and extreme integer lists, an enum.
  step(StepOp::Pad, PadParams{{}, {-1, 0, kMax}, nan}, {0}, {9}, "m.mlir:20:5");
  step(StepOp::Fusion, KernelParams{0}, {9, 2}, {10, 11}, "m.mlir:21:5");
  step(StepOp::Fusion, KernelParams{1}, {10}, {12, 13, 3}, "");
  step(StepOp::Matmul, MatmulParams{true, false, {true, Activation::logistic}}, {0, 1, 5}, {14},
       "m.mlir:22:5");
  step(StepOp::Pad, PadParams{{kMin}, {0}, -0.0}, {}, {15}, "m.mlir:23:5");
  step(StepOp::Pad, PadParams{{kMax}, {}, -std::numeric_limits<double>::infinity()}, {}, {16}, "");
  step(StepOp::AllReduce, AllReduceParams{ReduceKind::mean, kMax}, {15}, {17}, "m.mlir:24:5");
  step(StepOp::Slice, SliceParams{{kMin}, {0}, {1, 2, 3, 4}}, {16}, {18}, "");
  step(StepOp::Copy, NoParams{}, {18}, {19}, "m.mlir:25:5");
  step(StepOp::ReplicaId, NoParams{}, {}, {20}, "");
  step(StepOp::AvgPool2DBackward, PoolParams{{1, 2}, {3, 4}, {5, 6, 7, 8}}, {9}, {21}, "");
  step(StepOp::Conv2DBackwardFilter, ConvParams{{1, 1}, {0, 0, 0, 0}, {2, 2}, kMax}, {0, 1}, {22}, "");
  step(StepOp::Conv2D, ConvParams{{2, 1}, {1, 0, 0, 1}, {1, 3}, 3, {false, Activation::relu}}, {0, 1},
       {24}, "m.mlir:26:5");
  step(StepOp::Concat, AxisParams{kMin}, {0, 1}, {23}, "");
  exe.outputs = {12, 0, 4, 12};
  // A schedule: buffers given back after steps, and two segments.
  exe.steps[1].frees = {9};
  exe.steps[3].frees = {14, 1};
  exe.segments = {{"cpu:0", 0, 8, {0, 1}, {12, 18}}, {"gpu:3", 8, 14, {18}, {}}};
  // A result that is an argument and one returned twice still have names of their own.
  exe.inputNames = {"x", "arg1"};
  exe.outputNames = {"logits", "same_as_x", "result2", "logits_again"};
  Bytes cubin = randomBytes(777);
  exe.cuda = std::make_shared<CudaCode>(
      CudaCode{"sm_90", "extern \"C\" __global__ void main_fusion0(float **args) {}",
               ".version 8.8\n.target sm_90\n", cubin});
  return exe;
}

ArtifactExtras extrasFor(const Executable &exe, const std::string &target) {
  ArtifactExtras extras;
  extras.cpuObject = randomBytes(300);
  for (const FusedKernel &k : exe.kernels)
    extras.cpuSymbols.push_back(k.name);
  extras.target = target;
  extras.producer = "ArtifactTest";
  return extras;
}

} // namespace smelt::rt::test
