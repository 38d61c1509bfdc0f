// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file patch_batching.hpp
/// How a batched backend (the CUDA one) lays out a frame's patches: every patch padded to the
/// same number of fibre slots so that one batched call factors them all, and the frame cut
/// into chunks of patches whose buffers fit a device-memory budget. Host-only, so the plan
/// is unit-tested in builds without nvcc.

#include <cstddef>
#include <vector>

#include "ex2d/extraction_types.hpp"

namespace ex2d {

/// Shape shared by every patch of a batch. Unknown u = w * nslot + slot; slots at or beyond
/// a patch's own fibre count are decoupled dummies (identity rows of iCov, zero data).
struct PaddedLayout {
    int nslot = 0;             ///< fibre slots per patch: the largest nfiber of the batch
    int nwave = 0;             ///< padded wavelengths per patch (equal for all patches)
    int ncore_fiber = 0;       ///< kept fibres per patch (equal for all patches)
    int core_wave_offset = 0;  ///< first kept wavelength (equal for all patches)
    int ncore_wave = 0;        ///< kept wavelengths: the largest ncore_wave of the batch
    int stamp_ny = 0;
    int stamp_nx = 0;
    int ndiag() const { return stamp_ny; }
    int nunknown() const { return nslot * nwave; }
};

/// The layout of `patches`; throws ex2d::Error if they do not share nwave, ncore_fiber and
/// core_wave_offset (plan_patches always makes them equal).
PaddedLayout padded_layout(const std::vector<PatchGeometry>& patches, int stamp_ny, int stamp_nx);

/// Device bytes that grow with the number of patches in a chunk: dense iCov and its Cholesky
/// factor, Z = L^-1 E for the kept fibres, the covariance blocks and their inverse square
/// roots, the per-unknown vectors and the kept outputs. Pixel windows and spots are counted
/// per chunk by plan_chunks.
std::size_t bytes_per_patch(const PaddedLayout& layout);

/// Patches [first, last) of the batch, processed together, with the bounding box of the
/// spots they need on the padded grid.
struct PatchChunk {
    std::size_t first = 0;
    std::size_t last = 0;
    int fiber_begin = 0;
    int fiber_end = 0;
    int wave_begin = 0;
    int wave_end = 0;
    std::size_t window_pixels = 0;  ///< sum of the patches' pixel windows
    int max_window_rows = 0;
    std::size_t npatch() const { return last - first; }
    std::size_t nspot() const
    {
        return std::size_t(fiber_end - fiber_begin) * (wave_end - wave_begin);
    }
};

/// A frame cut into chunks, and the largest of each buffer over the chunks, so that a
/// backend allocates once per frame shape and never grows between frames of that shape.
struct ChunkPlan {
    std::vector<PatchChunk> chunks;
    std::size_t max_patches = 0;
    std::size_t max_spots = 0;
    std::size_t max_window_pixels = 0;
    std::size_t estimated_bytes = 0;  ///< fixed bytes + buffers sized to the maxima above
};

/// Device bytes of one spot: the stamp in float64 and its two corner ints.
std::size_t bytes_per_spot(const PaddedLayout& layout);
/// Device bytes of one window pixel: model chi2 and its weight.
constexpr std::size_t kBytesPerWindowPixel = 2 * sizeof(double);

/// Most patches in one chunk: batched library calls count their batch in int, and the
/// batched eigen-solver needs nwave^2 x blocks below 2^31.
constexpr std::size_t kMaxPatchesPerChunk = 32768;

/// Cuts `patches` (in plan_patches order) into chunks that fit `budget_bytes` after
/// `fixed_bytes` (image, PSF tables, solver handles) are taken, where each patch also costs
/// `extra_bytes_per_patch` (e.g. eigen-solver workspace). Whole bundles stay together when
/// they fit, so a bundle's spots are evaluated once; a bundle too large for the budget is
/// split. No chunk exceeds kMaxPatchesPerChunk. Throws ex2d::Error if not even one patch fits.
ChunkPlan plan_chunks(const std::vector<PatchGeometry>& patches, const PaddedLayout& layout,
                      std::size_t budget_bytes, std::size_t fixed_bytes,
                      std::size_t extra_bytes_per_patch);

/// True when two layouts have the same per-patch shape (and so the same buffer sizes).
bool same_shape(const PaddedLayout& a, const PaddedLayout& b);

/// Patch slots a backend's buffers should hold for `plan` (made for `layout` with
/// `budget_bytes` and `extra_bytes_per_patch`), given that they hold `held_slots` slots of
/// `held_layout`. Within one layout a larger holding is kept while it still fits the budget
/// beside this plan, so frames do not re-allocate; otherwise, and whenever the layout changes,
/// the buffers are re-sized to this plan. Slots planned for small patches thus never
/// multiply the bytes of larger ones.
std::size_t patch_slots_after(const PaddedLayout& held_layout, std::size_t held_slots,
                              const PaddedLayout& layout, const ChunkPlan& plan,
                              std::size_t budget_bytes, std::size_t extra_bytes_per_patch);

}  // namespace ex2d
