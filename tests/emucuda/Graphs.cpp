// The emulated CUDA graphs: what stream capture recorded (Scheduler.cpp), instantiated as a
// fixed copy and launched as the stream's work, node after node. A replay runs the captured
// closures again with the arguments and addresses they were captured with, as a GPU replays a
// graph's nodes: memory freed since capture faults when the node runs, and memory reused for
// something else is read as it is, which is the runtime's to prevent.
#include "Core.h"

#include <mutex>
#include <set>

namespace smelt::emucuda {
namespace {

struct GraphExec {
  Graph graph;
};

struct Registry {
  std::mutex lock;
  std::set<Graph *> graphs;
  std::set<GraphExec *> execs;
};

Registry &registry() {
  static Registry *r = new Registry; // never destroyed, like the scheduler's state
  return *r;
}

/// Deletes the object `handle` names from the registry's set `live`; CUDA_ERROR_INVALID_VALUE
/// for a handle not there (destroyed already, or never made).
template <typename T> CUresult destroyIn(std::set<T *> Registry::*live, void *handle) {
  Registry &r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  auto *object = static_cast<T *>(handle);
  if (!(r.*live).erase(object))
    return CUDA_ERROR_INVALID_VALUE;
  delete object;
  return CUDA_SUCCESS;
}

} // namespace

CUgraph registerGraph(std::unique_ptr<Graph> graph) {
  Registry &r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  Graph *g = graph.release();
  r.graphs.insert(g);
  return reinterpret_cast<CUgraph>(g);
}

CUresult destroyGraph(CUgraph handle) { return destroyIn(&Registry::graphs, handle); }

CUresult instantiateGraph(CUgraphExec *exec, CUgraph handle, unsigned long long flags) {
  if (!exec || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  Registry &r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  auto *graph = reinterpret_cast<Graph *>(handle);
  if (!r.graphs.count(graph))
    return CUDA_ERROR_INVALID_VALUE;
  auto *instance = new GraphExec{*graph};
  r.execs.insert(instance);
  *exec = reinterpret_cast<CUgraphExec>(instance);
  return CUDA_SUCCESS;
}

CUresult destroyGraphExec(CUgraphExec handle) { return destroyIn(&Registry::execs, handle); }

CUresult launchGraph(CUgraphExec handle, CUstream stream) {
  std::vector<GraphNode> nodes;
  int device = 0;
  {
    Registry &r = registry();
    std::lock_guard<std::mutex> guard(r.lock);
    auto *exec = reinterpret_cast<GraphExec *>(handle);
    if (!r.execs.count(exec))
      return CUDA_ERROR_INVALID_VALUE;
    nodes = exec->graph.nodes; // queued work keeps its own copy: the exec may be destroyed
    device = exec->graph.device;
  }
  int on = streamDevice(stream);
  if (on < 0)
    return isLegacy(stream) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
  if (on != device)
    return CUDA_ERROR_INVALID_VALUE; // a graph runs in the context it was captured in
  std::string of = " of " + std::to_string(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    if (CUresult r =
            nodes[i].requeue
                ? nodes[i].requeue(stream)
                : enqueue(stream, "graph node " + std::to_string(i) + of + ": " + nodes[i].what,
                          std::move(nodes[i].run)))
      return r;
  return CUDA_SUCCESS;
}

} // namespace smelt::emucuda
