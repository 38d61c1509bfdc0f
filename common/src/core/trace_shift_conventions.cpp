// SPDX-License-Identifier: BSD-3-Clause
// The trace-shift results' names and desi_proc's choices of method and degrees: what the files
// (ex2d::io), the fleet and the tool share, apart from the measurement (ex2d::traceshift).
#include <cctype>
#include <string>

#include "ex2d/night_sky_lines.hpp"
#include "ex2d/trace_shifts.hpp"

namespace ex2d {

std::array<TraceShiftKey, 6> trace_shift_summary_keys(const TraceShiftResult& r)
{
    return {{{"MEANDX", r.mean_dx, "px, mean trace shift in x"},
             {"MINDX", r.min_dx, "px, min trace shift in x"},
             {"MAXDX", r.max_dx, "px, max trace shift in x"},
             {"MEANDY", r.mean_dy, "px, mean trace shift in y"},
             {"MINDY", r.min_dy, "px, min trace shift in y"},
             {"MAXDY", r.max_dy, "px, max trace shift in y"}}};
}

const char* large_shift_scan_name(LargeShiftScan scan)
{
    switch (scan) {
        case LargeShiftScan::continuum:
            return "continuum";
        case LargeShiftScan::arc_lamps:
            return "arc_lamps";
        case LargeShiftScan::none:
            break;
    }
    return "none";
}

std::string trace_shift_method_for_obstype(const std::string& obstype)
{
    std::string t;
    for (char c : obstype) {
        if (!std::isspace(static_cast<unsigned char>(c))) {
            t += char(std::toupper(static_cast<unsigned char>(c)));
        }
    }
    if (t == "SCIENCE" || t == "SKY") return "sky";
    if (t == "FLAT" || t == "TESTFLAT" || t == "TWILIGHT") return "continuum";
    return "none";
}

TraceShiftOptions desi_proc_trace_shift_options(const std::string& method)
{
    TraceShiftOptions opt;
    opt.degxx = 2;
    opt.degxy = 0;
    if (method == "sky") {
        opt.degyx = 2;
        opt.degyy = 0;
        opt.lines = night_sky_lines();
    }
    return opt;
}

}  // namespace ex2d
