// SPDX-License-Identifier: BSD-3-Clause
// The stand-in backend (test and benchmark builds only): it cuts the arrays of a frame file
// written by `ex2d extract` into the patch results the driver asks for and hands them back
// after a fixed delay spent asleep. The driver then stitches, converts and masks them as it
// does a GPU's results, so a fleet without a GPU moves real frames at a GPU's pace and the
// CPU its processes use is what they would use beside one.
#include "standin_backend.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "ex2d/extraction.hpp"
#include "ex2d/frame_io.hpp"

namespace ex2d {

namespace {

// FIBER = 500 x petal + fibre index in the petal (DESI); the PSF's fibre indices are the latter.
constexpr long long kFibersPerPetal = 500;
constexpr double kWaveTolerance = 1e-6;  // Angstrom; grids are numpy.arange of the same numbers

struct BatchShape {
    int specmin = 0;
    int nspec = 0;
    int wave_offset = 0;  ///< padded-grid index of the first kept wavelength
    int nwave = 0;
};

BatchShape shape_of(const PatchBatch& batch)
{
    int fmin = batch.patches.front().core_fiber_begin, fmax = fmin;
    int wmin = batch.patches.front().wave_begin + batch.patches.front().core_wave_offset,
        wmax = wmin;
    for (const PatchGeometry& p : batch.patches) {
        fmin = std::min(fmin, p.core_fiber_begin);
        fmax = std::max(fmax, p.core_fiber_end);
        wmin = std::min(wmin, p.wave_begin + p.core_wave_offset);
        wmax = std::max(wmax, p.wave_begin + p.core_wave_offset + p.ncore_wave);
    }
    return {fmin, fmax - fmin, wmin, wmax - wmin};
}

std::string describe(int specmin, int nspec, int nwave, double first, double last)
{
    return "fibres " + std::to_string(specmin) + "-" + std::to_string(specmin + nspec - 1) +
           " on " + std::to_string(nwave) + " wavelengths " + std::to_string(first) + "-" +
           std::to_string(last) + " A";
}

class StandinBackend final : public ExtractionBackend {
public:
    StandinBackend(std::string path, FrameFile file, int specmin, double delay_s,
                   int device_failure_at_batch)
        : path_(std::move(path)),
          frame_(std::move(file)),
          specmin_(specmin),
          delay_s_(delay_s),
          device_failure_at_batch_(device_failure_at_batch)
    {
        // The file holds flux and ivar per Angstrom and only the mask bits; patch results are
        // per wavelength bin and carry the masked fraction the driver turns back into bits.
        const std::vector<double> dwave = grid_gradient(frame_.wave);
        const std::size_t n = frame_.flux.size();
        pixmask_fraction_.assign(n, 0.0);
        if (frame_.chi2pix.empty()) frame_.chi2pix.assign(n, 0.0);
        for (std::size_t k = 0; k < n; ++k) {
            const double dw = dwave[k % std::size_t(frame_.nwave)];
            frame_.flux[k] *= dw;
            frame_.ivar[k] /= dw * dw;
            if (frame_.mask[k] & specmask::allbadpix) {
                pixmask_fraction_[k] = 1.0;
            } else if (frame_.mask[k] & specmask::somebadpix) {
                pixmask_fraction_[k] = 0.75;
            }
        }
    }

    std::string name() const override { return "standin"; }

    Status check_batch(const PatchBatch& batch) const override
    {
        if (batch.patches.empty() || !batch.padded_wave || !batch.psf) {
            return Status::invalid("stand-in frame " + path_ + ": the batch has no patches");
        }
        const BatchShape s = shape_of(batch);
        const std::vector<double>& padded = *batch.padded_wave;
        const std::string held =
            describe(specmin_, frame_.nspec, frame_.nwave, frame_.wave.front(), frame_.wave.back());
        const std::string asked = describe(s.specmin, s.nspec, s.nwave, padded[s.wave_offset],
                                           padded[s.wave_offset + s.nwave - 1]);
        bool same = s.specmin == specmin_ && s.nspec == frame_.nspec && s.nwave == frame_.nwave;
        for (int j = 0; same && j < s.nwave; ++j) {
            same = std::abs(padded[s.wave_offset + j] - frame_.wave[j]) <= kWaveTolerance;
        }
        if (!same) {
            return Status::invalid("stand-in frame " + path_ + " holds " + held +
                                   " but the job asks for " + asked);
        }
        if (batch.psf->stamp_ny() != frame_.ndiag) {
            return Status::invalid("stand-in frame " + path_ + " has " +
                                   std::to_string(frame_.ndiag) + " resolution diagonals but PSF " +
                                   batch.psf->source + " gives " +
                                   std::to_string(batch.psf->stamp_ny()));
        }
        return Status::ok();
    }

    void extract(const PatchBatch& batch, std::vector<PatchResult>& results, StageTimes& /*times*/,
                 const ProgressCallback& progress) override
    {
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(delay_s_));
        if (++batches_ == device_failure_at_batch_) {
            // Half-way through, as a device error surfaces at the next checked call.
            std::this_thread::sleep_for(std::chrono::duration<double>(delay_s_ / 2));
            throw DeviceFailure("stand-in backend: device failure injected at batch " +
                                std::to_string(batches_) +
                                " (worker.standin_device_failure_at_batch), as an Xid or an "
                                "uncorrectable ECC error would end a CUDA call");
        }
        results.assign(batch.patches.size(), PatchResult{});
        const Status fits = check_batch(batch);
        const int wave_offset = fits.is_ok() ? shape_of(batch).wave_offset : 0;
        for (std::size_t i = 0; i < batch.patches.size(); ++i) {
            const PatchGeometry& p = batch.patches[i];
            PatchResult& r = results[i];
            r.zero_for(p, frame_.ndiag);
            if (!fits.is_ok()) {
                r.status = PatchStatus::failed;
                r.failure = fits.message();
                continue;
            }
            copy_block(p, p.wave_begin + p.core_wave_offset - wave_offset, r);
        }
        if (progress) progress(long(results.size()), long(results.size()));
        std::this_thread::sleep_until(deadline);
    }

private:
    void copy_block(const PatchGeometry& p, int first_wave, PatchResult& r) const
    {
        const std::size_t nw = std::size_t(frame_.nwave), nd = std::size_t(frame_.ndiag);
        const std::size_t ncw = std::size_t(p.ncore_wave);
        for (int cf = 0; cf < p.ncore_fiber(); ++cf) {
            const std::size_t spec = std::size_t(p.core_fiber_begin + cf - specmin_);
            for (std::size_t jj = 0; jj < ncw; ++jj) {
                const std::size_t in = spec * nw + std::size_t(first_wave) + jj;
                const std::size_t out = std::size_t(cf) * ncw + jj;
                r.flux[out] = frame_.flux[in];
                r.ivar[out] = frame_.ivar[in];
                // The file has no deconvolved flux; R f stands in for it.
                r.xflux[out] = frame_.flux[in];
                r.chi2pix[out] = frame_.chi2pix[in];
                r.pixmask_fraction[out] = pixmask_fraction_[in];
                for (std::size_t d = 0; d < nd; ++d) {
                    r.resolution[(std::size_t(cf) * nd + d) * ncw + jj] =
                        frame_.resolution[(spec * nd + d) * nw + std::size_t(first_wave) + jj];
                }
            }
        }
    }

    std::string path_;
    FrameFile frame_;  ///< flux and ivar per wavelength bin after the constructor
    std::vector<double> pixmask_fraction_;
    int specmin_ = 0;
    double delay_s_ = 0.0;
    int device_failure_at_batch_ = 0;
    std::atomic<int> batches_{0};  ///< extract calls so far
};

}  // namespace

Result<std::unique_ptr<ExtractionBackend>> make_standin_backend(
    const StandinBackendOptions& options)
{
    if (options.frame_path.empty()) {
        return Status::invalid(
            "backend standin needs a frame file written by `ex2d extract` "
            "(worker.standin_frame)");
    }
    if (options.device_failure_at_batch < 0) {
        return Status::invalid("stand-in device failure at batch " +
                               std::to_string(options.device_failure_at_batch) +
                               " is negative (0 = never)");
    }
    if (!(options.delay_s >= 0.0)) {
        return Status::invalid("stand-in delay " + std::to_string(options.delay_s) +
                               " s is negative");
    }
    auto file = read_frame(options.frame_path);
    if (!file.is_ok()) return file.status();
    FrameFile frame = std::move(file).value();
    if (frame.fiber.size() != std::size_t(frame.nspec) || frame.nspec == 0 || frame.nwave == 0) {
        return Status::format("stand-in frame " + options.frame_path +
                              ": no FIBERMAP FIBER column with one row per spectrum");
    }
    const int specmin = int(frame.fiber.front() % kFibersPerPetal);
    return std::unique_ptr<ExtractionBackend>(
        new StandinBackend(options.frame_path, std::move(frame), specmin, options.delay_s,
                           options.device_failure_at_batch));
}

}  // namespace ex2d
