// A GPU allocator's block as a DeviceArray (CudaArray.h).
#include "runtime/cuda/CudaArray.h"

namespace smelt::rt::cuda {

namespace {

class CudaStorage final : public DeviceArray::Storage {
public:
  CudaStorage(std::shared_ptr<CudaDevice> device, Allocator &allocator, void *block)
      : device_(std::move(device)), allocator_(allocator), block_(block) {}
  ~CudaStorage() override { allocator_.free(block_); }

  void *address() const override { return block_; }
  Allocator &allocator() const override { return allocator_; }
  Status copyToHost(void *to, uint64_t bytes) const override {
    SMELT_RETURN_IF_ERROR(device_->makeCurrent());
    SMELT_RETURN_IF_ERROR(device_->copyToHost(to, block_, bytes));
    return device_->synchronize("copying a " + allocator_.device() + " array to the host");
  }
  void *release() override { return std::exchange(block_, nullptr); }

private:
  std::shared_ptr<CudaDevice> device_;
  Allocator &allocator_;
  void *block_;
};

} // namespace

DeviceArray cudaArray(TensorType type, std::shared_ptr<CudaDevice> device, Allocator &allocator,
                      void *block) {
  return DeviceArray(std::move(type),
                     std::make_unique<CudaStorage>(std::move(device), allocator, block));
}

} // namespace smelt::rt::cuda
