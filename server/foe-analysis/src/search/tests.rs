//! Tests of the neighbourhood search and trace comparison, on real builds run natively.

use super::*;
use crate::config::FtzMode;
use crate::exec::testutil::runner;
use crate::report::Scalar;
use crate::report::TraceEvent;
use crate::round::step_f32;
use crate::types::Param;

fn ev(kind: ExceptionKind) -> TraceEvent {
    TraceEvent {
        kind,
        line: Some(1),
        column: Some(1),
        operation: "fmul".into(),
    }
}

fn f64s(vs: &[f64]) -> Input {
    Input(vs.iter().map(|&v| ArgValue::F64(v)).collect())
}

#[test]
fn compare_traces_classes() {
    use DivergenceClass::*;
    use ExceptionKind::*;
    let t = |ks: &[ExceptionKind]| ks.iter().map(|&k| ev(k)).collect::<Vec<_>>();
    assert_eq!(compare_traces(&t(&[]), &t(&[])), None);
    assert_eq!(
        compare_traces(&t(&[Overflow, Invalid]), &t(&[Overflow, Invalid])),
        None
    );
    assert_eq!(compare_traces(&t(&[Overflow]), &t(&[])), Some((0, Appears)));
    assert_eq!(
        compare_traces(&t(&[Overflow]), &t(&[Overflow, Underflow])),
        Some((1, Appears))
    );
    assert_eq!(
        compare_traces(&t(&[Overflow]), &t(&[Overflow, Overflow])),
        Some((1, Count))
    );
    assert_eq!(
        compare_traces(&t(&[Invalid, Overflow]), &t(&[Overflow, Invalid])),
        Some((0, Order))
    );
    assert_eq!(
        compare_traces(
            &t(&[Invalid, Overflow, Invalid]),
            &t(&[Invalid, Invalid, Overflow])
        ),
        Some((1, Order))
    );
    // Locations do not matter, only kinds and order.
    let mut moved = t(&[Overflow]);
    moved[0].line = Some(9);
    moved[0].operation = "fadd".into();
    assert_eq!(compare_traces(&t(&[Overflow]), &moved), None);
}

pub(super) fn sig(params: Vec<ParamType>) -> FunctionSignature {
    FunctionSignature {
        name: "f".into(),
        params: params
            .into_iter()
            .enumerate()
            .map(|(i, ty)| Param::new(format!("a{i}"), ty))
            .collect(),
        ret: crate::types::ReturnType::F64,
    }
}

#[test]
fn full_cube_in_shell_order() {
    let s = sig(vec![
        ParamType::F64,
        ParamType::INT,
        ParamType::OutPtr { bytes: 8 },
    ]);
    let cfg = AnalysisConfig {
        radius: 2,
        ..AnalysisConfig::default()
    };
    let c = Input(vec![ArgValue::F64(1.0), ArgValue::Int(7), ArgValue::OutPtr]);
    let pts = neighbourhood(&s, &c, &cfg);
    assert_eq!(pts.len(), 25);
    assert_eq!(pts[0], c);
    // Shell 1 comes before shell 2; axis points first within a shell.
    let dist = |p: &Input| match (p.0[0], p.0[1]) {
        (ArgValue::F64(x), ArgValue::Int(n)) => {
            let steps = ((x.to_bits() as i64) - (1.0f64.to_bits() as i64)).abs();
            steps.max((n - 7).abs())
        }
        _ => unreachable!(),
    };
    let shells: Vec<i64> = pts.iter().map(dist).collect();
    assert!(shells.windows(2).all(|w| w[0] <= w[1]), "{shells:?}");
    assert_eq!(&shells[..9], &[0, 1, 1, 1, 1, 1, 1, 1, 1]);
    assert!(pts.iter().all(|p| p.0[2] == ArgValue::OutPtr));
    // Integers are clamped to the C type; duplicates vanish.
    let b = sig(vec![ParamType::Int {
        bits: 1,
        signed: false,
    }]);
    let pts = neighbourhood(&b, &Input(vec![ArgValue::Int(0)]), &cfg);
    assert_eq!(
        pts,
        vec![Input(vec![ArgValue::Int(0)]), Input(vec![ArgValue::Int(1)])]
    );
}

#[test]
fn budgeted_neighbourhood_is_ordered_and_deterministic() {
    let s = sig(vec![ParamType::F64; 6]);
    let cfg = AnalysisConfig {
        radius: 3,
        neighbourhood_budget: 500,
        ..AnalysisConfig::default()
    };
    let c = f64s(&[1.0, 2.0, 3.0, -4.0, 5e-300, 6e300]);
    let a = neighbourhood(&s, &c, &cfg);
    let b = neighbourhood(&s, &c, &cfg);
    assert_eq!(a, b);
    assert_eq!(a.len(), 500);
    assert_eq!(a[0], c);
    let steps = |p: &Input| -> Vec<i64> {
        p.0.iter()
            .zip(&c.0)
            .map(|(x, y)| match (x, y) {
                (ArgValue::F64(x), ArgValue::F64(y)) => {
                    let ord = |v: f64| {
                        if v < 0.0 {
                            -((v.to_bits() & !(1 << 63)) as i64)
                        } else {
                            v.to_bits() as i64
                        }
                    };
                    ord(*x) - ord(*y)
                }
                _ => unreachable!(),
            })
            .collect()
    };
    let offs: Vec<Vec<i64>> = a.iter().map(steps).collect();
    assert!(offs.iter().all(|d| d.iter().all(|x| x.abs() <= 3)));
    let shells: Vec<i64> = offs.iter().map(|d| shell(d)).collect();
    assert!(shells.windows(2).all(|w| w[0] <= w[1]));
    // All 12 axis points of shell 1 and both main diagonals are in.
    for i in 0..6 {
        for s in [-1, 1] {
            let mut d = vec![0; 6];
            d[i] = s;
            assert!(offs.contains(&d), "{d:?}");
        }
    }
    assert!(offs.contains(&vec![1; 6]) && offs.contains(&vec![-3; 6]));
    assert!(shells.contains(&3));
}

const IDENTITY: &str = "double identity(double x){double a=2*x; double b=a*0.5; return b;}\n";

#[test]
fn identity_search_finds_appears() {
    let cfg = AnalysisConfig::default();
    let (mut r, sigs) = runner(IDENTITY, &cfg);
    let out = search(
        &mut r,
        &sigs[0],
        &[f64s(&[1e308]), f64s(&[1.0]), f64s(&[1e308])],
        None,
        &cfg,
        None,
    )
    .unwrap();
    assert_eq!(out.diff_producing, 1);
    assert_eq!(out.divergences.len(), 1);
    let d = &out.divergences[0];
    assert_eq!(d.class, DivergenceClass::Appears);
    assert_eq!(d.first_divergence, 0);
    assert_eq!(d.inputs[0].name, "x");
    assert_eq!(
        d.inputs[0].raw,
        Some(ArgValue::F64(1e308)),
        "the candidate itself diverges"
    );
    assert_eq!(d.trace_p.len(), 1);
    assert_eq!(d.trace_p[0].kind, ExceptionKind::Overflow);
    assert!(d.trace_p_prime.is_empty());
    assert_eq!(
        d.summary,
        "plain build overflows here, fast-math build does not"
    );
    assert_eq!(d.location.map(|l| l.line), Some(1));
    assert_eq!(d.end_p.value(), Some(Scalar::F64(f64::INFINITY)));
    assert!(
        d.end_p_prime
            .describe()
            .starts_with("0x1.1ccf385ebc8ap+1023"),
        "{:?}",
        d.end_p_prime
    );
    assert!(d.in_domain);
    // The 1e308 candidate stopped at its first point; 1.0 ran its whole 7-point neighbourhood.
    assert_eq!(out.executions, 1 + 7);
    assert!(out
        .plain_exceptions
        .iter()
        .any(|e| e.kind == ExceptionKind::Overflow && e.line == Some(1)));
}

const TURBINE1: &str = r#"double turbine1(double v, double w, double r) {
  return 3 + 2/(r*r) - 0.125*(3-2*v)*(w*w*r*r)/(1-v) - 4.5;
}
"#;

fn kinds(t: &[TraceEvent]) -> Vec<ExceptionKind> {
    t.iter().map(|e| e.kind).collect()
}

/// The paper reports that P' overflows and P does not at (v, w, r) = (-0.25, 1.34078079299425970996e154,
/// -0.125). With clang 19, w = 2^512 exactly, so w*w overflows in both builds (P' computes -w*w first too);
/// the traces are equal there and in its radius-3 neighbourhood. P' distributes 0.125 into
/// (0.375 - 0.25*v) and multiplies w*w by it before r*r, so it overflows where P (which scales by r*r first)
/// does not, e.g. at v = -10, w = 1e154, r = 0.5.
#[test]
fn turbine1_paper_input_and_a_divergent_one() {
    let cfg = AnalysisConfig::default();
    let (mut r, sigs) = runner(TURBINE1, &cfg);
    #[allow(clippy::excessive_precision)] // the paper's digits
    let paper = f64s(&[-0.25, 1.34078079299425970996e154, -0.125]);
    let pair = &r.run("turbine1", std::slice::from_ref(&paper)).unwrap()[0];
    let show = |t: &[TraceEvent]| {
        t.iter()
            .map(|e| {
                format!(
                    "{} {}:{} {}",
                    e.kind,
                    e.line.unwrap_or(0),
                    e.column.unwrap_or(0),
                    e.operation
                )
            })
            .collect::<Vec<_>>()
    };
    eprintln!(
        "turbine1 at the paper's input:\n  P : {:?} -> {:?}\n  P': {:?} -> {:?}",
        show(&pair.p.trace),
        pair.p.end,
        show(&pair.pp.trace),
        pair.pp.end
    );
    assert_eq!(kinds(&pair.p.trace), vec![ExceptionKind::Overflow]);
    assert_eq!(kinds(&pair.pp.trace), vec![ExceptionKind::Overflow]);
    assert_eq!(
        (pair.p.trace[0].line, pair.p.trace[0].column),
        (Some(2), Some(40))
    );
    // P' lost the location of its w*w; the site takes the line of the statement's next located instruction.
    assert_eq!(
        (pair.pp.trace[0].line, pair.pp.trace[0].column),
        (Some(2), None)
    );
    let out = search(&mut r, &sigs[0], &[paper], None, &cfg, None).unwrap();
    eprintln!(
        "turbine1 neighbourhood of the paper's input: {} divergent of {} executions",
        out.diff_producing, out.executions
    );
    assert_eq!(out.executions, 343);

    let out = search(
        &mut r,
        &sigs[0],
        &[f64s(&[-10.0, 1e154, 0.5])],
        None,
        &cfg,
        None,
    )
    .unwrap();
    assert_eq!(out.diff_producing, 1, "{out:#?}");
    let d = &out.divergences[0];
    eprintln!(
        "turbine1 at (-10, 1e154, 0.5): {}; P {:?}, P' {:?}",
        d.summary,
        show(&d.trace_p),
        show(&d.trace_p_prime)
    );
    assert_eq!(d.class, DivergenceClass::Appears);
    assert!(kinds(&d.trace_p).is_empty());
    assert_eq!(kinds(&d.trace_p_prime), vec![ExceptionKind::Overflow]);
    assert_eq!(
        d.summary,
        "fast-math build overflows here, plain build does not"
    );
    assert_eq!(d.location.map(|l| l.line), Some(2));
    assert_eq!(d.end_p_prime.value(), Some(Scalar::F64(f64::NEG_INFINITY)));
    assert_eq!(
        out.executions, 1,
        "the candidate itself diverges, so its neighbourhood is not searched"
    );
}

#[test]
fn ftz_daz_changes_underflow() {
    let src = "double tiny(double x) { return x * 0.3; }\ndouble shrink(double x) { return x * 1e-10; }\n";
    let on = AnalysisConfig::default();
    assert!(on.p_prime_ftz());
    let (mut r, sigs) = runner(src, &on);
    // A subnormal input: P underflows; P' with DAZ reads it as zero and raises nothing.
    let out = r.run("tiny", &[f64s(&[1e-310])]).unwrap();
    let kinds = |t: &[TraceEvent]| t.iter().map(|e| e.kind).collect::<Vec<_>>();
    eprintln!(
        "tiny(1e-310): P {:?} {:?}, P' {:?} {:?}",
        kinds(&out[0].p.trace),
        out[0].p.end,
        kinds(&out[0].pp.trace),
        out[0].pp.end
    );
    assert_eq!(kinds(&out[0].p.trace), vec![ExceptionKind::Underflow]);
    assert!(out[0].pp.trace.is_empty());
    let d = search(&mut r, &sigs[0], &[f64s(&[1e-310])], None, &on, None).unwrap();
    assert_eq!(
        d.divergences[0].summary,
        "plain build underflows here, fast-math build does not"
    );
    // A normal input with a subnormal result: both underflow (FTZ flushes and still raises underflow).
    let out = r.run("shrink", &[f64s(&[1e-300])]).unwrap();
    eprintln!(
        "shrink(1e-300): P {:?} {:?}, P' {:?} {:?}",
        kinds(&out[0].p.trace),
        out[0].p.end,
        kinds(&out[0].pp.trace),
        out[0].pp.end
    );
    assert_eq!(kinds(&out[0].p.trace), vec![ExceptionKind::Underflow]);
    assert_eq!(kinds(&out[0].pp.trace), vec![ExceptionKind::Underflow]);
    assert_eq!(
        out[0].pp.end,
        crate::report::RunEnd::returned(Some(Scalar::F64(0.0)))
    );
    // Without FTZ/DAZ both builds agree on the subnormal input.
    let off = AnalysisConfig {
        ftz_daz: FtzMode::Off,
        ..AnalysisConfig::default()
    };
    let (mut r, _) = runner(src, &off);
    let out = r.run("tiny", &[f64s(&[1e-310])]).unwrap();
    assert_eq!(kinds(&out[0].pp.trace), vec![ExceptionKind::Underflow]);
}

#[test]
fn domain_and_plain_exceptions() {
    let src = "double g(double x, double y) {\n  double q = x / y;\n  return q * 2.0;\n}\n";
    let cfg = AnalysisConfig::default();
    let (mut r, sigs) = runner(src, &cfg);
    let domain = Domain {
        ranges: vec![crate::domain::ParamRange {
            param: 1,
            lo: Some(crate::domain::Bound {
                value: 1.0,
                inclusive: true,
            }),
            hi: None,
        }],
        text: vec!["y >= 1".into()],
    };
    // x/0 divides by zero on line 2 but y = 0 is outside the domain: no plain exception is reported for it.
    let out = search(
        &mut r,
        &sigs[0],
        &[f64s(&[1.0, 0.0]), f64s(&[1e308, 1.0])],
        Some(&domain),
        &cfg,
        None,
    )
    .unwrap();
    assert!(
        out.plain_exceptions
            .iter()
            .all(|e| e.kind != ExceptionKind::DivideByZero),
        "{:?}",
        out.plain_exceptions
    );
    // q * 2 overflows on line 3 in both builds for x near DBL_MAX, y = 1: no divergence, but a plain exception.
    let ov = out
        .plain_exceptions
        .iter()
        .find(|e| e.kind == ExceptionKind::Overflow)
        .expect("overflow");
    assert_eq!(ov.line, Some(3));
    assert_eq!(ov.inputs.len(), 2);
    for d in &out.divergences {
        eprintln!(
            "{:?} {} {:?} vs {:?} in domain {}",
            d.class, d.summary, d.trace_p, d.trace_p_prime, d.in_domain
        );
        let y = d.inputs[1]
            .raw
            .and_then(|v| {
                if let ArgValue::F64(y) = v {
                    Some(y)
                } else {
                    None
                }
            })
            .unwrap();
        assert_eq!(d.in_domain, y >= 1.0);
    }
    assert_eq!(out.executions, 49 * 2);
}

#[test]
fn count_divergence_from_real_builds() {
    let src = "double two(double x, double y) {\n  return (x * 2) * 0.5 + y * y;\n}\n";
    let cfg = AnalysisConfig::default();
    let (mut r, sigs) = runner(src, &cfg);
    let out = search(
        &mut r,
        &sigs[0],
        &[f64s(&[1e308, 1e200]), f64s(&[1.0, 2.0])],
        None,
        &cfg,
        None,
    )
    .unwrap();
    assert_eq!(out.diff_producing, 1);
    let d = &out.divergences[0];
    assert_eq!(d.class, DivergenceClass::Count);
    assert_eq!(
        kinds(&d.trace_p),
        vec![ExceptionKind::Overflow, ExceptionKind::Overflow]
    );
    assert_eq!(kinds(&d.trace_p_prime), vec![ExceptionKind::Overflow]);
    assert_eq!(
        d.summary,
        "fast-math build raises overflow once, plain build 2 times"
    );
    assert_eq!(d.first_divergence, 1);
    // Count divergences do not stop the search: the whole cube of the first candidate ran.
    assert_eq!(out.executions, 49 + 49);
}

#[test]
fn budget_larger_radius_one_dimension() {
    let s = sig(vec![ParamType::F32]);
    let cfg = AnalysisConfig {
        radius: 10_000,
        neighbourhood_budget: 100,
        ..AnalysisConfig::default()
    };
    let pts = neighbourhood(&s, &Input(vec![ArgValue::F32(1.0)]), &cfg);
    assert_eq!(pts.len(), 100);
    // The nearest 99 neighbours: ±1 .. ±49 and one of ±50.
    assert!(pts.contains(&Input(vec![ArgValue::F32(step_f32(1.0, -49))])));
    assert!(pts.contains(&Input(vec![ArgValue::F32(step_f32(1.0, 49))])));
    // No searchable parameter: the candidate alone.
    let none = sig(vec![]);
    assert_eq!(neighbourhood(&none, &Input(vec![]), &cfg).len(), 1);
}
