// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/patch_batching.hpp"

#include <algorithm>
#include <string>

#include "ex2d/status.hpp"

namespace ex2d {

namespace {

// A chunk being grown: its patch range, spot box and windows.
struct ChunkAccumulator {
    PatchChunk chunk;
    bool empty = true;

    void add(const PatchGeometry& p, std::size_t index)
    {
        const int rows = p.row_end - p.row_begin;
        const std::size_t pixels = std::size_t(rows) * (p.col_end - p.col_begin);
        if (empty) {
            chunk = PatchChunk{
                index, index, p.fiber_begin, p.fiber_end, p.wave_begin, p.wave_begin + p.nwave,
                0,     0};
            empty = false;
        }
        chunk.last = index + 1;
        chunk.fiber_begin = std::min(chunk.fiber_begin, p.fiber_begin);
        chunk.fiber_end = std::max(chunk.fiber_end, p.fiber_end);
        chunk.wave_begin = std::min(chunk.wave_begin, p.wave_begin);
        chunk.wave_end = std::max(chunk.wave_end, p.wave_begin + p.nwave);
        chunk.window_pixels += pixels;
        chunk.max_window_rows = std::max(chunk.max_window_rows, rows);
    }
};

// Buffers are sized to the largest chunk of each kind (patches, spots, window pixels), which
// may be different chunks, so a chunk is judged by the buffers it would need with the
// chunks before it.
struct BufferSizes {
    std::size_t patches = 0, spots = 0, window_pixels = 0;

    BufferSizes with(const PatchChunk& c) const
    {
        return {std::max(patches, c.npatch()), std::max(spots, c.nspot()),
                std::max(window_pixels, c.window_pixels)};
    }
    std::size_t bytes(const PaddedLayout& layout, std::size_t per_patch) const
    {
        return patches * per_patch + spots * bytes_per_spot(layout) +
               window_pixels * kBytesPerWindowPixel;
    }
};

}  // namespace

PaddedLayout padded_layout(const std::vector<PatchGeometry>& patches, int stamp_ny, int stamp_nx)
{
    if (patches.empty()) throw Error("padded_layout: no patches");
    PaddedLayout layout;
    const PatchGeometry& first = patches.front();
    layout.nwave = first.nwave;
    layout.ncore_fiber = first.ncore_fiber();
    layout.core_wave_offset = first.core_wave_offset;
    layout.stamp_ny = stamp_ny;
    layout.stamp_nx = stamp_nx;
    for (const PatchGeometry& p : patches) {
        if (p.nwave != layout.nwave || p.ncore_fiber() != layout.ncore_fiber ||
            p.core_wave_offset != layout.core_wave_offset) {
            throw Error(
                "padded_layout: patches differ in nwave, ncore_fiber or core_wave_offset "
                "(bundle " +
                std::to_string(p.bundle) + ")");
        }
        layout.nslot = std::max(layout.nslot, p.nfiber());
        layout.ncore_wave = std::max(layout.ncore_wave, p.ncore_wave);
    }
    return layout;
}

std::size_t bytes_per_patch(const PaddedLayout& layout)
{
    const std::size_t n = layout.nunknown(), nw = layout.nwave, nc = layout.ncore_fiber;
    const std::size_t kept = nc * layout.ncore_wave;
    const std::size_t doubles = n * n                           // iCov, factored in place
                                + n * nc * nw                   // Z = L^-1 E
                                + 2 * nc * nw * nw              // C blocks / eigenvectors, Q
                                + nc * nw + nc                  // eigenvalues, Frobenius norms
                                + 4 * n                         // y, xflux, fluxweight, pixmask
                                + kept * (5 + layout.ndiag());  // kept outputs
    const std::size_t other = 128                               // patch descriptor
                              + 3 * 8            // pointer arrays for the batched calls
                              + 4 * 4 + nc * 4;  // info words and flags
    return doubles * sizeof(double) + other;
}

std::size_t bytes_per_spot(const PaddedLayout& layout)
{
    return std::size_t(layout.stamp_ny) * layout.stamp_nx * sizeof(double) + 2 * sizeof(int);
}

ChunkPlan plan_chunks(const std::vector<PatchGeometry>& patches, const PaddedLayout& layout,
                      std::size_t budget_bytes, std::size_t fixed_bytes,
                      std::size_t extra_bytes_per_patch)
{
    const std::size_t per_patch = bytes_per_patch(layout) + extra_bytes_per_patch;
    if (fixed_bytes >= budget_bytes) {
        throw Error("device memory budget of " + std::to_string(budget_bytes >> 20) +
                    " MiB is below the " + std::to_string(fixed_bytes >> 20) +
                    " MiB that the image and PSF need");
    }
    const std::size_t available = budget_bytes - fixed_bytes;
    ChunkPlan plan;
    BufferSizes sizes;
    ChunkAccumulator current;
    auto close = [&] {
        if (current.empty) return;
        plan.chunks.push_back(current.chunk);
        sizes = sizes.with(current.chunk);
        current = ChunkAccumulator{};
    };
    auto fits_with = [&](std::size_t first, std::size_t last) {
        ChunkAccumulator trial = current;
        for (std::size_t i = first; i < last; ++i) trial.add(patches[i], i);
        return trial.chunk.npatch() <= kMaxPatchesPerChunk &&
               sizes.with(trial.chunk).bytes(layout, per_patch) <= available;
    };
    std::size_t i = 0;
    while (i < patches.size()) {
        std::size_t bundle_end = i;
        while (bundle_end < patches.size() && patches[bundle_end].bundle == patches[i].bundle) {
            ++bundle_end;
        }
        if (fits_with(i, bundle_end)) {
            for (; i < bundle_end; ++i) current.add(patches[i], i);
            continue;
        }
        if (!current.empty) {
            close();
            continue;  // retry the bundle in a chunk of its own
        }
        // The bundle alone exceeds the budget: split it patch by patch.
        for (; i < bundle_end; ++i) {
            if (!current.empty && !fits_with(i, i + 1)) close();
            if (current.empty && !fits_with(i, i + 1)) {
                throw Error("device memory budget of " + std::to_string(budget_bytes >> 20) +
                            " MiB cannot hold one patch");
            }
            current.add(patches[i], i);
        }
        close();
    }
    close();
    plan.max_patches = sizes.patches;
    plan.max_spots = sizes.spots;
    plan.max_window_pixels = sizes.window_pixels;
    plan.estimated_bytes = fixed_bytes + sizes.bytes(layout, per_patch);
    return plan;
}

bool same_shape(const PaddedLayout& a, const PaddedLayout& b)
{
    return a.nslot == b.nslot && a.nwave == b.nwave && a.ncore_fiber == b.ncore_fiber &&
           a.core_wave_offset == b.core_wave_offset && a.ncore_wave == b.ncore_wave &&
           a.stamp_ny == b.stamp_ny && a.stamp_nx == b.stamp_nx;
}

std::size_t patch_slots_after(const PaddedLayout& held_layout, std::size_t held_slots,
                              const PaddedLayout& layout, const ChunkPlan& plan,
                              std::size_t budget_bytes, std::size_t extra_bytes_per_patch)
{
    if (!same_shape(held_layout, layout) || held_slots <= plan.max_patches) return plan.max_patches;
    const std::size_t per_patch = bytes_per_patch(layout) + extra_bytes_per_patch;
    const std::size_t kept_bytes =
        plan.estimated_bytes + (held_slots - plan.max_patches) * per_patch;
    return kept_bytes <= budget_bytes ? held_slots : plan.max_patches;
}

}  // namespace ex2d
