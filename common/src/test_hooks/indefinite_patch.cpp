// SPDX-License-Identifier: BSD-3-Clause
#include "indefinite_patch.hpp"

#include <mutex>
#include <optional>

namespace ex2d::test_hooks {
namespace {

// The named patch, read by the CPU backend's threads while a test thread may name the next.
struct Forced {
    std::mutex mutex;
    std::optional<PatchGeometry> patch;
};

Forced& forced()
{
    static Forced state;
    return state;
}

}  // namespace

void force_indefinite_patch(const PatchGeometry& patch)
{
    std::lock_guard<std::mutex> lock(forced().mutex);
    forced().patch = patch;
}

void clear_indefinite_patch()
{
    std::lock_guard<std::mutex> lock(forced().mutex);
    forced().patch.reset();
}

bool is_forced_indefinite(const PatchGeometry& patch)
{
    std::lock_guard<std::mutex> lock(forced().mutex);
    const std::optional<PatchGeometry>& named = forced().patch;
    return named && named->bundle == patch.bundle && named->subbundle == patch.subbundle &&
           named->wave_step == patch.wave_step;
}

}  // namespace ex2d::test_hooks
