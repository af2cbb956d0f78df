// Error values of the runtime: no exceptions cross the runtime boundary, so callers compiled
// without exceptions (MLIR tools) and AOT users both get a message they can print.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace smelt::rt {

/// Success, or an error message that names what went wrong (op, buffer, file, shape).
class [[nodiscard]] Status {
public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !message_; }
  explicit operator bool() const { return ok(); }
  const std::string &message() const { return *message_; }

private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

/// A value or the Status that explains why there is none.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : state_(std::move(value)) {}
  Expected(Status error) : state_(std::move(error)) {}
  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T &operator*() { return std::get<0>(state_); }
  const T &operator*() const { return std::get<0>(state_); }
  T *operator->() { return &std::get<0>(state_); }
  const T *operator->() const { return &std::get<0>(state_); }
  Status status() const { return ok() ? Status() : std::get<1>(state_); }
  const std::string &message() const { return std::get<1>(state_).message(); }

private:
  std::variant<T, Status> state_;
};

} // namespace smelt::rt
