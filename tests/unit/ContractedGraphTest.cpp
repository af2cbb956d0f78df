// smelt-fuse's reachability (passes/ContractedGraph.h) against a brute-force walk of the same
// contracted graph, on random DAGs of unregistered ops contracted at random as fusion does
// (only where no other path joins the two nodes); and the OrderedList under it against a plain
// sequence, with moves that exhaust the gaps between labels so that ranges are relabeled.
#include "TestUtil.h"

#include "passes/ContractedGraph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace smelt::test {
namespace {

TEST(OrderedList, AgreesWithASequenceThroughRelabeling) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  std::mt19937_64 gen(rngSeed());
  const unsigned n = 40;
  OrderedList list(n);
  std::vector<unsigned> model(n);
  for (unsigned i = 0; i < n; ++i)
    model[i] = i;
  auto check = [&](int round) {
    for (size_t i = 0; i + 1 < model.size(); ++i)
      ASSERT_TRUE(list.before(model[i], model[i + 1])) << "round " << round << ", at " << i;
  };
  for (int round = 0; round < 2000; ++round) {
    // Mostly after one anchor, so that its gap runs out (62-bit labels halve ~60 times).
    unsigned anchor = round % 3 ? model[model.size() / 2] : model[gen() % model.size()];
    std::vector<unsigned> moved, rest;
    for (unsigned node : model)
      (node != anchor && gen() % 8 == 0 ? moved : rest).push_back(node);
    list.moveAfter(anchor, moved);
    rest.insert(llvm::find(rest, anchor) + 1, moved.begin(), moved.end());
    model = rest;
    if (round % 100 == 99) { // and the others keep their order when one leaves
      list.erase(model[round % model.size()]);
      model.erase(model.begin() + round % model.size());
    }
    ASSERT_NO_FATAL_FAILURE(check(round));
  }
}

/// A random DAG: op i reads one to three earlier ops' results (or the argument).
std::string randomDag(unsigned n, std::mt19937_64 &gen) {
  std::string text = "\"t.arg\"() ({\n^bb0(%a: i32):\n";
  for (unsigned i = 0; i < n; ++i) {
    std::vector<std::string> reads;
    unsigned count = 1 + gen() % 3;
    for (unsigned k = 0; k < count; ++k)
      reads.push_back(
          i == 0 || gen() % 6 == 0 ? "%a" : "%v" + std::to_string(i - 1 - gen() % std::min(i, 6u)));
    text += "  %v" + std::to_string(i) + " = \"t.op\"(";
    for (size_t k = 0; k < reads.size(); ++k)
      text += (k ? ", " : "") + reads[k];
    text += ") : (";
    for (size_t k = 0; k < reads.size(); ++k)
      text += k ? ", i32" : "i32";
    text += ") -> i32\n";
  }
  return text + "  \"t.end\"() : () -> ()\n}) : () -> ()\n";
}

TEST(ContractedGraph, AnswersAsABruteForceWalkThroughRandomContractions) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  std::mt19937_64 gen(rngSeed());
  mlir::MLIRContext ctx;
  ctx.allowUnregisteredDialects();
  for (int trial = 0; trial < 8; ++trial) {
    // More ops than landmarks, so that walks answer too.
    const unsigned n = 2000;
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(randomDag(n, gen), &ctx);
    ASSERT_TRUE(module);
    mlir::Block &block = module->getBody()->front().getRegion(0).front();
    std::vector<mlir::Operation *> ops;
    for (mlir::Operation &op : block)
      ops.push_back(&op);
    ops.pop_back(); // t.end
    llvm::DenseMap<mlir::Operation *, unsigned> index;
    for (unsigned i = 0; i < n; ++i)
      index[ops[i]] = i;
    ContractedGraph graph(block);
    // The model: each node named by one of its ops, and the ops of each.
    std::vector<unsigned> node(n);
    std::vector<std::vector<unsigned>> members(n);
    for (unsigned i = 0; i < n; ++i) {
      node[i] = i;
      members[i] = {i};
    }
    auto successors = [&](unsigned of, auto &&visit) {
      for (unsigned i : members[of])
        for (mlir::Operation *user : ops[i]->getUsers())
          if (auto it = index.find(user); it != index.end() && node[it->second] != of)
            visit(it->second);
    };
    // Whether a path of uses leads from node `from` to node `to`; with `direct` false, one
    // that is not a single edge.
    auto bruteReaches = [&](unsigned from, unsigned to, bool direct) {
      if (from == to)
        return true;
      std::vector<bool> seen(n);
      std::vector<unsigned> work{from};
      bool found = false;
      while (!work.empty() && !found) {
        unsigned at = work.back();
        work.pop_back();
        successors(at, [&](unsigned op) {
          unsigned next = node[op];
          if (next == to)
            found |= direct || at != from;
          else if (!seen[next]) {
            seen[next] = true;
            work.push_back(next);
          }
        });
      }
      return found;
    };
    int contracted = 0;
    for (int step = 0; step < 600; ++step) {
      unsigned x = gen() % n, y = std::min<unsigned>(n - 1, x + gen() % 40); // mostly near
      unsigned nx = node[x], ny = node[y];
      graph.beginWalk();
      ASSERT_EQ(graph.reaches(ops[x], ops[y]), bruteReaches(nx, ny, true))
          << "trial " << trial << ", step " << step << ": " << x << " -> " << y;
      if (nx == ny)
        continue;
      // Contract where fusion would: no path between the two but their own edges, after the
      // questions the pass asks: does any successor of the earlier one but the later one
      // reach the later one?
      bool xFirst = graph.before(ops[x], ops[y]);
      unsigned early = xFirst ? nx : ny, later = xFirst ? ny : nx;
      ASSERT_FALSE(bruteReaches(later, early, true));
      if (bruteReaches(early, later, false))
        continue;
      graph.beginWalk();
      bool reached = false;
      successors(early, [&](unsigned op) {
        if (node[op] != later)
          reached |= graph.reaches(ops[op], ops[later]);
      });
      ASSERT_FALSE(reached) << "trial " << trial << ", step " << step;
      graph.contract(ops[x], ops[y]);
      for (unsigned i : members[early])
        node[i] = later;
      members[later].insert(members[later].end(), members[early].begin(), members[early].end());
      members[early].clear();
      ++contracted;
      for (unsigned from = 0; from < n; ++from) // every edge goes forward in the order
        successors(from, [&](unsigned op) {
          ASSERT_TRUE(graph.before(ops[from], ops[op])) << from << " -> " << op;
        });
    }
    EXPECT_GT(contracted, 50) << "trial " << trial;
  }
}

} // namespace
} // namespace smelt::test
