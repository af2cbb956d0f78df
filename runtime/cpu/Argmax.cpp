// argmax: the index of the largest element along one axis, the first among ties; a NaN counts
// as the largest (the first NaN wins), as NumPy's argmax does.
#include "runtime/DTypeDispatch.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>

namespace smelt::rt::cpu {

Expected<Kernel> prepareArgmax(const Step &step, const StepTypes &types) {
  int64_t axis = std::get<ArgmaxParams>(step.params).axis;
  const TensorType &in = types.operands[0];
  if (axis < 0 || axis >= int64_t(in.shape.size()) || in.shape[axis] == 0 ||
      types.result.dtype != DType::i64 ||
      types.result.numElements() * in.shape[axis] != in.numElements())
    return Status::error(fmt::format("{}: result {} is not the argmax of {} along axis {}",
                                     describe(step), types.result.str(), in.str(), axis));
  int64_t outer = 1, inner = 1, size = in.shape[axis];
  for (int64_t i = 0; i < axis; ++i)
    outer *= in.shape[i];
  for (size_t i = size_t(axis) + 1; i < in.shape.size(); ++i)
    inner *= in.shape[i];
  return visitDType(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Kernel([=](const void *const *inputs, void *result) {
      const T *x = static_cast<const T *>(inputs[0]);
      int64_t *y = static_cast<int64_t *>(result);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) {
          const T *row = x + o * size * inner + j;
          auto best = toCompute(row[0]);
          int64_t bestIndex = 0;
          for (int64_t k = 1; k < size && best == best; ++k) {
            auto v = toCompute(row[k * inner]);
            if (v > best || v != v) { // the first NaN wins and ends the search
              best = v;
              bestIndex = k;
            }
          }
          y[o * inner + j] = bestIndex;
        }
    });
  });
}

} // namespace smelt::rt::cpu
