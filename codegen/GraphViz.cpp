// DOT for a function: ops as nodes, fusions as clusters, devices as colours.
#include "codegen/GraphViz.h"

#include "ir/SmeltDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace smelt::codegen {

namespace {

std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

std::string escape(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

const char *deviceColour(Operation *op) {
  auto device = op->getAttrOfType<StringAttr>("smelt.device");
  if (device && device.getValue().starts_with("gpu"))
    return "#b7e1cd"; // green: a GPU
  if (device && device.getValue().starts_with("cpu"))
    return "#c9daf8"; // blue: the host
  return "#eeeeee";
}

class DotWriter {
public:
  explicit DotWriter(llvm::raw_ostream &os) : os_(os) {}

  void write(func::FuncOp function) {
    os_ << "digraph \"" << escape(function.getSymName()) << "\" {\n"
        << "  rankdir=TB;\n  graph [fontname=\"monospace\", fontsize=10];\n"
        << "  node [shape=box, style=\"rounded,filled\", fontname=\"monospace\", "
           "fontsize=10];\n";
    for (BlockArgument arg : function.getArguments()) {
      std::string id = "arg" + std::to_string(arg.getArgNumber());
      auto name = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "smelt.name");
      os_ << "  " << id << " [shape=ellipse, fillcolor=\"#ffffff\", label=\""
          << escape(name ? name.str() : id) << "\\n" << escape(typeText(arg.getType()))
          << "\"];\n";
      source_[arg] = id;
    }
    unsigned fusions = 0;
    for (Operation &op : function.getBody().front()) {
      if (auto fusion = dyn_cast<FusionOp>(op)) {
        writeFusion(fusion, fusions++);
        continue;
      }
      std::string id = node(&op);
      for (Value operand : op.getOperands())
        edge(operand, id);
    }
    os_ << "}\n";
  }

private:
  /// A node for `op` (a returned value becomes an "outputs" node).
  std::string node(Operation *op, llvm::StringRef indent = "  ") {
    std::string id = "n" + std::to_string(next_++);
    std::string label = op->getName().stripDialect().str();
    if (isa<func::ReturnOp>(op))
      label = "outputs";
    else if (op->getNumResults() == 1)
      label += "\\n" + escape(typeText(op->getResult(0).getType()));
    if (auto device = op->getAttrOfType<StringAttr>("smelt.device"))
      label += "\\n" + device.str();
    os_ << indent << id << " [label=\"" << label << "\", fillcolor=\"" << deviceColour(op)
        << "\"];\n";
    for (Value result : op->getResults())
      source_[result] = id;
    return id;
  }

  void edge(Value from, const std::string &to) {
    auto it = source_.find(from);
    if (it != source_.end())
      os_ << "  " << it->second << " -> " << to << ";\n";
  }

  void writeFusion(FusionOp fusion, unsigned index) {
    Block &body = fusion.getBody().front();
    for (auto [arg, input] : llvm::zip(body.getArguments(), fusion.getInputs()))
      alias_[arg] = input;
    os_ << "  subgraph cluster_" << index << " {\n    label=\"fusion " << index << " ("
        << stringifyFusionKind(fusion.getKind()) << ")\";\n    style=\"rounded,dashed\";\n";
    std::vector<std::pair<Value, std::string>> edges;
    for (Operation &op : body.without_terminator()) {
      std::string id = node(&op, "    ");
      for (Value operand : op.getOperands())
        edges.push_back({operand, id});
    }
    os_ << "  }\n";
    for (auto &[from, to] : edges)
      edge(alias_.count(from) ? alias_[from] : from, to);
    for (auto [result, yielded] : llvm::zip(fusion.getResults(), fusion.getYield().getValues()))
      source_[result] = source_[yielded];
  }

  llvm::raw_ostream &os_;
  unsigned next_ = 0;
  llvm::DenseMap<Value, std::string> source_;
  llvm::DenseMap<Value, Value> alias_;
};

} // namespace

std::string graphvizDot(func::FuncOp function) {
  std::string text;
  llvm::raw_string_ostream os(text);
  DotWriter(os).write(function);
  return text;
}

} // namespace smelt::codegen
