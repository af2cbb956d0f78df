// firstEquivalentFusions: a hash of each body groups the candidates, and MLIR's structural
// comparison (OperationEquivalence) decides, so a hash collision never merges two kernels.
#include "codegen/EquivalentFusions.h"

#include "mlir/IR/OperationSupport.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

using namespace mlir;

namespace smelt::codegen {

namespace {

/// The body's ops in order (names, attributes, properties, result types), its argument types
/// and the kind; operands are left out of the hash, the comparison checks them.
llvm::hash_code bodyHash(FusionOp fusion) {
  llvm::hash_code hash = llvm::hash_value(static_cast<int>(fusion.getKind()));
  Block &body = fusion.getBody().front();
  for (BlockArgument arg : body.getArguments())
    hash = llvm::hash_combine(hash, arg.getType());
  for (Operation &op : body)
    hash = llvm::hash_combine(
        hash, OperationEquivalence::computeHash(&op, OperationEquivalence::ignoreHashValue,
                                                OperationEquivalence::ignoreHashValue,
                                                OperationEquivalence::IgnoreLocations));
  return hash;
}

bool equivalent(FusionOp a, FusionOp b) {
  // A result written in place of an input changes the kernel's signature (no restrict there)
  // and the order of its stores.
  return a.getKind() == b.getKind() &&
         a->getAttr("smelt.in_place") == b->getAttr("smelt.in_place") &&
         a.getBody().front().getArgumentTypes() == b.getBody().front().getArgumentTypes() &&
         OperationEquivalence::isRegionEquivalentTo(&a.getBody(), &b.getBody(),
                                                    OperationEquivalence::IgnoreLocations);
}

} // namespace

std::vector<size_t> firstEquivalentFusions(llvm::ArrayRef<FusionOp> fusions) {
  std::vector<size_t> first(fusions.size());
  // Each hash's distinct bodies so far, by the index of the first of each.
  llvm::DenseMap<llvm::hash_code, llvm::SmallVector<size_t, 1>> seen;
  for (auto [i, fusion] : llvm::enumerate(fusions)) {
    llvm::SmallVector<size_t, 1> &candidates = seen[bodyHash(fusion)];
    auto match = llvm::find_if(candidates, [&](size_t j) {
      return equivalent(FusionOp(fusions[j]), fusion);
    });
    if (match != candidates.end()) {
      first[i] = *match;
    } else {
      first[i] = i;
      candidates.push_back(i);
    }
  }
  return first;
}

} // namespace smelt::codegen
