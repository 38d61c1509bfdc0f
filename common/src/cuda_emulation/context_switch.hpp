// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The smallest context switch for the emulated CUDA threads (x86-64 System V): the
// callee-saved general registers and the stack pointer. A portable swapcontext() also saves
// the signal mask, a system call on every switch.

#if !defined(__x86_64__)
#error "the CUDA emulation switches contexts with x86-64 code (context_switch.cpp)"
#endif

namespace ex2d::emulation {

/// Saves the calling context's stack pointer in *save_sp and continues the context whose
/// stack pointer is load_sp.
extern "C" void ex2d_emulation_switch_context(void** save_sp, void* load_sp);

/// A stack pointer that, when switched to, calls entry(argument) on the stack whose top
/// (highest address) is stack_top. entry must never return.
void* prepare_context(void* stack_top, void (*entry)(void*), void* argument);

}  // namespace ex2d::emulation
