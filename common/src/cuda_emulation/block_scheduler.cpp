// SPDX-License-Identifier: BSD-3-Clause
#include "block_scheduler.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "context_switch.hpp"
#include "ex2d_emulation/device_builtins.hpp"
#include "sanitizer_hooks.hpp"

namespace ex2d::emulation {

namespace {

// Sanitizers' frames are several times larger than plain ones.
constexpr std::size_t kStackBytes = std::size_t(256) << 10;
constexpr std::size_t kGuardBytes = std::size_t(4) << 10;
// Blocks a host thread takes at once from a launch: few enough to balance, enough that the
// shared counter is not contended.
constexpr long long kBlocksPerTake = 8;

std::vector<void* (*)()>& dynamic_shared_arrays()
{
    static std::vector<void* (*)()> arrays;
    return arrays;
}

enum class ThreadState { not_started, runnable, at_barrier, finished };

class BlockRunner;

// One CUDA thread of the block being run: its stack (with a guard page below it), its saved
// stack pointer while it is not running, and the sanitizers' views of it.
struct CudaThread {
    BlockRunner* runner = nullptr;
    ThreadIndices indices{};
    // Written by the thread's context and read by the scheduler, which ThreadSanitizer sees as
    // two threads with no ordering between them (only the barrier orders): an atomic, relaxed.
    std::atomic<ThreadState> state{ThreadState::finished};
    void* sp = nullptr;
    void* mapping = nullptr;
    void* tsan_fiber = nullptr;
    void* asan_fake_stack = nullptr;

    explicit CudaThread(BlockRunner* owner) : runner(owner)
    {
        mapping = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mapping == MAP_FAILED) throw std::bad_alloc();
        mprotect(mapping, kGuardBytes, PROT_NONE);
        tsan_fiber = sanitizer::create_fiber();
    }
    ~CudaThread()
    {
        if (tsan_fiber) sanitizer::destroy_fiber(tsan_fiber);
        munmap(mapping, kGuardBytes + kStackBytes);
    }
    CudaThread(const CudaThread&) = delete;
    CudaThread& operator=(const CudaThread&) = delete;
    char* stack_bottom() const { return static_cast<char*>(mapping) + kGuardBytes; }
    void* stack_top() const { return stack_bottom() + kStackBytes; }
};

// Runs blocks on the host thread that owns it, one at a time.
class BlockRunner {
public:
    BlockRunner() : scheduler_tsan_fiber_(sanitizer::current_fiber()) {}

    bool run_block(dim3 grid, dim3 block, uint3 block_idx, ThreadBody body, const void* launch)
    {
        const unsigned nthread = block.x * block.y * block.z;
        while (threads_.size() < nthread) threads_.push_back(std::make_unique<CudaThread>(this));
        body_ = body;
        launch_ = launch;
        const bool one_dimensional = block.y == 1 && block.z == 1;
        for (unsigned i = 0; i < nthread; ++i) {
            CudaThread& t = *threads_[i];
            t.indices.thread_idx = one_dimensional ? uint3{i, 0, 0}
                                                   : uint3{i % block.x, (i / block.x) % block.y,
                                                           i / (block.x * block.y)};
            t.indices.block_idx = block_idx;
            t.indices.block_dim = block;
            t.indices.grid_dim = grid;
            t.state.store(ThreadState::not_started, std::memory_order_relaxed);
        }
        sanitizer::release(&block_start_);
        bool agreed = true;
#if !defined(EX2D_EMULATION_TSAN)
        // Where thread 0 leaves the kernel without reaching a barrier, no thread may reach one
        // (a barrier must be reached by all threads or none), so the others run as plain
        // calls on this stack: most blocks of most kernels, at no cost of switching. Under
        // ThreadSanitizer every thread keeps its context, so that it sees each as a thread.
        switch_to(*threads_[0]);
        if (threads_[0]->state.load(std::memory_order_relaxed) == ThreadState::finished) {
            barrier_outside_context_ = false;
            for (unsigned i = 1; i < nthread; ++i) run_in_place(*threads_[i]);
            return !barrier_outside_context_;
        }
#endif
        for (;;) {
            unsigned finished = 0;
            for (unsigned i = 0; i < nthread; ++i) {
                CudaThread& t = *threads_[i];
                const ThreadState state = t.state.load(std::memory_order_relaxed);
                if (state == ThreadState::not_started || state == ThreadState::runnable)
                    switch_to(t);
                finished += t.state.load(std::memory_order_relaxed) == ThreadState::finished;
            }
            if (finished == nthread) break;
            if (finished > 0) {
                // Some threads left the kernel while others wait at a barrier: undefined on
                // a device; the waiting threads are abandoned and the launch fails.
                agreed = false;
                break;
            }
            for (unsigned i = 0; i < nthread; ++i)
                threads_[i]->state.store(ThreadState::runnable, std::memory_order_relaxed);
        }
        // Everything the block's threads did comes before the next block's set-up; threads
        // abandoned at a barrier last released the barrier's token.
        sanitizer::acquire(&block_end_);
        sanitizer::acquire(&barrier_);
        return agreed;
    }

    void barrier()
    {
        CudaThread* const running = running_.load(std::memory_order_relaxed);
        if (running == nullptr) {
            // A thread run in place reached a barrier that thread 0 did not.
            barrier_outside_context_ = true;
            return;
        }
        CudaThread& t = *running;
        t.state.store(ThreadState::at_barrier, std::memory_order_relaxed);
        sanitizer::release(&barrier_);
        switch_to_scheduler(t, false);
        // Each context sets its own indices when it starts and when it resumes.
        set_thread_indices(&t.indices);
        sanitizer::acquire(&barrier_);
    }

    static BlockRunner& on_this_thread()
    {
        static thread_local BlockRunner runner;
        return runner;
    }

private:
    static void thread_entry(void* argument)
    {
        CudaThread& t = *static_cast<CudaThread*>(argument);
        BlockRunner& r = *t.runner;
        sanitizer::finish_switch(nullptr, &r.scheduler_stack_bottom_, &r.scheduler_stack_size_);
        sanitizer::acquire(&r.block_start_);
        set_thread_indices(&t.indices);
        r.body_(r.launch_);
        t.state.store(ThreadState::finished, std::memory_order_relaxed);
        sanitizer::release(&r.block_end_);
        r.switch_to_scheduler(t, true);
    }

    void run_in_place(CudaThread& t)
    {
        set_thread_indices(&t.indices);
        body_(launch_);
        t.state.store(ThreadState::finished, std::memory_order_relaxed);
        set_thread_indices(nullptr);
    }

    void switch_to(CudaThread& t)
    {
        // A context is made only for a thread that runs in one.
        if (t.state.load(std::memory_order_relaxed) == ThreadState::not_started)
            t.sp = prepare_context(t.stack_top(), &BlockRunner::thread_entry, &t);
        running_.store(&t, std::memory_order_relaxed);
        // Read before ThreadSanitizer is told of the switch: after it, an access counts as the
        // CUDA thread's.
        void* const target = t.sp;
        sanitizer::start_switch(&scheduler_fake_stack_, t.stack_bottom(), kStackBytes);
        sanitizer::switch_to_fiber(t.tsan_fiber);
        ex2d_emulation_switch_context(&scheduler_sp_, target);
        sanitizer::finish_switch(scheduler_fake_stack_, nullptr, nullptr);
        running_.store(nullptr, std::memory_order_relaxed);
    }

    void switch_to_scheduler(CudaThread& t, bool finished)
    {
        sanitizer::start_switch(finished ? nullptr : &t.asan_fake_stack, scheduler_stack_bottom_,
                                scheduler_stack_size_);
        sanitizer::switch_to_fiber(scheduler_tsan_fiber_);
        ex2d_emulation_switch_context(&t.sp, scheduler_sp_);
        sanitizer::finish_switch(t.asan_fake_stack, &scheduler_stack_bottom_,
                                 &scheduler_stack_size_);
    }

    std::vector<std::unique_ptr<CudaThread>> threads_;
    std::atomic<CudaThread*> running_{nullptr};
    bool barrier_outside_context_ = false;
    ThreadBody body_ = nullptr;
    const void* launch_ = nullptr;
    void* scheduler_sp_ = nullptr;
    void* scheduler_tsan_fiber_ = nullptr;
    void* scheduler_fake_stack_ = nullptr;
    const void* scheduler_stack_bottom_ = nullptr;
    std::size_t scheduler_stack_size_ = 0;
    // Addresses that ThreadSanitizer orders the block's threads by.
    char block_start_ = 0, block_end_ = 0, barrier_ = 0;
};

struct Grid {
    dim3 grid, block;
    std::size_t dynamic_shared_bytes;
    ThreadBody body;
    const void* launch;
    long long nblock;
    std::atomic<long long> next{0};
    std::atomic<bool> agreed{true};
};

// Runs blocks of `g` on the calling host thread until none is left.
void take_blocks(Grid& g)
{
    // The dynamic shared arrays hold kMaxDynamicSharedBytes; what the launch did not ask for
    // is out of bounds for its blocks.
    for (void* (*address)() : dynamic_shared_arrays()) {
        sanitizer::poison(static_cast<char*>(address()) + g.dynamic_shared_bytes,
                          kMaxDynamicSharedBytes - g.dynamic_shared_bytes);
    }
    BlockRunner& runner = BlockRunner::on_this_thread();
    const long long gx = g.grid.x, gy = g.grid.y;
    for (;;) {
        const long long first = g.next.fetch_add(kBlocksPerTake, std::memory_order_relaxed);
        if (first >= g.nblock) break;
        for (long long b = first; b < std::min(first + kBlocksPerTake, g.nblock); ++b) {
            const uint3 idx{unsigned(b % gx), unsigned((b / gx) % gy), unsigned(b / (gx * gy))};
            if (!runner.run_block(g.grid, g.block, idx, g.body, g.launch)) g.agreed = false;
        }
    }
    for (void* (*address)() : dynamic_shared_arrays())
        sanitizer::unpoison(address(), kMaxDynamicSharedBytes);
}

// The host threads besides the launching one; the launching thread takes blocks too.
class WorkerPool {
public:
    static WorkerPool& instance()
    {
        static WorkerPool pool;
        return pool;
    }

    bool run(Grid& g)
    {
        std::unique_lock<std::mutex> lock(mutex_);
        if (workers_.empty() || g.nblock <= kBlocksPerTake) {
            lock.unlock();
            take_blocks(g);
            return g.agreed;
        }
        grid_ = &g;
        busy_ = workers_.size();
        ++generation_;
        wake_.notify_all();
        lock.unlock();
        take_blocks(g);
        lock.lock();
        done_.wait(lock, [&] { return busy_ == 0; });
        grid_ = nullptr;
        return g.agreed;
    }

    ~WorkerPool()
    {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
            wake_.notify_all();
        }
        for (std::thread& t : workers_) t.join();
    }

private:
    WorkerPool()
    {
        unsigned n = std::max(1u, std::thread::hardware_concurrency());
        if (const char* env = std::getenv("EX2D_EMULATION_THREADS"))
            n = std::max(1, std::atoi(env));
        for (unsigned i = 1; i < n; ++i) workers_.emplace_back([this] { work(); });
    }

    void work()
    {
        unsigned long long seen = 0;
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) return;
            seen = generation_;
            Grid& g = *grid_;
            lock.unlock();
            take_blocks(g);
            lock.lock();
            if (--busy_ == 0) done_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_, done_;
    std::vector<std::thread> workers_;
    Grid* grid_ = nullptr;
    std::size_t busy_ = 0;
    unsigned long long generation_ = 0;
    bool stopping_ = false;
};

}  // namespace

DynamicSharedArray::DynamicSharedArray(void* (*address_on_this_thread)())
{
    dynamic_shared_arrays().push_back(address_on_this_thread);
}

void sync_block_threads()
{
    BlockRunner::on_this_thread().barrier();
}

cudaError_t run_grid(dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, ThreadBody body,
                     const void* launch)
{
    Grid g{grid, block, dynamic_shared_bytes, body, launch, (long long)grid.x * grid.y * grid.z};
    return WorkerPool::instance().run(g) ? cudaSuccess : cudaErrorLaunchFailure;
}

}  // namespace ex2d::emulation
