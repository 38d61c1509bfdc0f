// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/psf_io.hpp"

#include <cctype>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "fits_util.hpp"

namespace ex2d {

namespace {

const char* const kNotAPsf = " (not a PSFVER 3 Gauss-Hermite PSF?)";

Result<long long> required_int(const FitsHeader& header, const std::string& key,
                               const std::string& path, const std::string& hdu)
{
    auto v = header.get_int(key);
    if (!v) return Status::format(path + ": HDU " + hdu + " has no integer keyword " + key);
    return *v;
}

Result<double> required_double(const FitsHeader& header, const std::string& key,
                               const std::string& path, const std::string& hdu)
{
    auto v = header.get_double(key);
    if (!v) return Status::format(path + ": HDU " + hdu + " has no numeric keyword " + key);
    return *v;
}

/// PSFVER is a string ('3') in the PSF HDU and an integer in HDU 0; accepts both.
std::optional<long> psf_version(const FitsHeader& header)
{
    auto text = header.get_string("PSFVER");
    if (!text || text->empty()) return std::nullopt;
    char* end = nullptr;
    long v = std::strtol(text->c_str(), &end, 10);
    if (end == text->c_str()) return std::nullopt;
    return v;
}

Status read_trace(fitsfile* f, const std::string& path, const std::vector<std::string>& names,
                  const std::string& hdu, LegendreTable& table, FitsHeader& header)
{
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, hdu, kNotAPsf));
    EX2D_ASSIGN_OR_RETURN(header, fits::read_header(f, path));
    EX2D_ASSIGN_OR_RETURN(const std::vector<long> naxes, fits::image_shape(f, path, hdu));
    if (naxes.size() != 2 || naxes[0] < 1 || naxes[1] < 1) {
        return Status::format(path + ": HDU " + hdu + " is not a 2-D [nfiber][ncoef] image");
    }
    EX2D_ASSIGN_OR_RETURN(table.wavemin, required_double(header, "WAVEMIN", path, hdu));
    EX2D_ASSIGN_OR_RETURN(table.wavemax, required_double(header, "WAVEMAX", path, hdu));
    table.ncoef = int(naxes[0]);
    table.nfiber = int(naxes[1]);
    table.coef.assign(size_t(table.ncoef) * size_t(table.nfiber), 0.0);
    return fits::read_pixels(f, path, hdu, TDOUBLE, (long long)table.coef.size(),
                             table.coef.data());
}

Status check_psf_type(const GaussHermitePsf& psf, const std::string& path)
{
    auto type = psf.psf_header.get_string("PSFTYPE");
    if (!type) type = psf.xtrace_header.get_string("PSFTYPE");
    if (!type) return Status::format(path + ": no PSFTYPE keyword" + kNotAPsf);
    if (*type != "GAUSS-HERMITE") {
        return Status::format(path + ": PSFTYPE is '" + *type + "', not GAUSS-HERMITE");
    }
    auto version = psf_version(psf.psf_header);
    if (!version) version = psf_version(psf.xtrace_header);
    if (!version) return Status::format(path + ": no PSFVER keyword" + kNotAPsf);
    if (*version < 3) {
        return Status::format(path + ": PSFVER " + std::to_string(*version) +
                              " is not supported (need 3 or later)");
    }
    return Status::ok();
}

Status read_psf_table(fitsfile* f, const std::string& path, int legdeg, double wavemin,
                      double wavemax, GaussHermitePsf& psf)
{
    int status = 0;
    int type = 0;
    fits_get_hdu_type(f, &type, &status);
    if (status == 0 && type != BINARY_TBL) {
        return Status::format(path + ": HDU PSF is not a binary table");
    }
    int param_col = 0;
    int coeff_col = 0;
    if (fits_get_colnum(f, CASESEN, const_cast<char*>("PARAM"), &param_col, &status) ||
        fits_get_colnum(f, CASESEN, const_cast<char*>("COEFF"), &coeff_col, &status)) {
        fits_clear_errmsg();
        return Status::format(path + ": PSF table lacks a PARAM or COEFF column");
    }
    int typecode = 0;
    long repeat = 0;
    long width = 0;
    long param_width = 0;
    long long nrows = 0;
    int ndim = 0;
    long dims[2] = {0, 0};
    fits_get_coltype(f, param_col, &typecode, &repeat, &param_width, &status);
    fits_get_coltype(f, coeff_col, &typecode, &repeat, &width, &status);
    fits_read_tdim(f, coeff_col, 2, &ndim, dims, &status);
    fits_get_num_rowsll(f, &nrows, &status);
    if (status) return fits::io_error(path, "cannot read the PSF table layout", status);
    const int ncoef = legdeg + 1;
    if (ncoef < 1 || repeat % ncoef != 0 || (ndim == 2 && dims[0] != ncoef)) {
        return Status::format(
            path + ": PSF COEFF column has " + std::to_string(repeat) +
            " values per row, not a multiple of LEGDEG+1 = " + std::to_string(ncoef));
    }
    const int nfiber = int(repeat / ncoef);
    std::vector<double> coeff(size_t(nrows) * size_t(repeat), 0.0);
    int anynul = 0;
    if (nrows > 0 && fits_read_col(f, TDOUBLE, coeff_col, 1, 1, nrows * repeat, nullptr,
                                   coeff.data(), &anynul, &status)) {
        return fits::io_error(path, "cannot read the PSF COEFF column", status);
    }
    std::vector<char> name(size_t(param_width) + 1, '\0');
    for (long long row = 0; row < nrows; ++row) {
        char* name_ptr = name.data();
        if (fits_read_col(f, TSTRING, param_col, row + 1, 1, 1, nullptr, &name_ptr, &anynul,
                          &status)) {
            return fits::io_error(path, "cannot read the PSF PARAM column", status);
        }
        std::string key(name.data());
        while (!key.empty() && key.back() == ' ') key.pop_back();
        LegendreTable& table = psf.params[key];
        table.wavemin = wavemin;
        table.wavemax = wavemax;
        table.nfiber = nfiber;
        table.ncoef = ncoef;
        auto first = coeff.begin() + row * repeat;
        table.coef.assign(first, first + repeat);
    }
    return Status::ok();
}

}  // namespace

namespace {

Result<GaussHermitePsf> read_open_psf(fits::FitsPtr& file, const std::string& path)
{
    fitsfile* f = file.get();
    EX2D_ASSIGN_OR_RETURN(const std::vector<std::string> names, fits::scan_hdus(f, path));
    for (const char* hdu : {"XTRACE", "YTRACE", "PSF"}) {
        if (fits::find_hdu(names, hdu) == 0) {
            return Status::format(path + ": no HDU named " + hdu + kNotAPsf);
        }
    }

    GaussHermitePsf psf;
    psf.source = path;
    FitsHeader ytrace_header;
    EX2D_RETURN_NOT_OK(read_trace(f, path, names, "XTRACE", psf.xtrace, psf.xtrace_header));
    EX2D_RETURN_NOT_OK(read_trace(f, path, names, "YTRACE", psf.ytrace, ytrace_header));
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "PSF", kNotAPsf));
    EX2D_ASSIGN_OR_RETURN(psf.psf_header, fits::read_header(f, path));
    EX2D_RETURN_NOT_OK(check_psf_type(psf, path));

    const FitsHeader& h = psf.psf_header;
    long long legdeg = 0;
    double wavemin = 0;
    double wavemax = 0;
    EX2D_ASSIGN_OR_RETURN(psf.npix_x, required_int(h, "NPIX_X", path, "PSF"));
    EX2D_ASSIGN_OR_RETURN(psf.npix_y, required_int(h, "NPIX_Y", path, "PSF"));
    EX2D_ASSIGN_OR_RETURN(psf.hsizex, required_int(h, "HSIZEX", path, "PSF"));
    EX2D_ASSIGN_OR_RETURN(psf.hsizey, required_int(h, "HSIZEY", path, "PSF"));
    EX2D_ASSIGN_OR_RETURN(psf.ghdegx, required_int(h, "GHDEGX", path, "PSF"));
    EX2D_ASSIGN_OR_RETURN(psf.ghdegy, required_int(h, "GHDEGY", path, "PSF"));
    EX2D_ASSIGN_OR_RETURN(psf.fibermin, required_int(h, "FIBERMIN", path, "PSF"));
    EX2D_ASSIGN_OR_RETURN(legdeg, required_int(h, "LEGDEG", path, "PSF"));
    EX2D_ASSIGN_OR_RETURN(wavemin, required_double(h, "WAVEMIN", path, "PSF"));
    EX2D_ASSIGN_OR_RETURN(wavemax, required_double(h, "WAVEMAX", path, "PSF"));
    if (auto psferr = h.get_double("PSFERR")) psf.psferr = *psferr;
    if (legdeg < 0 || legdeg > 100) {
        return Status::format(path + ": LEGDEG " + std::to_string(legdeg) + " out of range");
    }
    EX2D_RETURN_NOT_OK(read_psf_table(f, path, int(legdeg), wavemin, wavemax, psf));
    EX2D_RETURN_NOT_OK(fits::close(path, file));
    EX2D_RETURN_NOT_OK(psf.validate());
    return psf;
}

}  // namespace

Result<GaussHermitePsf> read_psf(const std::string& path)
{
    EX2D_ASSIGN_OR_RETURN(fits::FitsPtr file, fits::open_read(path));
    return read_open_psf(file, path);
}

Result<GaussHermitePsf> read_psf_bytes(const std::vector<std::uint8_t>& bytes,
                                       const std::string& name)
{
    if (bytes.empty()) return Status::format(name + ": empty PSF file" + kNotAPsf);
    // CFITSIO keeps pointers to these two for as long as the file is open.
    void* buffer = const_cast<std::uint8_t*>(bytes.data());
    std::size_t size = bytes.size();
    fitsfile* raw = nullptr;
    int status = 0;
    if (fits_open_memfile(&raw, name.c_str(), READONLY, &buffer, &size, 0, nullptr, &status)) {
        if (raw) fits::FitsCloser{}(raw);
        return fits::io_error(name, "cannot open as FITS", status);
    }
    fits::FitsPtr file(raw);
    return read_open_psf(file, name);
}

namespace {

/// Rows in the order specex writes them; parameters it does not know follow by name.
std::vector<std::string> param_order(const GaussHermitePsf& psf)
{
    std::vector<std::string> order = {"GHSIGX", "GHSIGY"};
    for (int j = 0; j <= psf.ghdegy; ++j) {
        for (int i = 0; i <= psf.ghdegx; ++i) {
            order.push_back("GH-" + std::to_string(i) + "-" + std::to_string(j));
        }
    }
    for (const char* name :
         {"TAILAMP", "TAILCORE", "TAILXSCA", "TAILYSCA", "TAILINDE", "BUNDLE", "STATUS", "CONT"}) {
        order.push_back(name);
    }
    std::vector<std::string> rows;
    std::set<std::string> known(order.begin(), order.end());
    for (const std::string& name : order) {
        if (psf.params.count(name)) rows.push_back(name);
    }
    for (const auto& [name, table] : psf.params) {
        if (!known.count(name)) rows.push_back(name);
    }
    return rows;
}

Status write_trace(fitsfile* f, const std::string& path, const LegendreTable& table,
                   const std::string& hdu, FitsHeader header, const GaussHermitePsf& psf)
{
    if (table.nfiber < 1 || table.ncoef < 1 ||
        table.coef.size() != size_t(table.nfiber) * size_t(table.ncoef)) {
        return Status::invalid(path + ": " + hdu + " coefficient array has the wrong size");
    }
    int status = 0;
    long naxes[2] = {table.ncoef, table.nfiber};
    if (fits_create_img(f, DOUBLE_IMG, 2, naxes, &status)) {
        return fits::io_error(path, "cannot create HDU " + hdu, status);
    }
    header.set_int("FIBERMIN", psf.fibermin);
    header.set_int("FIBERMAX", psf.fibermin + table.nfiber - 1);
    header.set_double("WAVEMIN", table.wavemin);
    header.set_double("WAVEMAX", table.wavemax);
    if (hdu == "XTRACE") {
        header.set_string("PSFTYPE", "GAUSS-HERMITE");
        header.set_int("PSFVER", 3);
    }
    fits_write_key(f, TSTRING, "EXTNAME", const_cast<char*>(hdu.c_str()), nullptr, &status);
    if (status) return fits::io_error(path, "cannot write the header of " + hdu, status);
    EX2D_RETURN_NOT_OK(fits::write_header(f, path, header));
    if (fits_write_img(f, TDOUBLE, 1, (long long)table.coef.size(),
                       const_cast<double*>(table.coef.data()), &status)) {
        return fits::io_error(path, "cannot write the data of " + hdu, status);
    }
    return Status::ok();
}

Status write_psf_table(fitsfile* f, const std::string& path, const GaussHermitePsf& psf)
{
    std::vector<std::string> rows = param_order(psf);
    if (rows.empty()) return Status::invalid(path + ": PSF has no parameters");
    const LegendreTable& first = psf.params.at(rows.front());
    size_t name_width = 8;
    for (const std::string& name : rows) {
        const LegendreTable& t = psf.params.at(name);
        if (t.nfiber != first.nfiber || t.ncoef != first.ncoef || t.wavemin != first.wavemin ||
            t.wavemax != first.wavemax || t.coef.size() != size_t(t.nfiber) * size_t(t.ncoef)) {
            return Status::invalid(path + ": PSF parameter " + name + " differs in size or " +
                                   "wavelength domain from " + rows.front());
        }
        name_width = std::max(name_width, name.size());
    }
    const long repeat = long(first.nfiber) * first.ncoef;
    std::string param_form = std::to_string(name_width) + "A";
    std::string coeff_form = std::to_string(repeat) + "D";
    char* ttype[] = {const_cast<char*>("PARAM"), const_cast<char*>("COEFF"),
                     const_cast<char*>("LEGDEGX"), const_cast<char*>("LEGDEGW")};
    char* tform[] = {param_form.data(), coeff_form.data(), const_cast<char*>("J"),
                     const_cast<char*>("J")};
    int status = 0;
    long dims[2] = {first.ncoef, first.nfiber};
    fits_create_tbl(f, BINARY_TBL, (long long)rows.size(), 4, ttype, tform, nullptr, "PSF",
                    &status);
    fits_write_tdim(f, 2, 2, dims, &status);
    if (status) return fits::io_error(path, "cannot create the PSF table", status);

    // specex counts the fitted parameters only, not its BUNDLE/STATUS bookkeeping rows.
    long nparams =
        long(rows.size()) - long(psf.params.count("BUNDLE")) - long(psf.params.count("STATUS"));
    FitsHeader h = psf.psf_header;
    h.set_string("PSFTYPE", "GAUSS-HERMITE");
    h.set_string("PSFVER", "3");
    h.set_int("NPIX_X", psf.npix_x, "number of columns in input CCD image");
    h.set_int("NPIX_Y", psf.npix_y, "number of rows in input CCD image");
    h.set_int("HSIZEX", psf.hsizex, "Half size of PSF in fit, NX=2*HSIZEX+1");
    h.set_int("HSIZEY", psf.hsizey, "Half size of PSF in fit, NY=2*HSIZEY+1");
    h.set_int("FIBERMIN", psf.fibermin, "first fiber (starting at 0)");
    h.set_int("FIBERMAX", psf.fibermin + first.nfiber - 1, "last fiber (included)");
    h.set_int("NPARAMS", nparams, "number of PSF parameters");
    h.set_int("LEGDEG", first.ncoef - 1, "degree of Legendre pol.(wave) for parameters");
    h.set_int("GHDEGX", psf.ghdegx, "degree of Hermite polynomial along CCD columns");
    h.set_int("GHDEGY", psf.ghdegy, "degree of Hermite polynomial along CCD rows");
    h.set_double("WAVEMIN", first.wavemin, "minimum wavelength (A), used for the Legendre poly");
    h.set_double("WAVEMAX", first.wavemax, "maximum wavelength (A), used for the Legendre poly");
    h.set_double("PSFERR", psf.psferr, "assumed PSF fractional error in chi2pix");
    EX2D_RETURN_NOT_OK(fits::write_header(f, path, h));

    std::vector<int> legdeg(rows.size(), first.ncoef - 1);
    for (size_t r = 0; r < rows.size(); ++r) {
        const LegendreTable& t = psf.params.at(rows[r]);
        char* name = const_cast<char*>(rows[r].c_str());
        long long row = (long long)r + 1;
        fits_write_col(f, TSTRING, 1, row, 1, 1, &name, &status);
        fits_write_col(f, TDOUBLE, 2, row, 1, repeat, const_cast<double*>(t.coef.data()), &status);
    }
    fits_write_col(f, TINT, 3, 1, 1, (long long)rows.size(), legdeg.data(), &status);
    fits_write_col(f, TINT, 4, 1, 1, (long long)rows.size(), legdeg.data(), &status);
    if (status) return fits::io_error(path, "cannot write the PSF table", status);
    return Status::ok();
}

}  // namespace

Status write_psf(const std::string& path, const GaussHermitePsf& psf)
{
    return fits::write_atomically(path, [&](fitsfile* f) -> Status {
        EX2D_RETURN_NOT_OK(write_trace(f, path, psf.xtrace, "XTRACE", psf.xtrace_header, psf));
        EX2D_RETURN_NOT_OK(write_trace(f, path, psf.ytrace, "YTRACE", FitsHeader{}, psf));
        return write_psf_table(f, path, psf);
    });
}

std::string normalized_camera(const std::string& card)
{
    std::string out;
    for (char c : card) {
        if (c != ' ' && c != '\'') out += char(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

Status check_psf_camera(const std::string& image_camera, const std::string& image_name,
                        const GaussHermitePsf& psf, const std::string& psf_name)
{
    const auto psf_camera = psf.psf_header.get_string("CAMERA");
    if (image_camera.empty() || !psf_camera || psf_camera->empty()) return Status::ok();
    const std::string image_norm = normalized_camera(image_camera);
    const std::string psf_norm = normalized_camera(*psf_camera);
    if (image_norm == psf_norm) return Status::ok();
    return Status::format(image_name + " is camera " + image_norm + " but PSF " + psf_name +
                          " is for camera " + psf_norm);
}

}  // namespace ex2d
