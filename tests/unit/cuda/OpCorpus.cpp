// The op x dtype corpus: every op that can sit in a fusion, in every dtype it accepts (and every
// layout a reduce can get; gather with i32 and i64 indices), each as its own fusion of one
// module's @main.
#include "CudaCorpus.h"

#include "runtime/DType.h"

namespace smelt::cuda_test {
namespace {

const std::vector<std::string> kFloats = {"f32", "f16", "bf16", "f64"};
const std::vector<std::string> kNumbers = {"f32", "f16", "bf16", "f64", "i32", "i64"};
const std::vector<std::string> kAll = {"f32", "f16", "bf16", "f64", "i32", "i64", "i1"};

std::string tensor(const std::string &dtype, const std::string &shape = "5x7") {
  return "tensor<" + shape + "x" + dtype + ">";
}

/// Text of a module whose @main holds one fusion per add().
class Corpus {
public:
  /// A fusion of `kind` over arguments of `inputs` types (%in0, %in1 ... in `ops`), whose
  /// `ops` define %r of type `result`, which it yields.
  void add(const std::vector<std::string> &inputs, const std::string &ops,
           const std::string &result, const char *kind = "loop") {
    std::string operands, types, blockArgs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string sep = i ? ", " : "";
      std::string arg = "%a" + std::to_string(arguments_++);
      signature_ += (signature_.empty() ? "" : ", ") + arg + ": " + inputs[i];
      operands += sep + arg;
      types += sep + inputs[i];
      blockArgs += sep + "%in" + std::to_string(i) + ": " + inputs[i];
    }
    body_ += "  %f" + std::to_string(fusions_++) + " = smelt.fusion " + kind + " (" + operands +
             ") : (" + types + ") -> " + result + " {\n  ^bb0" +
             (blockArgs.empty() ? "" : "(" + blockArgs + ")") + ":\n    " + ops +
             "\n    smelt.yield %r : " + result + "\n  }\n";
  }
  std::string text() const {
    return "func.func @main(" + signature_ + ") {\n" + body_ + "  return\n}\n";
  }
  int size() const { return fusions_; }

private:
  std::string signature_, body_;
  int arguments_ = 0, fusions_ = 0;
};

} // namespace

OpCorpus everyOpInEveryDtype() {
  Corpus corpus;
  for (const char *op : {"neg", "abs", "relu"})
    for (const std::string &t : kNumbers)
      corpus.add({tensor(t)}, "%r = smelt." + std::string(op) + " %in0 : " + tensor(t), tensor(t));
  for (const char *op : {"exp", "log", "tanh", "logistic", "sqrt", "rsqrt", "erf", "sin", "cos"})
    for (const std::string &t : kFloats)
      corpus.add({tensor(t)}, "%r = smelt." + std::string(op) + " %in0 : " + tensor(t), tensor(t));
  for (const char *op : {"add", "sub", "mul", "div", "max", "min"})
    for (const std::string &t : kNumbers)
      corpus.add({tensor(t), tensor(t)},
                 "%r = smelt." + std::string(op) + " %in0, %in1 : " + tensor(t), tensor(t));
  for (const std::string &t : kFloats)
    corpus.add({tensor(t), tensor(t)}, "%r = smelt.pow %in0, %in1 : " + tensor(t), tensor(t));
  for (const char *direction : {"eq", "ne", "lt", "le", "gt", "ge"})
    for (const std::string &t : kAll)
      corpus.add({tensor(t), tensor(t)},
                 "%r = smelt.compare " + std::string(direction) + ", %in0, %in1 : " + tensor(t),
                 tensor("i1"));
  for (const std::string &t : kAll) {
    corpus.add({tensor("i1"), tensor(t), tensor(t)},
               "%r = smelt.select %in0, %in1, %in2 : " + tensor("i1") + ", " + tensor(t),
               tensor(t));
    for (const std::string &to : kAll)
      if (to != t)
        corpus.add({tensor(t)}, "%r = smelt.convert %in0 : " + tensor(t) + " -> " + tensor(to),
                   tensor(to));
    corpus.add({tensor(t, "7")},
               "%r = smelt.broadcast_in_dim %in0, dims = [1] : " + tensor(t, "7") + " -> " +
                   tensor(t),
               tensor(t));
    corpus.add({tensor(t, "35")},
               "%r = smelt.reshape %in0 : " + tensor(t, "35") + " -> " + tensor(t), tensor(t));
    corpus.add({tensor(t, "7x5")},
               "%r = smelt.transpose %in0, permutation = [1, 0] : " + tensor(t, "7x5"), tensor(t));
    std::string splat = t == "i1" ? "true" : rt::isFloat(*rt::parseDType(t)) ? "-1.5" : "-3";
    corpus.add({}, "%r = smelt.constant dense<" + splat + "> : " + tensor(t), tensor(t));
    if (t != "i1")
      corpus.add({}, "%r = smelt.iota dim = 1 : " + tensor(t), tensor(t));
  }
  // gather: every table type with each index type, reading the row from the index element;
  // a rank-1 table (read at the loop index) and a gather summed inside a reduction.
  for (const std::string &t : kNumbers)
    for (const char *index : {"i32", "i64"}) {
      corpus.add({tensor(t, "9x7"), tensor(index, "5")},
                 "%r = smelt.gather %in0[%in1] : " + tensor(t, "9x7") + ", " + tensor(index, "5"),
                 tensor(t));
      corpus.add({tensor(t, "9"), tensor(index)},
                 "%r = smelt.gather %in0[%in1] : " + tensor(t, "9") + ", " + tensor(index),
                 tensor(t));
    }
  for (const std::string &t : kFloats)
    corpus.add({tensor(t, "9x7"), tensor("i64", "5")},
               "%g = smelt.gather %in0[%in1] : " + tensor(t, "9x7") + ", " + tensor("i64", "5") +
                   "\n    %r = smelt.reduce sum %g axes = [1] : " + tensor(t),
               tensor(t, "5"), "reduction");
  // Each layout of the reduction emitter: a warp per row, a block per row, columns.
  struct Reduction {
    const char *shape, *axes, *result;
  };
  for (const char *kind : {"sum", "max", "min"})
    for (const std::string &t : kNumbers)
      for (Reduction r :
           {Reduction{"5x7", "1", "5"}, Reduction{"3x1500", "1", "3"}, Reduction{"5x7", "0", "7"}})
        corpus.add({tensor(t, r.shape)},
                   "%r = smelt.reduce " + std::string(kind) + " %in0 axes = [" + r.axes +
                       "] : " + tensor(t, r.shape),
                   tensor(t, r.result), "reduction");
  return {corpus.text(), corpus.size()};
}

} // namespace smelt::cuda_test
