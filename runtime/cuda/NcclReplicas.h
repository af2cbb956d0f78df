// The cross-device reduction of data-parallel replicas on GPUs (MirroredStrategy's
// NcclAllReduce): NCCL over the replicas' physical GPUs, made with ncclCommInitAll for the
// replicas of one process, or through a bootstrap communicator (MPI) for one replica per
// process. What `smelt train` passes to the Trainer as its DeviceGroupFactory.
//
// NCCL cannot put two ranks on one physical GPU, so replicas on logical GPUs that split one keep
// their host communicators (the GPU executor then reduces through host copies), as they do
// when libnccl cannot be loaded: DeviceGroup::summary says which and why.
#pragma once

#include "runtime/Collectives.h"

#include <string>
#include <vector>

namespace smelt::rt::cuda {

/// A DeviceGroupFactory: NCCL communicators for `devices` (logical GPUs, resolved to physical
/// ones), or none with the reason. Errors: a device that is not a GPU here, or NCCL failing to
/// make a group it should.
Expected<DeviceGroup> ncclReplicaGroup(const std::vector<std::string> &devices,
                                       Communicator *bootstrap, CollectiveOptions options);

/// Why replicas on `physicalGpus` (the physical ordinal of each replica's GPU) cannot be one
/// NCCL group in one process, or "" when they can: two replicas on one physical GPU.
std::string sharedGpuReason(const std::vector<std::string> &devices,
                            const std::vector<int> &physicalGpus);

} // namespace smelt::rt::cuda
