// Dataset slicing, seeded epoch orders, batch gathering (rows of dense tensors, or windows of
// a token sequence) and the prefetching stream.
#include "data/Dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

namespace smelt::data {

using namespace rt;

namespace {
/// Bytes of one example of `t` ([N, ...]).
size_t rowBytes(const HostTensor &t) {
  TensorType row{t.type().dtype, {t.type().shape.begin() + 1, t.type().shape.end()}};
  return row.byteSize();
}

HostTensor gatherRows(const HostTensor &t, const int64_t *rows, int64_t count) {
  TensorType type = t.type();
  type.shape[0] = count;
  HostTensor out = HostTensor::zeros(type);
  size_t bytes = rowBytes(t);
  auto *dst = static_cast<uint8_t *>(out.raw());
  const auto *src = static_cast<const uint8_t *>(t.raw());
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(dst + i * bytes, src + rows[i] * bytes, bytes);
  return out;
}

/// Windows `rows` of `w` as examples and labels [count, context], as a dense dataset of them
/// would gather its rows.
Batch gatherWindows(const TokenWindows &w, const int64_t *rows, int64_t count) {
  TensorType type{DType::i32, {count, w.context}};
  Batch out{HostTensor::zeros(type), HostTensor::zeros(type)};
  auto bytes = size_t(w.context) * sizeof(int32_t);
  for (int64_t i = 0; i < count; ++i) {
    const int32_t *start = w.tokens.data() + rows[i] * w.stride;
    std::memcpy(out.examples.data<int32_t>() + i * w.context, start, bytes);
    std::memcpy(out.labels.data<int32_t>() + i * w.context, start + 1, bytes);
  }
  return out;
}
} // namespace

Dataset::Dataset(HostTensor examples, HostTensor labels)
    : examples_(std::move(examples)), labels_(std::move(labels)) {}

Dataset::Dataset(TokenWindows windows) : windows_(std::move(windows)) {}

Expected<Dataset> Dataset::slice(int64_t begin, int64_t end) const {
  // Callers compute the bounds from flags (a validation split, a --limit, a benchmark's batch
  // count): a bad one is an error, never a huge allocation or a read past the examples.
  if (begin < 0 || begin > end || end > size())
    return Status::error(fmt::format("examples [{}, {}) are not a slice of a dataset of {}",
                                     begin, end, size()));
  if (windows_) { // the same tokens from window `begin` on: no copy
    TokenWindows w = *windows_;
    w.tokens = w.tokens.subspan(std::min(size_t(begin * w.stride), w.tokens.size()));
    w.count = end - begin;
    return Dataset(std::move(w));
  }
  std::vector<int64_t> rows(size_t(end - begin));
  std::iota(rows.begin(), rows.end(), begin);
  return Dataset(gatherRows(examples_, rows.data(), end - begin),
                 gatherRows(labels_, rows.data(), end - begin));
}

std::vector<int64_t> Dataset::epochOrder(uint64_t seed, int64_t epoch, bool shuffle) const {
  std::vector<int64_t> order(static_cast<size_t>(size()));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle) {
    // Fisher-Yates with our own draws: std::shuffle's use of the engine is unspecified, and
    // a checkpoint must replay the same order on any standard library.
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + uint64_t(epoch) + 1);
    for (size_t i = order.size(); i > 1; --i)
      std::swap(order[i - 1], order[rng() % i]);
  }
  return order;
}

int64_t Dataset::batchCount(int64_t batchSize, bool dropRemainder) const {
  return dropRemainder ? size() / batchSize : (size() + batchSize - 1) / batchSize;
}

Batch Dataset::batch(const std::vector<int64_t> &order, int64_t batchSize, int64_t index) const {
  int64_t begin = index * batchSize;
  int64_t count = std::min<int64_t>(batchSize, int64_t(order.size()) - begin);
  if (windows_)
    return gatherWindows(*windows_, order.data() + begin, count);
  return {gatherRows(examples_, order.data() + begin, count),
          gatherRows(labels_, order.data() + begin, count)};
}

BatchStream::BatchStream(const Dataset &data, std::vector<int64_t> order, int64_t batchSize,
                         bool dropRemainder, int depth, BatchMap map)
    : data_(data), order_(std::move(order)), batchSize_(batchSize), depth_(std::max(depth, 1)),
      map_(std::move(map)) {
  // Batches of `order`, which may be a shard of the data (a data-parallel replica's share).
  int64_t n = int64_t(order_.size());
  count_ = dropRemainder ? n / batchSize : (n + batchSize - 1) / batchSize;
  refill();
}

void BatchStream::refill() {
  while (int(pending_.size()) < depth_ && issued_ < count_) {
    int64_t index = issued_++;
    pending_.push_back(std::async(std::launch::async, [this, index] {
      Batch b = data_.batch(order_, batchSize_, index);
      if (map_)
        map_(b);
      return b;
    }));
  }
}

std::optional<Batch> BatchStream::next() {
  if (pending_.empty())
    return std::nullopt;
  Batch b = pending_.front().get();
  pending_.pop_front();
  refill();
  return b;
}

} // namespace smelt::data
