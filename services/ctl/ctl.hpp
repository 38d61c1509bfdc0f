// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// ex2dctl: the operators' tool. Every command reads and writes the Redis keys of
// docs/redis-schema.md; none talks to the fleet's processes directly.

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ex2d/service/control_plane.hpp"

namespace ex2d::ctl {

struct Connection {
    std::unique_ptr<service::RedisClient> redis;
    std::unique_ptr<service::ControlPlane> plane;
};

/// Thrown to end the program with a message and an exit code.
struct CtlExit {
    int code;
    std::string message;
};

struct SubmitArgs {
    std::vector<std::string> preproc;  ///< files
    std::string exposure_dir, night_dir, list_file, tree;
    std::string psf_template;          ///< {night} {expid} {camera} placeholders
    std::string output_root;
    std::string lane = "nightly";
    std::string campaign;
    std::string wavelength = "auto";   ///< auto = desi_proc's grid of the camera's arm
    double psferr = -1;                ///< < 0 = desi_proc's per arm
    int specmin = 0;
    int nspec = 500;
    std::string compression = "env";  ///< gz, none, env = $DESI_COMPRESSION (default gz)
    bool force = false;
    bool json = false;
};

int submit(Connection& c, const SubmitArgs& args);
/// Frames held longer than `lease_ms` without renewal are listed as stuck.
int status(Connection& c, const std::string& night, const std::string& exposure,
           const std::string& campaign, bool json, long long lease_ms);
int requeue(Connection& c, const std::string& exposure, const std::string& campaign,
            const std::string& night, bool json);
int workers(Connection& c, bool json);
int drain(Connection& c, const std::string& name);
int campaign_action(Connection& c, const std::string& action, const std::string& name);
int wait_exposure(Connection& c, const std::string& exposure, const std::string& campaign,
                  double timeout_s);

/// Keys of an exposure's frame hashes, sorted.
std::vector<std::string> exposure_frame_keys(Connection& c, const std::string& campaign,
                                             const std::string& expid);

/// HGETALL as a JSON object (strings).
nlohmann::json hash(Connection& c, const std::string& key);
/// Unwraps a Redis result or throws CtlExit(3).
service::RedisValue must(Result<service::RedisValue> r);

}  // namespace ex2d::ctl
