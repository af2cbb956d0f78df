// Parameter groups: other optimizers, rates, schedules or weight decay for
// named subsets of the parameters in one training step, as optax's
// multi_transform and PyTorch's param groups.
#pragma once

#include "frontend/Optimizers.h"

namespace smelt {

/// Whether a parameter (by its name and shape) belongs somewhere.
using ParameterFilter =
    std::function<bool(const std::string &name, const std::vector<int64_t> &shape)>;

struct ParameterGroup {
  /// Scopes its optimizer's state ("<name>/adam/m/...") and names its
  /// learning-rate input.
  std::string name;
  ParameterFilter matches;
  OptimizerConfig optimizer;
};

/// The parameters whose names start with `prefix` ("encoder/").
ParameterFilter namePrefix(std::string prefix);

/// What is wrong with `groups` as a list (a group without a name or filter, two
/// of one name), or "".
std::string checkParameterGroups(const std::vector<ParameterGroup> &groups);

/// Updates each parameter of `params` with the optimizer of the first group in
/// `groups` that matches it, or with `defaultOptimizer` when none does, from
/// its gradient in `grads`: learningRates[0] is the default optimizer's rate,
/// learningRates[1 + i] group i's. Each optimizer sees only its own parameters
/// (clipping by the global norm clips within a group). The state lists the
/// default optimizer's first, then each group's in order; the new parameters
/// are in `params` order. A group without a name, two of one name, or one that
/// matches no parameter is a BuildError.
OptimizerUpdate applyParameterGroups(Graph &g, const OptimizerConfig &defaultOptimizer,
                                     const std::vector<ParameterGroup> &groups,
                                     const std::vector<Tensor> &params,
                                     const std::vector<Tensor> &grads,
                                     const std::vector<Tensor> &learningRates,
                                     Loc loc = Loc::current());

} // namespace smelt
