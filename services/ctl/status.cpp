// SPDX-License-Identifier: BSD-3-Clause
// ex2dctl status and workers: tables for people, --json for scripts.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>

#include "ctl.hpp"

namespace ex2d::ctl {

using nlohmann::json;

namespace {

const char* const kStates[] = {"queued", "reading", "extracting", "writing",
                               "done",   "failed",  "dead",       "cancelled"};

/// Unix milliseconds as UTC "2026-11-28T18:00:00Z" ("?" when not a number).
std::string iso_time(const std::string& unix_ms)
{
    char* end = nullptr;
    const long long ms = std::strtoll(unix_ms.c_str(), &end, 10);
    if (unix_ms.empty() || *end != '\0') return "?";
    const std::time_t seconds = std::time_t(ms / 1000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

json processes(Connection& c, long long heartbeat_ttl_ms)
{
    json out = json::array();
    const long long now = service::unix_ms();
    for (const auto& n :
         must(c.redis->command({"ZRANGE", c.plane->key("procs"), "0", "-1"})).elements) {
        json h = hash(c, c.plane->key("proc:" + n.str));
        if (h.empty()) continue;  // heartbeat expired: the process is gone
        h["name"] = n.str;
        // A hash can outlive its heartbeat (an expiry that never reached Redis, a clock
        // apart): its last published state no longer says anything about the process.
        const long long beat = std::atoll(h.value("heartbeat_at", "0").c_str());
        if (beat > 0 && now - beat > heartbeat_ttl_ms) h["state"] = "stale";
        out.push_back(h);
    }
    return out;
}

json exposure_summary(Connection& c, const std::string& member)
{
    const auto colon = member.rfind(':');
    json h = hash(c, c.plane->exposure_key(member.substr(0, colon), member.substr(colon + 1)));
    json row = {{"campaign", member.substr(0, colon)},
                {"expid", member.substr(colon + 1)},
                {"night", h.value("night", "")},
                {"state", h.value("state", "")},
                {"nframes", std::atol(h.value("nframes", "0").c_str())}};
    for (const char* s : kStates) row[s] = std::atol(h.value(std::string("n_") + s, "0").c_str());
    return row;
}

void print_exposure_rows(const json& rows)
{
    std::printf("%-12s %-9s %-8s %-17s %6s %6s %6s %6s %6s %6s %6s %6s\n", "campaign", "expid",
                "night", "state", "frames", "queued", "read", "extr", "write", "done", "failed",
                "dead");
    for (const auto& r : rows) {
        std::printf("%-12s %-9s %-8s %-17s %6ld %6ld %6ld %6ld %6ld %6ld %6ld %6ld\n",
                    r["campaign"].get<std::string>().c_str(), r["expid"].get<std::string>().c_str(),
                    r["night"].get<std::string>().c_str(), r["state"].get<std::string>().c_str(),
                    r["nframes"].get<long>(), r["queued"].get<long>(), r["reading"].get<long>(),
                    r["extracting"].get<long>(), r["writing"].get<long>(), r["done"].get<long>(),
                    r["failed"].get<long>(), r["dead"].get<long>());
    }
}

void print_processes(const json& procs)
{
    std::printf("%-24s %-7s %-10s %-8s %-9s %-14s %-7s %-24s %s\n", "process", "role", "host",
                "pid", "state", "device", "frames", "current", "http");
    for (const auto& p : procs) {
        const std::string current = p.value("current", "");
        std::printf("%-24s %-7s %-10s %-8s %-9s %-14s %-7s %-24s %s\n", p.value("name", "").c_str(),
                    p.value("role", "").c_str(), p.value("host", "").c_str(),
                    p.value("pid", "").c_str(), p.value("state", "").c_str(),
                    p.value("device", "-").c_str(), p.value("frames", "-").c_str(),
                    current.empty() ? "-" : current.c_str(), p.value("http", "").c_str());
        if (p.value("storage", "") == "failing") {
            // A writer whose output file system fails holds its frame and grants nothing.
            std::printf("%-24s storage failing since %s: %s\n", "",
                        iso_time(p.value("storage_since", "")).c_str(),
                        p.value("storage_error", "").c_str());
        }
    }
}

// Frames finished in the last hour, from the event stream.
long frames_last_hour(Connection& c)
{
    const long long since = service::unix_ms() - 3600 * 1000LL;
    auto events =
        must(c.redis->command({"XRANGE", c.plane->key("events"), std::to_string(since), "+"}));
    long n = 0;
    for (const auto& e : events.elements) {
        if (e.elements.size() < 2) continue;
        for (const auto& [k, v] : e.elements[1].pairs()) {
            if (k == "type" && v == "frame_done") ++n;
        }
    }
    return n;
}

}  // namespace

int workers(Connection& c, bool as_json, long long heartbeat_ttl_ms)
{
    json procs = processes(c, heartbeat_ttl_ms);
    if (as_json)
        std::cout << procs.dump() << "\n";
    else
        print_processes(procs);
    return 0;
}

int status(Connection& c, const std::string& night, const std::string& exposure,
           const std::string& campaign, bool as_json, long long lease_ms,
           long long heartbeat_ttl_ms)
{
    if (!exposure.empty()) {
        const std::string expid = exposure_id(exposure);
        json summary = exposure_summary(c, campaign + ":" + expid);
        json frames = json::array();
        for (const auto& key : exposure_frame_keys(c, campaign, expid))
            frames.push_back(hash(c, key));
        if (as_json) {
            std::cout << json{{"exposure", summary}, {"frames", frames}}.dump() << "\n";
            return 0;
        }
        print_exposure_rows(json::array({summary}));
        std::printf("\n%-7s %-11s %-7s %-26s %s\n", "camera", "state", "attempt", "process",
                    "output / error");
        for (const auto& f : frames) {
            const std::string state = f.value("state", "");
            const std::string detail = (state == "failed" || state == "dead")
                                           ? f.value("error", "")
                                           : f.value("output", "");
            std::printf("%-7s %-11s %-7s %-26s %s\n", f.value("camera", "").c_str(), state.c_str(),
                        f.value("attempt", "").c_str(), f.value("process", "").c_str(),
                        detail.c_str());
        }
        return 0;
    }
    std::vector<std::string> members;
    if (!night.empty()) {
        for (const auto& m :
             must(c.redis->command({"SMEMBERS", c.plane->key("night:" + night)})).elements) {
            members.push_back(m.str);
        }
        std::sort(members.begin(), members.end());
    } else {
        for (const auto& m :
             must(c.redis->command({"ZREVRANGE", c.plane->key("exposures"), "0", "19"})).elements) {
            members.push_back(m.str);
        }
    }
    json rows = json::array();
    std::map<std::string, long> totals;
    for (const auto& m : members) {
        json row = exposure_summary(c, m);
        for (const char* s : kStates) totals[s] += row[s].get<long>();
        rows.push_back(row);
    }
    // Stuck: held longer than a lease without renewal (XPENDING idle time); the reaper
    // re-delivers them on its next pass.
    json stuck = json::array();
    auto streams = c.plane->lane_streams();
    if (streams.is_ok()) {
        for (const auto& stream : streams.value()) {
            auto p = c.redis->command({"XPENDING", stream, service::kReaderGroup, "IDLE",
                                       std::to_string(lease_ms), "-", "+", "100"});
            if (!p.is_ok() || p.value().is_error()) continue;
            for (const auto& e : p.value().elements) {
                if (e.elements.size() < 4) continue;
                stuck.push_back({{"stream", stream},
                                 {"id", e.elements[0].str},
                                 {"consumer", e.elements[1].str},
                                 {"idle_s", e.elements[2].integer / 1000},
                                 {"deliveries", e.elements[3].integer}});
            }
        }
    }
    json dead = json::array();
    for (const auto& e :
         must(c.redis->command({"XREVRANGE", c.plane->key("dead"), "+", "-", "COUNT", "20"}))
             .elements) {
        json d = json::object();
        for (const auto& [k, v] : e.elements.at(1).pairs()) d[k] = v;
        dead.push_back({{"job", d.value("job", "")},
                        {"reason", d.value("reason", "")},
                        {"attempts", d.value("attempts", "")}});
    }
    const long per_hour = frames_last_hour(c);
    const long remaining =
        totals["queued"] + totals["reading"] + totals["extracting"] + totals["writing"];
    const double eta_s = per_hour > 0 ? 3600.0 * double(remaining) / double(per_hour) : -1;
    json procs = processes(c, heartbeat_ttl_ms);
    if (as_json) {
        std::cout << json{{"exposures", rows},
                          {"totals", totals},
                          {"stuck", stuck},
                          {"dead", dead},
                          {"frames_last_hour", per_hour},
                          {"remaining", remaining},
                          {"eta_s", eta_s},
                          {"processes", procs}}
                         .dump()
                  << "\n";
        return 0;
    }
    print_exposure_rows(rows);
    std::printf("\nframes done in the last hour: %ld; remaining: %ld; ETA: %s\n", per_hour,
                remaining, eta_s < 0 ? "unknown" : (std::to_string(long(eta_s)) + " s").c_str());
    if (!stuck.empty()) {
        std::printf("\nstuck (held over the %lld s lease without renewal):\n", lease_ms / 1000);
        for (const auto& s : stuck)
            std::printf("  %s %s consumer=%s idle=%lds deliveries=%ld\n",
                        s["stream"].get<std::string>().c_str(), s["id"].get<std::string>().c_str(),
                        s["consumer"].get<std::string>().c_str(), s["idle_s"].get<long>(),
                        s["deliveries"].get<long>());
    }
    if (!dead.empty()) {
        std::printf("\ndead letters (newest first):\n");
        for (const auto& d : dead)
            std::printf("  %s: %s\n", d["job"].get<std::string>().c_str(),
                        d["reason"].get<std::string>().c_str());
    }
    std::printf("\n");
    print_processes(procs);
    return 0;
}

}  // namespace ex2d::ctl
