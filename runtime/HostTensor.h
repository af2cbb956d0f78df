// A tensor in host memory: a TensorType and 64-byte-aligned storage it owns.
#pragma once

#include "runtime/DType.h"
#include "runtime/Status.h"
#include "runtime/DTypeDispatch.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace smelt::rt {

/// The bytes a tensor of `type` takes, or an error naming `what` when a dimension is negative
/// or the size overflows.
Expected<uint64_t> checkedByteSize(const TensorType &type, const std::string &what);

class HostTensor {
public:
  HostTensor() = default;
  HostTensor(HostTensor &&) = default;
  HostTensor &operator=(HostTensor &&) = default;
  /// Copies are deep: each tensor owns its storage.
  HostTensor(const HostTensor &other);
  HostTensor &operator=(const HostTensor &other);
  /// A tensor of `type` with every byte zero. Throws std::bad_alloc when memory runs out;
  /// allocate() reports it as a Status instead.
  static HostTensor zeros(const TensorType &type);
  /// zeros() that never throws: running out of memory is an error naming `what` and the bytes.
  static Expected<HostTensor> allocate(const TensorType &type, const std::string &what);
  /// A tensor of `type` holding `values` converted to its dtype (f16/bf16 round to nearest).
  static HostTensor fromDoubles(const TensorType &type, const std::vector<double> &values);
  /// A tensor of `shape` holding `values` in row-major order; its dtype is the one stored as T
  /// (float -> f32, Half -> f16, int64_t -> i64, bool -> i1 ...). Like fromDoubles, values past
  /// the element count are ignored and missing ones stay zero.
  template <typename T>
  static HostTensor fromVector(std::vector<int64_t> shape, const std::vector<T> &values) {
    HostTensor t = zeros(TensorType{dtypeOf<T>(), std::move(shape)});
    for (size_t i = 0; i < values.size() && int64_t(i) < t.type().numElements(); ++i)
      t.data<T>()[i] = values[i];
    return t;
  }

  const TensorType &type() const { return type_; }
  size_t byteSize() const { return type_.byteSize(); }
  void *raw() { return storage_.get(); }
  const void *raw() const { return storage_.get(); }
  template <typename T> T *data() { return static_cast<T *>(raw()); }
  template <typename T> const T *data() const { return static_cast<const T *>(raw()); }

  /// Element `i` (row-major) as a double, whatever the dtype.
  double at(int64_t i) const;
  /// Every element as a double: what tests compare against a float64 reference.
  std::vector<double> toDoubles() const;
  /// "[0.25, -1.5, ... ] (N elements)": the first few values, for tools.
  std::string summary(size_t count = 6) const;

private:
  struct Free {
    void operator()(uint8_t *p) const;
  };
  TensorType type_;
  std::unique_ptr<uint8_t, Free> storage_;
};

/// Pointers to the elements of `items` (const ones when it is const), for the executors' run(),
/// which take inputs by pointer.
template <typename Items> auto pointersTo(Items &items) {
  std::vector<decltype(&*items.begin())> pointers;
  pointers.reserve(items.size());
  for (auto &item : items)
    pointers.push_back(&item);
  return pointers;
}

} // namespace smelt::rt
