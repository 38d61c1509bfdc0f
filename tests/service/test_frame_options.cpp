// SPDX-License-Identifier: BSD-3-Clause
// The options a frame carries through the fleet, as JSON: the wavelength grid goes through
// the same parser as ex2d's -w; and where the frame's trace-shift step runs.
#include <gtest/gtest.h>

#include "ex2d/service/frame_messages.hpp"
#include "ex2d/service/wire.hpp"

namespace ex2d::service {
namespace {

TEST(FrameOptions, WavelengthRoundTrips)
{
    ExtractionOptions in;
    in.wmin = 5760;
    in.wmax = 7620;
    in.dw = 0.8;
    const auto out = options_from_json(options_to_json(in));
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    EXPECT_EQ(out.value().wmin, 5760.0);
    EXPECT_EQ(out.value().wmax, 7620.0);
    EXPECT_EQ(out.value().dw, 0.8);
}

TEST(FrameOptions, WavelengthWithTrailingGarbageIsRefused)
{
    for (const std::string w : {"5760,7620,0.8abc", "1,2,3,4", "7620,5760,0.8", "5760,7620,nan"}) {
        const auto out = options_from_json(R"({"wavelength": ")" + w + R"("})");
        ASSERT_FALSE(out.is_ok()) << w;
        EXPECT_EQ(out.status().code(), StatusCode::format_error);
        EXPECT_EQ(out.status().message(),
                  "options: wavelength must be 'wmin,wmax,dw' with "
                  "wmax > wmin and dw > 0, got '" +
                      w + "'");
    }
}

FrameInputs small_frame()
{
    FrameInputs in;
    in.job = Job::from_fields({{"job", "nightly/00000001/r0"},
                               {"lane", "nightly"},
                               {"campaign", "nightly"},
                               {"night", "20261122"},
                               {"expid", "00000001"},
                               {"camera", "r0"},
                               {"preproc", "/p.fits"},
                               {"psf", "/psf.fits"},
                               {"output", "/o.fits"},
                               {"options", "{}"},
                               {"trace_shifts", "auto"}});
    in.job.stream = "ex2d:jobs:nightly";
    in.job.stream_id = "1-0";
    in.job.epoch = 1;
    in.ny = 2;
    in.nx = 3;
    in.image.assign(6, 1.0);
    in.weights.assign(6, 1.0);
    in.psf_file = {1, 2, 3};
    return in;
}

Result<FrameInputs> round_trip(const wire::OutgoingMessage& message)
{
    wire::DecodeError error;
    auto decoded = wire::decode(wire::encode(message), error);
    if (!decoded) return Status::format(error.detail);
    return decode_frame(*decoded);
}

TEST(FrameOptions, TraceShiftPlacementTravelsAndDefaultsToTheReader)
{
    FrameInputs in = small_frame();
    in.trace_shifts_in = "worker";
    auto worker = round_trip(encode_frame(in));
    ASSERT_TRUE(worker.is_ok()) << worker.status().to_string();
    EXPECT_EQ(worker.value().trace_shifts_in, "worker");
    EXPECT_EQ(worker.value().job.trace_shifts, "auto");
    EXPECT_TRUE(worker.value().planes_f32) << "1.0 travels as f32";

    // A FRAME from a reader before the setting: the reader ran the step.
    wire::OutgoingMessage old = encode_frame(small_frame());
    old.meta.erase("trace_shifts_in");
    auto reader = round_trip(old);
    ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
    EXPECT_EQ(reader.value().trace_shifts_in, "reader");

    wire::OutgoingMessage bad = encode_frame(small_frame());
    bad.meta["trace_shifts_in"] = "writer";
    auto refused = round_trip(bad);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().message(),
              "FRAME: trace_shifts_in 'writer' is not reader or worker");
}

}  // namespace
}  // namespace ex2d::service
