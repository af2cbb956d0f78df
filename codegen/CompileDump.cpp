// The dump directory of one compile: numbered IR through a pass instrumentation, files, and
// the manifest.
#include "codegen/CompileDump.h"

#include "runtime/FileIO.h"

#include "codegen/GraphViz.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>

namespace smelt::codegen {

rt::Expected<std::unique_ptr<CompileDump>> CompileDump::create(const std::string &root,
                                                               const std::string &function) {
  if (std::error_code error = llvm::sys::fs::create_directories(root))
    return rt::Status::error(root + ": cannot create the dump directory: " + error.message());
  for (unsigned n = 0; n < 100000; ++n) {
    std::string directory = root + "/" + function + "-" + std::to_string(n);
    // create_directory with IgnoreExisting=false fails when it exists: the claim is atomic.
    std::error_code error = llvm::sys::fs::create_directory(directory, false);
    if (!error)
      return std::unique_ptr<CompileDump>(new CompileDump(directory));
    if (error != std::errc::file_exists)
      return rt::Status::error(directory + ": cannot create the dump directory: " +
                               error.message());
  }
  return rt::Status::error(root + ": no free dump directory name for @" + function);
}

void CompileDump::record(const std::string &name, const std::string &kind) {
  files_.push_back({name, kind});
}

/// Writes `contents` to `path` whole or not at all: on a full disk the error names the file
/// and leaves no partial one (an llvm::raw_fd_ostream with an unchecked error aborts the process
/// with "LLVM ERROR: IO failure" when it is destroyed).
static rt::Status writeWhole(const std::string &path, const std::string &contents) {
  return rt::writeFileAtomically(path, [&](int fd, const std::string &tmp) {
    return rt::writeAll(fd, contents.data(), contents.size(), tmp);
  });
}

rt::Status CompileDump::write(const std::string &name, const std::string &contents,
                              const std::string &kind) {
  if (rt::Status s = writeWhole(path(name), contents); !s.ok())
    return s;
  record(name, kind);
  return rt::Status();
}

namespace {

std::string moduleText(mlir::Operation *op) {
  if (!isa<mlir::ModuleOp>(op))
    if (auto module = op->getParentOfType<mlir::ModuleOp>())
      op = module;
  std::string text;
  llvm::raw_string_ostream os(text);
  // Locations in their parseable form (loc("model.mlir":3:5)), so a dumped module parses back.
  op->print(os, mlir::OpPrintingFlags().enableDebugInfo(true, /*prettyForm=*/false));
  return text;
}

} // namespace

/// Writes the module after each pass and times the passes into the trace.
class PassInstrumentation : public mlir::PassInstrumentation {
public:
  PassInstrumentation(CompileDump *dump, rt::Trace *trace) : dump_(dump), trace_(trace) {}

  void runBeforePass(mlir::Pass *, mlir::Operation *) override {
    if (trace_)
      starts_.push_back(trace_->now());
  }

  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override {
    finish(pass, op, "");
  }
  void runAfterPassFailed(mlir::Pass *pass, mlir::Operation *op) override {
    finish(pass, op, "-failed");
  }

private:
  void finish(mlir::Pass *pass, mlir::Operation *op, const char *suffix) {
    std::string argument = pass->getArgument().str();
    if (argument.empty())
      argument = pass->getName().str();
    // A pass without an argument goes by its C++ name ("mlir::detail::OpToOpPassAdaptor"):
    // keep the file name to letters, digits, '.', '-' and '_'.
    for (char &c : argument)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_')
        c = '_';
    if (trace_ && !starts_.empty()) {
      double start = starts_.back();
      starts_.pop_back();
      trace_->span({"compiler", "passes"}, argument, "pass", start, trace_->now() - start);
    }
    if (!dump_)
      return;
    char number[8];
    std::snprintf(number, sizeof number, "%03u", dump_->nextPass_++);
    (void)dump_->write(std::string(number) + "-" + argument + suffix + ".mlir", moduleText(op),
                       "ir after " + argument);
  }

  CompileDump *dump_;
  rt::Trace *trace_;
  std::vector<double> starts_;
};

void instrumentPasses(mlir::PassManager &pm, mlir::ModuleOp module, CompileDump *dump,
                      rt::Trace *trace) {
  if (!dump && !trace)
    return;
  if (dump)
    (void)dump->write("000-input.mlir", moduleText(module), "ir before the pipeline");
  // Every pass of the default pipeline runs on the module itself (no nested pass managers),
  // so the callbacks come in order from one thread.
  pm.addInstrumentation(std::make_unique<PassInstrumentation>(dump, trace));
}

/// The most ops (fusion bodies included) whose graph.svg a dump renders.
constexpr int64_t kMaxRenderedOps = 1500;

rt::Status CompileDump::writeGraph(mlir::func::FuncOp function) {
  if (rt::Status s = write("graph.dot", graphvizDot(function), "graphviz dot"); !s.ok())
    return s;
  llvm::ErrorOr<std::string> dot = llvm::sys::findProgramByName("dot");
  if (!dot)
    return rt::Status(); // Graphviz is optional; the .dot file is the picture's source
  // dot's layout grows faster than the graph: the char LSTM's train step unrolled over 64
  // steps (some 5,900 edges) took 13.9 s of a 24 s dump. A graph that large is read in parts
  // anyway (dot on a cut of graph.dot), so only graph.dot is written for it.
  int64_t ops = 0;
  function.walk([&](mlir::Operation *) { ++ops; });
  if (ops > kMaxRenderedOps)
    return rt::Status();
  std::string svg = path("graph.svg");
  int code = llvm::sys::ExecuteAndWait(*dot, {*dot, "-Tsvg", path("graph.dot"), "-o", svg});
  if (code == 0)
    record("graph.svg", "graphviz svg");
  return rt::Status();
}

rt::Status CompileDump::finish() {
  nlohmann::json files = nlohmann::json::array();
  for (const auto &[name, kind] : files_)
    files.push_back({{"file", name}, {"kind", kind}});
  nlohmann::json manifest = {{"directory", directory_}, {"files", files}};
  if (!peakBytes_.empty())
    manifest["peak_bytes"] = peakBytes_;
  return writeWhole(path("manifest.json"), manifest.dump(2) + "\n");
}

} // namespace smelt::codegen
