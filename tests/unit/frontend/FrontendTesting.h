// Helpers of the frontend tests: print IR, count ops, catch a BuildError and check that it
// names this test's file and line.
#pragma once

#include "frontend/Layers.h"

#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace smelt::frontend_test {

/// `op` in custom assembly form, also while its function still lacks a terminator (before
/// setOutputs), when MLIR's printer would otherwise fall back to the generic form.
inline std::string print(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os, mlir::OpPrintingFlags().assumeVerified());
  return text;
}

inline std::string print(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

inline int countOps(mlir::Operation *root, llvm::StringRef name) {
  int n = 0;
  root->walk([&](mlir::Operation *op) { n += op->getName().getStringRef() == name; });
  return n;
}

/// The first op named `name` under `root`, or null.
inline mlir::Operation *firstOp(mlir::Operation *root, llvm::StringRef name) {
  mlir::Operation *found = nullptr;
  root->walk([&](mlir::Operation *op) {
    if (!found && op->getName().getStringRef() == name)
      found = op;
  });
  return found;
}

inline bool verifies(Graph &g) { return mlir::succeeded(mlir::verify(g.module())); }

using Shape = std::vector<int64_t>;

/// Runs `build`, which must throw BuildError; returns its message ("" and a failure if not).
template <typename Fn> std::string errorOf(Fn build) {
  try {
    build();
  } catch (const BuildError &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a BuildError";
  return "";
}

/// "<this file>:<line>: ", how a BuildError begins when raised by code on `line` of the caller.
inline std::string site(int line, std::source_location loc = std::source_location::current()) {
  return std::filesystem::path(loc.file_name()).filename().string() + ":" +
         std::to_string(line) + ": ";
}

/// Expects `message` to start with `where` and to contain every one of `parts`.
inline void expectMessage(const std::string &message, const std::string &where,
                          std::initializer_list<std::string> parts) {
  EXPECT_EQ(message.rfind(where, 0), 0u) << "expected the call site " << where << "in: "
                                         << message;
  for (const std::string &part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "expected \"" << part << "\" in: " << message;
}

} // namespace smelt::frontend_test
