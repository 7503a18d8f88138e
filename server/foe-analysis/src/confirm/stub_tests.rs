//! Tests of the shipped binaries' stubs: calls of functions no file defines, the project's other units, units
//! that do not compile, data nobody defines, and which verdicts a run that reached a stub can give.

use super::tests::{doubles, ends, sig};
use super::*;
use crate::config::AnalysisConfig;
use crate::report::RunEnd;
use crate::types::{Param, ReturnType};

#[test]
fn a_call_of_a_function_no_file_defines_stops_the_run_there() {
    // As the instrumented worker stops its run at such a call: what was raised before it is the trace, and nothing
    // of the callee runs.
    let src = "double helper(double);\ndouble f(double x) { double y = x * x; return x > 0 ? helper(y) : y; }\n";
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let file = dir.path().join("f.c");
    std::fs::write(&file, src).unwrap();
    let s = sig("f", vec![Param::new("x", ParamType::F64)], ReturnType::F64);
    let mut h = Harness::new(&AnalysisConfig::default(), &file, src, &[s]);
    let inputs = doubles(&[1e300, -1e300]);
    let runs = h.run(Probe::Shipped, "f", &inputs).unwrap();
    assert_eq!(
        runs[0].end,
        ShippedEnd::Stopped(4),
        "overflow, then the call"
    );
    assert_eq!(runs[0].stopped_at.as_deref(), Some("helper"));
    assert_eq!(runs[0].trace.len(), 1);
    assert_eq!(runs[1].end, ShippedEnd::Raised(4));
    let p = h.run(Probe::Reference, "f", &inputs).unwrap();
    assert_eq!(p[0].comparable(&runs[0]), Some((4, 4)));
    assert_eq!(
        p[0].comparable(&runs[1]),
        None,
        "a stopped run and a returned one"
    );
    assert_eq!(
        p[0].sets(&runs[1]),
        None,
        "the stopped run raised nothing the other did not"
    );
    let returned_clean = ShippedRun {
        end: ShippedEnd::Raised(0),
        trace: Vec::new(),
        dropped: 0,
        stopped_at: None,
        produced: Default::default(),
    };
    assert_eq!(
        runs[0].sets(&returned_clean),
        Some((4, 0)),
        "an overflow before the stop is a difference whatever the callee would do"
    );
    assert!(
        h.stubbed.lock().unwrap().is_empty(),
        "no file of the project defines `helper`"
    );
}

#[test]
fn the_project_s_other_units_are_linked_with_their_own_flags() {
    // `scale` lives in another unit of the compilation database, whose entry defines FACTOR: the shipped binaries
    // run it as the program does (an overflow inside it), not a stub.
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let a = "double scale(double);\ndouble f(double x) { return scale(x) + 1; }\n";
    let b = "double scale(double x) { return x * FACTOR; }\n";
    std::fs::write(dir.path().join("a.c"), a).unwrap();
    std::fs::write(dir.path().join("b.c"), b).unwrap();
    let entries: Vec<String> = ["a.c", "b.c"]
        .iter()
        .map(|f| {
            format!(
                r#"{{"directory": "{}", "file": "{f}", "command": "cc -DFACTOR=1e300 -c {f}"}}"#,
                dir.path().display()
            )
        })
        .collect();
    let db = dir.path().join("compile_commands.json");
    std::fs::write(&db, format!("[{}]", entries.join(","))).unwrap();
    let config = AnalysisConfig {
        compile_commands: Some(db),
        ..AnalysisConfig::default()
    };
    let db = crate::compile::CompileDb::find(
        &dir.path().join("a.c"),
        config.compile_commands.as_deref(),
    );
    let s = sig("f", vec![Param::new("x", ParamType::F64)], ReturnType::F64);
    let mut h = Harness::new(&config, &dir.path().join("a.c"), a, &[s]).with_units(
        &crate::project::Linked {
            units: vec![dir.path().join("b.c")],
            ..Default::default()
        },
        db.as_ref(),
        &[],
    );
    let inputs = vec![
        Input(vec![ArgValue::F64(1e10)]),
        Input(vec![ArgValue::F64(1.0)]),
    ];
    for probe in [Probe::Reference, Probe::Shipped] {
        let runs = h.run(probe, "f", &inputs).unwrap();
        // The overflow is no line of a.c: it is named by its function, file and line.
        assert_eq!(runs[0].trace.len(), 1, "{probe:?}");
        assert_eq!(runs[0].trace[0].line, None);
        assert_eq!(runs[0].trace[0].operation, "in scale (b.c:1)", "{probe:?}");
        assert_eq!(
            ends(runs),
            vec![ShippedEnd::Raised(4), ShippedEnd::Raised(0)],
            "{probe:?}"
        );
    }
    assert!(h.stubbed.lock().unwrap().is_empty());
}

/// The shipped harness of `a` (`a.c` in `dir`, defining `double f(double x)`) with the project's unit `b.c`
/// holding `b`, which does not compile: the binaries are linked without it.
fn with_a_broken_unit(dir: &tempfile::TempDir, a: &str, b: &str) -> Harness {
    std::fs::write(dir.path().join("a.c"), a).unwrap();
    std::fs::write(dir.path().join("b.c"), b).unwrap();
    let s = sig("f", vec![Param::new("x", ParamType::F64)], ReturnType::F64);
    Harness::new(&AnalysisConfig::default(), &dir.path().join("a.c"), a, &[s]).with_units(
        &crate::project::Linked {
            units: vec![dir.path().join("b.c")],
            ..Default::default()
        },
        None,
        &[],
    )
}

#[test]
fn a_unit_that_does_not_compile_leaves_the_binaries_stubbed_and_says_so() {
    // The unit defining `scale` is broken: the binaries are linked without the units, `scale` gets a stub, and
    // the harness records that a stub stands for code the instrumented builds ran.
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let a = "double scale(double);\ndouble f(double x) { return x > 0 ? scale(x) : x * 2; }\n";
    let mut h = with_a_broken_unit(&dir, a, "double scale(double x) { return x * ; }\n");
    let inputs = vec![
        Input(vec![ArgValue::F64(1.0)]),
        Input(vec![ArgValue::F64(-1e308)]),
    ];
    let runs = h.run(Probe::Shipped, "f", &inputs).unwrap();
    assert_eq!(runs[0].end, ShippedEnd::Stopped(0));
    assert_eq!(runs[1].end, ShippedEnd::Raised(4));
    assert!(h.stubbed.lock().unwrap().contains("scale"));
}

#[test]
fn a_value_no_file_defines_is_never_read_as_garbage() {
    // `PREC` is data no file of the project defines: reading it crashes the run (not checked), where a function
    // stub's code bytes read as a double made the traces of both builds up.
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let a = "extern const double PREC[];\ndouble f(double x, int i) { return i ? x * PREC[0] : x * 2; }\n";
    std::fs::write(dir.path().join("a.c"), a).unwrap();
    let s = sig(
        "f",
        vec![
            Param::new("x", ParamType::F64),
            Param::new("i", ParamType::INT),
        ],
        ReturnType::F64,
    );
    let mut h = Harness::new(&AnalysisConfig::default(), &dir.path().join("a.c"), a, &[s])
        .with_units(
            &crate::project::Linked {
                unresolved_data: ["PREC".to_string()].into(),
                ..Default::default()
            },
            None,
            &[],
        );
    let inputs = vec![
        Input(vec![ArgValue::F64(1e308), ArgValue::Int(1)]),
        Input(vec![ArgValue::F64(1e308), ArgValue::Int(0)]),
    ];
    for probe in [Probe::Reference, Probe::Shipped] {
        let runs = h.run(probe, "f", &inputs).unwrap();
        assert_eq!(
            ends(runs),
            vec![ShippedEnd::Crashed, ShippedEnd::Raised(4)],
            "{probe:?}"
        );
    }
    assert!(h.stubbed.lock().unwrap().contains("PREC"));
}

#[test]
fn a_value_another_file_defines_is_never_read_as_garbage_when_its_unit_cannot_be_linked() {
    // `K` is defined by `b.c`, which does not compile: the binaries are linked without it and `K` is stubbed.
    // The object reads it (it is not called), so its stub is a guard page: the read crashes the run (not
    // checked) where a function stub's code bytes read as a double made both builds compute with them.
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let a = "extern const double K;\ndouble f(double x) { return x > 0 ? x * K : x * 2; }\n";
    let mut h = with_a_broken_unit(&dir, a, "const double K = ;\n");
    let inputs = doubles(&[1e308, -1e308]);
    let p = h.run(Probe::Reference, "f", &inputs).unwrap();
    assert_eq!(ends(p), vec![ShippedEnd::Crashed, ShippedEnd::Raised(4)]);
    // P' loads `K` before the branch (a select): every run reads it.
    let pp = h.run(Probe::Shipped, "f", &inputs).unwrap();
    assert_eq!(ends(pp)[0], ShippedEnd::Crashed);
    assert!(h.stubbed.lock().unwrap().contains("K"));
}

/// A shipped run that returned having raised `bits` (no events placed), or stopped at `stub`.
fn shipped_run(bits: u8, stub: Option<&str>) -> ShippedRun {
    ShippedRun {
        end: match stub {
            Some(_) => ShippedEnd::Stopped(bits),
            None => ShippedEnd::Raised(bits),
        },
        trace: Vec::new(),
        dropped: 0,
        stopped_at: stub.map(str::to_string),
        produced: Default::default(),
    }
}

#[test]
fn stubs_for_what_other_files_define_withhold_a_verdict_only_from_runs_that_reached_them() {
    let s = sig("f", vec![Param::new("x", ParamType::F64)], ReturnType::F64);
    let input = Some(Input(vec![ArgValue::F64(1.0)]));
    let stubbed = vec!["scale".to_string()];
    let overflow_in_pp = Divergence {
        class: DivergenceClass::Appears,
        trace_p_prime: vec![TraceEvent {
            kind: ExceptionKind::Overflow,
            line: Some(1),
            column: Some(1),
            operation: "fmul".into(),
        }],
        ..Divergence::default()
    };
    let check = |d: &Divergence, p: ShippedRun, pp: ShippedRun| {
        check_divergence(&s, 8, &stubbed, d.clone(), Some((p, pp)), input.clone())
    };
    // Both shipped runs returned: no stub ran (a function's stops the call, a datum's crashes it), so they are
    // the program's runs, and a difference they do not show is not reported however many stubs were linked.
    assert!(matches!(
        check(&overflow_in_pp, shipped_run(0, None), shipped_run(0, None)),
        Checked::Dropped
    ));
    assert!(matches!(
        check(&overflow_in_pp, shipped_run(0, None), shipped_run(4, None)),
        Checked::Kept(d, _) if d.confirmation == Confirmation::Confirmed
    ));
    // A run that stopped at a stub for code another file defines is the program's run only up to the call: no
    // verdict where the instrumented run went on into the callee.
    assert!(matches!(
        check(&overflow_in_pp, shipped_run(0, Some("scale")), shipped_run(4, None)),
        Checked::Unconfirmed(d, stub) if d.confirmation == Confirmation::NotRun && stub == "scale"
    ));
    // Even where the instrumented runs stopped there too (the callee past the unit limit): the program goes on
    // into the callee, which may raise what the other build raised.
    let stopped = RunEnd::Stopped {
        callee: "scale".into(),
        line: Some(1),
        column: Some(1),
    };
    let both_stop = Divergence {
        end_p: stopped.clone(),
        end_p_prime: stopped.clone(),
        ..overflow_in_pp.clone()
    };
    assert!(matches!(
        check(
            &both_stop,
            shipped_run(0, Some("scale")),
            shipped_run(4, Some("scale"))
        ),
        Checked::Unconfirmed(..)
    ));
    // But an exception raised before the call, which the other build's complete run never raised, is a
    // difference whatever the callee does.
    assert!(matches!(
        check(&overflow_in_pp, shipped_run(0, None), shipped_run(4, Some("scale"))),
        Checked::Kept(d, _) if d.confirmation == Confirmation::Confirmed
    ));
    // A divergence in whether the call is reached: P stops there, P' returns.
    let reaches_the_call = Divergence {
        class: DivergenceClass::Ending,
        end_p: stopped,
        ..Divergence::default()
    };
    assert!(matches!(
        check(&reaches_the_call, shipped_run(0, Some("scale")), shipped_run(0, None)),
        Checked::Kept(d, _) if d.confirmation == Confirmation::Confirmed
    ));
}

#[test]
fn the_names_a_link_would_miss_are_read_from_the_objects() {
    // A project function no object defines is predicted; what the C library, the compiler's runtime (complex
    // multiplication's `__muldc3`) and the objects themselves define is not; a weak reference is not needed.
    let src = "#include <math.h>\n#include <complex.h>\ndouble helper(double);\n\
               extern double table_nobody_defines[4];\n__attribute__((weak)) double optional(double);\n\
               double mine(double x) { return x; }\n\
               double f(double x, double _Complex z) { double _Complex w = z * z; \
               return helper(sin(x)) + mine(creal(w)) + table_nobody_defines[1] + (optional ? optional(x) : 0); }\n";
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let obj = dir.path().join("f.o");
    build::compile_file(
        &AnalysisConfig::default().clang,
        dir.path(),
        &["-O2".to_string()],
        src,
        &obj,
        dir.path(),
    )
    .unwrap();
    assert_eq!(
        build::predicted_undefined(std::slice::from_ref(&obj), &[]),
        vec!["helper".to_string(), "table_nobody_defines".to_string()]
    );
    assert!(
        build::predicted_undefined(std::slice::from_ref(&obj), &["-lhelpers".to_string()])
            .is_empty(),
        "a library of the link's own may define them"
    );
}
