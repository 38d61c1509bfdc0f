// SPDX-License-Identifier: BSD-3-Clause
// ex2d-data-plane-bench: CPU and wall seconds of each step a full-size frame takes through the
// fleet's data plane, one named stage at a time, so that a step can be measured alone and new
// stages (the reader's, say) added beside the writer's. docs/benchmarks.md has the figures.

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_frame.hpp"
#include "compressors.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/service/allocator.hpp"
#include "ex2d/service/frame_messages.hpp"
#include "ex2d/service/wire.hpp"
#include "writer.hpp"

namespace {

using namespace ex2d;
using namespace ex2d::bench;
namespace fs = std::filesystem;

struct Sample {
    double cpu_s = 0;
    double wall_s = 0;
};

/// One line of the report: a step, what it was given, its repetitions and the bytes it made.
struct Row {
    std::string stage;
    std::string candidate;
    std::vector<Sample> samples;
    long long bytes = 0;
    std::string note;
};

struct Context {
    int repeat = 3;
    bool fsync = false;
    std::vector<std::string> suffixes = {".fits.gz", ".fits"};  ///< output kinds written
    std::string dir;                 ///< scratch folder for the files written
    service::FrameOutputs outputs;   ///< the frame as the writer receives it
    std::vector<std::uint8_t> fits;  ///< its uncompressed FITS file
    std::string base;                ///< output path without suffix
};

struct Stage {
    std::string name;
    std::string what;
    std::function<Status(Context&, std::vector<Row>&)> run;
};

double process_cpu_seconds()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// Times `step` `repeat` times; `between` runs untimed after each (to remove its output).
Result<std::vector<Sample>> time_steps(int repeat, const std::function<Status()>& step,
                                       const std::function<void()>& between = {})
{
    std::vector<Sample> samples;
    for (int r = 0; r < repeat; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = process_cpu_seconds();
        EX2D_RETURN_NOT_OK(step());
        samples.push_back(
            {process_cpu_seconds() - c0,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
        if (between) between();
    }
    return samples;
}

long long file_bytes(const std::string& path)
{
    std::error_code ec;
    const auto n = fs::file_size(path, ec);
    return ec ? -1 : (long long)n;
}

FrameProvenance provenance_of(const service::FrameOutputs& out)
{
    FrameProvenance prov;
    prov.image_header = out.image_header;
    prov.fibermap = out.fibermap;
    prov.options = out.options;
    prov.input_image = out.job.preproc;
    prov.input_psf = out.job.psf;
    return prov;
}

/// The ledger of a writer without Redis: nothing to sweep after this process.
class NoLedger : public writer::TemporaryLedger {
public:
    Status record(const std::string&) override { return Status::ok(); }
    void forget(const std::string&) override {}
};

Status stage_write_output(Context& ctx, std::vector<Row>& rows)
{
    NoLedger ledger;
    const service::Actor me{"bench-writer", "localhost", ::getpid()};
    for (const std::string& suffix : ctx.suffixes) {
        service::FrameOutputs out = ctx.outputs;
        out.job.output = ctx.base + suffix;
        long long bytes = 0;
        EX2D_ASSIGN_OR_RETURN(auto samples,
                              time_steps(
                                  ctx.repeat,
                                  [&]() -> Status {
                                      EX2D_ASSIGN_OR_RETURN(
                                          writer::WriteOutcome o,
                                          writer::write_output(
                                              out, me, ctx.fsync, [] { return true; }, ledger));
                                      bytes = o.bytes;
                                      return Status::ok();
                                  },
                                  [&] { fs::remove(out.job.output); }));
        rows.push_back({"write_output", suffix, std::move(samples), bytes,
                        ctx.fsync ? "with fsync" : "no fsync"});
    }
    return Status::ok();
}

Status stage_write_frame(Context& ctx, std::vector<Row>& rows)
{
    const FrameProvenance prov = provenance_of(ctx.outputs);
    for (const std::string& suffix : ctx.suffixes) {
        const std::string path = ctx.base + "-frame" + suffix;
        long long bytes = 0;
        EX2D_ASSIGN_OR_RETURN(
            auto samples, time_steps(
                              ctx.repeat,
                              [&]() -> Status {
                                  EX2D_RETURN_NOT_OK(write_frame(path, ctx.outputs.frame, prov));
                                  bytes = file_bytes(path);
                                  return Status::ok();
                              },
                              [&] { fs::remove(path); }));
        rows.push_back({"write_frame", suffix, std::move(samples), bytes, ""});
    }
    return Status::ok();
}

/// The RESULT message: the worker's encoding (its payload checksum included) and the writer's
/// decoding of the parts as ZeroMQ hands them over (copied here into fresh messages, as a
/// receive allocates them).
Status stage_result(Context& ctx, std::vector<Row>& rows)
{
    std::vector<zmq::message_t> parts;
    long long bytes = 0;
    EX2D_ASSIGN_OR_RETURN(auto encode, time_steps(ctx.repeat, [&]() -> Status {
                              parts = wire::encode(service::encode_result(ctx.outputs));
                              bytes = 0;
                              for (const auto& p : parts) bytes += (long long)p.size();
                              return Status::ok();
                          }));
    rows.push_back(
        {"result", "encode (worker)", std::move(encode), bytes, "FrameOutputs copied in"});
    EX2D_ASSIGN_OR_RETURN(auto decode, time_steps(ctx.repeat, [&]() -> Status {
                              std::vector<zmq::message_t> received;
                              received.reserve(parts.size());
                              for (const auto& p : parts) received.emplace_back(p.data(), p.size());
                              wire::DecodeError error;
                              auto message = wire::decode(std::move(received), error);
                              if (!message) return Status::format("RESULT: " + error.detail);
                              EX2D_ASSIGN_OR_RETURN(service::FrameOutputs out,
                                                    service::decode_result(*message));
                              return out.frame.nspec == ctx.outputs.frame.nspec
                                         ? Status::ok()
                                         : Status::format("RESULT: nspec differs");
                          }));
    rows.push_back(
        {"result", "decode (writer)", std::move(decode), bytes, "receive copy included"});
    return Status::ok();
}

/// The frame's uncompressed file in memory: the input of the gzip candidates and the
/// reference of every size ratio.
Status load_fits_bytes(Context& ctx)
{
    const std::string path = ctx.base + "-bytes.fits";
    EX2D_RETURN_NOT_OK(write_frame(path, ctx.outputs.frame, provenance_of(ctx.outputs)));
    std::ifstream in(path, std::ios::binary);
    ctx.fits.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    fs::remove(path);
    if (ctx.fits.empty()) return Status::io(path + ": cannot read back the frame just written");
    return Status::ok();
}

Status stage_gzip(Context& ctx, std::vector<Row>& rows)
{
    for (const GzipCandidate& c : gzip_candidates()) {
        std::vector<std::uint8_t> gz;
        EX2D_ASSIGN_OR_RETURN(auto samples, time_steps(ctx.repeat, [&]() -> Status {
                                  EX2D_ASSIGN_OR_RETURN(gz, gzip(c, ctx.fits));
                                  return Status::ok();
                              }));
        const Status valid = check_gzip(gz, ctx.fits);
        if (!valid.is_ok())
            return Status(valid.code(),
                          c.library + " " + std::to_string(c.level) + ": " + valid.message());
        rows.push_back({"gzip", c.library + " " + std::to_string(c.level), std::move(samples),
                        (long long)gz.size(), c.note});
    }
    return Status::ok();
}

std::vector<Stage> all_stages()
{
    return {
        {"write_output", "the writer service's write (identity check, temporary, rename, checksum)",
         stage_write_output},
        {"write_frame", "the engine's frame writer alone", stage_write_frame},
        {"result", "the RESULT message: the worker's encoding, the writer's decoding",
         stage_result},
        {"gzip", "gzip candidates on the frame's FITS bytes (single member, checked with zlib)",
         stage_gzip},
    };
}

void print_report(const std::vector<Row>& rows, long long fits_bytes)
{
    std::printf(
        "\n| stage | candidate | reps | CPU s mean | CPU s min | wall s mean | size MB | ratio | "
        "note |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (const Row& r : rows) {
        double cpu = 0, wall = 0, cpu_min = 1e300;
        for (const Sample& s : r.samples) {
            cpu += s.cpu_s;
            wall += s.wall_s;
            cpu_min = std::min(cpu_min, s.cpu_s);
        }
        const double n = double(std::max<size_t>(r.samples.size(), 1));
        const double ratio =
            fits_bytes > 0 && r.bytes > 0 ? double(fits_bytes) / double(r.bytes) : 0;
        std::printf("| %s | %s | %zu | %.3f | %.3f | %.3f | %.1f | %.2f | %s |\n", r.stage.c_str(),
                    r.candidate.c_str(), r.samples.size(), cpu / n, cpu_min, wall / n,
                    double(r.bytes) / 1e6, ratio, r.note.c_str());
    }
}

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{
        "ex2d-data-plane-bench: CPU and wall seconds per step of a full-size frame "
        "through the data plane"};
    FrameSource source;
    Context ctx;
    std::vector<std::string> selected;
    std::string save_frame;
    bool list = false;
    app.add_option("--frame", source.frame, "frame file to use (else --psf, else synthetic)");
    app.add_option("--psf", source.psf, "PSF: simulate a full r0 frame and extract it once");
    app.add_option("--threads", source.threads, "threads for that extraction");
    app.add_option("--save-frame", save_frame,
                   "write the frame used here (uncompressed), for --frame");
    app.add_option("--stage", selected, "stages to run (repeatable; default all)");
    app.add_flag("--list", list, "list the stages and exit");
    app.add_option("-n,--repeat", ctx.repeat, "repetitions per step")->check(CLI::PositiveNumber);
    app.add_flag("--fsync", ctx.fsync, "write_output fsyncs file and folder as writer.fsync does");
    app.add_option("--suffix", ctx.suffixes, "output kinds the write stages write (repeatable)")
        ->check(CLI::IsMember({".fits.gz", ".fits"}));
    app.add_option("--dir", ctx.dir, "scratch folder (default: a new one under the temp folder)");
    CLI11_PARSE(app, argc, argv);

    const std::vector<Stage> stages = all_stages();
    std::printf("malloc: %s\n", ex2d::service::allocator_description().c_str());
    if (list) {
        for (const Stage& s : stages) std::printf("%-14s %s\n", s.name.c_str(), s.what.c_str());
        return 0;
    }
    for (const std::string& name : selected) {
        if (std::none_of(stages.begin(), stages.end(),
                         [&](const Stage& s) { return s.name == name; })) {
            std::fprintf(stderr, "ex2d-data-plane-bench: no stage '%s' (see --list)\n",
                         name.c_str());
            return 2;
        }
    }
    const bool own_dir = ctx.dir.empty();
    if (own_dir) {
        ctx.dir = (fs::temp_directory_path() / ("ex2d-data-plane-" + std::to_string(::getpid())))
                      .string();
    }
    fs::create_directories(ctx.dir);
    auto made = make_bench_frame(source, ctx.dir);
    if (!made.is_ok()) {
        std::fprintf(stderr, "ex2d-data-plane-bench: %s\n", made.status().to_string().c_str());
        return 1;
    }
    ctx.outputs = std::move(made).value();
    ctx.base = ctx.outputs.job.output;
    if (const Status s = load_fits_bytes(ctx); !s.is_ok()) {
        std::fprintf(stderr, "ex2d-data-plane-bench: %s\n", s.to_string().c_str());
        return 1;
    }
    if (!save_frame.empty()) {
        const Status s = write_frame(save_frame, ctx.outputs.frame, provenance_of(ctx.outputs));
        if (!s.is_ok()) {
            std::fprintf(stderr, "ex2d-data-plane-bench: %s\n", s.to_string().c_str());
            return 1;
        }
    }
    std::printf(
        "ex2d-data-plane-bench: frame %d fibres x %d bins x %d diagonals (%s), %d "
        "repetitions, folder %s\n",
        ctx.outputs.frame.nspec, ctx.outputs.frame.nwave, ctx.outputs.frame.ndiag,
        !source.frame.empty() ? source.frame.c_str()
        : !source.psf.empty() ? "extracted"
                              : "synthetic",
        ctx.repeat, ctx.dir.c_str());
    std::vector<Row> rows;
    int rc = 0;
    for (const Stage& s : stages) {
        if (!selected.empty() &&
            std::find(selected.begin(), selected.end(), s.name) == selected.end()) {
            continue;
        }
        const Status st = s.run(ctx, rows);
        if (!st.is_ok()) {
            std::fprintf(stderr, "ex2d-data-plane-bench: stage %s: %s\n", s.name.c_str(),
                         st.to_string().c_str());
            rc = 1;
        }
    }
    print_report(rows, (long long)ctx.fits.size());
    if (own_dir) fs::remove_all(ctx.dir);
    return rc;
}
