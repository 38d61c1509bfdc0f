// SPDX-License-Identifier: BSD-3-Clause
// The fleet's message codec (docs/protocol.md): round trips through real ZeroMQ sockets, the
// zero-copy ownership hand-off, every rejection reason, a seeded fuzz loop and the checksums.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <xxhash.h>
#include <zmq_addon.hpp>

#include "ex2d/service/wire.hpp"
#include "ex2d/status.hpp"

namespace ex2d::wire {
namespace {

using Bytes = std::vector<std::string>;

OutgoingMessage make_frame()
{
    OutgoingMessage message;
    message.type = MessageType::frame;
    message.epoch = 7;
    message.job_id = "nightly/00012345/r0";
    message.stream_id = "1732350000000-0";
    message.meta = {{"job", "nightly/00012345/r0"}, {"lane", 3}, {"reader", "reader-a"}};
    std::vector<float> image(12);
    std::vector<double> weights(12);
    std::vector<std::uint8_t> bytes(300);
    for (std::size_t k = 0; k < image.size(); ++k) {
        image[k] = 0.5F * float(k) - 3.0F;
        weights[k] = 1.0 / double(k + 1);
    }
    for (std::size_t k = 0; k < bytes.size(); ++k) {
        bytes[k] = std::uint8_t(k * 7);
    }
    message.arrays.push_back(ArrayPart::from_vector(DType::f32, image, {3, 4}));
    message.arrays.push_back(ArrayPart::from_vector(DType::f64, weights, {3, 4}));
    message.arrays.push_back(ArrayPart::from_vector(DType::u8, bytes, {300}));
    message.arrays.push_back(ArrayPart::from_vector(DType::u8, std::vector<std::uint8_t>{}, {0}));
    return message;
}

void expect_frame(const IncomingMessage& got)
{
    EXPECT_EQ(got.type, MessageType::frame);
    EXPECT_EQ(got.epoch, 7U);
    EXPECT_EQ(got.job_id, "nightly/00012345/r0");
    EXPECT_EQ(got.stream_id, "1732350000000-0");
    EXPECT_EQ(got.meta.at("job"), "nightly/00012345/r0");
    EXPECT_EQ(got.meta.at("lane"), 3);
    EXPECT_EQ(got.meta.at("reader"), "reader-a");
    ASSERT_EQ(got.parts.size(), 4U);
    EXPECT_EQ(got.dtype(0), DType::f32);
    EXPECT_EQ(got.header.parts[0].shape[0], 3);
    EXPECT_EQ(got.header.parts[0].shape[1], 4);
    EXPECT_EQ(got.count(0), 12U);
    EXPECT_EQ(got.count(2), 300U);
    EXPECT_EQ(got.count(3), 0U);
    const auto image = got.copy_array<float>(0);
    const auto image64 = got.to_f64(0);
    const auto weights = got.to_f64(1);
    const auto bytes = got.copy_array<std::uint8_t>(2);
    ASSERT_EQ(image.size(), 12U);
    ASSERT_EQ(weights.size(), 12U);
    for (std::size_t k = 0; k < 12; ++k) {
        EXPECT_EQ(image[k], 0.5F * float(k) - 3.0F);
        EXPECT_EQ(image64[k], double(0.5F * float(k) - 3.0F));
        EXPECT_EQ(weights[k], 1.0 / double(k + 1));
    }
    ASSERT_EQ(bytes.size(), 300U);
    for (std::size_t k = 0; k < bytes.size(); ++k) {
        EXPECT_EQ(bytes[k], std::uint8_t(k * 7));
    }
    EXPECT_TRUE(got.copy_array<std::uint8_t>(3).empty());
    EXPECT_THROW(got.to_f64(2), Error);
    EXPECT_THROW(got.copy_array<double>(0), Error);
    EXPECT_THROW(got.copy_array<float>(4), Error);
}

Bytes to_bytes(const std::vector<zmq::message_t>& parts)
{
    Bytes out;
    for (const auto& part : parts) {
        out.emplace_back(static_cast<const char*>(part.data()), part.size());
    }
    return out;
}

std::vector<zmq::message_t> to_parts(const Bytes& bytes)
{
    std::vector<zmq::message_t> parts;
    for (const auto& b : bytes) {
        parts.emplace_back(b.data(), b.size());
    }
    return parts;
}

MessageHeader header_of(const Bytes& bytes)
{
    MessageHeader header;
    std::memcpy(&header, bytes.at(0).data(), sizeof(header));
    return header;
}

/// Writes `header` back into part 0 with a freshly computed header checksum.
void reseal(Bytes& bytes, MessageHeader header)
{
    header.header_checksum = checksum64(&header, offsetof(MessageHeader, header_checksum));
    bytes.at(0).assign(reinterpret_cast<const char*>(&header), sizeof(header));
}

/// Recomputes every checksum and size from the parts as they are, so that only the
/// structural checks (and the meta JSON) remain to reject them.
void reseal_all(Bytes& bytes)
{
    MessageHeader header = header_of(bytes);
    header.meta_bytes = bytes.at(1).size();
    header.meta_checksum = checksum64(bytes[1].data(), bytes[1].size());
    std::string payload;
    for (std::size_t i = 2; i < bytes.size(); ++i) {
        payload += bytes[i];
    }
    // Streaming over the parts equals one pass over their concatenation.
    header.payload_checksum = XXH3_64bits(payload.data(), payload.size());
    reseal(bytes, header);
}

std::string reason_of(const Bytes& bytes)
{
    DecodeError error;
    const auto got = decode(to_parts(bytes), error);
    EXPECT_FALSE(got.has_value());
    EXPECT_FALSE(error.detail.empty());
    return error.reason;
}

TEST(Wire, DirectRoundTrip)
{
    DecodeError error;
    const auto got = decode(encode(make_frame()), error);
    ASSERT_TRUE(got.has_value()) << error.reason << ": " << error.detail;
    expect_frame(*got);
}

TEST(Wire, RoundTripOverInprocPushPull)
{
    zmq::context_t context;
    zmq::socket_t push(context, zmq::socket_type::push);
    zmq::socket_t pull(context, zmq::socket_type::pull);
    push.bind("inproc://wire-round-trip");
    pull.connect("inproc://wire-round-trip");
    ASSERT_TRUE(zmq::send_multipart(push, encode(make_frame())));
    std::vector<zmq::message_t> received;
    ASSERT_TRUE(zmq::recv_multipart(pull, std::back_inserter(received)));
    ASSERT_EQ(received.size(), 6U);
    DecodeError error;
    const auto got = decode(std::move(received), error);
    ASSERT_TRUE(got.has_value()) << error.reason << ": " << error.detail;
    expect_frame(*got);
}

TEST(Wire, ArraysTravelWithoutCopiesAndTheOwnerIsReleased)
{
    std::vector<double> values(1000, 2.5);
    ArrayPart part = ArrayPart::from_vector(DType::f64, std::move(values), {10, 100});
    const std::shared_ptr<const void> owner = part.owner;
    const void* original = part.data;
    std::vector<zmq::message_t> parts;
    {
        OutgoingMessage message;
        message.type = MessageType::result;
        message.arrays.push_back(std::move(part));
        parts = encode(message);
    }
    // The encoded part's free function now holds the only other reference.
    EXPECT_EQ(owner.use_count(), 2);
    EXPECT_EQ(parts[2].data(), original);

    zmq::context_t context;
    zmq::socket_t push(context, zmq::socket_type::push);
    zmq::socket_t pull(context, zmq::socket_type::pull);
    push.bind("inproc://wire-zero-copy");
    pull.connect("inproc://wire-zero-copy");
    ASSERT_TRUE(zmq::send_multipart(push, parts));
    parts.clear();
    {
        std::vector<zmq::message_t> received;
        ASSERT_TRUE(zmq::recv_multipart(pull, std::back_inserter(received)));
        // inproc hands the very buffer over: the receiver sees the sender's bytes.
        ASSERT_EQ(received.size(), 3U);
        EXPECT_EQ(received[2].data(), original);
        DecodeError error;
        const auto got = decode(std::move(received), error);
        ASSERT_TRUE(got.has_value()) << error.reason;
        EXPECT_EQ(got->to_f64(0), LargeArray<double>(1000, 2.5));
    }
    // The free function may run on ZeroMQ's I/O thread, so wait for it a little.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (owner.use_count() != 1 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(owner.use_count(), 1);
}

TEST(Wire, EncodeRejectsProgrammingErrors)
{
    const auto encode_with = [](auto change) {
        OutgoingMessage message = make_frame();
        change(message);
        return encode(message);
    };
    const auto bytes = [](std::size_t n, std::vector<std::int32_t> shape) {
        return ArrayPart::from_vector(DType::u8, std::vector<std::uint8_t>(n), std::move(shape));
    };
    EXPECT_NO_THROW(encode_with([](auto& m) { m.job_id = std::string(55, 'j'); }));
    EXPECT_NO_THROW(encode_with([](auto& m) { m.stream_id = std::string(31, 's'); }));
    EXPECT_THROW(encode_with([](auto& m) { m.job_id = std::string(56, 'j'); }), Error);
    EXPECT_THROW(encode_with([](auto& m) { m.stream_id = std::string(32, 's'); }), Error);
    EXPECT_THROW(encode_with([&](auto& m) { m.arrays.assign(17, bytes(1, {1})); }), Error);
    EXPECT_NO_THROW(encode_with([&](auto& m) { m.arrays.assign(16, bytes(1, {1})); }));
    EXPECT_THROW(encode_with([&](auto& m) { m.arrays[2] = bytes(8, {2, 2, 2}); }), Error);
    EXPECT_THROW(encode_with([&](auto& m) { m.arrays[2] = bytes(0, {}); }), Error);
    EXPECT_THROW(encode_with([&](auto& m) { m.arrays[2] = bytes(4, {-2, -2}); }), Error);
    EXPECT_THROW(encode_with([&](auto& m) { m.arrays[2] = bytes(5, {2, 2}); }), Error);
    EXPECT_THROW(encode_with([](auto& m) { m.arrays[0].dtype = DType(9); }), Error);
    EXPECT_THROW(encode_with([](auto& m) { m.arrays[1].shape = {4, 4}; }), Error);
}

TEST(Wire, EveryRejectionReason)
{
    const Bytes valid = to_bytes(encode(make_frame()));
    const auto mutated = [&](auto change) {
        Bytes bytes = valid;
        change(bytes);
        return reason_of(bytes);
    };
    const auto resealed = [&](auto change) {
        Bytes bytes = valid;
        MessageHeader header = header_of(bytes);
        change(header);
        reseal(bytes, header);
        return reason_of(bytes);
    };
    EXPECT_EQ(mutated([](Bytes& b) { b.resize(1); }), "part_count");
    EXPECT_EQ(mutated([](Bytes& b) { b.pop_back(); }), "part_count");
    EXPECT_EQ(mutated([](Bytes& b) { b.emplace_back("extra"); }), "part_count");
    EXPECT_EQ(mutated([](Bytes& b) { b[0].resize(511); }), "header_size");
    EXPECT_EQ(mutated([](Bytes& b) { b[0].push_back('\0'); }), "header_size");
    EXPECT_EQ(mutated([](Bytes& b) { b[0][1] = 'Y'; }), "bad_magic");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.version = 1; }), "wrong_version");
    EXPECT_EQ(mutated([](Bytes& b) { b[0][17] ^= 0x01; }), "header_checksum");
    EXPECT_EQ(mutated([](Bytes& b) { b[0][505] ^= 0x40; }), "header_checksum");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.header_size = 256; }), "header_size");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.type = 0; }), "bad_type");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.type = 8; }), "bad_type");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.nparts = 17; }), "part_count");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.nparts = 3; }), "part_count");
    EXPECT_EQ(mutated([](Bytes& b) { b[1][2] ^= 0x20; }), "meta_checksum");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.meta_bytes += 1; }), "meta_checksum");
    EXPECT_EQ(mutated([](Bytes& b) { b[2].resize(44); }), "part_size");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.parts[0].shape[1] = 5; }), "part_size");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.parts[1].dtype = 0; }), "part_size");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.parts[2].ndim = 3; }), "part_size");
    EXPECT_EQ(resealed([](MessageHeader& h) { h.parts[3].shape[0] = -1; }), "part_size");
    EXPECT_EQ(resealed([](MessageHeader& h) {
                  h.parts[0].shape[0] = 0x7fffffff;
                  h.parts[0].shape[1] = 0x7fffffff;
              }),
              "part_size");
    EXPECT_EQ(mutated([](Bytes& b) { b[4][100] ^= 0x01; }), "payload_checksum");
    EXPECT_EQ(mutated([](Bytes& b) {
                  b[1] = "not json {";
                  reseal_all(b);
              }),
              "malformed");
    EXPECT_EQ(mutated([](Bytes& b) {
                  b[1] = "[1, 2, 3]";
                  reseal_all(b);
              }),
              "malformed");
    EXPECT_EQ(resealed([](MessageHeader& h) { std::memset(h.job_id, 'a', sizeof(h.job_id)); }),
              "malformed");
    EXPECT_EQ(
        resealed([](MessageHeader& h) { std::memset(h.stream_id, '1', sizeof(h.stream_id)); }),
        "malformed");
}

/// Random damage to a valid message; decode must reject it or return a consistent message.
TEST(Wire, FuzzNeverCrashesAndOnlyAcceptsConsistentMessages)
{
    const Bytes valid = to_bytes(encode(make_frame()));
    std::mt19937_64 rng(20240611);
    const auto below = [&](std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    };
    const auto garbage = [&](std::size_t n) {
        std::string s(n, '\0');
        for (auto& c : s) {
            c = char(rng());
        }
        return s;
    };
    std::map<std::string, int> reasons;
    int accepted = 0;
    for (int iteration = 0; iteration < 20000; ++iteration) {
        Bytes bytes = valid;
        const std::size_t mutations = 1 + below(3);
        for (std::size_t m = 0; m < mutations && !bytes.empty(); ++m) {
            std::string& part = bytes[below(bytes.size())];
            switch (below(7)) {
                case 0:  // byte flips, favouring the header where the fields are
                case 1: {
                    std::string& target = below(2) == 0 ? bytes[0] : part;
                    for (std::size_t k = 1 + below(4); k > 0 && !target.empty(); --k) {
                        target[below(target.size())] ^= char(1 + below(255));
                    }
                    break;
                }
                case 2:
                    part.resize(part.empty() ? 0 : below(part.size()));
                    break;
                case 3:
                    part += garbage(1 + below(64));
                    break;
                case 4:
                    bytes.resize(below(bytes.size() + 3), garbage(below(40)));
                    break;
                case 5:
                    bytes.insert(bytes.begin() + long(below(bytes.size() + 1)),
                                 garbage(below(2) == 0 ? 512 : below(600)));
                    break;
                default:
                    bytes.erase(bytes.begin() + long(below(bytes.size())));
                    break;
            }
        }
        if (!bytes.empty() && bytes[0].size() == sizeof(MessageHeader)) {
            const std::size_t mode = below(3);
            if (mode == 1) {
                reseal(bytes, header_of(bytes));
            } else if (mode == 2 && bytes.size() >= 2) {
                reseal_all(bytes);
            }
        }
        DecodeError error;
        const auto got = decode(to_parts(bytes), error);
        if (!got) {
            ASSERT_FALSE(error.reason.empty());
            ++reasons[error.reason];
            continue;
        }
        ++accepted;
        const MessageHeader& h = got->header;
        ASSERT_EQ(h.header_checksum, checksum64(&h, offsetof(MessageHeader, header_checksum)));
        ASSERT_EQ(got->parts.size(), std::size_t(h.nparts));
        ASSERT_EQ(h.meta_checksum, checksum64(bytes[1].data(), bytes[1].size()));
        std::string payload;
        for (std::size_t i = 0; i < got->parts.size(); ++i) {
            payload.append(static_cast<const char*>(got->parts[i].data()), got->parts[i].size());
            ASSERT_EQ(got->count(i) * dtype_size(got->dtype(i)), got->parts[i].size());
        }
        ASSERT_EQ(XXH3_64bits(payload.data(), payload.size()), h.payload_checksum);
        ASSERT_TRUE(got->meta.is_object());
        ASSERT_LT(got->job_id.size(), sizeof(h.job_id));
        ASSERT_LT(got->stream_id.size(), sizeof(h.stream_id));
    }
    for (const auto& [reason, count] : reasons) {
        std::printf("  %-18s %d\n", reason.c_str(), count);
    }
    std::printf("  %-18s %d\n", "accepted", accepted);
    EXPECT_GE(reasons.size(), 5U);
}

TEST(Wire, ChecksumKnownValuesAndHex)
{
    EXPECT_EQ(checksum64("", 0), 0x2d06800538d394c2ULL);
    EXPECT_EQ(checksum64("abc", 3), 0x78af5f94892f3950ULL);
    EXPECT_EQ(hex64(0x2d06800538d394c2ULL), "2d06800538d394c2");
    EXPECT_EQ(hex64(0), "0000000000000000");
    EXPECT_EQ(hex64(0xabcULL), "0000000000000abc");
    EXPECT_EQ(hex64(~0ULL), "ffffffffffffffff");
    EXPECT_EQ(dtype_size(DType::u8), 1U);
    EXPECT_EQ(dtype_size(DType::i32), 4U);
    EXPECT_EQ(dtype_size(DType::u32), 4U);
    EXPECT_EQ(dtype_size(DType::f32), 4U);
    EXPECT_EQ(dtype_size(DType::f64), 8U);
    EXPECT_EQ(dtype_size(DType::i64), 8U);
    EXPECT_EQ(dtype_size(DType(0)), 0U);
    EXPECT_EQ(dtype_size(DType(7)), 0U);
}

TEST(Wire, FileChecksumsStreamAcrossBlocks)
{
    // Sizes below, at and across the 1 MiB read block.
    for (const std::size_t size :
         {std::size_t(0), std::size_t(1000), std::size_t(1) << 20, (std::size_t(5) << 19) + 17}) {
        std::string content(size, '\0');
        for (std::size_t k = 0; k < size; ++k) {
            content[k] = char((k * 2654435761U) >> 13);
        }
        const std::string path = ::testing::TempDir() + "ex2d_wire_checksum_" +
                                 std::to_string(::getpid()) + "_" + std::to_string(size) + ".bin";
        std::ofstream(path, std::ios::binary).write(content.data(), long(content.size()));
        const XXH128_hash_t expected = XXH3_128bits(content.data(), content.size());
        EXPECT_EQ(file_checksum128(path), hex64(expected.high64) + hex64(expected.low64));
        EXPECT_EQ(file_checksum64(path), XXH3_64bits(content.data(), content.size()));
        std::remove(path.c_str());
    }
    EXPECT_FALSE(file_checksum64("/nonexistent/ex2d/file").has_value());
    EXPECT_FALSE(file_checksum128("/nonexistent/ex2d/file").has_value());
}

}  // namespace
}  // namespace ex2d::wire
