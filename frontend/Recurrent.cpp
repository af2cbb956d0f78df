// The unrolled LSTM and GRU (Recurrent.h).
#include "frontend/Recurrent.h"

namespace smelt {
namespace {

/// Fails unless x is [batch, time >= 1, features] and units >= 1; `layer` names the layer kind.
void checkRecurrent(Graph &g, Tensor x, int64_t units, const char *layer,
                    const std::string &name, Loc loc) {
  if (x.rank() != 3)
    g.fail(loc, std::string(layer) + " layer '" + name +
                    "' needs an input [batch, time, features], got rank " +
                    std::to_string(x.rank()));
  if (units <= 0)
    g.fail(loc, std::string(layer) + " layer '" + name + "' needs units >= 1, got " +
                    std::to_string(units));
  if (x.dim(1) <= 0)
    g.fail(loc, std::string(layer) + " layer '" + name + "' needs at least one time step, got 0");
}

/// The kernel W [features, gates * units] and the recurrent kernel U [units, gates * units] of
/// layer `name`, Glorot uniform as Keras' (whose recurrent default is orthogonal).
std::pair<Tensor, Tensor> recurrentKernels(Tensor x, int64_t gates, int64_t units,
                                           const std::string &name, Loc loc) {
  Graph &g = x.graph();
  Tensor kernel = g.parameter(name + "/kernel", {x.dim(2), gates * units},
                              Initializer::glorotUniform(), x.dtype(), loc);
  Tensor recurrent = g.parameter(name + "/recurrent_kernel", {units, gates * units},
                                 Initializer::glorotUniform(), x.dtype(), loc);
  return {kernel, recurrent};
}

/// x W + b for every step at once: [batch, time, gates * units], one matmul over all rows.
Tensor projectInputs(Tensor x, Tensor kernel, Tensor bias, Loc loc) {
  int64_t batch = x.dim(0), time = x.dim(1), width = kernel.dim(1);
  Tensor rows = matmul(reshape(x, {batch * time, x.dim(2)}, loc), kernel, false, false, loc);
  return reshape(add(rows, bias, loc), {batch, time, width}, loc);
}

/// Step t's row [batch, width] of the projected inputs.
Tensor stepOf(Tensor inputs, int64_t t, Loc loc) {
  int64_t batch = inputs.dim(0), width = inputs.dim(2);
  return reshape(slice(inputs, {0, t, 0}, {batch, t + 1, width}, {1, 1, 1}, loc), {batch, width},
                 loc);
}

/// Gate k's [batch, units] columns of z [batch, gates * units].
Tensor gateOf(Tensor z, int64_t k, int64_t units, Loc loc) {
  return slice(z, {0, k * units}, {z.dim(0), (k + 1) * units}, {1, 1}, loc);
}

/// Fails unless `options.mask` (when given) is [batch, time] of x.
void checkMask(Graph &g, Tensor x, const RecurrentOptions &options, const char *layer,
               const std::string &name, Loc loc) {
  if (!options.mask)
    return;
  std::vector<int64_t> want = {x.dim(0), x.dim(1)};
  if (options.mask->shape() != want)
    g.fail(loc, std::string(layer) + " layer '" + name + "': the mask must be " +
                    shapeString(want) + " (batch, time), got " +
                    shapeString(options.mask->shape()));
}

/// Step t's new state where the mask (if any) keeps the step, the old one (zeros before the
/// first step) elsewhere.
Tensor masked(const RecurrentOptions &options, int64_t t, Tensor next, std::optional<Tensor> old,
              Loc loc) {
  if (!options.mask)
    return next;
  if (!old)
    old = broadcastTo(scalarLike(next, 0.0, loc), next.shape(), loc);
  Tensor mask = *options.mask;
  Tensor column = reshape(slice(mask, {0, t}, {mask.dim(0), t + 1}, {1, 1}, loc),
                          {mask.dim(0), 1}, loc);
  Tensor keep = mask.dtype() == DType::i1
                    ? column
                    : compare(column, scalarLike(column, 0.0, loc), CompareDirection::ne, loc);
  return select(broadcastTo(keep, next.shape(), loc), next, *old, loc);
}

/// The layer's result from its per-step states [batch, units].
Tensor recurrentResult(const std::vector<Tensor> &states, const RecurrentOptions &options,
                       Loc loc) {
  if (!options.returnSequences)
    return states.back();
  std::vector<Tensor> steps;
  for (const Tensor &h : states)
    steps.push_back(reshape(h, {h.dim(0), 1, h.dim(1)}, loc));
  return steps.size() == 1 ? steps.front() : concat(steps, 1, loc);
}

} // namespace

Tensor lstm(Tensor x, int64_t units, const std::string &name, const RecurrentOptions &options,
            Loc loc) {
  Graph &g = x.graph();
  checkRecurrent(g, x, units, "lstm", name, loc);
  checkMask(g, x, options, "lstm", name, loc);
  return g.atomically([&] {
    auto [kernel, recurrent] = recurrentKernels(x, 4, units, name, loc);
    Initializer biasInit = Initializer::zeros();
    if (options.unitForgetBias)
      biasInit = biasInit.withConstantSlice(units, 2 * units, 1.0);
    Tensor bias = g.parameter(name + "/bias", {4 * units}, biasInit, x.dtype(), loc);
    Tensor inputs = projectInputs(x, kernel, bias, loc);
    auto gate = [&](Tensor z, int64_t k) { return gateOf(z, k, units, loc); };
    std::optional<Tensor> h, c;
    std::vector<Tensor> states;
    for (int64_t t = 0; t < x.dim(1); ++t) {
      Tensor z = stepOf(inputs, t, loc);
      // The zero initial state adds nothing: step 0 has no recurrent matmul.
      if (h)
        z = add(z, matmul(*h, recurrent, false, false, loc), loc);
      Tensor input = logistic(gate(z, 0), loc), candidate = tanh(gate(z, 2), loc);
      Tensor cell = c ? add(mul(logistic(gate(z, 1), loc), *c, loc), mul(input, candidate, loc), loc)
                      : mul(input, candidate, loc);
      Tensor hidden = mul(logistic(gate(z, 3), loc), tanh(cell, loc), loc);
      c = masked(options, t, cell, c, loc);
      h = masked(options, t, hidden, h, loc);
      states.push_back(*h);
    }
    return recurrentResult(states, options, loc);
  });
}

Tensor gru(Tensor x, int64_t units, const std::string &name, const RecurrentOptions &options,
           Loc loc) {
  Graph &g = x.graph();
  checkRecurrent(g, x, units, "gru", name, loc);
  checkMask(g, x, options, "gru", name, loc);
  return g.atomically([&] {
    auto [kernel, recurrent] = recurrentKernels(x, 3, units, name, loc);
    Tensor bias = g.parameter(name + "/bias", {2, 3 * units}, Initializer::zeros(), x.dtype(), loc);
    auto row = [&](int64_t r) {
      return reshape(slice(bias, {r, 0}, {r + 1, 3 * units}, {1, 1}, loc), {3 * units}, loc);
    };
    Tensor inputs = projectInputs(x, kernel, row(0), loc), recurrentBias = row(1);
    auto gate = [&](Tensor z, int64_t k) { return gateOf(z, k, units, loc); };
    std::optional<Tensor> h;
    std::vector<Tensor> states;
    for (int64_t t = 0; t < x.dim(1); ++t) {
      Tensor xz = stepOf(inputs, t, loc);
      // h_{t-1} U + b_1; the zero initial state leaves b_1 alone (broadcast over the batch).
      Tensor hz = h ? add(matmul(*h, recurrent, false, false, loc), recurrentBias, loc)
                    : broadcastTo(recurrentBias, {x.dim(0), 3 * units}, loc);
      Tensor update = logistic(add(gate(xz, 0), gate(hz, 0), loc), loc);
      Tensor reset = logistic(add(gate(xz, 1), gate(hz, 1), loc), loc);
      Tensor candidate = tanh(add(gate(xz, 2), mul(reset, gate(hz, 2), loc), loc), loc);
      // z h + (1 - z) n = n + z (h - n); with h = 0, (1 - z) n.
      Tensor next = h ? add(candidate, mul(update, sub(*h, candidate, loc), loc), loc)
                      : mul(sub(scalarLike(update, 1.0, loc), update, loc), candidate, loc);
      h = masked(options, t, next, h, loc);
      states.push_back(*h);
    }
    return recurrentResult(states, options, loc);
  });
}

} // namespace smelt
