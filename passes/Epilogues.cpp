// smelt-fuse's epilogue folding (Epilogues.h describes the decisions).
#include "passes/Epilogues.h"

#include "passes/FusionUtils.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace smelt {

namespace {

/// The library that runs a contraction and what it applies after it: a bias and relu, and
/// with oneDNN's eltwise post-ops (`postOps`) tanh and logistic too, cuBLASLt's epilogues having
/// neither. `none` says why it takes nothing.
struct Library {
  const char *name = "";
  bool postOps = false;
  std::string none;
};

Library libraryFor(Operation *op, bool convs) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  if (!deviceOf(op).starts_with("gpu"))
    return {"oneDNN", true,
            convs || !isa<Conv2DOp>(op) ? "" : "conv-epilogues=false leaves them to a kernel"};
  if (isa<Conv2DOp>(op))
    return {"cuDNN", false, "the cuDNN convolution here takes no epilogue"};
  if (type.getElementType().isF64())
    return {"cuBLASLt", false, "cuBLASLt's epilogues are used for f32, f16 and bf16 only"};
  return {"cuBLASLt", false, ""};
}

/// The vector [N] that `operand` broadcasts along the last dimension of `result`, if it does:
/// broadcast_in_dim V, or (after smelt-mixed-precision, which casts the broadcast master
/// weight) a convert of one, whose vector is then converted instead.
Value biasVector(Value operand, RankedTensorType result, OpBuilder *builder) {
  auto convert = operand.getDefiningOp<ConvertOp>();
  auto broadcast = (convert ? convert.getX() : operand).getDefiningOp<BroadcastInDimOp>();
  if (!broadcast)
    return {};
  auto source = cast<RankedTensorType>(broadcast.getX().getType());
  ArrayRef<int64_t> dims = broadcast.getBroadcastDimensions();
  if (source.getRank() != 1 || dims.size() != 1 || dims[0] != result.getRank() - 1 ||
      source.getDimSize(0) != result.getShape().back() ||
      !isa<FloatType>(source.getElementType()))
    return {};
  if (!convert)
    return source.getElementType() == result.getElementType() ? broadcast.getX() : Value();
  if (!builder)
    return broadcast.getX(); // it will do, once converted
  auto converted = ConvertOp::create(*builder, convert.getLoc(),
                                     source.clone(result.getElementType()), broadcast.getX());
  // On the device of the convert it replaces (the matmul's): an op with no device is placed on
  // the CPU later, and a GPU step would go through the host for a bias.
  if (Attribute device = convert->getAttr("smelt.device"))
    converted->setAttr("smelt.device", device);
  return converted;
}

/// The one user of `value` (`what` names it in the reason), on `op`'s device; else null, with
/// why.
Operation *soleUser(Value value, Operation *op, const std::string &what, std::string &why) {
  int64_t users = std::distance(value.getUsers().begin(), value.getUsers().end());
  if (users != 1) {
    why = what + (users == 0 ? " is unused" : " has " + std::to_string(users) + " users");
    return nullptr;
  }
  Operation *user = *value.getUsers().begin();
  if (deviceOf(user) == deviceOf(op))
    return user;
  why = "the user of " + what + ", " + describe(user) + ", is on another device";
  return nullptr;
}

std::optional<Epilogue> activationOf(Operation *op, const Library &library, std::string &why) {
  std::optional<Epilogue> kind = llvm::TypeSwitch<Operation *, std::optional<Epilogue>>(op)
                                     .Case([](ReluOp) { return Epilogue::relu; })
                                     .Case([](TanhOp) { return Epilogue::tanh; })
                                     .Case([](LogisticOp) { return Epilogue::logistic; })
                                     .Default([](Operation *) { return std::nullopt; });
  if (!kind) {
    why = "its user " + describe(op) + " is not relu, tanh or logistic";
    return std::nullopt;
  }
  if (*kind == Epilogue::relu || library.postOps)
    return kind;
  why = std::string(library.name) + " has no " + stringifyEpilogue(*kind).str() + " epilogue";
  return std::nullopt;
}

/// `op` rebuilt with the bias that `biasOperand` broadcasts and `activation` (either may be
/// absent) in place of the last op folded; the folded ops erased, and the bias's broadcast
/// (and convert) once nothing else reads them.
void rebuild(Operation *op, Value biasOperand, std::optional<Epilogue> activation,
             ArrayRef<Operation *> folded) {
  Operation *last = folded.back();
  OpBuilder builder(last);
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  Value bias = biasOperand ? biasVector(biasOperand, resultType, &builder) : Value();
  Operation *rebuilt = builder.clone(*op);
  auto activationAttr = activation ? EpilogueAttr::get(op->getContext(), *activation) : nullptr;
  if (auto matmul = dyn_cast<MatmulOp>(rebuilt)) {
    if (bias)
      matmul.getBiasMutable().assign(bias);
    matmul.setActivationAttr(activationAttr);
  } else {
    auto conv = cast<Conv2DOp>(rebuilt);
    if (bias)
      conv.getBiasMutable().assign(bias);
    conv.setActivationAttr(activationAttr);
  }
  last->getResult(0).replaceAllUsesWith(rebuilt->getResult(0));
  SetVector<Operation *> unused; // each once: an op erased is never looked at again
  for (Operation *dead : llvm::reverse(folded)) {
    for (Value operand : dead->getOperands())
      if (isa_and_present<BroadcastInDimOp, ConvertOp>(operand.getDefiningOp()))
        unused.insert(operand.getDefiningOp());
    dead->erase();
  }
  while (!unused.empty()) {
    Operation *candidate = unused.pop_back_val();
    if (!candidate->use_empty())
      continue;
    if (isa_and_present<BroadcastInDimOp>(candidate->getOperand(0).getDefiningOp()))
      unused.insert(candidate->getOperand(0).getDefiningOp());
    candidate->erase();
  }
}

/// Folds what `op`'s library takes; returns the report line.
std::string fold(Operation *op, bool convs, unsigned &count) {
  std::string head = "epilogue: " + describe(op) + ": ";
  Library library = libraryFor(op, convs);
  if (!library.none.empty())
    return head + "nothing folded: " + library.none;
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  std::string why;
  SmallVector<Operation *, 3> folded{op};
  Value bias; // the add's operand that broadcasts it
  Operation *user = soleUser(op->getResult(0), op, "its result", why);
  if (auto add = dyn_cast_or_null<AddOp>(user)) {
    Value other = add.getLhs() == op->getResult(0) ? add.getRhs() : add.getLhs();
    if (other != op->getResult(0) && biasVector(other, resultType, nullptr))
      bias = other;
    if (bias) {
      folded.push_back(add);
      user = soleUser(add.getResult(), op, "the bias add's result", why);
    } else {
      why = "its user 'add' adds no vector broadcast along the last dimension";
      user = nullptr;
    }
  }
  std::optional<Epilogue> activation = user ? activationOf(user, library, why) : std::nullopt;
  if (activation)
    folded.push_back(user);
  if (!bias && !activation)
    return head + "nothing folded: " + why;
  rebuild(op, bias, activation, folded);
  ++count;
  std::string what = bias && activation ? "bias add and " + stringifyEpilogue(*activation).str()
                     : bias             ? std::string("bias add")
                                        : stringifyEpilogue(*activation).str();
  // How the library is asked: oneDNN's bias argument and eltwise post-op, cuBLASLt's epilogue.
  std::string how = library.postOps
                        ? std::string(bias ? "bias argument" : "") +
                              (bias && activation ? " and " : "") +
                              (activation ? "eltwise post-op" : "")
                        : std::string("epilogue ") + (activation ? "RELU" : "") +
                              (bias && activation ? "_" : "") + (bias ? "BIAS" : "");
  std::string line = head + what + " folded into the " + library.name + " call (" + how + ")";
  return activation ? line : line + "; no activation: " + why;
}

} // namespace

unsigned foldEpilogues(func::FuncOp function, bool convs, std::vector<std::string> &log) {
  SmallVector<Operation *> contractions;
  function.walk([&](Operation *op) {
    if (isa<MatmulOp, Conv2DOp>(op))
      contractions.push_back(op);
  });
  unsigned folded = 0;
  for (Operation *op : contractions) {
    bool has = isa<MatmulOp>(op) ? cast<MatmulOp>(op).getBias() ||
                                       cast<MatmulOp>(op).getActivation()
                                 : cast<Conv2DOp>(op).getBias() ||
                                       cast<Conv2DOp>(op).getActivation();
    if (has)
      log.push_back("epilogue: " + describe(op) + ": has one already");
    else
      log.push_back(fold(op, convs, folded));
  }
  return folded;
}

} // namespace smelt
