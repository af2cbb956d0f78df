// The unrolled LSTM (Recurrent.h).
#include "frontend/Recurrent.h"

namespace smelt {

Tensor lstm(Tensor x, int64_t units, const std::string &name, Loc loc) {
  Graph &g = x.graph();
  if (x.rank() != 3)
    g.fail(loc, "lstm layer '" + name + "' needs an input [batch, time, features], got rank " +
                    std::to_string(x.rank()));
  if (units <= 0)
    g.fail(loc, "lstm layer '" + name + "' needs units >= 1, got " + std::to_string(units));
  int64_t batch = x.dim(0), time = x.dim(1), features = x.dim(2);
  if (time <= 0)
    g.fail(loc, "lstm layer '" + name + "' needs at least one time step, got 0");
  return g.atomically([&] {
    Tensor kernel = g.parameter(name + "/kernel", {features, 4 * units},
                                Initializer::glorotUniform(), x.dtype(), loc);
    Tensor recurrent = g.parameter(name + "/recurrent_kernel", {units, 4 * units},
                                   Initializer::glorotUniform(), x.dtype(), loc);
    Tensor bias = g.parameter(name + "/bias", {4 * units}, Initializer::zeros(), x.dtype(), loc);
    Tensor inputs = reshape(add(matmul(reshape(x, {batch * time, features}, loc), kernel, false,
                                       false, loc),
                                bias, loc),
                            {batch, time, 4 * units}, loc);
    auto gate = [&](Tensor z, int64_t k) {
      return slice(z, {0, k * units}, {batch, (k + 1) * units}, {1, 1}, loc);
    };
    std::optional<Tensor> h, c;
    std::vector<Tensor> states;
    for (int64_t t = 0; t < time; ++t) {
      Tensor z = reshape(slice(inputs, {0, t, 0}, {batch, t + 1, 4 * units}, {1, 1, 1}, loc),
                         {batch, 4 * units}, loc);
      // The zero initial state adds nothing: step 0 has no recurrent matmul.
      if (h)
        z = add(z, matmul(*h, recurrent, false, false, loc), loc);
      Tensor input = logistic(gate(z, 0), loc), candidate = tanh(gate(z, 2), loc);
      c = c ? add(mul(logistic(gate(z, 1), loc), *c, loc), mul(input, candidate, loc), loc)
            : mul(input, candidate, loc);
      h = mul(logistic(gate(z, 3), loc), tanh(*c, loc), loc);
      states.push_back(reshape(*h, {batch, 1, units}, loc));
    }
    return time == 1 ? states.front() : concat(states, 1, loc);
  });
}

} // namespace smelt
