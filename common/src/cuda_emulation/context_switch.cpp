// SPDX-License-Identifier: BSD-3-Clause
#include "context_switch.hpp"

#include <cstdint>

// Frame of a suspended context, from its saved stack pointer up: r15, r14, r13, r12, rbx, rbp,
// return address. The SSE and x87 control words, callee-saved too, are not switched: nothing
// in the emulation or the kernels changes them, and loading them stalls the pipeline.
asm(R"(
    .text
    .globl ex2d_emulation_switch_context
    .type ex2d_emulation_switch_context, @function
ex2d_emulation_switch_context:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size ex2d_emulation_switch_context, .-ex2d_emulation_switch_context

    .globl ex2d_emulation_context_start
    .type ex2d_emulation_context_start, @function
ex2d_emulation_context_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size ex2d_emulation_context_start, .-ex2d_emulation_context_start
)");

extern "C" void ex2d_emulation_context_start();

namespace ex2d::emulation {

void* prepare_context(void* stack_top, void (*entry)(void*), void* argument)
{
    // After the first switch's `ret`, the stack pointer is stack_top rounded down to 16, as
    // the ABI wants it before the call into entry.
    auto top = reinterpret_cast<std::uintptr_t>(stack_top) & ~std::uintptr_t(15);
    // The new stack is an address computed as an integer: no pointer it could come from.
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    auto* frame = reinterpret_cast<std::uint64_t*>(top) - 8;
    frame[1] = 0;                                          // r15
    frame[2] = 0;                                          // r14
    frame[3] = reinterpret_cast<std::uint64_t>(entry);     // r13
    frame[4] = reinterpret_cast<std::uint64_t>(argument);  // r12
    frame[5] = 0;                                          // rbx
    frame[6] = 0;                                          // rbp
    frame[7] = reinterpret_cast<std::uint64_t>(&ex2d_emulation_context_start);
    return frame + 1;
}

}  // namespace ex2d::emulation
