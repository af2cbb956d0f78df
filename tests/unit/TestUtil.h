// Shared helpers of the unit tests: fresh random inputs (never zeros), running a builder graph
// on the CPU, and the relative-norm comparison against float64 references.
#pragma once

#include "codegen/Compile.h"
#include "frontend/Graph.h"
#include "runtime/CpuExecutor.h"
#include "data/Dataset.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>

namespace smelt::test {

/// A generator seeded from std::random_device; its seed is printed on failure (SCOPED_TRACE in
/// the caller) so a failing draw can be replayed with SMELT_TEST_SEED.
std::mt19937_64 &rng();
uint64_t rngSeed();

/// Uniform in [lo, hi] with |x| >= minMagnitude, so nothing is (near) zero.
double draw(double lo, double hi, double minMagnitude = 0.05);

rt::DType toRt(DType dtype);

/// A tensor of `dtype` filled from `gen` (defaults to uniform in [-2, 2] away from zero);
/// integers are rounded. f16/bf16 values are rounded when stored: read them back with
/// toDoubles() for the reference.
rt::HostTensor randomTensor(const std::vector<int64_t> &shape, DType dtype,
                            const std::function<double()> &gen = {});

/// Compiles `graph`'s function (default pipeline included, with `options`) and runs it on
/// `inputs`.
std::vector<rt::HostTensor> run(Graph &graph, const std::vector<rt::HostTensor> &inputs,
                                const std::string &function = "",
                                const PipelineOptions &options = {});

/// The real Fashion-MNIST `split` ("train" or "t10k") from Debian's dataset-fashion-mnist,
/// its first `limit` examples when `limit` > 0.
data::Dataset fashion(const char *split, int64_t limit = 0);

/// The derivative of `loss` (which reads the `count` values at `x`) with respect to each of
/// them, by central differences with step 1e-6 * max(1, |x[k]|); `x` is left as it was.
std::vector<double> centralDifferences(double *x, int64_t count,
                                       const std::function<double()> &loss);

/// `function` of `module` compiled (default pipeline) for the CPU. A failure is a test failure
/// and gives nullopt.
std::optional<rt::CpuExecutor> compileForCpu(mlir::ModuleOp module, const std::string &function);

/// Ends `graph` with (loss, the gradient of `loss` with respect to each of `wrt`, `extra`...)
/// and compiles it for the CPU: the executor expectGradientsMatchDifferences runs. A failure
/// is a test failure and gives nullopt.
std::optional<rt::CpuExecutor> compileLossAndGradients(Graph &graph, Tensor loss,
                                                       const std::vector<Tensor> &wrt,
                                                       const std::vector<Tensor> &extra = {});

/// Runs `cpu` on `args` (its first output the loss, then the gradients of the arguments in
/// `wrt`, in that order; any outputs after them are not read) and checks each gradient against centralDifferences of the loss over
/// its argument: ||analytic - numeric|| / max(||numeric||, 1e-3) <= `tolerance` (a gradient
/// that is 0 by the math meets differences that are rounding noise), failures named by
/// `names[n]`.
void expectGradientsMatchDifferences(rt::CpuExecutor &cpu, std::vector<rt::HostTensor> &args,
                                     const std::vector<size_t> &wrt, double tolerance,
                                     const std::vector<std::string> &names);

/// Runs `build`, which must throw a BuildError whose message contains `part`.
template <typename Fn> void expectBuildError(Fn build, const std::string &part) {
  try {
    build();
    ADD_FAILURE() << "expected a BuildError containing: " << part;
  } catch (const BuildError &e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

/// ||got - ref|| / ||ref|| (absolute norm when ref is all zeros).
double relError(const std::vector<double> &got, const std::vector<double> &ref);

/// The tolerance of a float64-reference comparison for results of `dtype`.
double tolerance(DType dtype);

} // namespace smelt::test
