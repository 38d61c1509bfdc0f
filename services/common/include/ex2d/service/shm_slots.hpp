// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file shm_slots.hpp
/// Shared-memory slots between the processes of one node (docs/protocol.md, "Shared memory").
/// A receiver (worker, writer) owns a pool of slots and lends one with each CREDIT or GRANT;
/// the sender copies the arrays into it instead of pushing them through a socket, where every
/// byte is copied twice and lands in fresh pages. Slots are reused, so the memory a transfer
/// touches was touched before.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ex2d/service/wire.hpp"
#include "ex2d/status.hpp"

namespace ex2d::service {

/// A slot as a CREDIT or GRANT lends it: meta `slot`, `slot_generation`, `slot_bytes`.
struct SlotLoan {
    std::uint64_t token = 0;
    std::uint32_t generation = 0;
    std::size_t bytes = 0;

    void add_to(nlohmann::json& meta) const;
    /// The loan a message offers; nullopt when it offers none or its fields are malformed.
    static std::optional<SlotLoan> from_meta(const nlohmann::json& meta);
};

/// 16 lower-case hex digits, and back (nullopt unless exactly that).
std::string slot_token_text(std::uint64_t token);
std::optional<std::uint64_t> parse_slot_token(const std::string& text);
/// `dir`/ex2d-slot-TOKEN.
std::string slot_path(const std::string& dir, std::uint64_t token);

/// Removes the slot files in `dir` whose owner has gone (their flock is free); returns how
/// many. A folder that does not exist holds none.
std::size_t sweep_orphan_slots(const std::string& dir);

/// The receiver's slots. Thread-safe: a writer's write threads give slots back.
class SlotPool {
public:
    using Clock = std::chrono::steady_clock;

    /// `dir` empty: shared memory off, lend() never lends. At most `max_slots` exist at once.
    SlotPool(std::string dir, std::size_t max_slots);
    ~SlotPool();  ///< unmaps and unlinks every slot
    SlotPool(const SlotPool&) = delete;
    SlotPool& operator=(const SlotPool&) = delete;

    bool enabled() const;
    /// Slots lent from now on hold at least `bytes` (rounded up to 4 MiB); they only grow.
    void require(std::size_t bytes);
    /// A free slot of the required size, lent until release() or retire(); nullopt while
    /// shared memory is off, no size is required yet, or every slot is lent. A slot that
    /// cannot be made (a folder too small, say) turns shared memory off with one warning.
    std::optional<SlotLoan> lend();
    /// The bytes of slot `token` while it is lent at `generation`.
    std::optional<wire::SlotView> lent(std::uint64_t token, std::uint32_t generation) const;
    /// The slot comes back and can be lent again, if it is still lent at `generation`.
    void release(std::uint64_t token, std::uint32_t generation);
    /// The slot is unlinked and unmapped: its sender stalled, and may still write into it.
    void retire(std::uint64_t token);
    /// Retires every slot lent before `deadline`; returns how many.
    std::size_t retire_lent_before(Clock::time_point deadline);
    std::size_t lent_count() const;
    /// A resolver for wire::decode that accepts this pool's lent slots.
    wire::SlotResolver resolver() const;

private:
    struct Slot;
    /// A new slot of `bytes` in dir_; an io error naming the file where it cannot be made.
    Result<std::unique_ptr<Slot>> make_slot(std::size_t bytes) const;
    void disable(const std::string& why);

    std::string dir_;
    std::size_t max_slots_;
    mutable std::mutex mutex_;
    std::size_t required_bytes_ = 0;
    std::map<std::uint64_t, std::unique_ptr<Slot>> slots_;
};

/// A receiver's pool in `dir` (empty: shared memory off), after removing the slots there of
/// processes that have gone (sweep_orphan_slots).
std::unique_ptr<SlotPool> open_slot_pool(const std::string& dir, std::size_t max_slots);

/// The sender's mappings of slots lent to it, kept for the next lending.
class SlotMappings {
public:
    /// `dir` empty: never maps (every message goes over the socket).
    explicit SlotMappings(std::string dir, std::size_t max_kept = 8);
    ~SlotMappings();
    SlotMappings(const SlotMappings&) = delete;
    SlotMappings& operator=(const SlotMappings&) = delete;

    /// The memory of the lent slot when it can be opened here and holds `bytes`; nullptr
    /// otherwise (another node, another folder, a slot too small, shared memory off).
    std::byte* map(const SlotLoan& loan, std::size_t bytes);
    /// An encoded message for the receiver that lent `slot`: [header][meta] with the arrays
    /// copied into the slot where it maps here and holds them (`encoded` is left as it is);
    /// otherwise nullopt, and `encoded`'s header names the slot it answers (none: 0).
    std::optional<std::vector<zmq::message_t>> place(std::vector<zmq::message_t>& encoded,
                                                     const std::optional<SlotLoan>& slot);

private:
    struct Mapping {
        std::uint64_t token = 0;
        int fd = -1;  ///< kept open to see when the owner unlinks the slot
        std::byte* data = nullptr;
        std::size_t size = 0;
    };
    void unmap(const Mapping& mapping);

    std::string dir_;
    std::size_t max_kept_;
    std::list<Mapping> mappings_;  ///< most recently used first
};

}  // namespace ex2d::service
