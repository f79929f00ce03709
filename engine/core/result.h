// Result<T>: the value of an operation that can fail for external reasons (a file,
// a setting, a device call), or an Error carrying a human-readable message that
// names the thing and the problem. Nothing in the engine throws across a thread
// boundary; failures travel as Result values and, for the UI, as error events.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace gb {

struct Error {
  std::string message;  // complete sentence for a person, e.g. "model.gguf: truncated header (...)"
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}      // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { GB_CHECK_MSG(ok(), error_message_or_null()); return std::get<0>(state_); }
  const T& value() const& { GB_CHECK_MSG(ok(), error_message_or_null()); return std::get<0>(state_); }
  T&& value() && { GB_CHECK_MSG(ok(), error_message_or_null()); return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

  const Error& error() const { GB_CHECK(!ok()); return std::get<1>(state_); }

 private:
  const char* error_message_or_null() const {
    return ok() ? nullptr : std::get<1>(state_).message.c_str();
  }
  std::variant<T, Error> state_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT: implicit by design
  static Status success() { return {}; }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { GB_CHECK(failed_); return error_; }

 private:
  Error error_;
  bool failed_ = false;
};

inline Error make_error(std::string message) { return Error{std::move(message)}; }

}  // namespace gb

// Propagates a failed Status or Result out of the calling function.
#define GB_TRY(expr)                          \
  do {                                        \
    auto gb_try_result_ = (expr);             \
    if (!gb_try_result_.ok()) return gb_try_result_.error(); \
  } while (0)

// lhs = the value of a Result, or the Result's error returned from the calling function.
#define GB_ASSIGN_OR_RETURN(lhs, expr)                          \
  do {                                                          \
    auto gb_assign_result_ = (expr);                            \
    if (!gb_assign_result_.ok()) return gb_assign_result_.error(); \
    lhs = std::move(*gb_assign_result_);                        \
  } while (0)
