// The GPU executor's CUDA graphs: a run's steps queued as one cuGraphLaunch instead of one call
// each (XLA's command buffers, PyTorch's CUDA graphs). A graph fixes every kernel argument,
// so it is keyed by the run's bindings, the address of every buffer of every step: a run whose
// bindings equal a captured graph's replays it; another is captured (stream capture of the
// same launches, which records and runs nothing) and then launched. A training loop that
// donates its state back alternates between two sets of blocks, so a few graphs cover it.
// The first run of an executor queues its steps one by one: libraries initialize and the
// allocator grows there, outside any capture. A step the driver cannot capture (a library call
// that synchronizes) turns graphs off for the executor, whose runs then go on step by step.
//
// An all_reduce over several replicas goes into the graph when its communicator reduces on the
// stream (NCCL, which supports capture): each launch runs it again as the replica's next
// collective, and every replica's graph holds the same collectives in the same order, so
// replicas that replay and replicas that capture still meet. A graph is then also keyed by the
// communicator (a replica's rank is in its replica_id steps), and the run waits for a fence
// recorded after the launch, bounded by the group's timeout as a collective is. A host
// communicator (threads, MPI, NCCL in deterministic mode) makes the host wait inside the step,
// which no graph can hold: graphs are off.
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
    Communicator *communicator = nullptr;
    CUgraphExec exec = nullptr;
  };
  std::deque<Captured> graphs; // the newest last
  GraphStats stats;
  /// The executable's first all_reduce over several replicas, "" when it has none.
  std::string groupedStep;

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
                                                             const Executable &exe, bool wanted,
                                                             std::string groupedStep) {
  auto graphs = std::make_shared<Graphs>();
  graphs->device = std::move(device);
  graphs->groupedStep = std::move(groupedStep);
  if (!wanted)
    graphs->stats.off = "CUDA graphs are off (--cuda-graphs=false)";
  else if (exe.steps.empty())
    graphs->stats.off = "no steps";
  return graphs;
}

GpuExecutor::GraphStats GpuExecutor::graphStats() const {
  return graphs_ ? graphs_->stats : GraphStats{};
}

bool GpuExecutor::graphRun() {
  if (!graphs_ || !graphs_->stats.off.empty() || runs_ == 0)
    return false;
  Communicator *communicator = *communicator_;
  if (graphs_->groupedStep.empty())
    return true;
  if (!communicator) // the step fails, step by step, saying the function runs alone
    return false;
  if (!communicator->reducesOnStreams() || communicator->cudaDevice() != device_->ordinal())
    graphs_->stats.off = fmt::format("{} reduces on {}, which makes the host wait inside the "
                                     "step (a CUDA graph holds only NCCL on this GPU, not in "
                                     "deterministic mode)",
                                     graphs_->groupedStep, communicator->describe());
  return graphs_->stats.off.empty();
}

Status GpuExecutor::launchStep(size_t s) {
  Status status = launches_[s](bindings_.data() + stepBindings_[s]);
  if (status.ok())
    countTransfers({.stepLaunches = 1});
  return status;
}

Status GpuExecutor::launchEach() {
  for (size_t s = 0; s < launches_.size(); ++s)
    SMELT_RETURN_IF_ERROR(launchStep(s));
  return Status();
}

Status GpuExecutor::launchAsGraph() {
  Graphs &g = *graphs_;
  const CudaDriver &cu = device_->driver();
  CUstream stream = device_->stream();
  Communicator *communicator = *communicator_;
  auto launch = [&](CUgraphExec exec) {
    Status status = device_->check(cu.graphLaunch(exec, stream), "cuGraphLaunch");
    if (!status.ok())
      return status;
    countTransfers({.graphLaunches = 1});
    if (g.groupedStep.empty())
      return status;
    // The graph's collectives have no tickets: a fence behind them bounds the run's wait.
    SMELT_ASSIGN_OR_RETURN(int64_t fence,
                           communicator->fenceOnStream(
                               stream, fmt::format("the CUDA graph of '{}' (all_reduces from {})",
                                                   executable_->name, g.groupedStep)));
    collectives_->started.push_back(fence);
    return status;
  };
  for (Graphs::Captured &captured : g.graphs)
    if (captured.bindings == bindings_ && captured.communicator == communicator) {
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
  collectives_->capturing = true;
  for (size_t s = 0; s < launches_.size() && launched.ok(); ++s)
    launched = launches_[s](bindings_.data() + stepBindings_[s]);
  collectives_->capturing = false;
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
  g.graphs.push_back({bindings_, communicator, exec});
  if (++g.stats.captured >= kCapturesWithoutReplay && g.stats.replayed == 0)
    g.stats.off = fmt::format("{} runs captured a graph and none replayed one: the buffers' "
                              "addresses change every run",
                              g.stats.captured);
  return launch(exec);
}

} // namespace smelt::rt::cuda
