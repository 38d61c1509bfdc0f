// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The CUDA emulation's stand-in for cuda_runtime.h: the runtime API and the device builtins.

#include "cuda_runtime_api.h"
#include "ex2d_emulation/device_builtins.hpp"
