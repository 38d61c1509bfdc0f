// SPDX-License-Identifier: BSD-3-Clause
// What a reader spends per frame, step by step:
//   ex2d-reader-stages PREPROC PSF [REPEAT] [--cold] [--read auto|mmap|direct]
// --cold drops the preproc file and the PSF from the page cache before each load
// (posix_fadvise DONTNEED), as in production, where desispec wrote them long before, often on
// another node; --read is reader.input_read.
// Runs the reader's own loading and message encoding in this process, so that the CPU seconds
// of each step can be told apart (the service interleaves them with its sockets), then sends
// the FRAME over ipc to a socket in the same process and decodes it as a worker does, then the
// same through a worker's shared-memory slot in /dev/shm (docs/protocol.md, "Shared memory"),
// against a memcpy of the same bytes into memory already touched.
#include <time.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "ex2d/service/allocator.hpp"
#include "ex2d/service/frame_messages.hpp"
#include "ex2d/service/shm_slots.hpp"
#include "ex2d/service/wire.hpp"
#include "load_frame.hpp"

namespace {

double cpu_now()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// CPU seconds the whole machine spent busy (user, nice, system, irq, softirq; /proc/stat):
/// a cold read's page-cache work and I/O completions run partly outside the process, in
/// interrupts and kernel threads, where its own CPU clock does not see them.
double node_cpu_now()
{
    std::FILE* stat = std::fopen("/proc/stat", "r");
    if (stat == nullptr) return 0;
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
    const int n = std::fscanf(stat, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system,
                              &idle, &iowait, &irq, &softirq);
    std::fclose(stat);
    if (n != 7) return 0;
    return double(user + nice + system + irq + softirq) / double(::sysconf(_SC_CLK_TCK));
}

/// Drops `path` from the page cache (its pages are clean: nothing is written back).
void drop_from_cache(const char* path)
{
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
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
        std::fprintf(stderr, "usage: %s PREPROC PSF [REPEAT] [--cold] [--read auto|mmap|direct]\n",
                     argv[0]);
        return 2;
    }
    int repeat = 5;
    bool cold = false;
    std::string read_name = "auto";
    for (int i = 3; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--cold") {
            cold = true;
        } else if (arg == "--read" && i + 1 < argc) {
            read_name = argv[++i];
        } else {
            repeat = std::atoi(argv[i]);
        }
    }
    auto input_read = ex2d::parse_input_read(read_name);
    if (!input_read.is_ok()) {
        std::fprintf(stderr, "%s\n", input_read.status().message().c_str());
        return 2;
    }
    ex2d::service::Job job;
    // The job is the file's own, from its header.
    auto meta = ex2d::read_preproc_metadata(argv[1]);
    if (!meta.is_ok()) {
        std::fprintf(stderr, "%s\n", meta.status().message().c_str());
        return 2;
    }
    const ex2d::FitsHeader& header = meta.value().header;
    char expid[16];
    std::snprintf(expid, sizeof expid, "%08lld", header.get_int("EXPID").value_or(0));
    job.lane = "nightly";
    job.campaign = "nightly";
    job.night = std::to_string(header.get_int("NIGHT").value_or(0));
    job.expid = expid;
    job.camera = header.get_string("CAMERA").value_or("r0");
    while (!job.camera.empty() && job.camera.back() == ' ') job.camera.pop_back();
    job.job = "nightly/" + job.expid + "/" + job.camera;
    job.preproc = argv[1];
    job.psf = argv[2];
    job.output = "/tmp/unused.fits";
    job.options = R"({"wavelength":"5760.0,7620.0,0.8","specmin":0,"nspec":500})";
    job.stream = "s";
    job.stream_id = "1-0";
    std::printf("malloc: %s\n", ex2d::service::allocator_description().c_str());
    std::printf("step                     cpu_s   wall_s\n");
    std::printf(
        "input: %s, read %s\n",
        cold ? "cold (dropped from the page cache each time)" : "as the page cache holds it",
        read_name.c_str());
    ex2d::reader::FrameLoader loader("bench", "reader", input_read.value());
    zmq::context_t context;
    zmq::socket_t pull(context, zmq::socket_type::pull), push(context, zmq::socket_type::push);
    const std::string endpoint = "ipc:///tmp/ex2d-reader-stages-" + std::to_string(::getpid());
    pull.bind(endpoint);
    push.connect(endpoint);
    ex2d::LargeArray<char> copy_target;
    ex2d::LargeArray<double> image_memory, weights_memory;  // reused as the worker reuses them
    ex2d::service::SlotPool worker_slots("/dev/shm", 1);
    ex2d::service::SlotMappings reader_mappings("/dev/shm");
    for (int i = 0; i < repeat; ++i) {
        if (cold) {
            drop_from_cache(argv[1]);
            drop_from_cache(argv[2]);
        }
        double c0 = cpu_now(), w0 = wall_now(), n0 = node_cpu_now();
        auto loaded = loader.load(job);
        const double node_load = node_cpu_now() - n0;
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
        std::printf("load (read+encode)     %7.3f  %7.3f  (machine: %.2f CPU-s, 10 ms ticks)\n",
                    c1 - c0, w1 - w0, node_load);
        std::printf("encode_frame           %7.3f  %7.3f\n", c2 - c1, w2 - w1);
        std::printf("wire::encode           %7.3f  %7.3f  (%zu MB)\n", c3 - c2, w3 - w2,
                    bytes >> 20);
        std::printf("total                  %7.3f  %7.3f\n", c3 - c0, w3 - w0);

        double c4 = cpu_now(), w4 = wall_now();
        zmq::send_multipart(push, parts);
        std::vector<zmq::message_t> received;
        (void)zmq::recv_multipart(pull, std::back_inserter(received));
        double c5 = cpu_now(), w5 = wall_now();
        ex2d::wire::DecodeError error;
        auto message = ex2d::wire::decode(std::move(received), error);
        if (!message) {
            std::fprintf(stderr, "decode: %s\n", error.detail.c_str());
            return 1;
        }
        auto inputs = ex2d::service::decode_frame(*message, std::move(image_memory),
                                                  std::move(weights_memory));
        if (!inputs.is_ok()) {
            std::fprintf(stderr, "decode_frame: %s\n", inputs.status().message().c_str());
            return 1;
        }
        double c6 = cpu_now(), w6 = wall_now();
        copy_target.resize(bytes);
        std::size_t at = 0;
        const auto copy_parts = ex2d::wire::encode(loaded.value().message);
        double c7 = cpu_now(), w7 = wall_now();
        for (const auto& p : copy_parts) {
            std::memcpy(copy_target.data() + at, p.data(), p.size());
            at += p.size();
        }
        double c8 = cpu_now(), w8 = wall_now();
        image_memory = std::move(inputs.value().image);
        weights_memory = std::move(inputs.value().weights);
        std::printf("ipc send+receive       %7.3f  %7.3f  (both ends, ZeroMQ's threads included)\n",
                    c5 - c4, w5 - w4);
        std::printf("worker decode (f64, reused planes)%7.3f  %7.3f\n", c6 - c5, w6 - w5);
        std::printf("memcpy, reused memory  %7.3f  %7.3f\n", c8 - c7, w8 - w7);

        // The same FRAME through the worker's slot: the reader copies the arrays in, header
        // and meta go over the socket, the worker decodes where the arrays lie.
        worker_slots.require(ex2d::wire::slot_bytes_needed(copy_parts));
        const auto loan = worker_slots.lend();
        std::byte* slot = loan ? reader_mappings.map(*loan, loan->bytes) : nullptr;
        if (slot == nullptr) {
            std::fprintf(stderr, "no shared-memory slot in /dev/shm\n");
            return 1;
        }
        double c9 = cpu_now(), w9 = wall_now();
        auto small = ex2d::wire::move_arrays_to_slot(copy_parts, slot, loan->bytes, loan->token,
                                                     loan->generation);
        zmq::send_multipart(push, small);
        std::vector<zmq::message_t> small_received;
        (void)zmq::recv_multipart(pull, std::back_inserter(small_received));
        double c10 = cpu_now(), w10 = wall_now();
        auto in_slot =
            ex2d::wire::decode(std::move(small_received), error, worker_slots.resolver());
        if (!in_slot) {
            std::fprintf(stderr, "decode from slot: %s\n", error.detail.c_str());
            return 1;
        }
        auto slot_inputs = ex2d::service::decode_frame(*in_slot, std::move(image_memory),
                                                       std::move(weights_memory));
        if (!slot_inputs.is_ok()) {
            std::fprintf(stderr, "decode_frame: %s\n", slot_inputs.status().message().c_str());
            return 1;
        }
        double c11 = cpu_now(), w11 = wall_now();
        worker_slots.release(loan->token, loan->generation);
        image_memory = std::move(slot_inputs.value().image);
        weights_memory = std::move(slot_inputs.value().weights);
        std::printf("shm copy+send+receive  %7.3f  %7.3f  (slot reused; %.1fx the memcpy)\n",
                    c10 - c9, w10 - w9, (c10 - c9) / (c8 - c7));
        std::printf("worker decode from slot%7.3f  %7.3f\n", c11 - c10, w11 - w10);
    }
    return 0;
}
