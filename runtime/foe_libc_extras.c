/* foe_libc_extras.c: C library functions that numeric code calls by name but glibc has only as macros
 * (`isfinite`, `signbit`, `fpclassify`; K&R-era libraries such as Cephes declare them as functions). foe models
 * them as the classification they are, so the runs must execute them too: appended to the worker's runtime and to
 * the shipped-binary driver, defined weak, so a definition of the project's own (Cephes' isnan.c) takes
 * precedence. Compiled without fast math (the builtins must test the bits they are given). */
#include <math.h>

#undef isfinite
#undef signbit
#undef fpclassify

__attribute__((weak)) int isfinite(double x) { return __builtin_isfinite(x); }

__attribute__((weak)) int signbit(double x) { return __builtin_signbit(x) != 0; }

__attribute__((weak)) int fpclassify(double x) {
    return __builtin_fpclassify(FP_NAN, FP_INFINITE, FP_NORMAL, FP_SUBNORMAL, FP_ZERO, x);
}
