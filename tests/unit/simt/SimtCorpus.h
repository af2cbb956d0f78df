// The kernels of the emulated corpus: the table that SimtCorpusGen writes, after the rendered
// CUDA source, into the generated translation unit (simt_corpus.cpp in the build tree). Each
// entry names a kernel, the corpus .mlir function whose fusion it renders, the launch the
// renderer chose and the buffers it takes, and calls the kernel on untyped pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace smelt::simt {

struct CorpusArg {
  const char *dtype; // "f32", "bf16", "i1" ...
  int64_t elements;
};

struct CorpusKernel {
  const char *function; // the corpus .mlir function holding the fusion, one of several
  const char *name;     // "<function>_fusion<N>", as buildExecutable names the CPU's kernel
  unsigned grid, block;
  size_t inputs;               // args[0, inputs) are read, the rest written
  std::vector<CorpusArg> args; // the fusion's inputs, then its results
  int parameters;              // how many the compiled kernel takes: args.size(), or stale
  void (*call)(void *const *args);
};

/// The table, in the order of the corpus .mlir's functions and of their fusions.
const std::vector<CorpusKernel> &corpus();

template <typename... P> constexpr int parameterCount(void (*)(P...)) { return sizeof...(P); }

template <typename... P, size_t... I>
void callKernel(void (*kernel)(P...), void *const *args, std::index_sequence<I...>) {
  kernel(static_cast<P>(args[I])...);
}
/// Kernel(args[0], args[1], ...), each pointer cast to its parameter's type.
template <auto Kernel> void callKernel(void *const *args) {
  callKernel(Kernel, args, std::make_index_sequence<parameterCount(Kernel)>());
}

} // namespace smelt::simt
