// SPDX-License-Identifier: BSD-3-Clause
// ex2dctl: submit exposures, nights and campaigns; see where they stand; requeue, drain.
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "ctl.hpp"
#include "ex2d/service/config.hpp"
#include "ex2d/service/curve.hpp"

int main(int argc, char** argv)
{
    using namespace ex2d;
    CLI::App app{"ex2dctl: operate the ex2d extraction fleet through its Redis control plane"};
    app.require_subcommand(1);
    std::string config_file, redis_host, ns;
    int redis_port = 0;
    bool json = false;
    app.add_option("--config", config_file, "Fleet configuration (YAML); default $EX2D_CONFIG");
    app.add_option("--redis-host", redis_host, "Redis host (default: redis.host)");
    app.add_option("--redis-port", redis_port, "Redis port (default: redis.port)");
    app.add_option("--namespace", ns, "Key namespace (default: redis.namespace)");
    app.add_flag("--json", json, "Machine-readable output");

    ctl::SubmitArgs sub;
    auto* submit = app.add_subcommand("submit", "Queue frames: files, an exposure, a night, a list or a tree");
    submit->add_option("--preproc", sub.preproc, "Preproc files (.../NIGHT/EXPID/preproc-CAM-EXPID.fits)");
    submit->add_option("--exposure-dir", sub.exposure_dir, "Folder of one exposure's preproc files");
    submit->add_option("--night-dir", sub.night_dir, "Folder of a night (one sub-folder per exposure)");
    submit->add_option("--list", sub.list_file, "File listing preproc files, one per line");
    submit->add_option("--tree", sub.tree, "Folder searched recursively for preproc files");
    submit->add_option("--psf", sub.psf_template, "PSF path; {night} {expid} {camera} are filled in")->required();
    submit->add_option("--output-root", sub.output_root,
                       "SPECPROD folder: frames go to exposures/NIGHT/EXPID/frame-CAM-EXPID.fits[.gz]")
        ->required();
    submit->add_option("--lane", sub.lane, "nightly or campaign")->capture_default_str();
    submit->add_option("--campaign", sub.campaign, "Campaign name (campaign lane)");
    submit->add_option("-w,--wavelength", sub.wavelength,
                       "wmin,wmax,dw, or auto for desi_proc's grid of each camera's arm")->capture_default_str();
    auto* psferr = submit->add_option("--psferr", sub.psferr, "PSF error (default: desi_proc's per arm)");
    submit->add_option("-s,--specmin", sub.specmin, "First spectrum")->capture_default_str();
    submit->add_option("-n,--nspec", sub.nspec, "Number of spectra")->capture_default_str();
    submit->add_option("--compression", sub.compression, "gz, none, or env ($DESI_COMPRESSION)")
        ->capture_default_str();
    submit->add_flag("--force", sub.force, "Queue frames already done again");

    std::string night, exposure, campaign, name, action;
    double timeout_s = 0;
    const CLI::Validator expid_check(ctl::exposure_id_error, "EXPID", "exposure id");
    auto* status = app.add_subcommand("status", "The fleet, a night or an exposure");
    status->add_option("--night", night, "Night YYYYMMDD");
    status->add_option("--exposure", exposure, "Exposure id")->check(expid_check);
    status->add_option("--campaign", campaign, "Campaign of the exposure (default nightly)");
    auto* requeue = app.add_subcommand("requeue", "Queue failed and dead frames again");
    requeue->add_option("--exposure", exposure, "Exposure id")->check(expid_check);
    requeue->add_option("--night", night, "Night YYYYMMDD");
    requeue->add_option("--campaign", campaign, "Campaign (default nightly)");
    auto* workers = app.add_subcommand("workers", "Live processes: role, host, device, current frame");
    auto* drain = app.add_subcommand("drain", "Ask one process to finish its frame and exit");
    drain->add_option("name", name, "Process name (ex2dctl workers)")->required();
    auto* camp = app.add_subcommand("campaign", "Pause, resume or cancel a campaign");
    camp->add_option("action", action, "pause, resume or cancel")->required()
        ->check(CLI::IsMember({"pause", "resume", "cancel"}));
    camp->add_option("name", name, "Campaign name")->required();
    std::string secret_file, public_file;
    bool overwrite = false;
    auto* keygen = app.add_subcommand(
        "keygen", "Write a new CURVE key pair for zmq.curve_secret_key_file (no Redis needed)");
    keygen->add_option("--secret-file", secret_file, "Secret key file to write (mode 0600)")->required();
    keygen->add_option("--public-file", public_file, "Public key file to write (mode 0644)")->required();
    keygen->add_flag("--force", overwrite, "Replace existing files");
    auto* wait = app.add_subcommand("wait", "Wait until an exposure is finished");
    wait->add_option("--exposure", exposure, "Exposure id")->required()->check(expid_check);
    wait->add_option("--campaign", campaign, "Campaign (default nightly)");
    wait->add_option("--timeout", timeout_s, "Seconds; 0 = no limit");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help is an "error" with code 0; every other parse error is a usage error, not
        // CLI11's own code (105-109), so that scripts see ex2dctl's documented codes.
        if (e.get_exit_code() == 0) return app.exit(e);
        std::cerr << "ex2dctl: " << e.what() << " (run with --help for more information)\n";
        return ctl::kExitUsage;
    }
    sub.psferr_given = psferr->count() > 0;
    if (*keygen) {
        // The secret key goes to its file only, never to the terminal or a log.
        for (const auto& path : {secret_file, public_file}) {
            if (!overwrite && std::filesystem::exists(path)) {
                std::cerr << "ex2dctl: " << path << " exists (give --force to replace it)\n";
                return ctl::kExitUsage;
            }
        }
        auto keys = service::generate_curve_keypair();
        Status written = keys.is_ok() ? service::write_curve_key_files(keys.value(), secret_file, public_file)
                                      : keys.status();
        if (!written.is_ok()) {
            std::cerr << "ex2dctl: keygen: " << written.message() << "\n";
            return ctl::kExitUsage;
        }
        std::cout << keys.value().public_key << "\n";
        return ctl::kExitOk;
    }
    try {
        if (*submit) ctl::check_submit_args(sub);
        service::Config config;
        const char* args[] = {"ex2dctl", "--config", config_file.c_str()};
        Status loaded = config.load(config_file.empty() ? 1 : 3, args);
        if (!loaded.is_ok()) throw ctl::CtlExit{ctl::kExitUsage, loaded.message()};
        if (!redis_host.empty()) (void)config.set("redis.host", redis_host, "command line");
        if (redis_port > 0) (void)config.set("redis.port", std::to_string(redis_port), "command line");
        if (!ns.empty()) (void)config.set("redis.namespace", ns, "command line");
        auto options = service::redis_options_from_config(config);
        if (!options.is_ok()) throw ctl::CtlExit{ctl::kExitUsage, options.status().message()};
        ctl::Connection c;
        c.redis = std::make_unique<service::RedisClient>(options.value());
        Status connected = c.redis->connect_once();
        // A refused password is a configuration error (2), like the services'; an unreachable
        // Redis is 3.
        if (!connected.is_ok()) {
            throw ctl::CtlExit{connected.code() == StatusCode::invalid_argument ? ctl::kExitUsage
                                                                                : ctl::kExitRedis,
                               connected.message()};
        }
        c.plane = std::make_unique<service::ControlPlane>(*c.redis, config.get_string("redis.namespace"));
        if (campaign.empty()) campaign = "nightly";
        sub.json = json;
        if (*submit) return ctl::submit(c, sub);
        const auto heartbeat_ttl_ms = (long long)(config.get_double("service.heartbeat_ttl_s") * 1000);
        if (*status) {
            const auto lease_ms = (long long)(config.get_double("queue.lease_s") * 1000);
            return ctl::status(c, night, exposure, campaign, json, lease_ms, heartbeat_ttl_ms);
        }
        if (*requeue) return ctl::requeue(c, exposure, campaign, night, json);
        if (*workers) return ctl::workers(c, json, heartbeat_ttl_ms);
        if (*drain) return ctl::drain(c, name);
        if (*camp) return ctl::campaign_action(c, action, name);
        if (*wait) return ctl::wait_exposure(c, exposure, campaign, timeout_s);
    } catch (const ctl::CtlExit& e) {
        std::cerr << "ex2dctl: " << e.message << "\n";
        return e.code;
    }
    return ctl::kExitOk;
}
