// Values that stay on their device between runs (issue 31): a DeviceArray is a tensor in a
// device's memory that the caller owns, as jax.Array or XLA's PjRtBuffer. An executor returns
// one for each output the caller keeps on the device (RunValues::keepOnDevice) and takes it back
// as a later run's input, lent or donated; donated, its memory goes back to the device's
// allocator once the run's last reader of it is queued, so a training step's new parameters
// take the old ones' place instead of doubling them. Only a GPU has device arrays: the CPU's
// values are host tensors already.
#pragma once

#include "runtime/Allocator.h"
#include "runtime/HostTensor.h"
#include "runtime/Status.h"

#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace smelt::rt {

class DeviceArray {
public:
  /// The block behind an array, made by the executor of its device (the GPU's:
  /// runtime/cuda/CudaArray.cpp). Destroying it gives the block back to its allocator.
  class Storage {
  public:
    virtual ~Storage() = default;
    virtual void *address() const = 0;
    /// The allocator the block came from, and so the device it is on.
    virtual Allocator &allocator() const = 0;
    /// Copies the first `bytes` to host memory `to`, after the work queued on the device so
    /// far (which may still write them); returns once they are there.
    virtual Status copyToHost(void *to, uint64_t bytes) const = 0;
    /// Gives the block up: the caller (a run the array is donated to) frees it to allocator().
    virtual void *release() = 0;
  };

  DeviceArray() = default;
  DeviceArray(TensorType type, std::unique_ptr<Storage> storage)
      : type_(std::move(type)), storage_(std::move(storage)) {}

  /// Whether it holds a block (a default or donated array does not).
  explicit operator bool() const { return storage_ != nullptr; }
  const TensorType &type() const { return type_; }
  /// "gpu:0": the device whose memory holds it.
  const std::string &device() const { return storage_->allocator().device(); }
  void *address() const { return storage_->address(); }
  Allocator &allocator() const { return storage_->allocator(); }
  /// Its values on the host (a copy; the host waits for the device).
  Expected<HostTensor> toHost() const;
  /// Gives the block to a run it is donated to, leaving this array empty.
  void *release();

private:
  TensorType type_;
  std::unique_ptr<Storage> storage_;
};

/// A run's input or output: a host tensor (its own, or one the caller lends) or an array on a
/// device.
class Value {
public:
  Value() = default;
  Value(HostTensor host) : value_(std::move(host)) {}
  Value(DeviceArray array) : value_(std::move(array)) {}
  /// A view of the caller's `host`, which must outlive it: an input passed without a copy.
  static Value lent(const HostTensor &host) {
    Value v;
    v.value_ = &host;
    return v;
  }

  bool onDevice() const { return std::holds_alternative<DeviceArray>(value_); }
  /// Its tensor type, whichever memory holds it.
  const TensorType &type() const;
  /// The host tensor, its own or lent, or null when it is on a device.
  const HostTensor *host() const {
    if (const HostTensor *const *lent = std::get_if<const HostTensor *>(&value_))
      return *lent;
    return std::get_if<HostTensor>(&value_);
  }
  /// The host tensor it owns (which a run may fill or take), or null.
  HostTensor *ownedHost() { return std::get_if<HostTensor>(&value_); }
  /// The device array, or null when it is on the host.
  DeviceArray *array() { return std::get_if<DeviceArray>(&value_); }
  const DeviceArray *array() const { return std::get_if<DeviceArray>(&value_); }
  /// "cpu:0" for a host tensor, else the array's device.
  std::string device() const;
  /// Its values on the host: a copy of either (a device array's costs a wait for the device).
  Expected<HostTensor> toHost() const;
  /// Element `i` as a double, copied from the device when it is there (a scalar loss scale).
  Expected<double> at(int64_t i) const;

private:
  std::variant<HostTensor, DeviceArray, const HostTensor *> value_;
};

/// How one run treats residency: which inputs the caller gives up and which outputs stay on
/// their devices.
struct RunValues {
  /// Per input (or empty: none): the caller donates the input's device array (XLA's
  /// donate_argnums). The run takes its block, which goes back to the allocator after the
  /// run's last reader of it, and leaves the caller's array empty. Host inputs ignore it.
  std::vector<char> donated;
  /// Per output (or empty: none): it stays on the device that computed it, as a DeviceArray;
  /// otherwise, or when a CPU step computed it, it comes back as a host tensor.
  std::vector<char> keepOnDevice;

  bool donates(size_t input) const { return input < donated.size() && donated[input]; }
  bool keeps(size_t output) const { return output < keepOnDevice.size() && keepOnDevice[output]; }
  /// Whether every one of `outputs` outputs stays on its device.
  bool keepsAll(size_t outputs) const {
    for (size_t i = 0; i < outputs; ++i)
      if (!keeps(i))
        return false;
    return true;
  }
};

/// The host tensors that `inputs` are, downloading device arrays into `downloads` (which must
/// outlive the result's use): how a run on the CPU, which reads host memory, takes values.
Expected<std::vector<const HostTensor *>> hostInputs(const std::vector<Value *> &inputs,
                                                     std::vector<HostTensor> &downloads);

} // namespace smelt::rt
