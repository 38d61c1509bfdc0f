// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// ex2dctl: the operators' tool. Every command reads and writes the Redis keys of
// docs/redis-schema.md; none talks to the fleet's processes directly.

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ex2d/exit_codes.hpp"
#include "ex2d/extraction_types.hpp"
#include "ex2d/service/control_plane.hpp"

namespace ex2d::ctl {

struct Connection {
    std::unique_ptr<service::RedisClient> redis;
    std::unique_ptr<service::ControlPlane> plane;
};

/// ex2dctl qa: replaces this process by `python3 -m ex2d_qa` (python/ex2d_qa) with `args`,
/// after `--ex2dctl SELF` and `fleet_args` (the global Redis options, passed on to the
/// `ex2dctl status` calls the report makes). Returns only when it cannot be started.
int run_qa(const std::vector<std::string>& args, const std::vector<std::string>& fleet_args);

/// Thrown to end the program with a message and an exit code (ex2d/exit_codes.hpp).
struct CtlExit {
    int code;
    std::string message;
};

/// Empty when `text` is an exposure id (1 to 8 digits), else why not: --exposure's check.
std::string exposure_id_error(const std::string& text);
/// The 8-digit form of an exposure id ("12345" -> "00012345"); CtlExit(kExitUsage) when
/// exposure_id_error(text) is not empty.
std::string exposure_id(const std::string& text);

struct SubmitArgs {
    std::vector<std::string> preproc;  ///< files
    std::string exposure_dir, night_dir, list_file, tree;
    std::string psf_template;  ///< {night} {expid} {camera} placeholders
    std::string output_root;
    /// Bad-column table per frame, {night} {expid} {camera} filled in; "" = desispec's
    /// calibnight layout where the preproc file is in desispec's layout; "none" = no step.
    std::string badcolumns_template;
    std::string lane = "nightly";
    std::string campaign;
    std::string wavelength = "auto";  ///< auto = desi_proc's grid of the camera's arm
    double psferr = -1;               ///< desi_proc's per arm unless psferr_given
    bool psferr_given = false;
    int specmin = 0;
    int nspec = 500;
    std::string compression = "env";  ///< gz, none, env = $DESI_COMPRESSION (default gz)
    bool force = false;
    bool json = false;
    std::string trace_shifts = "auto";  ///< auto, sky, continuum, none (Job::trace_shifts)
    bool write_shifted_psf = false;     ///< write psf-CAMERA-EXPID.fits beside the frame
    ExtractionOptions options;          ///< set by check_submit_args
};

/// Checks the lane and the extraction options with `ex2d extract`'s functions and fills
/// `args.options`; CtlExit(kExitUsage) with ex2d extract's message. Needs no Redis, so a bad
/// command line is refused before anything is connected or queued.
void check_submit_args(SubmitArgs& args);
/// Queues the frames of `args`, which check_submit_args has checked.
int submit(Connection& c, const SubmitArgs& args);
/// Frames held longer than `lease_ms` without renewal are listed as stuck.
/// Processes whose heartbeat is older than `heartbeat_ttl_ms` are shown as stale.
int status(Connection& c, const std::string& night, const std::string& exposure,
           const std::string& campaign, bool json, long long lease_ms, long long heartbeat_ttl_ms);
int requeue(Connection& c, const std::string& exposure, const std::string& campaign,
            const std::string& night, bool json);
int workers(Connection& c, bool json, long long heartbeat_ttl_ms);
int drain(Connection& c, const std::string& name);
int campaign_action(Connection& c, const std::string& action, const std::string& name);
int wait_exposure(Connection& c, const std::string& exposure, const std::string& campaign,
                  double timeout_s);
/// The exposure's read, extract and write steps over its written frames, added to the JSON
/// file `path` in desi_proc's --timingfile form (ex2d/timing_file.hpp).
int write_exposure_timing(Connection& c, const std::string& exposure, const std::string& campaign,
                          const std::string& path);

/// Keys of an exposure's frame hashes, sorted.
std::vector<std::string> exposure_frame_keys(Connection& c, const std::string& campaign,
                                             const std::string& expid);

/// HGETALL as a JSON object (strings).
nlohmann::json hash(Connection& c, const std::string& key);
/// Unwraps a Redis result or throws CtlExit(kExitRedis).
service::RedisValue must(Result<service::RedisValue> r);

}  // namespace ex2d::ctl
