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

/// The one value of `value`'s elements when they are all one float: a splat constant, or a
/// broadcast of one (how the importer and the builder write Clip's bounds and scalars).
std::optional<double> splatOf(Value value) {
  if (auto broadcast = value.getDefiningOp<BroadcastInDimOp>())
    value = broadcast.getX();
  auto constant = value.getDefiningOp<ConstantOp>();
  auto dense = constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// `user` as a binary op of kind Op of `value` and a splat of `splat` (either side), or null.
template <typename Op> Op withSplat(Operation *user, Value value, double splat) {
  auto op = dyn_cast_or_null<Op>(user);
  if (!op)
    return nullptr;
  Value other = op.getLhs() == value ? op.getRhs() : op.getRhs() == value ? op.getLhs() : Value();
  std::optional<double> s = other && other != value ? splatOf(other) : std::nullopt;
  // 1/6 is rounded to the tensor's type.
  return s && std::abs(*s - splat) <= 1e-6 * std::max(1.0, std::abs(splat)) ? op : nullptr;
}

/// min(max(x, 0), 6) on `value`, whose only user is `user` (ONNX's Clip(0, 6), MobileNetV2's
/// activation), the two ops appended to `chain`; false if the ops after `value` are not that.
bool relu6After(Value value, Operation *user, Operation *op, SmallVectorImpl<Operation *> &chain) {
  std::string ignored;
  auto max = withSplat<MaxOp>(user, value, 0);
  auto min = max ? withSplat<MinOp>(soleUser(max.getResult(), op, "", ignored), max.getResult(), 6)
                 : nullptr;
  if (!min)
    return false;
  chain.append({max, min});
  return true;
}

/// x * g(x) on x = `value`: `value` has two users, the first op of the gate g, which `gate`
/// follows from there (appending its ops to the list it is given and returning g(x), or null),
/// and the product of x and g(x), g(x)'s only user. The gate's ops and the product are appended
/// to `chain`.
template <typename Gate>
bool gatedAfter(Value value, Operation *op, Gate gate, SmallVectorImpl<Operation *> &chain) {
  SmallVector<Operation *> users(value.getUsers());
  if (users.size() != 2)
    return false;
  std::string ignored;
  for (int first = 0; first < 2; ++first) {
    auto product = dyn_cast<MulOp>(users[1 - first]);
    if (!product || deviceOf(users[first]) != deviceOf(op) || deviceOf(product) != deviceOf(op))
      continue;
    SmallVector<Operation *, 4> gateOps;
    Value gated = gate(users[first], gateOps);
    if (!gated || soleUser(gated, op, "", ignored) != product.getOperation())
      continue;
    Value other = product.getLhs() == gated ? product.getRhs() : product.getLhs();
    if (other != value)
      continue;
    chain.append(gateOps.begin(), gateOps.end());
    chain.push_back(product);
    return true;
  }
  return false;
}

/// x * min(max(x * (1/6) + 0.5, 0), 1) on x = `value` (ONNX's HardSwish as imported,
/// MobileNetV3's activation): the five ops appended to `chain`.
bool hardswishAfter(Value value, Operation *op, SmallVectorImpl<Operation *> &chain) {
  auto gate = [&](Operation *first, SmallVectorImpl<Operation *> &ops) -> Value {
    std::string ignored;
    auto scale = withSplat<MulOp>(first, value, 1.0 / 6);
    auto shift =
        scale ? withSplat<AddOp>(soleUser(scale.getResult(), op, "", ignored), scale.getResult(),
                                 0.5)
              : nullptr;
    auto max = shift ? withSplat<MaxOp>(soleUser(shift.getResult(), op, "", ignored),
                                        shift.getResult(), 0)
                     : nullptr;
    auto min = max ? withSplat<MinOp>(soleUser(max.getResult(), op, "", ignored),
                                      max.getResult(), 1)
                   : nullptr;
    if (!min)
      return {};
    ops.append({scale, shift, max, min});
    return min.getResult();
  };
  return gatedAfter(value, op, gate, chain);
}

/// x * logistic(x) on x = `value` (EfficientNet's activation, ONNX's x * Sigmoid(x)): the two
/// ops appended to `chain`.
bool swishAfter(Value value, Operation *op, SmallVectorImpl<Operation *> &chain) {
  auto gate = [&](Operation *first, SmallVectorImpl<Operation *> &ops) -> Value {
    auto logistic = dyn_cast<LogisticOp>(first);
    if (!logistic)
      return {};
    ops.push_back(logistic);
    return logistic.getResult();
  };
  return gatedAfter(value, op, gate, chain);
}

/// The activation the ops after `value` compute, if `library` applies it; its ops are appended
/// to `chain` (one op for relu, tanh and logistic, more for relu6, hardswish and swish). Otherwise
/// nothing, and `why`.
std::optional<Epilogue> activationAfter(Value value, Operation *op, const Library &library,
                                        SmallVectorImpl<Operation *> &chain, std::string &why) {
  // Written out by ops of their own only on the CPU's oneDNN (post-ops).
  if (library.postOps && hardswishAfter(value, op, chain))
    return Epilogue::hardswish;
  if (library.postOps && swishAfter(value, op, chain))
    return Epilogue::swish;
  Operation *user = soleUser(
      value, op, value == op->getResult(0) ? "its result" : "the bias add's result", why);
  if (!user)
    return std::nullopt;
  if (library.postOps && relu6After(value, user, op, chain))
    return Epilogue::relu6;
  std::optional<Epilogue> kind = llvm::TypeSwitch<Operation *, std::optional<Epilogue>>(user)
                                     .Case([](ReluOp) { return Epilogue::relu; })
                                     .Case([](TanhOp) { return Epilogue::tanh; })
                                     .Case([](LogisticOp) { return Epilogue::logistic; })
                                     .Default([](Operation *) { return std::nullopt; });
  if (!kind) {
    why = "its user " + describe(user) +
          " is not relu, tanh, logistic, relu6 (min(max(x, 0), 6)), hardswish or swish";
    return std::nullopt;
  }
  if (*kind == Epilogue::relu || library.postOps) {
    chain.push_back(user);
    return kind;
  }
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
      if (isa_and_present<BroadcastInDimOp, ConvertOp, ConstantOp>(operand.getDefiningOp()))
        unused.insert(operand.getDefiningOp());
    dead->erase();
  }
  while (!unused.empty()) {
    Operation *candidate = unused.pop_back_val();
    if (!candidate->use_empty())
      continue;
    if (candidate->getNumOperands() &&
        isa_and_present<BroadcastInDimOp, ConstantOp>(candidate->getOperand(0).getDefiningOp()))
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
  SmallVector<Operation *, 8> folded{op};
  Value bias;                     // the add's operand that broadcasts it
  Value value = op->getResult(0); // what the activation would read
  std::string ignored;
  auto add = dyn_cast_or_null<AddOp>(soleUser(value, op, "", ignored));
  if (add) {
    Value other = add.getLhs() == value ? add.getRhs() : add.getLhs();
    if (other != value && biasVector(other, resultType, nullptr))
      bias = other;
    if (bias) {
      folded.push_back(add);
      value = add.getResult();
    }
  }
  std::optional<Epilogue> activation;
  if (add && !bias)
    why = "its user 'add' adds no vector broadcast along the last dimension";
  else
    activation = activationAfter(value, op, library, folded, why);
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
