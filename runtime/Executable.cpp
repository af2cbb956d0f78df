// Executable helpers: attribute accessors and a readable listing.
#include "runtime/Executable.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace smelt::rt {

int64_t Step::intAttr(const std::string &name) const { return std::get<int64_t>(attrs.at(name)); }
double Step::floatAttr(const std::string &name) const { return std::get<double>(attrs.at(name)); }
const std::string &Step::stringAttr(const std::string &name) const {
  return std::get<std::string>(attrs.at(name));
}
const std::vector<int64_t> &Step::intsAttr(const std::string &name) const {
  return std::get<std::vector<int64_t>>(attrs.at(name));
}

std::string Executable::str() const {
  std::string out = fmt::format("executable @{} ({} buffers, {} steps)\n", name, buffers.size(),
                                steps.size());
  auto bufferList = [&](const std::vector<BufferId> &ids) {
    std::vector<std::string> parts;
    for (BufferId id : ids)
      parts.push_back(fmt::format("b{}:{}", id, buffers[id].type.str()));
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  out += fmt::format("  inputs: {}\n", bufferList(inputs));
  for (const Constant &c : constants)
    out += fmt::format("  constant b{}: {}\n", c.buffer, buffers[c.buffer].type.str());
  for (const Step &step : steps) {
    std::vector<std::string> attrs;
    for (const auto &[key, value] : step.attrs)
      attrs.push_back(std::visit(
          [&](const auto &v) { return fmt::format("{}={}", key, v); }, value));
    out += fmt::format("  {} = {}({}) {{{}}}{}\n", bufferList(step.results), step.op,
                       bufferList(step.operands), fmt::join(attrs, ", "),
                       step.device == "cpu:0" ? "" : " on " + step.device);
  }
  out += fmt::format("  outputs: {}\n", bufferList(outputs));
  for (const auto &[device, bytes] : peakBytes)
    out += fmt::format("  peak bytes on {}: {}\n", device, bytes);
  return out;
}

} // namespace smelt::rt
