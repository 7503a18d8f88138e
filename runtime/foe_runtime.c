/* foe_runtime.c: the runtime linked into foe's worker: exception-trace recording (__foe_check) and the batch
 * driver (main) that runs both instrumented builds on inputs read from stdin and replies on stdout.
 * See foe_runtime.h for the protocol. Compiled once per foe build with -O2 and without fast math. */
#define _GNU_SOURCE
#include "foe_runtime.h"
#include "foe_faults.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <ucontext.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#if !defined(__x86_64__)
#include <fenv.h>
#endif

/* ---- trace recording ---- */

static uint32_t g_trace[FOE_TRACE_CAP];
static volatile uint32_t g_trace_len;
static volatile uint32_t g_trace_truncated;
/* Operations the running execution has checked (calls of __foe_check): its work, which the load does not change. */
static volatile uint64_t g_ops;
/* The batch's limit of checked operations per execution (0: none): a run past it times out, deterministically and
 * long before its CPU time would (a loop that does not end on some input). */
static volatile uint64_t g_op_limit;
static void foe_op_limit_reached(void);
static void foe_die(uint32_t status, uint32_t detail, int code);

static inline void foe_append(uint32_t site, uint32_t kind) {
    uint32_t n = g_trace_len;
    if (n < FOE_TRACE_CAP) {
        g_trace[n] = (site << FOE_KIND_BITS) | kind;
        g_trace_len = n + 1;
    } else {
        g_trace_truncated = 1;
    }
}

#if defined(__x86_64__)
/* MXCSR and x87 status bits: IE=0x01 ZE=0x04 OE=0x08 UE=0x10 (DE=0x02 and PE=0x20 are ignored). */
#define FOE_TRACKED 0x1du

void __foe_check(uint32_t site) {
    uint64_t ops = g_ops + 1;
    g_ops = ops;
    if (__builtin_expect(ops > g_op_limit && g_op_limit != 0, 0))
        foe_op_limit_reached();
    uint32_t csr;
    uint16_t sw;
    __asm__ volatile("stmxcsr %0" : "=m"(csr));
    __asm__ volatile("fnstsw %0" : "=am"(sw));
    uint32_t f = (csr | sw) & FOE_TRACKED;
    if (__builtin_expect(f == 0, 1))
        return;
    if (f & 0x01u) foe_append(site, FOE_KIND_INVALID);
    if (f & 0x04u) foe_append(site, FOE_KIND_DIVBYZERO);
    if (f & 0x08u) foe_append(site, FOE_KIND_OVERFLOW);
    if (f & 0x10u) foe_append(site, FOE_KIND_UNDERFLOW);
    csr &= ~0x3fu;
    __asm__ volatile("ldmxcsr %0" : : "m"(csr));
    if (sw & 0x3fu)
        __asm__ volatile("fnclex");
}

static void foe_set_mode(int ftz) {
    uint32_t csr = ftz ? 0x9fc0u : 0x1f80u; /* all exceptions masked, round to nearest, flags clear */
    __asm__ volatile("fnclex");
    __asm__ volatile("ldmxcsr %0" : : "m"(csr));
}
#else
void __foe_check(uint32_t site) {
    uint64_t ops = g_ops + 1;
    g_ops = ops;
    if (__builtin_expect(ops > g_op_limit && g_op_limit != 0, 0))
        foe_op_limit_reached();
    int f = fetestexcept(FE_INVALID | FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW);
    if (__builtin_expect(f == 0, 1))
        return;
    if (f & FE_INVALID) foe_append(site, FOE_KIND_INVALID);
    if (f & FE_DIVBYZERO) foe_append(site, FOE_KIND_DIVBYZERO);
    if (f & FE_OVERFLOW) foe_append(site, FOE_KIND_OVERFLOW);
    if (f & FE_UNDERFLOW) foe_append(site, FOE_KIND_UNDERFLOW);
    feclearexcept(FE_ALL_EXCEPT);
}

static void foe_set_mode(int ftz) {
    (void)ftz; /* flush-to-zero is only modelled on x86-64 */
    fesetround(FE_TONEAREST);
    feclearexcept(FE_ALL_EXCEPT);
}
#endif

/* ---- outputs: the words of the pointer parameters' buffers a run changed ---- */

static unsigned char g_watch_before[FOE_WATCH_CAP][FOE_WATCH_BYTES];
static const unsigned char *g_watch_buffer[FOE_WATCH_CAP];
static uint32_t g_watch_param[FOE_WATCH_CAP];
static uint32_t g_watch_bytes[FOE_WATCH_CAP];
static uint32_t g_watch_count;
static struct foe_output g_outputs[FOE_OUTPUT_CAP];
static uint32_t g_output_count;

void __foe_watch(uint32_t param, const void *buffer, uint32_t bytes) {
    if (g_watch_count >= FOE_WATCH_CAP)
        return;
    uint32_t i = g_watch_count++;
    if (bytes > FOE_WATCH_BYTES)
        bytes = FOE_WATCH_BYTES;
    g_watch_buffer[i] = buffer;
    g_watch_param[i] = param;
    g_watch_bytes[i] = bytes & ~7u;
    memcpy(g_watch_before[i], buffer, g_watch_bytes[i]);
}

void __foe_observe(void) {
    for (uint32_t i = 0; i < g_watch_count; i++) {
        for (uint32_t at = 0; at < g_watch_bytes[i]; at += 8) {
            uint64_t now, before;
            memcpy(&now, g_watch_buffer[i] + at, 8);
            memcpy(&before, g_watch_before[i] + at, 8);
            if (now == before || g_output_count >= FOE_OUTPUT_CAP)
                continue;
            g_outputs[g_output_count].param = g_watch_param[i];
            g_outputs[g_output_count].offset = at;
            g_outputs[g_output_count].word = now;
            g_output_count++;
        }
    }
}

/* ---- the pointer parameters' buffers, between pages the process cannot touch ---- */

/* Slot i: its mapping (a guard page, `usable` bytes, a guard page), mapped when first asked for and mapped anew
 * when a larger buffer is asked for. */
static struct {
    char *mapping;
    size_t usable;
} g_buffers[FOE_BUFFER_SLOTS];

static size_t foe_page_size(void) {
    static size_t page;
    if (page == 0) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return page;
}

void *__foe_buffer(uint32_t slot, uint32_t bytes) {
    size_t page = foe_page_size();
    size_t need = ((size_t)bytes + 15u) & ~(size_t)15u;
    if (need == 0)
        need = 16;
    if (slot >= FOE_BUFFER_SLOTS)
        foe_die(FOE_STATUS_ERROR, FOE_ERROR_NO_BUFFER, 75);
    if (g_buffers[slot].usable < need) {
        size_t usable = (need + page - 1) & ~(page - 1);
        if (g_buffers[slot].mapping)
            munmap(g_buffers[slot].mapping, g_buffers[slot].usable + 2 * page);
        g_buffers[slot].mapping = NULL;
        g_buffers[slot].usable = 0;
        char *m = mmap(NULL, usable + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED || mprotect(m + page, usable, PROT_READ | PROT_WRITE) != 0)
            foe_die(FOE_STATUS_ERROR, FOE_ERROR_NO_BUFFER, 75);
        g_buffers[slot].mapping = m;
        g_buffers[slot].usable = usable;
    }
    char *buffer = g_buffers[slot].mapping + page + g_buffers[slot].usable - need;
    memset(buffer, 0, need);
    return buffer;
}

/* Whether `addr` lies in a guard page of a buffer: an access past (or before) a buffer, which faulted before it
 * touched anything, so the run can end as a crash and the worker go on. */
static int foe_in_buffer_guard(uintptr_t addr) {
    size_t page = foe_page_size();
    for (uint32_t i = 0; i < FOE_BUFFER_SLOTS; i++) {
        uintptr_t m = (uintptr_t)g_buffers[i].mapping;
        if (!m)
            continue;
        uintptr_t upper = m + page + g_buffers[i].usable;
        if ((addr >= m && addr < m + page) || (addr >= upper && addr < upper + page))
            return 1;
    }
    return 0;
}

/* ---- values: each operation's result, in runs that ask for them ---- */

static int g_values_on;
static struct foe_output g_values[FOE_VALUE_CAP];
static uint32_t g_value_count;

void __foe_value(uint32_t site, uint64_t bits) {
    if (__builtin_expect(!g_values_on, 1) || g_value_count >= FOE_VALUE_CAP)
        return;
    g_values[g_value_count].param = site;
    g_values[g_value_count].offset = 0;
    g_values[g_value_count].word = bits;
    g_value_count++;
}

/* ---- reply buffer ---- */

static int g_out_fd = -1;
static int g_in_fd = -1;
static unsigned char g_out[1u << 18];
static volatile size_t g_out_len;
static volatile sig_atomic_t g_flush_requested;

/* Async-signal-safe: only write(2). */
static void foe_write_all(const void *data, size_t len) {
    const unsigned char *p = data;
    while (len > 0) {
        ssize_t n = write(g_out_fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            _exit(75);
        }
        p += n;
        len -= (size_t)n;
    }
}

static void foe_flush(void) {
    if (g_out_len > 0)
        foe_write_all(g_out, g_out_len);
    g_out_len = 0;
    g_flush_requested = 0;
}

/* Appends a record with the current trace (and the outputs, for a run that returned); flushes first when the
 * buffer could overflow. */
/* Set while the record of a crash the worker survived is written. */
static int g_survived;

static void foe_emit(uint32_t input, uint32_t build, uint32_t status, uint32_t detail, uint64_t ret) {
    uint32_t n = g_trace_len;
    uint32_t nout = status == FOE_STATUS_RETURNED && build != FOE_BUILD_DONE ? g_output_count : 0;
    uint32_t nval = (status == FOE_STATUS_RETURNED || status == FOE_STATUS_STOPPED) && build != FOE_BUILD_DONE
                        ? g_value_count
                        : 0;
    size_t need = sizeof(struct foe_record) + (size_t)n * 4u + (size_t)(nout + nval) * sizeof(struct foe_output);
    if (g_out_len + need > sizeof g_out)
        foe_flush();
    struct foe_record rec;
    rec.input = input;
    rec.build = (uint8_t)build;
    rec.status = (uint8_t)status;
    rec.flags = (uint16_t)((g_trace_truncated ? FOE_RECORD_TRUNCATED : 0) |
                           (status == FOE_STATUS_CRASHED && g_survived ? FOE_RECORD_GOES_ON : 0));
    rec.detail = detail;
    rec.nevents = n;
    rec.ret = ret;
    rec.noutputs = nout;
    rec.nvalues = nval;
    rec.ops = build == FOE_BUILD_DONE ? 0 : g_ops;
    memcpy(g_out + g_out_len, &rec, sizeof rec);
    memcpy(g_out + g_out_len + sizeof rec, g_trace, (size_t)n * 4u);
    memcpy(g_out + g_out_len + sizeof rec + (size_t)n * 4u, g_outputs, (size_t)nout * sizeof(struct foe_output));
    memcpy(g_out + g_out_len + sizeof rec + (size_t)n * 4u + (size_t)nout * sizeof(struct foe_output), g_values,
           (size_t)nval * sizeof(struct foe_output));
    g_out_len += need;
}

/* ---- what is running, for the signal handlers ---- */

/* An execution times out when it has used its limit of CPU time (ITIMER_PROF: the load does not change it), or
 * FOE_WALL_FACTOR times the limit of wall-clock time (ITIMER_REAL: a safety net for runs that wait without
 * using the CPU, in pause() or sleep()). The parent's stall limit (exec/worker.rs) is above the second. */
#define FOE_WALL_FACTOR 8u

static volatile sig_atomic_t g_running;      /* 1 while a build's code runs */
static volatile uint32_t g_cur_input;
static volatile uint32_t g_cur_build;
static volatile uint32_t g_seq;              /* counts executions */
struct foe_clock {
    uint32_t seen_seq; /* the execution the last tick saw */
    uint32_t ticks;    /* ticks that saw the same execution */
};
static struct foe_clock g_cpu_clock, g_wall_clock;
static volatile uint32_t g_ticks_needed = 1;
static volatile uint32_t g_timeout_ms;
/* Ends the reply with a terminal record for the running execution and exits. */
static void foe_die(uint32_t status, uint32_t detail, int code) {
    g_running = 0;
    foe_emit(g_cur_input, g_cur_build, status, detail, 0);
    foe_flush();
    _exit(code);
}

/* A run past the batch's operation limit: timed out (the record's ops say which limit ended it). */
static void foe_op_limit_reached(void) {
    if (g_running)
        foe_die(FOE_STATUS_TIMED_OUT, g_timeout_ms, 72);
}

void __foe_undefined(uint32_t index) {
    if (g_running)
        foe_die(FOE_STATUS_UNDEFINED, index, 77);
    _exit(77);
}

/* ---- stops: a call foe does not execute returns control to foe_run_one ---- */

static jmp_buf g_stop_jump;
static volatile uint32_t g_stop_index;
/* FOE_STATUS_STOPPED, or FOE_STATUS_UNKNOWN_DATA for a run that read data no file defines, FOE_STATUS_OUTSIDE for
 * one that reached outside one of the file's arrays (__foe_bounds), or
 * FOE_STATUS_CRASHED for one that accessed an address far from every mapping (foe_on_crash). */
static volatile uint32_t g_stop_status = FOE_STATUS_STOPPED;

void __foe_stop(uint32_t stop) {
    if (!g_running)
        _exit(78); /* a stop outside a run: the driver itself is broken */
    g_stop_status = FOE_STATUS_STOPPED;
    g_stop_index = stop;
    longjmp(g_stop_jump, 1);
}

/* An access the instrumentation found to pick an element of one of the file's own objects by a computed index
 * (instrument/bounds.rs): one outside the object ends the run there, as a stop does. What lies past an array is
 * other data of the worker, placed by the link: a run that read it would compute with values that change with
 * the rest of the file (and differ between the builds), which no cache key and no source edit can follow. */
void __foe_bounds(const char *addr, const char *base, uint64_t size, uint64_t width, uint32_t access) {
    if (__builtin_expect(addr >= base && width <= size && (uint64_t)(addr - base) <= size - width, 1))
        return;
    if (!g_running)
        _exit(78); /* an access outside a run: the driver itself is broken */
    g_stop_status = FOE_STATUS_OUTSIDE;
    g_stop_index = access;
    longjmp(g_stop_jump, 1);
}

/* The stand-ins for data no file defines (foe's stub module puts them in the section foe_guard, 64 KiB each,
 * and lists them in __foe_guard_table, entry i the block of stubbed symbol i, null for functions): unreadable
 * from start-up, so a run that reads a value nobody knows crashes, and the crash names the datum. */
extern char __start_foe_guard[] __attribute__((weak));
extern char __stop_foe_guard[] __attribute__((weak));
extern const char *const __foe_guard_table[] __attribute__((weak));
extern const uint32_t __foe_guard_count __attribute__((weak));
#define FOE_GUARD_BLOCK (1u << 16)

static int foe_protect_guard(void) {
    if (!__start_foe_guard || __stop_foe_guard <= __start_foe_guard)
        return 0;
    return mprotect(__start_foe_guard, (size_t)(__stop_foe_guard - __start_foe_guard), PROT_NONE);
}

/* The stub index of the datum whose block holds `addr`, or -1. */
static long foe_guard_index(const char *addr) {
    if (!__start_foe_guard || !&__foe_guard_count || addr < __start_foe_guard || addr >= __stop_foe_guard)
        return -1;
    for (uint32_t i = 0; i < __foe_guard_count; i++) {
        const char *block = __foe_guard_table[i];
        if (block && addr >= block && addr < block + FOE_GUARD_BLOCK)
            return (long)i;
    }
    return -1;
}

static void foe_on_crash(int sig, siginfo_t *info, void *context) {
    if (g_running) {
        long datum = (sig == SIGSEGV || sig == SIGBUS) ? foe_guard_index(info->si_addr) : -1;
        if (datum >= 0) {
            /* Reading a value nobody knows ends the run, not the worker (every run of a function that reads it
             * would otherwise restart it): the signal mask of the interrupted code comes back, then the run
             * ends as at a stop. The function's state is its own frames, which the jump discards. */
            sigprocmask(SIG_SETMASK, &((ucontext_t *)context)->uc_sigmask, NULL);
            g_stop_status = FOE_STATUS_UNKNOWN_DATA;
            g_stop_index = (uint32_t)datum;
            longjmp(g_stop_jump, 1);
        }
        uintptr_t addr = (uintptr_t)info->si_addr;
        if (sig == SIGSEGV &&
            ((info->si_code == SEGV_MAPERR && foe_far_from_mappings(addr)) || foe_in_buffer_guard(addr))) {
            /* An access far from everything the process maps (a null pointer followed, plus an index: a pointer
             * behind a pointer, which the worker passes as zeros): x86 faults are precise, so the access did
             * nothing and the run ends as a crash without ending the worker. A new worker per such run was most
             * of the time of code that reads through a context pointer. So does an access to a guard page of a
             * pointer parameter's buffer (a loop writing past it: the fault came before it wrote anything
             * else; a new worker per such run was 25 s of GSL's legendre_P.c). A fault at the end of another
             * mapping (a loop writing past a buffer of its own, over the stack or the runtime's data) still ends
             * the worker: what the run wrote before it cannot be trusted. */
            sigprocmask(SIG_SETMASK, &((ucontext_t *)context)->uc_sigmask, NULL);
            g_stop_status = FOE_STATUS_CRASHED;
            g_stop_index = (uint32_t)sig;
            longjmp(g_stop_jump, 1);
        }
        foe_die(FOE_STATUS_CRASHED, (uint32_t)sig, 70);
    }
    _exit(71); /* the driver itself failed: the parent sees an unexplained death */
}

static void foe_tick(struct foe_clock *clock, uint32_t needed) {
    if (!g_running)
        return;
    uint32_t seq = g_seq;
    if (seq != clock->seen_seq) {
        clock->seen_seq = seq;
        clock->ticks = 0;
        return;
    }
    if (++clock->ticks >= needed)
        foe_die(FOE_STATUS_TIMED_OUT, g_timeout_ms, 72);
}

/* A tick of the process's CPU time: the limit. */
static void foe_on_cpu_tick(int sig) {
    (void)sig;
    foe_tick(&g_cpu_clock, g_ticks_needed);
}

/* A tick of the wall clock: flushes the replies, and the safety net. */
static void foe_on_alarm(int sig) {
    (void)sig;
    g_flush_requested = 1;
    foe_tick(&g_wall_clock, g_ticks_needed * FOE_WALL_FACTOR);
}

static void foe_on_exit(int status, void *arg) {
    (void)arg;
    if (g_running)
        foe_die(FOE_STATUS_EXITED, (uint32_t)status, 73);
}

static void foe_install_handlers(void) {
    foe_find_mappings();
    static unsigned char altstack[1u << 16];
    stack_t ss;
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    ss.ss_flags = 0;
    sigaltstack(&ss, NULL);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_ONSTACK | SA_SIGINFO;
    sa.sa_sigaction = foe_on_crash;
    int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGXCPU, SIGXFSZ, SIGPIPE};
    for (size_t i = 0; i < sizeof crash / sizeof crash[0]; i++)
        sigaction(crash[i], &sa, NULL);

    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sa.sa_handler = foe_on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = foe_on_cpu_tick;
    sigaction(SIGPROF, &sa, NULL);
    on_exit(foe_on_exit, NULL);
}

/* Ticks every period of CPU time and of wall-clock time; an execution that several ticks in a row saw times out
 * (the wall clock's ticks: FOE_WALL_FACTOR times as many). */
static void foe_arm_timer(uint32_t timeout_ms) {
    if (timeout_ms == 0)
        timeout_ms = 1000;
    uint32_t period = timeout_ms / 4;
    if (period < 1) period = 1;
    if (period > 50) period = 50;
    g_timeout_ms = timeout_ms;
    g_ticks_needed = (timeout_ms + period - 1) / period;
    struct itimerval it;
    it.it_interval.tv_sec = period / 1000;
    it.it_interval.tv_usec = (period % 1000) * 1000;
    it.it_value = it.it_interval;
    setitimer(ITIMER_PROF, &it, NULL);
    setitimer(ITIMER_REAL, &it, NULL);
}

static void foe_disarm_timer(void) {
    struct itimerval it;
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_PROF, &it, NULL);
    setitimer(ITIMER_REAL, &it, NULL);
}

/* ---- the driver ---- */

static int foe_read_all(void *data, size_t len) {
    unsigned char *p = data;
    while (len > 0) {
        ssize_t n = read(g_in_fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            return p == (unsigned char *)data ? 0 : -1;
        p += n;
        len -= (size_t)n;
    }
    return 1;
}

static void foe_protocol_error(uint32_t reason) {
    g_trace_len = 0;
    g_trace_truncated = 0;
    foe_emit(0, FOE_BUILD_DONE, FOE_STATUS_ERROR, reason, 0);
    foe_flush();
    _exit(74);
}

static void foe_run_one(foe_entry_fn entry, const uint64_t *args, uint32_t input, uint32_t build, int ftz,
                        int flush_each) {
    g_trace_len = 0;
    g_trace_truncated = 0;
    g_watch_count = 0;
    g_output_count = 0;
    g_value_count = 0;
    g_ops = 0;
    g_cur_input = input;
    g_cur_build = build;
    g_seq++;
    foe_set_mode(ftz);
    if (setjmp(g_stop_jump) != 0) {
        /* __foe_stop: the trace up to the stopping call is complete; or the run read unknown data, or accessed an
         * address far from every mapping. */
        g_running = 0;
        g_survived = 1;
        foe_emit(input, build, g_stop_status, g_stop_index, 0);
        g_survived = 0;
        if (flush_each || g_flush_requested)
            foe_flush();
        return;
    }
    g_running = 1;
    __asm__ volatile("" ::: "memory");
    uint64_t ret = entry(args);
    __asm__ volatile("" ::: "memory");
    g_running = 0;
    foe_emit(input, build, FOE_STATUS_RETURNED, 0, ret);
    if (flush_each || g_flush_requested)
        foe_flush();
}

int main(void) {
    /* Keep the protocol on private descriptors: the user's code may print or read. */
    g_in_fd = dup(0);
    g_out_fd = dup(1);
    int devnull = open("/dev/null", O_RDWR);
    if (g_in_fd < 0 || g_out_fd < 0 || devnull < 0)
        return 76;
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (devnull > 2)
        close(devnull);
    foe_install_handlers();
    if (foe_protect_guard() != 0)
        return 76;

    /* Hello: tells the parent the worker started (protocol version in detail). */
    foe_emit(FOE_HELLO_INPUT, FOE_BUILD_DONE, FOE_STATUS_RETURNED, FOE_PROTOCOL_VERSION, 0);
    foe_flush();

    uint64_t *args = NULL;
    size_t cap = 0;
    for (;;) {
        struct foe_batch_header h;
        int r = foe_read_all(&h, sizeof h);
        if (r == 0)
            return 0;
        if (r < 0 || h.magic != FOE_BATCH_MAGIC)
            foe_protocol_error(1);
        if (h.function >= __foe_entry_count)
            foe_protocol_error(2);
        size_t words = (size_t)h.ninputs * (size_t)h.nargs;
        if (h.nargs > 4096 || h.ninputs > (1u << 24))
            foe_protocol_error(3);
        if (words > cap) {
            free(args);
            cap = words;
            args = malloc(cap * sizeof *args + 8);
            if (!args)
                foe_protocol_error(4);
        }
        if (words > 0 && foe_read_all(args, words * sizeof *args) != 1)
            foe_protocol_error(5);
        foe_entry_fn p = __foe_entries[2 * h.function];
        foe_entry_fn pp = __foe_entries[2 * h.function + 1];
        if (!p || !pp)
            foe_protocol_error(6);
        int flush_each = (h.flags & FOE_FLAG_FLUSH_EACH) != 0;
        g_values_on = (h.flags & FOE_FLAG_VALUES) != 0;
        g_op_limit = h.op_limit;
        foe_arm_timer(h.timeout_ms);
        for (uint32_t i = 0; i < h.ninputs; i++) {
            const uint64_t *a = args + (size_t)i * h.nargs;
            uint32_t label = h.first_index + i;
            if (!(i == 0 && (h.flags & FOE_FLAG_SKIP_FIRST_P)))
                foe_run_one(p, a, label, FOE_BUILD_P, (h.flags & FOE_FLAG_P_FTZ) != 0, flush_each);
            foe_run_one(pp, a, label, FOE_BUILD_PP, (h.flags & FOE_FLAG_PP_FTZ) != 0, flush_each);
        }
        g_trace_len = 0;
        g_trace_truncated = 0;
        foe_emit(h.first_index + h.ninputs, FOE_BUILD_DONE, FOE_STATUS_RETURNED, 0, 0);
        foe_flush();
        foe_disarm_timer();
    }
}
