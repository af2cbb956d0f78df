// In-memory datasets of examples and labels (dense tensors, or next-token windows viewing one
// token sequence): a seeded shuffle per epoch, batches gathered in that order (with or without
// the remainder), and prefetching on a background thread.
#pragma once

#include "runtime/HostTensor.h"

#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>

namespace smelt::data {

using rt::HostTensor;

struct Batch {
  HostTensor examples; // [batch, ...]
  HostTensor labels;   // [batch]
};

/// `count` windows of `context` tokens over `tokens`, one every `stride`: example i is
/// tokens[i * stride, i * stride + context), its labels (i32, [context]) the same run one token
/// later. The windows are views: a text's ids are held once, not copied into every window
/// (which is `context / stride` copies of them, twice). data::nextTokenWindows checks the
/// counts; the constructor of Dataset takes them as given.
struct TokenWindows {
  std::span<const int32_t> tokens;
  std::shared_ptr<const void> owner; // keeps `tokens` alive and unchanged
  int64_t count = 0, context = 0, stride = 0;
};

class Dataset {
public:
  /// `examples` is [N, ...] of any dtype, `labels` [N].
  Dataset(HostTensor examples, HostTensor labels);
  /// Batches of `windows` are examples [batch, context] and labels [batch, context] (i32).
  explicit Dataset(TokenWindows windows);

  int64_t size() const { return windows_ ? windows_->count : examples_.type().shape[0]; }
  /// Examples [begin, end) as a dataset of their own (a validation split, say); an error
  /// unless 0 <= begin <= end <= size(). A slice of windows views the same tokens.
  rt::Expected<Dataset> slice(int64_t begin, int64_t end) const;
  /// The order of one epoch: a permutation drawn from (seed, epoch) when `shuffle`, so a
  /// resumed run sees the same batches as an uninterrupted one.
  std::vector<int64_t> epochOrder(uint64_t seed, int64_t epoch, bool shuffle) const;
  /// How many batches an epoch has.
  int64_t batchCount(int64_t batchSize, bool dropRemainder) const;
  /// Batch `index` of `order`; the last one is short unless the remainder is dropped.
  Batch batch(const std::vector<int64_t> &order, int64_t batchSize, int64_t index) const;

private:
  HostTensor examples_, labels_;
  std::optional<TokenWindows> windows_; // set instead of examples_ and labels_
};

/// A transformation of a batch (augmentation, normalization), run on the worker threads.
using BatchMap = std::function<void(Batch &)>;

/// Produces the batches of one epoch in order while keeping `depth` of them being gathered
/// (and transformed by `map`) on background threads, so the training step never waits on data
/// it could have had.
class BatchStream {
public:
  BatchStream(const Dataset &data, std::vector<int64_t> order, int64_t batchSize,
              bool dropRemainder, int depth = 2, BatchMap map = {});
  /// The next batch, or nullopt after the last.
  std::optional<Batch> next();
  int64_t batchCount() const { return count_; }

private:
  void refill();
  const Dataset &data_;
  std::vector<int64_t> order_;
  int64_t batchSize_, count_ = 0, issued_ = 0;
  int depth_;
  BatchMap map_;
  std::deque<std::future<Batch>> pending_;
};

} // namespace smelt::data
