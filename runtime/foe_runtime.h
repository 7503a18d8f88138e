/* foe_runtime.h: the interface between instrumented builds, the batch driver and foe (trace codes, protocol). */
#ifndef FOE_RUNTIME_H
#define FOE_RUNTIME_H

#include <stdint.h>

/* Exception kind codes in trace records; must match ExceptionKind::runtime_code() in types.rs. */
#define FOE_KIND_INVALID 1u
#define FOE_KIND_DIVBYZERO 2u
#define FOE_KIND_OVERFLOW 3u
#define FOE_KIND_UNDERFLOW 4u

/* A trace event is (site << 3) | kind; site ids therefore have at most 29 bits. */
#define FOE_KIND_BITS 3u
#define FOE_TRACE_CAP 4096u

/* Called by instrumented code after every floating-point instruction. */
void __foe_check(uint32_t site);

/* Called by the generated stub of a function the analysed file uses but does not define (index into foe's
 * list of such functions); ends the execution. */
void __foe_undefined(uint32_t index) __attribute__((noreturn));

/* Replaces, in the instrumented builds, every call foe does not execute (a function without a definition that
 * is neither libm nor a modelled C library function: error reporters, I/O, allocation, exit). Records the stop
 * (index into foe's list of such calls) and returns to the batch driver: the run ends cleanly there. */
void __foe_stop(uint32_t stop) __attribute__((noreturn));

/* Called before a load or store of the instrumented builds that picks an element of one of the file's objects
 * (`base`, `size` bytes) by a computed index: returns when the `width` bytes at `addr` lie inside it, else ends
 * the run (FOE_STATUS_OUTSIDE, detail = `access`, index into foe's list of such accesses). */
void __foe_bounds(const char *addr, const char *base, uint64_t size, uint64_t width, uint32_t access);

/* The zeroed buffer the generated entry passes for its pointer parameter or returned struct number `slot` (at
 * most FOE_BUFFER_SLOTS per entry; the entry keeps larger numbers on its stack): `bytes` rounded up to 16, ending
 * where a page the process cannot touch begins, with another such page below it. A run that writes or reads past
 * its buffer faults there before touching anything else, and ends as a crash without ending the worker. */
#define FOE_BUFFER_SLOTS 32u
void *__foe_buffer(uint32_t slot, uint32_t bytes);
/* The FOE_STATUS_ERROR detail of an entry whose buffer could not be given (no slot, or no memory to map it). */
#define FOE_ERROR_NO_BUFFER 7u

/* Called by the generated entry before the call, once per pointer parameter, with the buffer it passes (its
 * contents as the call starts are kept), and after the call: the 8-byte words of the buffers the call changed
 * become the run's outputs (at most FOE_OUTPUT_CAP; FOE_WATCH_CAP buffers of FOE_WATCH_BYTES each). */
#define FOE_WATCH_CAP 8u
#define FOE_WATCH_BYTES 4096u
#define FOE_OUTPUT_CAP 1024u
void __foe_watch(uint32_t param, const void *buffer, uint32_t bytes);

/* Called by instrumented code after an operation with a scalar result (its bits, zero-extended), with its site:
 * recorded, in execution order and at most FOE_VALUE_CAP, only in batches with FOE_FLAG_VALUES. */
#define FOE_VALUE_CAP 4096u
void __foe_value(uint32_t site, uint64_t bits);
void __foe_observe(void);

/* Generated per analysed function and build: reads the argument bits, calls the build's function,
 * returns the result bits (double/float bit pattern, sign- or zero-extended integer, 0 for void). */
typedef uint64_t (*foe_entry_fn)(const uint64_t *args);

/* Generated table: entry i*2 is function i of P, i*2+1 the same function of P' (NULL when unavailable). */
extern foe_entry_fn __foe_entries[];
extern const uint32_t __foe_entry_count; /* number of functions (half the table length) */

/* ---- Batch protocol (all integers little-endian) ----
 * Request (stdin): struct foe_batch_header, then ninputs * nargs uint64 argument bit patterns.
 * Reply (stdout): one struct foe_record (+ nevents uint32 events, + noutputs struct foe_output) per (input,
 * build) executed, in order,
 * then a record with build FOE_BUILD_DONE. A crash, time-out or exit ends the reply with that record
 * and the worker exits; the parent restarts it for the rest of the batch. */
#define FOE_BATCH_MAGIC 0x42454f46u /* "FOEB" */

#define FOE_FLAG_P_FTZ 1u         /* run P with FTZ+DAZ */
#define FOE_FLAG_PP_FTZ 2u        /* run P' with FTZ+DAZ */
#define FOE_FLAG_FLUSH_EACH 4u    /* flush the reply after every record (to locate an unexplained death) */
#define FOE_FLAG_SKIP_FIRST_P 8u  /* the first input's P run was already done */
#define FOE_FLAG_VALUES 16u       /* record each operation's value (foe_output records: param = site, offset 0) */

struct foe_batch_header {
    uint32_t magic;
    uint32_t function;  /* index into __foe_entries / 2 */
    uint32_t nargs;
    uint32_t ninputs;
    uint32_t first_index; /* label of the first input in reply records */
    uint32_t flags;
    uint32_t timeout_ms; /* per execution of one build, CPU time */
    uint32_t op_limit;   /* checked operations per execution of one build (0: none); a run past it times out */
};

#define FOE_BUILD_P 0u
#define FOE_BUILD_PP 1u
#define FOE_BUILD_DONE 0xffu /* end of batch (status 0), hello, or a protocol error (status FOE_STATUS_ERROR) */

/* At start-up the worker sends a FOE_BUILD_DONE record with this input label and the protocol version. */
#define FOE_HELLO_INPUT 0xffffffffu
#define FOE_PROTOCOL_VERSION 7u

#define FOE_STATUS_RETURNED 0u
#define FOE_STATUS_CRASHED 1u   /* detail = signal number */
#define FOE_STATUS_TIMED_OUT 2u /* detail = limit in ms (of CPU time; or 8 times as long waiting) */
#define FOE_STATUS_EXITED 3u    /* the code called exit(); detail = status */
#define FOE_STATUS_ERROR 4u     /* protocol error; detail = reason code */
#define FOE_STATUS_UNDEFINED 5u /* the code called a function the file does not define; detail = its stub index */
#define FOE_STATUS_STOPPED 6u   /* the run reached a call foe does not execute; detail = its stop index */
#define FOE_STATUS_UNKNOWN_DATA 7u /* the code read data no file defines (an unreadable stand-in); detail = its
                                      stub index */
#define FOE_STATUS_OUTSIDE 8u /* the code read or wrote outside one of the file's arrays (an index past its end or
                                 before its start); detail = the access's index (__foe_bounds) */

#define FOE_RECORD_TRUNCATED 1u /* the trace held more than FOE_TRACE_CAP events */
#define FOE_RECORD_GOES_ON 2u   /* a crash the worker survived (an access far from every mapping): more records follow */

struct foe_record {
    uint32_t input;
    uint8_t build;
    uint8_t status;
    uint16_t flags;
    uint32_t detail;
    uint32_t nevents;
    uint64_t ret;
    uint32_t noutputs; /* outputs of a run that returned; 0 otherwise */
    uint32_t nvalues;  /* values recorded (FOE_FLAG_VALUES), for a run that returned or stopped */
    uint64_t ops;      /* operations the run checked (calls of __foe_check): its work, deterministic */
}; /* 40 bytes, followed by nevents uint32, then noutputs struct foe_output, then nvalues of them (param = site) */

/* One 8-byte word of a pointer parameter's buffer that the run changed, as it left it. */
struct foe_output {
    uint32_t param;  /* the pointer's index among the C parameters */
    uint32_t offset; /* byte offset into the buffer (a multiple of 8) */
    uint64_t word;
}; /* 16 bytes */

#endif
