// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/shm_slots.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <random>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ex2d/logging.hpp"

namespace ex2d::service {

namespace {

constexpr const char* kSlotPrefix = "ex2d-slot-";
constexpr std::size_t kSlotRounding = std::size_t(4) << 20;

std::string errno_text()
{
    return std::strerror(errno);
}

std::uint64_t random_token()
{
    static thread_local std::mt19937_64 engine{std::random_device{}()};
    std::uint64_t token = 0;
    while (token == 0) token = engine();  // 0 means "no slot" in a header
    return token;
}

/// Maps `size` bytes of `fd` shared, its page tables filled at once (a slot is written whole).
std::byte* map_shared(int fd, std::size_t size)
{
    void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    return data == MAP_FAILED ? nullptr : static_cast<std::byte*>(data);
}

}  // namespace

struct SlotPool::Slot {
    std::uint64_t token = 0;
    std::string path;
    int fd = -1;  ///< holds the flock that tells sweep_orphan_slots the owner lives
    std::byte* data = nullptr;
    std::size_t size = 0;
    std::uint32_t generation = 0;
    bool lent = false;
    Clock::time_point lent_at;

    ~Slot()
    {
        if (data != nullptr) ::munmap(data, size);
        if (!path.empty()) ::unlink(path.c_str());
        if (fd >= 0) ::close(fd);
    }
};

void SlotLoan::add_to(nlohmann::json& meta) const
{
    meta["slot"] = slot_token_text(token);
    meta["slot_generation"] = generation;
    meta["slot_bytes"] = bytes;
}

std::optional<SlotLoan> SlotLoan::from_meta(const nlohmann::json& meta)
{
    const auto slot = meta.find("slot");
    if (slot == meta.end() || !slot->is_string()) return std::nullopt;
    const auto token = parse_slot_token(slot->get<std::string>());
    const auto generation = meta.find("slot_generation");
    const auto bytes = meta.find("slot_bytes");
    const auto whole = [&](const nlohmann::json::const_iterator& it) {
        return it != meta.end() && it->is_number_integer() && it->get<long long>() >= 0;
    };
    if (!token || !whole(generation) || !whole(bytes)) return std::nullopt;
    SlotLoan loan;
    loan.token = *token;
    loan.generation = generation->get<std::uint32_t>();
    loan.bytes = bytes->get<std::size_t>();
    return loan;
}

std::string slot_token_text(std::uint64_t token)
{
    return wire::hex64(token);
}

std::optional<std::uint64_t> parse_slot_token(const std::string& text)
{
    // The token names a file: exactly 16 hex digits, so no message can point elsewhere.
    if (text.size() != 16) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : text) {
        int digit = -1;
        if (c >= '0' && c <= '9') digit = c - '0';
        if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
        if (digit < 0) return std::nullopt;
        value = value * 16 + std::uint64_t(digit);
    }
    if (value == 0) return std::nullopt;
    return value;
}

std::string slot_path(const std::string& dir, std::uint64_t token)
{
    return dir + "/" + kSlotPrefix + slot_token_text(token);
}

std::size_t sweep_orphan_slots(const std::string& dir)
{
    std::error_code ec;
    std::size_t removed = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        // Only finished names: a slot being made is locked before it gets one.
        if (name.rfind(kSlotPrefix, 0) != 0 || !parse_slot_token(name.substr(10))) continue;
        const int fd = ::open(entry.path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (::unlink(entry.path().c_str()) == 0) ++removed;
        }
        ::close(fd);
    }
    return removed;
}

std::unique_ptr<SlotPool> open_slot_pool(const std::string& dir, std::size_t max_slots)
{
    if (!dir.empty()) {
        const std::size_t removed = sweep_orphan_slots(dir);
        if (removed > 0)
            logger()->info("removed {} shared-memory slot(s) of processes gone from {}", removed,
                           dir);
    }
    return std::make_unique<SlotPool>(dir, max_slots);
}

SlotPool::SlotPool(std::string dir, std::size_t max_slots)
    : dir_(std::move(dir)), max_slots_(max_slots)
{
}

SlotPool::~SlotPool() = default;

bool SlotPool::enabled() const
{
    std::lock_guard<std::mutex> lock(mutex_);
    return !dir_.empty();
}

void SlotPool::require(std::size_t bytes)
{
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t rounded = (bytes + kSlotRounding - 1) / kSlotRounding * kSlotRounding;
    required_bytes_ = std::max(required_bytes_, rounded);
}

Result<std::unique_ptr<SlotPool::Slot>> SlotPool::make_slot(std::size_t bytes) const
{
    auto slot = std::make_unique<Slot>();
    slot->token = random_token();
    // Made under a name the sweep ignores, locked, filled, then renamed into place.
    const std::string final_path = slot_path(dir_, slot->token);
    const std::string making = final_path + ".new";
    slot->fd = ::open(making.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (slot->fd < 0) return Status::io(making + ": " + errno_text());
    slot->path = making;
    if (::flock(slot->fd, LOCK_EX | LOCK_NB) != 0) {
        return Status::io(making + ": flock: " + errno_text());
    }
    // fallocate charges the pages to this process and fails here when the folder is too small.
    const int rc = ::posix_fallocate(slot->fd, 0, off_t(bytes));
    if (rc != 0) {
        return Status::io(making + ": cannot allocate " + std::to_string(bytes) +
                          " bytes: " + std::strerror(rc));
    }
    slot->data = map_shared(slot->fd, bytes);
    if (slot->data == nullptr) return Status::io(making + ": mmap: " + errno_text());
    slot->size = bytes;
    if (::rename(making.c_str(), final_path.c_str()) != 0) {
        return Status::io(final_path + ": rename: " + errno_text());
    }
    slot->path = final_path;
    return slot;
}

void SlotPool::disable(const std::string& why)
{
    logger()->warn("shared memory off: {}; frames travel over the socket", why);
    dir_.clear();
    // A lent slot may hold arrays still being decoded: it goes when it comes back.
    for (auto it = slots_.begin(); it != slots_.end();) {
        it = it->second->lent ? std::next(it) : slots_.erase(it);
    }
}

std::optional<SlotLoan> SlotPool::lend()
{
    std::lock_guard<std::mutex> lock(mutex_);
    if (dir_.empty() || required_bytes_ == 0) return std::nullopt;
    Slot* chosen = nullptr;
    for (auto& [token, slot] : slots_) {
        if (slot->lent) continue;
        if (slot->size < required_bytes_) {
            // Slots only grow: a smaller free one is replaced by one of the required size.
            const std::uint64_t smaller = token;
            slots_.erase(smaller);
            break;
        }
        chosen = slot.get();
        break;
    }
    if (chosen == nullptr) {
        if (slots_.size() >= max_slots_) return std::nullopt;
        auto made = make_slot(required_bytes_);
        if (!made.is_ok()) {
            disable(made.status().message());
            return std::nullopt;
        }
        std::unique_ptr<Slot> slot = std::move(made).value();
        chosen = slot.get();
        slots_[slot->token] = std::move(slot);
    }
    chosen->lent = true;
    chosen->lent_at = Clock::now();
    ++chosen->generation;
    return SlotLoan{chosen->token, chosen->generation, chosen->size};
}

std::optional<wire::SlotView> SlotPool::lent(std::uint64_t token, std::uint32_t generation) const
{
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = slots_.find(token);
    if (it == slots_.end() || !it->second->lent || it->second->generation != generation) {
        return std::nullopt;
    }
    return wire::SlotView{it->second->data, it->second->size};
}

void SlotPool::release(std::uint64_t token, std::uint32_t generation)
{
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = slots_.find(token);
    if (it == slots_.end() || it->second->generation != generation) return;
    if (dir_.empty()) {
        slots_.erase(it);  // shared memory was turned off while it was lent
    } else {
        it->second->lent = false;
    }
}

void SlotPool::retire(std::uint64_t token)
{
    std::lock_guard<std::mutex> lock(mutex_);
    slots_.erase(token);
}

std::size_t SlotPool::retire_lent_before(Clock::time_point deadline)
{
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t retired = 0;
    for (auto it = slots_.begin(); it != slots_.end();) {
        if (it->second->lent && it->second->lent_at < deadline) {
            it = slots_.erase(it);
            ++retired;
        } else {
            ++it;
        }
    }
    return retired;
}

std::size_t SlotPool::lent_count() const
{
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t count = 0;
    for (const auto& entry : slots_) count += entry.second->lent ? 1 : 0;
    return count;
}

wire::SlotResolver SlotPool::resolver() const
{
    return
        [this](std::uint64_t token, std::uint32_t generation) { return lent(token, generation); };
}

SlotMappings::SlotMappings(std::string dir, std::size_t max_kept)
    : dir_(std::move(dir)), max_kept_(max_kept)
{
}

SlotMappings::~SlotMappings()
{
    for (const Mapping& m : mappings_) unmap(m);
}

void SlotMappings::unmap(const Mapping& mapping)
{
    ::munmap(mapping.data, mapping.size);
    ::close(mapping.fd);
}

std::byte* SlotMappings::map(const SlotLoan& loan, std::size_t bytes)
{
    if (dir_.empty() || loan.token == 0) return nullptr;
    // A slot its owner retired or replaced is unlinked: its pages live as long as a mapping
    // does, so such mappings go at once.
    for (auto it = mappings_.begin(); it != mappings_.end();) {
        struct stat st {};
        if (it->token != loan.token && (::fstat(it->fd, &st) != 0 || st.st_nlink == 0)) {
            unmap(*it);
            it = mappings_.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = mappings_.begin(); it != mappings_.end(); ++it) {
        if (it->token != loan.token) continue;
        if (it->size < bytes) return nullptr;
        mappings_.splice(mappings_.begin(), mappings_, it);
        return it->data;
    }
    // Not here (another node or folder), or not ours to follow: no symbolic links.
    const int fd = ::open(slot_path(dir_, loan.token).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return nullptr;
    struct stat st {};
    std::byte* data = nullptr;
    std::size_t size = 0;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && std::size_t(st.st_size) >= bytes) {
        size = std::size_t(st.st_size);
        data = map_shared(fd, size);
    }
    if (data == nullptr) {
        ::close(fd);
        return nullptr;
    }
    if (mappings_.size() >= max_kept_) {
        unmap(mappings_.back());
        mappings_.pop_back();
    }
    mappings_.push_front({loan.token, fd, data, size});
    return data;
}

std::optional<std::vector<zmq::message_t>> SlotMappings::place(std::vector<zmq::message_t>& encoded,
                                                               const std::optional<SlotLoan>& slot)
{
    if (slot) {
        const std::size_t needed = wire::slot_bytes_needed(encoded);
        std::byte* memory = needed <= slot->bytes ? map(*slot, needed) : nullptr;
        if (memory != nullptr) {
            return wire::move_arrays_to_slot(encoded, memory, needed, slot->token,
                                             slot->generation);
        }
    }
    wire::set_answered_slot(encoded, slot ? slot->token : 0, slot ? slot->generation : 0);
    return std::nullopt;
}

}  // namespace ex2d::service
