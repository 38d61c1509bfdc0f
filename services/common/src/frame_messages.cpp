// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/frame_messages.hpp"

#include <cmath>
#include <cstdio>

#include "ex2d/input_checks.hpp"

namespace ex2d::service {

using nlohmann::json;
using wire::ArrayPart;
using wire::DType;

Result<ExtractionOptions> options_from_json(const std::string& text)
{
    ExtractionOptions o;
    if (text.empty()) return o;
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return Status::format("options: not a JSON object: " + text);
    try {
        for (auto it = j.begin(); it != j.end(); ++it) {
            const std::string& k = it.key();
            const json& v = it.value();
            if (k == "wavelength") {
                const Status grid = parse_wavelength_grid(
                    v.get<std::string>(), "options: wavelength", o.wmin, o.wmax, o.dw);
                if (!grid.is_ok()) return Status::format(grid.message());
            } else if (k == "specmin")
                o.specmin = v.get<int>();
            else if (k == "nspec")
                o.nspec = v.get<int>();
            else if (k == "psferr")
                o.psferr = v.get<double>();
            else if (k == "regularize")
                o.regularize = v.get<double>();
            else if (k == "bundlesize")
                o.bundlesize = v.get<int>();
            else if (k == "nsubbundles")
                o.nsubbundles = v.get<int>();
            else if (k == "nwavestep")
                o.nwavestep = v.get<int>();
            else if (k == "wavepad")
                o.wavepad = v.get<int>();
            else if (k == "wavepad_frac")
                o.wavepad_frac = v.get<double>();
            else if (k == "pixpad_frac")
                o.pixpad_frac = v.get<double>();
            else
                return Status::format("options: unknown option '" + k + "'");
        }
    } catch (const json::exception& e) {
        return Status::format(std::string("options: wrong type: ") + e.what());
    }
    return o;
}

std::string options_to_json(const ExtractionOptions& o)
{
    json j = {{"specmin", o.specmin},
              {"nspec", o.nspec},
              {"psferr", o.psferr},
              {"regularize", o.regularize},
              {"bundlesize", o.bundlesize},
              {"nsubbundles", o.nsubbundles},
              {"nwavestep", o.nwavestep},
              {"wavepad", o.wavepad},
              {"wavepad_frac", o.wavepad_frac},
              {"pixpad_frac", o.pixpad_frac}};
    if (o.wmin > 0 || o.wmax > 0) {
        char w[96];
        std::snprintf(w, sizeof w, "%.17g,%.17g,%.17g", o.wmin, o.wmax, o.dw);
        j["wavelength"] = w;
    }
    return j.dump();
}

json job_to_json(const Job& job)
{
    json j = json::object();
    for (const auto& [k, v] : job.fields()) j[k] = v;
    j["stream"] = job.stream;
    return j;
}

Result<Job> job_from_message(const wire::IncomingMessage& message)
{
    Job job;
    try {
        for (const char* k : {"job", "lane", "campaign", "night", "expid", "camera", "preproc",
                              "psf", "output", "options", "stream"}) {
            if (!message.meta.contains(k) || !message.meta[k].is_string()) {
                return Status::format(std::string("message meta: missing string field '") + k +
                                      "'");
            }
        }
        std::vector<std::pair<std::string, std::string>> fields;
        for (auto it = message.meta.begin(); it != message.meta.end(); ++it) {
            if (it.value().is_string())
                fields.emplace_back(it.key(), it.value().get<std::string>());
        }
        job = Job::from_fields(fields);
        job.stream = message.meta["stream"].get<std::string>();
    } catch (const json::exception& e) {
        return Status::format(std::string("message meta: ") + e.what());
    }
    job.stream_id = message.stream_id;
    job.epoch = (long long)message.epoch;
    if (job.job != message.job_id)
        return Status::format("message: job id in header and meta differ");
    return job;
}

namespace {

// float32 when every value survives the round trip (DESI preproc files hold float32), so
// half the bytes travel without changing a bit of the extraction's input.
ArrayPart image_part(const LargeArray<double>& values, int ny, int nx)
{
    bool exact = true;
    for (double v : values) {
        if (double(float(v)) != v && !(std::isnan(v))) {
            exact = false;
            break;
        }
    }
    if (!exact) {
        return ArrayPart::from_vector(DType::f64, std::vector<double>(values.begin(), values.end()),
                                      {ny, nx});
    }
    std::vector<float> narrow(values.begin(), values.end());
    return ArrayPart::from_vector(DType::f32, std::move(narrow), {ny, nx});
}

std::vector<std::string> cards_from(const json& j, const char* field)
{
    std::vector<std::string> cards;
    if (!j.contains(field) || !j[field].is_array()) return cards;
    for (const auto& c : j[field]) {
        if (c.is_string()) cards.push_back(c.get<std::string>());
    }
    return cards;
}

Status check_count(const wire::IncomingMessage& m, std::size_t part, std::size_t expected,
                   const char* what, DType dtype)
{
    if (part >= m.parts.size()) return Status::format(std::string("message: no part for ") + what);
    if (m.dtype(part) != dtype && !(dtype == DType::f64 && m.dtype(part) == DType::f32)) {
        return Status::format(std::string("message: ") + what + " has the wrong dtype");
    }
    if (m.count(part) != expected) {
        return Status::format(std::string("message: ") + what + " has " +
                              std::to_string(m.count(part)) + " values, expected " +
                              std::to_string(expected));
    }
    return Status::ok();
}

std::string meta_text(const json& meta, const char* key)
{
    return meta.contains(key) && meta[key].is_string() ? meta[key].get<std::string>() : "";
}

template <typename T>
T meta_number(const json& meta, const char* key, T fallback)
{
    if (meta.contains(key) && meta[key].is_number()) return meta[key].get<T>();
    return fallback;
}

}  // namespace

wire::OutgoingMessage encode_frame(FrameInputs in)
{
    ArrayPart image = image_part(in.image, in.ny, in.nx);
    ArrayPart weights = image_part(in.weights, in.ny, in.nx);
    return encode_frame(std::move(in), std::move(image), std::move(weights));
}

wire::OutgoingMessage encode_frame(FrameInputs in, wire::ArrayPart image, wire::ArrayPart weights)
{
    const std::vector<std::int32_t> shape{in.ny, in.nx};
    if (image.shape != shape || weights.shape != shape) {
        throw Error("encode_frame: image or weights is not " + std::to_string(in.ny) + " x " +
                    std::to_string(in.nx));
    }
    wire::OutgoingMessage m;
    m.type = wire::MessageType::frame;
    m.epoch = (std::uint64_t)in.job.epoch;
    m.job_id = in.job.job;
    m.stream_id = in.job.stream_id;
    m.meta = job_to_json(in.job);
    m.meta["reader"] = in.reader;
    m.meta["image_header"] = in.image_header.cards;
    m.meta["preproc_checksum"] = in.preproc_checksum;
    m.meta["psf_checksum"] = in.psf_checksum;
    m.meta["read_seconds"] = in.read_seconds;
    m.meta["fibermap_rows"] = in.fibermap.nrows;
    m.meta["badcolumn_table"] = in.badcolumn_table;
    m.meta["trace_shifts_in"] = in.trace_shifts_in;
    m.arrays.push_back(std::move(image));
    m.arrays.push_back(std::move(weights));
    const int psf_bytes = int(in.psf_file.size());
    m.arrays.push_back(ArrayPart::from_vector(DType::u8, std::move(in.psf_file), {psf_bytes}));
    const int fm_bytes = int(in.fibermap.fits_bytes.size());
    m.arrays.push_back(
        ArrayPart::from_vector(DType::u8, std::move(in.fibermap.fits_bytes), {fm_bytes}));
    const int nbad = int(in.badcolumns.column.size());
    if (std::size_t(nbad) != in.badcolumns.elec_per_sec.size()) {
        throw Error("encode_frame: bad-column COLUMN and ELEC_PER_SEC differ in length");
    }
    m.arrays.push_back(ArrayPart::from_vector(DType::f64, std::move(in.badcolumns.column), {nbad}));
    m.arrays.push_back(
        ArrayPart::from_vector(DType::f64, std::move(in.badcolumns.elec_per_sec), {nbad}));
    return m;
}

Result<FrameInputs> decode_frame(const wire::IncomingMessage& m, LargeArray<double> image_memory,
                                 LargeArray<double> weights_memory)
{
    if (m.type != wire::MessageType::frame) return Status::format("message: not a FRAME");
    FrameInputs in;
    EX2D_ASSIGN_OR_RETURN(in.job, job_from_message(m));
    if (m.parts.size() != 6) return Status::format("FRAME: expected 6 arrays");
    if (m.header.parts[0].ndim != 2) return Status::format("FRAME: image is not 2-D");
    in.ny = m.header.parts[0].shape[0];
    in.nx = m.header.parts[0].shape[1];
    const std::size_t npix = std::size_t(in.ny) * std::size_t(in.nx);
    EX2D_RETURN_NOT_OK(check_count(m, 0, npix, "image", DType::f64));
    EX2D_RETURN_NOT_OK(check_count(m, 1, npix, "weights", DType::f64));
    if (m.dtype(2) != DType::u8 || m.dtype(3) != DType::u8) {
        return Status::format("FRAME: PSF and FIBERMAP must be bytes");
    }
    in.image = std::move(image_memory);
    in.weights = std::move(weights_memory);
    m.to_f64(0, in.image);
    m.to_f64(1, in.weights);
    in.planes_f32 = m.dtype(0) == DType::f32 && m.dtype(1) == DType::f32;
    in.psf_file = m.copy_array<std::uint8_t>(2);
    in.fibermap.fits_bytes = m.copy_array<std::uint8_t>(3);
    in.fibermap.nrows = meta_number<long>(m.meta, "fibermap_rows", 0);
    in.image_header.cards = cards_from(m.meta, "image_header");
    if (m.meta.contains("reader") && m.meta["reader"].is_string()) in.reader = m.meta["reader"];
    if (m.meta.contains("preproc_checksum"))
        in.preproc_checksum = m.meta.value("preproc_checksum", "");
    if (m.meta.contains("psf_checksum")) in.psf_checksum = m.meta.value("psf_checksum", "");
    in.read_seconds = meta_number<double>(m.meta, "read_seconds", 0.0);
    in.badcolumn_table = meta_text(m.meta, "badcolumn_table");
    if (in.badcolumn_table != "none" && in.badcolumn_table != "missing" &&
        in.badcolumn_table != "read") {
        return Status::format("FRAME: badcolumn_table '" + in.badcolumn_table +
                              "' is not none, missing or read");
    }
    // A reader from before the setting ran the step itself.
    in.trace_shifts_in = meta_text(m.meta, "trace_shifts_in");
    if (in.trace_shifts_in.empty()) in.trace_shifts_in = "reader";
    if (in.trace_shifts_in != "reader" && in.trace_shifts_in != "worker") {
        return Status::format("FRAME: trace_shifts_in '" + in.trace_shifts_in +
                              "' is not reader or worker");
    }
    const std::size_t nbad = m.count(4);
    EX2D_RETURN_NOT_OK(check_count(m, 4, nbad, "badcolumn_column", DType::f64));
    EX2D_RETURN_NOT_OK(check_count(m, 5, nbad, "badcolumn_elec_per_sec", DType::f64));
    if (m.dtype(4) != DType::f64 || m.dtype(5) != DType::f64) {
        return Status::format("FRAME: the bad-column table must be f64");
    }
    if (nbad > 0 && in.badcolumn_table != "read") {
        return Status::format("FRAME: a bad-column table with badcolumn_table '" +
                              in.badcolumn_table + "'");
    }
    in.badcolumns.source = in.job.badcolumns;
    in.badcolumns.column = m.copy_array<double>(4);
    in.badcolumns.elec_per_sec = m.copy_array<double>(5);
    return in;
}

wire::OutgoingMessage encode_result(FrameOutputs out)
{
    StoredFrame& f = out.frame;
    wire::OutgoingMessage m;
    m.type = wire::MessageType::result;
    m.epoch = (std::uint64_t)out.job.epoch;
    m.job_id = out.job.job;
    m.stream_id = out.job.stream_id;
    m.meta = job_to_json(out.job);
    m.meta["worker"] = out.worker;
    m.meta["device"] = out.device;
    m.meta["image_header"] = out.image_header.cards;
    m.meta["psf_header"] = out.psf_header.cards;
    m.meta["preproc_checksum"] = out.preproc_checksum;
    m.meta["psf_checksum"] = out.psf_checksum;
    m.meta["fibermap_rows"] = out.fibermap.nrows;
    m.meta["extraction"] = options_to_json(out.options);
    m.meta["specmin"] = f.specmin;
    m.meta["nspec"] = f.nspec;
    m.meta["nwave"] = f.nwave;
    m.meta["ndiag"] = f.ndiag;
    m.meta["psferr"] = f.psferr;
    m.meta["npatch"] = out.npatch;
    m.meta["npatch_retried"] = out.npatch_retried;
    m.meta["npatch_failed"] = out.npatch_failed;
    m.meta["read_seconds"] = out.read_seconds;
    m.meta["extract_seconds"] = out.extract_seconds;
    m.meta["badcolumn_mask"] = out.badcolumn_mask;
    m.meta["badcolumn_bins"] = out.badcolumn_bins;
    m.meta["badcolumn_badamp_fibers"] = out.badcolumn_badamp_fibers;
    m.meta["scores"] = {{"band", std::string(1, f.scores.band)},
                        {"lo", f.scores.lo},
                        {"hi", f.scores.hi},
                        {"nbins", f.scores.nbins},
                        {"names", f.scores.names},
                        {"comments", f.scores.comments}};
    const int ns = f.nspec;
    const int nw = f.nwave;
    std::vector<double> scores;
    for (const auto& column : f.scores.columns)
        scores.insert(scores.end(), column.begin(), column.end());
    const int ncolumns = int(f.scores.columns.size());
    m.arrays.push_back(ArrayPart::from_vector(DType::f64, std::move(f.wave), {nw}));
    m.arrays.push_back(ArrayPart::from_vector(DType::f32, std::move(f.flux), {ns, nw}));
    m.arrays.push_back(ArrayPart::from_vector(DType::f32, std::move(f.ivar), {ns, nw}));
    m.arrays.push_back(ArrayPart::from_vector(DType::u32, std::move(f.mask), {ns, nw}));
    m.arrays.push_back(
        ArrayPart::from_vector(DType::f32, std::move(f.resolution), {ns, f.ndiag * nw}));
    m.arrays.push_back(ArrayPart::from_vector(DType::f32, std::move(f.chi2pix), {ns, nw}));
    m.arrays.push_back(ArrayPart::from_vector(DType::f64, std::move(scores), {ncolumns, ns}));
    const int fm_bytes = int(out.fibermap.fits_bytes.size());
    m.arrays.push_back(
        ArrayPart::from_vector(DType::u8, std::move(out.fibermap.fits_bytes), {fm_bytes}));
    return m;
}

namespace {

Status check_exact(const wire::IncomingMessage& m, std::size_t part, std::size_t expected,
                   const char* what, DType dtype)
{
    if (part >= m.parts.size()) return Status::format(std::string("message: no part for ") + what);
    if (m.dtype(part) != dtype)
        return Status::format(std::string("RESULT: ") + what + " has the wrong dtype");
    return check_count(m, part, expected, what, dtype);
}

Result<FrameScores> scores_from(const wire::IncomingMessage& m, std::size_t part, int nspec)
{
    FrameScores s;
    const json& j = m.meta.contains("scores") ? m.meta["scores"] : json();
    try {
        const std::string band = j.at("band").get<std::string>();
        if (band.size() != 1)
            return Status::format("RESULT: scores band '" + band + "' is not one letter");
        s.band = band[0];
        s.lo = j.at("lo").get<double>();
        s.hi = j.at("hi").get<double>();
        s.nbins = j.at("nbins").get<int>();
        s.names = j.at("names").get<std::vector<std::string>>();
        s.comments = j.at("comments").get<std::vector<std::string>>();
    } catch (const json::exception& e) {
        return Status::format(std::string("RESULT: scores: ") + e.what());
    }
    if (s.comments.size() != s.names.size())
        return Status::format("RESULT: scores names and comments differ in number");
    EX2D_RETURN_NOT_OK(
        check_exact(m, part, s.names.size() * std::size_t(nspec), "scores", DType::f64));
    const std::vector<double> all = m.copy_array<double>(part);
    for (std::size_t c = 0; c < s.names.size(); ++c) {
        s.columns.emplace_back(all.begin() + long(c * std::size_t(nspec)),
                               all.begin() + long((c + 1) * std::size_t(nspec)));
    }
    return s;
}

}  // namespace

Result<FrameOutputs> decode_result(const wire::IncomingMessage& m)
{
    if (m.type != wire::MessageType::result) return Status::format("message: not a RESULT");
    FrameOutputs out;
    EX2D_ASSIGN_OR_RETURN(out.job, job_from_message(m));
    if (m.parts.size() != 8) return Status::format("RESULT: expected 8 arrays");
    StoredFrame& f = out.frame;
    f.specmin = meta_number<int>(m.meta, "specmin", -1);
    f.nspec = meta_number<int>(m.meta, "nspec", -1);
    f.nwave = meta_number<int>(m.meta, "nwave", -1);
    f.ndiag = meta_number<int>(m.meta, "ndiag", -1);
    if (f.specmin < 0 || f.nspec <= 0 || f.nwave <= 0 || f.ndiag <= 0) {
        return Status::format("RESULT: specmin, nspec, nwave or ndiag missing or out of range");
    }
    f.psferr = meta_number<double>(m.meta, "psferr", 0.01);
    out.npatch = meta_number<long>(m.meta, "npatch", 0);
    out.npatch_retried = meta_number<long>(m.meta, "npatch_retried", 0);
    out.npatch_failed = meta_number<long>(m.meta, "npatch_failed", 0);
    const std::size_t n = std::size_t(f.nspec) * std::size_t(f.nwave);
    EX2D_RETURN_NOT_OK(check_exact(m, 0, std::size_t(f.nwave), "wave", DType::f64));
    EX2D_RETURN_NOT_OK(check_exact(m, 1, n, "flux", DType::f32));
    EX2D_RETURN_NOT_OK(check_exact(m, 2, n, "ivar", DType::f32));
    EX2D_RETURN_NOT_OK(check_exact(m, 3, n, "mask", DType::u32));
    EX2D_RETURN_NOT_OK(check_exact(m, 4, n * std::size_t(f.ndiag), "resolution", DType::f32));
    EX2D_RETURN_NOT_OK(check_exact(m, 5, n, "chi2pix", DType::f32));
    EX2D_ASSIGN_OR_RETURN(f.scores, scores_from(m, 6, f.nspec));
    if (m.dtype(7) != DType::u8) return Status::format("RESULT: FIBERMAP must be bytes");
    f.wave = m.copy_array<double>(0);
    f.flux = m.copy_array<float, LargeArrayAllocator<float>>(1);
    f.ivar = m.copy_array<float, LargeArrayAllocator<float>>(2);
    f.mask = m.copy_array<std::uint32_t>(3);
    f.resolution = m.copy_array<float, LargeArrayAllocator<float>>(4);
    f.chi2pix = m.copy_array<float, LargeArrayAllocator<float>>(5);
    out.fibermap.fits_bytes = m.copy_array<std::uint8_t>(7);
    out.fibermap.nrows = meta_number<long>(m.meta, "fibermap_rows", 0);
    out.image_header.cards = cards_from(m.meta, "image_header");
    out.psf_header.cards = cards_from(m.meta, "psf_header");
    out.worker = m.meta.value("worker", "");
    out.device = m.meta.value("device", "");
    out.preproc_checksum = m.meta.value("preproc_checksum", "");
    out.psf_checksum = m.meta.value("psf_checksum", "");
    out.read_seconds = meta_number<double>(m.meta, "read_seconds", 0.0);
    out.extract_seconds = meta_number<double>(m.meta, "extract_seconds", 0.0);
    out.badcolumn_mask = meta_text(m.meta, "badcolumn_mask");
    out.badcolumn_bins = meta_number<long long>(m.meta, "badcolumn_bins", 0);
    out.badcolumn_badamp_fibers = meta_number<long>(m.meta, "badcolumn_badamp_fibers", 0);
    EX2D_ASSIGN_OR_RETURN(out.options, options_from_json(m.meta.value("extraction", "")));
    return out;
}

}  // namespace ex2d::service
