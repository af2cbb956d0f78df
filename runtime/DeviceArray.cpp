// DeviceArray and Value (DeviceArray.h).
#include "runtime/DeviceArray.h"

#include <fmt/format.h>

namespace smelt::rt {

Expected<HostTensor> DeviceArray::toHost() const {
  if (!storage_)
    return Status::error("a device array that holds nothing (donated to a run, or never made)");
  SMELT_ASSIGN_OR_RETURN(HostTensor host,
                         HostTensor::allocate(type_, "a copy of a " + device() + " array"));
  if (host.byteSize())
    SMELT_RETURN_IF_ERROR(storage_->copyToHost(host.raw(), host.byteSize()));
  return host;
}

void *DeviceArray::release() {
  void *block = storage_ ? storage_->release() : nullptr;
  storage_.reset();
  return block;
}

const TensorType &Value::type() const {
  if (const DeviceArray *a = array())
    return a->type();
  return host()->type();
}

std::string Value::device() const {
  const DeviceArray *a = array();
  return a && *a ? a->device() : "cpu:0";
}

Expected<HostTensor> Value::toHost() const {
  if (const DeviceArray *a = array())
    return a->toHost();
  return *host();
}

Expected<double> Value::at(int64_t i) const {
  if (const HostTensor *h = host())
    return h->at(i);
  SMELT_ASSIGN_OR_RETURN(HostTensor copy, toHost());
  return copy.at(i);
}

Expected<std::vector<const HostTensor *>> hostInputs(const std::vector<Value *> &inputs,
                                                     std::vector<HostTensor> &downloads) {
  // Reserved first, so that pointers into it stay put.
  size_t onDevice = 0;
  for (const Value *v : inputs)
    onDevice += v && v->onDevice();
  downloads.clear();
  downloads.reserve(onDevice);
  std::vector<const HostTensor *> host;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value *v = inputs[i];
    if (!v || !v->onDevice()) {
      host.push_back(v ? v->host() : nullptr);
      continue;
    }
    Expected<HostTensor> copy = v->toHost();
    if (!copy)
      return Status::error(fmt::format("input #{}: {}", i, copy.message()));
    downloads.push_back(std::move(*copy));
    host.push_back(&downloads.back());
  }
  return host;
}

} // namespace smelt::rt
