// The GPU executor's CUDA graphs: a run's steps queued as one cuGraphLaunch instead of one call
// each (XLA's command buffers, PyTorch's CUDA graphs). A graph fixes every kernel argument,
// so it is keyed by the run's bindings, the address of every buffer of every step: a run whose
// bindings equal a captured graph's replays it; another is captured (stream capture of the
// same launches, which records and runs nothing) and then launched. A training loop that
// donates its state back alternates between two sets of blocks, so a few graphs cover it.
// The first run of an executor queues its steps one by one: libraries initialize and the
// allocator grows there, outside any capture. A step the driver cannot capture (a library call
// that synchronizes) turns graphs off for the executor, whose runs then go on step by step.
#include "runtime/cuda/GpuExecutor.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

namespace smelt::rt::cuda {

namespace {
/// Graphs kept per executor: two serve a loop that swaps its state with the outputs, the rest
/// what else alternates.
constexpr size_t kMaxGraphs = 4;
/// Captures after which an executor whose runs never replay one stops capturing: its buffers
/// move every run, and capture costs more than it saves.
constexpr int64_t kCapturesWithoutReplay = 8;
} // namespace

struct GpuExecutor::Graphs {
  std::shared_ptr<CudaDevice> device;
  struct Captured {
    std::vector<void *> bindings;
    CUgraphExec exec = nullptr;
  };
  std::deque<Captured> graphs; // the newest last
  GraphStats stats;

  void drop(Captured &captured) {
    if (device->makeCurrent().ok())
      device->driver().graphExecDestroy(captured.exec);
  }
  ~Graphs() {
    for (Captured &captured : graphs)
      drop(captured);
  }
};

std::shared_ptr<GpuExecutor::Graphs> GpuExecutor::makeGraphs(std::shared_ptr<CudaDevice> device,
                                                             const Executable &exe, bool wanted) {
  auto graphs = std::make_shared<Graphs>();
  graphs->device = std::move(device);
  auto collective = std::find_if(exe.steps.begin(), exe.steps.end(), [](const Step &step) {
    return step.kind() == StepKind::Collective;
  });
  if (!wanted)
    graphs->stats.off = "CUDA graphs are off (--cuda-graphs=false)";
  else if (exe.steps.empty())
    graphs->stats.off = "no steps";
  else if (collective != exe.steps.end())
    graphs->stats.off = fmt::format("its {} step ({}) runs on a communicator that can change "
                                    "between runs",
                                    collective->name(), collective->location);
  return graphs;
}

GpuExecutor::GraphStats GpuExecutor::graphStats() const {
  return graphs_ ? graphs_->stats : GraphStats{};
}

bool GpuExecutor::graphRun() const { return graphs_ && graphs_->stats.off.empty() && runs_ > 0; }

Status GpuExecutor::launchStep(size_t s) {
  Status status = launches_[s](bindings_.data() + stepBindings_[s]);
  if (status.ok())
    countTransfers({.stepLaunches = 1});
  return status;
}

Status GpuExecutor::launchEach() {
  for (size_t s = 0; s < launches_.size(); ++s)
    if (Status status = launchStep(s); !status.ok())
      return status;
  return Status();
}

Status GpuExecutor::launchAsGraph() {
  Graphs &g = *graphs_;
  const CudaDriver &cu = device_->driver();
  CUstream stream = device_->stream();
  auto launch = [&](CUgraphExec exec) {
    Status status = device_->check(cu.graphLaunch(exec, stream), "cuGraphLaunch");
    if (status.ok())
      countTransfers({.graphLaunches = 1});
    return status;
  };
  for (Graphs::Captured &captured : g.graphs)
    if (captured.bindings == bindings_) {
      ++g.stats.replayed;
      return launch(captured.exec);
    }

  // Capture: the launches are recorded, not run. Thread-local mode: other threads' calls
  // (another replica's allocations) do not break it.
  auto stepByStep = [&](const std::string &why) {
    g.stats.off = "capture failed: " + why;
    return launchEach();
  };
  if (Status s = device_->check(cu.streamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                                "cuStreamBeginCapture");
      !s.ok())
    return stepByStep(s.message());
  Status launched;
  for (size_t s = 0; s < launches_.size() && launched.ok(); ++s)
    launched = launches_[s](bindings_.data() + stepBindings_[s]);
  CUgraph graph = nullptr;
  Status ended = device_->check(cu.streamEndCapture(stream, &graph), "cuStreamEndCapture");
  if (!ended.ok()) // a step the driver could not capture: its own error, if any, says which
    return stepByStep(launched.ok() ? ended.message() : launched.message());
  CUgraphExec exec = nullptr;
  Status instantiated =
      launched.ok() ? device_->check(cu.graphInstantiate(&exec, graph, 0), "cuGraphInstantiate")
                    : launched;
  cu.graphDestroy(graph);
  if (!launched.ok()) // refused by its library as it would be outside a capture
    return launched;
  if (!instantiated.ok())
    return stepByStep(instantiated.message());
  if (g.graphs.size() == kMaxGraphs) {
    g.drop(g.graphs.front());
    g.graphs.pop_front();
  }
  g.graphs.push_back({bindings_, exec});
  if (++g.stats.captured >= kCapturesWithoutReplay && g.stats.replayed == 0)
    g.stats.off = fmt::format("{} runs captured a graph and none replayed one: the buffers' "
                              "addresses change every run",
                              g.stats.captured);
  return launch(exec);
}

} // namespace smelt::rt::cuda
