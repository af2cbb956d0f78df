// Data-parallel helpers of the builder (DataParallel.h).
#include "frontend/DataParallel.h"

namespace smelt {

std::vector<Tensor> crossReplicaMean(const std::vector<Tensor> &values, int64_t replicas,
                                     Loc loc) {
  if (replicas < 1 && !values.empty())
    values.front().graph().fail(loc, "replicas = " + std::to_string(replicas) +
                                         " must be at least 1");
  if (replicas == 1)
    return values;
  std::vector<Tensor> means;
  for (const Tensor &v : values)
    means.push_back(allReduce(v, AllReduceKind::mean, replicas, loc));
  return means;
}

Tensor replicaStreamOffset(Tensor step, int64_t replicas, Loc loc) {
  if (replicas == 1)
    return step;
  return add(mul(step, scalarLike(step, double(replicas), loc), loc), replicaId(step.graph(), loc),
             loc);
}

} // namespace smelt
