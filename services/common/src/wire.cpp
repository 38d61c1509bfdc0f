// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/wire.hpp"

#include <array>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <limits>

#include <xxhash.h>

#include "ex2d/status.hpp"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace ex2d::wire {

namespace {

/// ZeroMQ hands an attached array from the thread that sends it to its I/O thread, which
/// frees it; the ordering between the two is libzmq's, which ThreadSanitizer does not see
/// (libzmq is not instrumented). These tell it of the hand-off; other builds do nothing.
void announce_handoff([[maybe_unused]] void* hint)
{
#if defined(__SANITIZE_THREAD__)
    __tsan_release(hint);
#endif
}

void receive_handoff([[maybe_unused]] void* hint)
{
#if defined(__SANITIZE_THREAD__)
    __tsan_acquire(hint);
#endif
}

constexpr std::size_t kHeaderBytes = sizeof(MessageHeader);
constexpr std::size_t kChecksummedBytes = offsetof(MessageHeader, header_checksum);
constexpr std::size_t kFileBlock = std::size_t(1) << 20;

std::uint64_t header_checksum_of(const void* header_bytes)
{
    return XXH3_64bits(header_bytes, kChecksummedBytes);
}

/// Runs when ZeroMQ releases an array part, possibly on its I/O thread: dropping the
/// shared_ptr copy is the only thing it does, and shared_ptr's count is thread-safe.
void release_owner(void* /*data*/, void* hint)
{
    receive_handoff(hint);
    delete static_cast<std::shared_ptr<const void>*>(hint);
}

/// Byte count a descriptor describes, or nullopt when it is invalid or overflows size_t.
std::optional<std::size_t> descriptor_bytes(const PartDescriptor& d)
{
    const std::size_t element = dtype_size(DType(d.dtype));
    if (element == 0 || (d.ndim != 1 && d.ndim != 2)) {
        return std::nullopt;
    }
    std::size_t bytes = element;
    for (int k = 0; k < d.ndim; ++k) {
        if (d.shape[k] < 0) {
            return std::nullopt;
        }
        const auto dim = static_cast<std::size_t>(d.shape[k]);
        if (dim != 0 && bytes > std::numeric_limits<std::size_t>::max() / dim) {
            return std::nullopt;
        }
        bytes *= dim;
    }
    return bytes;
}

void copy_id(char* field, std::size_t field_size, const std::string& id, const char* what)
{
    // The field must keep a terminating NUL, so that decode can find where the id ends.
    if (id.size() >= field_size) {
        throw Error(std::string("wire::encode: ") + what + " '" + id + "' is longer than " +
                    std::to_string(field_size - 1) + " characters");
    }
    std::memcpy(field, id.c_str(), id.size() + 1);
}

PartDescriptor describe(const ArrayPart& array, std::size_t index)
{
    const std::string where = "wire::encode: array " + std::to_string(index) + ": ";
    if (dtype_size(array.dtype) == 0) {
        throw Error(where + "unknown dtype " + std::to_string(int(array.dtype)));
    }
    if (array.shape.size() != 1 && array.shape.size() != 2) {
        throw Error(where + "shape has " + std::to_string(array.shape.size()) +
                    " dimensions, expected 1 or 2");
    }
    PartDescriptor d;
    d.dtype = static_cast<std::uint8_t>(array.dtype);
    d.ndim = static_cast<std::uint8_t>(array.shape.size());
    for (std::size_t k = 0; k < array.shape.size(); ++k) {
        if (array.shape[k] < 0) {
            throw Error(where + "negative dimension " + std::to_string(array.shape[k]));
        }
        d.shape[k] = array.shape[k];
    }
    const auto expected = descriptor_bytes(d);
    if (!expected || *expected != array.nbytes) {
        throw Error(where + std::to_string(array.nbytes) + " bytes do not match dtype x shape");
    }
    if (array.data == nullptr && array.nbytes != 0) {
        throw Error(where + "no data for " + std::to_string(array.nbytes) + " bytes");
    }
    return d;
}

zmq::message_t attach(const ArrayPart& array)
{
    if (!array.owner) {
        // Nothing would keep the bytes alive once encode returns, so they must be copied.
        return zmq::message_t(array.data, array.nbytes);
    }
    auto* hint = new std::shared_ptr<const void>(array.owner);
    announce_handoff(hint);
    try {
        return zmq::message_t(const_cast<void*>(array.data), array.nbytes, &release_owner, hint);
    } catch (...) {
        delete hint;
        throw;
    }
}

/// Records why a message is refused; false, for the decode steps to return.
bool reject(DecodeError& error, const char* reason, std::string detail)
{
    error.reason = reason;
    error.detail = std::move(detail);
    return false;
}

bool nul_terminated(const char* field, std::size_t size)
{
    return std::memchr(field, '\0', size) != nullptr;
}

/// The header part: its size, magic, version, checksum, type and part count.
bool read_header(const std::vector<zmq::message_t>& parts, MessageHeader& header,
                 DecodeError& error)
{
    if (parts.size() < 2) {
        return reject(error, "part_count",
                      std::to_string(parts.size()) + " parts, expected at least 2");
    }
    if (parts[0].size() != kHeaderBytes) {
        return reject(error, "header_size",
                      "header part has " + std::to_string(parts[0].size()) + " bytes");
    }
    // Copied out: received bytes need not be aligned for the struct's integer fields.
    std::memcpy(&header, parts[0].data(), kHeaderBytes);
    if (std::memcmp(header.magic, "EX2D", 4) != 0) {
        return reject(error, "bad_magic", "header does not start with EX2D");
    }
    if (header.version != kProtocolVersion) {
        return reject(error, "wrong_version",
                      "protocol version " + std::to_string(header.version) + ", expected " +
                          std::to_string(kProtocolVersion));
    }
    const std::uint64_t header_sum = header_checksum_of(parts[0].data());
    if (header_sum != header.header_checksum) {
        return reject(
            error, "header_checksum",
            "header checksum " + hex64(header.header_checksum) + ", computed " + hex64(header_sum));
    }
    if (header.header_size != kHeaderBytes) {
        return reject(error, "header_size",
                      "header_size field is " + std::to_string(header.header_size));
    }
    if (header.type < 1 || header.type > kLastMessageType) {
        return reject(error, "bad_type", "message type " + std::to_string(header.type));
    }
    if ((header.shm_flags & ~kArraysInSlot) != 0) {
        return reject(error, "malformed", "unknown shm_flags " + std::to_string(header.shm_flags));
    }
    // Arrays in a slot travel as [header][meta] only.
    const std::size_t parts_in_message =
        (header.shm_flags & kArraysInSlot) != 0 ? 0 : std::size_t(header.nparts);
    if (header.nparts > kMaxParts || parts.size() != parts_in_message + 2) {
        return reject(
            error, "part_count",
            std::to_string(parts.size()) + " parts for nparts " + std::to_string(header.nparts));
    }
    return true;
}

/// Where each array of `header` starts in a slot, and the slot bytes they need; nullopt when
/// a descriptor is invalid.
std::optional<std::vector<std::size_t>> slot_offsets(const MessageHeader& header,
                                                     std::size_t& total)
{
    std::vector<std::size_t> offsets;
    total = 0;
    for (std::size_t i = 0; i < header.nparts && i < kMaxParts; ++i) {
        const auto bytes = descriptor_bytes(header.parts[i]);
        if (!bytes) return std::nullopt;
        total = (total + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
        offsets.push_back(total);
        total += *bytes;
    }
    return offsets;
}

/// The header of a message this process encoded.
MessageHeader header_of(const std::vector<zmq::message_t>& encoded)
{
    if (encoded.empty() || encoded[0].size() != kHeaderBytes) {
        throw Error("wire: an encoded message starts with its 512-byte header");
    }
    MessageHeader header;
    std::memcpy(&header, encoded[0].data(), kHeaderBytes);
    return header;
}

/// For a message whose arrays lie in a slot: the slot it names, lent at the generation it
/// names, whose bytes then become the message's array parts (views, not copies).
bool attach_slot_parts(std::vector<zmq::message_t>& parts, const MessageHeader& header,
                       const SlotResolver& slots, DecodeError& error)
{
    if ((header.shm_flags & kArraysInSlot) == 0) return true;
    const std::string slot = hex64(header.shm_token);
    std::optional<SlotView> view;
    if (slots) view = slots(header.shm_token, header.shm_generation);
    if (!view) {
        return reject(error, "shm_slot",
                      "arrays in slot " + slot + " generation " +
                          std::to_string(header.shm_generation) +
                          ", which this process did not lend");
    }
    std::size_t total = 0;
    const auto offsets = slot_offsets(header, total);
    if (!offsets || total > view->size) {
        return reject(error, "part_size",
                      "arrays need " + std::to_string(total) + " bytes of slot " + slot +
                          ", which has " + std::to_string(view->size));
    }
    for (std::size_t i = 0; i < offsets->size(); ++i) {
        auto* data = const_cast<std::byte*>(view->data + (*offsets)[i]);
        // No free function: the slot's owner keeps the memory until the message is decoded.
        parts.emplace_back(static_cast<void*>(data), *descriptor_bytes(header.parts[i]), nullptr);
    }
    return true;
}

/// The meta part against its size and checksum, each array part against its descriptor.
bool check_part_sizes(const std::vector<zmq::message_t>& parts, const MessageHeader& header,
                      DecodeError& error)
{
    const zmq::message_t& meta_part = parts[1];
    if (meta_part.size() != header.meta_bytes ||
        checksum64(meta_part.data(), meta_part.size()) != header.meta_checksum) {
        return reject(error, "meta_checksum",
                      "meta part of " + std::to_string(meta_part.size()) +
                          " bytes does not match its size or checksum");
    }
    for (std::size_t i = 0; i < header.nparts; ++i) {
        const auto expected = descriptor_bytes(header.parts[i]);
        if (!expected || *expected != parts[i + 2].size()) {
            return reject(error, "part_size",
                          "array " + std::to_string(i) + " has " +
                              std::to_string(parts[i + 2].size()) +
                              " bytes, which its dtype and shape do not describe");
        }
    }
    return true;
}

/// One XXH3 over all array parts in order, against the header's payload checksum.
bool check_payload(const std::vector<zmq::message_t>& parts, const MessageHeader& header,
                   DecodeError& error)
{
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                   &XXH3_freeState);
    if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) {
        return reject(error, "payload_checksum", "cannot allocate an XXH3 state");
    }
    for (std::size_t i = 2; i < parts.size(); ++i) {
        XXH3_64bits_update(state.get(), parts[i].data(), parts[i].size());
    }
    const std::uint64_t payload_sum = XXH3_64bits_digest(state.get());
    if (payload_sum != header.payload_checksum) {
        return reject(error, "payload_checksum",
                      "payload checksum " + hex64(header.payload_checksum) + ", computed " +
                          hex64(payload_sum));
    }
    return true;
}

/// The meta part as a JSON object, and the header's ids as C strings.
bool parse_meta(const zmq::message_t& meta_part, const MessageHeader& header, nlohmann::json& meta,
                DecodeError& error)
{
    const auto* meta_begin = static_cast<const char*>(meta_part.data());
    meta = nlohmann::json::parse(meta_begin, meta_begin + meta_part.size(), nullptr, false);
    if (meta.is_discarded() || !meta.is_object()) {
        return reject(error, "malformed", "meta is not a JSON object");
    }
    if (!nul_terminated(header.job_id, sizeof(header.job_id)) ||
        !nul_terminated(header.stream_id, sizeof(header.stream_id))) {
        return reject(error, "malformed", "job_id or stream_id is not NUL-terminated");
    }
    return true;
}

}  // namespace

std::size_t dtype_size(DType dtype)
{
    switch (dtype) {
        case DType::u8:
            return 1;
        case DType::i32:
        case DType::u32:
        case DType::f32:
            return 4;
        case DType::f64:
        case DType::i64:
            return 8;
    }
    return 0;
}

std::uint64_t checksum64(const void* data, std::size_t size)
{
    return XXH3_64bits(data, size);
}

std::string hex64(std::uint64_t value)
{
    char text[17];
    std::snprintf(text, sizeof(text), "%016" PRIx64, value);
    return text;
}

std::optional<std::uint64_t> file_checksum64(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                   &XXH3_freeState);
    if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) {
        return std::nullopt;
    }
    std::vector<char> block(kFileBlock);
    while (in) {
        in.read(block.data(), std::streamsize(block.size()));
        XXH3_64bits_update(state.get(), block.data(), std::size_t(in.gcount()));
    }
    if (in.bad()) {
        return std::nullopt;
    }
    return XXH3_64bits_digest(state.get());
}

std::string checksum128(const void* data, std::size_t size)
{
    const XXH128_hash_t hash = XXH3_128bits(data, size);
    return hex64(hash.high64) + hex64(hash.low64);
}

std::optional<std::string> file_checksum128(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                   &XXH3_freeState);
    if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) {
        return std::nullopt;
    }
    std::vector<char> block(kFileBlock);
    while (in) {
        in.read(block.data(), std::streamsize(block.size()));
        XXH3_128bits_update(state.get(), block.data(), std::size_t(in.gcount()));
    }
    if (in.bad()) {
        return std::nullopt;
    }
    const XXH128_hash_t hash = XXH3_128bits_digest(state.get());
    return hex64(hash.high64) + hex64(hash.low64);
}

std::vector<zmq::message_t> encode(const OutgoingMessage& message)
{
    if (message.arrays.size() > kMaxParts) {
        throw Error("wire::encode: " + std::to_string(message.arrays.size()) + " arrays, at most " +
                    std::to_string(kMaxParts));
    }
    MessageHeader header;
    header.type = static_cast<std::uint16_t>(message.type);
    header.nparts = static_cast<std::uint32_t>(message.arrays.size());
    header.epoch = message.epoch;
    header.shm_token = message.answers_slot;
    header.shm_generation = message.answers_generation;
    copy_id(header.job_id, sizeof(header.job_id), message.job_id, "job_id");
    copy_id(header.stream_id, sizeof(header.stream_id), message.stream_id, "stream_id");

    const std::string meta = message.meta.dump();
    header.meta_bytes = meta.size();
    header.meta_checksum = checksum64(meta.data(), meta.size());

    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                   &XXH3_freeState);
    if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) {
        throw Error("wire::encode: cannot allocate an XXH3 state");
    }
    for (std::size_t i = 0; i < message.arrays.size(); ++i) {
        const ArrayPart& array = message.arrays[i];
        header.parts[i] = describe(array, i);
        XXH3_64bits_update(state.get(), array.data, array.nbytes);
    }
    header.payload_checksum = XXH3_64bits_digest(state.get());
    header.header_checksum = header_checksum_of(&header);

    std::vector<zmq::message_t> parts;
    parts.reserve(message.arrays.size() + 2);
    parts.emplace_back(&header, kHeaderBytes);
    parts.emplace_back(meta.data(), meta.size());
    for (const ArrayPart& array : message.arrays) {
        parts.push_back(attach(array));
    }
    return parts;
}

std::size_t slot_bytes_needed(const MessageHeader& header)
{
    std::size_t total = 0;
    if (!slot_offsets(header, total)) throw Error("wire: a message header has a bad descriptor");
    return total;
}

std::size_t slot_bytes_needed(const std::vector<zmq::message_t>& encoded)
{
    return slot_bytes_needed(header_of(encoded));
}

void set_answered_slot(std::vector<zmq::message_t>& encoded, std::uint64_t token,
                       std::uint32_t generation)
{
    MessageHeader header = header_of(encoded);
    header.shm_token = token;
    header.shm_generation = generation;
    header.header_checksum = header_checksum_of(&header);
    encoded[0] = zmq::message_t(&header, kHeaderBytes);
}

std::vector<zmq::message_t> move_arrays_to_slot(const std::vector<zmq::message_t>& encoded,
                                                std::byte* slot, std::size_t slot_bytes,
                                                std::uint64_t token, std::uint32_t generation)
{
    MessageHeader header = header_of(encoded);
    const std::size_t needed = slot_bytes_needed(header);
    if (needed > slot_bytes || encoded.size() != std::size_t(header.nparts) + 2 ||
        header.shm_flags != 0) {
        throw Error("wire: " + std::to_string(needed) + " bytes of arrays for a slot of " +
                    std::to_string(slot_bytes) + ", or a message already in a slot");
    }
    std::size_t total = 0;
    const auto offsets = slot_offsets(header, total);
    for (std::size_t i = 0; i < offsets->size(); ++i) {
        const zmq::message_t& part = encoded[i + 2];
        if (!part.empty()) std::memcpy(slot + (*offsets)[i], part.data(), part.size());
    }
    header.shm_token = token;
    header.shm_generation = generation;
    header.shm_flags = kArraysInSlot;
    header.header_checksum = header_checksum_of(&header);
    std::vector<zmq::message_t> out;
    out.emplace_back(&header, kHeaderBytes);
    out.emplace_back(encoded[1].data(), encoded[1].size());
    return out;
}

std::optional<IncomingMessage> decode(std::vector<zmq::message_t>&& parts, DecodeError& error,
                                      const SlotResolver& slots)
{
    MessageHeader header;
    nlohmann::json meta;
    if (!read_header(parts, header, error) || !attach_slot_parts(parts, header, slots, error) ||
        !check_part_sizes(parts, header, error) || !check_payload(parts, header, error) ||
        !parse_meta(parts[1], header, meta, error)) {
        return std::nullopt;
    }
    IncomingMessage message;
    message.header = header;
    message.type = MessageType(header.type);
    message.epoch = header.epoch;
    message.job_id = header.job_id;
    message.stream_id = header.stream_id;
    message.meta = std::move(meta);
    message.parts.reserve(header.nparts);
    for (std::size_t i = 2; i < parts.size(); ++i) {
        message.parts.push_back(std::move(parts[i]));
    }
    return message;
}

void IncomingMessage::expect_dtype(std::size_t i, DType expected) const
{
    if (i >= parts.size() || i >= kMaxParts) {
        throw Error("wire: array " + std::to_string(i) + " does not exist (" +
                    std::to_string(parts.size()) + " arrays)");
    }
    if (dtype(i) != expected) {
        throw Error("wire: array " + std::to_string(i) + " has dtype " +
                    std::to_string(int(dtype(i))) + ", expected " + std::to_string(int(expected)));
    }
}

std::size_t IncomingMessage::count(std::size_t i) const
{
    const zmq::message_t& part = parts.at(i);
    const std::size_t element = i < kMaxParts ? dtype_size(dtype(i)) : 0;
    if (element == 0) {
        throw Error("wire: array " + std::to_string(i) + " has an unknown dtype");
    }
    return part.size() / element;
}

LargeArray<double> IncomingMessage::to_f64(std::size_t i) const
{
    LargeArray<double> values;
    to_f64(i, values);
    return values;
}

void IncomingMessage::to_f64(std::size_t i, LargeArray<double>& values) const
{
    const bool f32 = i < parts.size() && i < kMaxParts && dtype(i) == DType::f32;
    if (!f32) expect_dtype(i, DType::f64);  // throws with the dtype that was sent
    const auto* bytes = static_cast<const unsigned char*>(parts.at(i).data());
    const std::size_t item = f32 ? sizeof(float) : sizeof(double);
    values.resize(parts.at(i).size() / item);
    // memcpy per element: the receive buffer need not be aligned for float or double.
    for (std::size_t k = 0; k < values.size(); ++k) {
        if (f32) {
            float v;
            std::memcpy(&v, bytes + k * item, sizeof v);
            values[k] = v;
        } else {
            std::memcpy(&values[k], bytes + k * item, sizeof(double));
        }
    }
}

}  // namespace ex2d::wire
