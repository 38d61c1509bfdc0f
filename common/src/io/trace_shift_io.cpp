// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/trace_shift_io.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ex2d/frame_io.hpp"
#include "fits_util.hpp"

namespace ex2d {

namespace {

/// Replaces the data of the named image HDU of `f` (its shape unchanged) and its WAVEMIN,
/// WAVEMAX cards.
Status replace_trace(fitsfile* f, const std::string& path, const std::string& hdu,
                     const LegendreTable& table)
{
    int status = 0;
    if (fits_movnam_hdu(f, IMAGE_HDU, const_cast<char*>(hdu.c_str()), 0, &status)) {
        return fits::io_error(path, "no HDU named " + hdu, status);
    }
    EX2D_ASSIGN_OR_RETURN(const std::vector<long> naxes, fits::image_shape(f, path, hdu));
    if (naxes.size() != 2 || naxes[0] != table.ncoef || naxes[1] != table.nfiber) {
        return Status::format(path + ": HDU " + hdu + " is not [" + std::to_string(table.nfiber) +
                              "][" + std::to_string(table.ncoef) + "]");
    }
    double wavemin = table.wavemin, wavemax = table.wavemax;
    fits_write_img(f, TDOUBLE, 1, (long long)table.coef.size(),
                   const_cast<double*>(table.coef.data()), &status);
    fits_update_key(f, TDOUBLE, "WAVEMIN", &wavemin, nullptr, &status);
    fits_update_key(f, TDOUBLE, "WAVEMAX", &wavemax, nullptr, &status);
    if (status) return fits::io_error(path, "cannot write " + hdu, status);
    return Status::ok();
}

/// Recomputes CHECKSUM/DATASUM of every HDU that had them (the data changed).
Status refresh_checksums(fitsfile* f, const std::string& path)
{
    int status = 0, nhdu = 0;
    fits_get_num_hdus(f, &nhdu, &status);
    for (int i = 1; i <= nhdu && !status; ++i) {
        fits_movabs_hdu(f, i, nullptr, &status);
        char value[FLEN_VALUE];
        int missing = 0;
        fits_read_keyword(f, "CHECKSUM", value, nullptr, &missing);
        if (missing == 0) fits_write_chksum(f, &status);
    }
    if (status) return fits::io_error(path, "cannot update the checksums", status);
    return Status::ok();
}

/// Copies every HDU of `in` (`input` in messages) into `out`, replaces the traces and adds
/// the trace-shift keys.
Status copy_with_shifted_traces(fitsfile* in, const std::string& input, fitsfile* out,
                                const std::string& output, const TraceShiftResult& result,
                                const TraceShiftInputs& inputs)
{
    EX2D_ASSIGN_OR_RETURN(const std::vector<std::string> names, fits::scan_hdus(in, input));
    for (const char* needed : {"XTRACE", "YTRACE", "PSF"}) {
        if (fits::find_hdu(names, needed) == 0) {
            return Status::format(input + ": no HDU named " + needed +
                                  " (not a PSFVER 3 Gauss-Hermite PSF?)");
        }
    }
    int status = 0;
    for (size_t i = 1; i <= names.size(); ++i) {
        fits_movabs_hdu(in, int(i), nullptr, &status);
        fits_copy_hdu(in, out, 0, &status);
    }
    if (status) return fits::io_error(output, "cannot copy " + input, status);
    EX2D_RETURN_NOT_OK(replace_trace(out, output, "XTRACE", result.xtrace));
    EX2D_RETURN_NOT_OK(replace_trace(out, output, "YTRACE", result.ytrace));
    if (fits_movnam_hdu(out, BINARY_TBL, const_cast<char*>("PSF"), 0, &status)) {
        return fits::io_error(output, "no table HDU named PSF", status);
    }
    for (const TraceShiftKey& key : trace_shift_summary_keys(result)) {
        double v = key.value;
        fits_update_key(out, TDOUBLE, key.name, &v, key.comment, &status);
    }
    const std::string in_psf = shorten_desi_path(inputs.psf);
    const std::string in_image = shorten_desi_path(inputs.image);
    fits_update_key_longstr(out, "IN_PSF", const_cast<char*>(in_psf.c_str()),
                            "PSF whose traces were shifted", &status);
    fits_update_key_longstr(out, "IN_IMAGE", const_cast<char*>(in_image.c_str()),
                            "image the shifts were measured on", &status);
    if (status) return fits::io_error(output, "cannot write the trace-shift keys", status);
    return refresh_checksums(out, output);
}

}  // namespace

Result<std::vector<std::uint8_t>> shifted_psf_bytes(const std::vector<std::uint8_t>& input,
                                                    const std::string& input_name,
                                                    const TraceShiftResult& result,
                                                    const TraceShiftInputs& inputs)
{
    // CFITSIO reads a memory file through a pointer it may reallocate: give it a copy.
    void* buffer = std::malloc(input.size());
    if (buffer == nullptr) return Status::io(input_name + ": out of memory");
    std::memcpy(buffer, input.data(), input.size());
    size_t size = input.size();
    fitsfile* raw = nullptr;
    int status = 0;
    if (fits_open_memfile(&raw, input_name.c_str(), READONLY, &buffer, &size, 0, nullptr,
                          &status)) {
        std::free(buffer);
        return fits::io_error(input_name, "cannot open the PSF's bytes", status);
    }
    fits::FitsPtr in(raw);
    const std::string what = "shifted copy of " + input_name;
    auto bytes = fits::build_memory_file(what, input.size() + 8 * 2880, [&](fitsfile* out) {
        return copy_with_shifted_traces(in.get(), input_name, out, what, result, inputs);
    });
    in.reset();
    std::free(buffer);
    if (!bytes.is_ok()) return bytes.status();
    const fits::MemoryFile& file = bytes.value();
    return std::vector<std::uint8_t>(file.data.get(), file.data.get() + file.size);
}

Status write_shifted_psf(const std::string& input, const std::string& output,
                         const TraceShiftResult& result, const TraceShiftInputs& inputs)
{
    EX2D_ASSIGN_OR_RETURN(const fits::FitsPtr in, fits::open_read(input));
    return fits::write_atomically(output, [&](fitsfile* out) -> Status {
        return copy_with_shifted_traces(in.get(), input, out, output, result, inputs);
    });
}

Status write_psf_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes)
{
    return fits::write_bytes_atomically(path, std::string(bytes.begin(), bytes.end()));
}

Status write_trace_offsets(const std::string& path, const std::vector<TraceOffset>& offsets)
{
    if (path.find(".fits") == std::string::npos) {
        std::ostringstream text;
        text << "AXIS,WAVELENGTH,FIBER,X,Y,DELTA,ERROR,USED\n";
        text.precision(10);
        for (const TraceOffset& o : offsets) {
            text << o.axis << ',' << o.wave << ',' << o.fiber << ',' << o.x << ',' << o.y << ','
                 << o.delta << ',' << o.error << ',' << (o.used ? 1 : 0) << '\n';
        }
        return fits::write_bytes_atomically(path, text.str());
    }
    return fits::write_atomically(path, [&](fitsfile* f) -> Status {
        int status = 0;
        const char* ttype[] = {"AXIS", "WAVELENGTH", "FIBER", "X", "Y", "DELTA", "ERROR", "USED"};
        const char* tform[] = {"J", "D", "J", "D", "D", "D", "D", "L"};
        fits_create_img(f, BYTE_IMG, 0, nullptr, &status);
        fits_create_tbl(f, BINARY_TBL, (long long)offsets.size(), 8, const_cast<char**>(ttype),
                        const_cast<char**>(tform), nullptr, "OFFSETS", &status);
        const long long n = (long long)offsets.size();
        std::vector<int> ints(offsets.size());
        std::vector<double> doubles(offsets.size());
        std::vector<char> flags(offsets.size());
        auto put_int = [&](int col, auto member) {
            for (size_t i = 0; i < offsets.size(); ++i) ints[i] = offsets[i].*member;
            fits_write_col(f, TINT, col, 1, 1, n, ints.data(), &status);
        };
        auto put_double = [&](int col, auto member) {
            for (size_t i = 0; i < offsets.size(); ++i) doubles[i] = offsets[i].*member;
            fits_write_col(f, TDOUBLE, col, 1, 1, n, doubles.data(), &status);
        };
        if (n > 0) {
            put_int(1, &TraceOffset::axis);
            put_double(2, &TraceOffset::wave);
            put_int(3, &TraceOffset::fiber);
            put_double(4, &TraceOffset::x);
            put_double(5, &TraceOffset::y);
            put_double(6, &TraceOffset::delta);
            put_double(7, &TraceOffset::error);
            for (size_t i = 0; i < offsets.size(); ++i) flags[i] = offsets[i].used ? 1 : 0;
            fits_write_col(f, TLOGICAL, 8, 1, 1, n, flags.data(), &status);
        }
        if (status) return fits::io_error(path, "cannot write the offsets table", status);
        return Status::ok();
    });
}

Result<TabulatedSpectrum> read_tabulated_spectrum(const std::string& path)
{
    std::ifstream file(path);
    if (!file) return Status::io(path + ": cannot open the spectrum");
    TabulatedSpectrum spectrum;
    std::string line;
    for (long number = 1; std::getline(file, line); ++number) {
        const size_t start = line.find_first_not_of(" \t\r");
        if (start == std::string::npos || line[start] == '#') continue;
        std::istringstream fields(line);
        double w = 0, f = 0;
        if (!(fields >> w >> f)) {
            return Status::format(path + ": line " + std::to_string(number) +
                                  " is not 'wavelength flux'");
        }
        spectrum.wave.push_back(w);
        spectrum.flux.push_back(f);
    }
    return spectrum;
}

Result<std::vector<ReferenceLine>> read_reference_spectrum(const std::string& path)
{
    EX2D_ASSIGN_OR_RETURN(TabulatedSpectrum spectrum, read_tabulated_spectrum(path));
    return lines_from_spectrum(spectrum.wave, spectrum.flux, path);
}

}  // namespace ex2d
