/* foe_confirm.c: the driver of foe's confirmation harness (server/foe-analysis/src/confirm.rs). It is linked with
 * the analysed file compiled by clang exactly as a build ships it (no instrumentation) plus a generated table of
 * typed thunks, calls one function per request and replies with the sticky exception flags (fetestexcept).
 *
 * Protocol, one request per line on stdin: `INDEX W0 W1 ...` (the thunk index, then one hexadecimal 64-bit word
 * per parameter, as the instrumented runner encodes them). One reply per line on stdout, flushed:
 * `r FLAGS RESULT` (the raised exceptions as bits invalid 1, divide-by-zero 2, overflow 4, underflow 8, and the
 * result's bits, both hexadecimal) or `t` when the
 * call did not return within the time limit (argv[1], milliseconds); the process then exits. A crash ends the
 * process without a reply; the caller restarts it after that request.
 *
 * Compiled without fast math; it does no floating-point work itself, so the floating-point environment the
 * build's start-up code set (flush-to-zero and denormals-are-zero when linked with -ffast-math) is the one the
 * function runs in. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <fenv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

typedef void (*foe_confirm_thunk)(const unsigned long long *words, unsigned long long *result);
extern foe_confirm_thunk const foe_confirm_table[];
extern const int foe_confirm_count;

#define FOE_MAX_WORDS 256
#define FOE_TRACKED (FE_INVALID | FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW)

static int g_reply_fd = 1;

static void on_alarm(int sig) {
    (void)sig;
    static const char reply[] = "t\n";
    ssize_t n = write(g_reply_fd, reply, sizeof reply - 1);
    (void)n;
    _exit(0);
}

int main(int argc, char **argv) {
    long limit_ms = argc > 1 ? strtol(argv[1], NULL, 10) : 500;
    if (limit_ms <= 0)
        limit_ms = 500;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
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
        unsigned long long result = 0;
        struct itimerval timer;
        memset(&timer, 0, sizeof timer);
        timer.it_value.tv_sec = limit_ms / 1000;
        timer.it_value.tv_usec = (limit_ms % 1000) * 1000;
        setitimer(ITIMER_REAL, &timer, NULL);
        feclearexcept(FE_ALL_EXCEPT);
        foe_confirm_table[index](words, &result);
        int raised = fetestexcept(FOE_TRACKED);
        unsigned flags = (raised & FE_INVALID ? 1u : 0u) | (raised & FE_DIVBYZERO ? 2u : 0u) |
                         (raised & FE_OVERFLOW ? 4u : 0u) | (raised & FE_UNDERFLOW ? 8u : 0u);
        memset(&timer, 0, sizeof timer);
        setitimer(ITIMER_REAL, &timer, NULL);
        fprintf(replies, "r %x %llx\n", flags, result);
        fflush(replies);
    }
    return 0;
}
