// ONNX conformance: every node test of ONNX's test data (libonnx-testdata) imported with the
// ONNX importer, compiled with the default pipeline, run on the CPU in process (the JIT) and
// compared with the test's expected outputs at ONNX's tolerance (rtol 1e-3, atol 1e-7); random
// ops' draws, which come from another generator, with the values the expected draws take, and a
// training-mode Dropout's output elements with 0 and the input over 1 - ratio.
//
//   smelt-onnx-conformance [--data DIR] [--claimed FILE] [--docs FILE | --update-docs FILE]
//                          [--verbose] [--filter SUBSTRING]
//
// A test is "claimed" when every op of its model is listed in the claimed-ops file
// (tests/onnx/claimed_ops.txt). Outcomes: passed; unsupported (the importer refused it with a
// documented limit: unsupported op, dtype, attribute value, data-dependent shape, control flow);
// failed (anything else: an internal import error, a compile or run error, a wrong value).
// The exit status is 1 when a claimed test failed, 77 (a ctest skip) when the data is absent.
// docs/onnx.md holds this run's table of the tests that do not pass: --docs fails when it is
// out of date (ctest passes it), --update-docs rewrites it.
#include "codegen/Compile.h"
#include "frontend/onnx/OnnxImport.h"
#include "runtime/CpuExecutor.h"

#include "onnx/onnx_pb.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace smelt;
namespace importer = smelt::onnx;

namespace {

enum class Outcome { Passed, Unsupported, Failed };

struct Result {
  Outcome outcome = Outcome::Passed;
  std::string reason;
};

std::set<std::string> readClaimed(const std::string &path) {
  std::set<std::string> ops;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    for (std::string op; words >> op;)
      ops.insert(op);
  }
  return ops;
}

bool close(double got, double want) {
  if (std::isnan(want))
    return std::isnan(got);
  if (std::isinf(want))
    return got == want;
  return std::abs(got - want) <= 1e-7 + 1e-3 * std::abs(want);
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The numbered .pb files "<prefix>_N.pb" of a data set, in order.
std::vector<std::string> numbered(const fs::path &dir, const std::string &prefix) {
  std::vector<std::string> files;
  for (int i = 0; fs::exists(dir / (prefix + "_" + std::to_string(i) + ".pb")); ++i)
    files.push_back(dir / (prefix + "_" + std::to_string(i) + ".pb"));
  return files;
}

/// Ops whose outputs are random draws.
const std::set<std::string> kRandomOps = {"RandomUniform", "RandomNormal", "RandomUniformLike",
                                          "RandomNormalLike", "Bernoulli", "Multinomial"};

Result unsupported(const std::string &r) { return {Outcome::Unsupported, r}; }
Result failed(const std::string &r) { return {Outcome::Failed, r}; }

/// Binds every integer input of at most 64 elements not bound yet (the scalars and shape
/// vectors a value the importer needs is computed from); false when there was none.
bool bindSmallIntegerInputs(const std::map<std::string, importer::TensorValue> &inputs,
                            importer::ImportOptions &options) {
  bool bound = false;
  for (const auto &[name, value] : inputs) {
    bool isInteger = value.type == DType::i32 || value.type == DType::i64;
    if (isInteger && value.values.size() <= 64 && !options.constantInputs.count(name)) {
      options.constantInputs[name] = value;
      bound = true;
    }
  }
  return bound;
}

/// Why `file`'s data cannot stand for a value declared `info`: older test data store a
/// BFLOAT16 tensor as its UINT16 bits, which Smelt, carrying UINT16 as integers, would read as
/// numbers.
std::optional<std::string> storedAsAnotherType(const fs::path &file,
                                               const ::onnx::ValueInfoProto &info) {
  ::onnx::TensorProto proto;
  std::ifstream in(file, std::ios::binary);
  int declared = info.type().tensor_type().elem_type();
  if (!info.type().has_tensor_type() || !proto.ParseFromIstream(&in) ||
      declared == ::onnx::TensorProto::UNDEFINED || proto.data_type() == declared)
    return std::nullopt;
  return file.filename().string() + " stores '" + info.name() + "' (" +
         ::onnx::TensorProto::DataType_Name(::onnx::TensorProto::DataType(declared)) + ") as " +
         ::onnx::TensorProto::DataType_Name(::onnx::TensorProto::DataType(proto.data_type()));
}

/// One data set of one test: import (binding inputs the importer needs as constants, or with
/// `inputsKnown` every input, so that the importer folds what it can), compile, run, compare.
Result runDataSet(const fs::path &model, const ::onnx::ModelProto &proto, const fs::path &set,
                  bool inputsKnown) {
  std::vector<std::string> inputFiles = numbered(set, "input"), outputFiles = numbered(set, "output");
  // The data's inputs are the graph inputs that are not initializers, in order.
  std::set<std::string> initializers;
  for (const auto &init : proto.graph().initializer())
    initializers.insert(init.name());
  std::vector<std::string> inputNames;
  for (const auto &in : proto.graph().input()) {
    // A sequence or optional input's data is no TensorProto: the import says it is unsupported.
    if (!in.type().has_tensor_type())
      inputFiles.clear();
    if (initializers.count(in.name()))
      continue;
    if (inputNames.size() < inputFiles.size())
      if (std::optional<std::string> other = storedAsAnotherType(inputFiles[inputNames.size()], in))
        return unsupported(*other);
    inputNames.push_back(in.name());
  }
  for (int i = 0; i < proto.graph().output_size() && i < int(outputFiles.size()); ++i)
    if (std::optional<std::string> other =
            storedAsAnotherType(outputFiles[size_t(i)], proto.graph().output(i)))
      return unsupported(*other);
  std::map<std::string, importer::TensorValue> inputs;
  for (size_t i = 0; i < inputFiles.size() && i < inputNames.size(); ++i) {
    llvm::Expected<importer::TensorValue> v = importer::readTensorFile(inputFiles[i]);
    if (!v) {
      auto kind = importer::ImportErrorKind::BadFile;
      std::string message = llvm::toString(llvm::handleErrors(
          v.takeError(), [&](const importer::ImportError &e) -> llvm::Error {
            kind = e.kind;
            return llvm::make_error<llvm::StringError>(e.message, llvm::inconvertibleErrorCode());
          }));
      return kind == importer::ImportErrorKind::UnsupportedDtype ? unsupported("unsupported dtype: " + message)
                                                              : failed(message);
    }
    inputs[inputNames[i]] = std::move(*v);
  }

  mlir::MLIRContext context;
  codegen::loadDialects(context);
  importer::ImportOptions options;
  if (inputsKnown)
    options.constantInputs = inputs;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  // A static-shape compiler takes shape operands (a Reshape's shape, a Slice's starts) as
  // constants: bind each input the importer asks for to this data set's value and retry.
  for (;;) {
    llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> imported =
        importer::importModel(model.string(), options, context);
    if (imported) {
      module = std::move(*imported);
      break;
    }
    std::optional<Result> result;
    bool retry = false;
    llvm::consumeError(llvm::handleErrors(imported.takeError(), [&](const importer::ImportError &e) {
      std::string message = e.message.substr(e.message.find(": ") + 2);
      if (e.kind == importer::ImportErrorKind::DataDependentShape && inputs.count(e.value) &&
          !options.constantInputs.count(e.value)) {
        options.constantInputs[e.value] = inputs[e.value];
        retry = true;
      } else if (e.kind == importer::ImportErrorKind::DataDependentShape &&
                 bindSmallIntegerInputs(inputs, options)) {
        retry = true; // the value is computed from inputs (a size cast to float, say)
      } else if (e.kind == importer::ImportErrorKind::BadFile ||
                 e.kind == importer::ImportErrorKind::BadOption ||
                 e.kind == importer::ImportErrorKind::Internal) {
        result = failed(std::string(importer::kindName(e.kind)) + ": " + message);
      } else {
        result = unsupported(std::string(importer::kindName(e.kind)) + ": " + message);
      }
    }));
    if (!retry)
      return result ? *result : failed("import failed");
  }

  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    if (diagnostics.empty())
      diagnostics = d.str();
    return mlir::success();
  });
  mlir::FailureOr<rt::Executable> exe = codegen::compile(*module, "main");
  if (failed(exe))
    return failed("compile: " + diagnostics);
  std::vector<rt::HostTensor> args, outputs;
  for (const std::string &name : inputNames) {
    if (options.constantInputs.count(name))
      continue;
    args.push_back(importer::hostTensor(inputs[name]));
  }
  rt::Expected<rt::CpuExecutor> cpu = rt::CpuExecutor::create(*exe);
  if (!cpu)
    return failed("executor: " + cpu.message());
  if (rt::Status s = cpu->run(args, outputs); !s.ok())
    return failed("run: " + s.message());
  if (outputs.size() != outputFiles.size())
    return failed(std::to_string(outputs.size()) + " outputs, expected " +
                  std::to_string(outputFiles.size()));
  // Random draws come from another generator than the data's (NumPy's): each element must be
  // one of the values the expected output takes (Bernoulli's 0 and 1), not the same one.
  bool random = false;
  // A Dropout in training mode: its output elements are 0 or x / (1 - ratio).
  std::optional<std::pair<std::vector<double>, double>> dropout;
  for (const auto &node : proto.graph().node()) {
    random |= kRandomOps.count(node.op_type()) > 0;
    if (node.op_type() == "Dropout" && node.input_size() > 2 && inputs.count(node.input(2)) &&
        inputs[node.input(2)].values.at(0) != 0 && inputs.count(node.input(0))) {
      double ratio = node.input_size() > 1 && inputs.count(node.input(1))
                         ? inputs[node.input(1)].values.at(0)
                         : 0.5;
      dropout = {inputs[node.input(0)].values, ratio};
      random = true;
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    llvm::Expected<importer::TensorValue> want = importer::readTensorFile(outputFiles[i]);
    if (!want)
      return unsupported("expected output: " + llvm::toString(want.takeError()));
    if (outputs[i].type().shape != want->shape)
      return failed("output " + std::to_string(i) + " has shape " +
                    shapeText(outputs[i].type().shape) + ", expected " + shapeText(want->shape));
    std::vector<double> got = outputs[i].toDoubles();
    if (dropout && i == 0) {
      for (size_t k = 0; k < got.size(); ++k)
        if (got[k] != 0 && !close(got[k], dropout->first.at(k) / (1 - dropout->second)))
          return failed("output 0 element " + std::to_string(k) + " is " +
                        std::to_string(got[k]) + ", neither 0 nor the input over 1 - ratio");
      continue;
    }
    if (random) {
      std::set<double> support(want->values.begin(), want->values.end());
      if (support.size() > 2)
        return unsupported("random draws of a continuous distribution cannot be compared");
      for (size_t k = 0; k < got.size(); ++k)
        if (!support.count(got[k]))
          return failed("output " + std::to_string(i) + " element " + std::to_string(k) + " is " +
                        std::to_string(got[k]) + ", not a value the expected draws take");
      continue;
    }
    for (size_t k = 0; k < got.size(); ++k)
      if (!close(got[k], want->values[k]))
        return failed("output " + std::to_string(i) + " element " + std::to_string(k) + " is " +
                      std::to_string(got[k]) + ", expected " + std::to_string(want->values[k]));
  }
  return {};
}

Result runTest(const fs::path &dir, std::set<std::string> &ops, bool inputsKnown) {
  fs::path model = dir / "model.onnx";
  ::onnx::ModelProto proto;
  std::ifstream in(model, std::ios::binary);
  if (!proto.ParseFromIstream(&in))
    return failed("model.onnx does not parse");
  for (const auto &node : proto.graph().node())
    ops.insert(node.op_type());
  std::vector<fs::path> sets;
  for (const auto &entry : fs::directory_iterator(dir))
    if (entry.is_directory() && entry.path().filename().string().starts_with("test_data_set_"))
      sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  for (const fs::path &set : sets)
    if (Result r = runDataSet(model, proto, set, inputsKnown); r.outcome != Outcome::Passed)
      return r;
  return {};
}

/// The section of docs/onnx.md that this program writes, between these markers.
const char *kBegin = "<!-- BEGIN: generated by smelt-onnx-conformance --update-docs -->\n";
const char *kEnd = "<!-- END: generated -->\n";

/// Checks (or, with `update`, rewrites) the generated section of `docsPath`.
int syncDocs(const std::string &docsPath, const std::string &section, bool update) {
  std::ifstream in(docsPath);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  size_t begin = text.find(kBegin), end = text.find(kEnd);
  if (!in || begin == std::string::npos || end == std::string::npos || end < begin) {
    llvm::errs() << docsPath << ": no generated section (" << kBegin << ")\n";
    return 1;
  }
  begin += std::strlen(kBegin);
  if (text.compare(begin, end - begin, section) == 0)
    return 0;
  if (!update) {
    llvm::errs() << docsPath << " is out of date with this run: rerun with --update-docs "
                 << docsPath << "\n";
    return 1;
  }
  text.replace(begin, end - begin, section);
  std::ofstream(docsPath) << text;
  llvm::outs() << "updated " << docsPath << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string dataDir = "/usr/share/libonnx-testdata/data/node", claimedPath, filter, docsPath;
  bool verbose = false, updateDocs = false; // --verbose: each test's name before it runs
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--data" && i + 1 < argc)
      dataDir = argv[++i];
    else if (arg == "--claimed" && i + 1 < argc)
      claimedPath = argv[++i];
    else if (arg == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else if ((arg == "--docs" || arg == "--update-docs") && i + 1 < argc) {
      updateDocs = arg == "--update-docs";
      docsPath = argv[++i];
    } else if (arg == "--verbose")
      verbose = true;
    else {
      llvm::errs() << "usage: smelt-onnx-conformance [--data DIR] [--claimed FILE] "
                      "[--docs FILE | --update-docs FILE] [--verbose] [--filter SUBSTRING]\n";
      return 2;
    }
  }
  if (!fs::is_directory(dataDir)) {
    llvm::outs() << "SKIP: no ONNX node tests at " << dataDir << " (install libonnx-testdata)\n";
    return 77;
  }
  std::set<std::string> claimed = readClaimed(claimedPath);
  if (!claimedPath.empty() && claimed.empty()) {
    llvm::errs() << "no claimed ops read from " << claimedPath << "\n";
    return 1;
  }
  // A claimed op the importer does not map is a mistake in the list.
  std::vector<std::string> supported = importer::supportedOps();
  for (const std::string &op : claimed)
    if (!std::count(supported.begin(), supported.end(), op)) {
      llvm::errs() << claimedPath << ": claims " << op << ", which the importer does not map\n";
      return 1;
    }
  std::vector<fs::path> tests;
  for (const auto &entry : fs::directory_iterator(dataDir))
    if (entry.path().filename().string().starts_with("test_") &&
        entry.path().filename().string().find(filter) != std::string::npos)
      tests.push_back(entry.path());
  std::sort(tests.begin(), tests.end());

  // A test whose ops the importer folds runs a second time with every input known at import
  // time: the folded values must be the ones the ops compute.
  std::vector<std::string> folded = importer::foldedOps();
  auto start = std::chrono::steady_clock::now();
  int passed = 0, unsupportedCount = 0, claimedFailures = 0, otherFailures = 0, foldedPassed = 0;
  std::string table;
  for (const fs::path &test : tests) {
    std::set<std::string> ops;
    std::string name = test.filename().string();
    if (verbose)
      llvm::errs() << name << "\n";
    Result r = runTest(test, ops, /*inputsKnown=*/false);
    bool foldable = std::all_of(ops.begin(), ops.end(), [&](const std::string &op) {
      return std::count(folded.begin(), folded.end(), op);
    });
    if (r.outcome == Outcome::Passed && foldable) {
      r = runTest(test, ops, /*inputsKnown=*/true);
      if (r.outcome == Outcome::Passed)
        ++foldedPassed;
      else
        r.reason = "with its inputs known at import time: " + r.reason;
    }
    if (r.outcome == Outcome::Passed) {
      ++passed;
      continue;
    }
    bool isClaimed = std::all_of(ops.begin(), ops.end(),
                                 [&](const std::string &op) { return claimed.count(op); });
    const char *label = r.outcome == Outcome::Unsupported ? "unsupported"
                        : isClaimed                       ? "FAILED (claimed)"
                                                          : "failed";
    (r.outcome == Outcome::Unsupported ? unsupportedCount
                                       : isClaimed ? claimedFailures : otherFailures)++;
    // Reasons name files relative to the data directory, on one line.
    std::string reason = r.reason;
    for (size_t at; (at = reason.find(dataDir + "/")) != std::string::npos;)
      reason.erase(at, dataDir.size() + 1);
    reason = reason.substr(0, 300);
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    llvm::outs() << label << ": " << name << ": " << reason << "\n";
    std::replace(reason.begin(), reason.end(), '|', '/');
    table += "| " + name + " | " + label + " | " + reason + " |\n";
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string summary = std::to_string(tests.size()) + " run, " + std::to_string(passed) +
                        " passed, " + std::to_string(claimedFailures) +
                        " failed of claimed ops, " + std::to_string(otherFailures) +
                        " failed of unclaimed ops, " + std::to_string(unsupportedCount) +
                        " unsupported; " + std::to_string(foldedPassed) +
                        " passed again with their inputs known at import time (folded)";
  llvm::outs() << "ONNX node tests: " << summary << " (" << llvm::format("%.1f", seconds)
               << " s)\n";
  int status = claimedFailures ? 1 : 0;
  if (!docsPath.empty() && filter.empty()) {
    std::string section = "ONNX node tests: " + summary + ".\n\n| test | outcome | reason |\n" +
                          "| --- | --- | --- |\n" + table;
    status |= syncDocs(docsPath, section, updateDocs);
  }
  return status;
}
