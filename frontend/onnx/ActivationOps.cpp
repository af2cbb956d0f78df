// Converters of ONNX's activations that Smelt has no op for, as compositions of the ops it has:
// LeakyRelu and the ELUs are selects, HardSigmoid a clamp, Softplus log(e^x + 1), Gelu (opset
// 20) erf or tanh as the builder's gelu, Mish (18) x tanh(softplus x), Swish (24) and SwiGLU
// (28) a product with a sigmoid. Each computes in its input's float type, as ONNX does. The
// recurrent layers' activations, named by a string attribute, are the same functions.
#include "frontend/onnx/NodeImporter.h"

#include "frontend/Layers.h"

namespace smelt::onnx {
namespace {

Tensor scalar(Tensor like, double v) { return scalarLike(like, v); }
Tensor isNegative(Tensor x) { return compare(x, scalar(x, 0), CompareDirection::lt); }

// The ops' default attributes, which the recurrent layers' functions of the same name share.
constexpr double kLeakyReluAlpha = 0.01, kEluAlpha = 1.0, kThresholdedReluAlpha = 1.0;
constexpr double kHardSigmoidAlpha = 0.2, kHardSigmoidBeta = 0.5;

/// log(e^x + 1): e^x overflows to inf above ~88 in f32, and so does the result, which Mish's
/// tanh then takes to 1 (x itself, as it should be).
Tensor softplusOf(Tensor x) { return log(add(exp(x), scalar(x, 1))); }
void softplus(NodeImporter &n) { n.setOutput(0, softplusOf(floatInput(n, 0))); }
Tensor softsignOf(Tensor x) { return div(x, add(abs(x), scalar(x, 1))); }
void softsign(NodeImporter &n) { n.setOutput(0, softsignOf(floatInput(n, 0))); }

Tensor leakyReluOf(Tensor x, double alpha) {
  return select(isNegative(x), mul(x, scalar(x, alpha)), x);
}
void leakyRelu(NodeImporter &n) {
  n.setOutput(0, leakyReluOf(floatInput(n, 0), n.attrFloat("alpha", kLeakyReluAlpha)));
}
void prelu(NodeImporter &n) {
  Tensor x = floatInput(n, 0), slope = n.input(1);
  n.setOutput(0, select(isNegative(x), mul(x, slope), x));
}
/// alpha * (exp(x) - 1) where x < 0 (or <= 0), else x.
Tensor eluOf(Tensor x, double alpha) {
  return select(isNegative(x), mul(sub(exp(x), scalar(x, 1)), scalar(x, alpha)), x);
}
void elu(NodeImporter &n) {
  n.setOutput(0, eluOf(floatInput(n, 0), n.attrFloat("alpha", kEluAlpha)));
}
void selu(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  double alpha = n.attrFloat("alpha", 1.67326319217681884765625);
  double gamma = n.attrFloat("gamma", 1.05070102214813232421875);
  n.setOutput(0, mul(eluOf(x, alpha), scalar(x, gamma)));
}
void celu(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  double alpha = n.attrFloat("alpha", 1.0);
  Tensor e = mul(sub(exp(div(x, scalar(x, alpha))), scalar(x, 1)), scalar(x, alpha));
  n.setOutput(0, add(relu(x), minimum(e, scalar(x, 0))));
}
Tensor thresholdedReluOf(Tensor x, double alpha) {
  return select(compare(x, scalar(x, alpha), CompareDirection::gt), x, scalar(x, 0));
}
void thresholdedRelu(NodeImporter &n) {
  n.setOutput(0, thresholdedReluOf(floatInput(n, 0), n.attrFloat("alpha", kThresholdedReluAlpha)));
}
Tensor hardSigmoidOf(Tensor x, double alpha, double beta) {
  return clamp(add(mul(x, scalar(x, alpha)), scalar(x, beta)), 0, 1);
}
void hardSigmoid(NodeImporter &n) {
  n.setOutput(0, hardSigmoidOf(floatInput(n, 0), n.attrFloat("alpha", kHardSigmoidAlpha),
                               n.attrFloat("beta", kHardSigmoidBeta)));
}
void hardSwish(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  n.setOutput(0, mul(x, hardSigmoidOf(x, 1.0 / 6, 0.5)));
}
void shrink(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  double bias = n.attrFloat("bias", 0), lambd = n.attrFloat("lambd", 0.5);
  n.setOutput(0,
              select(compare(x, scalar(x, -lambd), CompareDirection::lt), add(x, scalar(x, bias)),
                     select(compare(x, scalar(x, lambd), CompareDirection::gt),
                            sub(x, scalar(x, bias)), scalar(x, 0))));
}

/// approximate "none": x/2 (1 + erf(x / sqrt 2)); "tanh": PyTorch's gelu(approximate="tanh").
void geluOp(NodeImporter &n) {
  std::string approximate = n.attrString("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    n.unsupported("approximate '" + approximate + "' (Gelu knows 'none' and 'tanh')");
  n.setOutput(0, gelu(floatInput(n, 0), approximate == "tanh"));
}
void mish(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  n.setOutput(0, mul(x, tanh(softplusOf(x))));
}
/// x * sigmoid(alpha * x): Swish, and SwiGLU's gate.
Tensor swishOf(Tensor x, double alpha) {
  return mul(x, logistic(alpha == 1.0 ? x : mul(x, scalar(x, alpha))));
}
void swish(NodeImporter &n) {
  n.setOutput(0, swishOf(floatInput(n, 0), n.attrFloat("alpha", 1.0)));
}
/// Swish(A) * B, of one shape: ONNX does not broadcast them.
void swiGlu(NodeImporter &n) {
  Tensor gate = floatInput(n, 0), value = floatInput(n, 1);
  if (gate.shape() != value.shape() || gate.dtype() != value.dtype())
    fail(ImportErrorKind::BadFile, "SwiGLU's A and B must have one shape and type; they are " +
                                       shapeString(gate.shape()) + " " + dtypeName(gate.dtype()) +
                                       " and " + shapeString(value.shape()) + " " +
                                       dtypeName(value.dtype()));
  n.setOutput(0, mul(swishOf(gate, n.attrFloat("alpha", 1.0)), value));
}

/// One activation function the recurrent layers name: whether it takes alpha and beta, and their
/// defaults (those of the ONNX op of that name; none for Affine and ScaledTanh, which have none).
struct ActivationKind {
  const char *name;
  bool takesAlpha, takesBeta;
  std::optional<double> alpha, beta;
  Tensor (*apply)(Tensor x, double alpha, double beta);
};

Tensor affineOf(Tensor x, double alpha, double beta) {
  return add(mul(x, scalar(x, alpha)), scalar(x, beta));
}
Tensor scaledTanhOf(Tensor x, double alpha, double beta) {
  return mul(tanh(mul(x, scalar(x, beta))), scalar(x, alpha));
}

const ActivationKind kRecurrentActivations[] = {
    {"Relu", false, false, {}, {}, [](Tensor x, double, double) { return relu(x); }},
    {"Tanh", false, false, {}, {}, [](Tensor x, double, double) { return tanh(x); }},
    {"Sigmoid", false, false, {}, {}, [](Tensor x, double, double) { return logistic(x); }},
    {"Affine", true, true, {}, {}, affineOf},
    {"LeakyRelu",
     true,
     false,
     kLeakyReluAlpha,
     {},
     [](Tensor x, double a, double) { return leakyReluOf(x, a); }},
    {"ThresholdedRelu",
     true,
     false,
     kThresholdedReluAlpha,
     {},
     [](Tensor x, double a, double) { return thresholdedReluOf(x, a); }},
    {"ScaledTanh", true, true, {}, {}, scaledTanhOf},
    {"HardSigmoid", true, true, kHardSigmoidAlpha, kHardSigmoidBeta, hardSigmoidOf},
    {"Elu", true, false, kEluAlpha, {}, [](Tensor x, double a, double) { return eluOf(x, a); }},
    {"Softsign", false, false, {}, {}, [](Tensor x, double, double) { return softsignOf(x); }},
    {"Softplus", false, false, {}, {}, [](Tensor x, double, double) { return softplusOf(x); }},
};

} // namespace

std::vector<RecurrentActivation> recurrentActivations(const NodeImporter &n,
                                                      const std::vector<std::string> &defaults,
                                                      int64_t directions) {
  std::vector<std::string> names;
  if (const ::onnx::AttributeProto *given = n.attribute("activations"))
    names.assign(given->strings().begin(), given->strings().end());
  else
    for (int64_t d = 0; d < directions; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() != defaults.size() * size_t(directions))
    fail(ImportErrorKind::BadFile,
         "activations lists " + std::to_string(names.size()) + " functions; " + n.node.op_type() +
             " takes " + std::to_string(defaults.size()) + " per direction, " +
             std::to_string(defaults.size() * size_t(directions)) + " here");
  auto floats = [&](const char *name) {
    const ::onnx::AttributeProto *a = n.attribute(name);
    return a ? std::vector<double>(a->floats().begin(), a->floats().end()) : std::vector<double>{};
  };
  // Alphas and betas are consumed in the order of the functions that take them, as ONNX
  // Runtime reads the spec's "in the order of activation functions".
  std::vector<double> alphas = floats("activation_alpha"), betas = floats("activation_beta");
  size_t nextAlpha = 0, nextBeta = 0;
  auto take = [&](const std::string &name, const char *what, const std::vector<double> &values,
                  size_t &next, std::optional<double> fallback) {
    if (next < values.size())
      return values[next++];
    if (!fallback)
      n.unsupported("activation " + name + " without a value in " + what + " (" + name +
                    " has no default)");
    return *fallback;
  };
  std::vector<RecurrentActivation> result;
  for (const std::string &name : names) {
    const ActivationKind *kind = nullptr;
    for (const ActivationKind &k : kRecurrentActivations)
      if (llvm::StringRef(name).equals_insensitive(k.name))
        kind = &k;
    if (!kind)
      n.unsupported("activation '" + name +
                    "' (ONNX's recurrent layers take Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
                    "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)");
    RecurrentActivation activation{kind->apply, 0, 0};
    if (kind->takesAlpha)
      activation.alpha = take(kind->name, "activation_alpha", alphas, nextAlpha, kind->alpha);
    if (kind->takesBeta)
      activation.beta = take(kind->name, "activation_beta", betas, nextBeta, kind->beta);
    result.push_back(activation);
  }
  return result;
}

void addActivationOps(ConverterTable &t) {
  t["Softplus"] = softplus;
  t["Softsign"] = softsign;
  t["LeakyRelu"] = leakyRelu;
  t["PRelu"] = prelu;
  t["Elu"] = elu;
  t["Selu"] = selu;
  t["Celu"] = celu;
  t["ThresholdedRelu"] = thresholdedRelu;
  t["HardSigmoid"] = hardSigmoid;
  t["HardSwish"] = hardSwish;
  t["Shrink"] = shrink;
  t["Gelu"] = geluOp;
  t["Mish"] = mish;
  t["Swish"] = swish;
  t["SwiGLU"] = swiGlu;
}

} // namespace smelt::onnx
