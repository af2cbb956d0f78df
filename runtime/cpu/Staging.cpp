// Staging of kernels through scratch buffers of another float dtype.
#include "runtime/cpu/Staging.h"

#include "runtime/DTypeDispatch.h"

namespace smelt::rt::cpu {

namespace {
void convertBuffer(const void *src, DType from, void *dst, DType to, int64_t n) {
  visitDType(from, [&](auto f) {
    using S = typename decltype(f)::type;
    visitDType(to, [&](auto t) {
      using D = typename decltype(t)::type;
      const S *x = static_cast<const S *>(src);
      D *y = static_cast<D *>(dst);
      for (int64_t i = 0; i < n; ++i)
        y[i] = fromCompute<D>(toCompute(x[i]));
    });
  });
}
} // namespace

Kernel stagedThrough(DType staging, Kernel kernel, const StepTypes &types) {
  bool same = types.result.dtype == staging;
  for (const TensorType &t : types.operands)
    same = same && t.dtype == staging;
  if (same)
    return kernel;
  size_t width = byteWidth(staging);
  return [kernel, types, staging, width](const void *const *in, void *out) {
    std::vector<std::vector<uint8_t>> scratch;
    std::vector<const void *> converted;
    for (size_t i = 0; i < types.operands.size(); ++i) {
      int64_t n = types.operands[i].numElements();
      scratch.emplace_back(size_t(n) * width);
      convertBuffer(in[i], types.operands[i].dtype, scratch.back().data(), staging, n);
      converted.push_back(scratch.back().data());
    }
    int64_t n = types.result.numElements();
    std::vector<uint8_t> result(size_t(n) * width);
    kernel(converted.data(), result.data());
    convertBuffer(result.data(), staging, out, types.result.dtype, n);
  };
}

} // namespace smelt::rt::cpu
