// SPDX-License-Identifier: BSD-3-Clause
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include <fitsio.h>
#include <unistd.h>

#include "ex2d/simulate.hpp"

namespace ex2d {

namespace {

std::string fits_error(int status)
{
    char text[FLEN_STATUS];
    fits_get_errstatus(status, text);
    return text;
}

/// Closes a cfitsio handle when leaving scope (errors on close are reported separately).
class FitsFile {
public:
    FitsFile() = default;
    FitsFile(const FitsFile&) = delete;
    FitsFile& operator=(const FitsFile&) = delete;
    ~FitsFile() { close(); }
    fitsfile** out() { return &handle_; }
    fitsfile* get() const { return handle_; }
    int close()
    {
        int status = 0;
        if (handle_) fits_close_file(handle_, &status);
        handle_ = nullptr;
        return status;
    }

private:
    fitsfile* handle_ = nullptr;
};

/// Appends a float64 image HDU; `axes` in FITS order (NAXIS1 first).
int write_double_image(fitsfile* fits, const char* extname, const std::vector<double>& values,
                       std::vector<long> axes)
{
    int status = 0;
    fits_create_img(fits, DOUBLE_IMG, int(axes.size()), axes.data(), &status);
    fits_write_key_str(fits, "EXTNAME", extname, nullptr, &status);
    if (!values.empty()) {
        fits_write_img(fits, TDOUBLE, 1, LONGLONG(values.size()),
                       const_cast<double*>(values.data()), &status);
    }
    return status;
}

/// Reads the image HDU `extname` as float64 with its axis lengths.
Status read_double_image(fitsfile* fits, const std::string& path, const char* extname,
                         std::vector<double>& values, std::vector<long>& axes)
{
    int status = 0;
    if (fits_movnam_hdu(fits, IMAGE_HDU, const_cast<char*>(extname), 0, &status)) {
        return Status::format(path + ": no HDU named " + extname);
    }
    int naxis = 0;
    fits_get_img_dim(fits, &naxis, &status);
    if (status || naxis < 1 || naxis > 2) {
        return Status::format(path + ": " + extname + " is not a 1-D or 2-D image");
    }
    axes.assign(naxis, 0);
    fits_get_img_size(fits, naxis, axes.data(), &status);
    long long count = 1;
    for (long n : axes) count *= n;
    values.assign(size_t(count), 0.0);
    if (count > 0) {
        fits_read_img(fits, TDOUBLE, 1, count, nullptr, values.data(), nullptr, &status);
    }
    if (status) return Status::io(path + ": cannot read " + extname + ": " + fits_error(status));
    return Status::ok();
}

}  // namespace

Status write_truth(const std::string& path, const SimulationTruth& truth)
{
    const size_t nwave = truth.wave.size();
    if (truth.nspec < 0 || truth.photons.size() != size_t(truth.nspec) * nwave) {
        return Status::invalid(path + ": truth photons hold " +
                               std::to_string(truth.photons.size()) +
                               " values, expected nspec x nwave = " + std::to_string(truth.nspec) +
                               " x " + std::to_string(nwave));
    }
    const std::string temp = path + ".tmp-" + std::to_string(::getpid());
    int status = 0;
    {
        FitsFile fits;
        // A leading '!' lets cfitsio replace a stale temporary file.
        fits_create_file(fits.out(), ("!" + temp).c_str(), &status);
        fits_create_img(fits.get(), DOUBLE_IMG, 0, nullptr, &status);
        if (status == 0) {
            status = write_double_image(fits.get(), "WAVELENGTH", truth.wave, {long(nwave)});
        }
        if (status == 0) {
            status = write_double_image(fits.get(), "PHOTONS", truth.photons,
                                        {long(nwave), long(truth.nspec)});
        }
        int specmin = truth.specmin;
        fits_write_key(fits.get(), TINT, "SPECMIN", &specmin, "first fibre of the PHOTONS rows",
                       &status);
        fits_write_key_str(fits.get(), "BUNIT", "electron", "photons per wavelength bin", &status);
        const int close_status = fits.close();
        if (status == 0) status = close_status;
    }
    std::error_code ec;
    if (status != 0) {
        std::filesystem::remove(temp, ec);
        return Status::io(path + ": cannot write truth: " + fits_error(status));
    }
    std::filesystem::rename(temp, path, ec);
    if (ec) {
        std::filesystem::remove(temp, ec);
        return Status::io(path + ": cannot rename the temporary truth file: " + ec.message());
    }
    return Status::ok();
}

Result<SimulationTruth> read_truth(const std::string& path)
{
    FitsFile fits;
    int status = 0;
    if (fits_open_file(fits.out(), path.c_str(), READONLY, &status)) {
        return Status::io(path + ": cannot open truth file: " + fits_error(status));
    }
    SimulationTruth truth;
    std::vector<long> wave_axes, photon_axes;
    EX2D_RETURN_NOT_OK(read_double_image(fits.get(), path, "WAVELENGTH", truth.wave, wave_axes));
    if (wave_axes.size() != 1) return Status::format(path + ": WAVELENGTH is not 1-D");
    EX2D_RETURN_NOT_OK(read_double_image(fits.get(), path, "PHOTONS", truth.photons, photon_axes));
    const long nwave = long(truth.wave.size());
    if (photon_axes[0] != nwave) {
        return Status::format(path + ": PHOTONS has " + std::to_string(photon_axes[0]) +
                              " columns but WAVELENGTH " + std::to_string(nwave) + " values");
    }
    truth.nspec = photon_axes.size() == 2 ? int(photon_axes[1]) : 1;
    int specmin = 0;
    if (fits_read_key(fits.get(), TINT, "SPECMIN", &specmin, nullptr, &status)) {
        return Status::format(path + ": PHOTONS has no SPECMIN keyword");
    }
    truth.specmin = specmin;
    return truth;
}

}  // namespace ex2d
