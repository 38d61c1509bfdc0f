// SPDX-License-Identifier: BSD-3-Clause
// Shared-memory slots (docs/protocol.md, "Shared memory"): lending, generations, retirement,
// the orphan sweep, and messages whose arrays lie in a slot decoded bit for bit, or refused.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ex2d/service/shm_slots.hpp"
#include "ex2d/service/wire.hpp"
#include "ex2d/status.hpp"

namespace ex2d::service {
namespace {

namespace fs = std::filesystem;
constexpr std::size_t kMiB = std::size_t(1) << 20;

class ShmSlots : public ::testing::Test {
protected:
    void SetUp() override
    {
        const fs::path base = fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path();
        dir_ = (base / ("ex2d-test-slots-" + std::to_string(::getpid()) + "-" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                   .string();
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::size_t files() const
    {
        std::size_t n = 0;
        for (const auto& entry : fs::directory_iterator(dir_)) n += entry.is_regular_file() ? 1 : 0;
        return n;
    }

    std::string dir_;
};

wire::OutgoingMessage make_frame(std::uint64_t answers_slot = 0)
{
    wire::OutgoingMessage message;
    message.type = wire::MessageType::frame;
    message.epoch = 3;
    message.job_id = "nightly/00012345/r0";
    message.stream_id = "1732350000000-0";
    message.meta = {{"job", "nightly/00012345/r0"}, {"reader", "reader-a"}};
    message.answers_slot = answers_slot;
    std::vector<float> image(1000);
    std::vector<double> weights(1000);
    std::vector<std::uint8_t> bytes(77);
    for (std::size_t k = 0; k < image.size(); ++k) {
        image[k] = 0.25F * float(k) - 7.0F;
        weights[k] = 1.0 / double(k + 3);
    }
    for (std::size_t k = 0; k < bytes.size(); ++k) bytes[k] = std::uint8_t(k * 13);
    message.arrays.push_back(wire::ArrayPart::from_vector(wire::DType::f32, image, {10, 100}));
    message.arrays.push_back(wire::ArrayPart::from_vector(wire::DType::u8, bytes, {77}));
    message.arrays.push_back(wire::ArrayPart::from_vector(wire::DType::f64, weights, {10, 100}));
    return message;
}

void expect_same_arrays(const wire::IncomingMessage& got, const std::vector<zmq::message_t>& sent)
{
    ASSERT_EQ(got.parts.size(), sent.size() - 2);
    for (std::size_t i = 0; i < got.parts.size(); ++i) {
        ASSERT_EQ(got.parts[i].size(), sent[i + 2].size()) << "array " << i;
        EXPECT_EQ(std::memcmp(got.parts[i].data(), sent[i + 2].data(), got.parts[i].size()), 0)
            << "array " << i;
    }
}

/// The message as a socket would deliver it: fresh parts holding copies of the bytes.
std::vector<zmq::message_t> delivered(const std::vector<zmq::message_t>& parts)
{
    std::vector<zmq::message_t> copies;
    copies.reserve(parts.size());
    for (const auto& p : parts) copies.emplace_back(p.data(), p.size());
    return copies;
}

TEST_F(ShmSlots, LendsOnlyOnceASizeIsKnownAndReusesTheSameSlotWithANewGeneration)
{
    SlotPool pool(dir_, 2);
    EXPECT_FALSE(pool.lend()) << "no size is known before the first message";
    pool.require(5 * kMiB + 1);
    const auto first = pool.lend();
    ASSERT_TRUE(first);
    EXPECT_EQ(first->bytes, 8 * kMiB) << "rounded up to 4 MiB";
    EXPECT_EQ(first->generation, 1U);
    EXPECT_TRUE(fs::exists(slot_path(dir_, first->token)));
    EXPECT_EQ(fs::file_size(slot_path(dir_, first->token)), 8 * kMiB);
    ASSERT_TRUE(pool.lent(first->token, 1));
    EXPECT_FALSE(pool.lent(first->token, 2));

    const auto second = pool.lend();
    ASSERT_TRUE(second);
    EXPECT_NE(second->token, first->token);
    EXPECT_FALSE(pool.lend()) << "both slots are lent";
    EXPECT_EQ(pool.lent_count(), 2U);

    pool.release(first->token, 7);  // an answer naming another lending returns nothing
    EXPECT_EQ(pool.lent_count(), 2U);
    pool.release(first->token, 1);
    EXPECT_FALSE(pool.lent(first->token, 1)) << "a returned slot is not lent";
    const auto again = pool.lend();
    ASSERT_TRUE(again);
    EXPECT_EQ(again->token, first->token) << "the same memory, touched before";
    EXPECT_EQ(again->generation, 2U);
    EXPECT_EQ(files(), 2U);
}

TEST_F(ShmSlots, GrowingReplacesAFreeSmallerSlot)
{
    SlotPool pool(dir_, 1);
    pool.require(kMiB);
    const auto small = pool.lend();
    ASSERT_TRUE(small);
    pool.release(small->token, small->generation);
    pool.require(9 * kMiB);
    const auto large = pool.lend();
    ASSERT_TRUE(large);
    EXPECT_NE(large->token, small->token);
    EXPECT_EQ(large->bytes, 12 * kMiB);
    EXPECT_FALSE(fs::exists(slot_path(dir_, small->token)));
    EXPECT_EQ(files(), 1U);
}

TEST_F(ShmSlots, RetiredSlotsAreUnlinkedAndNeverLentAgain)
{
    SlotPool pool(dir_, 2);
    pool.require(kMiB);
    const auto stalled = pool.lend();
    ASSERT_TRUE(stalled);
    const auto deadline = SlotPool::Clock::now() + std::chrono::seconds(1);
    const auto fresh = pool.lend();
    ASSERT_TRUE(fresh);
    pool.release(fresh->token, fresh->generation);
    EXPECT_EQ(pool.retire_lent_before(deadline), 1U) << "only the slot still lent";
    EXPECT_FALSE(fs::exists(slot_path(dir_, stalled->token)));
    EXPECT_FALSE(pool.lent(stalled->token, stalled->generation));
    for (int i = 0; i < 2; ++i) {
        const auto next = pool.lend();
        ASSERT_TRUE(next);
        EXPECT_NE(next->token, stalled->token);
    }
    EXPECT_EQ(files(), 2U);
}

TEST_F(ShmSlots, AFolderThatCannotHoldSlotsTurnsSharedMemoryOff)
{
    SlotPool pool(dir_ + "/missing", 2);
    pool.require(kMiB);
    EXPECT_FALSE(pool.lend());
    EXPECT_FALSE(pool.enabled());
    SlotPool off("", 2);
    off.require(kMiB);
    EXPECT_FALSE(off.lend());
}

TEST_F(ShmSlots, TurningOffKeepsALentSlotReadableUntilItComesBack)
{
    const std::string folder = dir_ + "/sub";
    fs::create_directories(folder);
    SlotPool pool(folder, 2);
    pool.require(kMiB);
    const auto lent = pool.lend();
    ASSERT_TRUE(lent);
    std::memset(const_cast<std::byte*>(pool.lent(lent->token, 1)->data), 7, 100);
    fs::remove_all(folder);  // the next slot cannot be made
    EXPECT_FALSE(pool.lend());
    EXPECT_FALSE(pool.enabled());
    const auto view = pool.lent(lent->token, lent->generation);
    ASSERT_TRUE(view) << "arrays still being decoded stay mapped";
    EXPECT_EQ(view->data[99], std::byte{7});
    pool.release(lent->token, lent->generation);
    EXPECT_EQ(pool.lent_count(), 0U);
    EXPECT_FALSE(pool.lent(lent->token, lent->generation));
    EXPECT_FALSE(pool.lend());
}

TEST_F(ShmSlots, ArraysInASlotDecodeBitForBitWithoutACopy)
{
    SlotPool pool(dir_, 1);
    const auto encoded = wire::encode(make_frame());
    pool.require(wire::slot_bytes_needed(encoded));
    const auto loan = pool.lend();
    ASSERT_TRUE(loan);
    SlotMappings sender(dir_);
    std::byte* memory = sender.map(*loan, wire::slot_bytes_needed(encoded));
    ASSERT_NE(memory, nullptr);
    auto small =
        wire::move_arrays_to_slot(encoded, memory, loan->bytes, loan->token, loan->generation);
    ASSERT_EQ(small.size(), 2U) << "header and meta only";

    wire::DecodeError error;
    auto got = wire::decode(delivered(small), error, pool.resolver());
    ASSERT_TRUE(got) << error.reason << ": " << error.detail;
    EXPECT_EQ(got->header.shm_token, loan->token);
    EXPECT_EQ(got->header.shm_flags, wire::kArraysInSlot);
    EXPECT_EQ(got->meta.at("reader"), "reader-a");
    expect_same_arrays(*got, encoded);
    // The parts are the owner's own mapping of the slot, each at a multiple of 64 bytes.
    const auto view = pool.lent(loan->token, loan->generation);
    ASSERT_TRUE(view);
    for (const auto& part : got->parts) {
        const auto* p = static_cast<const std::byte*>(part.data());
        EXPECT_GE(p, view->data);
        EXPECT_LE(p + part.size(), view->data + view->size);
        EXPECT_EQ(std::size_t(p - view->data) % wire::kSlotAlignment, 0U);
    }
    EXPECT_EQ(got->to_f64(2)[999], 1.0 / 1002.0);
}

TEST_F(ShmSlots, ArraysInASlotAreRefusedUnlessThatLendingIsCurrentAndIntact)
{
    SlotPool pool(dir_, 1);
    const auto encoded = wire::encode(make_frame());
    const std::size_t needed = wire::slot_bytes_needed(encoded);
    pool.require(needed);
    const auto loan = pool.lend();
    ASSERT_TRUE(loan);
    SlotMappings sender(dir_);
    std::byte* memory = sender.map(*loan, needed);
    ASSERT_NE(memory, nullptr);
    const auto small =
        wire::move_arrays_to_slot(encoded, memory, needed, loan->token, loan->generation);
    wire::DecodeError error;

    EXPECT_FALSE(wire::decode(delivered(small), error)) << "a process that lent no slot";
    EXPECT_EQ(error.reason, "shm_slot");

    const wire::SlotResolver too_small = [&](std::uint64_t, std::uint32_t) {
        return std::optional<wire::SlotView>(
            wire::SlotView{reinterpret_cast<const std::byte*>(memory), needed - 1});
    };
    EXPECT_FALSE(wire::decode(delivered(small), error, too_small));
    EXPECT_EQ(error.reason, "part_size");

    memory[10] ^= std::byte{1};  // a stalled sender scribbling on the slot
    EXPECT_FALSE(wire::decode(delivered(small), error, pool.resolver()));
    EXPECT_EQ(error.reason, "payload_checksum");
    memory[10] ^= std::byte{1};
    EXPECT_TRUE(wire::decode(delivered(small), error, pool.resolver()));

    pool.release(loan->token, loan->generation);
    EXPECT_FALSE(wire::decode(delivered(small), error, pool.resolver())) << "returned";
    EXPECT_EQ(error.reason, "shm_slot");
    const auto next = pool.lend();
    ASSERT_TRUE(next);
    EXPECT_FALSE(wire::decode(delivered(small), error, pool.resolver())) << "lent again";
    EXPECT_EQ(error.reason, "shm_slot");

    EXPECT_THROW(wire::move_arrays_to_slot(encoded, memory, needed - 1, loan->token, 1), Error);
    EXPECT_THROW(wire::move_arrays_to_slot(small, memory, needed, loan->token, 1), Error);
}

TEST_F(ShmSlots, AnAnswerOverTheSocketNamesItsSlotAndKeepsItsArrays)
{
    auto encoded = wire::encode(make_frame());
    wire::DecodeError error;
    const auto payload = wire::decode(delivered(encoded), error);
    ASSERT_TRUE(payload);
    wire::set_answered_slot(encoded, 0x1234abcdULL, 5);
    auto got = wire::decode(delivered(encoded), error);
    ASSERT_TRUE(got) << error.detail;
    EXPECT_EQ(got->header.shm_token, 0x1234abcdULL);
    EXPECT_EQ(got->header.shm_generation, 5U);
    EXPECT_EQ(got->header.shm_flags, 0U);
    EXPECT_EQ(got->header.payload_checksum, payload->header.payload_checksum);
    expect_same_arrays(*got, encoded);

    const auto no_work = wire::encode(make_frame(0x77));
    auto answered = wire::decode(delivered(no_work), error);
    ASSERT_TRUE(answered);
    EXPECT_EQ(answered->header.shm_token, 0x77U);
}

TEST_F(ShmSlots, UnknownFlagsAreMalformed)
{
    auto encoded = wire::encode(make_frame());
    wire::MessageHeader header;
    std::memcpy(&header, encoded[0].data(), sizeof header);
    header.shm_flags = 2;
    header.header_checksum =
        wire::checksum64(&header, offsetof(wire::MessageHeader, header_checksum));
    encoded[0] = zmq::message_t(&header, sizeof header);
    wire::DecodeError error;
    EXPECT_FALSE(wire::decode(delivered(encoded), error));
    EXPECT_EQ(error.reason, "malformed");
}

TEST_F(ShmSlots, PlaceUsesTheSlotWhereItCanAndElseAnswersItOverTheSocket)
{
    SlotPool pool(dir_, 2);
    auto encoded = wire::encode(make_frame());
    const std::size_t needed = wire::slot_bytes_needed(encoded);
    SlotMappings sender(dir_);
    wire::DecodeError error;

    EXPECT_FALSE(sender.place(encoded, std::nullopt)) << "no slot lent";
    ASSERT_EQ(encoded.size(), 5U);
    EXPECT_EQ(wire::decode(delivered(encoded), error)->header.shm_token, 0U);

    pool.require(needed);
    const auto loan = pool.lend();
    ASSERT_TRUE(loan);
    SlotLoan elsewhere{0x00000000000000bbULL, 3, loan->bytes};
    EXPECT_FALSE(sender.place(encoded, elsewhere)) << "a slot this process cannot open";
    const auto answer = wire::decode(delivered(encoded), error);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->header.shm_token, elsewhere.token);
    EXPECT_EQ(answer->header.shm_generation, 3U);
    expect_same_arrays(*answer, encoded);

    const auto placed = sender.place(encoded, loan);
    ASSERT_TRUE(placed);
    EXPECT_EQ(placed->size(), 2U);
    EXPECT_EQ(encoded.size(), 5U) << "the message itself is left as it was";
    const auto got = wire::decode(delivered(*placed), error, pool.resolver());
    ASSERT_TRUE(got) << error.detail;
    expect_same_arrays(*got, encoded);
}

TEST_F(ShmSlots, SendersMapOnlySlotsThatExistHereAndHoldTheArrays)
{
    SlotPool pool(dir_, 1);
    pool.require(kMiB);
    const auto loan = pool.lend();
    ASSERT_TRUE(loan);
    SlotMappings sender(dir_);
    EXPECT_EQ(sender.map(*loan, 4 * kMiB + 1), nullptr) << "larger than the slot";
    EXPECT_NE(sender.map(*loan, 4 * kMiB), nullptr);
    SlotLoan elsewhere{0x0123456789abcdefULL, 1, kMiB};
    EXPECT_EQ(sender.map(elsewhere, 1), nullptr) << "a slot of another node";
    SlotMappings off("");
    EXPECT_EQ(off.map(*loan, 1), nullptr);
    // A name that is a symbolic link is not followed.
    std::ofstream(dir_ + "/target").put('x');
    SlotLoan link{0x00000000000000aaULL, 1, 1};
    fs::create_symlink(dir_ + "/target", slot_path(dir_, link.token));
    EXPECT_EQ(sender.map(link, 1), nullptr);
}

TEST_F(ShmSlots, TheSweepRemovesOnlyTheSlotsOfProcessesThatHaveGone)
{
    SlotPool live(dir_, 1);
    live.require(kMiB);
    const auto kept = live.lend();
    ASSERT_TRUE(kept);
    const std::string orphan = slot_path(dir_, 0x00000000deadbeefULL);
    std::ofstream(orphan).put('x');
    std::ofstream(dir_ + "/ex2d-slot-00000000deadbeef.new").put('x');
    std::ofstream(dir_ + "/unrelated").put('x');
    EXPECT_EQ(sweep_orphan_slots(dir_), 1U);
    EXPECT_FALSE(fs::exists(orphan));
    EXPECT_TRUE(fs::exists(slot_path(dir_, kept->token))) << "its owner holds the lock";
    EXPECT_TRUE(fs::exists(dir_ + "/ex2d-slot-00000000deadbeef.new")) << "being made";
    EXPECT_TRUE(fs::exists(dir_ + "/unrelated"));
    EXPECT_EQ(sweep_orphan_slots(dir_ + "/missing"), 0U);
}

TEST_F(ShmSlots, TokensAreExactlySixteenHexDigits)
{
    EXPECT_EQ(parse_slot_token("00000000deadbeef"), 0xdeadbeefULL);
    EXPECT_FALSE(parse_slot_token("0000000000000000"));
    EXPECT_FALSE(parse_slot_token("deadbeef"));
    EXPECT_FALSE(parse_slot_token("../../etc/passwd"));
    EXPECT_FALSE(parse_slot_token("00000000DEADBEEF"));
    EXPECT_FALSE(SlotLoan::from_meta({{"slot", "00000000deadbeef"}}));
    const auto loan = SlotLoan::from_meta(
        {{"slot", "00000000deadbeef"}, {"slot_generation", 4}, {"slot_bytes", 4194304}});
    ASSERT_TRUE(loan);
    EXPECT_EQ(loan->generation, 4U);
    EXPECT_EQ(loan->bytes, 4194304U);
}

}  // namespace
}  // namespace ex2d::service
