// Kernel dispatch by op name, and the attribute reader every family uses.
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace smelt::rt::cpu {

std::string describe(const Step &step) {
  return step.location.empty() ? fmt::format("'{}'", step.op)
                               : fmt::format("'{}' ({})", step.op, step.location);
}

template <typename T> const T *AttrReader::get(const std::string &name, const char *kind) {
  auto it = step_.attrs.find(name);
  const T *value = it == step_.attrs.end() ? nullptr : std::get_if<T>(&it->second);
  if (!value && error_.empty())
    error_ = fmt::format("{}: attribute '{}' ({}) is {}", describe(step_), name, kind,
                         it == step_.attrs.end() ? "missing" : "of the wrong kind");
  return value;
}

int64_t AttrReader::integer(const std::string &name) {
  const int64_t *v = get<int64_t>(name, "integer");
  return v ? *v : 0;
}

double AttrReader::real(const std::string &name) {
  const double *v = get<double>(name, "float");
  return v ? *v : 0.0;
}

std::string AttrReader::keyword(const std::string &name) {
  const std::string *v = get<std::string>(name, "keyword");
  return v ? *v : std::string();
}

std::vector<int64_t> AttrReader::ints(const std::string &name, std::optional<size_t> count) {
  const std::vector<int64_t> *v = get<std::vector<int64_t>>(name, "integer list");
  bool fits = v && (!count || v->size() == *count);
  if (v && !fits && error_.empty())
    error_ = fmt::format("{}: attribute '{}' = [{}] needs {} values", describe(step_), name,
                         fmt::join(*v, ", "), *count);
  return fits ? *v : std::vector<int64_t>(count.value_or(0), 1);
}

Expected<Kernel> prepareKernel(const Step &step, const StepTypes &types) {
  using Prepare = Expected<Kernel> (*)(const Step &, const StepTypes &);
  static const std::map<std::string, Prepare> families = [] {
    std::map<std::string, Prepare> m;
    for (const char *op : {"neg", "abs", "relu", "exp", "log", "tanh", "logistic", "sqrt",
                           "rsqrt", "erf", "sin", "cos", "add", "sub", "mul", "div", "max", "min", "pow",
                           "compare", "select", "convert"})
      m[op] = prepareElementwise;
    for (const char *op : {"broadcast_in_dim", "reshape", "transpose", "slice", "concat", "pad",
                           "iota", "copy"})
      m[op] = prepareShape;
    for (const char *op : {"reduce", "argmax"})
      m[op] = prepareReduce;
    for (const char *op : {"rng_uniform", "rng_normal"})
      m[op] = prepareRandom;
    for (const char *op : {"matmul", "conv2d", "conv2d_backward_input", "conv2d_backward_filter"})
      m[op] = prepareContraction;
    for (const char *op : {"max_pool2d", "avg_pool2d", "max_pool2d_backward",
                           "avg_pool2d_backward"})
      m[op] = preparePooling;
    return m;
  }();
  auto it = families.find(step.op);
  if (it == families.end())
    return Status::error(fmt::format("{}: the CPU has no kernel for op '{}'", describe(step),
                                     step.op));
  return it->second(step, types);
}

} // namespace smelt::rt::cpu
