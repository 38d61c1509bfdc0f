// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file indefinite_patch.hpp
/// A seam of the backends for tests, in builds with test hooks only (EX2D_TEST_HOOKS). Valid
/// inputs always give a positive definite iCov, so tests reach the factorization-failure path
/// of every backend by naming one patch whose iCov is made indefinite after regularization
/// (its first diagonal element set to -1), in the first solve and in the retry. Without test
/// hooks, is_forced_indefinite is constant false and the backends compile the seam away.

#include "ex2d/extraction_types.hpp"

namespace ex2d::test_hooks {

#if EX2D_TEST_HOOKS

/// Makes the iCov of the patch at `patch`'s (bundle, subbundle, wave_step) indefinite in
/// every extraction of every backend until clear_indefinite_patch(). Set it before an
/// extraction starts, not during one.
void force_indefinite_patch(const PatchGeometry& patch);
void clear_indefinite_patch();
/// Whether `patch` is the one force_indefinite_patch named.
bool is_forced_indefinite(const PatchGeometry& patch);

#else

constexpr bool is_forced_indefinite(const PatchGeometry& /*patch*/)
{
    return false;
}

#endif

}  // namespace ex2d::test_hooks
