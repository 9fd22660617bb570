// Status and Result<T>: errors as values inside the library.
//
// Internals never throw across layers and never return bare ints: a function that can
// fail returns Status (or Result<T>), and COLL_CHECK appends "file:line" at every hop so
// the final message reads like a backtrace. Only src/api turns a Status into a
// collResult_t.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "collectives/collectives.h"

namespace coll {

enum class Code {
  kOk = collSuccess,
  kCuda = collUnhandledCudaError,  // a CUDA runtime call failed (src/cuda/)
  kSystem = collSystemError,
  kInternal = collInternalError,
  kInvalidArgument = collInvalidArgument,
  kInvalidUsage = collInvalidUsage,
  kRemote = collRemoteError,
  kInProgress = collInProgress,
  kTimeout = collTimeout,
};

// An ok Status is a code and a null pointer: it is made and dropped at every step of
// the smallest operations, so it costs no string. A message lives on the heap.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string msg)
      : code_(code), msg_(msg.empty() ? nullptr : std::make_unique<std::string>(std::move(msg))) {}
  Status(const Status& o) : code_(o.code_), msg_(o.msg_ ? std::make_unique<std::string>(*o.msg_) : nullptr) {}
  Status& operator=(const Status& o) {
    if (this == &o) return *this;
    code_ = o.code_;
    msg_ = o.msg_ ? std::make_unique<std::string>(*o.msg_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_ ? *msg_ : noMessage(); }
  collResult_t result() const { return static_cast<collResult_t>(code_); }

  // Adds one hop ("at file:line") to the trace of a failed status.
  Status& addFrame(const char* file, int line);
  // Prefixes context ("collAllReduce seq 3: ") to the message.
  Status& prefix(const std::string& ctx) {
    msg_ = std::make_unique<std::string>(ctx + message());
    return *this;
  }

 private:
  static const std::string& noMessage();
  Code code_ = Code::kOk;
  std::unique_ptr<std::string> msg_;  // null: no message
};

inline Status okStatus() { return Status(); }
Status systemError(const std::string& what, int err);  // appends strerror(err)
inline Status internalError(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status invalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status invalidUsage(std::string m) { return {Code::kInvalidUsage, std::move(m)}; }
inline Status remoteError(std::string m) { return {Code::kRemote, std::move(m)}; }
inline Status timeoutError(std::string m) { return {Code::kTimeout, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) {}     // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  // Ok where the result holds a value, so `r.status()` never throws.
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  Status takeStatus() { return std::move(std::get<Status>(v_)); }
  T& value() { return std::get<T>(v_); }
  T&& take() { return std::move(std::get<T>(v_)); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace coll

#define COLL_CONCAT_INNER(a, b) a##b
#define COLL_CONCAT(a, b) COLL_CONCAT_INNER(a, b)

// Returns a failed Status from the enclosing function, recording this hop.
#define COLL_CHECK(expr)                     \
  do {                                       \
    ::coll::Status coll_st_ = (expr);        \
    if (!coll_st_.ok()) {                    \
      coll_st_.addFrame(__FILE__, __LINE__); \
      return coll_st_;                       \
    }                                        \
  } while (0)

// Returns a failed Status from the enclosing function as it is, without recording a hop:
// for the steps of one operation (a launch's phases), whose errors name what failed.
#define COLL_RETURN_IF_FAILED(expr)      \
  do {                                   \
    ::coll::Status coll_st_ = (expr);    \
    if (!coll_st_.ok()) return coll_st_; \
  } while (0)

// `COLL_ASSIGN(auto x, resultExpr);` unwraps a Result<T> or returns its Status.
#define COLL_ASSIGN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                      \
  if (!tmp.ok()) {                        \
    ::coll::Status s_ = tmp.takeStatus(); \
    s_.addFrame(__FILE__, __LINE__);      \
    return s_;                            \
  }                                       \
  decl = tmp.take()
#define COLL_ASSIGN(decl, expr) COLL_ASSIGN_IMPL(COLL_CONCAT(coll_r_, __LINE__), decl, expr)
