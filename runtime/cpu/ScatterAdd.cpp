// scatter_add (the gradient of gather): zeros, then each row of `updates` added into the result
// row its index names, clamped into [0, rows). Deterministic: every result element receives its
// additions in index order from one thread, so the bits are the same on any thread count.
// Threads own ranges of the columns (the product of the trailing dimensions) and each walks
// every index, which balances whatever the indices are. f16 and bf16 sums are kept in f32 and
// rounded once at the end, so small gradients added to a large one are not lost in each step.
#include "runtime/DTypeDispatch.h"
#include "runtime/Parallel.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace smelt::rt::cpu {

namespace {

/// The sizes a scatter_add step works in: `count` updates of `columns` elements each, added
/// into `rows` result rows.
struct ScatterShape {
  int64_t count = 1, columns = 1, rows = 0;
};

Expected<ScatterShape> scatterShape(const Step &step, const StepTypes &types) {
  const TensorType &updates = types.operands[0], &indices = types.operands[1],
                   &result = types.result;
  size_t batchRank = indices.shape.size();
  bool fits = isFloat(updates.dtype) && result.dtype == updates.dtype &&
              (indices.dtype == DType::i32 || indices.dtype == DType::i64) &&
              updates.shape.size() >= batchRank && !result.shape.empty() &&
              result.shape[0] >= 1 &&
              std::equal(indices.shape.begin(), indices.shape.end(), updates.shape.begin()) &&
              std::equal(result.shape.begin() + 1, result.shape.end(),
                         updates.shape.begin() + batchRank, updates.shape.end());
  if (!fits)
    return Status::error(fmt::format("{}: result {} is not a scatter_add of updates {} at "
                                     "indices {}",
                                     describe(step), result.str(), updates.str(), indices.str()));
  ScatterShape shape;
  shape.count = indices.numElements();
  shape.rows = result.shape[0];
  shape.columns = result.numElements() / shape.rows;
  return shape;
}

/// Result rows of the updates, each index clamped into [0, rows).
template <typename Index>
std::vector<int64_t> clampedRows(const Index *indices, const ScatterShape &s) {
  std::vector<int64_t> rows(size_t(s.count));
  for (int64_t b = 0; b < s.count; ++b)
    rows[size_t(b)] = std::clamp<int64_t>(int64_t(indices[b]), 0, s.rows - 1);
  return rows;
}

/// Adds the updates into columns [c0, c1) of `sums` (rows x width, zeroed here), `width`
/// being c1 - c0 or all columns.
template <typename T, typename Sum>
void scatterColumns(const T *updates, const std::vector<int64_t> &rows, const ScatterShape &s,
                    int64_t c0, int64_t c1, Sum *sums, int64_t width, int64_t sumColumn0) {
  for (int64_t r = 0; r < s.rows; ++r)
    std::fill(sums + r * width + (c0 - sumColumn0), sums + r * width + (c1 - sumColumn0), Sum(0));
  for (int64_t b = 0; b < s.count; ++b) {
    const T *update = updates + b * s.columns;
    Sum *sum = sums + rows[size_t(b)] * width;
    for (int64_t c = c0; c < c1; ++c)
      sum[c - sumColumn0] += Sum(toCompute(update[c]));
  }
}

} // namespace

Expected<Kernel> prepareScatterAdd(const Step &step, const StepTypes &types) {
  SMELT_ASSIGN_OR_RETURN(ScatterShape s, scatterShape(step, types));
  DType indexType = types.operands[1].dtype;
  return visitDType(types.result.dtype, [&](auto tag) -> Expected<Kernel> {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) { // scatterShape refused it already; no kernel is made for it
      return Status::error(fmt::format("{}: scatter_add takes floats", describe(step)));
    } else {
      return Kernel([s, indexType](const void *const *operands, void *result) {
        const T *updates = static_cast<const T *>(operands[0]);
        std::vector<int64_t> rows =
            indexType == DType::i32 ? clampedRows(static_cast<const int32_t *>(operands[1]), s)
                                    : clampedRows(static_cast<const int64_t *>(operands[1]), s);
        T *out = static_cast<T *>(result);
        parallelFor(s.columns, [&](int64_t c0, int64_t c1) {
          if constexpr (std::is_same_v<Compute<T>, T>) {
            scatterColumns(updates, rows, s, c0, c1, out, s.columns, 0);
          } else { // f16, bf16: sum this range in f32, round once
            int64_t width = c1 - c0;
            std::vector<float> sums(size_t(s.rows * width));
            scatterColumns(updates, rows, s, c0, c1, sums.data(), width, c0);
            for (int64_t r = 0; r < s.rows; ++r)
              for (int64_t c = c0; c < c1; ++c)
                out[r * s.columns + c] = fromCompute<T>(sums[size_t(r * width + c - c0)]);
          }
        });
      });
    }
  });
}

} // namespace smelt::rt::cpu
