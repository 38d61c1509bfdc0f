// SPDX-License-Identifier: BSD-3-Clause
#include "device_frame.hpp"

#include "ex2d/float32_transfer.hpp"

#include <algorithm>
#include <string>

#include "cuda_check.hpp"
#include "ex2d/status.hpp"

namespace ex2d::cuda {

namespace {

// PSF rows in the device order: X, Y, GHSIGX, GHSIGY, then GH-i-j row-major in (i, j).
std::vector<const LegendreTable*> device_rows(const GaussHermitePsf& psf)
{
    std::vector<const LegendreTable*> rows = {&psf.xtrace, &psf.ytrace, &psf.param("GHSIGX"),
                                              &psf.param("GHSIGY")};
    for (int i = 0; i <= psf.ghdegx; ++i) {
        for (int j = 0; j <= psf.ghdegy; ++j) {
            rows.push_back(&psf.param("GH-" + std::to_string(i) + "-" + std::to_string(j)));
        }
    }
    return rows;
}

int max_ncoef(const std::vector<const LegendreTable*>& rows)
{
    int m = 0;
    for (const LegendreTable* t : rows) m = std::max(m, t->ncoef);
    return m;
}

}  // namespace

DeviceFrame::DeviceFrame(const CudaResources& resources, MemoryLedger& ledger)
    : res_(resources), ledger_(ledger)
{
}

std::size_t DeviceFrame::bytes_needed(const ImageView& image, const GaussHermitePsf& psf,
                                      std::size_t npadded_wave)
{
    const auto rows = device_rows(psf);
    const std::size_t table = rows.size() * (std::size_t(psf.nspec()) * max_ncoef(rows) + 2);
    return 2 * std::size_t(image.ny) * image.nx * sizeof(float) + table * sizeof(double) +
           rows.size() * sizeof(int) + npadded_wave * sizeof(double);
}

void DeviceFrame::upload(const ImageView& image, const GaussHermitePsf& psf,
                         const std::vector<double>& padded_wave)
{
    cudaStream_t stream = res_.stream();
    // The previous frame's copies must be done before the pinned buffers are refilled.
    EX2D_CUDA_CHECK(cudaStreamSynchronize(stream));
    ny_ = image.ny;
    nx_ = image.nx;
    const std::size_t npix = std::size_t(ny_) * nx_;
    host_image_.reserve(2 * npix);
    image_.reserve(2 * npix, ledger_);
    for (std::size_t i = 0; i < npix; ++i) {
        const float weight = weight_as_float32(image.weights[i], image.pixels[i]);
        host_image_[npix + i] = weight;
        host_image_[i] = pixel_as_float32(image.pixels[i], weight);
    }
    EX2D_CUDA_CHECK(cudaMemcpyAsync(image_.data(), host_image_.data(), 2 * npix * sizeof(float),
                                    cudaMemcpyHostToDevice, stream));

    const auto rows = device_rows(psf);
    const int nrow = int(rows.size()), nfiber = psf.nspec(), ncoef_max = max_ncoef(rows);
    const std::size_t ncoef_total = std::size_t(nrow) * nfiber * ncoef_max;
    const std::size_t ntable = ncoef_total + 2 * nrow;
    host_tables_.reserve(ntable);
    tables_.reserve(ntable, ledger_);
    std::fill(host_tables_.data(), host_tables_.data() + ntable, 0.0);
    std::vector<int> ncoef(nrow);
    for (int r = 0; r < nrow; ++r) {
        const LegendreTable& t = *rows[r];
        if (t.nfiber != nfiber)
            throw Error("CUDA backend: PSF row fibre counts differ in " + psf.source);
        ncoef[r] = t.ncoef;
        for (int f = 0; f < nfiber; ++f) {
            std::copy(t.coef.begin() + std::size_t(f) * t.ncoef,
                      t.coef.begin() + std::size_t(f + 1) * t.ncoef,
                      host_tables_.data() + (std::size_t(r) * nfiber + f) * ncoef_max);
        }
        host_tables_[ncoef_total + r] = t.wavemin;
        host_tables_[ncoef_total + nrow + r] = t.wavemax;
    }
    EX2D_CUDA_CHECK(cudaMemcpyAsync(tables_.data(), host_tables_.data(), ntable * sizeof(double),
                                    cudaMemcpyHostToDevice, stream));
    ncoef_.reserve(nrow, ledger_);
    waves_.reserve(padded_wave.size(), ledger_);
    // Small pageable copies; the synchronisation below lets the host vectors go.
    EX2D_CUDA_CHECK(cudaMemcpyAsync(ncoef_.data(), ncoef.data(), nrow * sizeof(int),
                                    cudaMemcpyHostToDevice, stream));
    EX2D_CUDA_CHECK(cudaMemcpyAsync(waves_.data(), padded_wave.data(),
                                    padded_wave.size() * sizeof(double), cudaMemcpyHostToDevice,
                                    stream));
    EX2D_CUDA_CHECK(cudaStreamSynchronize(stream));

    psf_.coef = tables_.data();
    psf_.ncoef = ncoef_.data();
    psf_.wavemin = tables_.data() + ncoef_total;
    psf_.wavemax = tables_.data() + ncoef_total + nrow;
    psf_.nrow = nrow;
    psf_.nfiber = nfiber;
    psf_.max_ncoef = ncoef_max;
    psf_.hsizex = psf.hsizex;
    psf_.hsizey = psf.hsizey;
    psf_.ghdegx = psf.ghdegx;
    psf_.ghdegy = psf.ghdegy;
}

DeviceImage DeviceFrame::image() const
{
    const std::size_t npix = std::size_t(ny_) * nx_;
    return DeviceImage{image_.data(), image_.data() + npix, ny_, nx_};
}

}  // namespace ex2d::cuda
