// NCCL groups for data-parallel replicas on GPUs (NcclReplicas.h).
#include "runtime/cuda/NcclReplicas.h"

#include "runtime/DeviceMemory.h"
#include "runtime/cuda/Nccl.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace smelt::rt::cuda {

std::string sharedGpuReason(const std::vector<std::string> &devices,
                            const std::vector<int> &physicalGpus) {
  for (size_t i = 0; i < physicalGpus.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (physicalGpus[i] == physicalGpus[j])
        return fmt::format("{} and {} are both on physical GPU {}, and NCCL puts one rank on "
                           "each GPU",
                           devices[j], devices[i], physicalGpus[i]);
  return "";
}

Expected<DeviceGroup> ncclReplicaGroup(const std::vector<std::string> &devices,
                                       Communicator *bootstrap, CollectiveOptions options) {
  std::vector<int> physical;
  for (const std::string &device : devices) {
    Expected<LogicalGpu> gpu = resolveGpu(device);
    if (!gpu)
      return Status::error(fmt::format("the replica on {}: {}", device, gpu.message()));
    physical.push_back(gpu->physical);
  }
  DeviceGroup group;
  Expected<const Nccl *> nccl = Nccl::get();
  if (!nccl) {
    group.summary = "through host copies (no NCCL: " + nccl.message() + ")";
    return group;
  }
  if (!bootstrap) {
    if (std::string shared = sharedGpuReason(devices, physical); !shared.empty()) {
      group.summary = "through host copies (" + shared + ")";
      return group;
    }
    SMELT_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<NcclCommunicator>> made,
                           createNcclCommunicators(physical, options));
    for (std::unique_ptr<NcclCommunicator> &communicator : made)
      group.communicators.push_back(std::move(communicator));
  } else {
    if (devices.size() != 1)
      return Status::error(fmt::format("{}: one replica per process, but {} devices given",
                                       bootstrap->describe(), devices.size()));
    SMELT_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> made,
                           createNcclCommunicator(*bootstrap, physical[0], options));
    group.communicators.push_back(std::move(made));
  }
  group.summary = fmt::format("NCCL {} over {}", (*nccl)->versionName(), fmt::join(devices, ", "));
  return group;
}

} // namespace smelt::rt::cuda
