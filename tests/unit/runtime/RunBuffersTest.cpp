// RunBuffers (runtime/RunBuffers.h) where a run fails before any step is queued: a GPU graph
// run binds every buffer first, handing a donated input's block to the result written in its
// place, or, given back after its last reader, to a later buffer of the same size. Nothing has
// run yet, so the input is whole: reclaim() takes its block back from wherever it went, and
// the run's end then frees everything else and nothing twice.
#include "RuntimeTestUtil.h"

#include "runtime/DeviceMemory.h"
#include "runtime/RunBuffers.h"

#include <gtest/gtest.h>

namespace smelt::rt::test {
namespace {

/// w (donated) and g in; new = w + g written in place of w, then u = g + g, a buffer of w's
/// size that the schedule may give w's block once it is freed.
struct Plan {
  Executable exe;
  BufferId w, g, updated, later;
};

Plan inPlacePlan(bool inPlace) {
  Plan p;
  TensorType type{DType::f32, {64}};
  p.w = appendBuffer(p.exe, type, "w");
  p.g = appendBuffer(p.exe, type, "g");
  p.exe.inputs = {p.w, p.g};
  p.updated = appendKernelStep(p.exe, kernels::add, "add", {p.w, p.g}, type, "m.mlir:1:1");
  p.later = appendKernelStep(p.exe, kernels::add, "add", {p.g, p.g}, type, "m.mlir:2:1");
  p.exe.outputs = {p.updated, p.later};
  Step &first = p.exe.steps[0];
  first.frees = {p.w};
  if (inPlace)
    std::get<KernelParams>(first.params).inPlace = {0};
  p.exe.steps[1].frees = {p.g};
  return p;
}

TEST(RunBuffers, AFailedRunBeforeAnyStepReclaimsADonatedBlockWhereverItWent) {
  Expected<Allocator *> allocator = deviceAllocator("cpu:0");
  ASSERT_TRUE(allocator.ok()) << allocator.message();
  for (bool inPlace : {true, false}) {
    SCOPED_TRACE(inPlace ? "written in place" : "reused after its last reader");
    Plan p = inPlacePlan(inPlace);
    ASSERT_TRUE(validateDataflow(p.exe).ok());
    Expected<RunBuffers> made = RunBuffers::create(p.exe, *allocator, {});
    ASSERT_TRUE(made.ok()) << made.message();
    RunBuffers &buffers = *made;
    uint64_t before = (*allocator)->stats().inUseBytes;
    Expected<void *> donated = (*allocator)->allocate(256, "w");
    ASSERT_TRUE(donated.ok()) << donated.message();

    buffers.deferFrees(true);
    ASSERT_TRUE(buffers.beginRun(0).ok());
    buffers.adopt(p.w, *donated);
    ASSERT_TRUE(buffers.take(p.g).ok());
    // Step 0: the result takes w's block in place, or a block of its own while w's waits.
    EXPECT_EQ(buffers.takeInPlace(0, 0), inPlace);
    if (!inPlace) {
      ASSERT_TRUE(buffers.take(p.updated).ok());
    }
    buffers.giveBackAfter(0);
    // Step 1 reuses w's waiting block when w was not taken in place.
    ASSERT_TRUE(buffers.take(p.later).ok());
    void *holder = buffers[inPlace ? p.updated : p.later];
    EXPECT_EQ(holder, *donated);
    EXPECT_EQ(buffers.release(p.w), nullptr) << "w holds nothing now";

    // The run fails here, before it queued anything: w comes back whole.
    EXPECT_EQ(buffers.reclaim(*donated), *donated);
    EXPECT_EQ(buffers[inPlace ? p.updated : p.later], nullptr);
    EXPECT_EQ(buffers.reclaim(*donated), nullptr) << "reclaimed twice";
    buffers.giveBackAll();
    // Only the caller's block is still in use, and it is still the allocator's to free.
    EXPECT_EQ((*allocator)->stats().inUseBytes, before + 256);
    (*allocator)->free(*donated);
    EXPECT_EQ((*allocator)->stats().inUseBytes, before);
  }
}

} // namespace
} // namespace smelt::rt::test
