// The loop kernel: one scf.for over linear element indices [begin, end) of the iteration
// space, computing and storing one element of every result per iteration. Results of a loop
// fusion share the iteration shape, so each is stored at the loop's index; when the body is
// elementwise the loads use that index too, and the loop is contiguous and vectorizes.
#include "codegen/cpu/CpuTarget.h"
#include "codegen/cpu/KernelEmitter.h"
#include "codegen/cpu/Numerics.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace smelt::codegen::cpu {

std::string emitLoopBody(FusionOp fusion, const KernelBody &body, ImplicitLocOpBuilder &b) {
  CpuTarget target(b, body.inputs, body.inputDTypes);
  FusionWalk walk(fusion, target);
  auto loop = scf::ForOp::create(b, body.begin, body.end, intConstant(b, b.getI64Type(), 1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value i = loop.getInductionVar();
  walk.newScope();
  FusionWalk::IndexRef at = walk.linearIndex(fusion.getIterationShape(), target.wrap(i));
  for (auto [result, value] : llvm::zip(body.results, fusion.getYield().getValues()))
    storeElement(b, result, i, target.value(walk.emit(value, at)), elementDType(value));
  return target.error();
}

} // namespace smelt::codegen::cpu
