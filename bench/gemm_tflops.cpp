// Square GEMMs (N = 1024 .. 8192) through a CublasLt plan (runtime/cuda/CublasLt.h) in f32,
// TF32, f16 and bf16: the median over timed samples of TFLOP/s (2 N^3 flops per matmul), and
// the fraction of the device's dense peak where it is known (H100 SXM). A sample is a burst of
// back-to-back matmuls on the device's stream timed with a steady clock from the first launch
// to the stream's synchronize, long enough (~50 ms at peak) that launch gaps and the clock
// hardly count. Inputs are random in [-1, 1] (zeros would flatter the clocks).
//   ninja -C build smelt-bench-gemm && build/bin/smelt-bench-gemm
// Without a GPU (or cuBLASLt) it prints why and exits 77, the skip code. Numbers belong in
// bench/RESULTS.md with the device name.
#include "runtime/Half.h"
#include "runtime/cuda/CublasLt.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace smelt::rt;
using namespace smelt::rt::cuda;

constexpr int kSkip = 77;
constexpr int64_t kMaxSize = 8192;
constexpr int kSamples = 7;

struct Mode {
  const char *name;
  DType dtype;
  bool tf32;
  double h100Peak; // dense TFLOP/s of an H100 SXM
};
const Mode kModes[] = {{"f32", DType::f32, false, 67},
                       {"tf32", DType::f32, true, 494.7},
                       {"f16", DType::f16, false, 989.4},
                       {"bf16", DType::bf16, false, 989.4}};

/// The dense peak of `mode` on `device`, where known: only the H100 SXM table is kept (the
/// PCIe and NVL parts have other clocks and SM counts).
std::optional<double> peakOf(const Mode &mode, const std::string &device) {
  bool h100Sxm = device.find("H100") != std::string::npos &&
                 device.find("PCIe") == std::string::npos &&
                 device.find("NVL") == std::string::npos;
  return h100Sxm ? std::optional<double>(mode.h100Peak) : std::nullopt;
}

/// Device memory for the run; the process exits soon after, so it is not freed.
Expected<void *> allocate(const CudaDevice &gpu, size_t bytes) {
  CUdeviceptr pointer = 0;
  if (Status s = gpu.check(gpu.driver().memAlloc(&pointer, bytes), "cuMemAlloc"); !s.ok())
    return s;
  return reinterpret_cast<void *>(pointer);
}

/// `count` values uniform in [-1, 1] in `dtype`'s storage, uploaded to `target`.
Status fillRandom(const CudaDevice &gpu, void *target, int64_t count, DType dtype) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<uint8_t> host(size_t(count) * byteWidth(dtype));
  for (int64_t i = 0; i < count; ++i) {
    float x = uniform(rng);
    if (dtype == DType::f16)
      reinterpret_cast<Half *>(host.data())[i] = Half(x);
    else if (dtype == DType::bf16)
      reinterpret_cast<BFloat16 *>(host.data())[i] = BFloat16(x);
    else
      reinterpret_cast<float *>(host.data())[i] = x;
  }
  return gpu.check(gpu.driver().memcpyHtoD(devicePointer(target),
                                           host.data(), host.size()),
                   "cuMemcpyHtoD");
}

struct Buffers {
  void *lhs, *rhs, *result, *workspace;
};

/// Seconds per matmul of `size`: the median over kSamples bursts.
Expected<double> timeGemm(const CudaDevice &gpu, CublasLt &blas, const Mode &mode, int64_t size,
                          const Buffers &b) {
  MatmulCall call;
  call.dtype = mode.dtype;
  call.m = call.n = call.k = size;
  call.allowTf32 = mode.tf32;
  std::string what = fmt::format("gemm {} {}", mode.name, size);
  // The algorithm is picked here; warm-up runs settle the clocks.
  Expected<std::shared_ptr<const CublasLt::Plan>> plan =
      blas.prepare(call, {}, CublasLt::kWorkspaceBytes, what);
  if (!plan)
    return plan.status();
  auto launch = [&] { return (*plan)->run(b.lhs, b.rhs, nullptr, b.result, b.workspace); };
  for (int i = 0; i < 3; ++i)
    if (Status s = launch(); !s.ok())
      return s;
  if (Status s = gpu.synchronize(what); !s.ok())
    return s;
  double flops = 2.0 * double(size) * double(size) * double(size);
  int burst = int(std::clamp(mode.h100Peak * 1e12 * 0.05 / flops, 3.0, 5000.0));
  std::vector<double> perMatmul;
  for (int sample = 0; sample < kSamples; ++sample) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < burst; ++i)
      if (Status s = launch(); !s.ok())
        return s;
    if (Status s = gpu.synchronize(what); !s.ok())
      return s;
    std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    perMatmul.push_back(seconds.count() / burst);
  }
  std::nth_element(perMatmul.begin(), perMatmul.begin() + kSamples / 2, perMatmul.end());
  return perMatmul[kSamples / 2];
}

} // namespace

int main() {
  Expected<std::shared_ptr<CudaDevice>> opened = CudaDevice::open(0);
  if (!opened.ok()) {
    std::fprintf(stderr, "smelt-bench-gemm: skipped: %s\n", opened.message().c_str());
    return kSkip;
  }
  const CudaDevice &gpu = **opened;
  Expected<CublasLt *> blas = CublasLt::get(gpu);
  if (!blas.ok()) {
    std::fprintf(stderr, "smelt-bench-gemm: skipped: %s\n", blas.message().c_str());
    return kSkip;
  }

  // One set of buffers, sized for the largest f32 problem, shared by every mode and size.
  size_t bytes = size_t(kMaxSize * kMaxSize) * 4;
  Buffers b{};
  for (auto [slot, size] : {std::pair{&b.lhs, bytes}, {&b.rhs, bytes}, {&b.result, bytes},
                            {&b.workspace, CublasLt::kWorkspaceBytes}}) {
    Expected<void *> memory = allocate(gpu, size);
    if (!memory.ok()) {
      std::fprintf(stderr, "smelt-bench-gemm: %s\n", memory.message().c_str());
      return 1;
    }
    *slot = *memory;
  }

  fmt::print("{} ({}), cuBLASLt {}, median of {} samples\n", gpu.name(), gpu.arch(),
             (*blas)->version(), kSamples);
  fmt::print("{:<5} {:>6} {:>10} {:>9} {:>8}\n", "mode", "N", "ms", "TFLOP/s", "of peak");
  for (const Mode &mode : kModes) {
    for (void *operand : {b.lhs, b.rhs})
      if (Status s = fillRandom(gpu, operand, kMaxSize * kMaxSize, mode.dtype); !s.ok()) {
        std::fprintf(stderr, "smelt-bench-gemm: %s\n", s.message().c_str());
        return 1;
      }
    std::optional<double> peak = peakOf(mode, gpu.name());
    for (int64_t size = 1024; size <= kMaxSize; size *= 2) {
      Expected<double> seconds = timeGemm(gpu, **blas, mode, size, b);
      if (!seconds.ok()) {
        std::fprintf(stderr, "smelt-bench-gemm: %s\n", seconds.message().c_str());
        return 1;
      }
      double tflops = 2.0 * double(size) * double(size) * double(size) / *seconds / 1e12;
      fmt::print("{:<5} {:>6} {:>10.3f} {:>9.1f} {:>8}\n", mode.name, size, *seconds * 1e3, tflops,
                 peak ? fmt::format("{:.0f}%", 100 * tflops / *peak) : "peak unknown");
    }
  }
  return 0;
}
