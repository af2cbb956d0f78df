// A fused kernel's two functions (KernelEmitter.h): the C-ABI entry and the noalias body, whose
// loops the loop and reduction emitters fill.
#include "codegen/cpu/KernelEmitter.h"

#include "codegen/FusionWalk.h"
#include "codegen/cpu/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace smelt::codegen::cpu {

RowLoop emitRowLoop(const KernelBody &body, int64_t size, ImplicitLocOpBuilder &b) {
  auto i64 = [&](int64_t value) { return intConstant(b, b.getI64Type(), value); };
  Value first = arith::DivUIOp::create(b, body.begin, i64(size));
  Value last =
      arith::DivUIOp::create(b, arith::AddIOp::create(b, body.end, i64(size - 1)), i64(size));
  auto rows = scf::ForOp::create(b, first, last, i64(1));
  b.setInsertionPointToStart(rows.getBody());
  RowLoop loop;
  loop.row = rows.getInductionVar();
  loop.rowStart = arith::MulIOp::create(b, loop.row, i64(size));
  loop.lo = arith::MaxSIOp::create(b, arith::SubIOp::create(b, body.begin, loop.rowStart), i64(0));
  loop.hi = arith::MinSIOp::create(b, arith::SubIOp::create(b, body.end, loop.rowStart), i64(size));
  return loop;
}

std::string emitKernel(ModuleOp module, FusionOp fusion, StringRef name) {
  MLIRContext *context = module.getContext();
  ImplicitLocOpBuilder b(NameLoc::get(StringAttr::get(context, name)), context);
  b.setInsertionPointToEnd(module.getBody());
  Type ptr = LLVM::LLVMPointerType::get(context);
  Type i64 = b.getI64Type();
  unsigned inputs = fusion.getInputs().size(), buffers = inputs + fusion.getNumResults();

  SmallVector<Type> bodyTypes(buffers, ptr);
  bodyTypes.append({i64, i64});
  auto body =
      func::FuncOp::create(b, (name + "_body").str(), FunctionType::get(context, bodyTypes, {}));
  // Internal: once inlined into the entry, nothing else needs it.
  body.setPrivate();
  body->setAttr("llvm.linkage", LLVM::LinkageAttr::get(context, LLVM::linkage::Linkage::Internal));
  for (unsigned i = 0; i < buffers; ++i)
    body.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), b.getUnitAttr());

  auto entry = func::FuncOp::create(b, name, FunctionType::get(context, {ptr, i64, i64}, {}));
  b.setInsertionPointToStart(entry.addEntryBlock());
  SmallVector<Value> operands;
  for (unsigned i = 0; i < buffers; ++i) {
    Value slot =
        LLVM::GEPOp::create(b, ptr, ptr, entry.getArgument(0), ArrayRef<LLVM::GEPArg>{int32_t(i)},
                            LLVM::GEPNoWrapFlags::inbounds);
    operands.push_back(LLVM::LoadOp::create(b, ptr, slot, /*alignment=*/8));
  }
  operands.append({entry.getArgument(1), entry.getArgument(2)});
  func::CallOp::create(b, body, operands);
  func::ReturnOp::create(b);

  Block *block = body.addEntryBlock();
  b.setInsertionPointToStart(block);
  KernelBody kernel;
  for (unsigned i = 0; i < buffers; ++i)
    (i < inputs ? kernel.inputs : kernel.results).push_back(block->getArgument(i));
  for (BlockArgument arg : fusion.getBody().front().getArguments())
    kernel.inputDTypes.push_back(elementDType(arg));
  kernel.begin = block->getArgument(buffers);
  kernel.end = block->getArgument(buffers + 1);
  std::string error = fusion.getKind() == FusionKind::loop ? emitLoopBody(fusion, kernel, b)
                                                           : emitReductionBody(fusion, kernel, b);
  func::ReturnOp::create(b);
  return error;
}

} // namespace smelt::codegen::cpu
