//! End-to-end tests of modelling and solving: small C files compiled with the real clang (both builds' flags),
//! loaded, prepared, modelled and solved with the real Z3.
//! Over 800 lines on purpose: a test file of 29 short cases that share one set of compile-and-model helpers.

use super::{
    model_function, model_pair, prepare_for_modelling, ModelError, ModelLimits, ModelledPair,
    PointeeTable, Query,
};
use crate::config::AnalysisConfig;
use crate::domain::{Bound, Domain, ParamRange};
use crate::ir::{describe_functions, parse_module};
use crate::solve::{solve, SolveOutcome};
use crate::sym::{self, Sort};
use crate::types::{ArgValue, Build, ExceptionKind, FunctionSignature, ParamType};
use inkwell::context::Context;
use std::time::{Duration, Instant};

pub(crate) const FLAGS_P: &[&str] = &["-O0", "-Xclang", "-disable-O0-optnone", "-ffp-contract=off"];
pub(crate) const FLAGS_PP: &[&str] = &["-O2", "-ffast-math"];

/// The textual IR of `source` built with `flags` (in foe's scratch directory: the only place the confined
/// compiler may write).
pub(crate) fn compile(source: &str, flags: &[&str]) -> String {
    let dir = crate::scratch::tempdir("foe-test").expect("temp dir");
    let c = dir.path().join("t.c");
    let ll = dir.path().join("t.ll");
    std::fs::write(&c, source).expect("write C file");
    let mut cmd = crate::process::command(AnalysisConfig::default().clang, dir.path());
    cmd.args(["-S", "-emit-llvm", "-g"])
        .args(flags)
        .arg(&c)
        .arg("-o")
        .arg(&ll);
    let out = crate::process::run_tool(cmd, None, Duration::from_secs(60)).expect("run clang");
    assert_eq!(out.status, Some(0), "clang failed: {}", out.stderr);
    std::fs::read_to_string(&ll).expect("read IR")
}

/// One build of `source`, prepared, and the signature of `function` (from P).
pub(super) struct Built {
    ll_p: String,
    ll_pp: String,
}

pub(super) fn build(source: &str) -> Built {
    Built {
        ll_p: compile(source, FLAGS_P),
        ll_pp: compile(source, FLAGS_PP),
    }
}

fn signature(ctx: &Context, ll_p: &str, function: &str) -> FunctionSignature {
    let module = parse_module(ctx, ll_p, "p").expect("parse P");
    describe_functions(&module, ll_p)
        .into_iter()
        .filter_map(Result::ok)
        .map(|f| f.signature)
        .find(|s| s.name == function)
        .unwrap_or_else(|| panic!("no function {function}"))
}

fn model_build(
    built: &Built,
    function: &str,
    b: Build,
    cfg: &AnalysisConfig,
) -> Result<Vec<Query>, ModelError> {
    let ctx = Context::create();
    let sig = signature(&ctx, &built.ll_p, function);
    let ll = if b == Build::P {
        &built.ll_p
    } else {
        &built.ll_pp
    };
    let module = parse_module(&ctx, ll, "m").expect("parse");
    prepare_for_modelling(&module, b).expect("prepare");
    let pointees = PointeeTable::shared(sig.params.len() as u32);
    model_function(&module, &sig, b, cfg, &pointees, Default::default()).map(|m| m.queries)
}

/// Both builds of `function` modelled together, as the pipeline does.
pub(super) fn model_both(
    built: &Built,
    function: &str,
    cfg: &AnalysisConfig,
) -> Result<ModelledPair, ModelError> {
    model_both_within(built, function, cfg, ModelLimits::default())
}

/// Both builds of `function` modelled within `limits`.
fn model_both_within(
    built: &Built,
    function: &str,
    cfg: &AnalysisConfig,
    limits: ModelLimits,
) -> Result<ModelledPair, ModelError> {
    let ctx = Context::create();
    let sig = signature(&ctx, &built.ll_p, function);
    let p = parse_module(&ctx, &built.ll_p, "p").expect("parse P");
    let pp = parse_module(&ctx, &built.ll_pp, "pp").expect("parse P'");
    prepare_for_modelling(&p, Build::P).expect("prepare P");
    prepare_for_modelling(&pp, Build::PPrime).expect("prepare P'");
    model_pair(&p, &pp, &sig, cfg, limits)
}

/// Modelling stops at its work, the terms it makes: at the same query on every run however long it took, and
/// further with more work. (Its wall clock was the bound before, so a loaded machine modelled fewer paths.)
#[test]
fn modelling_stops_at_its_work_the_same_on_every_run() {
    let src = "double f(double x, int n) {\n  double s = 0;\n  for (int i = 0; i < n; i++) {\n    \
               if (x > i) s += x * x / (i + 1); else s -= x / (i + 2);\n  }\n  return s;\n}\n";
    let built = build(src);
    let cfg = AnalysisConfig::default();
    let whole = model_both(&built, "f", &cfg).expect("model");
    assert!(!whole.out_of_work);
    let total = whole.p.len() + whole.pp.len();
    let small = ModelLimits {
        terms: Some(400),
        deadline: None,
    };
    let a = model_both_within(&built, "f", &cfg, small).expect("model");
    let b = model_both_within(&built, "f", &cfg, small).expect("model");
    assert!(a.out_of_work && a.cut_short);
    assert_eq!(a.p.len(), b.p.len());
    assert_eq!(a.pp.len(), b.pp.len());
    let fp = |qs: &[Query]| {
        qs.iter()
            .map(|q| q.formula.fingerprint())
            .collect::<Vec<_>>()
    };
    assert_eq!(fp(&a.p), fp(&b.p));
    assert!(
        a.p.len() + a.pp.len() < total,
        "{} of {total}",
        a.p.len() + a.pp.len()
    );
}

/// P's subtractions and comparisons give cancellation queries (its multiplications do not, nor does P'); their
/// inputs make the operands cancel, the anchored ones at a value with many significant bits.
#[test]
fn cancellations_are_asked_where_operands_can_meet() {
    let src =
        "int f(double x, double y, double z) { double d = x - y; double p = d * z; return p > y; }";
    let pair = model_both(&build(src), "f", &AnalysisConfig::default()).expect("model");
    let ops: Vec<&str> = pair
        .cancellations
        .iter()
        .map(|c| c.operation.as_str())
        .collect();
    assert_eq!(ops, ["fsub", "fcmp"], "{:?}", pair.cancellations);
    let kinds: Vec<_> = pair.cancellations.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [super::Cancelling::Sum, super::Cancelling::Comparison]
    );
    let cfg = AnalysisConfig::default();
    let found = crate::solve::solve_cancellations(
        &pair.signature,
        &pair.cancellations[..1],
        None,
        &Default::default(),
        &cfg,
        crate::solve::SolveLimits::default(),
    );
    let values = |i: &crate::types::Input| -> Vec<f64> {
        i.0.iter()
            .map(|v| match v {
                ArgValue::F64(x) => *x,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert!(!found.inputs.is_empty());
    for input in &found.inputs {
        let v = values(input);
        assert!((v[0] - v[1]).abs() <= v[0].abs() * 2f64.powi(-29), "{v:?}");
    }
    // The anchored model comes first: not a simple number.
    let x = values(&found.inputs[0])[0];
    assert!(x * 2f64.powi(30) != (x * 2f64.powi(30)).round(), "{x}");
}

/// A function asking the cancellation queries a callee asked takes over its verdicts (GSL's wrappers ask what
/// the function they call asked): the same inputs, no Z3 work (no solver process), nothing new to learn.
#[test]
fn cancellation_verdicts_are_taken_over_from_a_callee() {
    let src = "double f(double x, double y, double w) { return (x - y) * w + (x < w); }";
    let pair = model_both(&build(src), "f", &AnalysisConfig::default()).expect("model");
    assert!(!pair.cancellations.is_empty());
    let cfg = AnalysisConfig::default();
    let solve = |known: &crate::solve::KnownVerdicts| {
        crate::solve::solve_cancellations(
            &pair.signature,
            &pair.cancellations,
            None,
            known,
            &cfg,
            crate::solve::SolveLimits::default(),
        )
    };
    let callee = solve(&Default::default());
    assert!(callee.work_spent_ms > 0 && !callee.learned.is_empty());
    let mut known = crate::solve::KnownVerdicts::new();
    assert!(!crate::solve::all_taken_over(&pair.cancellations, &known));
    crate::solve::remember(&mut known, callee.learned.clone());
    // Every formula the caller would ask is known: it needs no solver process.
    assert!(crate::solve::all_taken_over(&pair.cancellations, &known));
    let caller = solve(&known);
    assert_eq!(caller.work_spent_ms, 0);
    assert!(caller.learned.is_empty());
    let keys =
        |c: &crate::solve::Cancellations| c.inputs.iter().map(|i| i.key()).collect::<Vec<_>>();
    assert_eq!(keys(&caller), keys(&callee));
}

pub(super) struct Analysed {
    pub(super) sig: FunctionSignature,
    pub(super) p: Vec<Query>,
    pub(super) pp: Vec<Query>,
    pub(super) outcome: SolveOutcome,
}

fn analyse_with(
    source: &str,
    function: &str,
    cfg: &AnalysisConfig,
    domain: Option<&Domain>,
) -> Analysed {
    let built = build(source);
    let ModelledPair {
        signature: sig,
        p,
        pp,
        ..
    } = model_both(&built, function, cfg).expect("model");
    let started = Instant::now();
    let outcome = solve(&sig, &p, &pp, domain, cfg);
    let solve_time = started.elapsed();
    eprintln!(
        "{function}: P {} P' {} unique {} sat {} timeouts {} candidates {} in {:?}",
        outcome.formulae.p,
        outcome.formulae.p_prime,
        outcome.formulae.unique,
        outcome.satisfiable,
        outcome.timeouts,
        outcome.candidates.len(),
        solve_time
    );
    Analysed {
        sig,
        p,
        pp,
        outcome,
    }
}

pub(super) fn analyse(source: &str, function: &str) -> Analysed {
    analyse_with(source, function, &AnalysisConfig::default(), None)
}

fn f64_arg(v: &ArgValue) -> f64 {
    match v {
        ArgValue::F64(x) => *x,
        ArgValue::F32(x) => *x as f64,
        other => panic!("not a float: {other:?}"),
    }
}

#[test]
fn identity_has_four_formulae_in_p_and_none_in_p_prime() {
    let a = analyse(
        "double identity(double x) { double a = 2*x; double b = a*0.5; return b; }",
        "identity",
    );
    assert_eq!(
        (
            a.outcome.formulae.p,
            a.outcome.formulae.p_prime,
            a.outcome.formulae.unique
        ),
        (4, 0, 4)
    );
    assert!(a.outcome.satisfiable >= 3, "{:?}", a.outcome);
    assert!(a.outcome.candidates.len() >= 3);
    // The overflow of 2*x really overflows when rounded and run.
    let overflow = a
        .outcome
        .candidates
        .iter()
        .find(|c| c.kind == ExceptionKind::Overflow)
        .expect("an overflow candidate");
    assert!((2.0 * f64_arg(&overflow.input.0[0])).is_infinite());
}

const TURBINE1: &str = "
double turbine1(double v, double w, double r) {
  return 3 + 2/(r*r) - 0.125*(3-2*v)*(w*w*r*r)/(1-v) - 4.5;
}
";

#[test]
fn turbine1_counts() {
    // A generous time limit: every formula is decided (the test threads share the machine). Speed is measured by
    // `foe bench`, not here: a loaded machine must not fail the test.
    let generous = AnalysisConfig {
        solver_timeout_ms: 4000,
        ..AnalysisConfig::default()
    };
    let a = analyse_with(TURBINE1, "turbine1", &generous, None);
    assert_eq!(a.outcome.formulae.p, 32);
    assert_eq!(a.outcome.formulae.p_prime, 26);
    assert!(a.outcome.formulae.unique < 58);
    assert!(a.outcome.satisfiable >= 40, "{:?}", a.outcome);
    assert!(a.outcome.candidates.len() >= 20);
    assert_eq!(a.outcome.timeouts, 0);
    for c in &a.outcome.candidates {
        assert_eq!(c.input.0.len(), 3);
        assert!(c.input.0.iter().all(|v| f64_arg(v).is_finite()));
    }
}

#[test]
fn turbine1_with_its_declared_domain_stays_inside_it() {
    let range = |param, lo: f64, hi: f64| ParamRange {
        param,
        lo: Some(Bound {
            value: lo,
            inclusive: true,
        }),
        hi: Some(Bound {
            value: hi,
            inclusive: true,
        }),
    };
    let domain = Domain {
        ranges: vec![range(0, -4.5, -0.3), range(1, 0.4, 0.9), range(2, 3.8, 7.8)],
        text: vec![],
    };
    let a = analyse_with(
        TURBINE1,
        "turbine1",
        &AnalysisConfig::default(),
        Some(&domain),
    );
    for c in &a.outcome.candidates {
        assert!(
            domain.contains(&c.input),
            "{:?} outside the domain",
            c.input
        );
    }
    // Reusing the verdicts of a solve without the domain: still inside it, and not more satisfiable formulae
    // than the unrestricted solve found.
    let cfg = AnalysisConfig::default();
    let anywhere = solve(&a.sig, &a.p, &a.pp, None, &cfg);
    let inside = crate::solve::solve_within(
        &a.sig,
        &a.p,
        &a.pp,
        &domain,
        &anywhere,
        &cfg,
        Default::default(),
    );
    assert!(!inside.candidates.is_empty());
    for c in &inside.candidates {
        assert!(
            domain.contains(&c.input),
            "{:?} outside the domain",
            c.input
        );
    }
    assert!(inside.satisfiable <= anywhere.satisfiable);
}

#[test]
fn rounded_overflow_candidate_of_a_product_overflows() {
    let a = analyse("double mul(double x, double y) { return x * y; }", "mul");
    assert_eq!((a.outcome.formulae.p, a.outcome.formulae.p_prime), (2, 2));
    let c = a
        .outcome
        .candidates
        .iter()
        .find(|c| c.kind == ExceptionKind::Overflow)
        .expect("overflow candidate");
    let (x, y) = (f64_arg(&c.input.0[0]), f64_arg(&c.input.0[1]));
    assert!((x * y).is_infinite(), "{x:e} * {y:e} does not overflow");
    let u = a
        .outcome
        .candidates
        .iter()
        .find(|c| c.kind == ExceptionKind::Underflow)
        .expect("underflow candidate");
    let (x, y) = (f64_arg(&u.input.0[0]), f64_arg(&u.input.0[1]));
    let exact = crate::round::f64_to_rational(x) * crate::round::f64_to_rational(y);
    let product = x * y;
    assert!(
        product.abs() < f64::MIN_POSITIVE,
        "{x:e} * {y:e} = {product:e} is not tiny"
    );
    assert_ne!(
        crate::round::f64_to_rational(product),
        exact,
        "{x:e} * {y:e} is exact"
    );
}

#[test]
fn conversion_to_int_is_invalid_out_of_range() {
    let a = analyse("int toint(double x) { return (int)x; }", "toint");
    let q =
        a.p.iter()
            .find(|q| q.operation == "fptosi")
            .expect("an fptosi query");
    assert_eq!(q.kind, ExceptionKind::Invalid);
    assert!(q.loc.is_some());
    let c = a
        .outcome
        .candidates
        .iter()
        .find(|c| c.kind == ExceptionKind::Invalid)
        .expect("invalid candidate");
    let x = f64_arg(&c.input.0[0]);
    assert!(
        x.trunc() > i32::MAX as f64 || x.trunc() < i32::MIN as f64,
        "{x} converts fine"
    );
}

#[test]
fn branches_condition_their_queries() {
    let src = "double br(double x) { if (x > 1.0) return x * x; else return x / 3.0; }";
    let a = analyse(src, "br");
    // P: fmul (2) on the then path, fdiv (4) on the else path.
    assert_eq!(a.outcome.formulae.p, 6);
    let mul =
        a.p.iter()
            .find(|q| q.operation == "fmul")
            .expect("fmul query");
    assert!(
        mul.formula.to_string().contains("(< 1 x0)"),
        "{}",
        mul.formula
    );
    let div =
        a.p.iter()
            .find(|q| q.operation == "fdiv" && q.kind == ExceptionKind::Underflow)
            .expect("fdiv");
    assert!(
        div.formula.to_string().contains("(not (< 1 x0))"),
        "{}",
        div.formula
    );
    for c in a.outcome.candidates.iter().filter(|c| c.build == Build::P) {
        let x = f64_arg(&c.input.0[0]);
        match c.kind {
            ExceptionKind::Overflow if c.loc == mul.loc => assert!(x > 1.0),
            ExceptionKind::Underflow if c.loc == div.loc => assert!(x <= 1.0),
            _ => {}
        }
    }
}

#[test]
fn constant_bound_loops_are_unrolled() {
    let src = "double loop(double x) { double s = 0; for (int i = 0; i < 2; i++) { s = s + x * x; } return s; }";
    let cfg = AnalysisConfig::default();
    let built = build(src);
    let p = model_build(&built, "loop", Build::P, &cfg).expect("model");
    // Two iterations of fmul + fadd, two formulae each; the counter is concrete, so no path conditions.
    assert_eq!(p.len(), 8, "{p:#?}");
    assert!(
        p.iter()
            .all(|q| q.formula.postorder().iter().all(|e| e.sort() != Sort::Int)),
        "{p:#?}"
    );
    // A longer loop stops after the unroll bound: three passes through the body at most.
    let long = build("double loop(double x) { double s = 0; for (int i = 0; i < 100; i++) { s = s + x * x; } return s; }");
    let q = model_build(&long, "loop", Build::P, &cfg).expect("model");
    assert_eq!(q.len(), 4 * (cfg.unroll_bound as usize + 1));
}

#[test]
fn symbolic_loop_bounds_fork_paths() {
    let src = "double sum(double x, int n) { double s = 0; for (int i = 0; i < n; i++) { s = s * x + 1.0; } return s; }";
    // P' unrolls the loop eight times: high-degree polynomials, many of which time out; keep the limit short.
    let cfg = AnalysisConfig {
        solver_timeout_ms: 300,
        ..AnalysisConfig::default()
    };
    let a = analyse_with(src, "sum", &cfg, None);
    assert!(a.p.iter().any(|q| q.formula.to_string().contains("n1")));
    assert!(a.outcome.satisfiable > 0);
    for c in &a.outcome.candidates {
        assert!(matches!(c.input.0[1], ArgValue::Int(_)));
    }
}

#[test]
fn pointer_parameters_are_buffers_holding_their_inputs() {
    let src = "
struct result { double val; int status; };
void outp(double x, double y, struct result *res) { res->val = x * y; res->status = 1; }
double acc(double x, double *out) { *out += x * x; return *out * 2.0; }
";
    let a = analyse(src, "outp");
    assert_eq!(a.outcome.formulae.p, 2);
    assert!(a
        .outcome
        .candidates
        .iter()
        .all(|c| c.input.0[2] == ArgValue::OutPtr));
    // `res` is only written: no inputs behind it.
    assert_eq!(a.sig.params.len(), 3);
    let b = analyse(src, "acc");
    // fmul, fadd (out[0] + x*x, out[0] an input), fmul: six formulae in P.
    assert_eq!(b.outcome.formulae.p, 6);
    assert_eq!(b.sig.params[2].name, "out[0]");
    let last = b.p.last().expect("queries");
    assert!(
        last.formula.to_string().contains("(+ x2 (* x0 x0)) 2)"),
        "{}",
        last.formula
    );
}

#[test]
fn struct_fields_passed_by_value_are_inputs_of_their_own() {
    let src = "
typedef struct { float x, y; } V2;
typedef struct { double a, b, c, d, e; } P5;
float len2(V2 v) { return v.x * v.x + v.y * v.y; }
double last(P5 p, double k) { return p.e * k; }
";
    // `<2 x float>`: each lane a float input; the fast-math build's `fmul <2 x float>` reads the same inputs.
    let a = analyse(src, "len2");
    let names: Vec<&str> = a.sig.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["v.x", "v.y"]);
    assert_eq!(a.outcome.formulae.p, 6);
    let sum = a.p.last().expect("queries").formula.to_string();
    assert!(sum.contains("x0") && sum.contains("x1"), "{sum}");
    assert!(a.outcome.candidates.iter().any(|c| {
        let (ArgValue::F32(x), ArgValue::F32(y)) = (c.input.0[0], c.input.0[1]) else {
            return false;
        };
        c.kind == ExceptionKind::Overflow && (x * x + y * y).is_infinite()
    }));
    // `byval`: a buffer whose fields the function reads are inputs behind it, named `p.e`.
    let b = analyse(src, "last");
    let names: Vec<&str> = b.sig.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["p", "k", "p[4]"]);
    assert_eq!(b.outcome.formulae.p, 2);
}

#[test]
fn float_functions_use_single_precision_thresholds() {
    let a = analyse("float fl(float a, float b) { return a * b; }", "fl");
    let c = a
        .outcome
        .candidates
        .iter()
        .find(|c| c.kind == ExceptionKind::Overflow)
        .expect("overflow candidate");
    let (ArgValue::F32(x), ArgValue::F32(y)) = (c.input.0[0], c.input.0[1]) else {
        panic!("{:?}", c.input)
    };
    assert!(
        (x * y).is_infinite(),
        "{x:e} * {y:e} does not overflow in float"
    );
    assert!(((x as f64) * (y as f64)).is_finite());
}

#[test]
fn elementary_functions_follow_ariadne() {
    let src =
        "#include <math.h>\ndouble lm(double x, double y) { return sqrt(x) + exp(y) + log(x); }";
    let a = analyse(src, "lm");
    let kinds = |op: &str| -> Vec<ExceptionKind> {
        a.p.iter()
            .filter(|q| q.operation == op)
            .map(|q| q.kind)
            .collect()
    };
    assert_eq!(kinds("call sqrt"), vec![ExceptionKind::Invalid]);
    assert_eq!(
        kinds("call exp"),
        vec![ExceptionKind::Overflow, ExceptionKind::Underflow]
    );
    assert_eq!(
        kinds("call log"),
        vec![ExceptionKind::Invalid, ExceptionKind::DivideByZero]
    );
    // P' uses the intrinsics.
    assert!(a.pp.iter().any(|q| q.operation == "call llvm.exp.f64"));
    let exp_overflow = a
        .outcome
        .candidates
        .iter()
        .find(|c| {
            c.kind == ExceptionKind::Overflow
                && c.build == Build::P
                && a.p
                    .iter()
                    .any(|q| q.loc == c.loc && q.operation == "call exp")
        })
        .expect("exp overflow candidate");
    assert!(f64_arg(&exp_overflow.input.0[1]).exp().is_infinite());
    let sqrt_invalid = a
        .outcome
        .candidates
        .iter()
        .find(|c| c.kind == ExceptionKind::Invalid)
        .expect("invalid");
    assert!(f64_arg(&sqrt_invalid.input.0[0]) < 0.0);
}

#[test]
fn later_queries_assume_earlier_results_are_defined() {
    // After sqrt(x) the path assumes x >= 0, so log(x) < 0 cannot be invalid; log(0) still divides by zero.
    let src = "#include <math.h>\ndouble f(double x) { return sqrt(x) + log(x); }";
    let built = build(src);
    let cfg = AnalysisConfig::default();
    let ctx = Context::create();
    let sig = signature(&ctx, &built.ll_p, "f");
    let p = model_build(&built, "f", Build::P, &cfg).expect("model");
    let log_invalid: Vec<Query> = p
        .iter()
        .filter(|q| q.operation == "call log" && q.kind == ExceptionKind::Invalid)
        .cloned()
        .collect();
    let outcome = solve(&sig, &log_invalid, &[], None, &cfg);
    assert_eq!(outcome.satisfiable, 0);
    let log_dbz: Vec<Query> = p
        .iter()
        .filter(|q| q.operation == "call log" && q.kind == ExceptionKind::DivideByZero)
        .cloned()
        .collect();
    let outcome = solve(&sig, &log_dbz, &[], None, &cfg);
    assert_eq!(outcome.satisfiable, 1);
    assert_eq!(f64_arg(&outcome.candidates[0].input.0[0]), 0.0);
}

#[test]
fn a_call_foe_does_not_run_stops_the_path_not_the_function() {
    let src = "void report(int);\n\
               double ext(double x) {\n\
                 double y = x * 3.0;\n\
                 if (y < 0) { report(1); return y * 5.0; }\n\
                 return y * 2.0;\n\
               }";
    let m = model_both(&build(src), "ext", &AnalysisConfig::default()).expect("model");
    assert_eq!(
        m.path_stops.get("a call to `report`").copied().unwrap_or(0),
        2,
        "one stop per build: {:?}",
        m.path_stops
    );
    let lines: Vec<u32> = m.p.iter().filter_map(|q| q.loc.map(|l| l.line)).collect();
    // Before the call (line 3) and on the path avoiding it (line 5); never after the call (line 4's `y * 5`).
    assert!(lines.contains(&3) && lines.contains(&5), "{lines:?}");
    assert!(
        !m.p.iter()
            .any(|q| q.operation == "fmul" && q.loc.map(|l| l.line) == Some(4)),
        "nothing after the call is modelled"
    );
    // A function-pointer parameter: refused before modelling (the worker has no function to pass), in C words.
    let src = "double ind(double (*f)(double), double x) { return f(x) * 2.0; }";
    let built = build(src);
    let ctx = Context::create();
    let module = parse_module(&ctx, &built.ll_p, "p").expect("parse P");
    let refused = describe_functions(&module, &built.ll_p)
        .into_iter()
        .find_map(|d| d.err().filter(|u| u.name == "ind"))
        .expect("ind is refused");
    assert!(
        refused.reason.contains("`f` is a function pointer"),
        "{}",
        refused.reason
    );
    // A call through a pointer the path does not know (loaded from memory the model cannot see) ends the path.
    let src = "typedef double (*unary)(double);\n\
               double through(unary *table, double x) { return table[0](x) * 2.0; }";
    let m = model_both(&build(src), "through", &AnalysisConfig::default()).expect("model");
    assert!(
        m.path_stops
            .keys()
            .any(|k| k.contains("indirect call through a pointer foe cannot follow")),
        "{:?}",
        m.path_stops
    );
}

#[test]
fn c_library_functions_are_modelled() {
    let src = "#include <math.h>\n\
               double scale(double x) { return ldexp(x, 1000); }\n\
               double frac(double x) { double ip; double f = modf(x, &ip); return f + ip; }\n\
               int cls(double x) { return isnan(x) + isinf(x) * 2 + isfinite(x) * 4 + (fpclassify(x) == FP_ZERO); }\n\
               double inf_test(double x) { return x < 1.0 / 0.0 ? x * 2.0 : 0.0; }\n\
               double mant(double x) { int e; return frexp(x, &e) * e; }\n";
    let built = build(src);
    let cfg = AnalysisConfig::default();
    let scale = model_both(&built, "scale", &cfg).expect("ldexp");
    assert!(
        scale
            .p
            .iter()
            .any(|q| q.operation == "call ldexp" && q.kind == ExceptionKind::Overflow),
        "ldexp overflows: {:?}",
        scale.p
    );
    model_both(&built, "frac", &cfg).expect("modf");
    model_both(&built, "cls", &cfg).expect("classification");
    let inf = model_both(&built, "inf_test", &cfg).expect("comparison with an infinity");
    assert!(inf.p.iter().any(|q| q.operation == "fmul"));
    let mant = model_both(&built, "mant", &cfg).expect("frexp");
    assert!(
        mant.path_stops.contains_key("`frexp` of a computed value"),
        "{:?}",
        mant.path_stops
    );
}

#[test]
fn bit_tests_on_a_double_are_modelled() {
    // musl's style: the exponent field read through a union.
    let src = "double t(double x) {\n\
                 union { double f; unsigned long long i; } u = {x};\n\
                 int e = (int)(u.i >> 52 & 0x7ff) - 0x3ff;\n\
                 if (e < 0) return x * 0.5;\n\
                 u.i &= ~0xfULL;\n\
                 return u.f * 2.0;\n\
               }";
    let m = model_both(&build(src), "t", &AnalysisConfig::default()).expect("model");
    assert!(!m.p.is_empty());
    assert!(
        m.path_stops
            .contains_key("computed bits read as a floating-point value"),
        "{:?}",
        m.path_stops
    );
}

#[test]
fn calls_to_functions_of_the_file_are_inlined() {
    let src = "static double helper(double x) { return x * 3.0; }\ndouble callee(double x) { return helper(x) + helper(x * 2); }";
    let a = analyse(src, "callee");
    // helper's fmul twice, the fmul of x*2, and the fadd: eight formulae in P.
    assert_eq!(a.outcome.formulae.p, 8);
    let helper_line = 1;
    assert_eq!(
        a.p.iter()
            .filter(|q| q.loc.map(|l| l.line) == Some(helper_line))
            .count(),
        4
    );
}

#[test]
fn arrays_structs_and_globals_are_memory() {
    let src = "
static const double table[3] = {1e300, 2.0, 3.0};
struct pair { double a, b; };
double mem(double x, int k) {
  double a[4];
  struct pair p = {0};
  for (int i = 0; i < 4; i++) a[i] = x * i;
  p.b = a[3] * table[0];
  return p.a + p.b;
}
";
    let a = analyse(src, "mem");
    assert!(a.outcome.formulae.p > 0);
    // A local array initialised from a constant (memcpy from a private global), read in a loop.
    let src2 = "double dot(double x) { double c[3] = {1e300, 2.0, 3.0}; double s = 0; for (int i = 0; i < 3; i++) s += c[i] * x; return s; }";
    let b = analyse(src2, "dot");
    assert_eq!(b.outcome.formulae.p, 3 * 4);
    assert!(
        b.p.iter()
            .any(|q| q.formula.to_string().contains("(* 1e300 x0)")),
        "{:#?}",
        b.p
    );
    let c = a
        .outcome
        .candidates
        .iter()
        .find(|c| c.kind == ExceptionKind::Overflow && c.build == Build::P)
        .expect("overflow candidate");
    assert!(f64_arg(&c.input.0[0]).is_finite());
}

#[test]
fn narrowing_conversions_can_overflow() {
    let a = analyse("float narrow(double x) { return (float)x; }", "narrow");
    let c = a
        .outcome
        .candidates
        .iter()
        .find(|c| c.kind == ExceptionKind::Overflow)
        .expect("overflow candidate");
    assert!((f64_arg(&c.input.0[0]) as f32).is_infinite());
}

/// Odometry (FPBench, salsa) flattened to one argument `sl` with the loop run twice, as in the FOE paper.
const ODOMETER: &str = "
double odometer(double sl) {
  double sr = 0.785398163397;
  double inv_l = 0.1, c = 12.34;
  double x = 0.0, y = 0.0, theta = -0.985;
  int j = 0;
  for (int t = 0; t < 2; t++) {
    double delta_dl = c * sl;
    double delta_dr = c * sr;
    double delta_d = (delta_dl + delta_dr) * 0.5;
    double delta_theta = (delta_dr - delta_dl) * inv_l;
    double arg = theta + delta_theta * 0.5;
    double cosi = (1 - arg * arg * 0.5) + arg * arg * arg * arg * 0.0416666666;
    x = x + delta_d * cosi;
    double sini = (arg - arg * arg * arg * 0.1666666666) + arg * arg * arg * arg * arg * 0.008333333;
    y = y + delta_d * sini;
    theta = theta + delta_theta;
    double tmp = sl;
    sl = (j == 50) ? sr : sl;
    sr = (j == 50) ? tmp : sr;
    j = (j == 50) ? 0 : j + 1;
  }
  return x;
}
";

#[test]
fn odometer_two_iterations_solves() {
    // A generous time limit: every formula is decided (the test threads share the machine). How fast is measured
    // by `foe bench`, not here.
    let real_only = AnalysisConfig {
        fp_theory_fallback: false,
        solver_timeout_ms: 4000,
        ..AnalysisConfig::default()
    };
    let r = analyse_with(ODOMETER, "odometer", &real_only, None);
    assert!(r.outcome.formulae.p > 80, "{:?}", r.outcome.formulae);
    assert!(r.outcome.satisfiable > 50);
    assert_eq!(r.outcome.timeouts, 0);
    let a = analyse(ODOMETER, "odometer");
    assert_eq!(a.sig.params.len(), 1);
}

#[test]
#[ignore = "timing figures; run with --ignored --nocapture"]
fn timing_figures() {
    let odometer_domain = Domain {
        ranges: vec![ParamRange {
            param: 0,
            lo: Some(Bound {
                value: 0.05,
                inclusive: false,
            }),
            hi: Some(Bound {
                value: std::f64::consts::TAU,
                inclusive: false,
            }),
        }],
        text: vec![],
    };
    // A generous time limit: every formula is decided (the test threads share the machine).
    let real_only = AnalysisConfig {
        fp_theory_fallback: false,
        solver_timeout_ms: 4000,
        ..AnalysisConfig::default()
    };
    for cfg in [&real_only, &AnalysisConfig::default()] {
        eprintln!("fp_theory_fallback = {}", cfg.fp_theory_fallback);
        analyse_with(
            "double identity(double x) { double a = 2*x; double b = a*0.5; return b; }",
            "identity",
            cfg,
            None,
        );
        analyse_with(TURBINE1, "turbine1", cfg, None);
        analyse_with(ODOMETER, "odometer", cfg, None);
        analyse_with(ODOMETER, "odometer", cfg, Some(&odometer_domain));
    }
}

#[test]
fn a_bool_read_through_a_pointer_is_an_input_of_0_or_1() {
    let source = "struct s { double t; _Bool flag; };\n\
        double f(const struct s *p) { return p->flag ? p->t : -p->t; }\n";
    let m = model_both(&build(source), "f", &AnalysisConfig::default()).expect("model");
    // The inputs behind `p`, by their byte offset: `t` at 0, `flag` at 8.
    let ty = |offset: u32| {
        let p = m
            .signature
            .params
            .iter()
            .find(|p| p.pointee.is_some_and(|at| at.offset == offset));
        p.unwrap_or_else(|| panic!("no input at offset {offset}"))
            .ty
    };
    assert_eq!(
        ty(8),
        ParamType::Int {
            bits: 1,
            signed: false
        }
    );
    assert_eq!(ty(0), ParamType::F64);
}

#[test]
fn values_read_through_pointers_are_inputs_of_both_builds() {
    let source = "typedef struct { double re, im; } cplx;\n\
        void cmul(const cplx *a, const cplx *b, cplx *out) {\n\
          out->re = a->re * b->re - a->im * b->im;\n\
          out->im = a->re * b->im + a->im * b->re;\n\
        }\n";
    let m = model_both(&build(source), "cmul", &AnalysisConfig::default()).expect("model");
    let mut names: Vec<&str> = m.signature.params[3..]
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["a[0]", "a[1]", "b[0]", "b[1]"]);
    assert!(m.unmodelled_reads.is_empty());
    // `out` is written before it is read: no input behind it.
    assert!(m
        .signature
        .params
        .iter()
        .all(|p| p.pointee.is_none_or(|at| at.param != 2)));
    // Both builds' queries are over the same inputs: every parameter index they use exists.
    let count = m.signature.params.len() as u32;
    for q in m.p.iter().chain(&m.pp) {
        for (index, _) in q.formula.params() {
            assert!(index < count, "query over parameter {index} of {count}");
        }
    }
    assert!(m
        .p
        .iter()
        .any(|q| q.formula.params().iter().any(|(i, _)| *i >= 3)));
}

#[test]
fn a_symbolic_index_stops_the_path_not_the_function() {
    let source = "double sum(const double *v, int n) {\n\
          double s = 0;\n\
          for (int i = 0; i < n; i++) s += v[i];\n\
          return s;\n\
        }\n";
    let m = model_both(&build(source), "sum", &AnalysisConfig::default()).expect("model");
    assert!(m.signature.params.iter().any(|p| p.name == "v[0]"));
    assert!(!m.p.is_empty() && !m.pp.is_empty());
}

#[test]
fn an_elementary_function_of_a_parameter_is_inverted_at_its_model_value() {
    // The overflow of `pow(x, y) * 4` needs pow(x, y) within a factor of 4 of DBL_MAX: the model's fresh value of
    // the power is there, and the candidate's `y` is chosen so the real `pow` is too.
    let a = analyse(
        "#include <math.h>\ndouble f(double x, double y) { return pow(x, y) * 4.0; }",
        "f",
    );
    let product_overflows = a.outcome.candidates.iter().any(|c| {
        let (x, y) = (f64_arg(&c.input.0[0]), f64_arg(&c.input.0[1]));
        let p = x.powf(y);
        p.is_finite() && (p * 4.0).is_infinite()
    });
    assert!(product_overflows, "{:?}", a.outcome.candidates);
}

#[test]
fn a_masked_trip_count_ties_the_loop_to_its_bound() {
    // The vectorised loop runs `n & -4` elements four at a time: candidates of its second round need n >= 8.
    let a = analyse(
        "double sum(const double *v, int n) { double s = 0; for (int i = 0; i < n; i++) s += v[i]; return s; }",
        "sum",
    );
    let uses_fifth = a
        .outcome
        .candidates
        .iter()
        .filter(|c| c.build == Build::PPrime)
        .filter(|c| {
            // v[4] and later are inputs 6 onwards (after the pointer and n).
            c.input
                .0
                .iter()
                .skip(6)
                .any(|v| matches!(v, ArgValue::F64(x) if *x != 0.0))
        });
    for c in uses_fifth {
        let ArgValue::Int(n) = c.input.0[1] else {
            panic!("n is an integer")
        };
        assert!(
            n >= 8,
            "a candidate reads v[4] or later with n = {n}: {:?}",
            c.input
        );
    }
}

/// `source` with the quick fix's pragmas (`fix::PRECISE_PRAGMAS`) opening the first function body, or as many
/// comment lines in their place, so that both forms have their operations on the same lines.
fn with_fix(source: &str, strict: bool) -> String {
    let lines: Vec<String> = crate::fix::PRECISE_PRAGMAS
        .iter()
        .map(|p| if strict { p.to_string() } else { "//".into() })
        .collect();
    source.replacen("{\n", &format!("{{\n{}\n", lines.join("\n")), 1)
}

/// A query's kind, operation, (line, column) and formula.
type Question = (ExceptionKind, String, Option<(u32, u32)>, sym::Formula);

/// What the queries ask, without instruction numbers (a constrained `sitofp` of a constant is an instruction
/// where the plain build has a constant).
fn questions(queries: &[Query]) -> Vec<Question> {
    queries
        .iter()
        .map(|q| {
            (
                q.kind,
                q.operation.clone(),
                q.loc.map(|l| (l.line, l.column)),
                q.formula.clone(),
            )
        })
        .collect()
}

#[test]
fn constrained_operations_are_modelled_as_their_plain_forms() {
    // Arithmetic in both precisions, conversions both ways, a signalling comparison, a constrained fma and libm.
    let src = "#include <math.h>\n\
               double conv(double x, double y, int n, float f) {\n\
               double a = x * y + n;\n\
               float g = (float)a + f;\n\
               long k = (long)(a / y);\n\
               if (a < x) return sqrt(a) + fma(x, y, a);\n\
               return pow(x, y) + g + k - 4.5;\n\
               }\n";
    let plain = build(&with_fix(src, false));
    let strict = build(&with_fix(src, true));
    for op in [
        "fdiv", "sitofp", "fptrunc", "fpext", "fptosi", "fcmps", "fma",
    ] {
        let call = format!("@llvm.experimental.constrained.{op}.");
        assert!(
            strict.ll_p.contains(&call),
            "no {call} in:\n{}",
            strict.ll_p
        );
    }
    let cfg = AnalysisConfig::default();
    let p = model_build(&plain, "conv", Build::P, &cfg).expect("model plain");
    let p_strict = model_build(&strict, "conv", Build::P, &cfg).expect("model strict");
    assert!(p.len() >= 15, "{p:#?}");
    assert_eq!(questions(&p_strict), questions(&p));

    // The fixed fast-math build of turbine1 keeps every operation as written and in order: it asks exactly the
    // plain build's questions, so solving finds nothing but the plain build's own.
    let turbine1 = build(&with_fix(TURBINE1, false));
    let fixed = build(&with_fix(TURBINE1, true));
    let plain_p = model_build(&turbine1, "turbine1", Build::P, &cfg).expect("model P");
    let m = model_both(&fixed, "turbine1", &cfg).expect("model the fixed builds");
    assert_eq!(questions(&m.pp), questions(&m.p));
    assert_eq!(questions(&m.p), questions(&plain_p));
    let outcome = solve(&m.signature, &m.p, &m.pp, None, &cfg);
    assert_eq!(
        (
            outcome.formulae.p,
            outcome.formulae.p_prime,
            outcome.formulae.unique
        ),
        (32, 32, 32)
    );
}

#[test]
fn a_rounding_mode_other_than_to_nearest_is_unsupported() {
    let src = "double up(double x, double y) {\n\
               #pragma STDC FENV_ROUND FE_UPWARD\n\
               return x * y;\n\
               }\n";
    let built = build(src);
    assert!(built.ll_pp.contains("round.upward"), "{}", built.ll_pp);
    let err = model_build(&built, "up", Build::PPrime, &AnalysisConfig::default())
        .expect_err("must be skipped");
    let text = err.to_string();
    assert!(
        text.contains("rounds with `round.upward`") && text.contains("round-to-nearest only"),
        "{err}"
    );
    assert!(
        matches!(&err, ModelError::RoundingMode { mode, .. } if mode == "round.upward"),
        "{err:?}"
    );
    assert_eq!(err.reason_code(), crate::report::ReasonCode::Unsupported);
}

#[test]
fn model_errors_keep_their_text_and_are_sorted_by_variant() {
    use crate::report::ReasonCode;
    let in_build = |build, error| ModelError::InBuild {
        build,
        error: Box::new(error),
    };
    let count = in_build(
        Build::PPrime,
        ModelError::ParamCount {
            in_build: 1,
            declared: 2,
        },
    );
    assert_eq!(
        count.to_string(),
        "cannot model the fast-math build: has 1 parameters in this build, 2 in the signature"
    );
    assert_eq!(count.reason_code(), ReasonCode::SignatureDiffers);
    let intrinsic = in_build(
        Build::P,
        ModelError::UnmodelledIntrinsic {
            callee: "llvm.foo.f64".into(),
        },
    );
    assert_eq!(
        intrinsic.to_string(),
        "cannot model the plain build: calls the compiler built-in `llvm.foo.f64`, which foe does not model"
    );
    assert_eq!(intrinsic.reason_code(), ReasonCode::ExternalCall);
    let ty = ModelError::ParamType {
        param: "x".into(),
        ty: "float".into(),
    };
    assert_eq!(
        ty.to_string(),
        "parameter `x` has type `float` in this build"
    );
    assert_eq!(ty.reason_code(), ReasonCode::Unsupported);
    let missing = ModelError::NotInBuild {
        function: "f".into(),
        build: Build::PPrime,
    };
    assert_eq!(missing.to_string(), "`f` is not in the P' build");
    assert_eq!(
        ModelError::Instruction("indirectbr").to_string(),
        "uses the `indirectbr` instruction"
    );
    assert_eq!(
        ModelError::internal("no frame").to_string(),
        "internal: no frame"
    );
    assert_eq!(
        ModelError::SymbolicIndex.to_string(),
        "indexes memory with a symbolic index"
    );
}
