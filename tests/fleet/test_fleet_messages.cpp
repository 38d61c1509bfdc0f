// SPDX-License-Identifier: BSD-3-Clause
// Malformed and fuzzed messages on every socket of the fleet (the reader's ROUTER, the
// writer's ROUTER, and a worker's DEALER through a fake reader), then a real exposure through
// the same processes; and the Prometheus exposition of every service.
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <regex>
#include <sstream>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "ex2d/service/wire.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

// Sum of a metric family's samples whose line contains `filter`.
double metric_sum(const std::string& text, const std::string& family,
                  const std::string& filter = "")
{
    double sum = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(family, 0) != 0 || line.find(filter) == std::string::npos) continue;
        if (line.size() > family.size() && line[family.size()] != '{' && line[family.size()] != ' ')
            continue;
        sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
}

std::vector<zmq::message_t> valid_message(wire::MessageType type)
{
    wire::OutgoingMessage m;
    m.type = type;
    m.epoch = 1;
    m.job_id = "nightly/00000099/r9";
    m.stream_id = "1-0";
    m.meta["worker"] = "fuzzer";
    m.arrays.push_back(
        wire::ArrayPart::from_vector(wire::DType::f64, std::vector<double>(16, 1.0), {4, 4}));
    return wire::encode(m);
}

// Garbage, truncations, a wrong version, a wrong type and seeded random mutations.
std::vector<std::vector<zmq::message_t>> hostile_messages(wire::MessageType wrong_type, int n_fuzz)
{
    std::vector<std::vector<zmq::message_t>> out;
    std::vector<zmq::message_t> one;
    one.emplace_back(std::string("garbage"));
    out.push_back(std::move(one));
    auto truncated = valid_message(wire::MessageType::credit);
    truncated[0] = zmq::message_t(truncated[0].data(), 100);
    out.push_back(std::move(truncated));
    auto version = valid_message(wire::MessageType::credit);
    wire::MessageHeader h;
    std::memcpy(&h, version[0].data(), sizeof h);
    h.version = 99;
    h.header_checksum = wire::checksum64(&h, offsetof(wire::MessageHeader, header_checksum));
    version[0] = zmq::message_t(&h, sizeof h);
    out.push_back(std::move(version));
    out.push_back(valid_message(wrong_type));
    std::mt19937_64 rng(20261123);
    for (int i = 0; i < n_fuzz; ++i) {
        auto m = valid_message(wire::MessageType::credit);
        const std::size_t part = rng() % m.size();
        std::string bytes(static_cast<const char*>(m[part].data()), m[part].size());
        if (!bytes.empty()) {
            for (int k = 0; k < 1 + int(rng() % 4); ++k) bytes[rng() % bytes.size()] = char(rng());
        }
        if (rng() % 3 == 0) bytes.resize(rng() % (bytes.size() + 1));
        m[part] = zmq::message_t(bytes.data(), bytes.size());
        if (rng() % 5 == 0) m.pop_back();
        out.push_back(std::move(m));
    }
    return out;
}

std::string proc_field(Fleet& fleet, const std::string& name, const std::string& field)
{
    return fleet.redis({"HGET", "ex2d:proc:" + name, field}).str;
}

TEST(FleetMessages, HostileMessagesOnEverySocketAreDroppedAndTheFleetWorks)
{
    Fleet fleet("messages");
    const std::vector<std::string> cams = {"b5", "r5", "z5"};
    fleet.make_exposure(41, cams);
    Process& reader = fleet.start("reader", "reader-1");
    Process& writer = fleet.start("writer", "writer-1");
    Process& worker = fleet.start("worker", "worker-1");
    ASSERT_TRUE(eventually(20, [&] {
        return !proc_field(fleet, "reader-1", "endpoint").empty() &&
               !proc_field(fleet, "writer-1", "endpoint").empty() &&
               proc_field(fleet, "worker-1", "state") == "ready";
    }));
    zmq::context_t context;
    constexpr int kFuzz = 300;

    zmq::socket_t to_reader(context, zmq::socket_type::dealer);
    to_reader.connect(proc_field(fleet, "reader-1", "endpoint"));
    for (auto& m : hostile_messages(wire::MessageType::result, kFuzz))
        zmq::send_multipart(to_reader, m);

    zmq::socket_t to_writer(context, zmq::socket_type::dealer);
    to_writer.set(zmq::sockopt::sndhwm, 10000);
    to_writer.connect(proc_field(fleet, "writer-1", "endpoint"));
    for (auto& m : hostile_messages(wire::MessageType::credit, kFuzz))
        zmq::send_multipart(to_writer, m);
    // Well-formed, but not a frame of any job: refused by decoding or by the fence. An offer
    // that is never followed by a result: the writer's grant lapses and the fleet goes on.
    zmq::send_multipart(to_writer, valid_message(wire::MessageType::result));
    zmq::send_multipart(to_writer, valid_message(wire::MessageType::offer));

    // A fake reader that the worker discovers through Redis and asks for frames.
    zmq::socket_t fake(context, zmq::socket_type::router);
    const std::string fake_endpoint = "ipc://" + fleet.dir() + "/fake-reader.sock";
    fake.bind(fake_endpoint);
    const long long now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    fleet.redis({"HSET", "ex2d:endpoints", "fake-reader",
                 "reader ready " + std::to_string(now_ms) + " " + fake_endpoint});
    std::vector<zmq::message_t> credit;
    fake.set(zmq::sockopt::rcvtimeo, 10000);
    ASSERT_TRUE(zmq::recv_multipart(fake, std::back_inserter(credit)));
    const std::string identity = credit[0].to_string();
    for (auto& m : hostile_messages(wire::MessageType::result, kFuzz)) {
        m.insert(m.begin(), zmq::message_t(identity));
        fake.send(m[0], zmq::send_flags::sndmore);
        for (std::size_t i = 1; i < m.size(); ++i) {
            fake.send(m[i], i + 1 < m.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
        }
    }
    fleet.redis({"HDEL", "ex2d:endpoints", "fake-reader"});
    // Every service counts what it dropped; wait until each has counted the fuzz sent to it.
    for (const char* name : {"reader-1", "writer-1", "worker-1"}) {
        EXPECT_TRUE(eventually(20, [&] {
            return metric_sum(http_get(proc_field(fleet, name, "http"), "/metrics"),
                              "ex2d_messages_dropped_total") >= 50;
        })) << name;
    }
    ASSERT_TRUE(reader.running() && writer.running() && worker.running());

    for (const char* name : {"reader-1", "writer-1", "worker-1"}) {
        const std::string metrics = http_get(proc_field(fleet, name, "http"), "/metrics");
        const double dropped = metric_sum(metrics, "ex2d_messages_dropped_total");
        std::printf("%s dropped %.0f hostile messages\n", name, dropped);
        EXPECT_GE(dropped, 50) << name;
        EXPECT_GT(metric_sum(metrics, "ex2d_messages_dropped_total", "reason=\"wrong_version\""), 0)
            << name;
    }

    ASSERT_EQ(fleet.submit(41), 0);
    ASSERT_TRUE(fleet.wait_exposure(41, 60));
    const Outcome o = fleet.check({41}, cams);
    std::printf("hostile messages: %s\n", o.report().c_str());
    EXPECT_EQ(o.done, 3);
    EXPECT_EQ(o.lost + o.duplicates + o.partial, 0);
}

TEST(FleetMessages, MetricsFollowPrometheusConventionsAndCountTheFrames)
{
    Fleet fleet("metrics");
    const std::vector<std::string> cams = {"b6", "r6"};
    fleet.make_exposure(42, cams);
    for (const char* role : {"reader", "worker", "writer"})
        fleet.start(role, std::string(role) + "-1");
    ASSERT_EQ(fleet.submit(42), 0);
    ASSERT_TRUE(fleet.wait_exposure(42, 60));
    const std::regex name_rule("^ex2d_[a-z0-9_]+$");
    for (const char* name : {"reader-1", "worker-1", "writer-1"}) {
        const std::string address = proc_field(fleet, name, "http");
        EXPECT_NE(http_get(address, "/healthz").find(" 200"), std::string::npos) << name;
        EXPECT_NE(http_get(address, "/readyz").find(" 200"), std::string::npos) << name;
        const std::string response = http_get(address, "/metrics");
        EXPECT_NE(response.find("text/plain; version=0.0.4"), std::string::npos) << name;
        std::istringstream in(response.substr(response.find("\r\n\r\n") + 4));
        std::map<std::string, std::string> types;
        for (std::string line; std::getline(in, line);) {
            if (line.rfind("# TYPE ", 0) == 0) {
                std::istringstream t(line.substr(7));
                std::string family, type;
                t >> family >> type;
                types[family] = type;
                EXPECT_TRUE(std::regex_match(family, name_rule)) << family;
                if (type == "counter") {
                    EXPECT_EQ(family.substr(family.size() - 6), "_total") << family;
                }
            } else if (!line.empty() && line[0] != '#') {
                // No label may carry an exposure or job id.
                EXPECT_EQ(line.find("00000042"), std::string::npos) << line;
            }
        }
        EXPECT_GE(types.size(), 5u) << name;
    }
    const std::string writer_metrics = http_get(proc_field(fleet, "writer-1", "http"), "/metrics");
    EXPECT_EQ(metric_sum(writer_metrics, "ex2d_frames_total", "state=\"written\""), 2.0);
    EXPECT_EQ(metric_sum(http_get(proc_field(fleet, "worker-1", "http"), "/metrics"),
                         "ex2d_frames_total", "state=\"extracted\""),
              2.0);
}

}  // namespace
}  // namespace ex2d::fleet_test
