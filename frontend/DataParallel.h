// Data parallelism in the builder (MirroredStrategy, pmap): the training step is written for
// one replica's share of the global batch; these helpers make its replicas agree. Gradients
// (and reported metrics) are averaged over the replicas with all_reduce before the optimizer,
// so every replica applies the same update and parameters stay identical; random streams are
// offset by the replica index so replicas draw different dropout masks from one compiled step.
#pragma once

#include "frontend/Ops.h"

namespace smelt {

/// Each value averaged over `replicas` replicas (one all_reduce mean each, which
/// smelt-bucket-all-reduce combines into buckets). With one replica the values themselves.
std::vector<Tensor> crossReplicaMean(const std::vector<Tensor> &values, int64_t replicas,
                                     Loc loc = Loc::current());

/// The offset of a step's random streams: `step` * replicas + replica_id, so that no two
/// replicas and no two steps share a stream. With one replica it is `step` itself.
Tensor replicaStreamOffset(Tensor step, int64_t replicas, Loc loc = Loc::current());

} // namespace smelt
