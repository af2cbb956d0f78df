// Runtime test helpers: per-test seeding, random tensors, one-step Executables, comparisons.
#include "RuntimeTestUtil.h"

#include "runtime/DTypeDispatch.h"

#include <cmath>
#include <cstdlib>
#include <functional>

namespace smelt::rt::test {

uint64_t baseSeed() {
  static const uint64_t seed = [] {
    const char *fromEnv = std::getenv("SMELT_TEST_SEED");
    uint64_t s = fromEnv ? std::strtoull(fromEnv, nullptr, 10)
                         : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    std::printf("runtime-tests: SMELT_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

std::mt19937_64 &rng() {
  // Re-seeded whenever a new test asks, so each test's draws depend only on the seed and its
  // name, not on which tests ran before it.
  static std::mt19937_64 generator;
  static const testing::TestInfo *owner = nullptr;
  static bool seeded = false;
  // Compared by identity, not name: tests draw millions of numbers through here.
  const testing::TestInfo *info = testing::UnitTest::GetInstance()->current_test_info();
  if (!seeded || info != owner) {
    seeded = true;
    owner = info;
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "";
    generator.seed(baseSeed() ^ std::hash<std::string>{}(name));
  }
  return generator;
}

double draw(double lo, double hi, double minMagnitude) {
  return draw(rng(), lo, hi, minMagnitude);
}

double draw(std::mt19937_64 &random, double lo, double hi, double minMagnitude) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (;;) {
    double x = dist(random);
    if (std::fabs(x) >= minMagnitude)
      return x;
  }
}

HostTensor randomTensor(DType dtype, const std::vector<int64_t> &shape,
                        const std::function<double()> &gen) {
  TensorType type{dtype, shape};
  std::vector<double> values(size_t(type.numElements()));
  for (double &v : values) {
    if (dtype == DType::i1)
      v = double(rng()() & 1);
    else if (!isFloat(dtype))
      v = std::round(gen ? gen() : draw(-50, 50, 1));
    else
      v = gen ? gen() : draw(-2, 2);
  }
  return HostTensor::fromDoubles(type, values);
}

StepOp stepOpNamed(const std::string &name) {
  for (uint8_t op = 0; op < kNumStepOps; ++op)
    if (name == stepOpName(StepOp(op)))
      return StepOp(op);
  ADD_FAILURE() << "no step op is named '" << name << "'";
  return StepOp::Copy;
}

StepParams paramsOf(StepOp op, const Attrs &attrs) {
  StepParams params = paramsFor(op);
  size_t used = 0;
  std::visit(
      [&](auto &p) {
        p.fields([&](const char *name, auto &field) {
          auto it = attrs.find(name);
          if (it == attrs.end())
            return;
          ++used;
          using T = std::decay_t<decltype(field)>;
          const AttrValue &value = it->second;
          if constexpr (std::is_same_v<T, ReduceKind>) {
            const std::string *kind = std::get_if<std::string>(&value);
            if (kind && (*kind == "sum" || *kind == "mean"))
              field = *kind == "sum" ? ReduceKind::sum : ReduceKind::mean;
            else
              ADD_FAILURE() << name << " must be \"sum\" or \"mean\"";
          } else if constexpr (std::is_same_v<T, double>) {
            if (const double *v = std::get_if<double>(&value))
              field = *v;
            else
              ADD_FAILURE() << name << " must be a float";
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            if (const auto *v = std::get_if<std::vector<int64_t>>(&value))
              field = *v;
            else
              ADD_FAILURE() << name << " must be an integer list";
          } else {
            if (const int64_t *v = std::get_if<int64_t>(&value))
              field = T(*v);
            else
              ADD_FAILURE() << name << " must be an integer";
          }
        });
      },
      params);
  EXPECT_EQ(used, attrs.size()) << "'" << stepOpName(op) << "' lacks some of the parameters given";
  return params;
}

Executable oneStep(const std::string &op, const std::vector<TensorType> &operands,
                   const TensorType &result, const Attrs &attrs) {
  Executable exe;
  exe.name = "test_" + op;
  for (size_t i = 0; i < operands.size(); ++i)
    exe.inputs.push_back(appendBuffer(exe, operands[i], "%arg" + std::to_string(i)));
  exe.outputs.push_back(appendStep(exe, op, exe.inputs, result, attrs));
  return exe;
}

namespace kernels {

void add(void *const *args, int64_t begin, int64_t end) {
  const float *a = static_cast<const float *>(args[0]), *b = static_cast<const float *>(args[1]);
  float *c = static_cast<float *>(args[2]);
  for (int64_t i = begin; i < end; ++i)
    c[i] = a[i] + b[i];
}

void mul(void *const *args, int64_t begin, int64_t end) {
  const float *a = static_cast<const float *>(args[0]), *b = static_cast<const float *>(args[1]);
  float *c = static_cast<float *>(args[2]);
  for (int64_t i = begin; i < end; ++i)
    c[i] = a[i] * b[i];
}

} // namespace kernels

BufferId appendBuffer(Executable &exe, const TensorType &type, const std::string &name) {
  exe.buffers.push_back({type, name});
  return BufferId(exe.buffers.size() - 1);
}

namespace {

/// Appends a step `op` with `params` reading `operands` and writing a new buffer of type
/// `result`, named for `what` and `location`; returns the result's id.
BufferId appendStepOf(Executable &exe, StepOp op, StepParams params,
                      std::vector<BufferId> operands, const TensorType &result,
                      const std::string &what, const std::string &location) {
  BufferId id = appendBuffer(exe, result, what + " at " + location);
  Step step;
  step.op = op;
  step.params = std::move(params);
  step.operands = std::move(operands);
  step.results = {id};
  step.location = location;
  exe.steps.push_back(std::move(step));
  return id;
}

} // namespace

BufferId appendKernelStep(Executable &exe, CpuKernelFn fn, const std::string &ops,
                          std::vector<BufferId> operands, const TensorType &result,
                          const std::string &location) {
  FusedKernel kernel;
  kernel.name = exe.name + "_fusion" + std::to_string(exe.kernels.size());
  kernel.kind = "loop";
  kernel.units = result.numElements();
  for (BufferId id : operands)
    kernel.inputs.push_back(exe.buffers[size_t(id)].type);
  kernel.results = {result};
  kernel.ops = ops;
  kernel.computeOps = 1;
  auto code = exe.cpu ? std::make_shared<CpuCode>(*exe.cpu) : std::make_shared<CpuCode>();
  code->entries.push_back(fn);
  exe.cpu = code;
  exe.kernels.push_back(std::move(kernel));
  return appendStepOf(exe, StepOp::Fusion, KernelParams{int64_t(exe.kernels.size()) - 1},
                      std::move(operands), result, ops, location);
}

BufferId appendStep(Executable &exe, const std::string &op, std::vector<BufferId> operands,
                    const TensorType &result, const Attrs &attrs, const std::string &location) {
  StepOp stepOp = stepOpNamed(op);
  return appendStepOf(exe, stepOp, paramsOf(stepOp, attrs), std::move(operands), result, op,
                      location);
}

HostTensor runOp(const std::string &op, const std::vector<HostTensor> &inputs,
                 const TensorType &result, const Attrs &attrs) {
  std::vector<TensorType> types;
  for (const HostTensor &t : inputs)
    types.push_back(t.type());
  Expected<CpuExecutor> exec = CpuExecutor::create(oneStep(op, types, result, attrs));
  if (!exec) {
    ADD_FAILURE() << op << ": create failed: " << exec.message();
    return HostTensor::zeros(result);
  }
  std::vector<HostTensor> outputs;
  if (Status s = exec->run(inputs, outputs); !s.ok()) {
    ADD_FAILURE() << op << ": run failed: " << s.message();
    return HostTensor::zeros(result);
  }
  return std::move(outputs.at(0));
}

std::string createError(const std::string &op, const std::vector<TensorType> &operands,
                        const TensorType &result, const Attrs &attrs) {
  Expected<CpuExecutor> exec = CpuExecutor::create(oneStep(op, operands, result, attrs));
  return exec ? std::string() : exec.message();
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

void forEachIndex(const std::vector<int64_t> &shape,
                  const std::function<void(const std::vector<int64_t> &, int64_t)> &fn) {
  int64_t count = TensorType{DType::f32, shape}.numElements();
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < count; ++flat) {
    fn(index, flat);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

double relError(const std::vector<double> &got, const std::vector<double> &ref) {
  if (got.size() != ref.size())
    return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(ref[i]))
      return INFINITY;
    if (std::isnan(ref[i]) || (std::isinf(ref[i]) && got[i] == ref[i]))
      continue;
    diff += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

double tolerance(DType dtype) {
  switch (dtype) {
  case DType::f64:
    return 1e-12;
  case DType::f32:
    return 5e-6;
  case DType::f16:
    return 2e-3;
  case DType::bf16:
    return 1.5e-2;
  default:
    return 0;
  }
}

void expectClose(const HostTensor &got, const std::vector<double> &ref, const std::string &what,
                 double tol) {
  double limit = tol >= 0 ? tol : tolerance(got.type().dtype);
  double err = relError(got.toDoubles(), ref);
  EXPECT_LE(err, limit) << what << " (" << got.type().str() << "): relative error " << err << " > "
                        << limit << "; got " << got.summary() << "; SMELT_TEST_SEED=" << baseSeed();
}

} // namespace smelt::rt::test
