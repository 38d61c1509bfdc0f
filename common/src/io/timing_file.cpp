// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/timing_file.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fits_util.hpp"

namespace ex2d {
namespace {

using Json = nlohmann::ordered_json;

// Python's datetime.fromtimestamp(t).isoformat(): local time, microseconds only when not zero.
std::string iso_local(double unix_seconds)
{
    double whole = std::floor(unix_seconds);
    long micro = std::lround((unix_seconds - whole) * 1e6);
    if (micro == 1000000) {
        whole += 1;
        micro = 0;
    }
    const std::time_t t = std::time_t(whole);
    std::tm local{};
    localtime_r(&t, &local);
    char text[40];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &local);
    std::string iso(text);
    if (micro != 0) {
        char fraction[16];
        std::snprintf(fraction, sizeof fraction, ".%06ld", micro);
        iso += fraction;
    }
    return iso;
}

// numpy's median: the middle value, or the mean of the two middle ones.
double median(std::vector<double> values)
{
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double mean(const std::vector<double>& values)
{
    double sum = 0;
    for (double v : values) sum += v;
    return sum / double(values.size());
}

Json step_statistics(const std::vector<double>& start, const std::vector<double>& stop,
                     const std::vector<double>& duration)
{
    Json stats;
    for (const auto& [name, values] :
         {std::pair<const char*, const std::vector<double>*>{"start", &start}, {"stop", &stop}}) {
        const std::string key(name);
        stats[key + ".min"] = iso_local(*std::min_element(values->begin(), values->end()));
        stats[key + ".max"] = iso_local(*std::max_element(values->begin(), values->end()));
        stats[key + ".mean"] = iso_local(mean(*values));
        stats[key + ".median"] = iso_local(median(*values));
    }
    stats["duration.min"] = *std::min_element(duration.begin(), duration.end());
    stats["duration.max"] = *std::max_element(duration.begin(), duration.end());
    stats["duration.mean"] = mean(duration);
    stats["duration.median"] = median(duration);
    stats["n"] = duration.size();
    return stats;
}

}  // namespace

double unix_now()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

Status record_step_timings(const std::string& path, const std::vector<StepTimer>& timers,
                           const std::vector<std::string>& step_order)
{
    Json document = Json::object();
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
        std::ifstream in(path);
        std::stringstream text;
        text << in.rdbuf();
        document = Json::parse(text.str(), nullptr, false);
        if (document.is_discarded() || !document.is_object()) {
            return Status::format(path + ": not a JSON object; the timing file is left as is");
        }
    }
    for (const std::string& step : step_order) {
        std::vector<double> start, stop, duration;
        for (const StepTimer& timer : timers) {
            const auto found = timer.find(step);
            if (found == timer.end()) continue;
            start.push_back(found->second.start_unix);
            stop.push_back(found->second.stop_unix);
            duration.push_back(found->second.stop_unix - found->second.start_unix);
        }
        if (!duration.empty()) document[step] = step_statistics(start, stop, duration);
    }
    return fits::write_bytes_atomically(path, document.dump(2) + "\n");
}

}  // namespace ex2d
