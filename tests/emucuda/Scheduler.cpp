// The emulated devices' streams, events and the schedule of queued work (EmuCuda.h). Work is a
// node in a graph: it waits for the previous work of its stream, for the events its stream was
// told to wait on, and for the legacy stream as CUDA's blocking streams do. Nothing runs when
// it is queued (the "late" schedule): a host call that needs a result (a synchronize, a
// synchronous copy, an event query) runs what that result depends on and nothing else, picking
// among the ready work by a seeded random draw, so two streams interleave in any order their
// dependencies allow. An event or stream query runs one piece of work and reports "not ready"
// until its work is done: a polling loop makes progress, but never sees work finish early.
// The "eager" schedule runs each piece of work as soon as it is ready instead.
//
// Stream capture (cuStreamBeginCapture) diverts a stream's work into a graph (Graphs.cpp)
// instead of the schedule; what capture cannot hold fails and invalidates it, as in the driver's
// global capture mode, so a runtime that syncs or touches the legacy stream inside a capture
// learns it here and not on a GPU.
#include "Core.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <vector>

namespace smelt::emucuda {

struct Op;
using OpPtr = std::shared_ptr<Op>;

struct GroupState {
  std::shared_ptr<GroupWork> work;
  std::vector<Op *> parts; // queued so far
  bool abandoned = false;  // each part completes alone, doing nothing
};

struct Op {
  uint64_t id = 0;
  int device = 0;
  std::string what;
  std::function<void()> run;
  std::shared_ptr<GroupState> group; // a part of group work, else null
  std::vector<OpPtr> deps;
  bool running = false, done = false;
};

struct Stream {
  int device = 0;
  bool blocking = true; // not CU_STREAM_NON_BLOCKING: ordered with the legacy stream
  OpPtr last;               // the newest work queued on it
  std::vector<OpPtr> waits; // events waited on, joined into the next work's dependencies
  /// While capturing: the graph its work goes into, and whether a call capture cannot hold
  /// broke it (the capture then ends invalidated).
  std::unique_ptr<Graph> captured;
  bool captureBroken = false;
};

struct Event {
  OpPtr recorded; // the work it completes with; null: never recorded or already complete
};

namespace {

struct State {
  std::mutex lock;
  std::condition_variable changed;
  std::vector<OpPtr> pending;
  std::set<Stream *> streams;
  std::set<Event *> events;
  Stream legacy[kMaxDevices];
  CUresult sticky[kMaxDevices] = {};
  std::string lastFault;
  std::map<std::shared_ptr<GroupWork>, std::shared_ptr<GroupState>> groups;
  uint64_t nextId = 1;
  std::mt19937_64 random;
  Schedule schedule = Schedule::Late;
  uint64_t seed = 0;
  State() {
    for (int d = 0; d < kMaxDevices; ++d)
      legacy[d].device = d;
    const char *setting = std::getenv("SMELT_EMUCUDA_SCHEDULE");
    std::string text = setting ? setting : "late";
    if (text == "eager") {
      schedule = Schedule::Eager;
    } else if (text.rfind("late:", 0) == 0) {
      seed = std::strtoull(text.c_str() + 5, nullptr, 10);
    } else {
      if (text != "late")
        std::fprintf(stderr, "emulated CUDA: SMELT_EMUCUDA_SCHEDULE=%s is not eager, late or "
                             "late:SEED; using late\n", text.c_str());
      seed = std::random_device{}();
      std::fprintf(stderr, "emulated CUDA: late schedule, seed %llu "
                           "(SMELT_EMUCUDA_SCHEDULE=late:%llu replays it)\n",
                   (unsigned long long)seed, (unsigned long long)seed);
    }
    random.seed(seed);
  }
};

State &state() {
  static State *s = new State; // never destroyed: work may be queued while the process exits
  return *s;
}

Stream *streamOf(State &s, CUstream handle) {
  if (isLegacy(handle)) {
    Context *context = currentContext();
    return context ? &s.legacy[context->device] : nullptr;
  }
  auto *stream = reinterpret_cast<Stream *>(handle);
  return s.streams.count(stream) ? stream : nullptr;
}

bool depsDone(const Op &op) {
  return std::all_of(op.deps.begin(), op.deps.end(), [](const OpPtr &d) { return d->done; });
}

bool ready(const Op &op) {
  if (op.done || op.running)
    return false;
  if (!op.group || op.group->abandoned)
    return depsDone(op);
  const GroupState &g = *op.group;
  return int(g.parts.size()) == g.work->parts &&
         std::all_of(g.parts.begin(), g.parts.end(), [](Op *p) { return depsDone(*p); });
}

/// Runs `op` (a whole group for a part) with the lock released; marks it done.
void execute(State &s, std::unique_lock<std::mutex> &held, Op &op) {
  std::vector<Op *> members{&op};
  bool abandoned = op.group && op.group->abandoned;
  if (op.group && !abandoned)
    members = op.group->parts;
  for (Op *m : members)
    m->running = true;
  bool failed = std::any_of(members.begin(), members.end(),
                            [&](Op *m) { return s.sticky[m->device] != CUDA_SUCCESS; });
  std::function<void()> run = op.group ? (abandoned ? nullptr : op.group->work->run) : op.run;
  held.unlock();
  CUresult code = CUDA_SUCCESS;
  std::string message;
  if (!failed && run) { // after a fault the context is dead: later work does nothing
    try {
      run();
    } catch (const Fault &fault) {
      code = fault.code;
      message = fault.what();
    } catch (const std::exception &error) {
      code = CUDA_ERROR_UNKNOWN;
      message = op.what + ": " + error.what();
    }
  }
  if (code != CUDA_SUCCESS)
    diagnose(message);
  held.lock();
  if (code != CUDA_SUCCESS) {
    s.lastFault = message;
    for (Op *m : members)
      if (s.sticky[m->device] == CUDA_SUCCESS)
        s.sticky[m->device] = code;
  }
  for (Op *m : members) {
    m->running = false;
    m->done = true;
    m->run = nullptr;
    m->deps.clear(); // else every stream would keep its whole history alive
  }
  if (op.group && !abandoned)
    s.groups.erase(op.group->work);
  s.pending.erase(std::remove_if(s.pending.begin(), s.pending.end(),
                                 [](const OpPtr &p) { return p->done; }),
                  s.pending.end());
  s.changed.notify_all();
}

/// The ready work among what `target` waits for (itself included), group siblings followed.
std::vector<Op *> readyFor(Op *target) {
  std::vector<Op *> found, stack{target};
  std::set<Op *> seen{target};
  while (!stack.empty()) {
    Op *op = stack.back();
    stack.pop_back();
    if (op->done)
      continue;
    if (ready(*op))
      found.push_back(op);
    auto visit = [&](Op *next) {
      if (!next->done && seen.insert(next).second)
        stack.push_back(next);
    };
    for (const OpPtr &d : op->deps)
      visit(d.get());
    if (op->group && !op->group->abandoned)
      for (Op *part : op->group->parts)
        visit(part);
  }
  return found;
}

Op *pick(State &s, std::vector<Op *> &candidates) {
  if (s.schedule == Schedule::Eager)
    return *std::min_element(candidates.begin(), candidates.end(),
                             [](Op *a, Op *b) { return a->id < b->id; });
  return candidates[s.random() % candidates.size()];
}

/// Runs what `target` needs until it is done; `steps` > 0 stops after that many pieces of work.
void demand(State &s, std::unique_lock<std::mutex> &held, const OpPtr &target, int steps = -1) {
  while (!target->done && steps != 0) {
    std::vector<Op *> candidates = readyFor(target.get());
    if (candidates.empty()) { // running on another thread, or a group waiting for a part
      if (steps > 0)
        return;
      s.changed.wait(held);
      continue;
    }
    execute(s, held, *pick(s, candidates));
    if (steps > 0)
      --steps;
  }
}

/// Eager schedule: runs whatever is ready, oldest first, without waiting for anything (so not
/// work that waits for other processes: that runs when demanded).
void progress(State &s, std::unique_lock<std::mutex> &held) {
  while (true) {
    Op *next = nullptr;
    for (const OpPtr &op : s.pending)
      if (ready(*op) && (!next || op->id < next->id) &&
          !(op->group && !op->group->abandoned && op->group->work->waitsForOtherProcesses))
        next = op.get();
    if (!next)
      return;
    execute(s, held, *next);
  }
}

/// Adds work to `stream` with the dependencies CUDA's stream semantics give it (s.lock held).
OpPtr add(State &s, Stream &stream, std::string what, std::function<void()> run) {
  auto op = std::make_shared<Op>();
  op->id = s.nextId++;
  op->device = stream.device;
  op->what = std::move(what);
  op->run = std::move(run);
  if (stream.last && !stream.last->done)
    op->deps.push_back(stream.last);
  for (OpPtr &wait : stream.waits)
    if (!wait->done)
      op->deps.push_back(wait);
  stream.waits.clear();
  Stream &legacy = s.legacy[stream.device];
  if (&stream == &legacy) {
    for (Stream *other : s.streams) // the legacy stream waits for every blocking stream
      if (other->device == stream.device && other->blocking && other->last && !other->last->done)
        op->deps.push_back(other->last);
  } else if (stream.blocking && legacy.last && !legacy.last->done) {
    op->deps.push_back(legacy.last); // and every blocking stream for the legacy stream
  }
  stream.last = op;
  s.pending.push_back(op);
  return op;
}

} // namespace

bool isLegacy(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

Schedule schedule() { return state().schedule; }
uint64_t scheduleSeed() { return state().seed; }

void diagnose(const std::string &message) {
  std::fprintf(stderr, "emulated CUDA: %s\n", message.c_str());
}

namespace {
/// The stream `handle` names, when it can take work (s.lock held): else no such stream (no
/// context, for the legacy one) or its device's sticky error.
CUresult streamForWork(State &s, CUstream handle, Stream *&stream) {
  stream = streamOf(s, handle);
  if (!stream)
    return isLegacy(handle) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
  return s.sticky[stream->device];
}

/// Whether a capture forbids what is asked of `stream` now, other than recording work
/// (s.lock held): the stream is capturing (`why`), or it is the legacy stream of a device with
/// a blocking stream capturing (which the capture would have to wait for). Either breaks the
/// capture.
CUresult refusedByCapture(State &s, Stream &stream, CUresult why) {
  if (stream.captured) {
    stream.captureBroken = true;
    return why;
  }
  if (&stream == &s.legacy[stream.device])
    for (Stream *other : s.streams)
      if (other->device == stream.device && other->blocking && other->captured) {
        other->captureBroken = true;
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
      }
  return CUDA_SUCCESS;
}
} // namespace

CUresult enqueue(CUstream handle, std::string what, std::function<void()> run) {
  State &s = state();
  std::unique_lock<std::mutex> held(s.lock);
  Stream *stream = nullptr;
  if (CUresult r = streamForWork(s, handle, stream))
    return r;
  if (stream->captured) {
    if (stream->captureBroken)
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    stream->captured->nodes.push_back({std::move(what), std::move(run)});
    return CUDA_SUCCESS;
  }
  if (CUresult r = refusedByCapture(s, *stream, CUDA_SUCCESS))
    return r;
  add(s, *stream, std::move(what), std::move(run));
  if (s.schedule == Schedule::Eager)
    progress(s, held);
  return CUDA_SUCCESS;
}

CUresult enqueueWaiting(CUstream handle, std::string what, std::function<void()> run) {
  State &s = state();
  std::unique_lock<std::mutex> held(s.lock);
  Stream *stream = nullptr;
  if (CUresult r = streamForWork(s, handle, stream))
    return r;
  if (CUresult r = refusedByCapture(s, *stream, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED))
    return r;
  OpPtr op = add(s, *stream, std::move(what), std::move(run));
  demand(s, held, op);
  return s.sticky[stream->device];
}

CUresult captureRequeue(CUstream handle, std::string what,
                        std::function<CUresult(CUstream)> requeue, bool &captured) {
  State &s = state();
  std::lock_guard<std::mutex> held(s.lock);
  Stream *stream = streamOf(s, handle);
  captured = stream && stream->captured;
  if (!captured)
    return CUDA_SUCCESS;
  if (stream->captureBroken)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  stream->captured->nodes.push_back({std::move(what), nullptr, std::move(requeue)});
  return CUDA_SUCCESS;
}

CUresult enqueuePart(const std::shared_ptr<GroupWork> &group, CUstream handle, std::string what) {
  State &s = state();
  std::unique_lock<std::mutex> held(s.lock);
  Stream *stream = nullptr;
  if (CUresult r = streamForWork(s, handle, stream))
    return r;
  if (CUresult r = refusedByCapture(s, *stream, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED))
    return r;
  std::shared_ptr<GroupState> &state = s.groups[group];
  if (!state) {
    state = std::make_shared<GroupState>();
    state->work = group;
  }
  if (int(state->parts.size()) >= group->parts || state->abandoned)
    return CUDA_ERROR_INVALID_VALUE;
  OpPtr op = add(s, *stream, std::move(what), nullptr);
  op->group = state;
  state->parts.push_back(op.get());
  s.changed.notify_all(); // a demand may be waiting for this part
  if (s.schedule == Schedule::Eager)
    progress(s, held);
  return CUDA_SUCCESS;
}

bool abandonGroup(const std::shared_ptr<GroupWork> &group) {
  State &s = state();
  std::unique_lock<std::mutex> held(s.lock);
  auto it = s.groups.find(group);
  if (it == s.groups.end()) { // ran already, or no part queued yet: refuse later parts
    auto state = std::make_shared<GroupState>();
    state->work = group;
    state->abandoned = true;
    s.groups[group] = state;
    return true;
  }
  if (it->second->abandoned)
    return true;
  bool running = std::any_of(it->second->parts.begin(), it->second->parts.end(),
                             [](Op *p) { return p->running || p->done; });
  if (running)
    return false;
  it->second->abandoned = true;
  s.changed.notify_all();
  if (s.schedule == Schedule::Eager)
    progress(s, held);
  return true;
}

std::string lastFault() {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  return s.lastFault;
}

void clearFault() {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  s.lastFault.clear();
  std::fill(std::begin(s.sticky), std::end(s.sticky), CUDA_SUCCESS);
}

CUresult stickyError(int device) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  return s.sticky[device];
}

int streamDevice(CUstream handle) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  Stream *stream = streamOf(s, handle);
  return stream ? stream->device : -1;
}

CUresult createStream(unsigned flags, CUstream *handle) {
  Context *context = currentContext();
  if (!context)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!handle || (flags & ~unsigned(CU_STREAM_NON_BLOCKING)))
    return CUDA_ERROR_INVALID_VALUE;
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto *stream = new Stream; // freed never: queued work may still point at it
  stream->device = context->device;
  stream->blocking = !(flags & CU_STREAM_NON_BLOCKING);
  s.streams.insert(stream);
  *handle = reinterpret_cast<CUstream>(stream);
  return CUDA_SUCCESS;
}

CUresult destroyStream(CUstream handle) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto *stream = reinterpret_cast<Stream *>(handle);
  // Queued work still runs (cuStreamDestroy returns at once and releases the stream later).
  return s.streams.erase(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult synchronizeStream(CUstream handle) {
  State &s = state();
  std::unique_lock<std::mutex> held(s.lock);
  Stream *stream = streamOf(s, handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = refusedByCapture(s, *stream, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED))
    return r;
  OpPtr last = stream->last;
  if (last)
    demand(s, held, last);
  return s.sticky[stream->device];
}

CUresult queryStream(CUstream handle) {
  State &s = state();
  std::unique_lock<std::mutex> held(s.lock);
  Stream *stream = streamOf(s, handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = refusedByCapture(s, *stream, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED))
    return r;
  if (s.sticky[stream->device] != CUDA_SUCCESS)
    return s.sticky[stream->device];
  OpPtr last = stream->last;
  if (!last || last->done)
    return CUDA_SUCCESS;
  demand(s, held, last, 1);
  return CUDA_ERROR_NOT_READY;
}

CUresult synchronizeDevice(int device) {
  State &s = state();
  std::unique_lock<std::mutex> held(s.lock);
  for (Stream *stream : s.streams) // a capturing stream would have to be waited for
    if (stream->device == device && stream->captured)
      return refusedByCapture(s, *stream, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  while (true) {
    OpPtr next;
    for (const OpPtr &op : s.pending)
      if (op->device == device && !op->done) {
        next = op;
        break;
      }
    if (!next)
      break;
    demand(s, held, next);
  }
  return s.sticky[device];
}

CUresult createEvent(unsigned flags, CUevent *handle) {
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!handle || (flags & ~known))
    return CUDA_ERROR_INVALID_VALUE;
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto *event = new Event;
  s.events.insert(event);
  *handle = reinterpret_cast<CUevent>(event);
  return CUDA_SUCCESS;
}

CUresult destroyEvent(CUevent handle) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto *event = reinterpret_cast<Event *>(handle);
  if (!s.events.erase(event))
    return CUDA_ERROR_INVALID_HANDLE;
  delete event;
  return CUDA_SUCCESS;
}

CUresult recordEvent(CUevent handle, CUstream streamHandle) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto *event = reinterpret_cast<Event *>(handle);
  if (!s.events.count(event))
    return CUDA_ERROR_INVALID_HANDLE;
  Stream *stream = streamOf(s, streamHandle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  // Capture records no events here (the runtime records none inside a graph).
  if (CUresult r = refusedByCapture(s, *stream, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED))
    return r;
  // The event completes with the stream's work queued so far, and the legacy stream's for a
  // blocking stream: a marker that waits for exactly that.
  event->recorded = add(s, *stream, "event", nullptr);
  return CUDA_SUCCESS;
}

namespace {
/// The work event `handle` completes with (s.lock held): null when never recorded; false for
/// no such event.
bool recordedWork(State &s, CUevent handle, OpPtr &recorded) {
  auto *event = reinterpret_cast<Event *>(handle);
  if (!s.events.count(event))
    return false;
  recorded = event->recorded;
  return true;
}
} // namespace

CUresult queryEvent(CUevent handle) {
  State &s = state();
  std::unique_lock<std::mutex> held(s.lock);
  OpPtr recorded;
  if (!recordedWork(s, handle, recorded))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!recorded || recorded->done)
    return recorded ? s.sticky[recorded->device] : CUDA_SUCCESS;
  demand(s, held, recorded, 1);
  return CUDA_ERROR_NOT_READY;
}

CUresult synchronizeEvent(CUevent handle) {
  State &s = state();
  std::unique_lock<std::mutex> held(s.lock);
  OpPtr recorded;
  if (!recordedWork(s, handle, recorded))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!recorded)
    return CUDA_SUCCESS;
  demand(s, held, recorded);
  return s.sticky[recorded->device];
}

CUresult waitEvent(CUstream streamHandle, CUevent handle) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  OpPtr recorded;
  Stream *stream = streamOf(s, streamHandle);
  if (!recordedWork(s, handle, recorded) || !stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = refusedByCapture(s, *stream, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED))
    return r;
  if (recorded && !recorded->done)
    stream->waits.push_back(recorded);
  return CUDA_SUCCESS;
}

CUresult beginCapture(CUstream handle, CUstreamCaptureMode mode) {
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  if (isLegacy(handle))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // the legacy stream cannot be captured
  Stream *stream = streamOf(s, handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (stream->captured)
    return CUDA_ERROR_ILLEGAL_STATE;
  // Work already queued is not part of the graph; a launch of it orders after that work anyway
  // (it goes on a stream), so the waits pending now stay for the next work run, not captured.
  stream->captured = std::make_unique<Graph>();
  stream->captured->device = stream->device;
  stream->captureBroken = false;
  return CUDA_SUCCESS;
}

CUresult endCapture(CUstream handle, CUgraph *graph) {
  if (!graph)
    return CUDA_ERROR_INVALID_VALUE;
  State &s = state();
  std::unique_ptr<Graph> captured;
  bool broken = false;
  {
    std::lock_guard<std::mutex> guard(s.lock);
    Stream *stream = isLegacy(handle) ? nullptr : streamOf(s, handle);
    if (!stream)
      return CUDA_ERROR_INVALID_HANDLE;
    if (!stream->captured)
      return CUDA_ERROR_ILLEGAL_STATE;
    captured = std::move(stream->captured);
    broken = stream->captureBroken;
    stream->captureBroken = false;
  }
  *graph = nullptr;
  if (broken)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  *graph = registerGraph(std::move(captured));
  return CUDA_SUCCESS;
}

CUresult captureStatus(CUstream handle, CUstreamCaptureStatus *status) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  Stream *stream = streamOf(s, handle);
  if (!stream || !status)
    return stream ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
  *status = !stream->captured       ? CU_STREAM_CAPTURE_STATUS_NONE
            : stream->captureBroken ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                    : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

} // namespace smelt::emucuda
