// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file status.hpp
/// Two error channels (see docs/architecture.md): expected per-job failures (a bad input file,
/// a malformed message, a patch that cannot be solved) are returned as `Status` / `Result<T>`;
/// programming errors and unrecoverable device faults throw `ex2d::Error` and its subclasses.

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace ex2d {

/// Kinds of expected failure. Messages are one line and name the file and the problem.
enum class StatusCode {
    ok = 0,
    invalid_argument,    ///< an option or parameter out of range
    io_error,            ///< a file cannot be opened, read or written (includes truncation)
    format_error,        ///< a file is readable but not in the expected format (missing HDU, ...)
    numerical_error,     ///< a computation produced no usable result
    not_compiled,        ///< the requested backend is not part of this build
    device_unavailable,  ///< the backend is built but no usable device is present
    cancelled,           ///< the caller asked the operation to stop (Ctrl-C in Python)
    device_failed,       ///< the device failed mid-batch (DeviceFailure, caught by a service)
};

/// Short name of a status code, e.g. "format error".
const char* to_string(StatusCode code);

/// The outcome of an operation that can fail for reasons outside the program's control.
class [[nodiscard]] Status {
public:
    Status() = default;
    Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

    static Status ok() { return {}; }
    static Status invalid(std::string msg)
    {
        return {StatusCode::invalid_argument, std::move(msg)};
    }
    static Status io(std::string msg) { return {StatusCode::io_error, std::move(msg)}; }
    static Status format(std::string msg) { return {StatusCode::format_error, std::move(msg)}; }
    static Status numerical(std::string msg)
    {
        return {StatusCode::numerical_error, std::move(msg)};
    }

    bool is_ok() const { return code_ == StatusCode::ok; }
    StatusCode code() const { return code_; }
    const std::string& message() const { return message_; }
    /// "format error: preproc.fits: no HDU named MASK"
    std::string to_string() const;

private:
    StatusCode code_ = StatusCode::ok;
    std::string message_;
};

/// Base of the exceptions thrown for programming errors and unrecoverable faults.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Thrown when code asks for a backend that this build does not contain.
class NotCompiled : public Error {
public:
    using Error::Error;
};

/// Thrown when the CUDA backend is built but finds no usable device (no driver, no GPU, or
/// the requested index is out of range).
class DeviceUnavailable : public Error {
public:
    using Error::Error;
};

/// Thrown by a backend whose device failed in the middle of a batch (a CUDA or cuSOLVER call
/// that returned an error: an Xid, an uncorrectable ECC error, a device that fell off the
/// bus). The batch's results are lost and the device may not work again in this process.
class DeviceFailure : public Error {
public:
    using Error::Error;
};

/// Thrown by Result<T>::value() on a Result that holds an error, and by a Result made from
/// an OK status: a programming error, the caller having not checked is_ok() first.
class BadResultAccess : public Error {
public:
    using Error::Error;
};

/// Either a value or the Status that explains why there is none. value() is for a Result
/// known to hold one (is_ok(), or EX2D_ASSIGN_OR_RETURN); on an error it throws
/// BadResultAccess.
template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : state_(std::move(value)) {}
    Result(Status status) : state_(std::move(status))
    {
        if (std::get<Status>(state_).is_ok()) {
            throw BadResultAccess("ex2d::Result constructed from an OK status without a value");
        }
    }

    bool is_ok() const { return std::holds_alternative<T>(state_); }
    const Status& status() const
    {
        static const Status ok_status;
        return is_ok() ? ok_status : std::get<Status>(state_);
    }
    T& value() &
    {
        check();
        return std::get<T>(state_);
    }
    const T& value() const&
    {
        check();
        return std::get<T>(state_);
    }
    T&& value() &&
    {
        check();
        return std::get<T>(std::move(state_));
    }

private:
    void check() const
    {
        if (!is_ok()) {
            throw BadResultAccess("ex2d::Result::value() on an error: " +
                                  std::get<Status>(state_).to_string());
        }
    }
    std::variant<T, Status> state_;
};

}  // namespace ex2d

#define EX2D_CONCAT_INNER(a, b) a##b
#define EX2D_CONCAT(a, b) EX2D_CONCAT_INNER(a, b)

/// Return the Status of `expr` from the enclosing function when it is not OK.
#define EX2D_RETURN_NOT_OK(expr)              \
    do {                                      \
        ::ex2d::Status ex2d_status_ = (expr); \
        if (!ex2d_status_.is_ok()) {          \
            return ex2d_status_;              \
        }                                     \
    } while (false)

// tmp names a variable and lhs may be a declaration: neither can be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define EX2D_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
    auto tmp = (expr);                             \
    if (!tmp.is_ok()) {                            \
        return tmp.status();                       \
    }                                              \
    lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

/// `EX2D_ASSIGN_OR_RETURN(auto psf, read_psf(path));`
#define EX2D_ASSIGN_OR_RETURN(lhs, expr) \
    EX2D_ASSIGN_OR_RETURN_IMPL(EX2D_CONCAT(ex2d_result_, __LINE__), lhs, expr)
