// The schedule of an Executable, fixed at compile time as XLA's and IREE's compilers fix it:
// its device segments (runs of consecutive steps on one device, the copies between them the
// moves) with what each reads and hands on, and per step the buffers no later step of its
// segment uses, which the executor gives back once the step ran. The runtime runs this plan
// (Executor.h, RunBuffers) and works none of it out again; an artifact carries it.
#pragma once

#include "runtime/Executable.h"

namespace smelt::codegen {

/// Sets `exe.segments` and every step's `frees`. Steps must be in dataflow order, as
/// buildExecutable makes them.
void planSchedule(rt::Executable &exe);

} // namespace smelt::codegen
