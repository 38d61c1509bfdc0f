// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file wire.hpp
/// The fleet's ZeroMQ messages (docs/protocol.md): a fixed 512-byte header, a JSON meta part
/// and raw array parts sent without copies. Decoding never throws on bad input: it returns a
/// DecodeError naming the reason, which the caller logs and counts before dropping the message.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "ex2d/scratch_allocator.hpp"

namespace ex2d::wire {

// 2: results go to a writer only after its GRANT (OFFER, GRANT, DECLINE). 3: RESULT in the
// file's precision. 4: FRAME carries the bad-column table. 5: arrays may lie in a shared-memory
// slot the receiver lent (docs/protocol.md).
constexpr std::uint16_t kProtocolVersion = 5;
/// shm_flags: the arrays are in the slot named by shm_token, not in the message.
constexpr std::uint32_t kArraysInSlot = 1;
/// Each array starts at a multiple of this in a slot.
constexpr std::size_t kSlotAlignment = 64;
constexpr std::size_t kMaxParts = 16;

enum class MessageType : std::uint16_t {
    credit = 1,
    frame = 2,
    no_work = 3,
    result = 4,
    offer = 5,
    grant = 6,
    decline = 7,
};
constexpr std::uint16_t kLastMessageType = 7;
enum class DType : std::uint8_t { u8 = 1, i32 = 2, u32 = 3, f32 = 4, f64 = 5, i64 = 6 };
std::size_t dtype_size(DType dtype);  ///< 0 for an unknown code

/// The DType of a C++ element type, so that typed accessors can check what was sent.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<std::uint8_t> {
    static constexpr DType value = DType::u8;
};
template <>
struct DTypeOf<std::int32_t> {
    static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<std::uint32_t> {
    static constexpr DType value = DType::u32;
};
template <>
struct DTypeOf<float> {
    static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
    static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<std::int64_t> {
    static constexpr DType value = DType::i64;
};

struct PartDescriptor {
    std::uint8_t dtype = 0;
    std::uint8_t ndim = 0;
    std::uint16_t reserved0 = 0;
    std::int32_t shape[2] = {0, 0};
    std::uint32_t reserved1 = 0;
};
static_assert(sizeof(PartDescriptor) == 16);

/// Little-endian on the wire; the fleet runs on x86-64 and aarch64, both little-endian.
struct MessageHeader {
    char magic[4] = {'E', 'X', '2', 'D'};
    std::uint16_t version = kProtocolVersion;
    std::uint16_t type = 0;
    std::uint32_t header_size = 512;
    std::uint32_t nparts = 0;
    std::uint64_t epoch = 0;
    std::uint64_t meta_bytes = 0;
    std::uint64_t meta_checksum = 0;
    char job_id[56] = {};
    char stream_id[32] = {};
    PartDescriptor parts[kMaxParts] = {};
    std::uint64_t payload_checksum = 0;
    std::uint64_t shm_token = 0;
    std::uint32_t shm_generation = 0;
    std::uint32_t shm_flags = 0;
    std::uint8_t reserved[96] = {};
    std::uint64_t header_checksum = 0;
};
static_assert(std::is_trivially_copyable_v<MessageHeader>);
static_assert(sizeof(MessageHeader) == 512);
static_assert(offsetof(MessageHeader, epoch) == 16);
static_assert(offsetof(MessageHeader, job_id) == 40);
static_assert(offsetof(MessageHeader, stream_id) == 96);
static_assert(offsetof(MessageHeader, parts) == 128);
static_assert(offsetof(MessageHeader, payload_checksum) == 384);
static_assert(offsetof(MessageHeader, shm_token) == 392);
static_assert(offsetof(MessageHeader, header_checksum) == 504);

/// XXH3-64 of a byte range, and its 16-digit lower-case hex form.
std::uint64_t checksum64(const void* data, std::size_t size);
std::string hex64(std::uint64_t value);
/// XXH3-64 of a whole file, streamed; nullopt when it cannot be read.
std::optional<std::uint64_t> file_checksum64(const std::string& path);
/// XXH3-128 of a byte range as 32 hex digits (the form file_checksum128 gives).
std::string checksum128(const void* data, std::size_t size);
/// XXH3-128 of a whole file as 32 hex digits; nullopt when it cannot be read.
std::optional<std::string> file_checksum128(const std::string& path);

/// An array part: a shared owner keeps the bytes alive until ZeroMQ has sent them.
struct ArrayPart {
    DType dtype = DType::u8;
    std::vector<std::int32_t> shape;    ///< 1 or 2 dimensions
    std::shared_ptr<const void> owner;  ///< keeps `data` alive
    const void* data = nullptr;
    std::size_t nbytes = 0;

    /// Takes ownership of `values` (moved into a shared buffer).
    template <typename T, typename Alloc>
    static ArrayPart from_vector(DType dtype, std::vector<T, Alloc> values,
                                 std::vector<std::int32_t> shape)
    {
        auto holder = std::make_shared<std::vector<T, Alloc>>(std::move(values));
        ArrayPart part;
        part.dtype = dtype;
        part.shape = std::move(shape);
        part.data = holder->data();
        part.nbytes = holder->size() * sizeof(T);
        part.owner = std::move(holder);
        return part;
    }
    /// Shares `values` (a pooled buffer, say) until ZeroMQ has sent it.
    template <typename Vector>
    static ArrayPart from_shared(DType dtype, std::shared_ptr<Vector> values,
                                 std::vector<std::int32_t> shape)
    {
        ArrayPart part;
        part.dtype = dtype;
        part.shape = std::move(shape);
        part.data = values->data();
        part.nbytes = values->size() * sizeof(typename Vector::value_type);
        part.owner = std::move(values);
        return part;
    }
};

/// A message to send: type, job identity, meta JSON and arrays.
struct OutgoingMessage {
    MessageType type = MessageType::credit;
    std::uint64_t epoch = 0;
    std::string job_id;     ///< at most 55 characters
    std::string stream_id;  ///< at most 31 characters
    nlohmann::json meta = nlohmann::json::object();
    std::vector<ArrayPart> arrays;         ///< at most kMaxParts
    std::uint64_t answers_slot = 0;        ///< header shm_token: the lent slot this message returns
    std::uint32_t answers_generation = 0;  ///< and the lending it answers (shm_generation)
};

/// Builds the multipart message; arrays are attached without copies (zmq_msg_init_data with
/// a free function that drops the owner, callable from ZeroMQ's I/O thread).
/// Throws ex2d::Error for a programming error (too many parts, id too long, shape mismatch).
std::vector<zmq::message_t> encode(const OutgoingMessage& message);

/// A received message that passed every check.
// Its implicit move constructor moves each member with that member's noexcept move; the throw
// clang-tidy reports lies inside nlohmann::json's move constructor, which is noexcept itself.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct IncomingMessage {
    MessageHeader header;
    MessageType type = MessageType::credit;
    std::uint64_t epoch = 0;
    std::string job_id;
    std::string stream_id;
    nlohmann::json meta;
    std::vector<zmq::message_t> parts;  ///< the array parts, in order (index 0 = first array)

    DType dtype(std::size_t i) const { return DType(header.parts[i].dtype); }
    /// Element count of array i.
    std::size_t count(std::size_t i) const;
    /// Copies array i into a vector of T; dtype must match exactly (ex2d::Error otherwise).
    /// Alloc: LargeArrayAllocator<T> for frame-sized arrays.
    template <typename T, typename Alloc = std::allocator<T>>
    std::vector<T, Alloc> copy_array(std::size_t i) const
    {
        expect_dtype(i, DTypeOf<T>::value);
        // memcpy, not a cast: a part received over tcp may start at any offset of libzmq's
        // receive buffer, so its bytes need not be aligned for T.
        std::vector<T, Alloc> values(parts.at(i).size() / sizeof(T));
        if (!values.empty()) {
            std::memcpy(values.data(), parts.at(i).data(), values.size() * sizeof(T));
        }
        return values;
    }
    /// Throws ex2d::Error unless array i exists and has dtype `expected`.
    void expect_dtype(std::size_t i, DType expected) const;
    /// Array i as float64, converting from f32 where it was sent as f32, in one pass into
    /// a frame-sized array.
    LargeArray<double> to_f64(std::size_t i) const;
    /// The same into `values`, whose memory is reused where it is large enough.
    void to_f64(std::size_t i, LargeArray<double>& values) const;
};

/// Why a message was dropped; `reason` is a short metric label (part_count, header_size,
/// bad_magic, wrong_version, header_checksum, bad_type, meta_checksum, part_size,
/// payload_checksum, malformed) and `detail` a sentence for the log.
struct DecodeError {
    std::string reason;
    std::string detail;
};

/// The bytes of a shared-memory slot a receiver lent.
struct SlotView {
    const std::byte* data = nullptr;
    std::size_t size = 0;
};
/// A receiver's answer to "which slot is (token, generation)?": nullopt for one it did not lend.
using SlotResolver =
    std::function<std::optional<SlotView>(std::uint64_t token, std::uint32_t generation)>;

/// Validates and decodes a multipart message (the ROUTER's identity frame already removed).
/// A message whose arrays are in a slot is accepted only when `slots` knows that slot; its
/// parts then point into the slot, which must outlive them. On failure returns nullopt and
/// fills `error`.
std::optional<IncomingMessage> decode(std::vector<zmq::message_t>&& parts, DecodeError& error,
                                      const SlotResolver& slots = {});

/// Bytes the arrays of a message take in a slot (each at a multiple of kSlotAlignment); throws
/// ex2d::Error when `encoded` has no valid header.
std::size_t slot_bytes_needed(const MessageHeader& header);
std::size_t slot_bytes_needed(const std::vector<zmq::message_t>& encoded);
/// Sets the header's shm_token of an encoded message whose arrays stay in it: the answer
/// returns that slot to its owner (docs/protocol.md, "Shared memory").
void set_answered_slot(std::vector<zmq::message_t>& encoded, std::uint64_t token,
                       std::uint32_t generation);
/// The same message with its arrays copied into `slot`: [header][meta], the header naming the
/// slot. The payload checksum is unchanged. Throws ex2d::Error when they do not fit.
std::vector<zmq::message_t> move_arrays_to_slot(const std::vector<zmq::message_t>& encoded,
                                                std::byte* slot, std::size_t slot_bytes,
                                                std::uint64_t token, std::uint32_t generation);

}  // namespace ex2d::wire
