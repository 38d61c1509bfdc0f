// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A fleet on this machine for the fault tests: a real redis-server on a free loopback port,
// the real ex2d-reader/worker/writer binaries and ex2dctl, small simulated frames, fault
// injection with real signals, and a checker that counts lost, duplicated and partial outputs.

#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "ex2d/service/redis_client.hpp"

namespace ex2d::fleet_test {

/// A child process with its output in a log file.
class Process {
public:
    Process(std::string name, std::vector<std::string> argv,
            const std::map<std::string, std::string>& env, std::string log_path);
    ~Process();  ///< SIGKILL if still running
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    pid_t pid() const { return pid_; }
    const std::string& name() const { return name_; }
    const std::string& log_path() const { return log_path_; }
    void signal(int sig) const;
    bool running();
    /// Exit code, 128+signal for a signalled process, or -1 if it is still running after
    /// `timeout_s`.
    int wait(double timeout_s);
    std::string log() const;
    /// Resident memory in KiB from /proc (0 when gone).
    long rss_kib() const;

private:
    std::string name_, log_path_;
    pid_t pid_ = -1;
    int status_ = -1;
    bool reaped_ = false;
};

/// What the checker counts over a run.
struct Outcome {
    int expected = 0;
    int done = 0;        ///< frames in state done with their file present and readable
    int lost = 0;        ///< expected frames with no complete output
    int duplicates = 0;  ///< outputs written more than once (writer logs)
    int partial = 0;     ///< unreadable outputs and temporary files left behind
    int dead = 0;        ///< frames dead-lettered
    std::string report() const;
};

/// How the test's redis-server is started and reached, for tests of access control.
struct RedisSetup {
    std::vector<std::string> args;  ///< extra redis-server arguments, e.g. {"--aclfile", path}
    std::string user, password;     ///< what the harness itself authenticates with (redis(), probe)
};

class Fleet {
public:
    /// Starts redis-server (AOF, noeviction) in a fresh folder named after the test.
    explicit Fleet(const std::string& test_name, RedisSetup redis_setup = {});
    ~Fleet();

    const std::string& dir() const { return dir_; }
    /// The services' zmq.shm_dir: a folder of the test's own in /dev/shm, removed with it.
    const std::string& shm_dir() const { return shm_dir_; }
    int redis_port() const { return redis_port_; }
    /// The test's redis-server process id (-1 when it is not running).
    pid_t redis_pid() const;
    /// Flags every service gets: Redis port, short leases for tests, ipc:// endpoints.
    std::map<std::string, std::string> settings;
    /// Environment every service gets (fault injection).
    std::map<std::string, std::string> env;
    /// Environment of every ex2dctl run (e.g. EX2D_REDIS_USER, EX2D_REDIS_PASSWORD_FILE).
    std::map<std::string, std::string> ctl_env;

    Process& start(const std::string& role, const std::string& name,
                   const std::map<std::string, std::string>& extra_settings = {},
                   const std::map<std::string, std::string>& extra_env = {});
    /// Starts ex2dctl with these arguments in the background (stdout and stderr in its log).
    Process& start_ctl(const std::string& name, const std::vector<std::string>& args);
    /// Runs ex2dctl with these arguments; returns its exit code, stdout in `out`.
    int ctl(const std::vector<std::string>& args, std::string* out = nullptr);

    /// Simulates small frames (25 fibres, 6000-6100 A, a cut-down r0 PSF) of one exposure
    /// under dir/preproc/NIGHT/EXPID; returns the preproc paths.
    std::vector<std::string> make_exposure(int expid, const std::vector<std::string>& cameras,
                                           const std::string& night = "20261122");
    /// make_exposure for many exposures, running up to `parallel` simulations at once (the
    /// chaos soak makes hundreds of frames); the files are the same as make_exposure's.
    void make_exposures(const std::vector<int>& expids, const std::vector<std::string>& cameras,
                        int parallel, const std::string& night = "20261122");
    /// ex2dctl submit for the exposure folder, with the small frames' options and
    /// --trace-shifts none unless `extra` names another.
    int submit(int expid, const std::string& night = "20261122",
               const std::vector<std::string>& extra = {});
    /// Waits until the exposure is no longer active; false on timeout.
    bool wait_exposure(int expid, double timeout_s, const std::string& campaign = "nightly");
    /// State of one frame hash field.
    std::string frame_field(int expid, const std::string& camera, const std::string& field,
                            const std::string& campaign = "nightly");
    /// Runs a Redis command on the test's server.
    service::RedisValue redis(const std::vector<std::string>& args);

    void kill_redis();
    void restart_redis();

    /// Counts lost, duplicated and partial outputs of the submitted exposures.
    Outcome check(const std::vector<int>& expids, const std::vector<std::string>& cameras,
                  const std::string& night = "20261122");
    /// check() over frames given one by one (expid, camera), e.g. exposures of different
    /// cameras; stray files under out/ are counted once.
    Outcome check_frames(const std::vector<std::pair<int, std::string>>& frames,
                         const std::string& night = "20261122");
    /// Output path of a frame.
    std::string output_path(int expid, const std::string& camera,
                            const std::string& night = "20261122") const;
    /// All log lines of all processes containing `text`.
    int count_log_lines(const std::string& text) const;

    /// The small PSF of `camera` (the same PSF labelled with each camera, since ex2d checks
    /// that image and PSF are of the same camera); psf_template() is ex2dctl's --psf for it.
    std::string psf_path(const std::string& camera) const
    {
        return dir_ + "/calib/psf-small-" + camera + ".fits";
    }
    std::string psf_template() const { return dir_ + "/calib/psf-small-{camera}.fits"; }

private:
    bool start_redis();  ///< false when redis-server exited at start (its port was taken)
    void ensure_small_psf(const std::string& camera);
    std::vector<std::string> simulate_argv(int expid, const std::string& camera, int seed,
                                           const std::string& night, std::string* path);
    std::string dir_;
    std::string shm_dir_;
    RedisSetup redis_setup_;
    int redis_port_ = 0;
    std::unique_ptr<Process> redis_server_;
    std::vector<std::unique_ptr<Process>> processes_;
};

/// Temporary files (".tmp-" or ".replaced-") anywhere under `dir`.
int temporaries_under(const std::string& dir);

/// An exposure id as the fleet writes it in job ids, keys and paths: eight digits.
std::string expid8(int expid);

/// Waits until `predicate` holds, polling every 50 ms; false after `timeout_s`.
bool eventually(double timeout_s, const std::function<bool()>& predicate);

/// Compares the identity of an output frame with that of its preproc input: the FIBER column
/// of their FIBERMAPs (the input's first `nspec` rows), and the output header's CAMERA, EXPID
/// and NIGHT. Empty when they agree, otherwise what differs.
std::string identity_mismatch(const std::string& input, const std::string& output,
                              const std::string& camera, int expid, int nspec = 25,
                              const std::string& night = "20261122");

/// GET `path` from a service's "host:port" (its registered http address) over HTTP/1.0; the
/// whole response, or empty when the address is not registered yet or refuses.
std::string http_get(const std::string& address, const std::string& path);

}  // namespace ex2d::fleet_test
