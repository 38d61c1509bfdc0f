// SPDX-License-Identifier: BSD-3-Clause
#include "trace_shift_step.hpp"

#include <cstdio>
#include <ctime>
#include <filesystem>

#include "ex2d/logging.hpp"
#include "ex2d/trace_shift_io.hpp"

namespace ex2d::service {

namespace {

double thread_cpu_seconds()
{
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

std::string fixed(double v)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", v);
    return text;
}

}  // namespace

std::string trace_shift_method(const Job& job, const FitsHeader& header)
{
    if (job.trace_shifts.empty() || job.trace_shifts == "none") return "none";
    if (job.trace_shifts != "auto") return job.trace_shifts;
    return trace_shift_method_for_obstype(header.get_string("OBSTYPE").value_or(""));
}

template <typename View>
TraceShiftOutcome run_trace_shift_step(const Job& job, const FitsHeader& image_header,
                                       const View& image, const GaussHermitePsf& psf,
                                       std::vector<std::uint8_t>& psf_bytes)
{
    TraceShiftOutcome out;
    out.method = trace_shift_method(job, image_header);
    if (out.method == "none") return out;
    const double c0 = thread_cpu_seconds();
    auto measured =
        measure_trace_shifts(image, psf, desi_proc_trace_shift_options(out.method), job.preproc);
    // Why the step failed, kept apart from `measured`, whose value is moved out.
    Status failure = measured.is_ok() ? Status::ok() : measured.status();
    if (measured.is_ok()) {
        out.result = std::move(measured).value();
        auto shifted = shifted_psf_bytes(psf_bytes, job.psf, out.result, {job.psf, job.preproc});
        if (shifted.is_ok()) {
            psf_bytes = std::move(shifted).value();
            if (!job.shifted_psf.empty()) {
                // The frame's folder, which the writer would make later.
                std::error_code ec;
                std::filesystem::create_directories(
                    std::filesystem::path(job.shifted_psf).parent_path(), ec);
                const Status written = write_psf_bytes(job.shifted_psf, psf_bytes);
                if (!written.is_ok()) {
                    logger()->warn("trace-shifts shifted PSF not written: {}", written.to_string());
                }
            }
        } else {
            failure = shifted.status();
        }
    }
    out.cpu_seconds = thread_cpu_seconds() - c0;
    if (!failure.is_ok()) {
        out.failed = true;
        out.reason = failure.message();
        logger()->error(
            "trace-shifts failed method={} reason=\"{}\": the frame is extracted with the input "
            "PSF and flagged TRSHIFT='FAILED'",
            out.method, out.reason);
        return out;
    }
    logger()->info("trace-shifts method={} meandx={:+.4f} meandy={:+.4f} cpu_s={:.2f}", out.method,
                   out.result.mean_dx, out.result.mean_dy, out.cpu_seconds);
    return out;
}

template TraceShiftOutcome run_trace_shift_step(const Job&, const FitsHeader&,
                                                const Float32ImageView&, const GaussHermitePsf&,
                                                std::vector<std::uint8_t>&);
template TraceShiftOutcome run_trace_shift_step(const Job&, const FitsHeader&, const ImageView&,
                                                const GaussHermitePsf&, std::vector<std::uint8_t>&);

void record_trace_shifts(const TraceShiftOutcome& o, FitsHeader& header)
{
    header.set_string("TRSHIFT", o.failed ? "FAILED" : o.method,
                      "trace shifts: sky, continuum, none or FAILED");
    if (o.failed) {
        header.set_string("TRSHFAIL", o.reason.substr(0, 68), "why the traces were not shifted");
        return;
    }
    if (o.method == "none") return;
    for (const TraceShiftKey& key : trace_shift_summary_keys(o.result)) {
        header.set_double(key.name, key.value, key.comment);
    }
}

std::vector<std::string> trace_shift_fields(const TraceShiftOutcome& o)
{
    if (o.failed) return {"trace_shifts", "failed", "trace_shift_error", o.reason};
    if (o.method == "none") return {"trace_shifts", "none"};
    const TraceShiftResult& r = o.result;
    return {"trace_shifts",  o.method,        "meandx",        fixed(r.mean_dx), "mindx",
            fixed(r.min_dx), "maxdx",         fixed(r.max_dx), "meandy",         fixed(r.mean_dy),
            "mindy",         fixed(r.min_dy), "maxdy",         fixed(r.max_dy)};
}

void note_trace_shifts(ControlPlane& plane, const Job& job, const std::vector<std::string>& fields)
{
    auto noted = plane.note_fields(job, fields);
    if (!noted.is_ok() || noted.value() != Fence::applied) {
        logger()->warn("trace shifts not recorded in Redis: {}",
                       noted.is_ok() ? to_string(noted.value()) : noted.status().to_string());
    }
}

}  // namespace ex2d::service
