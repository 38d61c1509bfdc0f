// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// One frame extracted by several Python processes (ex2d_desi's MPI ranks): the Python object
// that exchanges the parts, seen by the extract command as a tool::FrameShare.

#include <optional>
#include <vector>

#include <pybind11/pybind11.h>

#include "commands.hpp"

namespace ex2d::python {

/// `share` has `index` and `count` (this process's place among the frame's extractors) and
/// `gather(part)`, which gets this process's part as a dict of plain values and numpy arrays
/// (picklable, for MPI) and returns every part, in any order, where this process writes the
/// frame, None elsewhere. Built and destroyed with the GIL held; its calls take the GIL.
class PythonFrameShare final : public tool::FrameShare {
public:
    explicit PythonFrameShare(pybind11::object share);
    BundleShare bundles(int nbundle) const override;
    std::optional<std::vector<ExtractedFrame>> gather(ExtractedFrame part) override;

private:
    pybind11::object share_;
    int index_ = 0;
    int count_ = 1;
};

/// Makes numpy's C API ready while the importing thread holds the GIL: pybind11 sets it up
/// on first use in a function-local static, and two extracting threads that first use it at
/// once in gather would deadlock, one holding the static's guard and waiting for the GIL, the
/// other holding the GIL and waiting for the guard.
void prepare_numpy();

/// A part as the dict gather passes, and back; a dict that is not one raises ValueError.
pybind11::dict part_to_python(const ExtractedFrame& part);
ExtractedFrame part_from_python(const pybind11::handle& part);

}  // namespace ex2d::python
