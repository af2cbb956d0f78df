// Two fused-kernel stand-ins with the rt::CpuKernelFn signature, built as a shared library:
// ArtifactTest puts its bytes in an artifact as the CPU code and runs them via loadCpuObject.
#include <cstdint>

/// A loop kernel of two inputs and two results over f32: sum = a + b, product = a * b.
extern "C" void smelt_test_add_mul(void *const *args, int64_t begin, int64_t end) {
  const float *a = static_cast<const float *>(args[0]), *b = static_cast<const float *>(args[1]);
  float *sum = static_cast<float *>(args[2]), *product = static_cast<float *>(args[3]);
  for (int64_t i = begin; i < end; ++i) {
    sum[i] = a[i] + b[i];
    product[i] = a[i] * b[i];
  }
}

/// A loop kernel of one input and one result over f32: y = x * x.
extern "C" void smelt_test_square(void *const *args, int64_t begin, int64_t end) {
  const float *x = static_cast<const float *>(args[0]);
  float *y = static_cast<float *>(args[1]);
  for (int64_t i = begin; i < end; ++i)
    y[i] = x[i] * x[i];
}
