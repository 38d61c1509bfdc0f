// SPDX-License-Identifier: BSD-3-Clause
#include "storage_health.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

namespace ex2d::writer {

std::string storage_error_kind(const std::string& message)
{
    // The io statuses of write_output end with strerror()'s text (CFITSIO's own file driver is
    // not used: frames are written through file_output, which reports errno).
    static const std::pair<int, const char*> kinds[] = {
        {ENOSPC, "enospc"}, {EDQUOT, "edquot"},   {EROFS, "erofs"},  {EIO, "eio"},
        {ENOENT, "enoent"}, {ENOTDIR, "enotdir"}, {EACCES, "eacces"}};
    for (const auto& [number, kind] : kinds) {
        if (message.find(std::strerror(number)) != std::string::npos) return kind;
    }
    return "other";
}

double storage_retry_delay_s(int failures, double first_s, double max_s)
{
    const int doublings = std::clamp(failures - 1, 0, 60);
    return std::min(first_s * std::ldexp(1.0, doublings), max_s);
}

bool StorageHealth::failed(const std::string& error, long long now_ms)
{
    std::lock_guard<std::mutex> lock(mutex_);
    const bool starts = !outage_.has_value();
    if (starts) outage_ = Outage{now_ms, {}};
    outage_->error = error;
    return starts;
}

std::optional<StorageHealth::Outage> StorageHealth::recovered()
{
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(outage_, std::nullopt);
}

bool StorageHealth::ok() const
{
    std::lock_guard<std::mutex> lock(mutex_);
    return !outage_.has_value();
}

}  // namespace ex2d::writer
