// SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <string>
#include <vector>

#include "ex2d/preproc.hpp"
#include "ex2d/service/buffer_pool.hpp"
#include "ex2d/service/frame_messages.hpp"

namespace ex2d::reader {

/// A frame read, checked and encoded as a FRAME message, ready to send.
struct LoadedFrame {
    wire::OutgoingMessage message;
    double read_seconds = 0;
    /// The trace-shift step's outcome for the frame's Redis hash (trace_shift_fields); empty
    /// when the worker runs the step.
    std::vector<std::string> trace_shift_fields;
};

/// Reads and checks a job's preproc and PSF files as `ex2d extract` would, refusing what it
/// refuses, runs the trace-shift step unless the workers run it, and encodes the FRAME. IMAGE
/// and the weights go out as float32 from buffers that return to this loader once sent, so
/// that a reader reuses the same memory frame after frame.
class FrameLoader {
public:
    /// trace_shifts_in: reader.trace_shifts_in, "reader" or "worker"; input_read:
    /// reader.input_read.
    FrameLoader(std::string reader_name, std::string trace_shifts_in = "reader",
                InputRead input_read = InputRead::automatic)
        : reader_name_(std::move(reader_name)),
          trace_shifts_in_(std::move(trace_shifts_in)),
          input_read_(input_read)
    {
    }
    Result<LoadedFrame> load(const service::Job& job);

private:
    /// A frame whose planes are not plain float32 (not DESI's layout) through read_preproc.
    Result<service::FrameInputs> load_as_float64(const service::Job& job);

    std::string reader_name_;
    std::string trace_shifts_in_;
    // A few frames in flight (the workers' credits) plus the one being read.
    service::BufferPool<float> planes_{8};
    LargeArray<std::uint32_t> mask_scratch_;
    InputRead input_read_;
    /// The preproc file's bytes when read with O_DIRECT, kept from frame to frame.
    LargeArray<unsigned char> file_buffer_;
};

}  // namespace ex2d::reader
