// The SIMT tests' buffers and launches (SimtTestUtil.h).
#include "SimtTestUtil.h"

#include <cstring>
#include <new>

namespace smelt::simt::test {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kGuardBytes = 0; // ASan's redzone is the guard, and it also catches reads
#else
constexpr size_t kGuardBytes = 64;
#endif
constexpr unsigned char kGuard = 0x5a;
constexpr std::align_val_t kAlignment{16};

} // namespace

Buffer::Buffer(size_t bytes)
    : data_(static_cast<unsigned char *>(::operator new(bytes + kGuardBytes, kAlignment))),
      bytes_(bytes) {
  std::memset(data_ + bytes, kGuard, kGuardBytes);
}

Buffer::~Buffer() { ::operator delete(data_, kAlignment); }

std::string Buffer::guardDamage() const {
  size_t damaged = 0;
  for (size_t i = 0; i < kGuardBytes; ++i)
    damaged += data_[bytes_ + i] != kGuard;
  if (damaged == 0)
    return "";
  return "a write past the end of a " + std::to_string(bytes_) + "-byte buffer changed " +
         std::to_string(damaged) + " of the " + std::to_string(kGuardBytes) + " bytes after it";
}

Emulated emulate(unsigned grid, unsigned block, Order order,
                 const std::vector<rt::HostTensor> &inputs,
                 const std::vector<rt::TensorType> &resultTypes,
                 const std::function<void(void *const *args)> &call) {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<void *> pointers;
  for (const rt::HostTensor &input : inputs) {
    buffers.push_back(std::make_unique<Buffer>(input.byteSize()));
    std::memcpy(buffers.back()->data(), input.raw(), input.byteSize());
  }
  for (const rt::TensorType &type : resultTypes) {
    buffers.push_back(std::make_unique<Buffer>(type.byteSize()));
    std::memset(buffers.back()->data(), order == Order::Forward ? 0xff : 0x7f, type.byteSize());
  }
  for (std::unique_ptr<Buffer> &buffer : buffers)
    pointers.push_back(buffer->data());
  Emulated emulated;
  emulated.error = launch(grid, block, order, [&] { call(pointers.data()); });
  for (const std::unique_ptr<Buffer> &buffer : buffers)
    if (emulated.error.empty())
      emulated.error = buffer->guardDamage();
  for (size_t r = 0; r < resultTypes.size(); ++r) {
    rt::HostTensor result = rt::HostTensor::zeros(resultTypes[r]);
    std::memcpy(result.raw(), buffers[inputs.size() + r]->data(), result.byteSize());
    emulated.results.push_back(std::move(result));
  }
  return emulated;
}

Emulated emulate(const CorpusKernel &kernel, const std::vector<rt::HostTensor> &inputs,
                 Order order) {
  std::vector<rt::TensorType> resultTypes;
  for (size_t a = kernel.inputs; a < kernel.args.size(); ++a)
    resultTypes.push_back(argType(kernel.args[a]));
  return emulate(kernel.grid, kernel.block, order, inputs, resultTypes, kernel.call);
}

std::vector<std::string> corpusFunctions() {
  std::vector<std::string> names;
  for (const CorpusKernel &kernel : corpus())
    if (names.empty() || names.back() != kernel.function)
      names.push_back(kernel.function);
  return names;
}

rt::TensorType argType(const CorpusArg &arg) {
  return rt::TensorType{*rt::parseDType(arg.dtype), {arg.elements}};
}

std::string firstDifference(const rt::HostTensor &a, const rt::HostTensor &b) {
  if (a.byteSize() != b.byteSize())
    return std::to_string(a.byteSize()) + " bytes against " + std::to_string(b.byteSize());
  const auto *x = static_cast<const unsigned char *>(a.raw());
  const auto *y = static_cast<const unsigned char *>(b.raw());
  for (size_t i = 0; i < a.byteSize(); ++i)
    if (x[i] != y[i])
      return "byte " + std::to_string(i) + " of " + std::to_string(a.byteSize());
  return "";
}

const char *orderName(Order order) { return order == Order::Forward ? "forward" : "reversed"; }

} // namespace smelt::simt::test
