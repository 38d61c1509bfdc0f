// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/logging.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <stdexcept>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <unistd.h>

namespace ex2d {

std::shared_ptr<spdlog::logger> logger()
{
    static std::shared_ptr<spdlog::logger> instance = [] {
        auto log = spdlog::stderr_color_mt("ex2d");
        log->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
        return log;
    }();
    return instance;
}

const std::vector<std::string>& log_level_names()
{
    static const std::vector<std::string> names = {"trace", "debug", "info",     "warning",
                                                   "warn",  "error", "critical", "off"};
    return names;
}

void set_log_level(const std::string& level)
{
    // spdlog maps a name it does not know to "off", which would silence every line, the final
    // error included: a caller must have checked the name against log_level_names().
    const auto& names = log_level_names();
    if (std::find(names.begin(), names.end(), level) == names.end()) {
        throw std::invalid_argument("unknown log level '" + level +
                                    "' (trace, debug, info, warning, error, critical or off)");
    }
    logger()->set_level(spdlog::level::from_str(level == "warning" ? "warn" : level));
}

struct ProgressBar::Impl {
    std::string label;
    long total = 0;
    bool terminal = false;
    std::mutex mutex;
    long last_logged_decile = -1;
    int last_drawn_width = -1;
    bool finished = false;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

ProgressBar::ProgressBar(std::string label, long total) : impl_(std::make_unique<Impl>())
{
    impl_->label = std::move(label);
    impl_->total = std::max(1L, total);
    impl_->terminal = ::isatty(STDERR_FILENO) != 0;
}

ProgressBar::~ProgressBar()
{
    finish();
}

void ProgressBar::update(long done)
{
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->finished) return;
    const double frac = std::min(1.0, double(done) / double(impl_->total));
    if (impl_->terminal) {
        constexpr int width = 40;
        const int filled = int(frac * width);
        if (filled == impl_->last_drawn_width && done != impl_->total) return;
        impl_->last_drawn_width = filled;
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->start).count();
        std::fprintf(stderr, "\r%s [%-*s] %3d%% %ld/%ld %.1fs", impl_->label.c_str(), width,
                     std::string(filled, '#').c_str(), int(frac * 100), done, impl_->total,
                     elapsed);
        std::fflush(stderr);
    } else {
        const long decile = long(frac * 10);
        if (decile > impl_->last_logged_decile) {
            impl_->last_logged_decile = decile;
            logger()->info("progress task={} done={} total={} percent={}", impl_->label, done,
                           impl_->total, decile * 10);
        }
    }
}

void ProgressBar::finish()
{
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->finished) return;
    impl_->finished = true;
    if (impl_->terminal && impl_->last_drawn_width >= 0) std::fprintf(stderr, "\n");
}

}  // namespace ex2d
