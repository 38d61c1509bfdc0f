// SPDX-License-Identifier: BSD-3-Clause
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "ex2d/frame_io.hpp"

#include <erfaextra.h>
#include "ex2d/logging.hpp"
#include "fibermap_annotation.hpp"
#include "fits_util.hpp"
#include "frame_internal.hpp"

namespace ex2d {

namespace {

constexpr int kFibersPerPetal = 500;

template <class Frame>
Status check_frame(const std::string& path, const Frame& frame)
{
    const size_t n = size_t(frame.nspec) * size_t(frame.nwave);
    if (frame.nspec < 1 || frame.nwave < 1 || frame.ndiag < 1) {
        return Status::invalid(path + ": frame has no spectra, wavelengths or diagonals");
    }
    if (frame.wave.size() != size_t(frame.nwave) || frame.flux.size() != n ||
        frame.ivar.size() != n || frame.mask.size() != n || frame.chi2pix.size() != n ||
        frame.resolution.size() != n * size_t(frame.ndiag)) {
        return Status::invalid(
            path + ": frame arrays do not match nspec=" + std::to_string(frame.nspec) +
            ", nwave=" + std::to_string(frame.nwave) + ", ndiag=" + std::to_string(frame.ndiag));
    }
    return Status::ok();
}

/// desispec's Frame.vet(): FLAVOR must be one of these (case-sensitive).
Status check_flavor(const std::string& path, const FitsHeader& header)
{
    auto flavor = header.get_string("FLAVOR");
    if (!flavor) return Status::format(path + ": input image header has no FLAVOR keyword");
    for (const char* ok : {"none", "flat", "arc", "zero", "bias", "science"}) {
        if (*flavor == ok) return Status::ok();
    }
    return Status::format(path + ": FLAVOR '" + *flavor +
                          "' is not one of none/flat/arc/zero/bias/science");
}

/// Petal of the camera: SPECGRPH, else the digit of CAMERA ('r3' -> 3), else 0.
long long petal_of(const FitsHeader& header)
{
    if (auto sp = header.get_int("SPECGRPH")) return *sp;
    auto camera = header.get_string("CAMERA");
    if (camera && !camera->empty() && std::isdigit(static_cast<unsigned char>(camera->back()))) {
        return camera->back() - '0';
    }
    return 0;
}

/// FIBER of the written FIBERMAP rows [specmin, specmin + nspec).
template <class Frame>
Result<std::vector<long long>> frame_fibers(const std::string& path, const Frame& frame,
                                            const FrameProvenance& prov)
{
    std::vector<long long> fibers;
    if (prov.fibermap.empty()) {
        const long long first = kFibersPerPetal * petal_of(prov.image_header) + frame.specmin;
        for (int i = 0; i < frame.nspec; ++i) fibers.push_back(first + i);
        return fibers;
    }
    auto all = read_int_column(prov.fibermap, "FIBER");
    if (!all.is_ok()) return Status::format(path + ": FIBERMAP: " + all.status().message());
    const size_t end = size_t(frame.specmin) + size_t(frame.nspec);
    if (frame.specmin < 0 || all.value().size() < end) {
        return Status::format(path + ": FIBERMAP has " + std::to_string(all.value().size()) +
                              " rows, the frame needs rows [" + std::to_string(frame.specmin) +
                              ", " + std::to_string(end) + ")");
    }
    fibers.assign(all.value().begin() + frame.specmin, all.value().begin() + long(end));
    return fibers;
}

/// DEPNAMnn/DEPVERnn as desiutil.depend.setdep keeps them: a name already listed gets the new
/// version, a new name takes the first free nn.
void set_dependency(FitsHeader& h, const std::string& name, const std::string& version)
{
    int free_nn = -1;
    for (int nn = 0; nn < 100; ++nn) {
        char name_key[24];
        char version_key[24];
        std::snprintf(name_key, sizeof name_key, "DEPNAM%02d", nn);
        std::snprintf(version_key, sizeof version_key, "DEPVER%02d", nn);
        const auto listed = h.get_string(name_key);
        if (!listed) {
            if (free_nn < 0) free_nn = nn;
            continue;
        }
        if (*listed == name) {
            h.set_string(version_key, version);
            return;
        }
    }
    if (free_nn < 0) return;
    char name_key[24];
    char version_key[24];
    std::snprintf(name_key, sizeof name_key, "DEPNAM%02d", free_nn);
    std::snprintf(version_key, sizeof version_key, "DEPVER%02d", free_nn);
    h.set_string(name_key, name);
    h.set_string(version_key, version);
}

/// The FLUX header: the preproc IMAGE header plus the extraction keys, as desispec writes it.
template <class Frame>
FitsHeader frame_header(const Frame& frame, const FrameProvenance& prov,
                        const std::vector<long long>& fibers)
{
    const ExtractionOptions& opt = prov.options;
    FitsHeader h = prov.image_header;
    h.set_int("NSPEC", frame.nspec, "Number of spectra");
    h.set_double("WAVEMIN", opt.wmin != 0 ? opt.wmin : frame.wave.front(),
                 "First wavelength [Angstroms]");
    h.set_double("WAVEMAX", opt.wmax != 0 ? opt.wmax : frame.wave.back(),
                 "Last wavelength [Angstroms]");
    h.set_double("WAVESTEP", opt.dw, "Wavelength step size [Angstroms]");
    h.set_string("SPECTER", "ex2d " EX2D_VERSION, "extraction code");
    h.set_string("IN_PSF", shorten_desi_path(prov.input_psf), "Input spectral PSF");
    h.set_string("IN_IMG", shorten_desi_path(prov.input_image), "Input image");
    if (auto orig = prov.psf_header.get_string("IN_PSF")) {
        h.set_string("ORIG_PSF", *orig, "Original input PSF before shift");
    }
    set_dependency(h, "ex2d", EX2D_VERSION);
    set_dependency(h, "cfitsio",
                   std::to_string(CFITSIO_MAJOR) + "." + std::to_string(CFITSIO_MINOR) + "." +
                       std::to_string(CFITSIO_MICRO));
    set_dependency(h, "erfa", eraVersion());
    h.set_int("EXBUNDLE", opt.bundlesize, "ex2d fibres per bundle");
    h.set_int("EXNSUBB", opt.nsubbundles, "ex2d sub-bundles per bundle");
    h.set_int("EXNWSTEP", opt.nwavestep, "ex2d wavelengths per patch");
    h.set_int("EXWAVPAD", opt.wavepad, "ex2d wavelength padding (bins)");
    h.set_double("EXWPADFR", opt.wavepad_frac, "ex2d wavepad_frac");
    h.set_double("EXPPADFR", opt.pixpad_frac, "ex2d pixpad_frac");
    h.set_double("EXREGUL", opt.regularize, "ex2d regularization");
    h.set_double("EXPSFERR", frame.psferr, "ex2d PSF error used in chi2pix");
    h.set_double("EXMINWT", SolverConstants::min_weight_frac, "ex2d min flux weight fraction");
    h.set_double("EXDFLOOR", SolverConstants::diag_floor, "ex2d iCov diagonal floor");
    h.set_double("EXEIGCLP", SolverConstants::eig_clip, "ex2d eigenvalue clip fraction");
    if (!fibers.empty()) {
        h.set_int("FIBERMIN", *std::min_element(fibers.begin(), fibers.end()));
    }
    h.set_string("BUNIT", "electron/Angstrom");
    return h;
}

Status finish_hdu(fitsfile* f, const std::string& path, const std::string& name)
{
    int status = 0;
    if (fits_write_chksum(f, &status)) {
        return fits::io_error(path, "cannot write the checksum of " + name, status);
    }
    return Status::ok();
}

/// One image HDU: EXTNAME, optional header cards, data converted by cfitsio from `datatype`.
Status write_image(fitsfile* f, const std::string& path, const std::string& name, int bitpix,
                   std::vector<long> naxes, int datatype, const void* data,
                   const FitsHeader* header = nullptr, const char* bunit = nullptr)
{
    int status = 0;
    long long npix = 1;
    for (long n : naxes) npix *= n;
    fits_create_img(f, bitpix, int(naxes.size()), naxes.data(), &status);
    if (status) return fits::io_error(path, "cannot create HDU " + name, status);
    if (header) EX2D_RETURN_NOT_OK(fits::write_header(f, path, *header));
    fits_write_key(f, TSTRING, "EXTNAME", const_cast<char*>(name.c_str()), nullptr, &status);
    if (bunit) fits_write_key(f, TSTRING, "BUNIT", const_cast<char*>(bunit), nullptr, &status);
    fits_write_img(f, datatype, 1, npix, const_cast<void*>(data), &status);
    if (status) return fits::io_error(path, "cannot write HDU " + name, status);
    return finish_hdu(f, path, name);
}

Status write_fibermap(fitsfile* f, const std::string& path, const StoredFrame& frame,
                      const FrameProvenance& prov, const std::vector<long long>& fibers)
{
    const FibermapColumns& columns =
        prov.fibermap_columns ? *prov.fibermap_columns : builtin_fibermap_columns();
    int status = 0;
    if (prov.fibermap.empty()) {
        char* ttype[] = {const_cast<char*>("FIBER")};
        char* tform[] = {const_cast<char*>("J")};
        fits_create_tbl(f, BINARY_TBL, frame.nspec, 1, ttype, tform, nullptr, "FIBERMAP", &status);
        fits_write_col(f, TLONGLONG, 1, 1, 1, frame.nspec, const_cast<long long*>(fibers.data()),
                       &status);
        if (status) return fits::io_error(path, "cannot write HDU FIBERMAP", status);
        EX2D_RETURN_NOT_OK(fits::annotate_fibermap(f, path, columns));
        return finish_hdu(f, path, "FIBERMAP");
    }
    fits::BlobReader reader;
    EX2D_RETURN_NOT_OK(reader.open(prov.fibermap, path + " (FIBERMAP)"));
    long long nrows = 0;
    fits_copy_hdu(reader.get(), f, 0, &status);
    fits_get_num_rowsll(f, &nrows, &status);
    const long long end = frame.specmin + frame.nspec;
    if (status == 0 && nrows > end) fits_delete_rows(f, end + 1, nrows - end, &status);
    if (status == 0 && frame.specmin > 0) fits_delete_rows(f, 1, frame.specmin, &status);
    fits_update_key(f, TSTRING, "EXTNAME", const_cast<char*>("FIBERMAP"), nullptr, &status);
    if (status) return fits::io_error(path, "cannot write HDU FIBERMAP", status);
    EX2D_RETURN_NOT_OK(fits::annotate_fibermap(f, path, columns));
    return finish_hdu(f, path, "FIBERMAP");
}

Status write_scores(fitsfile* f, const std::string& path, const StoredFrame& frame)
{
    const FrameScores& scores = frame.scores;
    if (scores.nbins == 0) {
        logger()->warn("event=scores_skipped file={} reason=\"no wavelength in [{}, {})\"", path,
                       scores.lo, scores.hi);
        return Status::ok();
    }
    int status = 0;
    std::vector<std::string> names = scores.names;
    std::vector<char*> ttype;
    std::vector<char*> tform;
    ttype.reserve(names.size());
    tform.reserve(names.size());
    for (std::string& name : names) ttype.push_back(name.data());
    for (size_t i = 0; i < names.size(); ++i) tform.push_back(const_cast<char*>("D"));
    fits_create_tbl(f, BINARY_TBL, frame.nspec, int(ttype.size()), ttype.data(), tform.data(),
                    nullptr, "SCORES", &status);
    for (size_t i = 0; i < names.size(); ++i) {
        std::string key = "TTYPE" + std::to_string(i + 1);
        fits_modify_comment(f, key.c_str(), scores.comments[i].c_str(), &status);
        fits_write_col(f, TDOUBLE, int(i) + 1, 1, 1, frame.nspec,
                       const_cast<double*>(scores.columns[i].data()), &status);
    }
    if (status) return fits::io_error(path, "cannot write HDU SCORES", status);
    return finish_hdu(f, path, "SCORES");
}

/// SCORES columns that do not match the frame would write another frame's numbers.
Status check_scores(const std::string& path, const StoredFrame& frame)
{
    const FrameScores& scores = frame.scores;
    if (scores.nbins == 0) return Status::ok();
    bool consistent = scores.names.size() == scores.columns.size() &&
                      scores.comments.size() == scores.columns.size();
    for (const auto& column : scores.columns)
        consistent = consistent && int(column.size()) == frame.nspec;
    if (!consistent)
        return Status::invalid(
            path + ": SCORES columns do not match nspec=" + std::to_string(frame.nspec));
    return Status::ok();
}

Status write_frame_hdus(fitsfile* f, const std::string& path, const StoredFrame& frame,
                        const FrameProvenance& prov, const FitsHeader& header,
                        const std::vector<long long>& fibers)
{
    const long nspec = frame.nspec;
    const long nwave = frame.nwave;
    EX2D_RETURN_NOT_OK(write_image(f, path, "FLUX", FLOAT_IMG, {nwave, nspec}, TFLOAT,
                                   frame.flux.data(), &header));
    EX2D_RETURN_NOT_OK(
        write_image(f, path, "IVAR", FLOAT_IMG, {nwave, nspec}, TFLOAT, frame.ivar.data()));
    // ULONG_IMG is BITPIX 32 with BZERO 2^31, which is how astropy stores uint32.
    EX2D_RETURN_NOT_OK(
        write_image(f, path, "MASK", ULONG_IMG, {nwave, nspec}, TUINT, frame.mask.data()));
    EX2D_RETURN_NOT_OK(write_image(f, path, "WAVELENGTH", DOUBLE_IMG, {nwave}, TDOUBLE,
                                   frame.wave.data(), nullptr, "Angstrom"));
    EX2D_RETURN_NOT_OK(write_image(f, path, "RESOLUTION", FLOAT_IMG,
                                   {nwave, long(frame.ndiag), nspec}, TFLOAT,
                                   frame.resolution.data()));
    EX2D_RETURN_NOT_OK(write_fibermap(f, path, frame, prov, fibers));
    EX2D_RETURN_NOT_OK(
        write_image(f, path, "CHI2PIX", FLOAT_IMG, {nwave, nspec}, TFLOAT, frame.chi2pix.data()));
    if (!prov.write_scores) return Status::ok();
    return write_scores(f, path, frame);
}

template <class Array>
LargeArray<float> to_float(const Array& values)
{
    return LargeArray<float>(values.begin(), values.end());
}

/// About the size of the frame file, so that it is built in memory without growing: the
/// 4-byte images, RESOLUTION, WAVELENGTH, the FIBERMAP, SCORES and a few header blocks.
std::size_t expected_file_bytes(const StoredFrame& frame, const FrameProvenance& prov)
{
    const std::size_t n = std::size_t(frame.nspec) * std::size_t(frame.nwave);
    constexpr std::size_t kScoreColumns = 64;
    constexpr std::size_t kHeaderBytes = 2880 * 64;
    return n * 4 * (4 + std::size_t(frame.ndiag)) + std::size_t(frame.nwave) * 8 +
           prov.fibermap.fits_bytes.size() + std::size_t(frame.nspec) * 8 * kScoreColumns +
           kHeaderBytes;
}

}  // namespace

std::string shorten_desi_path(const std::string& path)
{
    auto replaced = [&](const std::string& prefix, const char* name) -> std::optional<std::string> {
        if (prefix.empty() || path.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
        return name + path.substr(prefix.size());
    };
    if (const char* calib = std::getenv("DESI_SPECTRO_CALIB")) {
        if (auto s = replaced(calib, "SPCALIB")) return *s;
    }
    const char* redux = std::getenv("DESI_SPECTRO_REDUX");
    const char* specprod = std::getenv("SPECPROD");
    if (redux && specprod) {
        // desispec's specprod_root(): os.path.join(redux, specprod)
        std::string root = redux;
        if (specprod[0] == '/') {
            root = specprod;
        } else {
            if (!root.empty() && root.back() != '/') root += '/';
            root += specprod;
        }
        if (auto s = replaced(root, "SPECPROD")) return *s;
    }
    return path;
}

StoredFrame to_stored_frame(const ExtractedFrame& frame, double dw)
{
    StoredFrame stored;
    stored.specmin = frame.specmin;
    stored.nspec = frame.nspec;
    stored.nwave = frame.nwave;
    stored.ndiag = frame.ndiag;
    stored.psferr = frame.psferr;
    stored.wave = frame.wave;
    stored.flux = to_float(frame.flux);
    stored.ivar = to_float(frame.ivar);
    stored.resolution = to_float(frame.resolution);
    stored.chi2pix = to_float(frame.chi2pix);
    stored.mask = frame.mask;
    stored.scores = frame_detail::compute_scores(frame, dw);
    return stored;
}

Status write_frame(const std::string& path, const ExtractedFrame& frame,
                   const FrameProvenance& provenance)
{
    // Sizes first (the narrowing reads every array); FLAVOR is checked by the writer below.
    EX2D_RETURN_NOT_OK(check_frame(path, frame));
    return write_frame(path, to_stored_frame(frame, provenance.options.dw), provenance);
}

Status write_frame(const std::string& path, const StoredFrame& frame,
                   const FrameProvenance& provenance, const FileBytesObserver& observer)
{
    EX2D_RETURN_NOT_OK(check_flavor(path, provenance.image_header));
    EX2D_RETURN_NOT_OK(check_frame(path, frame));
    if (provenance.write_scores) EX2D_RETURN_NOT_OK(check_scores(path, frame));
    EX2D_ASSIGN_OR_RETURN(std::vector<long long> fibers, frame_fibers(path, frame, provenance));
    const FitsHeader header = frame_header(frame, provenance, fibers);
    return fits::write_atomically_from_memory(
        path,
        [&](fitsfile* f) { return write_frame_hdus(f, path, frame, provenance, header, fibers); },
        expected_file_bytes(frame, provenance), observer);
}

Status write_model_image(const std::string& path, const ExtractedFrame& frame,
                         const FrameProvenance& provenance)
{
    if (frame.model_ny < 1 || frame.model_nx < 1 ||
        frame.model.size() != size_t(frame.model_ny) * size_t(frame.model_nx)) {
        return Status::invalid(path + ": frame has no model image of " +
                               std::to_string(frame.model_ny) + "x" +
                               std::to_string(frame.model_nx) + " pixels");
    }
    if (frame.wave.empty()) return Status::invalid(path + ": frame has no wavelength grid");
    EX2D_ASSIGN_OR_RETURN(std::vector<long long> fibers, frame_fibers(path, frame, provenance));
    FitsHeader header = frame_header(frame, provenance, fibers);
    header.erase("BUNIT");
    return fits::write_atomically(path, [&](fitsfile* f) {
        return write_image(f, path, "MODEL", DOUBLE_IMG,
                           {long(frame.model_nx), long(frame.model_ny)}, TDOUBLE,
                           frame.model.data(), &header);
    });
}

}  // namespace ex2d
