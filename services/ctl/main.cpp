// SPDX-License-Identifier: BSD-3-Clause
// ex2dctl: submit exposures, nights and campaigns; see where they stand; requeue, drain.
#include <exception>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "ctl.hpp"
#include "ex2d/service/config.hpp"
#include "ex2d/service/curve.hpp"
#include "ex2d/service/settings.hpp"

namespace {

using namespace ex2d;

/// Options before the subcommand: where the fleet's Redis is and how to print.
struct GlobalArgs {
    std::string config_file, redis_host, ns;
    int redis_port = 0;
    bool json = false;
};

/// The options of the subcommands other than submit, and which subcommand was given.
struct CommandArgs {
    std::string night, exposure, campaign, name, action, timingfile;
    double timeout_s = 0;
    std::string secret_file, public_file;
    bool overwrite = false;
    CLI::App* submit = nullptr;
    CLI::Option* psferr = nullptr;
    CLI::App* status = nullptr;
    CLI::App* requeue = nullptr;
    CLI::App* workers = nullptr;
    CLI::App* drain = nullptr;
    CLI::App* campaign_cmd = nullptr;
    CLI::App* keygen = nullptr;
    CLI::App* wait = nullptr;
    CLI::App* timing = nullptr;
    CLI::App* qa = nullptr;
};

void add_global_options(CLI::App& app, GlobalArgs& g)
{
    app.add_option("--config", g.config_file, "Fleet configuration (YAML); default $EX2D_CONFIG");
    app.add_option("--redis-host", g.redis_host, "Redis host (default: redis.host)");
    app.add_option("--redis-port", g.redis_port, "Redis port (default: redis.port)");
    app.add_option("--namespace", g.ns, "Key namespace (default: redis.namespace)");
    app.add_flag("--json", g.json, "Machine-readable output");
}

void add_submit_command(CLI::App& app, ctl::SubmitArgs& sub, CommandArgs& a)
{
    auto* submit =
        app.add_subcommand("submit", "Queue frames: files, an exposure, a night, a list or a tree");
    submit->add_option("--preproc", sub.preproc,
                       "Preproc files (.../NIGHT/EXPID/preproc-CAM-EXPID.fits)");
    submit->add_option("--exposure-dir", sub.exposure_dir,
                       "Folder of one exposure's preproc files");
    submit->add_option("--night-dir", sub.night_dir,
                       "Folder of a night (one sub-folder per exposure)");
    submit->add_option("--list", sub.list_file, "File listing preproc files, one per line");
    submit->add_option("--tree", sub.tree, "Folder searched recursively for preproc files");
    submit
        ->add_option("--psf", sub.psf_template, "PSF path; {night} {expid} {camera} are filled in")
        ->required();
    submit
        ->add_option(
            "--output-root", sub.output_root,
            "SPECPROD folder: frames go to exposures/NIGHT/EXPID/frame-CAM-EXPID.fits[.gz]")
        ->required();
    submit->add_option(
        "--badcolumns", sub.badcolumns_template,
        "Bad-column table (calibnight CSV) whose mask each frame gets; {night} {expid} "
        "{camera} are filled in; none: no bad-column step (default: "
        "SPECPROD/calibnight/{night}/badcolumns-{camera}-{night}.csv for preproc files in "
        "desispec's SPECPROD/preproc/NIGHT/EXPID/, else none)");
    submit->add_option("--lane", sub.lane, "nightly or campaign")->capture_default_str();
    submit->add_option("--campaign", sub.campaign, "Campaign name (campaign lane)");
    submit
        ->add_option("-w,--wavelength", sub.wavelength,
                     "wmin,wmax,dw, or auto for desi_proc's grid of each camera's arm")
        ->capture_default_str();
    a.psferr =
        submit->add_option("--psferr", sub.psferr, "PSF error (default: desi_proc's per arm)");
    submit->add_option("-s,--specmin", sub.specmin, "First spectrum")->capture_default_str();
    submit->add_option("-n,--nspec", sub.nspec, "Number of spectra")->capture_default_str();
    submit->add_option("--compression", sub.compression, "gz, none, or env ($DESI_COMPRESSION)")
        ->capture_default_str();
    submit
        ->add_option("--trace-shifts", sub.trace_shifts,
                     "Trace shifts before extraction: auto (desi_proc's: sky for SCIENCE and "
                     "SKY, continuum for FLAT, TESTFLAT and TWILIGHT, none otherwise), sky, "
                     "continuum or none")
        ->check(CLI::IsMember({"auto", "sky", "continuum", "none"}))
        ->capture_default_str();
    submit->add_flag("--write-shifted-psf", sub.write_shifted_psf,
                     "Also write the trace-shifted PSF where desi_proc does: "
                     "exposures/NIGHT/EXPID/psf-CAM-EXPID.fits");
    submit->add_flag("--force", sub.force, "Queue frames already done again");
    a.submit = submit;
}

void add_fleet_commands(CLI::App& app, CommandArgs& a)
{
    const CLI::Validator expid_check(ctl::exposure_id_error, "EXPID", "exposure id");
    a.status = app.add_subcommand("status", "The fleet, a night or an exposure");
    a.status->add_option("--night", a.night, "Night YYYYMMDD");
    a.status->add_option("--exposure", a.exposure, "Exposure id")->check(expid_check);
    a.status->add_option("--campaign", a.campaign, "Campaign of the exposure (default nightly)");
    a.requeue = app.add_subcommand("requeue", "Queue failed and dead frames again");
    a.requeue->add_option("--exposure", a.exposure, "Exposure id")->check(expid_check);
    a.requeue->add_option("--night", a.night, "Night YYYYMMDD");
    a.requeue->add_option("--campaign", a.campaign, "Campaign (default nightly)");
    a.workers = app.add_subcommand("workers", "Live processes: role, host, device, current frame");
    a.drain = app.add_subcommand("drain", "Ask one process to finish its frame and exit");
    a.drain->add_option("name", a.name, "Process name (ex2dctl workers)")->required();
    a.campaign_cmd = app.add_subcommand("campaign", "Pause, resume or cancel a campaign");
    a.campaign_cmd->add_option("action", a.action, "pause, resume or cancel")
        ->required()
        ->check(CLI::IsMember({"pause", "resume", "cancel"}));
    a.campaign_cmd->add_option("name", a.name, "Campaign name")->required();
    a.keygen = app.add_subcommand(
        "keygen", "Write a new CURVE key pair for zmq.curve_secret_key_file (no Redis needed)");
    a.keygen->add_option("--secret-file", a.secret_file, "Secret key file to write (mode 0600)")
        ->required();
    a.keygen->add_option("--public-file", a.public_file, "Public key file to write (mode 0644)")
        ->required();
    a.keygen->add_flag("--force", a.overwrite, "Replace existing files");
    a.wait = app.add_subcommand("wait", "Wait until an exposure is finished");
    a.wait->add_option("--exposure", a.exposure, "Exposure id")->required()->check(expid_check);
    a.wait->add_option("--campaign", a.campaign, "Campaign (default nightly)");
    a.wait->add_option("--timeout", a.timeout_s,
                       "Seconds; 0 = no limit. Redis unreachable meanwhile: the wait goes on");
    a.wait->add_option("--timingfile", a.timingfile,
                       "Once the exposure has ended, add its step timings to this JSON file "
                       "(as `ex2dctl timing`)");
    a.timing = app.add_subcommand(
        "timing",
        "Add an exposure's read, extract and write timings over its written frames to "
        "a JSON file in desi_proc's --timingfile form");
    a.timing->add_option("--exposure", a.exposure, "Exposure id")->required()->check(expid_check);
    a.timing->add_option("--campaign", a.campaign, "Campaign (default nightly)");
    a.timing->add_option("--timingfile", a.timingfile, "JSON file to add them to")->required();
    a.qa = app.add_subcommand("qa",
                              "Write an HTML QA report of frames: an exposure, a night or a "
                              "campaign, with the fleet's state where Redis answers (qa --help)");
    a.qa->prefix_command();
    a.qa->set_help_flag();
    a.qa->fallthrough(false);  // every argument, --help included, is the report's
}

/// The global options given, as ex2dctl's own arguments for the report's `status` calls.
std::vector<std::string> fleet_arguments(const GlobalArgs& g)
{
    std::vector<std::string> out;
    if (!g.config_file.empty()) out.insert(out.end(), {"--config", g.config_file});
    if (!g.redis_host.empty()) out.insert(out.end(), {"--redis-host", g.redis_host});
    if (g.redis_port > 0) out.insert(out.end(), {"--redis-port", std::to_string(g.redis_port)});
    if (!g.ns.empty()) out.insert(out.end(), {"--namespace", g.ns});
    return out;
}

/// keygen: the secret key goes to its file only, never to the terminal or a log.
int run_keygen(const CommandArgs& a)
{
    for (const auto& path : {a.secret_file, a.public_file}) {
        if (!a.overwrite && std::filesystem::exists(path)) {
            std::cerr << "ex2dctl: " << path << " exists (give --force to replace it)\n";
            return ex2d::kExitUsage;
        }
    }
    auto keys = service::generate_curve_keypair();
    if (!keys.is_ok()) {
        std::cerr << "ex2dctl: keygen: " << keys.status().message() << "\n";
        return ex2d::kExitRuntime;
    }
    const Status written =
        service::write_curve_key_files(keys.value(), a.secret_file, a.public_file);
    if (!written.is_ok()) {
        std::cerr << "ex2dctl: keygen: " << written.message() << "\n";
        return ex2d::kExitOutput;
    }
    std::cout << keys.value().public_key << "\n";
    return ex2d::kExitOk;
}

/// The configuration (the file, then EX2D_SECTION_KEY variables) with the command line's
/// Redis settings over it; CtlExit(usage) where it cannot be loaded.
service::FleetSettings load_settings(const GlobalArgs& g)
{
    service::Config config;
    const char* args[] = {"ex2dctl", "--config", g.config_file.c_str()};
    Status loaded = config.load(g.config_file.empty() ? 1 : 3, args);
    if (!loaded.is_ok()) throw ctl::CtlExit{ex2d::kExitUsage, loaded.message()};
    if (!g.redis_host.empty()) (void)config.set("redis.host", g.redis_host, "command line");
    if (g.redis_port > 0)
        (void)config.set("redis.port", std::to_string(g.redis_port), "command line");
    if (!g.ns.empty()) (void)config.set("redis.namespace", g.ns, "command line");
    return service::FleetSettings::from(config);
}

/// A connection to the fleet's Redis. A refused password is a configuration error (usage),
/// as in the services; an unreachable Redis is kExitRedis, except for `wait`
/// (`unreachable_ok`), which waits for it as for the exposure.
ctl::Connection connect(const service::RedisSettings& settings, bool unreachable_ok)
{
    auto options = service::redis_options(settings);
    if (!options.is_ok()) throw ctl::CtlExit{ex2d::kExitUsage, options.status().message()};
    ctl::Connection c;
    c.redis = std::make_unique<service::RedisClient>(options.value());
    Status connected = c.redis->connect_once();
    if (!connected.is_ok() &&
        !(unreachable_ok && connected.code() != StatusCode::invalid_argument)) {
        throw ctl::CtlExit{
            connected.code() == StatusCode::invalid_argument ? ex2d::kExitUsage : ex2d::kExitRedis,
            connected.message()};
    }
    c.plane = std::make_unique<service::ControlPlane>(*c.redis, settings.key_namespace);
    return c;
}

/// Runs the subcommand given against the fleet; throws CtlExit on failure.
int run_fleet_command(const GlobalArgs& g, ctl::SubmitArgs& sub, CommandArgs& a)
{
    if (*a.submit) ctl::check_submit_args(sub);
    const service::FleetSettings settings = load_settings(g);
    ctl::Connection c = connect(settings.redis, bool(*a.wait));
    if (a.campaign.empty()) a.campaign = "nightly";
    sub.json = g.json;
    if (*a.submit) return ctl::submit(c, sub);
    const long long heartbeat_ttl_ms = settings.service.heartbeat_ttl_ms();
    if (*a.status) {
        return ctl::status(c, a.night, a.exposure, a.campaign, g.json, settings.queue.lease_ms(),
                           heartbeat_ttl_ms);
    }
    if (*a.requeue) return ctl::requeue(c, a.exposure, a.campaign, a.night, g.json);
    if (*a.workers) return ctl::workers(c, g.json, heartbeat_ttl_ms);
    if (*a.drain) return ctl::drain(c, a.name);
    if (*a.campaign_cmd) return ctl::campaign_action(c, a.action, a.name);
    if (*a.wait) {
        const int ended = ctl::wait_exposure(c, a.exposure, a.campaign, a.timeout_s);
        if (a.timingfile.empty() || ended == ex2d::kExitTimeout) return ended;
        const int timed = ctl::write_exposure_timing(c, a.exposure, a.campaign, a.timingfile);
        return ended != ex2d::kExitOk ? ended : timed;
    }
    if (*a.timing) return ctl::write_exposure_timing(c, a.exposure, a.campaign, a.timingfile);
    return ex2d::kExitOk;
}

}  // namespace

// A function-try-block: what escapes the commands, CLI11's set-up included, ends in one line.
int main(int argc, char** argv)
try {
    CLI::App app{"ex2dctl: operate the ex2d extraction fleet through its Redis control plane"};
    app.require_subcommand(1);
    // The options above the subcommand also after it (`ex2dctl status --json`), as an
    // operator types them; subcommands created below inherit this.
    app.fallthrough();
    GlobalArgs global;
    ctl::SubmitArgs sub;
    CommandArgs commands;
    add_global_options(app, global);
    add_submit_command(app, sub, commands);
    add_fleet_commands(app, commands);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help is an "error" with code 0; every other parse error is a usage error, not
        // CLI11's own code (105-109), so that scripts see ex2dctl's documented codes.
        if (e.get_exit_code() == 0) return app.exit(e);
        std::cerr << "ex2dctl: " << e.what() << " (run with --help for more information)\n";
        return ex2d::kExitUsage;
    }
    sub.psferr_given = commands.psferr->count() > 0;
    if (*commands.keygen) return run_keygen(commands);
    if (*commands.qa) return ctl::run_qa(commands.qa->remaining(), fleet_arguments(global));
    try {
        return run_fleet_command(global, sub, commands);
    } catch (const ctl::CtlExit& e) {
        std::cerr << "ex2dctl: " << e.message << "\n";
        return e.code;
    }
} catch (const std::exception& e) {
    std::cerr << "ex2dctl: internal error: " << e.what() << "\n";
    return ex2d::kExitRuntime;
}
