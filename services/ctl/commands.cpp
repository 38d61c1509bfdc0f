// SPDX-License-Identifier: BSD-3-Clause
// ex2dctl submit, requeue, drain, campaign and wait.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <thread>

#include "ctl.hpp"
#include "ex2d/arms.hpp"
#include "ex2d/extraction.hpp"
#include "ex2d/input_checks.hpp"
#include "ex2d/service/frame_messages.hpp"

namespace ex2d::ctl {

namespace fs = std::filesystem;
using nlohmann::json;
using service::Job;

service::RedisValue must(Result<service::RedisValue> r)
{
    if (!r.is_ok()) throw CtlExit{kExitRedis, r.status().message()};
    if (r.value().is_error()) throw CtlExit{kExitRedis, "redis: " + r.value().str};
    return std::move(r).value();
}

json hash(Connection& c, const std::string& key)
{
    json out = json::object();
    for (const auto& [k, v] : must(c.redis->command({"HGETALL", key})).pairs()) out[k] = v;
    return out;
}

namespace {

std::string fill(std::string text, const std::string& key, const std::string& value)
{
    for (auto pos = text.find(key); pos != std::string::npos;
         pos = text.find(key, pos + value.size())) {
        text.replace(pos, key.size(), value);
    }
    return text;
}

std::string filled(const std::string& text, const Job& job)
{
    return fill(fill(fill(text, "{night}", job.night), "{expid}", job.expid), "{camera}",
                job.camera);
}

/// The frame's bad-column table (datamodel 4.5 and 4.7): the --badcolumns template, else
/// desi_proc's SPECPROD/calibnight/NIGHT/badcolumns-CAMERA-NIGHT.csv where the preproc file sits
/// in desispec's SPECPROD/preproc/NIGHT/EXPID/ (SPECPROD is then the folder above preproc/),
/// else none.
std::string badcolumns_for(const fs::path& preproc, const Job& job, const SubmitArgs& a)
{
    if (a.badcolumns_template == "none") return "";
    if (!a.badcolumns_template.empty())
        return fs::absolute(filled(a.badcolumns_template, job)).string();
    const fs::path preproc_root = preproc.parent_path().parent_path().parent_path();
    if (preproc_root.filename() != "preproc" || preproc.parent_path().filename() != job.expid) {
        return "";
    }
    return (preproc_root.parent_path() / "calibnight" / job.night /
            ("badcolumns-" + job.camera + "-" + job.night + ".csv"))
        .string();
}

const std::regex kPreprocName(R"(preproc-([brz][0-9])-([0-9]{1,8})\.fits(\.gz|\.fz)?)");

std::vector<std::string> preproc_files_in(const fs::path& dir, bool recursive)
{
    std::vector<std::string> files;
    std::error_code ec;
    auto take = [&](const fs::directory_entry& e) {
        if (e.is_regular_file() && std::regex_match(e.path().filename().string(), kPreprocName)) {
            files.push_back(fs::absolute(e.path()).string());
        }
    };
    if (recursive) {
        for (const auto& e : fs::recursive_directory_iterator(dir, ec)) take(e);
    } else {
        for (const auto& e : fs::directory_iterator(dir, ec)) take(e);
    }
    if (ec) throw CtlExit{kExitInput, dir.string() + ": cannot list: " + ec.message()};
    std::sort(files.begin(), files.end());
    return files;
}

Job job_for(const std::string& path, const SubmitArgs& a)
{
    const fs::path p = fs::absolute(path);
    std::smatch m;
    const std::string name = p.filename().string();
    if (!std::regex_match(name, m, kPreprocName)) {
        throw CtlExit{kExitUsage, path + ": not named preproc-CAMERA-EXPID.fits[.gz]"};
    }
    Job job;
    job.camera = m[1];
    char expid[16];
    std::snprintf(expid, sizeof expid, "%08ld", std::atol(m[2].str().c_str()));
    job.expid = expid;
    job.night = p.parent_path().parent_path().filename().string();
    if (job.night.size() != 8 || job.night.find_first_not_of("0123456789") != std::string::npos) {
        throw CtlExit{kExitUsage, path + ": expected under .../NIGHT/EXPID/ with an 8-digit NIGHT"};
    }
    job.lane = a.lane;
    job.campaign = a.lane == "nightly" ? "nightly" : a.campaign;
    job.job = job.campaign + "/" + job.expid + "/" + job.camera;
    job.preproc = p.string();
    job.psf = fs::absolute(filled(a.psf_template, job)).string();
    job.badcolumns = badcolumns_for(fs::path(p).lexically_normal(), job, a);
    std::string compression = a.compression;
    if (compression == "env") {
        const char* env = std::getenv("DESI_COMPRESSION");
        compression = env && std::string(env) == "NONE" ? "none" : "gz";
    }
    job.output =
        (fs::absolute(a.output_root) / "exposures" / job.night / job.expid /
         ("frame-" + job.camera + "-" + job.expid + ".fits" + (compression == "gz" ? ".gz" : "")))
            .string();
    ExtractionOptions opt = a.options;
    const ArmDefaults arm = arm_defaults(parse_arm(job.camera).value());
    if (a.wavelength == "auto") {
        opt.wmin = arm.wmin;
        opt.wmax = arm.wmax;
        opt.dw = arm.dw;
    }
    opt.psferr = a.psferr_given ? a.psferr : arm.psferr;
    job.options = service::options_to_json(opt);
    job.trace_shifts = a.trace_shifts;
    if (a.write_shifted_psf) {
        job.shifted_psf =
            (fs::path(job.output).parent_path() / ("psf-" + job.camera + "-" + job.expid + ".fits"))
                .string();
    }
    return job;
}

/// A refused option ends ex2dctl with the check's own sentence and the usage code.
void refuse(const Status& status, const std::string& hint = "")
{
    if (!status.is_ok()) throw CtlExit{kExitUsage, status.message() + hint};
}

/// The options, checked with `ex2d extract`'s own functions: the fleet queues nothing that
/// `ex2d extract` would refuse before reading the PSF. -w against each PSF's range is the
/// reader's, which reads the PSF.
ExtractionOptions checked_options(const SubmitArgs& a)
{
    ExtractionOptions opt;
    opt.specmin = a.specmin;
    opt.nspec = a.nspec;
    if (a.wavelength != "auto") {
        refuse(parse_wavelength_option(a.wavelength, opt.wmin, opt.wmax, opt.dw),
               " (or auto: desi_proc's grid of each camera's arm)");
    }
    if (a.psferr_given) refuse(check_psferr_option(a.psferr));
    refuse(validate_option_values(opt));
    return opt;
}

}  // namespace

void check_submit_args(SubmitArgs& a)
{
    if (a.lane != "nightly" && a.lane != "campaign")
        throw CtlExit{kExitUsage, "--lane must be nightly or campaign"};
    if (a.lane == "campaign" && a.campaign.empty())
        throw CtlExit{kExitUsage, "--campaign is required for the campaign lane"};
    if (a.lane == "campaign" &&
        (a.campaign == "nightly" || a.campaign.find_first_of(":/ ") != std::string::npos)) {
        throw CtlExit{kExitUsage, "--campaign '" + a.campaign +
                                      "': a name without ':', '/', spaces, not 'nightly'"};
    }
    a.options = checked_options(a);
}

int submit(Connection& c, const SubmitArgs& a)
{
    std::vector<std::string> files = a.preproc;
    if (!a.exposure_dir.empty())
        for (auto& f : preproc_files_in(a.exposure_dir, false)) files.push_back(f);
    if (!a.night_dir.empty())
        for (auto& f : preproc_files_in(a.night_dir, true)) files.push_back(f);
    if (!a.tree.empty())
        for (auto& f : preproc_files_in(a.tree, true)) files.push_back(f);
    if (!a.list_file.empty()) {
        std::ifstream in(a.list_file);
        if (!in) throw CtlExit{kExitInput, a.list_file + ": cannot read"};
        for (std::string line; std::getline(in, line);) {
            if (!line.empty() && line[0] != '#') files.push_back(line);
        }
    }
    if (files.empty()) throw CtlExit{kExitUsage, "nothing to submit: no preproc files found"};
    std::vector<Job> jobs;
    jobs.reserve(files.size());
    for (const auto& f : files)
        jobs.push_back(job_for(f, a));  // every name checked before any is queued
    std::string stream = c.plane->nightly_stream();
    if (a.lane == "campaign") {
        stream = c.plane->campaign_stream(a.campaign);
        const std::string key = c.plane->key("campaign:" + a.campaign);
        must(c.redis->command({"HSETNX", key, "state", "active"}));
        must(c.redis->command({"HSETNX", key, "created_at", std::to_string(service::unix_ms())}));
        must(c.redis->command({"SADD", c.plane->key("campaigns"), a.campaign}));
        if (hash(c, key).value("state", "") == "active") {
            must(c.redis->command({"SADD", c.plane->key("campaigns:active"), a.campaign}));
        }
    }
    int queued = 0, skipped = 0;
    json out = json::array();
    for (auto& job : jobs) {
        job.stream = stream;
        auto r = c.plane->submit(job, a.force);
        if (!r.is_ok()) throw CtlExit{kExitRedis, r.status().message()};
        r.value() ? ++queued : ++skipped;
        out.push_back({{"job", job.job},
                       {"queued", r.value()},
                       {"output", job.output},
                       {"badcolumns", job.badcolumns}});
        if (!a.json && !r.value())
            std::cout << "skipped " << job.job << ": already queued, running or done\n";
    }
    if (a.lane == "campaign") {
        must(c.redis->command({"HINCRBY", c.plane->key("campaign:" + a.campaign), "nframes",
                               std::to_string(queued)}));
    }
    if (a.json) {
        std::cout << json{{"queued", queued}, {"skipped", skipped}, {"jobs", out}}.dump() << "\n";
    } else {
        std::cout << "queued " << queued << " frame(s), skipped " << skipped << ", lane " << a.lane
                  << (a.lane == "campaign" ? " campaign " + a.campaign : "") << "\n";
    }
    return 0;
}

namespace {

std::vector<std::string> frame_keys(Connection& c, const std::string& campaign,
                                    const std::string& expid)
{
    std::vector<std::string> keys;
    std::string cursor = "0";
    do {
        auto r = must(c.redis->command({"SCAN", cursor, "MATCH",
                                        c.plane->key("frame:" + campaign + ":" + expid + ":*"),
                                        "COUNT", "1000"}));
        cursor = r.elements.at(0).str;
        for (const auto& k : r.elements.at(1).elements) keys.push_back(k.str);
    } while (cursor != "0");
    std::sort(keys.begin(), keys.end());
    return keys;
}

}  // namespace

std::string exposure_id_error(const std::string& text)
{
    if (text.empty() || text.size() > 8 ||
        text.find_first_not_of("0123456789") != std::string::npos) {
        return "an exposure id is 1 to 8 digits, got '" + text + "'";
    }
    return {};
}

std::string exposure_id(const std::string& text)
{
    const std::string error = exposure_id_error(text);
    if (!error.empty()) throw CtlExit{kExitUsage, "--exposure: " + error};
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08ld", std::atol(text.c_str()));
    return buf;
}

std::vector<std::string> exposure_frame_keys(Connection& c, const std::string& campaign,
                                             const std::string& expid)
{
    return frame_keys(c, campaign, exposure_id(expid));
}

int requeue(Connection& c, const std::string& exposure, const std::string& campaign,
            const std::string& night, bool as_json)
{
    std::vector<std::pair<std::string, std::string>> exposures;  // campaign, expid
    if (!exposure.empty()) exposures.emplace_back(campaign, exposure_id(exposure));
    if (!night.empty()) {
        for (const auto& m :
             must(c.redis->command({"SMEMBERS", c.plane->key("night:" + night)})).elements) {
            const auto colon = m.str.rfind(':');
            exposures.emplace_back(m.str.substr(0, colon), m.str.substr(colon + 1));
        }
    }
    if (exposures.empty()) throw CtlExit{kExitUsage, "requeue needs --exposure or --night"};
    int count = 0;
    json out = json::array();
    for (const auto& [camp, expid] : exposures) {
        for (const auto& key : frame_keys(c, camp, expid)) {
            json h = hash(c, key);
            const std::string state = h.value("state", "");
            if (state != "failed" && state != "dead") continue;
            std::vector<std::pair<std::string, std::string>> fields;
            for (auto it = h.begin(); it != h.end(); ++it)
                fields.emplace_back(it.key(), it.value());
            Job job = Job::from_fields(fields);
            job.stream = job.lane == "campaign" ? c.plane->campaign_stream(job.campaign)
                                                : c.plane->nightly_stream();
            auto r = c.plane->submit(job, false);
            if (!r.is_ok()) throw CtlExit{kExitRedis, r.status().message()};
            if (r.value()) {
                ++count;
                out.push_back({{"job", job.job}, {"was", state}, {"error", h.value("error", "")}});
                if (!as_json)
                    std::cout << "requeued " << job.job << " (was " << state << ": "
                              << h.value("error", "") << ")\n";
            }
        }
    }
    if (as_json)
        std::cout << json{{"requeued", count}, {"jobs", out}}.dump() << "\n";
    else
        std::cout << "requeued " << count << " frame(s)\n";
    return 0;
}

int drain(Connection& c, const std::string& name)
{
    if (must(c.redis->command({"EXISTS", c.plane->key("proc:" + name)})).as_int() != 1) {
        throw CtlExit{kExitUsage, "no live process named " + name + " (see ex2dctl workers)"};
    }
    must(c.redis->command({"SET", c.plane->key("drain:" + name), "1", "EX", "3600"}));
    std::cout << "asked " << name << " to drain: it finishes or hands back its frames and exits\n";
    return 0;
}

int campaign_action(Connection& c, const std::string& action, const std::string& name)
{
    const std::string key = c.plane->key("campaign:" + name);
    if (must(c.redis->command({"SISMEMBER", c.plane->key("campaigns"), name})).as_int() != 1) {
        throw CtlExit{kExitUsage, "no campaign named " + name};
    }
    const std::string state = action == "pause"    ? "paused"
                              : action == "resume" ? "active"
                                                   : "cancelled";
    if (hash(c, key).value("state", "") == "cancelled" && action != "cancel") {
        throw CtlExit{kExitUsage, "campaign " + name + " is cancelled"};
    }
    must(c.redis->command(
        {"HSET", key, "state", state, "updated_at", std::to_string(service::unix_ms())}));
    if (state == "active")
        must(c.redis->command({"SADD", c.plane->key("campaigns:active"), name}));
    else
        must(c.redis->command({"SREM", c.plane->key("campaigns:active"), name}));
    if (state == "cancelled") {
        auto n = c.plane->cancel_queued(name);
        if (!n.is_ok()) throw CtlExit{kExitRedis, n.status().message()};
        std::cout << "cancelled " << n.value() << " queued frame(s)\n";
    }
    std::cout << "campaign " << name << ": " << state
              << (state == "active" ? "" : " (frames in flight finish; no new frame is read)")
              << "\n";
    return 0;
}

int wait_exposure(Connection& c, const std::string& exposure, const std::string& campaign,
                  double timeout_s)
{
    const std::string key = c.plane->exposure_key(campaign, exposure_id(exposure));
    const auto start = std::chrono::steady_clock::now();
    std::string last;
    bool reported_outage = false;
    for (;;) {
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        auto reply = c.redis->command({"HGETALL", key});
        // A restarted Redis answers LOADING until it has read its AOF back.
        const bool loading =
            reply.is_ok() && reply.value().is_error() && reply.value().str.rfind("LOADING", 0) == 0;
        if (!reply.is_ok() || loading) {
            // Redis restarting or cut off for a while is no reason to give up on the
            // exposure: the fleet carries on once it is back, and so does the wait.
            const std::string why =
                loading ? "redis: " + reply.value().str : reply.status().message();
            if (timeout_s > 0 && waited > timeout_s) throw CtlExit{kExitRedis, why};
            if (!reported_outage) std::cerr << "ex2dctl: " << why << "; still waiting\n";
            reported_outage = true;
            std::this_thread::sleep_for(std::chrono::seconds(1));
            continue;
        }
        json h = json::object();
        for (const auto& [k, v] : must(std::move(reply)).pairs()) h[k] = v;
        if (reported_outage) std::cerr << "ex2dctl: Redis reachable again\n";
        reported_outage = false;
        if (h.empty()) throw CtlExit{kExitUsage, "no exposure " + key};
        const std::string line = "exposure " + exposure_id(exposure) + " (" + campaign +
                                 "): " + h.value("n_done", "0") + "/" + h.value("nframes", "0") +
                                 " done, " + h.value("n_failed", "0") + " failed, " +
                                 h.value("n_dead", "0") + " dead";
        if (line != last) {
            std::cout << line << std::endl;
            last = line;
        }
        const std::string state = h.value("state", "");
        if (state == "done") return kExitOk;
        if (state == "done_with_errors" || state == "cancelled") return kExitWithErrors;
        if (timeout_s > 0 && waited > timeout_s) {
            std::cerr << "ex2dctl: timed out after " << timeout_s << " s\n";
            return kExitTimeout;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
}

}  // namespace ex2d::ctl
