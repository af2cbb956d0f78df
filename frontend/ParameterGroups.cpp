// applyParameterGroups: the parameters split by group, one optimizer update
// each, joined.
#include "frontend/ParameterGroups.h"

#include <set>

namespace smelt {

ParameterFilter namePrefix(std::string prefix) {
  return [prefix = std::move(prefix)](const std::string &name, const std::vector<int64_t> &) {
    return name.rfind(prefix, 0) == 0;
  };
}

std::string checkParameterGroups(const std::vector<ParameterGroup> &groups) {
  std::set<std::string> names;
  for (const ParameterGroup &group : groups) {
    if (group.name.empty() || !group.matches)
      return "a parameter group needs a name and a filter of the parameters it "
             "takes";
    if (!names.insert(group.name).second)
      return "two parameter groups are named '" + group.name + "'";
  }
  return "";
}

OptimizerUpdate applyParameterGroups(Graph &g, const OptimizerConfig &defaultOptimizer,
                                     const std::vector<ParameterGroup> &groups,
                                     const std::vector<Tensor> &params,
                                     const std::vector<Tensor> &grads,
                                     const std::vector<Tensor> &learningRates, Loc loc) {
  if (params.size() != grads.size() || learningRates.size() != groups.size() + 1)
    g.fail(loc, "parameter groups: " + std::to_string(params.size()) + " parameters, " +
                    std::to_string(grads.size()) + " gradients and " +
                    std::to_string(learningRates.size()) + " learning rates for " +
                    std::to_string(groups.size()) + " groups and the default optimizer");
  if (std::string why = checkParameterGroups(groups); !why.empty())
    g.fail(loc, why);
  // Which optimizer (0: the default, 1 + i: group i) takes each parameter.
  std::vector<size_t> owner(params.size(), 0);
  std::vector<std::vector<size_t>> members(groups.size() + 1);
  for (size_t p = 0; p < params.size(); ++p) {
    std::string name = parameterName(params[p]);
    for (size_t i = 0; i < groups.size() && owner[p] == 0; ++i)
      if (groups[i].matches(name, params[p].shape()))
        owner[p] = 1 + i;
    members[owner[p]].push_back(p);
  }
  OptimizerUpdate joined;
  joined.newParams.resize(params.size());
  for (size_t o = 0; o < members.size(); ++o) {
    if (members[o].empty()) {
      if (o > 0)
        g.fail(loc, "parameter group '" + groups[o - 1].name + "' matches no parameter");
      continue;
    }
    OptimizerConfig config = o == 0 ? defaultOptimizer : groups[o - 1].optimizer;
    if (o > 0)
      config.scope = groups[o - 1].name;
    std::vector<Tensor> own, ownGrads;
    for (size_t p : members[o]) {
      own.push_back(params[p]);
      ownGrads.push_back(grads[p]);
    }
    OptimizerUpdate update = applyOptimizer(g, config, own, ownGrads, learningRates[o], loc);
    for (size_t k = 0; k < members[o].size(); ++k)
      joined.newParams[members[o][k]] = update.newParams[k];
    joined.appendState(update);
  }
  return joined;
}

} // namespace smelt
