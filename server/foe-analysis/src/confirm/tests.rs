//! Tests of the shipped-binary confirmation: real clang, real binaries.

use super::*;
use crate::config::AnalysisConfig;
use crate::report::RunEnd;
use crate::types::{Param, ReturnType};

/// How each run ended.
pub(super) fn ends(runs: Vec<ShippedRun>) -> Vec<ShippedEnd> {
    runs.into_iter().map(|r| r.end).collect()
}

/// One input of a function of one `double` per value.
pub(super) fn doubles(xs: &[f64]) -> Vec<Input> {
    xs.iter().map(|&x| Input(vec![ArgValue::F64(x)])).collect()
}

pub(super) fn sig(name: &str, params: Vec<Param>, ret: ReturnType) -> FunctionSignature {
    FunctionSignature {
        name: name.into(),
        params,
        ret,
    }
}

#[test]
fn shipped_builds_raise_what_clang_s_code_raises() {
    // `pick` at odd = 0: the select of the IR is a branch in clang's code, the division never runs.
    let src = "double pick(double x, int odd) { double r = x * 3.0; return odd ? -1.0 / r : r; }\n";
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let file = dir.path().join("pick.c");
    std::fs::write(&file, src).unwrap();
    let s = sig(
        "pick",
        vec![
            Param::new("x", ParamType::F64),
            Param::new("odd", ParamType::INT),
        ],
        ReturnType::F64,
    );
    let mut h = Harness::new(&AnalysisConfig::default(), &file, src, &[s]);
    let inputs = [
        Input(vec![ArgValue::F64(0.0), ArgValue::Int(0)]),
        Input(vec![ArgValue::F64(0.0), ArgValue::Int(1)]),
        Input(vec![ArgValue::F64(1e308), ArgValue::Int(0)]),
    ];
    let p = ends(h.run(Probe::Reference, "pick", &inputs).unwrap());
    let pp = ends(h.run(Probe::Shipped, "pick", &inputs).unwrap());
    assert_eq!(p[0], ShippedEnd::Raised(0));
    assert_eq!(pp[0], ShippedEnd::Raised(0), "no division at odd = 0");
    assert_eq!(p[1], ShippedEnd::Raised(2), "divide-by-zero");
    assert_eq!(pp[1], ShippedEnd::Raised(2));
    assert_eq!(p[2], ShippedEnd::Raised(4), "overflow");
}

#[test]
fn a_call_that_waits_for_what_never_comes_times_out_without_waiting_for_the_wall_clock() {
    // sem_wait on a semaphore no thread posts sleeps for ever (the worker stops its run at the call: the shipped
    // binary links the C library). With a 5 s limit per call the driver's own wall-clock limit would end it after
    // 40 s; asleep without using the CPU, it is taken as timed out within a second, and the next input runs.
    let src = "#include <semaphore.h>\nstatic sem_t never;\n\
               double wait_if(double x) { if (x > 0) sem_wait(&never); return x * 2; }\n";
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let file = dir.path().join("wait.c");
    std::fs::write(&file, src).unwrap();
    let s = sig(
        "wait_if",
        vec![Param::new("x", ParamType::F64)],
        ReturnType::F64,
    );
    let config = AnalysisConfig {
        exec_timeout_ms: 5000,
        ..AnalysisConfig::default()
    };
    let mut h = Harness::new(&config, &file, src, &[s]);
    let started = std::time::Instant::now();
    let p = ends(
        h.run(Probe::Reference, "wait_if", &doubles(&[1.0, -1.0]))
            .unwrap(),
    );
    assert_eq!(p, [ShippedEnd::TimedOut, ShippedEnd::Raised(0)]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "waited {:?}",
        started.elapsed()
    );
}

#[test]
fn start_up_code_of_the_file_does_not_run_in_the_shipped_builds() {
    // A constructor and an init-array entry that would trap at start-up: removed before linking, so the
    // function runs and raises what it raises.
    let src = "static void boom(void) { __builtin_trap(); }\n\
               __attribute__((used, section(\".init_array\"))) static void (*p)(void) = boom;\n\
               __attribute__((constructor)) static void boom2(void) { __builtin_trap(); }\n\
               double twice(double x) { return x * 2.0; }\n";
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let file = dir.path().join("ctor.c");
    std::fs::write(&file, src).unwrap();
    let s = sig(
        "twice",
        vec![Param::new("x", ParamType::F64)],
        ReturnType::F64,
    );
    let mut h = Harness::new(&AnalysisConfig::default(), &file, src, &[s]);
    let inputs = [Input(vec![ArgValue::F64(1e308)])];
    for probe in [Probe::Reference, Probe::Shipped] {
        let ends = ends(h.run(probe, "twice", &inputs).unwrap());
        assert_eq!(
            ends[0],
            ShippedEnd::Raised(4),
            "{probe:?}: overflow, no trap at start-up"
        );
    }
}

/// Searches exactly `input` (radius 0) on the instrumented builds, then confirms the result.
fn search_and_confirm(src: &str, name: &str, input: Input) -> (usize, FunctionReport) {
    let config = AnalysisConfig {
        radius: 0,
        ..AnalysisConfig::default()
    };
    let (mut runner, sigs) = crate::exec::testutil::runner(src, &config);
    let sig = sigs.iter().find(|s| s.name == name).unwrap().clone();
    let found = crate::search::search(&mut runner, &sig, &[input], None, &config, None).unwrap();
    let instrumented = found.divergences.len();
    let mut report = FunctionReport::skipped(name, "");
    report.divergences = found.divergences;
    report.diff_producing = found.diff_producing;
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let file = dir.path().join("t.c");
    std::fs::write(&file, src).unwrap();
    let mut h = Harness::new(&config, &file, src, &sigs);
    confirm_function(&mut h, &sig, &mut report);
    (instrumented, report)
}

#[test]
fn a_run_that_stops_at_an_error_reporter_is_confirmed_against_one_that_returns() {
    // P computes a NaN and reports it (`report_nan` is defined nowhere: the run stops at its call); P' assumes
    // finite math, folds the test away and returns. P raised invalid before the stop, P' never: a set difference
    // on the shipped binaries whatever `report_nan` would do.
    let src = "void report_nan(void);\n\
               double f(double x) {\n  double y = (x * 1e308) * 1e308;\n  double z = y - y;\n  \
               if (z != z) { report_nan(); return 0; }\n  return z + x;\n}\n";
    let (instrumented, report) = search_and_confirm(src, "f", Input(vec![ArgValue::F64(2.0)]));
    assert!(instrumented >= 1);
    let d = report
        .divergences
        .iter()
        .find(|d| matches!(&d.end_p, RunEnd::Stopped { callee, .. } if callee == "report_nan"))
        .unwrap_or_else(|| panic!("{:?}", report.divergences));
    assert_eq!(d.confirmation, Confirmation::Confirmed, "{d:?}");
    assert!(d.shipped_p.contains(&ExceptionKind::Invalid));
    assert!(!d.shipped_p_prime.contains(&ExceptionKind::Invalid));
}

#[test]
fn a_select_that_ships_as_a_branch_is_not_reported() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/trust/pick.c"
    ))
    .unwrap();
    let (instrumented, report) = search_and_confirm(
        &src,
        "pick",
        Input(vec![ArgValue::F64(0.0), ArgValue::Int(0)]),
    );
    assert_eq!(
        instrumented, 1,
        "the instrumented P' divides by zero at odd = 0"
    );
    assert!(report.divergences.is_empty(), "{:?}", report.divergences);
    assert_eq!(report.not_reproduced, 1);
    assert_eq!(report.diff_producing, 0);
}

#[test]
fn machine_combiner_reassociation_is_judged_on_the_shipped_code() {
    // turbine1 at this input: the plain build overflows; foe's P' (llc -O0) does not, the shipped P' does,
    // because the x86 MachineCombiner re-associates the fmul chain.
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/trust/machine_combiner.c"
    ))
    .unwrap();
    let input = Input(vec![
        ArgValue::F64(-f64::from_bits(1)),
        ArgValue::F64(f64::from_bits(0x5fef_ffff_ffff_ffff)),
        ArgValue::F64(f64::from_bits(0x3ff0_0000_0000_0001)),
    ]);
    let (instrumented, report) = search_and_confirm(&src, "turbine1", input);
    assert_eq!(instrumented, 1);
    assert!(report.divergences.is_empty(), "{:?}", report.divergences);
    assert_eq!(report.not_reproduced, 1);
}

#[test]
fn a_confirmed_divergence_gets_its_cause() {
    // A subnormal input: the shipped P' (linked with -ffast-math) flushes it to zero and divides by zero.
    let src = "double inv(double x) { return 1.0 / x; }\n";
    let (_, report) = search_and_confirm(src, "inv", Input(vec![ArgValue::F64(f64::from_bits(1))]));
    let d = &report.divergences[0];
    assert_eq!(d.confirmation, Confirmation::Confirmed);
    assert_eq!(d.shipped_p, vec![ExceptionKind::Overflow]);
    assert_eq!(d.shipped_p_prime, vec![ExceptionKind::DivideByZero]);
    assert_eq!(d.cause, Cause::FlushToZero);
}

#[test]
fn the_flush_to_zero_probe_is_the_fast_math_binary_run_without_ftz_and_daz() {
    // An inexact subnormal product: the plain build underflows and returns it, the fast-math one flushes it to
    // zero, the probe does as the plain build.
    let src = "double f(double x) { return x * 0x1p-1000; }\n";
    let (_dir, mut h) = harness_of_f(src);
    let input = doubles(&[f64::from_bits((1023 - 40) << 52 | 1)]);
    let result = |h: &mut Harness, probe| {
        let run = h.run(probe, "f", &input).unwrap().remove(0);
        (run.end, f64::from_bits(run.produced.result))
    };
    let subnormal = f64::from_bits(1 << (1074 - 1040));
    let underflow = ShippedEnd::Raised(8);
    assert_eq!(result(&mut h, Probe::Reference), (underflow, subnormal));
    let (_, flushed) = result(&mut h, Probe::Shipped);
    assert_eq!(flushed, 0.0, "the fast-math binary flushes the product");
    assert_eq!(
        result(&mut h, Probe::Without(Cause::FlushToZero)),
        (underflow, subnormal)
    );
    // No link made it: it is the fast-math binary under its own name (on x86-64, whose MXCSR the driver clears).
    if cfg!(target_arch = "x86_64") {
        use std::os::unix::fs::MetadataExt;
        let inode = |probe| {
            std::fs::metadata(h.binaries[&probe].as_ref().unwrap())
                .unwrap()
                .ino()
        };
        assert_eq!(
            inode(Probe::Without(Cause::FlushToZero)),
            inode(Probe::Shipped)
        );
        assert_ne!(
            h.binaries[&Probe::Without(Cause::FlushToZero)],
            h.binaries[&Probe::Shipped]
        );
    }
    // And the fast-math binary's own runs keep FTZ/DAZ: its driver is not the probe's.
    assert_eq!(result(&mut h, Probe::Shipped).1, 0.0);
}

/// The shipped harness of `src`, which defines `double f(double x)`, with a 100 ms run limit (and the directory
/// that holds the file, to keep alive).
fn harness_of_f(src: &str) -> (tempfile::TempDir, Harness) {
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let file = dir.path().join("f.c");
    std::fs::write(&file, src).unwrap();
    let s = sig("f", vec![Param::new("x", ParamType::F64)], ReturnType::F64);
    let config = AnalysisConfig {
        exec_timeout_ms: 100,
        ..AnalysisConfig::default()
    };
    let h = Harness::new(&config, &file, src, &[s]);
    (dir, h)
}

#[test]
fn crashes_and_hangs_are_outcomes_and_the_rest_still_runs() {
    let src =
        "double f(double x) { if (x == 1) __builtin_trap(); while (x == 2) {} return x * 2; }\n";
    let (_dir, mut h) = harness_of_f(src);
    let inputs = doubles(&[1.0, 2.0, 1e308]);
    let ends = ends(h.run(Probe::Reference, "f", &inputs).unwrap());
    assert_eq!(
        ends,
        vec![
            ShippedEnd::Crashed,
            ShippedEnd::TimedOut,
            ShippedEnd::Raised(4)
        ]
    );
}

/// A call that follows a null pointer (an address far from every mapping) ends as a crash and the driver goes on
/// with the next call; a write to read-only memory ends the driver, and the next call runs in a new one.
#[test]
fn a_wild_access_ends_the_call_and_the_driver_goes_on() {
    let src = "#include <stdint.h>\n\
               double f(double x) {\n\
                 if (x == 1) return *(volatile double *)(uintptr_t)16;\n\
                 if (x == 3) { char *s = (char *)\"literal\"; *(volatile char *)s = 0; }\n\
                 return x * 2;\n\
               }\n";
    let (_dir, mut h) = harness_of_f(src);
    let inputs = doubles(&[1.0, 5.0, 1.0, 3.0, 1e308]);
    let ends = ends(h.run(Probe::Reference, "f", &inputs).unwrap());
    assert_eq!(
        ends,
        vec![
            ShippedEnd::Crashed,
            ShippedEnd::Raised(0),
            ShippedEnd::Crashed,
            ShippedEnd::Crashed,
            ShippedEnd::Raised(4)
        ]
    );
    assert_eq!(
        h.calls_run(),
        (5, 2),
        "one driver, and one more after the write"
    );
    // The next batch runs in the driver still running.
    h.run(Probe::Reference, "f", &[Input(vec![ArgValue::F64(7.0)])])
        .unwrap();
    assert_eq!(h.calls_run(), (6, 2));
}

/// The driver fills the stack below each call first: a local the function never wrote reads the fill (zeros
/// unless the request names another byte), the same in every run, and a function that writes what it reads does
/// not change with the fill.
#[test]
fn a_local_never_written_reads_the_fill_of_the_stack() {
    let src = "double f(double x) {\n\
                 volatile double never_written[8];\n\
                 if (x == 1) return never_written[3] + x;\n\
                 return x * 2;\n\
               }\n";
    let (_dir, mut h) = harness_of_f(src);
    let result = |h: &mut Harness, x: f64, fill: u8| {
        let runs = h
            .run_filled(
                Probe::Reference,
                "f",
                &[Input(vec![ArgValue::F64(x)])],
                fill,
            )
            .unwrap();
        f64::from_bits(runs[0].produced.result)
    };
    assert_eq!(result(&mut h, 1.0, 0), 1.0, "zeros below the call");
    assert!(result(&mut h, 1.0, 0xff).is_nan(), "all ones is a NaN");
    assert_eq!(
        result(&mut h, 1.0, 0),
        1.0,
        "the same again after another fill"
    );
    assert_eq!(result(&mut h, 3.0, 0), result(&mut h, 3.0, 0xff));
}

/// The limit is CPU time: a call that sleeps longer than it returns, one that waits forever times out by the wall
/// clock's safety net.
#[test]
fn the_shipped_limit_counts_cpu_time_and_a_call_that_waits_forever_times_out() {
    let src = "#include <unistd.h>\nstatic int (*volatile nap)(useconds_t) = usleep;\n\
               double f(double x) { if (x == 1) nap(300000); if (x == 2) for (;;) nap(20000); return x * 2; }\n";
    let (_dir, mut h) = harness_of_f(src);
    let inputs = doubles(&[1.0, 2.0, 3.0]);
    let t = std::time::Instant::now();
    let ends = ends(h.run(Probe::Reference, "f", &inputs).unwrap());
    assert_eq!(
        ends,
        vec![
            ShippedEnd::Raised(0),
            ShippedEnd::TimedOut,
            ShippedEnd::Raised(0)
        ]
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn the_cause_is_flush_to_zero_then_plain_optimisation_then_the_first_option_whose_removal_gives_p_s_exceptions(
) {
    let same = |ftz: bool, plain: bool| {
        move |probe: Probe| {
            Some(match probe {
                Probe::Without(Cause::FlushToZero) => ftz,
                Probe::Without(Cause::Optimisation) => plain,
                _ => false,
            })
        }
    };
    assert_eq!(decide(same(true, true)), Cause::FlushToZero);
    assert_eq!(decide(same(false, false)), Cause::Optimisation);
    assert_eq!(decide(same(false, true)), Cause::Combined);
    assert_eq!(decide(|_| None), Cause::Undetermined);
    // Removing re-association gives P's exceptions: re-association, unless plain -O2 diverges too.
    let reassociation = |plain: bool| {
        move |probe: Probe| {
            Some(match probe {
                Probe::Without(Cause::Reassociation) => true,
                Probe::Without(Cause::Optimisation) => plain,
                _ => false,
            })
        }
    };
    assert_eq!(decide(reassociation(true)), Cause::Reassociation);
    assert_eq!(decide(reassociation(false)), Cause::Optimisation);
}

#[test]
fn code_chosen_by_the_fast_math_macro_is_its_cause_when_p_prime_without_only_the_macro_gives_p_s_result(
) {
    // Every single-option probe drops `__FAST_MATH__`: each gives P's result.
    let options = |macro_probe: Option<bool>| {
        move |probe: Probe| match probe {
            Probe::Without(Cause::FastMathMacro) => macro_probe,
            Probe::Without(Cause::FlushToZero) => Some(false),
            _ => Some(true),
        }
    };
    assert!(needs_macro_probe(options(None)));
    assert_eq!(decide(options(Some(true))), Cause::FastMathMacro);
    // P' without the macro still diverges: the first option, as before.
    assert_eq!(decide(options(Some(false))), Cause::Reassociation);
    assert!(!needs_macro_probe(options(Some(false))));
    // One option alone gives P's result: no macro probe is built.
    let one = |probe: Probe| {
        Some(matches!(
            probe,
            Probe::Without(Cause::Contraction | Cause::Optimisation)
        ))
    };
    assert!(!needs_macro_probe(one));
    assert_eq!(decide(one), Cause::Contraction);
    // One option gives P's result and the others have not run yet (the first stage): the macro probe is built,
    // or a divergence the macro makes would be put down to re-association, the first stage's option.
    let first_stage = |probe: Probe| match probe {
        Probe::Without(Cause::FlushToZero) => Some(false),
        Probe::Without(Cause::Optimisation | Cause::Reassociation) => Some(true),
        _ => None,
    };
    assert!(needs_macro_probe(first_stage));
}

#[test]
fn the_first_stage_of_probes_compiles_two_and_finite_math_is_asked_before_contraction() {
    let stages = probe_stages();
    assert_eq!(
        stages[0],
        [
            Probe::Without(Cause::FlushToZero),
            Probe::Without(Cause::Optimisation),
            Probe::Without(Cause::Reassociation),
        ]
    );
    assert!(stages[1..].iter().all(|s| s.len() <= 2));
    let flat: Vec<Probe> = stages.concat();
    assert_eq!(flat, probe_order());
    assert_eq!(
        flat.len(),
        PROBES.len() + 1,
        "every probe once, and plain -O2"
    );
    let at = |c: Cause| flat.iter().position(|p| *p == Probe::Without(c));
    assert!(at(Cause::FiniteMath) < at(Cause::Contraction));
    // Where both would explain a divergence, the one asked first is its cause.
    let both = |p: Probe| {
        Some(matches!(
            p,
            Probe::Without(Cause::Contraction | Cause::FiniteMath | Cause::Optimisation)
        ))
    };
    assert_eq!(decide(both), Cause::FiniteMath);
}

/// The shipped traces of `name` in `src` on `input`, for P and P'.
fn shipped_traces(src: &str, name: &str, s: FunctionSignature, input: Input) -> [ShippedRun; 2] {
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let file = dir.path().join("t.c");
    std::fs::write(&file, src).unwrap();
    let mut h = Harness::new(&AnalysisConfig::default(), &file, src, &[s]);
    [Probe::Reference, Probe::Shipped].map(|probe| {
        h.run(probe, name, std::slice::from_ref(&input))
            .unwrap()
            .remove(0)
    })
}

/// A trace as `kind@line:column` words.
fn placed(run: &ShippedRun) -> Vec<String> {
    run.trace
        .iter()
        .map(|e| {
            format!(
                "{}@{}:{}",
                e.kind,
                e.line.map_or("?".into(), |l| l.to_string()),
                e.column.map_or("?".into(), |c| c.to_string())
            )
        })
        .collect()
}

fn f64s(name: &str, n: usize) -> FunctionSignature {
    let params = (0..n)
        .map(|i| Param::new(format!("a{i}"), ParamType::F64))
        .collect();
    sig(name, params, ReturnType::F64)
}

#[test]
fn shipped_traces_place_each_event_on_its_line_in_order() {
    // Underflow at line 2, then divide-by-zero at line 3 (the product is 0), in both builds.
    let src = "double two(double x, double y) {\n  double u = x * y;\n  return 1.0 / u;\n}\n";
    let input = Input(vec![ArgValue::F64(1e-200), ArgValue::F64(1e-200)]);
    for (run, build) in shipped_traces(src, "two", f64s("two", 2), input)
        .iter()
        .zip(["P", "P'"])
    {
        assert_eq!(run.end, ShippedEnd::Raised(0b1010), "{build}");
        assert_eq!(
            placed(run),
            ["underflow@2:16", "divide-by-zero@3:14"],
            "{build}"
        );
        assert_eq!(run.dropped, 0);
    }
}

#[test]
fn an_event_in_an_inlined_helper_is_at_the_helper_s_line() {
    let src = "static double sq(double a) {\n  return a * a;\n}\n\
               double f(double x) {\n  return sq(x) + 1.0;\n}\n";
    let input = Input(vec![ArgValue::F64(1e200)]);
    let [p, pp] = shipped_traces(src, "f", f64s("f", 1), input);
    assert_eq!(placed(&p), ["overflow@2:12"], "P calls the helper");
    assert_eq!(placed(&pp), ["overflow@2:12"], "P' inlines it");
}

#[test]
fn a_libm_overflow_is_an_event_at_the_call() {
    let src = "#include <math.h>\ndouble e(double x) {\n  return exp(x);\n}\n";
    let input = Input(vec![ArgValue::F64(800.0)]);
    for run in shipped_traces(src, "e", f64s("e", 1), input) {
        assert_eq!(run.end, ShippedEnd::Raised(4));
        assert_eq!(run.trace.len(), 1, "{:?}", run.trace);
        let e = &run.trace[0];
        assert_eq!(
            (e.kind, e.line),
            (ExceptionKind::Overflow, Some(3)),
            "{e:?}"
        );
        assert!(e.operation.starts_with("in "), "names the library: {e:?}");
    }
}

#[test]
fn what_code_raises_under_feholdexcept_is_no_event() {
    // The overflow at line 5 happens with exceptions held (masked, then discarded by fesetenv); the one at line
    // 7 is after the environment came back, with the driver's traps.
    let src =
        "#include <fenv.h>\ndouble held(double x) {\n  fenv_t env;\n  feholdexcept(&env);\n  \
               volatile double r = x * x;\n  fesetenv(&env);\n  return x * 1e150 + r;\n}\n";
    let input = Input(vec![ArgValue::F64(1e200)]);
    for run in shipped_traces(src, "held", f64s("held", 1), input) {
        assert_eq!(run.end, ShippedEnd::Raised(4));
        assert_eq!(placed(&run), ["overflow@7:12"]);
    }
}

#[test]
fn traces_that_differ_in_order_only_on_the_shipped_binaries_are_trace_only() {
    // x subnormal: P takes the first branch (overflow, then underflow); P', linked with -ffast-math, reads x as
    // 0 (denormals-are-zero) and takes the second (underflow, then overflow).
    let src = "double ord(double x, double y, double z, double w) {\n  double r;\n  if (x > 0) {\n    \
               r = y * y;\n    r += z / w;\n  } else {\n    r = z / w;\n    r -= y * y;\n  }\n  return r;\n}\n";
    let input = Input(vec![
        ArgValue::F64(f64::from_bits(1)),
        ArgValue::F64(1e200),
        ArgValue::F64(1e-200),
        ArgValue::F64(1e200),
    ]);
    let [p, pp] = shipped_traces(src, "ord", f64s("ord", 4), input.clone());
    assert_eq!(placed(&p), ["overflow@4:11", "underflow@5:12"]);
    assert_eq!(
        p.trace.iter().map(|e| e.kind).collect::<Vec<_>>(),
        pp.trace.iter().rev().map(|e| e.kind).collect::<Vec<_>>(),
        "{:?}",
        placed(&pp)
    );
    let (instrumented, report) = search_and_confirm(src, "ord", input);
    assert_eq!(instrumented, 1);
    let d = &report.divergences[0];
    assert_eq!(d.confirmation, Confirmation::TraceOnly);
    assert_eq!(d.shipped_trace_p, p.trace);
    assert_eq!(d.shipped_trace_p_prime, pp.trace);
    assert_eq!(report.diff_producing, d.candidates);
}

#[test]
fn a_long_trace_keeps_its_first_events_and_says_more_followed() {
    // 1000 underflows at -O0 (the product is subnormal and inexact each time); the sums that stay subnormal are
    // exact, trap when underflow is unmasked, and are no event. Trapping stops at the first event past the trace's
    // 256, so the rest of the call runs untraced and the count of those dropped is a lower bound.
    let src = "double loop(double x) {\n  double s = 0;\n  for (int i = 0; i < 1000; i++)\n    \
               s += x * 1e-300;\n  return s;\n}\n";
    let [p, _] = shipped_traces(
        src,
        "loop",
        f64s("loop", 1),
        Input(vec![ArgValue::F64(1e-10)]),
    );
    assert_eq!(p.end, ShippedEnd::Raised(8));
    assert_eq!(p.trace.len(), 256);
    assert_eq!(p.dropped, 1);
    assert!(p.trace.iter().all(|e| e.line == Some(4)));
}

#[test]
fn probes_built_by_a_sibling_in_the_background_are_taken_over_and_run() {
    let src = "double sq(double x) { return x * x; }\n";
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let file = dir.path().join("sq.c");
    std::fs::write(&file, src).unwrap();
    let s = sig("sq", vec![Param::new("x", ParamType::F64)], ReturnType::F64);
    let mut h = Harness::new(&AnalysisConfig::default(), &file, src, &[s]);
    let sibling = h.sibling();
    let later = [Probe::Without(Cause::Reassociation)];
    h.build_later(&later, &[], sibling, |_| {});
    // Another probe does not wait for the sibling; the sibling's probe is its binary, in its directory.
    let big = [Input(vec![ArgValue::F64(1e300)])];
    assert_eq!(
        ends(h.run(Probe::Shipped, "sq", &big).unwrap()),
        [ShippedEnd::Raised(4)]
    );
    assert!(
        h.background.is_some(),
        "the shipped binary did not need the sibling"
    );
    let runs = h.run(later[0], "sq", &big).unwrap();
    assert_eq!(ends(runs), [ShippedEnd::Raised(4)]);
    assert!(h.background.is_none());
    assert_eq!(h.adopted.len(), 1);
    // The probe's binary is the sibling's, or the shipped binary itself: `-fno-associative-math` changes no
    // instruction of `x * x`, so whichever of the two harnesses links second finds the other's binary of the same
    // object and link command (`reuse.rs`), and which one is second is the threads' timing.
    let exe = h.binaries[&later[0]].clone().unwrap();
    let shipped = h.binaries[&Probe::Shipped].clone().unwrap();
    assert!(
        exe.starts_with(h.adopted[0].dir().unwrap()) || exe == shipped,
        "{exe:?} is neither the sibling's binary nor the shipped one ({shipped:?})"
    );
}

#[test]
fn a_count_difference_is_not_probed_past_the_first_pair() {
    // P underflows twice ((x * 1e-200) is subnormal, then 0); P', re-associated, multiplies by the folded 1e-300
    // once: the same set, another count. Flush-to-zero and plain -O2 do not explain it (-O2 keeps both products),
    // and no other divergence of the function needs the later probes: its cause is not looked for.
    let src = "double twice(double x) { return x * 1e-200 * 1e-100; }\n";
    let (instrumented, report) =
        search_and_confirm(src, "twice", Input(vec![ArgValue::F64(1e-120)]));
    assert_eq!(instrumented, 1);
    let d = &report.divergences[0];
    assert_eq!(d.confirmation, Confirmation::TraceOnly, "{d:?}");
    assert_eq!(d.cause, Cause::NotProbed);
    assert!(Cause::NotProbed.describe().starts_with("not looked for"));
}

#[test]
fn a_units_cached_shipped_object_is_compiled_again_when_a_header_it_includes_changes() {
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let unit = dir.path().join("u.c");
    std::fs::write(&unit, "#include \"u.h\"\ndouble k(void) { return K; }\n").unwrap();
    let clang = AnalysisConfig::default().clang;
    let flags = ["-O2".to_string()];
    for k in [2.0f64, 3.0] {
        std::fs::write(dir.path().join("u.h"), format!("#define K {k:?}\n")).unwrap();
        let obj = build::unit_object(&clang, &unit, &[], &flags, dir.path()).unwrap();
        let bytes = std::fs::read(&obj).unwrap();
        assert!(
            bytes.windows(8).any(|w| w == k.to_le_bytes()),
            "the object of `u.c` as `u.h` now reads holds K = {k}"
        );
    }
}
