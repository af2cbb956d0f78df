// Helpers of the SIMT emulator's tests: device-like buffers and kernel launches on them. Each
// buffer is exactly as large as its tensor (a GPU allocation rounds up to 256 bytes, which
// hides a vector access one past the end; the sanitized build catches it here) and 16-byte
// aligned as cuMemAlloc's are; outside sanitized builds a guard follows it that a write past
// the end disturbs. Results start as a byte pattern that differs between the two fiber
// orders, so an element no thread writes shows.
#pragma once

#include "Simt.h"
#include "SimtCorpus.h"

#include "runtime/HostTensor.h"

#include <string>
#include <vector>

namespace smelt::simt::test {

class Buffer {
public:
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  void *data() { return data_; }
  size_t bytes() const { return bytes_; }
  /// "" or how many guard bytes a write past the end changed.
  std::string guardDamage() const;

private:
  unsigned char *data_;
  size_t bytes_;
};

/// What a launch gave: the emulator's error (or a guard's damage), else every result.
struct Emulated {
  std::string error;
  std::vector<rt::HostTensor> results;
};

/// Launches `call` (a kernel taking `inputs` then results of `resultTypes`, in that order) on
/// copies of `inputs` in fresh buffers; `call` gets the argument pointers.
Emulated emulate(unsigned grid, unsigned block, Order order,
                 const std::vector<rt::HostTensor> &inputs,
                 const std::vector<rt::TensorType> &resultTypes,
                 const std::function<void(void *const *args)> &call);
/// The same for a kernel of the corpus, its results typed by the table (one dimension each).
Emulated emulate(const CorpusKernel &kernel, const std::vector<rt::HostTensor> &inputs,
                 Order order);

/// The functions of the corpus module that the table's kernels come from, in its order.
std::vector<std::string> corpusFunctions();
/// The table's argument as a tensor type: `elements` long, one dimension.
rt::TensorType argType(const CorpusArg &arg);
/// "" when both hold the same bytes, else where the first difference is.
std::string firstDifference(const rt::HostTensor &a, const rt::HostTensor &b);
const char *orderName(Order order);

} // namespace smelt::simt::test
