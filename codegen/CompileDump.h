// --dump-dir: what one compile did, as files in a directory of its own (DIR/<function>-<N>):
// the IR before the pipeline and after each pass, numbered in order (003-smelt-fuse.mlir),
// the fusion report, the graph as DOT (and SVG when Graphviz is installed), the kernels'
// CUDA source, PTX and LLVM IR, and manifest.json listing every file with what it is.
#pragma once

#include "runtime/Status.h"
#include "runtime/Trace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <map>
#include <string>
#include <vector>

namespace smelt::codegen {

class CompileDump {
public:
  /// Creates DIR/<function>-<N> with the first N not taken (two compiles never share one).
  static rt::Expected<std::unique_ptr<CompileDump>> create(const std::string &root,
                                                           const std::string &function);

  const std::string &directory() const { return directory_; }
  /// DIR/<name>, for a file someone else writes (the fusion report); record() lists it.
  std::string path(const std::string &name) const { return directory_ + "/" + name; }
  void record(const std::string &name, const std::string &kind);


  /// Writes `contents` to DIR/<name> and lists it.
  rt::Status write(const std::string &name, const std::string &contents, const std::string &kind);
  /// graph.dot, and graph.svg when `dot` is on the PATH and `function` has at most 1,500 ops
  /// (dot's layout of larger graphs takes many seconds).
  rt::Status writeGraph(mlir::func::FuncOp function);
  /// The compiled Executable's peak bytes per device (smelt-assign-buffers), for the manifest.
  void setPeakBytes(std::map<std::string, uint64_t> peakBytes) { peakBytes_ = std::move(peakBytes); }
  /// manifest.json: every file, in the order written, with its kind, and the peak bytes.
  rt::Status finish();

private:
  explicit CompileDump(std::string directory) : directory_(std::move(directory)) {}
  std::string directory_;
  std::vector<std::pair<std::string, std::string>> files_; // name, kind
  std::map<std::string, uint64_t> peakBytes_;
  unsigned nextPass_ = 1;
  friend class PassInstrumentation;
  friend void instrumentPasses(mlir::PassManager &, mlir::ModuleOp, CompileDump *, rt::Trace *);
};

/// With a dump, writes 000-input.mlir now and NNN-<pass>.mlir after every pass `pm` runs;
/// with a trace, each pass becomes a span on the compiler's "passes" track. Either may be null.
void instrumentPasses(mlir::PassManager &pm, mlir::ModuleOp module, CompileDump *dump,
                      rt::Trace *trace);

} // namespace smelt::codegen
