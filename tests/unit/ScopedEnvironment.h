// An environment variable set for one test and put back after it, for the tests of what reads
// the environment (where the CUDA libraries and headers are looked for).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace smelt::test {

class ScopedEnvironment {
public:
  /// Sets `name` to `value`; with no value, unsets it.
  ScopedEnvironment(const char *name, std::optional<std::string> value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnvironment() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnvironment(const ScopedEnvironment &) = delete;
  ScopedEnvironment &operator=(const ScopedEnvironment &) = delete;

private:
  const char *name_;
  std::optional<std::string> old_;
};

} // namespace smelt::test
