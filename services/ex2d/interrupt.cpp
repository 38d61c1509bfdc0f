// SPDX-License-Identifier: BSD-3-Clause
#include "interrupt.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <thread>

#include "ex2d/exit_codes.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/temporary_files.hpp"

namespace ex2d::tool {

namespace {

int g_pipe[2] = {-1, -1};

extern "C" void on_interrupt(int sig)
{
    const int saved_errno = errno;
    const unsigned char byte = static_cast<unsigned char>(sig);
    // Nothing to do if the pipe is full: a signal is already on its way to the thread.
    [[maybe_unused]] ssize_t n = ::write(g_pipe[1], &byte, 1);
    errno = saved_errno;
}

void watch_interrupts()
{
    unsigned char byte = 0;
    for (;;) {
        const ssize_t n = ::read(g_pipe[0], &byte, 1);
        if (n == 1) break;
        if (n < 0 && errno == EINTR) continue;
        return;
    }
    const int sig = byte;
    remove_temporary_files();
    logger()->error("ex2d: interrupted by signal {} ({}): temporary files removed, exit {}", sig,
                    sig == SIGINT ? "SIGINT" : "SIGTERM", exit_code_for_signal(sig));
    logger()->flush();
    // _exit: the other threads are mid-extraction; running static destructors under them
    // could crash or block instead of exiting.
    ::_exit(exit_code_for_signal(sig));
}

}  // namespace

void install_interrupt_cleanup()
{
    if (g_pipe[0] >= 0) return;
    if (::pipe2(g_pipe, O_CLOEXEC) != 0) {
        logger()->warn("event=interrupt_cleanup_unavailable reason=\"pipe: errno {}\"", errno);
        return;
    }
    std::thread(watch_interrupts).detach();
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

}  // namespace ex2d::tool
