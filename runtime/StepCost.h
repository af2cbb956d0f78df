// What one step of an Executable is and what it costs: a name, its kind (kernel, library call,
// copy), where it came from, bytes moved and an estimate of its floating-point operations.
// The profiler puts this in each span's args and `smelt bench` turns it into GB/s, FLOP/s and
// a percentage of the roofline, so both count the same way.
#pragma once

#include "runtime/Executable.h"

#include <cstdint>
#include <map>
#include <string>

namespace smelt::rt {

struct StepCost {
  /// "main_fusion0" for a fused kernel, else the op: "matmul", "copy".
  std::string name;
  /// "kernel" (a fused or single-op kernel Smelt generated), "library" (oneDNN: matmul,
  /// convolutions) or "copy" (between devices).
  std::string kind;
  /// What it computes and where that came from: "broadcast_in_dim+add+relu" for a fusion (its
  /// FusedKernel::ops), the op for anything else; the step's source location.
  std::string ops;
  std::string location;
  /// "f32[16x32], f32[32x8] -> f32[16x8]".
  std::string shapes;
  /// Sum of operand and result bytes: what the step reads and writes at least once.
  double bytes = 0;
  /// matmul 2*M*N*K, convolutions 2*output*KH*KW*C, otherwise about one per element for each
  /// op that computes (shape ops and copies move data and count none).
  double flops = 0;

  /// Args for a trace span: op, kind, shapes, bytes, flops, location.
  std::map<std::string, std::string> traceArgs() const;
};

StepCost stepCost(const Executable &exe, const Step &step);

} // namespace smelt::rt
