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

/// Called through a table of libm functions, so the library has what real kernel libraries
/// may have and the ELF checks must accept and can be tested on: a needed libm with symbol
/// versions, GOT or PLT relocations against it, and a relative relocation for the table.
using UnaryFn = float (*)(float);
extern "C" float expf(float);
extern "C" float tanhf(float);
static UnaryFn const kUnary[] = {expf, tanhf};

/// y = unary[which](x) for a loop kernel of one f32 input and one result.
extern "C" void smelt_test_unary(void *const *args, int64_t begin, int64_t end) {
  const float *x = static_cast<const float *>(args[0]);
  float *y = static_cast<float *>(args[1]);
  UnaryFn f = kUnary[begin & 1];
  for (int64_t i = begin; i < end; ++i)
    y[i] = f(x[i]);
}
