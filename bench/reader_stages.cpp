// SPDX-License-Identifier: BSD-3-Clause
// What a reader spends per frame, step by step: ex2d-reader-stages PREPROC PSF [--repeat N]
// Runs the reader's own load_frame and message encoding in this process, so that the CPU
// seconds of each step can be told apart (the service interleaves them with its sockets).
#include <time.h>

#include <cstdio>
#include <string>

#include "ex2d/service/frame_messages.hpp"
#include "ex2d/service/wire.hpp"
#include "load_frame.hpp"

namespace {

double cpu_now()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double wall_now()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s PREPROC PSF [REPEAT]\n", argv[0]);
        return 2;
    }
    const int repeat = argc > 3 ? std::atoi(argv[3]) : 5;
    ex2d::service::Job job;
    job.job = "nightly/00000007/r2";
    job.lane = "nightly";
    job.campaign = "nightly";
    job.night = "20261122";
    job.expid = "00000007";
    job.camera = "r2";
    job.preproc = argv[1];
    job.psf = argv[2];
    job.output = "/tmp/unused.fits";
    job.options = R"({"wavelength":"5760.0,7620.0,0.8","specmin":0,"nspec":500})";
    job.stream = "s";
    job.stream_id = "1-0";
    std::printf("step                     cpu_s   wall_s\n");
    ex2d::reader::FrameLoader loader("bench");
    for (int i = 0; i < repeat; ++i) {
        double c0 = cpu_now(), w0 = wall_now();
        auto loaded = loader.load(job);
        if (!loaded.is_ok()) {
            std::fprintf(stderr, "%s\n", loaded.status().message().c_str());
            return 1;
        }
        double c1 = cpu_now(), w1 = wall_now();
        double c2 = c1, w2 = w1;
        auto parts = ex2d::wire::encode(loaded.value().message);
        double c3 = cpu_now(), w3 = wall_now();
        std::size_t bytes = 0;
        for (auto& p : parts) bytes += p.size();
        std::printf("load (read+encode)     %7.3f  %7.3f\n", c1 - c0, w1 - w0);
        std::printf("encode_frame           %7.3f  %7.3f\n", c2 - c1, w2 - w1);
        std::printf("wire::encode           %7.3f  %7.3f  (%zu MB)\n", c3 - c2, w3 - w2, bytes >> 20);
        std::printf("total                  %7.3f  %7.3f\n", c3 - c0, w3 - w0);
    }
    return 0;
}
