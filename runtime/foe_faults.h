/* foe_faults.h: which faulting addresses lie far from every mapping of the process, shared by the worker's
 * runtime (foe_runtime.c) and the shipped binaries' driver (foe_confirm.c). An access there is a null pointer
 * followed, plus an index (code reading through a context pointer that foe passes as zeros): x86 faults are
 * precise, so the access did nothing and the process can go on with its next call. One near a mapping may be a
 * loop that wrote past its buffer first, and ends the process. */
#ifndef FOE_FAULTS_H
#define FOE_FAULTS_H
#include <errno.h>
#include <stdint.h>

/* The two stretches of address space far from every mapping, set at start-up (nothing survives until then):
 * below the executable, and between its data (with the heap above it) and the libraries and the stack. */
static uintptr_t g_low_end, g_gap_start, g_gap_end;

extern char __executable_start, _end;

static void foe_find_mappings(void) {
    const uintptr_t near = (uintptr_t)1 << 30;
    uintptr_t start = (uintptr_t)&__executable_start, data_end = (uintptr_t)&_end;
    /* errno lives in the thread's TLS block, which the loader maps beside the libraries (the address of a libc
     * function may be its PLT entry in the executable). */
    uintptr_t libraries = (uintptr_t)&errno, stack = (uintptr_t)&start;
    uintptr_t above = libraries < stack ? libraries : stack;
    g_low_end = start > (16u << 20) ? start - (16u << 20) : start / 2;
    if (above > data_end + 4 * near + near) {
        g_gap_start = data_end + 4 * near;
        g_gap_end = above - near;
    }
}

static int foe_far_from_mappings(uintptr_t addr) {
    /* Above 2^56 is the kernel's half of the address space (a null pointer less a small offset: an index of -1). */
    return addr < g_low_end || (addr > g_gap_start && addr < g_gap_end) || addr >= ((uintptr_t)1 << 56);
}
#endif
