//! Tests of the runner on real clang builds executed natively: traces, locations, FTZ, types, crashes, hangs.

use super::testutil::runner;
use super::*;
use crate::report::{RunEnd, Scalar};

fn kinds(o: &RunOutcome) -> Vec<ExceptionKind> {
    o.trace.iter().map(|e| e.kind).collect()
}

fn f64s(vs: &[f64]) -> Input {
    Input(vs.iter().map(|&v| ArgValue::F64(v)).collect())
}

const IDENTITY: &str = "double identity(double x){double a=2*x; double b=a*0.5; return b;}\n";

#[test]
fn identity_overflows_in_p_only() {
    let cfg = AnalysisConfig::default();
    let (mut r, _) = runner(IDENTITY, &cfg);
    let out = r.run("identity", &[f64s(&[1e308]), f64s(&[1.5])]).unwrap();
    assert_eq!(kinds(&out[0].p), vec![ExceptionKind::Overflow]);
    assert_eq!(out[0].p.trace[0].line, Some(1));
    assert_eq!(out[0].p.trace[0].operation, "fmul");
    assert!(
        kinds(&out[0].pp).is_empty(),
        "P' folds the identity: {:?}",
        out[0].pp
    );
    // P computes inf * 0.5 = inf; P' returns x.
    assert_eq!(
        out[0].p.end,
        RunEnd::returned(Some(Scalar::F64(f64::INFINITY)))
    );
    assert_eq!(out[0].pp.end, RunEnd::returned(Some(Scalar::F64(1e308))));
    assert!(out[1].p.trace.is_empty() && out[1].pp.trace.is_empty());
    assert!(r.stats().build_time < Duration::from_secs(10));
}

#[test]
fn locations_follow_the_source() {
    let src = "double f(double x, double y) {\n  double a = x * y;\n  double b = a / y;\n  return b;\n}\n";
    let cfg = AnalysisConfig::default();
    let (mut r, _) = runner(src, &cfg);
    // x*y overflows on line 2; inf/0 is fine (no exception), so use y = 1e300: a = inf, b = inf/1e300 = inf (no new flag).
    let out = r
        .run("f", &[f64s(&[1e300, 1e300]), f64s(&[1.0, 0.0])])
        .unwrap();
    let e = &out[0].p.trace[0];
    assert_eq!(
        (e.kind, e.line, e.column),
        (ExceptionKind::Overflow, Some(2), Some(16))
    );
    // 0/0 on line 3 is invalid.
    let e = &out[1].p.trace[0];
    assert_eq!(
        (e.kind, e.line, e.column, e.operation.as_str()),
        (ExceptionKind::Invalid, Some(3), Some(16), "fdiv")
    );
}

#[test]
fn float_int_and_out_pointer_parameters() {
    let src = r#"
float fl(float x) { return x * x; }
int scaled(double x, int n, double *out) { *out = x * n; return (int)(x / n); }
unsigned char uc(unsigned char c) { return c + 1; }
void nothing(double x) { volatile double y = x * 1e300; (void)y; }
"#;
    let cfg = AnalysisConfig::default();
    let (mut r, _) = runner(src, &cfg);
    let out = r
        .run(
            "fl",
            &[
                Input(vec![ArgValue::F32(3e38)]),
                Input(vec![ArgValue::F32(3.0)]),
            ],
        )
        .unwrap();
    assert_eq!(kinds(&out[0].p), vec![ExceptionKind::Overflow]);
    assert_eq!(kinds(&out[0].pp), vec![ExceptionKind::Overflow]);
    assert_eq!(out[1].p.end, RunEnd::returned(Some(Scalar::F32(9.0))));
    let ins = [
        Input(vec![
            ArgValue::F64(7.0),
            ArgValue::Int(-2),
            ArgValue::OutPtr,
        ]),
        Input(vec![ArgValue::F64(1.0), ArgValue::Int(0), ArgValue::OutPtr]),
    ];
    let out = r.run("scaled", &ins).unwrap();
    // What the function writes through its pointer is an output of both builds, named as C names it.
    for end in [&out[0].p.end, &out[0].pp.end] {
        assert_eq!(end.value(), Some(Scalar::Int(-3)));
        assert_eq!(end.output("*out"), Some(Scalar::F64(-14.0)), "{end:?}");
    }
    // 1.0 * 0 leaves the zeroed buffer as it was: no word changed, no output.
    assert!(out[1].pp.end.outputs().is_empty());
    assert!(out[0].p.trace.is_empty());
    // 1/0 = inf: divide-by-zero, then (int)inf is invalid.
    assert_eq!(
        kinds(&out[1].p),
        vec![ExceptionKind::DivideByZero, ExceptionKind::Invalid]
    );
    let out = r.run("uc", &[Input(vec![ArgValue::Int(255)])]).unwrap();
    assert_eq!(out[0].p.end, RunEnd::returned(Some(Scalar::Int(0))));
    let out = r.run("nothing", &[f64s(&[1e10])]).unwrap();
    assert_eq!(out[0].p.end, RunEnd::returned(None));
    assert_eq!(kinds(&out[0].p), vec![ExceptionKind::Overflow]);
    // Inputs that do not fit are errors, not panics.
    assert!(matches!(
        r.run("uc", &[Input(vec![ArgValue::Int(256)])]),
        Err(ExecError::BadInput { .. })
    ));
    assert!(matches!(
        r.run("uc", &[f64s(&[1.0])]),
        Err(ExecError::BadInput { .. })
    ));
    assert!(matches!(
        r.run("nope", &[]),
        Err(ExecError::UnknownFunction(_))
    ));
}

#[test]
fn structs_by_value_in_registers_and_in_memory() {
    use crate::types::{IrArg, PointeeOf, ReturnType};
    let src = r#"
typedef struct { float x, y; } V2;
typedef struct { float x, y, z; } V3;
typedef struct { double re, im; } C;
typedef struct { double a, b, c, d, e; } P5;
typedef struct { double x; int n; } DN;
V2 add(V2 a, V2 b) { V2 r = { a.x + b.x, a.y + b.y }; return r; }
V3 scale3(V3 v, float k) { V3 r = { v.x * k, v.y * k, v.z * k }; return r; }
C conj(C z) { C r = { z.re, -z.im }; return r; }
P5 shift(P5 p, double s) { P5 r = p; r.a += s; r.e *= s; return r; }
double weighted(DN d) { return d.x * d.n; }
"#;
    let cfg = AnalysisConfig::default();
    let (p, pp) = super::testutil::compile_pair(src);
    let mut sigs = super::testutil::signatures(&p);
    let names = |f: &str| -> Vec<String> {
        let sig = sigs.iter().find(|s| s.name == f).expect("described");
        sig.params.iter().map(|p| p.name.clone()).collect()
    };
    // Each field is a parameter of its own, named as C names it, in the place of its struct.
    assert_eq!(names("add"), ["a.x", "a.y", "b.x", "b.y"]);
    assert_eq!(names("scale3"), ["v.x", "v.y", "v.z", "k"]);
    assert_eq!(names("conj"), ["z.re", "z.im"]);
    assert_eq!(names("shift"), ["p", "s"]);
    assert_eq!(names("weighted"), ["d.x", "d.n"]);
    let add = &sigs[0];
    assert_eq!(
        add.ir_args(),
        [IrArg::Lanes(vec![0, 1]), IrArg::Lanes(vec![2, 3])]
    );
    assert_eq!(
        add.ret,
        ReturnType::Struct {
            bytes: 8,
            sret: false
        }
    );
    let shift = sigs.iter_mut().find(|s| s.name == "shift").expect("shift");
    assert_eq!(
        shift.ret,
        ReturnType::Struct {
            bytes: 40,
            sret: true
        }
    );
    assert_eq!(shift.ir_args(), [IrArg::Sret, IrArg::One(0), IrArg::One(1)]);
    // The byval copy's fields are inputs behind it, as the model makes them.
    shift.params.push(crate::types::Param {
        name: "p.e".into(),
        ty: ParamType::F64,
        pointee: Some(PointeeOf {
            param: 0,
            offset: 32,
        }),
        by_value: None,
    });
    let mut r = Runner::build(&p, &pp, &sigs, &cfg).expect("build runner");
    let out = r
        .run(
            "add",
            &[Input(vec![
                ArgValue::F32(3e38),
                ArgValue::F32(1.5),
                ArgValue::F32(3e38),
                ArgValue::F32(2.0),
            ])],
        )
        .expect("run add");
    for end in [&out[0].p.end, &out[0].pp.end] {
        assert_eq!(
            end.output("return.x"),
            Some(Scalar::F32(f32::INFINITY)),
            "{end:?}"
        );
        assert_eq!(end.output("return.y"), Some(Scalar::F32(3.5)), "{end:?}");
    }
    assert_eq!(kinds(&out[0].p), vec![ExceptionKind::Overflow]);
    let out = r
        .run(
            "scale3",
            &[Input(vec![
                ArgValue::F32(1.0),
                ArgValue::F32(2.0),
                ArgValue::F32(3.0),
                ArgValue::F32(0.5),
            ])],
        )
        .expect("run scale3");
    assert_eq!(out[0].p.end.output("return.z"), Some(Scalar::F32(1.5)));
    let out = r.run("conj", &[f64s(&[1.0, 2.0])]).expect("run conj");
    assert_eq!(out[0].pp.end.output("return.im"), Some(Scalar::F64(-2.0)));
    let out = r
        .run(
            "shift",
            &[Input(vec![
                ArgValue::OutPtr,
                ArgValue::F64(1e300),
                ArgValue::F64(1e300),
            ])],
        )
        .expect("run shift");
    for end in [&out[0].p.end, &out[0].pp.end] {
        assert_eq!(end.output("return.a"), Some(Scalar::F64(1e300)), "{end:?}");
        assert_eq!(
            end.output("return.e"),
            Some(Scalar::F64(f64::INFINITY)),
            "{end:?}"
        );
    }
    let out = r
        .run(
            "weighted",
            &[Input(vec![ArgValue::F64(1.5), ArgValue::Int(-4)])],
        )
        .expect("run weighted");
    assert_eq!(out[0].p.end, RunEnd::returned(Some(Scalar::F64(-6.0))));
}

#[test]
fn sse_vectors_and_packed_integer_structs_are_passed_as_the_abi_wants() {
    use crate::types::IrArg;
    let src = r#"
#include <xmmintrin.h>
#include <stdint.h>
typedef struct { int start; uint16_t count; uint8_t kind, color; } Block;
__m128 mad(__m128 a, __m128 b) { return _mm_add_ps(_mm_mul_ps(a, b), _mm_rsqrt_ps(b)); }
double block_sum(Block b) { return (double)b.start * b.count + b.kind - b.color; }
"#;
    let (p, pp) = super::testutil::compile_pair(src);
    let sigs = super::testutil::signatures(&p);
    let sig = |f: &str| sigs.iter().find(|s| s.name == f).expect("described");
    let names: Vec<&str> = sig("mad").params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["a[0]", "a[1]", "a[2]", "a[3]", "b[0]", "b[1]", "b[2]", "b[3]"]
    );
    assert_eq!(
        sig("block_sum").ir_args(),
        [IrArg::Packed(vec![0, 1, 2, 3])]
    );
    let mut r = Runner::build(&p, &pp, &sigs, &AnalysisConfig::default()).expect("build runner");
    let lanes = [1.0, 2.0, 3e38, 4.0, 4.0, 1.0, 10.0, 16.0].map(ArgValue::F32);
    let out = r.run("mad", &[Input(lanes.to_vec())]).expect("run mad");
    for end in [&out[0].p.end, &out[0].pp.end] {
        // rsqrt is the hardware's estimate: near 1/sqrt(b), not equal to it.
        let Some(Scalar::F32(one)) = end.output("return[1]") else {
            panic!("no return[1] in {end:?}");
        };
        assert!((one - 3.0).abs() < 1e-3, "{end:?}");
        assert_eq!(end.output("return[2]"), Some(Scalar::F32(f32::INFINITY)));
    }
    assert!(kinds(&out[0].p).contains(&ExceptionKind::Overflow));
    let block = [-7, 65535, 3, 200].map(ArgValue::Int);
    let out = r
        .run("block_sum", &[Input(block.to_vec())])
        .expect("run block_sum");
    let sum = -7.0 * 65535.0 + 3.0 - 200.0;
    assert_eq!(out[0].p.end, RunEnd::returned(Some(Scalar::F64(sum))));
    assert_eq!(out[0].pp.end, RunEnd::returned(Some(Scalar::F64(sum))));
}

#[test]
fn crashes_hangs_and_huge_allocations_are_contained() {
    let src = r#"
#include <stdlib.h>
#include <string.h>
double crash(double x) { if (x > 1.0) *(volatile int *)0 = 0; return x * 2; }
double wild(double x) { if (x > 1.0) *(volatile int *)0x12345678 = 0; return x * 2; }
double constant(double x) { if (x > 1.0) *(volatile char *)"abc" = 0; return x * 2; }
double hang(double x) { volatile double y = x; while (y > 1.0) { y = y + 1.0; } return y; }
// Direct calls of the C library are stopped before they run; through pointers they run, and are contained.
static void *(*volatile alloc)(size_t) = malloc;
static void *(*volatile fill)(void *, int, size_t) = memset;
static void (*volatile leave)(int) = exit;
double hog(double x) { if (x > 1.0) { char *p = alloc((size_t)1 << 40); p[12345] = 1; fill(p, 1, (size_t)1 << 40); return p[0]; } return x; }
double quit(double x) { if (x > 1.0) leave(3); return x; }
int idiv(int a, int b) { return a / b; }
void fill_out(int n, double *out) { for (int i = 0; i < n; i++) out[i] = i; }
void before(int n, double *out) { out[-n] = 1.0; }
"#;
    let cfg = AnalysisConfig {
        exec_timeout_ms: 200,
        ..AnalysisConfig::default()
    };
    let (mut r, _) = runner(src, &cfg);
    let ins = [
        f64s(&[0.5]),
        f64s(&[2.0]),
        f64s(&[0.25]),
        f64s(&[3.0]),
        f64s(&[1e308]),
    ];
    let out = r.run("crash", &ins).unwrap();
    assert!(matches!(out[0].p.end, RunEnd::Returned { .. }));
    assert!(
        matches!(&out[1].p.end, RunEnd::Crashed { name, .. } if name == "SIGSEGV"),
        "{:?}",
        out[1].p.end
    );
    assert!(
        matches!(&out[1].pp.end, RunEnd::Crashed { .. }),
        "{:?}",
        out[1].pp.end
    );
    assert!(matches!(out[2].p.end, RunEnd::Returned { .. }));
    assert!(matches!(out[3].pp.end, RunEnd::Crashed { .. }));
    assert!(matches!(out[4].p.end, RunEnd::Crashed { .. }));
    // An access far from every mapping (a null pointer followed, with or without an index) ends the run, not
    // the worker; a write to read-only memory ends the worker too.
    let out = r.run("wild", &ins[..3]).unwrap();
    assert!(matches!(&out[1].p.end, RunEnd::Crashed { name, .. } if name == "SIGSEGV"));
    assert!(matches!(out[2].p.end, RunEnd::Returned { .. }));
    assert_eq!(r.stats().worker_starts, 1);
    // A loop writing past a pointer parameter's buffer (4096 bytes), or a write before it, faults at a guard
    // page before it touches anything else: the run crashes, the worker goes on.
    let fill = |n: i64| Input(vec![ArgValue::Int(n), ArgValue::OutPtr]);
    let out = r.run("fill_out", &[fill(4), fill(600), fill(512)]).unwrap();
    assert!(
        matches!(out[0].p.end, RunEnd::Returned { .. }),
        "{:?}",
        out[0].p.end
    );
    assert!(matches!(&out[1].p.end, RunEnd::Crashed { name, .. } if name == "SIGSEGV"));
    assert!(matches!(&out[1].pp.end, RunEnd::Crashed { name, .. } if name == "SIGSEGV"));
    assert!(
        matches!(out[2].pp.end, RunEnd::Returned { .. }),
        "{:?}",
        out[2].pp.end
    );
    let out = r.run("before", &[fill(1), fill(0)]).unwrap();
    assert!(matches!(&out[0].p.end, RunEnd::Crashed { name, .. } if name == "SIGSEGV"));
    assert!(
        matches!(out[1].p.end, RunEnd::Returned { .. }),
        "{:?}",
        out[1].p.end
    );
    assert_eq!(r.stats().worker_starts, 1);
    let out = r.run("constant", &ins[..3]).unwrap();
    assert!(matches!(&out[1].pp.end, RunEnd::Crashed { name, .. } if name == "SIGSEGV"));
    assert!(matches!(out[2].p.end, RunEnd::Returned { .. }));
    assert_eq!(r.stats().worker_starts, 3);

    let out = r
        .run("hang", &[f64s(&[0.5]), f64s(&[2.0]), f64s(&[-1.0])])
        .unwrap();
    assert!(matches!(out[0].p.end, RunEnd::Returned { .. }));
    assert_eq!(out[1].p.end, RunEnd::TimedOut { limit_ms: 200 });
    assert_eq!(out[1].pp.end, RunEnd::TimedOut { limit_ms: 200 });
    assert!(matches!(out[2].pp.end, RunEnd::Returned { .. }));

    let out = r
        .run("hog", &[f64s(&[0.5]), f64s(&[2.0]), f64s(&[0.75])])
        .unwrap();
    assert!(matches!(out[0].p.end, RunEnd::Returned { .. }));
    assert!(
        matches!(out[1].p.end, RunEnd::Crashed { .. }),
        "{:?}",
        out[1].p.end
    );
    assert!(matches!(out[2].pp.end, RunEnd::Returned { .. }));

    let out = r.run("quit", &[f64s(&[2.0]), f64s(&[0.5])]).unwrap();
    assert_eq!(
        out[0].p.end,
        RunEnd::Crashed {
            signal: 0,
            name: "exit(3)".into()
        }
    );
    assert!(matches!(out[1].pp.end, RunEnd::Returned { .. }));

    let out = r
        .run(
            "idiv",
            &[
                Input(vec![ArgValue::Int(1), ArgValue::Int(0)]),
                Input(vec![ArgValue::Int(6), ArgValue::Int(3)]),
            ],
        )
        .unwrap();
    assert!(matches!(&out[0].p.end, RunEnd::Crashed { name, .. } if name == "SIGFPE"));
    assert_eq!(out[1].pp.end, RunEnd::returned(Some(Scalar::Int(2))));
}

/// The limit is CPU time: a run that waits longer than it returns; one that never stops waiting is stopped by the
/// wall clock's safety net and reported as timed out, like one that spins (`pause` waits where the sandbox is off;
/// the seccomp filter refuses it, so in the sandbox that loop spins).
#[test]
fn the_time_limit_counts_cpu_time_and_a_run_that_waits_forever_times_out() {
    let src = r#"
#include <unistd.h>
static int (*volatile nap)(useconds_t) = usleep;
static int (*volatile wait_signal)(void) = pause;
double dozes(double x) { if (x > 1.0) nap(300000); return x * 2; }
double sleeps(double x) { if (x > 1.0) for (;;) nap(20000); return x * 2; }
double waits(double x) { if (x > 1.0) for (;;) wait_signal(); return x * 2; }
double spins(double x) { volatile double y = x; while (y > 1.0) y += 1.0; return y; }
"#;
    let cfg = AnalysisConfig {
        exec_timeout_ms: 100,
        ..AnalysisConfig::default()
    };
    let (mut r, _) = runner(src, &cfg);
    let ins = [f64s(&[2.0]), f64s(&[0.5])];
    let out = r.run("dozes", &ins).unwrap();
    assert_eq!(out[0].p.end, RunEnd::returned(Some(Scalar::F64(4.0))));
    assert_eq!(out[0].pp.end, RunEnd::returned(Some(Scalar::F64(4.0))));
    for function in ["sleeps", "waits", "spins"] {
        let t = Instant::now();
        let out = r.run(function, &ins).unwrap();
        assert_eq!(
            out[0].p.end,
            RunEnd::TimedOut { limit_ms: 100 },
            "{function}"
        );
        assert_eq!(
            out[0].pp.end,
            RunEnd::TimedOut { limit_ms: 100 },
            "{function}"
        );
        assert!(
            matches!(out[1].p.end, RunEnd::Returned { .. }),
            "{function}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{function}: {:?}",
            t.elapsed()
        );
    }
}

/// A run's work is the operations it checked, counted by the runtime: the same on every run of an input.
#[test]
fn a_run_reports_the_operations_it_ran() {
    let src = "double sum(double x, int n) { double s = 0; for (int i = 0; i < n; i++) s += x * i; return s; }\n";
    let (mut r, _) = runner(src, &AnalysisConfig::default());
    let input = |n| Input(vec![ArgValue::F64(1.5), ArgValue::Int(n)]);
    let ops = |r: &mut Runner, n| {
        let out = r.run_raw("sum", &[input(n)]).unwrap();
        (out[0].p.ops, out[0].pp.ops)
    };
    let (small, large) = (ops(&mut r, 10), ops(&mut r, 1000));
    assert!(
        small.0 >= 10 && large.0 >= 1000 && large.0 > small.0,
        "{small:?} {large:?}"
    );
    assert_eq!(ops(&mut r, 1000), large);
}

/// A run past its operation limit times out at the first operation past it, whatever its time limit: a loop that
/// does not end stops at the same point on every machine, long before its CPU time would stop it.
#[test]
fn a_run_past_its_operation_limit_times_out_there() {
    let src = "double spins(double x) { double y = x; while (y > 1.0) y += 1.0; return y; }\n";
    let cfg = AnalysisConfig {
        exec_timeout_ms: 60_000,
        exec_op_limit: 100_000,
        ..AnalysisConfig::default()
    };
    let (mut r, _) = runner(src, &cfg);
    let out = r.run_raw("spins", &[f64s(&[2.0]), f64s(&[0.5])]).unwrap();
    for run in [&out[0].p, &out[0].pp] {
        assert_eq!(run.end, RawEnd::TimedOut);
        assert_eq!(run.ops, 100_001);
    }
    assert!(matches!(out[1].p.end, RawEnd::Returned(_)));
    assert!(matches!(out[1].pp.end, RawEnd::Returned(_)));
}

#[test]
fn hostile_code_cannot_break_the_worker() {
    let src = r#"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
extern double not_in_this_file(double);
// Direct calls of the C library are stopped before they run; through pointers they run, and are contained.
static int (*volatile print)(const char *, ...) = printf;
static int (*volatile fprint)(FILE *, const char *, ...) = fprintf;
static int (*volatile flush)(FILE *) = fflush;
static void (*volatile die)(void) = abort;
static int (*volatile fill_set)(sigset_t *) = sigfillset;
static int (*volatile mask)(int, const sigset_t *, sigset_t *) = sigprocmask;
__attribute__((constructor)) static void noisy(void) { printf("constructor output\n"); }
double chatty(double x) { print("%g\n", x); flush(stdout); fprint(stderr, "err\n"); return x * 2; }
double deep(double x) { volatile char pad[256]; pad[0] = 1; return x > 0 ? deep(x + 1) + pad[0] : x * 3; }
double aborts(double x) { if (x > 1) die(); return x; }
double missing(double x) { if (x > 1) return not_in_this_file(x); return x; }
double stubborn(double x) {
  sigset_t all; fill_set(&all); mask(SIG_BLOCK, &all, 0);
  volatile double y = x; while (y > 1.0) y += 1.0;
  mask(SIG_UNBLOCK, &all, 0);
  return y;
}
"#;
    let cfg = AnalysisConfig {
        exec_timeout_ms: 100,
        ..AnalysisConfig::default()
    };
    let (mut r, _) = runner(src, &cfg);
    let out = r.run("chatty", &[f64s(&[1.5]), f64s(&[1e308])]).unwrap();
    assert_eq!(out[0].p.end, RunEnd::returned(Some(Scalar::F64(3.0))));
    assert_eq!(kinds(&out[1].p), vec![ExceptionKind::Overflow]);

    let out = r.run("deep", &[f64s(&[1.0]), f64s(&[-1.0])]).unwrap();
    assert!(
        matches!(&out[0].p.end, RunEnd::Crashed { name, .. } if name == "SIGSEGV"),
        "{:?}",
        out[0].p.end
    );
    assert!(matches!(out[1].pp.end, RunEnd::Returned { .. }));

    let out = r.run("aborts", &[f64s(&[2.0]), f64s(&[0.0])]).unwrap();
    assert!(matches!(&out[0].pp.end, RunEnd::Crashed { name, .. } if name == "SIGABRT"));
    assert!(matches!(out[1].p.end, RunEnd::Returned { .. }));

    // A function of another file is never called: the runs that reach it stop there, the rest go on.
    let out = r
        .run("missing", &[f64s(&[0.5]), f64s(&[2.0]), f64s(&[0.25])])
        .unwrap();
    assert!(matches!(out[0].pp.end, RunEnd::Returned { .. }));
    for end in [&out[1].p.end, &out[1].pp.end] {
        assert!(
            matches!(end, RunEnd::Stopped { callee, line: Some(17), .. } if callee == "not_in_this_file"),
            "{end:?}"
        );
    }
    assert!(matches!(out[2].pp.end, RunEnd::Returned { .. }));

    // Signals blocked: only the parent's deadline can stop it.
    let t = Instant::now();
    let out = r
        .run("stubborn", &[f64s(&[0.5]), f64s(&[2.0]), f64s(&[0.75])])
        .unwrap();
    assert!(matches!(out[0].p.end, RunEnd::Returned { .. }));
    assert_eq!(out[1].p.end, RunEnd::TimedOut { limit_ms: 100 });
    assert_eq!(out[1].pp.end, RunEnd::TimedOut { limit_ms: 100 });
    assert!(matches!(out[2].pp.end, RunEnd::Returned { .. }));
    eprintln!(
        "stubborn took {:?} with {} worker starts",
        t.elapsed(),
        r.stats().worker_starts
    );
}

#[test]
fn a_call_foe_does_not_run_stops_the_run_cleanly() {
    let src = r#"
#include <stdlib.h>
void report(const char *what);
double stops(double x) {
  double y = x * 1e308;
  if (y > 1e300)
    report("too large");
  return y;
}
double allocates(double x) { double *p = malloc(8); *p = x; return *p * 2; }
"#;
    let (mut r, _) = runner(src, &AnalysisConfig::default());
    let out = r
        .run("stops", &[f64s(&[10.0]), f64s(&[1e-10]), f64s(&[20.0])])
        .unwrap();
    for run in [&out[0].p, &out[0].pp, &out[2].p] {
        assert_eq!(
            run.end,
            RunEnd::Stopped {
                callee: "report".into(),
                line: Some(7),
                column: Some(5)
            }
        );
    }
    // The events before the call are kept.
    assert_eq!(kinds(&out[0].p), vec![ExceptionKind::Overflow]);
    assert!(matches!(out[1].p.end, RunEnd::Returned { .. }));
    assert_eq!(out[0].p.end.describe(), "stopped at `report` (line 7:5)");
    let out = r.run("allocates", &[f64s(&[1.0])]).unwrap();
    assert!(matches!(&out[0].p.end, RunEnd::Stopped { callee, .. } if callee == "malloc"));
    // A stop is not a crash: one worker served every run.
    assert_eq!(r.stats().worker_starts, 1);
}

#[test]
fn data_no_file_defines_is_unreadable_not_zero() {
    // `SCALE` is defined by no file: a run that reads it crashes and names it (with a zeroed stand-in, x * SCALE
    // was 0 in both builds, and the overflow of the product never happened in either); a run that does not read
    // it is untouched (P's; P' loads `SCALE` whichever way the branch goes, as its select needs both values).
    let src = "extern double SCALE;\n\
               double f(double x) { double y = x * 1e300; return x > 1 ? y * SCALE : y; }\n";
    let (mut r, _) = runner(src, &AnalysisConfig::default());
    let out = r.run("f", &[f64s(&[1e10]), f64s(&[1e-10])]).unwrap();
    for run in [&out[0].p, &out[0].pp] {
        assert_eq!(
            run.end,
            RunEnd::Crashed {
                signal: libc::SIGSEGV,
                name: "read SCALE, which no file defines".into()
            }
        );
    }
    assert!(matches!(out[1].p.end, RunEnd::Returned { .. }));
}

#[test]
fn statics_globals_and_unavailable_functions() {
    let src = r#"
static int calls;
static double helper(double x) { calls++; return x * x; }
double twice(double x) { return helper(x) + helper(x); }
int count(void) { return calls; }
static double unused_by_others(double x) { return x / 3; }
double user(double x) { return unused_by_others(x); }
"#;
    let cfg = AnalysisConfig::default();
    let (p, pp) = super::testutil::compile_pair(src);
    let sigs = super::testutil::signatures(&p);
    let mut r = Runner::build(&p, &pp, &sigs, &cfg).unwrap();
    let out = r.run("twice", &[f64s(&[3.0]), f64s(&[1e200])]).unwrap();
    assert_eq!(out[0].p.end, RunEnd::returned(Some(Scalar::F64(18.0))));
    assert_eq!(
        kinds(&out[1].p),
        vec![ExceptionKind::Overflow, ExceptionKind::Overflow]
    );
    // Each build has its own copy of `calls` (P' may have folded it away entirely).
    let out = r.run("count", &[Input(vec![])]).unwrap();
    assert!(matches!(
        out[0].p.end,
        RunEnd::Returned { value: Some(_), .. }
    ));
    // P' inlined the static helpers and dropped them.
    assert!(
        r.unavailable("helper").is_some(),
        "{:?}",
        r.unavailable("helper")
    );
    assert!(matches!(
        r.run("helper", &[f64s(&[1.0])]),
        Err(ExecError::Unavailable { .. })
    ));
    assert!(r
        .sites()
        .iter()
        .any(|(_, s)| s.build == Build::PPrime && s.function == "twice"));
}

/// Every function of every fixture builds and runs on ordinary and extreme inputs without an error.
#[test]
fn fixtures_build_and_run() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let cfg = AnalysisConfig {
        exec_timeout_ms: 300,
        ..AnalysisConfig::default()
    };
    let mut files: Vec<_> = ["bench", "constructs", "robustness"]
        .iter()
        .flat_map(|d| {
            std::fs::read_dir(root.join(d))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
        })
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    files.sort();
    let mut ran = 0;
    for file in files {
        let src = std::fs::read_to_string(&file).unwrap();
        let Ok(pair) = crate::compile::compile_pair(&cfg, &file, &src) else {
            continue;
        };
        let sigs = super::testutil::signatures(&pair.p_ll);
        let mut r = Runner::build(&pair.p_ll, &pair.pp_ll, &sigs, &cfg)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for sig in &sigs {
            if r.unavailable(&sig.name).is_some() {
                continue;
            }
            let inputs: Vec<Input> = [1.5, -1e308, 1e-310]
                .iter()
                .map(|&v| {
                    Input(
                        sig.params
                            .iter()
                            .map(|p| match p.ty {
                                ParamType::F64 => ArgValue::F64(v),
                                ParamType::F32 => ArgValue::F32(v as f32),
                                ParamType::Int { .. } => ArgValue::Int(3),
                                ParamType::OutPtr { .. } => ArgValue::OutPtr,
                            })
                            .collect(),
                    )
                })
                .collect();
            let out = r
                .run(&sig.name, &inputs)
                .unwrap_or_else(|e| panic!("{}: {}: {e}", file.display(), sig.name));
            assert_eq!(out.len(), 3);
            ran += 1;
        }
    }
    assert!(ran > 20, "ran {ran} functions");
}

#[test]
fn runner_can_move_to_another_thread() {
    fn send<T: Send>() {}
    send::<Runner>();
    send::<PairOutcome>();
}

/// Fake workers that speak the protocol wrongly, as code in the worker could: every one is an error on the
/// function, in bounded time, without a panic or unbounded memory.
#[test]
fn forged_and_flooded_replies_are_errors() {
    const FAKE: &str = r#"
#include <stdint.h>
#include <unistd.h>
struct rec { uint32_t input; uint8_t build, status; uint16_t flags; uint32_t detail, nevents; uint64_t ret;
             uint32_t noutputs, nvalues; uint64_t ops; };
static void put_out(uint32_t input, uint8_t build, uint32_t detail, uint32_t nevents, uint32_t noutputs) {
  struct rec r = {input, build, 0, 0, detail, nevents, 0, noutputs, 0, 0};
  write(1, &r, sizeof r);
}
static void put(uint32_t input, uint8_t build, uint32_t detail, uint32_t nevents) {
  put_out(input, build, detail, nevents, 0);
}
int main(void) {
  put(0xffffffffu, 0xff, 7, 0); /* the hello: FOE_PROTOCOL_VERSION */
  char req[64];
  read(0, req, sizeof req);
#if MODE == 1
  put(0, 0, 0, 0xffffffffu);
  static char junk[1 << 16];
  for (;;) write(1, junk, sizeof junk);
#elif MODE == 2
  put(7, 0, 0, 0);
#elif MODE == 3
  put(0, 0, 0, 0); put(0, 1, 0, 0); put(1, 0, 0, 0); put(1, 1, 0, 0);
#elif MODE == 4
  for (;;) put(0xffffffffu, 0xff, 1, 0);
#elif MODE == 5
  for (;;) { write(1, "x", 1); usleep(50000); }
#elif MODE == 6
  uint32_t events[2] = {0xfffffff9u, 0x12345u};
  put(0, 0, 0, 2);
  write(1, events, sizeof events);
  put(0, 1, 0, 0);
  put(1, 0xff, 0, 0);
#elif MODE == 7
  put_out(0, 0, 0, 0, 5000);
  static char junk[1 << 16];
  for (;;) write(1, junk, sizeof junk);
#endif
  pause();
  return 0;
}
"#;
    let cfg = AnalysisConfig {
        exec_timeout_ms: 100,
        ..AnalysisConfig::default()
    };
    let (mut r, _) = runner("double f(double x) { return x * 2; }", &cfg);
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    std::fs::write(dir.path().join("fake.c"), FAKE).unwrap();
    let cases = [
        (1, "claims 4294967295 events"),
        (2, "unexpected record"),
        (3, "unexpected record"),
        (4, "second hello"),
        (5, "trickle"),
        (6, "names no plain-build site"),
        (7, "claims 5000 outputs"),
    ];
    for (mode, expected) in cases {
        let exe = dir.path().join(format!("fake{mode}"));
        let mut cmd = crate::process::command(&cfg.clang, dir.path());
        cmd.arg(format!("-DMODE={mode}"))
            .arg("fake.c")
            .arg("-o")
            .arg(&exe);
        let out = crate::process::run_tool(cmd, None, Duration::from_secs(60)).unwrap();
        assert_eq!(out.status, Some(0), "{}", out.stderr);
        r.worker = None;
        r.exe = exe;
        let started = Instant::now();
        let result = r.run_raw("f", &[f64s(&[1.0])]);
        if expected == "trickle" {
            // A record that never completes is a stuck worker: the run times out (or fails), never returns.
            if let Ok(pairs) = &result {
                assert!(
                    pairs.iter().all(|p| !p.p.returned() && !p.pp.returned()),
                    "{pairs:?}"
                );
            }
        } else {
            let err = result.expect_err("a forged reply is an error").to_string();
            assert!(err.contains(expected), "mode {mode}: {err}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "mode {mode} took {:?}",
            started.elapsed()
        );
    }
}
