// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file buffer_pool.hpp
/// Frame-sized buffers that come back once ZeroMQ has sent them. A reader that allocated two
/// 68 MB planes per frame spent half its time having the kernel zero fresh pages; buffers
/// taken from the pool are memory already touched.

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "ex2d/scratch_allocator.hpp"

namespace ex2d::service {

template <typename T>
class BufferPool {
public:
    /// Keeps at most `max_kept` idle buffers; more than that are freed when they come back.
    explicit BufferPool(std::size_t max_kept) : state_(std::make_shared<State>(max_kept)) {}

    /// A buffer (its size is whatever it last held), returned to the pool when the last
    /// owner drops it, from any thread (ZeroMQ releases sent parts on its I/O thread).
    std::shared_ptr<LargeArray<T>> take()
    {
        std::unique_ptr<LargeArray<T>> buffer;
        {
            std::lock_guard<std::mutex> lock(state_->mutex);
            if (!state_->idle.empty()) {
                buffer = std::move(state_->idle.back());
                state_->idle.pop_back();
            }
        }
        if (!buffer) buffer = std::make_unique<LargeArray<T>>();
        // The deleter holds the state, not the pool: buffers still in flight when the pool is
        // destroyed are then simply freed.
        std::weak_ptr<State> home = state_;
        return std::shared_ptr<LargeArray<T>>(buffer.release(), [home](LargeArray<T>* returned) {
            std::unique_ptr<LargeArray<T>> owned(returned);
            if (auto state = home.lock()) {
                std::lock_guard<std::mutex> lock(state->mutex);
                if (state->idle.size() < state->max_kept) state->idle.push_back(std::move(owned));
            }
        });
    }

private:
    struct State {
        explicit State(std::size_t kept) : max_kept(kept) {}
        std::mutex mutex;
        std::vector<std::unique_ptr<LargeArray<T>>> idle;
        std::size_t max_kept;
    };
    std::shared_ptr<State> state_;
};

}  // namespace ex2d::service
