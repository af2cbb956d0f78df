// The converter of ONNX's Einsum where the equation is a contraction: each operand's indices
// distinct (no diagonals) and no ellipsis. Every operand is transposed into one order of all
// the equation's indices (the output's first, then the summed ones), broadcast to their full
// shape, the operands multiplied and the summed indices reduced. That materializes the whole
// product, which suits the small contractions models write as Einsum (transposes, sums, batch
// matmuls of heads); a large one is better written as MatMul, which maps onto smelt.matmul.
#include "frontend/onnx/NodeImporter.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <optional>

namespace smelt::onnx {
namespace {

/// "ij,jk->ik" as its operands' index letters and the output's.
struct Equation {
  std::vector<std::string> operands;
  std::string output;
};

Equation parseEquation(const NodeImporter &n) {
  std::string text;
  for (char c : n.attrString("equation", ""))
    if (c != ' ')
      text += c;
  if (text.find("...") != std::string::npos)
    n.unsupported("equation '" + text + "' has an ellipsis (broadcast dimensions)");
  Equation eq;
  size_t arrow = text.find("->");
  std::string inputs = text.substr(0, arrow);
  for (size_t begin = 0;;) {
    size_t comma = inputs.find(',', begin);
    eq.operands.push_back(inputs.substr(begin, comma - begin));
    if (comma == std::string::npos)
      break;
    begin = comma + 1;
  }
  std::map<char, int> uses;
  for (const std::string &operand : eq.operands)
    for (char c : operand) {
      if (!std::isalpha(static_cast<unsigned char>(c)))
        fail(ImportErrorKind::BadFile, "equation '" + text + "': '" + c + "' is not an index");
      if (std::count(operand.begin(), operand.end(), c) > 1)
        n.unsupported("equation '" + text + "' repeats index '" + c + "' in one operand (a "
                      "diagonal)");
      ++uses[c];
    }
  if (arrow != std::string::npos) {
    eq.output = text.substr(arrow + 2);
  } else { // implicit: the indices used once, in alphabetical order
    for (auto [c, count] : uses)
      if (count == 1)
        eq.output += c;
  }
  for (char c : eq.output)
    if (!uses.count(c) || std::count(eq.output.begin(), eq.output.end(), c) > 1)
      fail(ImportErrorKind::BadFile, "equation '" + text + "': output index '" +
                                         std::string(1, c) + "' is not one of the inputs' or repeats");
  if (int(eq.operands.size()) != n.numInputs())
    fail(ImportErrorKind::BadFile, "equation '" + text + "' names " +
                                       std::to_string(eq.operands.size()) + " operands, the node has " +
                                       std::to_string(n.numInputs()));
  return eq;
}

void einsum(NodeImporter &n) {
  Equation eq = parseEquation(n);
  // All indices: the output's in its order, then the summed ones as they first appear.
  std::string order = eq.output;
  for (const std::string &operand : eq.operands)
    for (char c : operand)
      if (order.find(c) == std::string::npos)
        order += c;
  // Each index's size, the same in every operand that has it.
  std::vector<int64_t> full(order.size(), -1);
  for (size_t i = 0; i < eq.operands.size(); ++i) {
    Tensor x = n.input(int(i));
    const std::string &indices = eq.operands[i];
    if (x.rank() != int64_t(indices.size()))
      fail(ImportErrorKind::BadFile, "operand " + std::to_string(i) + " has rank " +
                                         std::to_string(x.rank()) + ", its indices '" + indices +
                                         "' say " + std::to_string(indices.size()));
    for (size_t axis = 0; axis < indices.size(); ++axis) {
      int64_t &size = full[order.find(indices[axis])];
      if (size >= 0 && size != x.dim(int64_t(axis)))
        fail(ImportErrorKind::BadFile, std::string("index '") + indices[axis] + "' has sizes " +
                                           std::to_string(size) + " and " +
                                           std::to_string(x.dim(int64_t(axis))));
      size = x.dim(int64_t(axis));
    }
  }
  std::optional<Tensor> product;
  for (size_t i = 0; i < eq.operands.size(); ++i) {
    Tensor x = n.input(int(i));
    const std::string &indices = eq.operands[i];
    // The operand's axes in the global order, then where each lands in the full shape.
    std::vector<int64_t> axes(indices.size());
    std::iota(axes.begin(), axes.end(), 0);
    std::sort(axes.begin(), axes.end(), [&](int64_t a, int64_t b) {
      return order.find(indices[size_t(a)]) < order.find(indices[size_t(b)]);
    });
    std::vector<int64_t> dims;
    for (int64_t axis : axes)
      dims.push_back(int64_t(order.find(indices[size_t(axis)])));
    Tensor aligned = std::is_sorted(axes.begin(), axes.end()) ? x : transpose(x, axes);
    Tensor spread = broadcastInDim(aligned, full, dims);
    product = product ? mul(*product, spread) : spread;
  }
  std::vector<int64_t> summed(order.size() - eq.output.size());
  std::iota(summed.begin(), summed.end(), int64_t(eq.output.size()));
  n.setOutput(0, summed.empty() ? *product : reduceSum(*product, summed));
}

} // namespace

void addEinsumOp(ConverterTable &t) { t["Einsum"] = einsum; }

} // namespace smelt::onnx
