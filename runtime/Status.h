// Error values of the runtime: no exceptions cross the runtime boundary, so callers compiled
// without exceptions (MLIR tools) and AOT users both get a message they can print.
#pragma once

#include <initializer_list>
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

/// The first error of checks made one after another (all of them made, in order), or success.
inline Status firstError(std::initializer_list<Status> checks) {
  for (const Status &s : checks)
    if (!s.ok())
      return s;
  return Status();
}

} // namespace smelt::rt

/// Returns `expr`'s Status from the enclosing function when it is an error (XLA's
/// TF_RETURN_IF_ERROR): the runtime's calls pass their first failure up unchanged.
#define SMELT_RETURN_IF_ERROR(expr)                                                                \
  do {                                                                                             \
    if (::smelt::rt::Status smelt_status_ = (expr); !smelt_status_.ok())                           \
      return smelt_status_;                                                                        \
  } while (false)

#define SMELT_CONCAT_INNER(a, b) a##b
#define SMELT_CONCAT(a, b) SMELT_CONCAT_INNER(a, b)
/// Declares `decl` ("Kernel kernel") from an Expected `expr`'s value, or returns its Status from
/// the enclosing function (XLA's TF_ASSIGN_OR_RETURN).
#define SMELT_ASSIGN_OR_RETURN(decl, expr)                                                         \
  SMELT_ASSIGN_OR_RETURN_IMPL(SMELT_CONCAT(smelt_expected_, __LINE__), decl, expr)
#define SMELT_ASSIGN_OR_RETURN_IMPL(expected, decl, expr)                                          \
  auto expected = (expr);                                                                          \
  if (!expected)                                                                                   \
    return expected.status();                                                                      \
  decl = std::move(*expected)
