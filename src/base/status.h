// Status and Result<T>: errors as values with context (file, offset, what was expected).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace iotwin {

class [[nodiscard]] Status {
 public:
  enum class Code { kOk = 0, kInvalidArgument, kNotFound, kCorrupt, kTruncated, kIo, kUnsupported,
                    kPermission, kInternal };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(Code code, std::string message) { return Status(code, std::move(message)); }

  template <typename... Args>
  static Status Invalid(fmt::format_string<Args...> f, Args&&... args) {
    return Status(Code::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  static Status Corrupt(fmt::format_string<Args...> f, Args&&... args) {
    return Status(Code::kCorrupt, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  static Status Io(fmt::format_string<Args...> f, Args&&... args) {
    return Status(Code::kIo, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  static Status Unsupported(fmt::format_string<Args...> f, Args&&... args) {
    return Status(Code::kUnsupported, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  static Status NotFound(fmt::format_string<Args...> f, Args&&... args) {
    return Status(Code::kNotFound, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  static Status Permission(fmt::format_string<Args...> f, Args&&... args) {
    return Status(Code::kPermission, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  static Status Internal(fmt::format_string<Args...> f, Args&&... args) {
    return Status(Code::kInternal, fmt::format(f, std::forward<Args>(args)...));
  }
  // errno-based I/O error: "<what>: <strerror(err)>".
  static Status FromErrno(int err, std::string_view what);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Prefix context ("while reading X: ...") without losing the code.
  Status WithContext(std::string_view context) const;

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

#define IOTWIN_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::iotwin::Status _st = (expr);              \
    if (!_st.ok()) return _st;                  \
  } while (0)

#define IOTWIN_CONCAT_INNER(a, b) a##b
#define IOTWIN_CONCAT(a, b) IOTWIN_CONCAT_INNER(a, b)
#define IOTWIN_ASSIGN_OR_RETURN(lhs, expr) \
  IOTWIN_ASSIGN_OR_RETURN_IMPL(IOTWIN_CONCAT(_res_, __LINE__), lhs, expr)
#define IOTWIN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

}  // namespace iotwin
