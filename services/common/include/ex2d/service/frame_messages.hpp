// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file frame_messages.hpp
/// The FRAME (reader -> worker) and RESULT (worker -> writer) messages of docs/protocol.md,
/// built from and decoded into the engine's types. A message that lacks a required field or
/// whose arrays disagree with its shapes decodes to a format_error naming the field.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ex2d/badcolumns.hpp"
#include "ex2d/extraction_types.hpp"
#include "ex2d/fits_header.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/wire.hpp"
#include "ex2d/status.hpp"

namespace ex2d::service {

/// Extraction options as stored in a job's `options` field (JSON), desi_extract_spectra's
/// names: wavelength "wmin,wmax,dw", specmin, nspec, psferr, regularize, bundlesize,
/// nsubbundles, nwavestep, wavepad, wavepad_frac, pixpad_frac. Unknown names are an error.
Result<ExtractionOptions> options_from_json(const std::string& text);
std::string options_to_json(const ExtractionOptions& options);

/// What a reader hands a worker.
struct FrameInputs {
    Job job;
    std::string reader;
    FitsHeader image_header;
    FitsTableBlob fibermap;
    int ny = 0;
    int nx = 0;
    LargeArray<double> image;    ///< [ny][nx] electrons
    LargeArray<double> weights;  ///< [ny][nx] ivar with the mask rule applied
    /// decode_frame: image and weights came as f32, so every value is a float32 one.
    bool planes_f32 = false;
    std::vector<std::uint8_t> psf_file;
    std::string preproc_checksum, psf_checksum;
    double read_seconds = 0;
    /// "none" (the job has no bad-column step), "missing" (its file does not exist) or "read"
    /// (`badcolumns` holds the table).
    std::string badcolumn_table = "none";
    BadColumns badcolumns;
    /// Where the trace-shift step runs (reader.trace_shifts_in): "reader" (done; psf_file is
    /// the PSF to extract with) or "worker" (psf_file is the job's input PSF).
    std::string trace_shifts_in = "reader";
};
wire::OutgoingMessage encode_frame(FrameInputs inputs);
/// The same with image and weights already as parts ([ny][nx], f32 or f64; the reader's pooled
/// float32 buffers); `inputs.image` and `inputs.weights` are then not used.
wire::OutgoingMessage encode_frame(FrameInputs inputs, wire::ArrayPart image,
                                   wire::ArrayPart weights);
/// image_memory and weights_memory: planes of an earlier frame to decode into (a worker reuses
/// its memory instead of having fresh pages zeroed for every frame).
Result<FrameInputs> decode_frame(const wire::IncomingMessage& message,
                                 LargeArray<double> image_memory = {},
                                 LargeArray<double> weights_memory = {});

/// What a worker hands a writer.
struct FrameOutputs {
    Job job;
    std::string worker, device;
    FitsHeader image_header, psf_header;
    FitsTableBlob fibermap;
    std::string preproc_checksum, psf_checksum;
    ExtractionOptions options;
    StoredFrame frame;  ///< in the file's precision, SCORES computed on the worker
    long npatch = 0;
    long npatch_retried = 0;
    long npatch_failed = 0;
    double read_seconds = 0;
    double extract_seconds = 0;
    /// "none", "missing" or "applied": whether frame.mask and fibermap carry the bad-column
    /// step ("" from a RESULT that does not say).
    std::string badcolumn_mask = "none";
    long long badcolumn_bins = 0;
    long badcolumn_badamp_fibers = 0;
};
wire::OutgoingMessage encode_result(FrameOutputs outputs);
Result<FrameOutputs> decode_result(const wire::IncomingMessage& message);

/// The job's fields as meta JSON and back (epoch and stream id travel in the header).
nlohmann::json job_to_json(const Job& job);
Result<Job> job_from_message(const wire::IncomingMessage& message);

}  // namespace ex2d::service
