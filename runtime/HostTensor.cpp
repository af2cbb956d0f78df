// HostTensor: aligned allocation and conversions to and from double.
#include "runtime/HostTensor.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace smelt::rt {

void HostTensor::Free::operator()(uint8_t *p) const { std::free(p); }

HostTensor HostTensor::zeros(const TensorType &type) {
  HostTensor t;
  t.type_ = type;
  // aligned_alloc needs a multiple of the alignment; one spare line also keeps empty tensors
  // non-null.
  size_t bytes = (type.byteSize() + 63) / 64 * 64 + 64;
  auto *p = static_cast<uint8_t *>(std::aligned_alloc(64, bytes));
  if (!p)
    throw std::bad_alloc();
  std::memset(p, 0, bytes);
  t.storage_.reset(p);
  return t;
}

Expected<uint64_t> checkedByteSize(const TensorType &type, const std::string &what) {
  // Check the size before computing it: a negative or overflowing shape is an error here, not
  // a huge request to the allocator or undefined behaviour.
  uint64_t bytes = byteWidth(type.dtype);
  for (int64_t d : type.shape) {
    if (d < 0)
      return Status::error(fmt::format("{}: {} has a negative dimension", what, type.str()));
    if (__builtin_mul_overflow(bytes, uint64_t(d), &bytes) || bytes > (uint64_t(1) << 60))
      return Status::error(fmt::format("{}: {} is too large to allocate", what, type.str()));
  }
  return bytes;
}

Expected<HostTensor> HostTensor::allocate(const TensorType &type, const std::string &what) {
  SMELT_RETURN_IF_ERROR(checkedByteSize(type, what).status());
  try {
    return zeros(type);
  } catch (const std::bad_alloc &) {
    return Status::error(fmt::format("out of memory allocating {} bytes for {} ({})",
                                     type.byteSize(), what, type.str()));
  }
}

HostTensor::HostTensor(const HostTensor &other) {
  if (!other.storage_)
    return;
  *this = zeros(other.type_);
  std::memcpy(raw(), other.raw(), other.byteSize());
}

HostTensor &HostTensor::operator=(const HostTensor &other) {
  if (this != &other)
    *this = HostTensor(other);
  return *this;
}

HostTensor HostTensor::fromDoubles(const TensorType &type, const std::vector<double> &values) {
  HostTensor t = zeros(type);
  visitDType(type.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *out = t.data<T>();
    for (size_t i = 0; i < values.size() && int64_t(i) < type.numElements(); ++i)
      out[i] = fromCompute<T>(values[i]);
  });
  return t;
}

double HostTensor::at(int64_t i) const {
  return visitDType(type_.dtype, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return double(toCompute(data<T>()[i]));
  });
}

std::vector<double> HostTensor::toDoubles() const {
  std::vector<double> out(size_t(type_.numElements()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = at(int64_t(i));
  return out;
}

std::string HostTensor::summary(size_t count) const {
  int64_t n = type_.numElements();
  std::string s = "[";
  for (int64_t i = 0; i < n && i < int64_t(count); ++i)
    s += fmt::format("{}{:.6g}", i ? ", " : "", at(i));
  if (n > int64_t(count))
    s += ", ...";
  return s + fmt::format("] ({} elements)", n);
}

} // namespace smelt::rt
