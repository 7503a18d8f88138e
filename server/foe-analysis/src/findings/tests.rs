//! Findings from hand-made reports: grouping, ranking, severities, messages, hovers, fingerprints.

use super::*;
use crate::report::{FormulaCounts, FunctionSpan, RunEnd, Scalar, TraceEvent};
use crate::types::{ArgValue, ExceptionKind};

fn ev(kind: ExceptionKind, line: u32, column: u32) -> TraceEvent {
    TraceEvent {
        kind,
        line: Some(line),
        column: Some(column),
        operation: "fdiv".into(),
    }
}

fn div(x: f64, p: Vec<TraceEvent>, q: Vec<TraceEvent>, in_domain: bool) -> Divergence {
    let location = q.first().or(p.first()).and_then(TraceEvent::loc);
    Divergence {
        inputs: vec![NamedValue::new("x", ArgValue::F64(x))],
        trace_p: p,
        trace_p_prime: q,
        end_p: RunEnd::returned(Some(Scalar::F64(f64::NAN))),
        end_p_prime: RunEnd::returned(Some(Scalar::F64(-0.0))),
        in_domain,
        location,
        ..Divergence::default()
    }
}

fn function(divergences: Vec<Divergence>, domain: Vec<String>) -> FunctionReport {
    FunctionReport {
        status: FunctionStatus::Analysed,
        formulae: FormulaCounts::default(),
        divergences,
        span: Some(FunctionSpan {
            line: 2,
            body_line: 2,
            end_line: 6,
        }),
        domain,
        ..FunctionReport::skipped("mean", "")
    }
}

fn report(functions: Vec<FunctionReport>) -> FileReport {
    FileReport {
        file: "/tmp/stats.c".into(),
        functions,
        timings_ms: Default::default(),
        flags_p: vec!["-O0".into()],
        flags_p_prime: vec!["-O2".into(), "-ffast-math".into()],
        ftz_p_prime: true,
        linked_units: vec![],
        dropped_flags: vec![],
        first_look: false,
    }
}

const SOURCE: &str = "#include <math.h>\ndouble mean(double x) {\n  double s = x / 0.0;\n  s = s * s;\n  return s;\n}\n";

#[test]
fn one_finding_per_site_with_a_count_ordinary_inputs_first() {
    use ExceptionKind::*;
    let f = function(
        vec![
            div(1e300, vec![ev(Invalid, 3, 13)], vec![], false),
            div(2.0, vec![ev(Invalid, 3, 13)], vec![], false),
            div(1e-310, vec![], vec![ev(Overflow, 4, 9)], false),
        ],
        vec![],
    );
    let r = report(vec![f]);
    let all = findings(&r, SOURCE, &FindingOptions::default());
    assert_eq!(all.len(), 2, "{all:#?}");
    let first = &all[0];
    assert_eq!(first.code.as_string(), "fast-math-invalid-disappears");
    assert_eq!((first.line, first.column), (3, Some(13)));
    assert_eq!(first.inputs, 2);
    assert_eq!(first.rank, Rank::Ordinary);
    assert_eq!(first.severity, Severity::Warning);
    assert_eq!(
        first.message,
        "the plain build raises invalid here, the fast-math build does not (with x=2); \
         the fast-math build returns -0 where the plain build returns nan; 1 more input"
    );
    // Only a subnormal input diverges at the second site: ranked below, a hint by default.
    let second = &all[1];
    assert_eq!(second.rank, Rank::ExtremeInputs);
    assert_eq!(second.severity, Severity::Hint);
    let hidden = FindingOptions {
        extreme_inputs_severity: ShownAs::Off,
        ..FindingOptions::default()
    };
    assert_eq!(findings(&r, SOURCE, &hidden).len(), 1);
}

#[test]
fn declared_domains_decide_the_severity() {
    use ExceptionKind::*;
    let domain = vec!["0 <= x <= 4".to_string()];
    let outside = function(
        vec![div(8.0, vec![], vec![ev(Overflow, 4, 9)], false)],
        domain.clone(),
    );
    let all = findings(&report(vec![outside]), SOURCE, &FindingOptions::default());
    assert_eq!(all[0].domain, DomainFit::Outside);
    assert_eq!(all[0].severity, Severity::Information);
    assert!(all[0].message.ends_with("; outside the declared domain"));

    let inside = function(
        vec![
            div(8.0, vec![], vec![ev(Overflow, 4, 9)], false),
            div(3.0, vec![], vec![ev(Overflow, 4, 9)], true),
        ],
        domain,
    );
    let all = findings(&report(vec![inside]), SOURCE, &FindingOptions::default());
    assert_eq!(all[0].severity, Severity::Warning);
    assert_eq!(all[0].best_inputs[0].decimal, ArgValue::F64(3.0).decimal());
}

#[test]
fn hovers_are_short_and_name_no_void_result() {
    use ExceptionKind::*;
    let mut d = div(2.0, vec![], vec![ev(Overflow, 4, 9)], false);
    d.end_p = RunEnd::returned(None);
    d.end_p_prime = RunEnd::returned(None);
    let r = report(vec![function(vec![d], vec![])]);
    let all = findings(&r, SOURCE, &FindingOptions::default());
    let hover = &all[0].hover;
    assert!(hover.lines().count() <= 20, "{hover}");
    assert!(!hover.contains('|'), "no tables: {hover}");
    assert!(!hover.contains("returned"), "{hover}");
    assert!(
        hover.contains("foe replay stats.c --function mean --input x=0x1p+1"),
        "{hover}"
    );
    assert!(!all[0].message.contains("returns"), "{}", all[0].message);
}

#[test]
fn related_information_never_points_at_the_site_itself() {
    use ExceptionKind::*;
    // Both builds raise at the site, different kinds: the other build's event is at the same place.
    let d = div(
        2.0,
        vec![ev(Invalid, 3, 13)],
        vec![ev(Overflow, 3, 13)],
        false,
    );
    let r = report(vec![function(vec![d], vec![])]);
    assert_eq!(
        findings(&r, SOURCE, &FindingOptions::default())[0].related,
        None
    );
    let d = div(
        2.0,
        vec![ev(Invalid, 5, 3)],
        vec![ev(Overflow, 3, 13)],
        false,
    );
    let r = report(vec![function(vec![d], vec![])]);
    let related = findings(&r, SOURCE, &FindingOptions::default())[0]
        .related
        .clone()
        .unwrap();
    assert_eq!((related.line, related.column), (5, Some(3)));
}

#[test]
fn fingerprints_survive_a_line_inserted_above() {
    use ExceptionKind::*;
    let at = |line| {
        function(
            vec![div(2.0, vec![], vec![ev(Overflow, line, 9)], false)],
            vec![],
        )
    };
    let before = findings(&report(vec![at(4)]), SOURCE, &FindingOptions::default());
    let shifted = format!("// a comment\n{SOURCE}");
    let after = findings(&report(vec![at(5)]), &shifted, &FindingOptions::default());
    assert_eq!(before[0].fingerprint, after[0].fingerprint);
    assert_ne!(before[0].fingerprint, "");
}

#[test]
fn skipped_functions_are_hints_by_default() {
    let r = report(vec![FunctionReport::skipped(
        "g",
        "calls an unknown function",
    )]);
    let all = findings(&r, SOURCE, &FindingOptions::default());
    assert_eq!(all[0].code, Code::FunctionSkipped);
    assert_eq!(all[0].severity, Severity::Hint);
    let quiet = FindingOptions {
        report_skipped: false,
        ..FindingOptions::default()
    };
    assert!(findings(&r, SOURCE, &quiet).is_empty());
}

#[test]
fn array_elements_past_the_count_are_not_shown() {
    use crate::types::{FunctionSignature, Param, ParamType, PointeeOf, ReturnType};
    let element = |i: u32| Param {
        name: format!("x[{i}]"),
        ty: ParamType::F64,
        pointee: Some(PointeeOf {
            param: 0,
            offset: 8 * i,
        }),
        by_value: None,
    };
    let mut f = function(vec![], vec![]);
    f.signature = Some(FunctionSignature {
        name: "mean".into(),
        params: vec![
            Param::new("x", ParamType::OutPtr { bytes: 4096 }),
            Param::new("n", ParamType::INT),
            element(0),
            element(1),
            element(2),
        ],
        ret: ReturnType::F64,
    });
    let mut d = div(0.0, vec![ev(ExceptionKind::Invalid, 3, 13)], vec![], false);
    d.inputs = vec![
        NamedValue::new("n", ArgValue::Int(1)),
        NamedValue::new("x[0]", ArgValue::F64(2.0)),
        NamedValue::new("x[1]", ArgValue::F64(3.0)),
        NamedValue::new("x[2]", ArgValue::F64(4.0)),
    ];
    let names: Vec<String> = message::shown_inputs(&f, &d)
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["n", "x[0]"]);
}

#[test]
fn the_fix_is_verified_when_only_flush_to_zero_is_left() {
    use crate::fix::{judge, FixVerdict};
    use crate::report::Cause;
    let with_cause = |cause| Divergence {
        cause,
        ..div(1.0, vec![], vec![ev(ExceptionKind::Overflow, 3, 5)], false)
    };
    assert_eq!(judge(&[]), FixVerdict::Verified { build_only: 0 });
    // Counted by place: two inputs flagged at one place are one thing left.
    assert_eq!(
        judge(&[
            with_cause(Cause::FlushToZero),
            with_cause(Cause::FlushToZero)
        ]),
        FixVerdict::Verified { build_only: 1 }
    );
    let elsewhere = Divergence {
        location: Some(crate::types::SourceLoc { line: 9, column: 2 }),
        ..with_cause(Cause::FlushToZero)
    };
    assert_eq!(
        judge(&[with_cause(Cause::FlushToZero), elsewhere]),
        FixVerdict::Verified { build_only: 2 }
    );
    assert_eq!(
        judge(&[
            with_cause(Cause::FlushToZero),
            with_cause(Cause::Reassociation)
        ]),
        FixVerdict::Remains { remaining: 1 }
    );
    // Nothing says a build change removes a divergence of undetermined cause.
    assert_eq!(
        judge(&[with_cause(Cause::Undetermined)]),
        FixVerdict::Remains { remaining: 1 }
    );
    // The pragmas keep the operations in order (`exceptions(strict)`): what plain -O2 reorders is theirs too.
    assert_eq!(
        judge(&[with_cause(Cause::Optimisation)]),
        FixVerdict::Remains { remaining: 1 }
    );
}

#[test]
fn the_shipped_traces_are_shown_once_for_every_front_end() {
    use ExceptionKind::*;
    let mut d = div(1e-310, vec![], vec![ev(Overflow, 4, 9)], false);
    d.confirmation = crate::report::Confirmation::Confirmed;
    d.shipped_trace_p_prime = vec![
        ev(Underflow, 3, 13),
        TraceEvent {
            operation: "in libm.so.6".into(),
            ..ev(Overflow, 4, 9)
        },
    ];
    let r = report(vec![function(vec![d], vec![])]);
    let all = findings(&r, SOURCE, &FindingOptions::default());
    let lines = vec![
        "P as shipped: no exception".to_string(),
        "P' as shipped: underflow at 3:13, overflow in libm.so.6 (called at 4:9)".to_string(),
    ];
    assert_eq!(all[0].shipped, lines);
    assert!(all[0].hover.contains(&lines[1]), "{}", all[0].hover);
    // Not run on the shipped binaries: nothing shown.
    let r = report(vec![function(
        vec![div(1e-310, vec![], vec![ev(Overflow, 4, 9)], false)],
        vec![],
    )]);
    assert!(findings(&r, SOURCE, &FindingOptions::default())[0]
        .shipped
        .is_empty());
}

#[test]
fn a_site_flagged_by_a_helper_and_its_wrapper_is_one_finding_naming_both() {
    use ExceptionKind::*;
    let helper = function(
        vec![div(2.0, vec![ev(Invalid, 3, 13)], vec![], false)],
        vec![],
    );
    let wrapper = FunctionReport {
        name: "wrapper".into(),
        span: Some(FunctionSpan {
            line: 8,
            body_line: 8,
            end_line: 10,
        }),
        ..function(
            vec![div(2.0, vec![ev(Invalid, 3, 13)], vec![], false)],
            vec![],
        )
    };
    // The wrapper comes first in the file: the helper, whose body holds the site, still speaks for both.
    let r = report(vec![wrapper, helper]);
    let all = findings(&r, SOURCE, &FindingOptions::default());
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].function, "mean");
    assert_eq!(all[0].also_in, vec!["wrapper".to_string()]);
    assert!(
        all[0]
            .message
            .starts_with("in `mean`, also through `wrapper`: the plain build raises invalid here"),
        "{}",
        all[0].message
    );
    assert!(all[0].hover.contains("`wrapper`"), "{}", all[0].hover);
}

#[test]
fn a_function_without_evidence_is_never_shown_clean() {
    let mut failed = function(vec![], vec![]);
    failed.status = FunctionStatus::Failed;
    failed.reason = "no solver candidates: the solver process crashed".into();
    let mut crashing = function(vec![], vec![]);
    crashing.name = "other".into();
    crashing.runs = crate::report::RunTally {
        runs: 10,
        incomplete: 9,
        first: Some("crashed (SIGSEGV)".into()),
    };
    let r = report(vec![failed, crashing]);
    let all = findings(&r, SOURCE, &FindingOptions::default());
    let notes: Vec<&str> = all
        .iter()
        .filter(|x| x.code == Code::RunsIncomplete)
        .map(|x| x.message.as_str())
        .collect();
    assert_eq!(notes.len(), 2, "{all:#?}");
    assert!(notes
        .iter()
        .any(|m| m.contains("the solver process crashed")));
    assert!(notes
        .iter()
        .any(|m| m.contains("9 of 10 runs did not complete (first: crashed (SIGSEGV))")));
    assert_eq!(left_unchecked(&r), 2);
    assert!(summary(&r, &all).contains("1 whose runs mostly crashed or timed out, 1 failed"));
}

#[test]
fn runs_cut_by_the_run_limits_name_the_settings_that_raise_them() {
    let cut = |first: String| {
        let mut f = function(vec![], vec![]);
        f.runs = crate::report::RunTally {
            runs: 8,
            incomplete: 8,
            first: Some(first),
        };
        let all = findings(&report(vec![f]), SOURCE, &FindingOptions::default());
        all.into_iter()
            .find(|x| x.code == Code::RunsIncomplete)
            .expect("a runs-incomplete note")
            .message
    };
    let limits = crate::config::AnalysisConfig::default().run_limits_in_words();
    let timed_out = cut(format!("{} {limits}", crate::report::DID_NOT_RETURN));
    assert!(
        timed_out.ends_with("raise the `execOpLimit` or `execTimeoutMs` setting"),
        "{timed_out}"
    );
    let crashed = cut("crashed (SIGSEGV)".into());
    assert!(!crashed.contains("setting"), "{crashed}");
}

#[test]
fn a_static_function_flagged_where_no_caller_reaches_is_a_hint() {
    use ExceptionKind::*;
    let helper = |static_callers: Vec<String>| FunctionReport {
        static_callers,
        ..function(
            vec![div(2.0, vec![ev(Invalid, 3, 13)], vec![], false)],
            vec![],
        )
    };
    let caller = |divergences| FunctionReport {
        name: "api".into(),
        span: Some(FunctionSpan {
            line: 8,
            body_line: 8,
            end_line: 10,
        }),
        ..function(divergences, vec![])
    };
    // No caller's analysis reached the site: a hint that says why.
    let r = report(vec![helper(vec!["api".into()]), caller(vec![])]);
    let all = findings(&r, SOURCE, &FindingOptions::default());
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].severity, Severity::Hint);
    assert!(
        all[0]
            .message
            .contains("`mean` is static and the analysis of its callers (`api`)"),
        "{}",
        all[0].message
    );
    // The caller reached it: a warning, as for any function.
    let reached = caller(vec![div(2.0, vec![ev(Invalid, 3, 13)], vec![], false)]);
    let r = report(vec![helper(vec!["api".into()]), reached]);
    let all = findings(&r, SOURCE, &FindingOptions::default());
    assert_eq!(all[0].severity, Severity::Warning, "{all:#?}");
    // An external function (no static callers) is judged on its own inputs.
    let r = report(vec![helper(vec![]), caller(vec![])]);
    assert_eq!(
        findings(&r, SOURCE, &FindingOptions::default())[0].severity,
        Severity::Warning
    );
}
