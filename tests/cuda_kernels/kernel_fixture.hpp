// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A tiny, awkward problem for the CUDA backend's kernels and its dense reference, written from
// the definitions (B&S eq. 4) rather than from the kernels: the projection matrix A of each
// patch over its pixel window, one row per window pixel and one column per unknown
// u = w * nslot + slot. Spots reach past their windows, pixels are masked, the second patch
// has a dummy slot and fewer kept wavelengths.

#include <cstdint>
#include <random>
#include <vector>

#include "cuda_check.hpp"
#include "device_memory.hpp"
#include "kernels.hpp"

namespace ex2d::cuda::test {

/// A device copy of a host vector, read back with read().
template <class T>
class Buffer {
public:
    Buffer(const std::vector<T>& host, MemoryLedger& ledger) : size_(host.size())
    {
        device_.reserve(std::max<std::size_t>(size_, 1), ledger);
        if (size_ > 0) {
            EX2D_CUDA_CHECK(cudaMemcpyAsync(device_.data(), host.data(), size_ * sizeof(T),
                                            cudaMemcpyHostToDevice, nullptr));
        }
    }
    Buffer(std::size_t size, T value, MemoryLedger& ledger)
        : Buffer(std::vector<T>(size, value), ledger)
    {
    }
    T* data() const { return device_.data(); }
    std::vector<T> read() const
    {
        std::vector<T> host(size_);
        EX2D_CUDA_CHECK(cudaMemcpyAsync(host.data(), device_.data(), size_ * sizeof(T),
                                        cudaMemcpyDeviceToHost, nullptr));
        EX2D_CUDA_CHECK(cudaStreamSynchronize(nullptr));
        return host;
    }

private:
    DeviceArray<T> device_{"kernel test buffer"};
    std::size_t size_;
};

struct TinyProblem {
    int image_ny = 48, image_nx = 40;
    std::vector<float> pixels, weights;
    int box_nfiber = 4, box_nwave = 6, stamp_ny = 5, stamp_nx = 4;
    std::vector<double> stamps;  // [fibre][wave][ny][nx]
    std::vector<int> xc, yc;     // [fibre][wave]
    DeviceLayout layout{3, 4, 1, 1, 2, 3};
    std::vector<DevicePatch> patches;

    explicit TinyProblem(std::uint64_t seed)
    {
        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        const std::size_t npix = std::size_t(image_ny) * image_nx;
        for (std::size_t k = 0; k < npix; ++k) {
            pixels.push_back(float(100 * unit(rng)));
            weights.push_back(k % 7 == 3 ? 0.0f : float(0.5 + 1.5 * unit(rng)));
        }
        for (int f = 0; f < box_nfiber; ++f) {
            for (int w = 0; w < box_nwave; ++w) {
                xc.push_back(3 + 7 * f + (w % 2));
                yc.push_back(1 + 6 * w + f);
                for (int k = 0; k < stamp_ny * stamp_nx; ++k) stamps.push_back(unit(rng));
            }
        }
        DevicePatch p0;
        p0.spot_fiber = 0;
        p0.spot_wave = 0;
        p0.nfiber = 3;
        p0.core_slot = 1;
        p0.ncore_wave = 2;
        p0.row_begin = 3;
        p0.row_end = 26;
        p0.col_begin = 5;
        p0.col_end = 25;
        p0.window_offset = 0;
        DevicePatch p1;
        p1.spot_fiber = 2;
        p1.spot_wave = 2;
        p1.nfiber = 2;
        p1.core_slot = 0;
        p1.ncore_wave = 1;
        p1.row_begin = 14;
        p1.row_end = 40;
        p1.col_begin = 16;
        p1.col_end = 36;
        p1.window_offset = (long long)(p0.row_end - p0.row_begin) * (p0.col_end - p0.col_begin);
        patches = {p0, p1};
    }

    int n() const { return layout.nunknown(); }
    int window_rows(int p) const { return patches[p].row_end - patches[p].row_begin; }
    int window_cols(int p) const { return patches[p].col_end - patches[p].col_begin; }
    long long window_pixels() const
    {
        long long total = 0;
        for (int p = 0; p < int(patches.size()); ++p)
            total += (long long)window_rows(p) * window_cols(p);
        return total;
    }
    /// Image index of window pixel k of patch p.
    std::size_t image_pixel(int p, int k) const
    {
        const int row = patches[p].row_begin + k / window_cols(p);
        const int col = patches[p].col_begin + k % window_cols(p);
        return std::size_t(row) * image_nx + col;
    }

    /// A of patch p, [window pixel][unknown]; dummy slots are zero columns.
    std::vector<double> projection(int p) const
    {
        const DevicePatch& patch = patches[p];
        const int cols = window_cols(p), n_ = n();
        std::vector<double> a(std::size_t(window_rows(p)) * cols * n_, 0.0);
        for (int u = 0; u < n_; ++u) {
            const int w = u / layout.nslot, slot = u % layout.nslot;
            if (slot >= patch.nfiber) continue;
            const int spot = (patch.spot_fiber + slot) * box_nwave + patch.spot_wave + w;
            for (int iy = 0; iy < stamp_ny; ++iy) {
                for (int ix = 0; ix < stamp_nx; ++ix) {
                    const int row = yc[spot] + iy, col = xc[spot] + ix;
                    if (row < patch.row_begin || row >= patch.row_end || col < patch.col_begin ||
                        col >= patch.col_end)
                        continue;
                    const int k = (row - patch.row_begin) * cols + (col - patch.col_begin);
                    a[std::size_t(k) * n_ + u] =
                        stamps[std::size_t(spot) * stamp_ny * stamp_nx + iy * stamp_nx + ix];
                }
            }
        }
        return a;
    }
};

/// The problem's inputs on the device and a ChunkBuffers with every array allocated.
struct DeviceProblem {
    MemoryLedger ledger;
    Buffer<float> image;
    Buffer<double> stamps;
    Buffer<int> corners;
    Buffer<DevicePatch> patches;
    Buffer<double> icov, z, cblock, qblock, eigval, frob2, rhs, x, fluxweight, pixmask;
    Buffer<int> eig_info, factor_info, flags;
    Buffer<double> outputs, window;
    DeviceImage device_image;
    SpotBox box;
    ChunkBuffers chunk;

    static std::vector<float> joined(const TinyProblem& t)
    {
        std::vector<float> both = t.pixels;
        both.insert(both.end(), t.weights.begin(), t.weights.end());
        return both;
    }
    static std::vector<int> corners_of(const TinyProblem& t)
    {
        std::vector<int> both = t.xc;
        both.insert(both.end(), t.yc.begin(), t.yc.end());
        return both;
    }

    explicit DeviceProblem(const TinyProblem& t)
        : image(joined(t), ledger),
          stamps(t.stamps, ledger),
          corners(corners_of(t), ledger),
          patches(t.patches, ledger),
          icov(t.patches.size() * t.n() * t.n(), 0.0, ledger),
          z(t.patches.size() * t.n() * t.layout.ncore * t.layout.nwave, 0.0, ledger),
          cblock(nblock(t) * t.layout.nwave * t.layout.nwave, 0.0, ledger),
          qblock(nblock(t) * t.layout.nwave * t.layout.nwave, 0.0, ledger),
          eigval(nblock(t) * t.layout.nwave, 0.0, ledger),
          frob2(nblock(t), 0.0, ledger),
          rhs(t.patches.size() * t.n(), 0.0, ledger),
          x(t.patches.size() * t.n(), 0.0, ledger),
          fluxweight(t.patches.size() * t.n(), 0.0, ledger),
          pixmask(t.patches.size() * t.n(), 0.0, ledger),
          eig_info(nblock(t), 0, ledger),
          factor_info(t.patches.size(), 0, ledger),
          flags(t.patches.size(), 0, ledger),
          outputs(kept(t) * (5 + t.layout.ndiag), 0.0, ledger),
          window(2 * std::size_t(t.window_pixels()), 0.0, ledger)
    {
        const std::size_t npix = std::size_t(t.image_ny) * t.image_nx;
        device_image = DeviceImage{image.data(), image.data() + npix, t.image_ny, t.image_nx};
        const int nspot = t.box_nfiber * t.box_nwave;
        box = SpotBox{
            stamps.data(), corners.data(), corners.data() + nspot, 0, t.box_nfiber, t.box_nwave,
            t.stamp_ny,    t.stamp_nx};
        chunk.npatch = int(t.patches.size());
        chunk.patches = patches.data();
        chunk.icov = icov.data();
        chunk.z = z.data();
        chunk.cblock = cblock.data();
        chunk.qblock = qblock.data();
        chunk.eigval = eigval.data();
        chunk.frob2 = frob2.data();
        chunk.eig_info = eig_info.data();
        chunk.factor_info = factor_info.data();
        chunk.flags = flags.data();
        chunk.rhs = rhs.data();
        chunk.x = x.data();
        chunk.fluxweight = fluxweight.data();
        chunk.pixmask = pixmask.data();
        const std::size_t k = kept(t);
        chunk.out_flux = outputs.data();
        chunk.out_ivar = outputs.data() + k;
        chunk.out_xflux = outputs.data() + 2 * k;
        chunk.out_chi2pix = outputs.data() + 3 * k;
        chunk.out_pixmask = outputs.data() + 4 * k;
        chunk.out_resolution = outputs.data() + 5 * k;
        chunk.window_chi2 = window.data();
        chunk.window_weight = window.data() + t.window_pixels();
    }

    static std::size_t nblock(const TinyProblem& t) { return t.patches.size() * t.layout.ncore; }
    static std::size_t kept(const TinyProblem& t) { return nblock(t) * t.layout.ncore_wave; }
};

}  // namespace ex2d::cuda::test
