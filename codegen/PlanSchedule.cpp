// The compile-time schedule (PlanSchedule.h): the device cut, then liveness per segment.
#include "codegen/PlanSchedule.h"

#include <algorithm>
#include <set>

namespace smelt::codegen {

namespace {

using rt::BufferId;

/// Cuts the steps into segments: a new one wherever a step that is not a copy runs on another
/// device than the one before it. Copies stay inside the ranges, where the executor passes
/// their values between segments.
void cutByDevice(rt::Executable &exe) {
  for (size_t s = 0; s < exe.steps.size(); ++s) {
    const rt::Step &step = exe.steps[s];
    if (rt::isCopyStep(step) ||
        (!exe.segments.empty() && exe.segments.back().device == step.device))
      continue;
    if (!exe.segments.empty())
      exe.segments.back().end = uint32_t(s);
    rt::Segment &segment = exe.segments.emplace_back();
    segment.device = step.device;
    segment.begin = exe.segments.size() == 1 ? 0 : uint32_t(s);
  }
  if (!exe.segments.empty())
    exe.segments.back().end = uint32_t(exe.steps.size());
}

/// Each segment's reads (values it uses before computing them, constants aside: the segment
/// holds its own) and writes (values it computes that a later segment or the caller uses).
void linkSegments(rt::Executable &exe, const std::vector<BufferId> &value) {
  std::vector<char> constant(exe.buffers.size(), 0);
  for (const rt::Constant &c : exe.constants)
    constant[c.buffer] = 1;
  std::vector<std::vector<BufferId>> produced(exe.segments.size());
  std::set<BufferId> wanted;
  for (size_t k = 0; k < exe.segments.size(); ++k) {
    rt::Segment &segment = exe.segments[k];
    std::set<BufferId> known;
    for (size_t s = segment.begin; s < segment.end; ++s) {
      const rt::Step &step = exe.steps[s];
      if (rt::isCopyStep(step))
        continue;
      for (BufferId operand : step.operands) {
        BufferId v = value[operand];
        if (!constant[v] && known.insert(v).second) {
          segment.reads.push_back(v);
          wanted.insert(v);
        }
      }
      for (BufferId result : step.results) {
        known.insert(result);
        produced[k].push_back(result);
      }
    }
  }
  for (BufferId output : exe.outputs)
    wanted.insert(value[output]);
  for (size_t k = 0; k < exe.segments.size(); ++k)
    for (BufferId v : produced[k])
      if (wanted.count(v))
        exe.segments[k].writes.push_back(v);
}

/// Per segment, each value is given back after the last of its steps that uses it, unless the
/// segment hands it on or the caller gets it; constants stay. An all_reduce's operands and results
/// live to the end of the segment: the reduction runs on until the executor waits for it, which may
/// be several steps later.
void planFrees(rt::Executable &exe, const std::vector<BufferId> &value) {
  std::vector<char> kept(exe.buffers.size(), 0);
  for (BufferId output : exe.outputs)
    kept[value[output]] = 1;
  for (const rt::Constant &c : exe.constants)
    kept[c.buffer] = 1;
  constexpr size_t kNever = size_t(-1);
  for (rt::Step &step : exe.steps)
    step.frees.clear();
  for (const rt::Segment &segment : exe.segments) {
    std::vector<size_t> lastUse(exe.buffers.size(), kNever);
    std::vector<char> pinned(kept);
    for (BufferId v : segment.writes)
      pinned[v] = 1;
    for (size_t s = segment.begin; s < segment.end; ++s) {
      const rt::Step &step = exe.steps[s];
      if (rt::isCopyStep(step))
        continue;
      bool collective = step.op == rt::StepOp::AllReduce;
      auto use = [&](BufferId v) {
        lastUse[v] = s;
        pinned[v] |= collective;
      };
      for (BufferId operand : step.operands)
        use(value[operand]);
      for (BufferId result : step.results)
        use(result);
    }
    for (size_t v = 0; v < exe.buffers.size(); ++v)
      if (lastUse[v] != kNever && !pinned[v])
        exe.steps[lastUse[v]].frees.push_back(BufferId(v));
  }
}

} // namespace

void planSchedule(rt::Executable &exe) {
  exe.segments.clear();
  std::vector<BufferId> value = rt::copiedValues(exe);
  cutByDevice(exe);
  linkSegments(exe, value);
  planFrees(exe, value);
}

} // namespace smelt::codegen
