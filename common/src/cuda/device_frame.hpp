// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A frame's inputs on the device: pixels and weights (float32 through pinned memory, the
// only large host-to-device transfer), the PSF's Legendre tables and the padded grid.

#include <vector>

#include "cuda_resources.hpp"
#include "device_memory.hpp"
#include "ex2d/extraction_backend.hpp"
#include "kernels.hpp"

namespace ex2d::cuda {

class DeviceFrame {
public:
    DeviceFrame(const CudaResources& resources, MemoryLedger& ledger);

    /// Copies image, PSF and grid to the device; returns once the copies are queued.
    void upload(const ImageView& image, const GaussHermitePsf& psf,
                const std::vector<double>& padded_wave);

    DeviceImage image() const;
    const DevicePsf& psf() const { return psf_; }
    const double* padded_wave() const { return waves_.data(); }
    /// Device bytes these inputs need for a frame of this shape (for the chunk plan).
    static std::size_t bytes_needed(const ImageView& image, const GaussHermitePsf& psf,
                                    std::size_t npadded_wave);

private:
    const CudaResources& res_;
    MemoryLedger& ledger_;
    int ny_ = 0, nx_ = 0;
    DevicePsf psf_;
    PinnedArray<float> host_image_{"image and weights"};
    DeviceArray<float> image_{"image and weights"};
    PinnedArray<double> host_tables_{"PSF tables"};
    DeviceArray<double> tables_{"PSF tables"};  // coefficients, wavemin, wavemax, grid
    DeviceArray<int> ncoef_{"PSF coefficient counts"};
    DeviceArray<double> waves_{"padded wavelength grid"};
};

}  // namespace ex2d::cuda
