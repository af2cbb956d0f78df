// Helpers of the runtime tests: a temporary directory, seeded random tensors (never zeros),
// one-step Executables built by hand and run on the CpuExecutor, row-major index walks, and
// relative-norm comparison.
#pragma once

#include "runtime/CpuExecutor.h"
#include "runtime/Executable.h"
#include "runtime/HostTensor.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <variant>
#include <vector>

namespace smelt::rt::test {

/// A fresh directory for one test's files, removed with everything in it at the end.
class TempDir {
public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "smelt-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()))
      path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

/// The generator of the current test: seeded from SMELT_TEST_SEED when set, else from
/// std::random_device, mixed with the test's name. The seed is printed at start and in every
/// comparison failure, so a failing draw can be replayed.
std::mt19937_64 &rng();
uint64_t baseSeed();

/// Uniform in [lo, hi], redrawn while |x| < minMagnitude so no input is (near) zero.
double draw(double lo, double hi, double minMagnitude = 0.05);
/// The same from `random` (rng(), fetched once for millions of draws).
double draw(std::mt19937_64 &random, double lo, double hi, double minMagnitude);

/// A tensor of `dtype` and `shape` filled by `gen` (default: draw(-2, 2)); integer dtypes round
/// the draws, i1 takes a fair coin. f16/bf16 values are rounded when stored, so references must
/// read the tensor back with toDoubles().
HostTensor randomTensor(DType dtype, const std::vector<int64_t> &shape,
                        const std::function<double()> &gen = {});

/// A step's parameters by their names in the op's params struct (Executable.h's `fields`):
/// integers (also flags and 0/1), floats, keywords ("sum", "mean") and integer lists.
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;
using Attrs = std::map<std::string, AttrValue>;

/// The step op named `name` ("matmul", "slice"); a test failure when there is none.
StepOp stepOpNamed(const std::string &name);

/// `op`'s parameters with the fields `attrs` names set; a test failure for a name the op's
/// parameters lack or a value of the wrong kind.
StepParams paramsOf(StepOp op, const Attrs &attrs);

/// An Executable whose inputs are `operands` (buffers 0..n-1) and whose one step `op` (a
/// library, copy or random op) writes buffer n of type `result`, which it returns.
Executable oneStep(const std::string &op, const std::vector<TensorType> &operands,
                   const TensorType &result, const Attrs &attrs = {});

/// C++ stand-ins for codegen's kernels over f32 (the rt::CpuKernelFn ABI: inputs, then
/// results, in `args`; units [begin, end)), for Executables built by hand in runtime tests,
/// which run without MLIR.
namespace kernels {
void add(void *const *args, int64_t begin, int64_t end); // c = a + b, a unit per element
void mul(void *const *args, int64_t begin, int64_t end); // c = a * b
/// y[r] = x[r * N] + ... + x[r * N + N - 1], a unit per row, added in double and rounded once
/// (as codegen's reductions keep their precision).
template <int64_t N> void sumRows(void *const *args, int64_t begin, int64_t end) {
  const float *x = static_cast<const float *>(args[0]);
  float *y = static_cast<float *>(args[1]);
  for (int64_t r = begin; r < end; ++r) {
    double acc = 0;
    for (int64_t i = 0; i < N; ++i)
      acc += x[r * N + i];
    y[r] = float(acc);
  }
}
} // namespace kernels

/// Appends a buffer of `type` named `name`; returns its id.
BufferId appendBuffer(Executable &exe, const TensorType &type, const std::string &name);

/// Appends a fused-kernel step that `fn` computes (one unit per element of `result`), reading
/// `operands` and writing a new buffer of type `result`; adds the kernel and its CPU entry.
/// Returns the result's id.
BufferId appendKernelStep(Executable &exe, CpuKernelFn fn, const std::string &ops,
                          std::vector<BufferId> operands, const TensorType &result,
                          const std::string &location);

/// Appends a library, copy or random step `op` with parameters `attrs` reading `operands`
/// and writing a new buffer of type `result`; returns its id.
BufferId appendStep(Executable &exe, const std::string &op, std::vector<BufferId> operands,
                    const TensorType &result, const Attrs &attrs = {},
                    const std::string &location = "test.mlir:1:1");

/// Runs `op` on `inputs` through a one-step Executable. Failures (create or run) are reported
/// as test failures and give a zero tensor of `result`, so the caller's comparison fails too.
HostTensor runOp(const std::string &op, const std::vector<HostTensor> &inputs,
                 const TensorType &result, const Attrs &attrs = {});

/// The message `CpuExecutor::create` gives for the one-step Executable, or "" if it succeeds.
std::string createError(const std::string &op, const std::vector<TensorType> &operands,
                        const TensorType &result, const Attrs &attrs = {});

/// Row-major strides of `shape`, in elements.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);
/// Calls fn(index, flat) for every multi-index of `shape` in row-major order.
void forEachIndex(const std::vector<int64_t> &shape,
                  const std::function<void(const std::vector<int64_t> &, int64_t)> &fn);

/// ||got - ref|| / ||ref|| (the absolute norm when ref is all zeros); infinite when the sizes
/// differ or got has a NaN that ref does not.
double relError(const std::vector<double> &got, const std::vector<double> &ref);
/// Tolerance for a float64 comparison of results of `dtype`: f64 1e-12, f32 1e-5, f16 2e-3,
/// bf16 1.5e-2, integers exact.
double tolerance(DType dtype);

/// Expects relError(got, ref) <= tol (default tolerance(got's dtype)), naming `what` and the seed.
void expectClose(const HostTensor &got, const std::vector<double> &ref, const std::string &what,
                 double tol = -1);

} // namespace smelt::rt::test
