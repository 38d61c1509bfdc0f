// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/status.hpp"

namespace ex2d {

const char* to_string(StatusCode code)
{
    switch (code) {
        case StatusCode::ok:
            return "ok";
        case StatusCode::invalid_argument:
            return "invalid argument";
        case StatusCode::io_error:
            return "I/O error";
        case StatusCode::format_error:
            return "format error";
        case StatusCode::numerical_error:
            return "numerical error";
        case StatusCode::not_compiled:
            return "not compiled";
        case StatusCode::device_unavailable:
            return "device unavailable";
        case StatusCode::cancelled:
            return "cancelled";
        case StatusCode::device_failed:
            return "device failed";
    }
    return "unknown";
}

std::string Status::to_string() const
{
    if (is_ok()) return "ok";
    return std::string(ex2d::to_string(code_)) + ": " + message_;
}

}  // namespace ex2d
