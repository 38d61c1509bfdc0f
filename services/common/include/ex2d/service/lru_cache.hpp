// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file lru_cache.hpp
/// A map of at most `capacity` entries that forgets the least recently used one first: what a
/// worker keeps of the PSFs it parsed, so that the cameras of a night, which come round in turn,
/// find theirs again.

#include <cstddef>
#include <list>
#include <map>
#include <stdexcept>
#include <utility>

namespace ex2d::service {

template <class Key, class Value>
class LruCache {
public:
    explicit LruCache(std::size_t capacity) : capacity_(capacity)
    {
        if (capacity == 0) throw std::invalid_argument("LruCache: capacity must be positive");
    }

    /// The value of `key`, now the most recently used, or nullptr.
    const Value* find(const Key& key)
    {
        auto it = index_.find(key);
        if (it == index_.end()) return nullptr;
        order_.splice(order_.begin(), order_, it->second);
        return &it->second->second;
    }

    /// Inserts or replaces `key` as the most recently used; forgets the least recently used
    /// entry when the cache is full.
    void put(const Key& key, Value value)
    {
        auto it = index_.find(key);
        if (it != index_.end()) {
            it->second->second = std::move(value);
            order_.splice(order_.begin(), order_, it->second);
            return;
        }
        if (index_.size() == capacity_) {
            index_.erase(order_.back().first);
            order_.pop_back();
        }
        order_.emplace_front(key, std::move(value));
        index_.emplace(key, order_.begin());
    }

    std::size_t size() const { return index_.size(); }
    std::size_t capacity() const { return capacity_; }

private:
    using Entry = std::pair<Key, Value>;
    std::size_t capacity_;
    std::list<Entry> order_;  ///< most recently used first
    std::map<Key, typename std::list<Entry>::iterator> index_;
};

}  // namespace ex2d::service
