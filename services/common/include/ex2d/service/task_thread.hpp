// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file task_thread.hpp
/// One long-lived thread that runs the tasks given to it in turn, each result handed back
/// through a future: the worker's extraction and trace-shift threads. Unlike a thread started
/// per frame (std::async), whose future joined it only when the future itself was destroyed,
/// after the members the thread still used, a TaskThread declared after those members stops
/// first.

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

namespace ex2d::service {

template <class R>
class TaskThread {
public:
    TaskThread() : thread_([this] { run_tasks(); }) {}
    TaskThread(const TaskThread&) = delete;
    TaskThread& operator=(const TaskThread&) = delete;

    /// Finishes the task running, drops those not started (their futures report
    /// broken_promise) and joins the thread.
    ~TaskThread()
    {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_one();
        thread_.join();
    }

    /// Queues `task` (any callable returning R, move-only captures allowed).
    template <class Task>
    std::future<R> post(Task&& task)
    {
        std::packaged_task<R()> packaged(std::forward<Task>(task));
        std::future<R> result = packaged.get_future();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            tasks_.push_back(std::move(packaged));
        }
        wake_.notify_one();
        return result;
    }

private:
    void run_tasks()
    {
        for (;;) {
            std::packaged_task<R()> task;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
                if (stopping_) return;
                task = std::move(tasks_.front());
                tasks_.pop_front();
            }
            task();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::packaged_task<R()>> tasks_;
    bool stopping_ = false;
    std::thread thread_;  ///< last: started once the members it uses exist
};

}  // namespace ex2d::service
