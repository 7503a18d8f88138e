/* foe_confirm.c: the driver of foe's confirmation harness (server/foe-analysis/src/confirm/harness.rs). It is
 * linked with the analysed file compiled by clang exactly as a build ships it (no instrumentation, `-g` added)
 * plus a generated table of typed thunks, calls one function per request and replies with the sticky exception
 * flags (fetestexcept) and the exception trace, recorded by trapping (FPSpy's method, inside the process).
 *
 * Protocol, one request per line on stdin: `INDEX W0 W1 ...` (the thunk index, then one hexadecimal 64-bit word
 * per parameter, as the instrumented runner encodes them), optionally after `~XX `: the byte the stack below the
 * call is filled with first (0 without it), so that a call that reads a local it never wrote reads the same in
 * every run, and a second run with another fill tells such a call apart. One reply per line on stdout, flushed:
 * `r FLAGS RESULT OUTPUT... EVENT...` (the raised exceptions as bits invalid 1, divide-by-zero 2, overflow 4,
 * underflow 8, and the result's bits, both hexadecimal; then `o:PARAM:OFFSET:WORD` for each 8-byte word of a
 * pointer parameter's buffer the call changed, hexadecimal; then the trace in order), `s FLAGS NAME EVENT...` when the call
 * reached a function no file of the project defines (the harness links a stub for it that calls
 * foe_confirm_stop: the call is left there, as the instrumented worker stops its run at it, and nothing of the
 * callee runs), or `t` when the call did not return within the time limit (argv[1], milliseconds of the
 * process's CPU time, which the load does not change; or FOE_WALL_FACTOR times as long by the wall clock, for a
 * call that waits without using the CPU); the process then exits. A call that accessed an address far from every
 * mapping (foe_faults.h) replies `c SIGNAL` and the process goes on; any other crash ends the process without a
 * reply, and the caller restarts it after that request. An event is `KINDS@OFFSET` (the kinds as FLAGS counts them, the
 * instruction's address in the executable less its load bias, i.e. as the debug info counts it), or
 * `KINDS@CALL@NAME` for an instruction in a shared library (libm): CALL is the return address of the first
 * frame in the executable less its load bias, minus one (`-` when the unwinder found none), NAME the library
 * symbol dladdr names, else the library's file name (`?` when neither). A last word `+N` says at least N more
 * events followed, hexadecimal (the trace holds FOE_TRACE_CAP events; trapping stops at the first event past them,
 * or after FOE_TRAP_CAP traps in one call, so N is a lower bound).
 *
 * Tracing: before each call the status flags are cleared and invalid, divide-by-zero, overflow and underflow
 * unmasked in MXCSR (denormal-operand and inexact stay masked). An SSE instruction that raises one of them
 * faults (SIGFPE): the handler remembers its address and the mask bits, masks the four in the saved MXCSR,
 * clears the status flags there and sets the trap flag, so the instruction runs again masked, producing its
 * masked result (flush-to-zero included) and the flags a masked run sets, and the next instruction raises
 * SIGTRAP. That handler records the event with the kinds the masked re-execution set (so an exact tiny result,
 * which traps when underflow is unmasked but sets no flag when masked, is no event), clears the trap flag, puts
 * back the status flags from before the fault plus the new ones (the sticky flags are what an untraced run
 * leaves, and code that reads them sees the same) and restores the mask bits as they were at the fault: code
 * that masked exceptions itself (feholdexcept in libm) stays masked, and what it raises then is no event.
 * x87 instructions are not traced (their flags count in FLAGS only).
 *
 * Compiled without fast math; it does no floating-point work itself, so the floating-point environment the
 * build's start-up code set (flush-to-zero and denormals-are-zero when linked with -ffast-math) is the one the
 * function runs in. */
#define _GNU_SOURCE
#include "foe_faults.h"
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <fenv.h>
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

typedef void (*foe_confirm_thunk)(const unsigned long long *words, unsigned long long *result);
extern foe_confirm_thunk const foe_confirm_table[];
extern const int foe_confirm_count;

#define FOE_MAX_WORDS 256
#define FOE_SHIPPED_OUTPUTS 256 /* SHIPPED_OUTPUTS in confirm/thunks.rs */
#define FOE_TRACKED (FE_INVALID | FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW)
#define FOE_TRACE_CAP 256
#define FOE_TRAP_CAP 4096
#define FOE_FRAMES 64
#define FOE_WALL_FACTOR 8 /* WALL_FACTOR in exec/worker.rs */

/* MXCSR: status flags (bits 0-5: IE DE ZE OE UE PE) and masks (bits 7-12: IM DM ZM OM UM PM). */
#define MX_STATUS 0x3fu
#define MX_TRACKED_STATUS 0x1du /* IE ZE OE UE */
#define MX_TRACKED_MASKS 0xe80u /* IM ZM OM UM */
#define EFLAGS_TF 0x100

struct foe_event {
    uintptr_t addr;   /* the faulting instruction (run-time address) */
    uintptr_t caller; /* for an address outside the executable: the first return address inside it, or 0 */
    unsigned kinds;
};

static int g_reply_fd = 1;
static uintptr_t g_bias, g_exe_lo, g_exe_hi;
static struct foe_event g_events[FOE_TRACE_CAP];
static volatile int g_count, g_dropped, g_traps;
static volatile int g_stepping;
static uintptr_t g_fault_addr, g_fault_caller;
static unsigned g_fault_masks, g_fault_status;
/* The tracked status flags as the last SIGTRAP left them (0 at the start of a call): set before any later fault. */
static unsigned g_known_status;

/* Where a call of the user's code returns to when it reaches a stub (foe_confirm_stop), and the stub's name. */
static sigjmp_buf g_call;
static const char *volatile g_stopped_at;

/* Called by the stubs the harness links for functions no file defines: ends the current call there. */
void foe_confirm_stop(const char *name) {
    g_stopped_at = name;
    siglongjmp(g_call, 1);
}

/* The stack the call's frames will take, filled with `fill` before each call (see the protocol). */
#define FOE_SCRIBBLE_BYTES (64 * 1024)

static __attribute__((noinline)) void scribble_stack(int fill) {
    unsigned char area[FOE_SCRIBBLE_BYTES];
    memset(area, fill, sizeof area);
    __asm__ volatile("" : : "r"(area) : "memory");
}

/* Set while a call of the user's code runs: a fault far from every mapping then ends the call, not the process. */
static volatile sig_atomic_t g_in_call;

static void on_segv(int sig, siginfo_t *info, void *ctx) {
    if (g_in_call && info->si_code == SEGV_MAPERR && foe_far_from_mappings((uintptr_t)info->si_addr)) {
        /* The access did nothing (x86 faults are precise): the signal mask of the interrupted code comes back
         * and the call ends as a crash; its frames are discarded. */
        sigprocmask(SIG_SETMASK, &((ucontext_t *)ctx)->uc_sigmask, NULL);
        siglongjmp(g_call, 2);
    }
    /* Any other fault: the default action on the same instruction again (the process ends without a reply). */
    signal(sig, SIG_DFL);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char reply[] = "t\n";
    ssize_t n = write(g_reply_fd, reply, sizeof reply - 1);
    (void)n;
    _exit(0);
}

/* Arms the one-shot timer `which` to fire after `ms` milliseconds of its clock (0 disarms it). */
static void arm(int which, long ms) {
    struct itimerval timer;
    memset(&timer, 0, sizeof timer);
    timer.it_value.tv_sec = ms / 1000;
    timer.it_value.tv_usec = (ms % 1000) * 1000;
    setitimer(which, &timer, NULL);
}

static int in_exe(uintptr_t a) { return a >= g_exe_lo && a < g_exe_hi; }

/* MXCSR status bits to FLAGS bits. */
static unsigned kinds_of(unsigned status) {
    return (status & 0x01 ? 1u : 0u) | (status & 0x04 ? 2u : 0u) | (status & 0x08 ? 4u : 0u) |
           (status & 0x10 ? 8u : 0u);
}

static void on_fpe(int sig, siginfo_t *info, void *ctx) {
    (void)sig;
    ucontext_t *uc = ctx;
    unsigned mxcsr = uc->uc_mcontext.fpregs ? uc->uc_mcontext.fpregs->mxcsr : 0;
    /* Integer division, or not an SSE exception this driver unmasked: what an untraced run does (a crash). */
    if (info->si_code == FPE_INTDIV || info->si_code == FPE_INTOVF || !uc->uc_mcontext.fpregs ||
        (mxcsr & MX_TRACKED_STATUS & ~(mxcsr >> 7)) == 0 || g_stepping)
        _exit(128 + SIGFPE);
    uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    g_fault_addr = rip;
    g_fault_caller = 0;
    if (!in_exe(rip) && g_count < FOE_TRACE_CAP) {
        /* In a shared library: the first frame in the executable after the faulting one is the call site. */
        void *frames[FOE_FRAMES];
        int n = backtrace(frames, FOE_FRAMES), i = 0;
        while (i < n && (uintptr_t)frames[i] != rip)
            i++;
        for (i++; i < n; i++)
            if (in_exe((uintptr_t)frames[i])) {
                g_fault_caller = (uintptr_t)frames[i];
                break;
            }
    }
    g_fault_masks = mxcsr & MX_TRACKED_MASKS;
    /* The flags from before the fault, without those the faulting attempt set (its unmasked exceptions not known
     * to be set before): the re-execution decides them (a tiny exact result sets underflow only when unmasked). */
    g_fault_status = mxcsr & MX_STATUS & ~(MX_TRACKED_STATUS & ~(mxcsr >> 7) & ~g_known_status);
    uc->uc_mcontext.fpregs->mxcsr = (mxcsr & ~MX_STATUS) | MX_TRACKED_MASKS;
    uc->uc_mcontext.gregs[REG_EFL] |= EFLAGS_TF;
    g_stepping = 1;
}

static void on_trap(int sig, siginfo_t *info, void *ctx) {
    (void)sig;
    (void)info;
    ucontext_t *uc = ctx;
    if (!g_stepping || !uc->uc_mcontext.fpregs)
        _exit(128 + SIGTRAP);
    g_stepping = 0;
    uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)EFLAGS_TF;
    unsigned mxcsr = uc->uc_mcontext.fpregs->mxcsr;
    unsigned raised = mxcsr & MX_STATUS;
    unsigned kinds = kinds_of(raised);
    if (kinds) {
        if (g_count < FOE_TRACE_CAP) {
            g_events[g_count].addr = g_fault_addr;
            g_events[g_count].caller = g_fault_caller;
            g_events[g_count].kinds = kinds;
            g_count++;
        } else {
            g_dropped++;
        }
    }
    unsigned masks = g_fault_masks;
    /* Enough once the trace is full (what follows would only be counted, and a trace with a dropped event is
     * compared by its sets alone) or after FOE_TRAP_CAP traps: the rest of the call runs masked, untraced. Each
     * trap costs two signals; a loop that underflows on every iteration made a call thousands of them. */
    if (g_dropped || ++g_traps >= FOE_TRAP_CAP)
        masks = MX_TRACKED_MASKS;
    g_known_status = (g_fault_status | raised) & MX_TRACKED_STATUS;
    uc->uc_mcontext.fpregs->mxcsr =
        (mxcsr & ~(MX_STATUS | MX_TRACKED_MASKS)) | g_fault_status | raised | masks;
}

/* The executable's load bias and the extent of its loaded segments (the first object dl_iterate_phdr names). */
static int find_exe(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    g_bias = info->dlpi_addr;
    g_exe_lo = UINTPTR_MAX;
    g_exe_hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (lo < g_exe_lo)
            g_exe_lo = lo;
        if (hi > g_exe_hi)
            g_exe_hi = hi;
    }
    return 1;
}

static void put_events(FILE *out) {
    for (int i = 0; i < g_count; i++) {
        const struct foe_event *e = &g_events[i];
        if (in_exe(e->addr)) {
            fprintf(out, " %x@%lx", e->kinds, (unsigned long)(e->addr - g_bias));
            continue;
        }
        Dl_info dl;
        const char *name = "?";
        if (dladdr((void *)e->addr, &dl)) {
            /* The exported symbol around the address, else the library's file name (libm's own helpers, such as
             * the one that raises exp's overflow, are hidden). */
            if (dl.dli_sname)
                name = dl.dli_sname;
            else if (dl.dli_fname && *dl.dli_fname)
                name = strrchr(dl.dli_fname, '/') ? strrchr(dl.dli_fname, '/') + 1 : dl.dli_fname;
        }
        if (e->caller)
            fprintf(out, " %x@%lx@%s", e->kinds, (unsigned long)(e->caller - 1 - g_bias), name);
        else
            fprintf(out, " %x@-@%s", e->kinds, name);
    }
    if (g_dropped)
        fprintf(out, " +%x", g_dropped);
}

/* The stubs of data no file defines (the harness links them in the section foe_guard, a page each): unreadable,
 * so a run that reads a value nobody knows crashes rather than computing with garbage. */
extern char __start_foe_guard[] __attribute__((weak));
extern char __stop_foe_guard[] __attribute__((weak));

int main(int argc, char **argv) {
    long limit_ms = argc > 1 ? strtol(argv[1], NULL, 10) : 500;
    if (limit_ms <= 0)
        limit_ms = 500;
#if defined(__x86_64__)
    /* The flush-to-zero probe: the fast-math binary as linked, with what its `crtfastmath.o` set at start-up
     * (FTZ, bit 15, and DAZ, bit 6) cleared before any call, as a link without it would leave them. */
    if (argc > 2 && strcmp(argv[2], "no-daz-ftz") == 0)
        __builtin_ia32_ldmxcsr(__builtin_ia32_stmxcsr() & ~0x8040u);
#endif
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGPROF, &sa, NULL);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fpe;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGFPE, &sa, NULL);
    sa.sa_sigaction = on_trap;
    sigaction(SIGTRAP, &sa, NULL);
    sa.sa_sigaction = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    foe_find_mappings();
    dl_iterate_phdr(find_exe, NULL);
    if (__start_foe_guard && __stop_foe_guard > __start_foe_guard &&
        mprotect(__start_foe_guard, (size_t)(__stop_foe_guard - __start_foe_guard), PROT_NONE) != 0)
        return 70;
    {
        /* Loads the unwinder now (backtrace opens libgcc_s on first use), not inside a signal handler. */
        void *frames[2];
        (void)backtrace(frames, 2);
    }
    /* Replies go to the original stdout; what the user's code prints goes nowhere. */
    g_reply_fd = dup(1);
    int devnull = open("/dev/null", O_WRONLY);
    if (g_reply_fd < 0 || devnull < 0 || dup2(devnull, 1) < 0)
        return 70;
    FILE *replies = fdopen(g_reply_fd, "w");
    if (!replies)
        return 70;
    static char line[FOE_MAX_WORDS * 20 + 64];
    while (fgets(line, sizeof line, stdin)) {
        char *p = line, *end;
        int fill = 0;
        if (*p == '~') {
            fill = (int)strtol(p + 1, &end, 16) & 0xff;
            p = end;
        }
        long index = strtol(p, &end, 10);
        if (end == p)
            continue;
        p = end;
        unsigned long long words[FOE_MAX_WORDS];
        int n = 0;
        while (n < FOE_MAX_WORDS) {
            unsigned long long w = strtoull(p, &end, 16);
            if (end == p)
                break;
            words[n++] = w;
            p = end;
        }
        if (index < 0 || index >= foe_confirm_count) {
            fprintf(replies, "e\n");
            fflush(replies);
            continue;
        }
        /* result[0]: the return value; result[1]: how many (param, offset, word) triples follow. */
        static unsigned long long result[2 + 3 * FOE_SHIPPED_OUTPUTS];
        result[0] = result[1] = 0;
        arm(ITIMER_PROF, limit_ms);
        arm(ITIMER_REAL, limit_ms * FOE_WALL_FACTOR);
        g_count = g_dropped = g_traps = g_stepping = 0;
        g_known_status = 0;
        feclearexcept(FE_ALL_EXCEPT);
        unsigned mxcsr = __builtin_ia32_stmxcsr();
        __builtin_ia32_ldmxcsr((mxcsr & ~(MX_STATUS | MX_TRACKED_MASKS)));
        g_stopped_at = NULL;
        int jumped = sigsetjmp(g_call, 0);
        if (jumped == 0) {
            scribble_stack(fill);
            g_in_call = 1;
            foe_confirm_table[index](words, result);
        }
        g_in_call = 0;
        mxcsr = __builtin_ia32_stmxcsr();
        __builtin_ia32_ldmxcsr(mxcsr | MX_TRACKED_MASKS);
        int raised = fetestexcept(FOE_TRACKED);
        unsigned flags = (raised & FE_INVALID ? 1u : 0u) | (raised & FE_DIVBYZERO ? 2u : 0u) |
                         (raised & FE_OVERFLOW ? 4u : 0u) | (raised & FE_UNDERFLOW ? 8u : 0u);
        arm(ITIMER_PROF, 0);
        arm(ITIMER_REAL, 0);
        if (jumped == 2) {
            fprintf(replies, "c %x\n", SIGSEGV);
            fflush(replies);
            continue;
        }
        if (g_stopped_at)
            fprintf(replies, "s %x %s", flags, g_stopped_at);
        else {
            fprintf(replies, "r %x %llx", flags, result[0]);
            unsigned long long n = result[1] < FOE_SHIPPED_OUTPUTS ? result[1] : FOE_SHIPPED_OUTPUTS;
            for (unsigned long long i = 0; i < n; i++)
                fprintf(replies, " o:%llx:%llx:%llx", result[2 + 3 * i], result[3 + 3 * i], result[4 + 3 * i]);
        }
        put_events(replies);
        fputc('\n', replies);
        fflush(replies);
    }
    return 0;
}
