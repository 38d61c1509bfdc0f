// SPDX-License-Identifier: BSD-3-Clause
#include "python_log.hpp"

#include <mutex>
#include <string>

#include <pybind11/pybind11.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "ex2d/logging.hpp"

namespace py = pybind11;

namespace ex2d::python {
namespace {

/// Python's level number for an spdlog level (logging.DEBUG = 10 ... CRITICAL = 50).
int python_level(spdlog::level::level_enum level)
{
    switch (level) {
        case spdlog::level::trace:
            return 5;
        case spdlog::level::debug:
            return 10;
        case spdlog::level::info:
            return 20;
        case spdlog::level::warn:
            return 30;
        case spdlog::level::err:
            return 40;
        default:
            return 50;
    }
}

/// One log call per line. The GIL is taken for it: extraction threads log while the calling
/// thread waits with the GIL released, so this never waits on a thread that waits on it.
class PythonSink final : public spdlog::sinks::base_sink<std::mutex> {
protected:
    void sink_it_(const spdlog::details::log_msg& msg) override
    {
        if (!Py_IsInitialized()) return;
        const std::string text(msg.payload.data(), msg.payload.size());
        py::gil_scoped_acquire gil;
        try {
            py::module_::import("logging").attr("getLogger")("ex2d").attr("log")(
                python_level(msg.level), text);
        } catch (const py::error_already_set& e) {
            // A handler that raises must not take the extraction with it; Python prints it.
            PyErr_WriteUnraisable(e.value().ptr());
        }
    }
    void flush_() override {}
};

}  // namespace

void follow_python_log_level()
{
    const int level = py::module_::import("logging")
                          .attr("getLogger")("ex2d")
                          .attr("getEffectiveLevel")()
                          .cast<int>();
    logger()->set_level(level <= 5    ? spdlog::level::trace
                        : level <= 10 ? spdlog::level::debug
                        : level <= 20 ? spdlog::level::info
                        : level <= 30 ? spdlog::level::warn
                        : level <= 40 ? spdlog::level::err
                                      : spdlog::level::critical);
}

void route_log_to_python()
{
    auto log = logger();
    log->sinks().clear();
    log->sinks().push_back(std::make_shared<PythonSink>());
    py::module_::import("atexit").attr("register")(py::cpp_function([] {
        auto log = logger();
        log->sinks().clear();
        log->sinks().push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    }));
}

}  // namespace ex2d::python
