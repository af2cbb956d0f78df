// Data movement outside kernels: slice, concat, pad and copy, library calls each made of strided
// box copies (copyBox) with the right strides and offsets.
#include "runtime/DTypeDispatch.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

namespace smelt::rt::cpu {

namespace {

/// Row-major strides of `shape`, in bytes of `width`-byte elements.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape, size_t width) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = int64_t(width);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

template <typename T>
void copyRow(uint8_t *dst, int64_t dstStride, const uint8_t *src, int64_t srcStride, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * dstStride, src + i * srcStride, sizeof(T));
}

/// Copies the box `dims` from `src` to `dst`, both walked with byte strides; a stride of 0
/// repeats (broadcast). Contiguous rows become one memcpy.
void copyBox(uint8_t *dst, const int64_t *dstStrides, const uint8_t *src,
             const int64_t *srcStrides, const int64_t *dims, size_t rank, size_t width) {
  if (rank == 0) {
    std::memcpy(dst, src, width);
    return;
  }
  if (rank > 1) {
    for (int64_t i = 0; i < dims[0]; ++i)
      copyBox(dst + i * dstStrides[0], dstStrides + 1, src + i * srcStrides[0], srcStrides + 1,
              dims + 1, rank - 1, width);
    return;
  }
  int64_t n = dims[0], ds = dstStrides[0], ss = srcStrides[0];
  if (ds == int64_t(width) && ss == int64_t(width))
    std::memcpy(dst, src, size_t(n) * width);
  else if (width == 8)
    copyRow<uint64_t>(dst, ds, src, ss, n);
  else if (width == 4)
    copyRow<uint32_t>(dst, ds, src, ss, n);
  else if (width == 2)
    copyRow<uint16_t>(dst, ds, src, ss, n);
  else
    copyRow<uint8_t>(dst, ds, src, ss, n);
}

/// A kernel copying the box `dims` from operand `operand` (+ `srcOffset` bytes) into the result
/// (+ `dstOffset`).
Kernel boxKernel(std::vector<int64_t> dims, std::vector<int64_t> dstStrides, int64_t dstOffset,
                 std::vector<int64_t> srcStrides, int64_t srcOffset, size_t width,
                 size_t operand = 0) {
  return [=](const void *const *in, void *out) {
    copyBox(static_cast<uint8_t *>(out) + dstOffset, dstStrides.data(),
            static_cast<const uint8_t *>(in[operand]) + srcOffset, srcStrides.data(), dims.data(),
            dims.size(), width);
  };
}

Status mismatch(const Step &step, const StepTypes &types, const std::string &why) {
  std::vector<std::string> operands;
  for (const TensorType &t : types.operands)
    operands.push_back(t.str());
  return Status::error(fmt::format("{}: operands ({}) and result {} do not fit: {}",
                                   describe(step), fmt::join(operands, ", "),
                                   types.result.str(), why));
}

Expected<Kernel> slice(const Step &step, const StepTypes &types) {
  const SliceParams &params = std::get<SliceParams>(step.params);
  const TensorType &in = types.operands[0], &out = types.result;
  size_t rank = in.shape.size();
  const std::vector<int64_t> &start = params.start, &limit = params.limit,
                             &step_ = params.strides;
  size_t width = byteWidth(in.dtype);
  std::vector<int64_t> inStrides = stridesOf(in.shape, width), srcStrides;
  int64_t offset = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > in.shape[i] || step_[i] < 1 ||
        out.shape[i] != (limit[i] - start[i] + step_[i] - 1) / step_[i])
      return mismatch(step, types, fmt::format("range {}:{}:{} of dimension {}", start[i],
                                               limit[i], step_[i], i));
    offset += start[i] * inStrides[i];
    srcStrides.push_back(inStrides[i] * step_[i]);
  }
  return boxKernel(out.shape, stridesOf(out.shape, width), 0, srcStrides, offset, width);
}

Expected<Kernel> concat(const Step &step, const StepTypes &types) {
  int64_t dim = std::get<AxisParams>(step.params).axis;
  if (dim < 0 || dim >= int64_t(types.result.shape.size()))
    return mismatch(step, types, fmt::format("dimension {}", dim));
  const TensorType &out = types.result;
  size_t width = byteWidth(out.dtype);
  std::vector<int64_t> outStrides = stridesOf(out.shape, width);
  std::vector<Kernel> parts;
  int64_t along = 0;
  for (size_t k = 0; k < types.operands.size(); ++k) {
    const TensorType &in = types.operands[k];
    // Every operand must fit the result but along `dimension`, or its box would overrun it.
    for (size_t i = 0; i < out.shape.size(); ++i)
      if (in.shape.size() != out.shape.size() ||
          (int64_t(i) != dim && in.shape[i] != out.shape[i]))
        return mismatch(step, types, fmt::format("operand #{} differs from the result outside "
                                                 "dimension {}",
                                                 k, dim));
    parts.push_back(boxKernel(in.shape, outStrides, along * outStrides[dim],
                              stridesOf(in.shape, width), 0, width, k));
    along += in.shape[dim];
  }
  if (along != out.shape[dim])
    return mismatch(step, types, "sizes along the dimension do not add up");
  return Kernel([parts](const void *const *in, void *out) {
    for (const Kernel &part : parts)
      part(in, out);
  });
}

Expected<Kernel> pad(const Step &step, const StepTypes &types) {
  const PadParams &params = std::get<PadParams>(step.params);
  const TensorType &in = types.operands[0], &out = types.result;
  size_t rank = in.shape.size();
  const std::vector<int64_t> &low = params.low, &high = params.high;
  double value = params.value;
  size_t width = byteWidth(in.dtype);
  std::vector<int64_t> outStrides = stridesOf(out.shape, width);
  int64_t offset = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (low[i] < 0 || high[i] < 0 || out.shape[i] != in.shape[i] + low[i] + high[i])
      return mismatch(step, types, fmt::format("low {} high {} in dimension {}", low[i],
                                               high[i], i));
    offset += low[i] * outStrides[i];
  }
  // The padding value, stored once in the dtype, then repeated over the result.
  uint8_t fill[8];
  visitDType(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = fromCompute<T>(value);
    std::memcpy(fill, &v, sizeof(T));
  });
  std::vector<int64_t> fillStrides(rank, 0);
  std::vector<uint8_t> pattern(fill, fill + width);
  Kernel inner = boxKernel(in.shape, outStrides, offset, stridesOf(in.shape, width), 0, width);
  std::vector<int64_t> outShape = out.shape;
  return Kernel([=](const void *const *in, void *out) {
    const void *patternPtr[] = {pattern.data()};
    boxKernel(outShape, outStrides, 0, fillStrides, 0, width)(patternPtr, out);
    inner(in, out);
  });
}

} // namespace

Expected<Kernel> prepareDataMovement(const Step &step, const StepTypes &types) {
  // The operand count is the family's check (StepOps.cpp), made first.
  for (const TensorType &t : types.operands)
    if (t.dtype != types.result.dtype)
      return mismatch(step, types, "element types differ");
  // A copy between devices is a plain copy when both are this host.
  if (step.op == StepOp::Copy) {
    if (types.operands[0] != types.result)
      return mismatch(step, types, "types differ");
    size_t bytes = types.result.byteSize();
    return Kernel([bytes](const void *const *in, void *out) { std::memcpy(out, in[0], bytes); });
  }
  if (types.operands[0].shape.size() != types.result.shape.size())
    return mismatch(step, types, "ranks differ");
  if (step.op == StepOp::Slice)
    return slice(step, types);
  if (step.op == StepOp::Concat)
    return concat(step, types);
  return pad(step, types);
}

} // namespace smelt::rt::cpu
