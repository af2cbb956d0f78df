// The 6-op elementwise chain the fusion benchmarks time, y = min((max(x * 1.5 + 0.25, 0) * 2) -
// 1, 4) over a 1-D f32 tensor, as a module: fused, it reads and writes each element once, the
// bytes a copy of the tensor moves.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace smelt {

/// The chain as a module: its ops inside one smelt.fusion, or one after another.
inline std::string elementwiseChain(bool fused, int64_t elements) {
  std::string t = fmt::format("tensor<{}xf32>", elements);
  std::string ops;
  const char *constants[][2] = {{"c0", "1.5"}, {"c1", "0.25"}, {"c2", "0.0"},
                                {"c3", "2.0"}, {"c4", "1.0"},  {"c5", "4.0"}};
  for (const auto &[name, value] : constants)
    ops += fmt::format("    %{} = smelt.constant dense<{}> : {}\n", name, value, t);
  ops += fmt::format("    %0 = smelt.mul %a, %c0 : {0}\n    %1 = smelt.add %0, %c1 : {0}\n"
                     "    %2 = smelt.max %1, %c2 : {0}\n    %3 = smelt.mul %2, %c3 : {0}\n"
                     "    %4 = smelt.sub %3, %c4 : {0}\n    %5 = smelt.min %4, %c5 : {0}\n",
                     t);
  if (!fused)
    return fmt::format("func.func @chain(%a: {0}) -> {0} {{\n{1}    return %5 : {0}\n}}\n", t, ops);
  return fmt::format("func.func @chain(%x: {0}) -> {0} {{\n"
                     "  %r = smelt.fusion loop (%x) : ({0}) -> {0} {{\n  ^bb0(%a: {0}):\n{1}"
                     "    smelt.yield %5 : {0}\n  }}\n  return %r : {0}\n}}\n",
                     t, ops);
}

} // namespace smelt
