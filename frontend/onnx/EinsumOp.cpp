// The converter of ONNX's Einsum, as NumPy reads the equation: ellipses (broadcast dimensions)
// and repeated indices in one operand (diagonals, traces) included. An operand's diagonals are
// taken first; then every operand is transposed into one order of all the equation's indices
// (the output's first, then the summed ones), broadcast to their full shape, the operands
// multiplied and the summed indices reduced. That materializes the whole
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

/// "ij,jk->ik" as its operands' index letters and the output's, ellipses spelled out.
struct Equation {
  std::vector<std::string> operands;
  std::string output;
  /// The letters that stand for ellipsis dimensions: they broadcast (a size of 1 against any).
  std::string broadcast;
};

/// The equation of node `n`, whose operands have these ranks. Each operand's "..." becomes
/// letters of its own for the dimensions its letters do not name, the same letters for every
/// operand, aligned right (NumPy's broadcasting); the output's "..." all of them. Without an
/// explicit output, it is the ellipsis, then the letters used once in alphabetical order.
Equation parseEquation(const NodeImporter &n, const std::vector<int64_t> &ranks) {
  std::string text;
  for (char c : n.attrString("equation", ""))
    if (c != ' ')
      text += c;
  auto bad = [&](const std::string &why) {
    fail(ImportErrorKind::BadFile, "equation '" + text + "': " + why);
  };
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
  if (eq.operands.size() != ranks.size())
    fail(ImportErrorKind::BadFile, "equation '" + text + "' names " +
                                       std::to_string(eq.operands.size()) +
                                       " operands, the node has " + std::to_string(ranks.size()));
  std::string output = arrow == std::string::npos ? "" : text.substr(arrow + 2);
  auto letters = [](const std::string &s) {
    std::string out = s;
    if (size_t dots = out.find("..."); dots != std::string::npos)
      out.erase(dots, 3);
    return out;
  };
  for (const std::string &part : eq.operands)
    for (char c : letters(part))
      if (!std::isalpha(static_cast<unsigned char>(c)))
        bad(std::string("'") + c + "' is not an index");
  // The ellipsis dimensions: as many letters as the longest ellipsis, unused ones.
  int64_t ellipsis = 0;
  for (size_t i = 0; i < eq.operands.size(); ++i)
    if (eq.operands[i].find("...") != std::string::npos)
      ellipsis = std::max(ellipsis, ranks[i] - int64_t(letters(eq.operands[i]).size()));
  for (char c : std::string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))
    if (int64_t(eq.broadcast.size()) < ellipsis && text.find(c) == std::string::npos)
      eq.broadcast += c;
  if (int64_t(eq.broadcast.size()) < ellipsis)
    bad("no letters are left for the ellipsis's dimensions");
  for (size_t i = 0; i < eq.operands.size(); ++i) {
    std::string &part = eq.operands[i];
    int64_t named = int64_t(letters(part).size());
    if (size_t dots = part.find("..."); dots != std::string::npos) {
      if (ranks[i] < named)
        bad("operand " + std::to_string(i) + " has rank " + std::to_string(ranks[i]) +
            ", fewer than its letters");
      part.replace(dots, 3, eq.broadcast.substr(size_t(ellipsis - (ranks[i] - named))));
    }
  }
  if (arrow != std::string::npos) {
    if (size_t dots = output.find("..."); dots != std::string::npos)
      output.replace(dots, 3, eq.broadcast);
    else if (ellipsis > 0)
      bad("the output has no '...' for the inputs' ellipsis dimensions");
    eq.output = output;
  } else { // implicit: the ellipsis, then the letters used once, in alphabetical order
    std::map<char, int> uses;
    for (const std::string &part : eq.operands)
      for (char c : part)
        ++uses[c];
    eq.output = eq.broadcast;
    for (auto [c, count] : uses)
      if (count == 1 && eq.broadcast.find(c) == std::string::npos)
        eq.output += c;
  }
  for (char c : eq.output)
    if (std::none_of(eq.operands.begin(), eq.operands.end(),
                     [&](const std::string &part) { return part.find(c) != std::string::npos; }) ||
        std::count(eq.output.begin(), eq.output.end(), c) > 1)
      bad("output index '" + std::string(1, c) + "' is not one of the inputs' or repeats");
  return eq;
}

/// `x` with its repeated indices reduced to their diagonals: for indices "ij" "i" at axes a < b,
/// the entries where both agree, summed over b with the others masked to zero (a trace's
/// diagonal). `indices` loses each repeat.
Tensor diagonals(Tensor x, std::string &indices) {
  for (size_t b = 1; b < indices.size(); ++b) {
    size_t a = indices.find(indices[b]);
    if (a == b)
      continue;
    if (x.dim(int64_t(a)) != x.dim(int64_t(b)))
      fail(ImportErrorKind::BadFile, std::string("index '") + indices[b] + "' has sizes " +
                                         std::to_string(x.dim(int64_t(a))) + " and " +
                                         std::to_string(x.dim(int64_t(b))));
    Graph &g = x.graph();
    Tensor same = compare(iota(g, x.shape(), int64_t(a)), iota(g, x.shape(), int64_t(b)),
                          CompareDirection::eq);
    x = reduceSum(select(same, x, broadcastTo(scalarLike(x, 0), x.shape())), {int64_t(b)});
    indices.erase(b--, 1);
  }
  return x;
}

void einsum(NodeImporter &n) {
  std::vector<Tensor> operands;
  std::vector<int64_t> ranks;
  for (int i = 0; i < n.numInputs(); ++i) {
    operands.push_back(n.input(i));
    ranks.push_back(operands.back().rank());
  }
  Equation eq = parseEquation(n, ranks);
  for (size_t i = 0; i < operands.size(); ++i) {
    if (int64_t(eq.operands[i].size()) != ranks[i])
      fail(ImportErrorKind::BadFile, "operand " + std::to_string(i) + " has rank " +
                                         std::to_string(ranks[i]) + ", its indices '" +
                                         eq.operands[i] + "' say " +
                                         std::to_string(eq.operands[i].size()));
    operands[i] = diagonals(operands[i], eq.operands[i]);
  }
  // All indices: the output's in its order, then the summed ones as they first appear.
  std::string order = eq.output;
  for (const std::string &operand : eq.operands)
    for (char c : operand)
      if (order.find(c) == std::string::npos)
        order += c;
  // Each index's size, the same in every operand that has it; an ellipsis dimension of 1
  // broadcasts.
  std::vector<int64_t> full(order.size(), -1);
  for (size_t i = 0; i < operands.size(); ++i) {
    const std::string &indices = eq.operands[i];
    for (size_t axis = 0; axis < indices.size(); ++axis) {
      int64_t &size = full[order.find(indices[axis])], dim = operands[i].dim(int64_t(axis));
      bool broadcasts = eq.broadcast.find(indices[axis]) != std::string::npos;
      if (size >= 0 && size != dim && !(broadcasts && (size == 1 || dim == 1)))
        fail(ImportErrorKind::BadFile, std::string("index '") + indices[axis] + "' has sizes " +
                                           std::to_string(size) + " and " + std::to_string(dim));
      size = std::max(size, dim);
    }
  }
  std::optional<Tensor> product;
  for (size_t i = 0; i < operands.size(); ++i) {
    Tensor x = operands[i];
    std::string indices = eq.operands[i];
    // Ellipsis dimensions of 1 against a larger size are dropped, and broadcast below.
    std::vector<int64_t> kept;
    std::string keptIndices;
    for (size_t axis = 0; axis < indices.size(); ++axis)
      if (x.dim(int64_t(axis)) == full[order.find(indices[axis])]) {
        kept.push_back(x.dim(int64_t(axis)));
        keptIndices += indices[axis];
      }
    if (keptIndices.size() != indices.size()) {
      x = reshape(x, kept);
      indices = keptIndices;
    }
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
