// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The last step of a write: the temporary file takes the final name without ever replacing
// a frame of the same job (docs/redis-schema.md, "Idempotent outputs").

#include <functional>
#include <string>

#include "ex2d/fits_header.hpp"
#include "ex2d/status.hpp"

namespace ex2d::writer {

/// Renames `from` to `to` unless `to` exists (then errno is EEXIST and nothing changes):
/// renameat2(RENAME_NOREPLACE), or link + unlink on file systems without it. 0 or -1.
int rename_no_replace(const std::string& from, const std::string& to);

enum class Placement {
    placed,        ///< the temporary now has the final name
    already_there  ///< the final name holds this job's frame, written by another writer
};

/// True when two FLUX headers carry the same provenance (job, inputs, ex2d version).
bool same_provenance(const FitsHeader& a, const FitsHeader& b);

/// Gives `tmp` the name `final_path`. A final file of the same provenance as `ours` is never
/// replaced (already_there; `tmp` is left for the caller to remove). One of another
/// provenance is an old output: while `still_ours` holds, it is moved aside to `aside` (a
/// temporary name of this writer), checked, and removed once `tmp` is in place. A `tmp` that is
/// gone while `still_ours` no longer holds (another writer's sweep removed it when this one
/// stalled past its heartbeat) is a fenced-out writer: an invalid_argument status saying so,
/// as any lost lease is.
Result<Placement> place_final(const std::string& tmp, const std::string& final_path,
                              const std::string& aside, const FitsHeader& ours,
                              const std::function<bool()>& still_ours);

}  // namespace ex2d::writer
