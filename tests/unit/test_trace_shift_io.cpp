// SPDX-License-Identifier: BSD-3-Clause
// The trace-shift step's files: the shifted PSF on disk and in memory, the offsets table and
// the reference spectrum.
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "ex2d/psf_io.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "ex2d/trace_shift_io.hpp"
#include "test_paths.hpp"

namespace ex2d {
namespace {

TraceShiftResult moved_traces(const GaussHermitePsf& psf)
{
    TraceShiftResult r;
    r.xtrace = psf.xtrace;
    r.ytrace = psf.ytrace;
    for (int f = 0; f < psf.nspec(); ++f) {
        r.xtrace.coef[size_t(f) * r.xtrace.ncoef] += 0.25;
        r.ytrace.coef[size_t(f) * r.ytrace.ncoef] -= 0.5;
    }
    r.mean_dx = r.min_dx = r.max_dx = 0.25;
    r.mean_dy = r.min_dy = r.max_dy = -0.5;
    return r;
}

std::vector<std::uint8_t> bytes_of(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(TraceShiftIo, ShiftedPsfOnDiskAndInMemoryAreTheSame)
{
    test::TempDir dir;
    const std::string input = dir.file("psfnight.fits"), output = dir.file("psf.fits");
    const GaussHermitePsf psf = make_synthetic_psf(Arm::z, 3);
    ASSERT_TRUE(write_psf(input, psf).is_ok());
    const TraceShiftResult r = moved_traces(psf);
    ASSERT_TRUE(write_shifted_psf(input, output, r, {input, "preproc.fits"}).is_ok());
    auto in_memory = shifted_psf_bytes(bytes_of(input), input, r, {input, "preproc.fits"});
    ASSERT_TRUE(in_memory.is_ok()) << in_memory.status().to_string();
    EXPECT_EQ(in_memory.value(), bytes_of(output));

    auto back = read_psf_bytes(in_memory.value(), "shifted");
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back.value().xtrace.coef, r.xtrace.coef);
    EXPECT_EQ(back.value().ytrace.coef, r.ytrace.coef);
    EXPECT_EQ(back.value().params.at("GH-1-1").coef, psf.params.at("GH-1-1").coef);
    EXPECT_EQ(*back.value().psf_header.get_double("MEANDY"), -0.5);
    EXPECT_EQ(back.value().psf_header.get_string("IN_IMAGE").value_or(""), "preproc.fits");
}

TEST(TraceShiftIo, NotAPsfIsNamed)
{
    test::TempDir dir;
    const std::string input = dir.file("notapsf.fits");
    std::ofstream(input) << "SIMPLE  =                    T";
    const Status s =
        write_shifted_psf(input, dir.file("out.fits"), TraceShiftResult{}, {input, "x"});
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("notapsf.fits"), std::string::npos) << s.message();
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.fits")));
}

TEST(TraceShiftIo, OffsetsTableAsCsv)
{
    test::TempDir dir;
    std::vector<TraceOffset> offsets(2);
    offsets[0] = {1, 12, 6500.5, 100.25, 2000.5, 0.125, 0.01, true};
    offsets[1] = {0, 13, 6302.0, 108.0, 1500.0, -0.5, 0.02, false};
    ASSERT_TRUE(write_trace_offsets(dir.file("offsets.csv"), offsets).is_ok());
    std::ifstream in(dir.file("offsets.csv"));
    std::string header, first, second;
    std::getline(in, header);
    std::getline(in, first);
    std::getline(in, second);
    EXPECT_EQ(header, "AXIS,WAVELENGTH,FIBER,X,Y,DELTA,ERROR,USED");
    EXPECT_EQ(first, "1,6500.5,12,100.25,2000.5,0.125,0.01,1");
    EXPECT_EQ(second, "0,6302,13,108,1500,-0.5,0.02,0");
    ASSERT_TRUE(write_trace_offsets(dir.file("offsets.fits"), offsets).is_ok());
}

TEST(TraceShiftIo, ReferenceSpectrumErrorsNameFileAndLine)
{
    test::TempDir dir;
    const std::string path = dir.file("spec-sky.dat");
    std::ofstream(path) << "# wave flux\n5000 1\n5001 oops\n";
    auto r = read_reference_spectrum(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("spec-sky.dat: line 3"), std::string::npos)
        << r.status().message();
    auto missing = read_reference_spectrum(dir.file("none.dat"));
    ASSERT_FALSE(missing.is_ok());
    EXPECT_NE(missing.status().message().find("none.dat"), std::string::npos);
}

TEST(TraceShiftPolicy, DesiProcMethodByObstype)
{
    EXPECT_EQ(trace_shift_method_for_obstype("SCIENCE"), "sky");
    EXPECT_EQ(trace_shift_method_for_obstype("sky "), "sky");
    EXPECT_EQ(trace_shift_method_for_obstype("FLAT"), "continuum");
    EXPECT_EQ(trace_shift_method_for_obstype("TESTFLAT"), "continuum");
    EXPECT_EQ(trace_shift_method_for_obstype("TWILIGHT"), "continuum");
    EXPECT_EQ(trace_shift_method_for_obstype("ARC"), "none");
    EXPECT_EQ(trace_shift_method_for_obstype("ZERO"), "none");
    EXPECT_EQ(trace_shift_method_for_obstype(""), "none");
    const TraceShiftOptions sky = desi_proc_trace_shift_options("sky");
    EXPECT_EQ(sky.degxx, 2);
    EXPECT_EQ(sky.degyx, 2);
    EXPECT_EQ(sky.degxy + sky.degyy, 0);
    EXPECT_FALSE(sky.lines.empty());
    EXPECT_TRUE(desi_proc_trace_shift_options("continuum").lines.empty());
}

}  // namespace
}  // namespace ex2d
