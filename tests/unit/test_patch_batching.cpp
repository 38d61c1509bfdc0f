// SPDX-License-Identifier: BSD-3-Clause
// The batched backends' layout and chunk plan: padded shape of DESI's production patches,
// device bytes per patch, and chunks that cover the frame in order within the budget.
#include <gtest/gtest.h>

#include "ex2d/extraction.hpp"
#include "ex2d/patch_batching.hpp"
#include "ex2d/synthetic_psf.hpp"

namespace ex2d {
namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

std::vector<PatchGeometry> full_r_frame_patches(const GaussHermitePsf& psf)
{
    ExtractionOptions opt;
    opt.wmin = 5760.0;
    opt.wmax = 7620.0;
    opt.dw = 0.8;
    return plan_patches(psf, opt, make_wave_grids(psf, opt), psf.npix_y, psf.npix_x);
}

class PatchBatching : public ::testing::Test {
protected:
    GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    std::vector<PatchGeometry> patches = full_r_frame_patches(psf);
    PaddedLayout layout = padded_layout(patches, psf.stamp_ny(), psf.stamp_nx());
};

TEST_F(PatchBatching, ProductionPatchesPadToSevenSlotsOfSeventyFourWavelengths)
{
    ASSERT_EQ(patches.size(), 4700u);
    EXPECT_EQ(layout.nslot, 7);   // 5 kept fibres and a neighbour on each side
    EXPECT_EQ(layout.nwave, 74);  // 50 + 2 x 12 padding
    EXPECT_EQ(layout.ncore_fiber, 5);
    EXPECT_EQ(layout.core_wave_offset, 12);
    EXPECT_EQ(layout.ncore_wave, 50);
    EXPECT_EQ(layout.ndiag(), 11);
    EXPECT_EQ(layout.nunknown(), 518);
}

TEST_F(PatchBatching, BytesPerPatchCountsEveryDenseBuffer)
{
    // 518^2 iCov + 518 x 370 Z + 2 x 5 x 74^2 blocks + 5 x 74 + 5 eigenvalues and norms
    // + 4 x 518 vectors + 250 kept bins x 16 outputs, in doubles, plus 188 bytes of
    // descriptors, pointers and info words.
    EXPECT_EQ(bytes_per_patch(layout), 4169716u);
    EXPECT_EQ(bytes_per_spot(layout), 11u * 17u * 8u + 8u);
}

TEST_F(PatchBatching, ChunksCoverTheFrameInOrderWithinTheBudget)
{
    const std::size_t budget = 3072 * kMiB, fixed = 200 * kMiB, extra = 50000;
    const ChunkPlan plan = plan_chunks(patches, layout, budget, fixed, extra);
    ASSERT_FALSE(plan.chunks.empty());
    EXPECT_LE(plan.estimated_bytes, budget);
    std::size_t next = 0;
    for (const PatchChunk& c : plan.chunks) {
        EXPECT_EQ(c.first, next);
        EXPECT_GT(c.last, c.first);
        next = c.last;
        // whole bundles: 235 patches each when they fit
        EXPECT_EQ(c.first % 235, 0u);
        EXPECT_TRUE(c.last % 235 == 0 || c.last == patches.size());
        for (std::size_t i = c.first; i < c.last; ++i) {
            const PatchGeometry& p = patches[i];
            EXPECT_GE(p.fiber_begin, c.fiber_begin);
            EXPECT_LE(p.fiber_end, c.fiber_end);
            EXPECT_GE(p.wave_begin, c.wave_begin);
            EXPECT_LE(p.wave_begin + p.nwave, c.wave_end);
        }
    }
    EXPECT_EQ(next, patches.size());
    // ~4 MiB per patch: two bundles fit in 3 GiB with the spots and windows, three do not
    EXPECT_EQ(plan.max_patches, 470u);
    EXPECT_EQ(plan.chunks.size(), 10u);
}

TEST_F(PatchBatching, BundleLargerThanTheBudgetIsSplit)
{
    const std::size_t budget = 600 * kMiB, fixed = 100 * kMiB;
    const ChunkPlan plan = plan_chunks(patches, layout, budget, fixed, 0);
    EXPECT_LE(plan.estimated_bytes, budget);
    EXPECT_LT(plan.max_patches, 235u);
    EXPECT_GT(plan.max_patches, 50u);
    std::size_t next = 0;
    for (const PatchChunk& c : plan.chunks) {
        EXPECT_EQ(c.first, next);
        next = c.last;
        // a split bundle never shares a chunk with another bundle
        EXPECT_EQ(patches[c.first].bundle, patches[c.last - 1].bundle);
    }
    EXPECT_EQ(next, patches.size());
}

TEST_F(PatchBatching, BudgetsThatCannotHoldTheFrameThrow)
{
    EXPECT_THROW(plan_chunks(patches, layout, 100 * kMiB, 100 * kMiB, 0), Error);
    EXPECT_THROW(plan_chunks(patches, layout, 102 * kMiB, 100 * kMiB, 0), Error);
}

TEST_F(PatchBatching, PatchesOfDifferentShapesAreRejected)
{
    std::vector<PatchGeometry> mixed = {patches[0], patches[1]};
    mixed[1].nwave += 1;
    EXPECT_THROW(padded_layout(mixed, 11, 17), Error);
    EXPECT_THROW(padded_layout({}, 11, 17), Error);
}

// A worker's buffers over a sequence of frames (CUDA issue part A item 1): a frame cut with
// --nwavestep 30 plans many small patches; the default frame after it must not keep that many
// slots at its larger per-patch size.
TEST_F(PatchBatching, SlotsFollowTheLayoutAcrossFramesOfDifferentShapes)
{
    const std::size_t budget = 3072 * kMiB, fixed = 200 * kMiB, extra = 50000;
    ExtractionOptions narrow;
    narrow.wmin = 5760.0;
    narrow.wmax = 7620.0;
    narrow.dw = 0.8;
    narrow.nwavestep = 30;
    const std::vector<PatchGeometry> narrow_patches =
        plan_patches(psf, narrow, make_wave_grids(psf, narrow), psf.npix_y, psf.npix_x);
    const PaddedLayout narrow_layout =
        padded_layout(narrow_patches, psf.stamp_ny(), psf.stamp_nx());
    ASSERT_FALSE(same_shape(narrow_layout, layout));
    const ChunkPlan narrow_plan = plan_chunks(narrow_patches, narrow_layout, budget, fixed, extra);
    const ChunkPlan default_plan = plan_chunks(patches, layout, budget, fixed, extra);
    ASSERT_GT(narrow_plan.max_patches, default_plan.max_patches);

    // First frame: nothing held yet.
    const std::size_t held =
        patch_slots_after(PaddedLayout{}, 0, narrow_layout, narrow_plan, budget, extra);
    EXPECT_EQ(held, narrow_plan.max_patches);
    // Second frame, default layout: its own plan, within the budget.
    const std::size_t next =
        patch_slots_after(narrow_layout, held, layout, default_plan, budget, extra);
    EXPECT_EQ(next, default_plan.max_patches);
    const std::size_t per_patch = bytes_per_patch(layout) + extra;
    EXPECT_LE(default_plan.estimated_bytes + (next - default_plan.max_patches) * per_patch, budget);
    // Keeping the earlier frame's slot count would have broken the budget.
    EXPECT_GT(fixed + held * per_patch, budget)
        << "the sequence no longer reproduces the defect this guards against";

    // Same layout again with a smaller plan (e.g. a model image takes part of the budget): the
    // holding is kept only while it still fits beside the new plan.
    const ChunkPlan tighter = plan_chunks(patches, layout, budget, fixed + 1024 * kMiB, extra);
    ASSERT_LT(tighter.max_patches, default_plan.max_patches);
    const std::size_t after = patch_slots_after(layout, next, layout, tighter, budget, extra);
    EXPECT_EQ(after, tighter.max_patches);
    EXPECT_LE(tighter.estimated_bytes, budget);
    const ChunkPlan roomy = plan_chunks(patches, layout, budget, fixed, extra);
    EXPECT_EQ(patch_slots_after(layout, next, layout, roomy, budget, extra), next)
        << "an unchanged frame keeps its buffers";
}

}  // namespace
}  // namespace ex2d
