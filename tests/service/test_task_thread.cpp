// SPDX-License-Identifier: BSD-3-Clause
// The worker's extraction and trace-shift threads: one thread for every task, in order; a
// running task is finished at destruction and one not started is dropped.
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ex2d/service/task_thread.hpp"

namespace ex2d::service {
namespace {

TEST(TaskThread, RunsEveryTaskInOrderOnOneThreadWithMoveOnlyCaptures)
{
    TaskThread<int> runner;
    std::vector<std::thread::id> ran_on(5);
    std::vector<int> order;
    std::vector<std::future<int>> results;
    for (int i = 0; i < 5; ++i) {
        auto value = std::make_unique<int>(10 * i);
        results.push_back(runner.post([&, i, value = std::move(value)] {
            ran_on[std::size_t(i)] = std::this_thread::get_id();
            order.push_back(i);
            return *value;
        }));
    }
    for (int i = 0; i < 5; ++i) EXPECT_EQ(results[std::size_t(i)].get(), 10 * i);
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
    for (const auto& id : ran_on) {
        EXPECT_EQ(id, ran_on[0]);
        EXPECT_NE(id, std::this_thread::get_id());
    }
}

TEST(TaskThread, DestructionFinishesTheRunningTaskAndDropsTheRest)
{
    std::promise<void> started;
    std::atomic<bool> release{false};
    std::future<int> running, queued;
    std::thread releaser;
    {
        TaskThread<int> runner;
        running = runner.post([&] {
            started.set_value();
            while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            return 7;
        });
        queued = runner.post([] { return 8; });
        started.get_future().wait();
        releaser = std::thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            release = true;
        });
    }
    releaser.join();
    EXPECT_EQ(running.get(), 7);
    try {
        queued.get();
        ADD_FAILURE() << "a task not started at destruction ran";
    } catch (const std::future_error& e) {
        EXPECT_EQ(e.code(), std::future_errc::broken_promise);
    }
}

}  // namespace
}  // namespace ex2d::service
