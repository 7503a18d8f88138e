//! Tests of the real-number reference: small C functions compiled by the real clang with both builds' flags,
//! modelled as the pipeline models them, and evaluated exactly at one input; closed forms computed with rug.

use super::*;
use crate::config::AnalysisConfig;
use crate::ir::{describe_functions, parse_module};
use crate::model::tests::{compile, FLAGS_P, FLAGS_PP};
use crate::model::{model_pair, prepare_for_modelling, ModelledPair};
use crate::types::{ArgValue, Build};
use inkwell::context::Context;
use rug::{Float, Rational};

/// `function` of `source` modelled in both builds, as the pipeline does.
fn modelled(source: &str, function: &str) -> ModelledPair {
    modelled_with(source, function, &AnalysisConfig::default())
}

fn modelled_with(source: &str, function: &str, cfg: &AnalysisConfig) -> ModelledPair {
    let (ll_p, ll_pp) = (compile(source, FLAGS_P), compile(source, FLAGS_PP));
    let ctx = Context::create();
    let p = parse_module(&ctx, &ll_p, "p").expect("parse P");
    let pp = parse_module(&ctx, &ll_pp, "pp").expect("parse P'");
    let sig = describe_functions(&p, &ll_p)
        .into_iter()
        .filter_map(Result::ok)
        .map(|f| f.signature)
        .find(|s| s.name == function)
        .unwrap_or_else(|| panic!("no function {function}"));
    prepare_for_modelling(&p, Build::P).expect("prepare P");
    prepare_for_modelling(&pp, Build::PPrime).expect("prepare P'");
    model_pair(&p, &pp, &sig, cfg, Default::default()).expect("model")
}

fn exact_at(pair: &ModelledPair, input: &[ArgValue]) -> Exact {
    exact_outputs(&pair.p_outputs, &pair.signature, &Input(input.to_vec()))
}

fn known(exact: Exact) -> (Option<ExactValue>, Vec<(u32, u32, ExactValue)>) {
    match exact {
        Exact::Known { ret, writes } => (ret, writes),
        Exact::NoReference(why) => panic!("no exact reference: {why}"),
    }
}

fn rational_of(v: f64) -> Rational {
    Rational::from_f64(v).expect("finite")
}

fn exact_rational(value: &ExactValue) -> Rational {
    match value {
        ExactValue::Real {
            value: RealValue::Exact(q),
            ..
        } => q.clone(),
        other => panic!("not an exact rational: {other:?}"),
    }
}

/// A closed form evaluated at 2000 bits, rounded to a double.
fn reference(value: Float) -> f64 {
    value.to_f64()
}

const TWO_SUM: &str = "double two_sum(double a, double b, double *err) {
    double s = a + b;
    double bb = s - a;
    *err = (a - (s - bb)) + (b - bb);
    return s;
}";

/// Over the reals s = a + b exactly, so the compensation term is exactly 0: the plain build's 1e-20 is, by the
/// real-number measure, all error (see the module documentation).
#[test]
fn two_sum_error_term_is_zero_over_the_reals() {
    let pair = modelled(TWO_SUM, "two_sum");
    let (ret, writes) = known(exact_at(
        &pair,
        &[ArgValue::F64(1.0), ArgValue::F64(1e-20), ArgValue::OutPtr],
    ));
    let ret = ret.expect("a return value");
    assert_eq!(exact_rational(&ret), rational_of(1.0) + rational_of(1e-20));
    assert_eq!(ret.rounded(), 1.0);
    assert_eq!(writes.len(), 1, "{writes:?}");
    let (param, offset, err) = &writes[0];
    assert_eq!((*param, *offset), (2, 0));
    assert!(err.is_zero() && err.is_exact(), "{err:?}");
    // What each build computes: P keeps the compensation, P' (reassociated) loses it.
    let plain = (1.0 - ((1.0 + 1e-20) - ((1.0 + 1e-20) - 1.0))) + (1e-20 - ((1.0 + 1e-20) - 1.0));
    assert_eq!(plain, 1e-20);
    assert!(bits_of_error_f64(plain, err) > 60.0);
    assert_eq!(bits_of_error_f64(0.0, err), 0.0);
}

#[test]
fn cancellation_of_squares_is_exact() {
    let pair = modelled(
        "double diff_squares(double x, double y) { return x * x - y * y; }",
        "diff_squares",
    );
    let (x, y) = (1.0000001, 1.0);
    let (ret, _) = known(exact_at(&pair, &[ArgValue::F64(x), ArgValue::F64(y)]));
    let ret = ret.expect("a return value");
    let closed = Rational::from(&rational_of(x) - &rational_of(y))
        * Rational::from(&rational_of(x) + &rational_of(y));
    assert_eq!(exact_rational(&ret), closed);
    let plain = x * x - y * y;
    let fused = x.mul_add(x, -(y * y));
    assert!(bits_of_error_f64(plain, &ret) > bits_of_error_f64(fused, &ret));
}

#[test]
fn exp_minus_one_near_zero_goes_through_mpfr() {
    let pair = modelled(
        "#include <math.h>\ndouble em1(double x) { return exp(x) - 1.0; }",
        "em1",
    );
    let x = 1e-10;
    let (ret, _) = known(exact_at(&pair, &[ArgValue::F64(x)]));
    let ret = ret.expect("a return value");
    assert!(!ret.is_exact());
    assert_eq!(ret.rounded(), reference(Float::with_val(2000, x).exp_m1()));
    // libm's exp(x) - 1 keeps about 7 correct digits of 17 here.
    let plain = x.exp() - 1.0;
    assert!(
        bits_of_error_f64(plain, &ret) > 20.0,
        "{}",
        bits_of_error_f64(plain, &ret)
    );
    assert!(bits_of_error_f64(x.exp_m1(), &ret) <= 1.0);
    // A NaN input has no real-number value.
    assert_eq!(
        exact_at(&pair, &[ArgValue::F64(f64::NAN)]),
        Exact::NoReference(NoReference::NonFiniteInput("`x`".into()))
    );
}

#[test]
fn the_branch_the_plain_build_takes_is_the_one_evaluated() {
    let pair = modelled(
        "#include <math.h>\ndouble branchy(double x) { if (x > 1.0) return sqrt(x - 1.0); return x * 3.0; }",
        "branchy",
    );
    let (ret, _) = known(exact_at(&pair, &[ArgValue::F64(5.0)]));
    // sqrt(4) is exactly 2: MPFR reports the result exact.
    assert_eq!(exact_rational(&ret.expect("value")), Rational::from(2));
    let (ret, _) = known(exact_at(&pair, &[ArgValue::F64(0.1)]));
    assert_eq!(
        exact_rational(&ret.expect("value")),
        rational_of(0.1) * Rational::from(3)
    );
    let (ret, _) = known(exact_at(&pair, &[ArgValue::F64(3.0)]));
    assert_eq!(
        ret.expect("value").rounded(),
        reference(Float::with_val(2000, 2).sqrt())
    );
}

#[test]
fn values_written_through_pointers_are_outputs() {
    let pair = modelled(
        "#include <math.h>\nvoid polar(double r, double t, double *x, double *y) { *x = r * cos(t); *y = r * sin(t); }",
        "polar",
    );
    let input = [
        ArgValue::F64(2.0),
        ArgValue::F64(0.5),
        ArgValue::OutPtr,
        ArgValue::OutPtr,
    ];
    let (ret, writes) = known(exact_at(&pair, &input));
    assert!(ret.is_none());
    let places: Vec<(u32, u32)> = writes.iter().map(|(p, o, _)| (*p, *o)).collect();
    assert_eq!(places, [(2, 0), (3, 0)]);
    let half = || Float::with_val(2000, 0.5);
    assert_eq!(writes[0].2.rounded(), reference(half().cos() * 2u32));
    assert_eq!(writes[1].2.rounded(), reference(half().sin() * 2u32));
}

#[test]
fn a_float_function_rounds_to_float() {
    let pair = modelled("float fsum(float a, float b) { return a * a + b; }", "fsum");
    let (a, b) = (1.1f32, 1e-3f32);
    let (ret, _) = known(exact_at(&pair, &[ArgValue::F32(a), ArgValue::F32(b)]));
    let ret = ret.expect("value");
    let closed = rational_of(a as f64) * rational_of(a as f64) + rational_of(b as f64);
    assert_eq!(exact_rational(&ret), closed);
    assert!(matches!(
        ret,
        ExactValue::Real {
            fmt: FloatFormat::Single,
            ..
        }
    ));
    let rounded = ret.rounded() as f32;
    assert_eq!(rounded as f64, Float::with_val(24, &closed).to_f64());
    assert_eq!(bits_of_error_f32(rounded, &ret), 0.0);
    assert_eq!(
        bits_of_error_f32(f32::from_bits(rounded.to_bits() + 1), &ret),
        1.0
    );
}

#[test]
fn a_call_foe_does_not_run_gives_no_reference() {
    let pair = modelled(
        "double ext(double);\ndouble f(double x) { if (x > 0) return ext(x) + 1.0; return x; }",
        "f",
    );
    assert_eq!(
        exact_at(&pair, &[ArgValue::F64(2.0)]),
        Exact::NoReference(NoReference::PathStops("a call to `ext`".into()))
    );
    // The other path is still known.
    let (ret, _) = known(exact_at(&pair, &[ArgValue::F64(-2.0)]));
    assert_eq!(exact_rational(&ret.expect("value")), Rational::from(-2));
}

#[test]
fn a_real_division_by_zero_gives_no_reference() {
    // In IEEE arithmetic (1 + 1e-20) - 1 - 1e-20 is -1e-20; over the reals it is 0.
    let pair = modelled(
        "double lost(double a, double b) { double s = a + b; return 1.0 / (s - a - b); }",
        "lost",
    );
    assert_eq!(
        exact_at(&pair, &[ArgValue::F64(1.0), ArgValue::F64(1e-20)]),
        Exact::NoReference(NoReference::DivisionByZero)
    );
}

#[test]
fn a_cancellation_below_the_first_precisions_is_found_by_raising_it() {
    let pair = modelled(
        "#include <math.h>\ndouble gap(double x) { double e = exp(x); return (e + 1e-300) - e; }",
        "gap",
    );
    let (ret, _) = known(exact_at(&pair, &[ArgValue::F64(1.0)]));
    assert_eq!(ret.expect("value").rounded(), 1e-300);
    // The same term less itself is exactly zero.
    let pair = modelled(
        "#include <math.h>\ndouble same(double x) { return sin(x) - sin(x); }",
        "same",
    );
    let (ret, _) = known(exact_at(&pair, &[ArgValue::F64(1.0)]));
    assert!(ret.expect("value").is_zero());
}

#[test]
fn herbie_bits_of_error() {
    let one = ExactValue::Real {
        value: RealValue::Exact(Rational::from(1)),
        fmt: FloatFormat::Double,
    };
    assert_eq!(bits_of_error_f64(1.0, &one), 0.0);
    assert_eq!(
        bits_of_error_f64(f64::from_bits(1.0f64.to_bits() + 1), &one),
        1.0
    );
    assert_eq!(
        bits_of_error_f64(f64::from_bits(1.0f64.to_bits() + 3), &one),
        2.0
    );
    assert_eq!(bits_of_error_f64(f64::NAN, &one), 64.0);
    assert_eq!(bits_of_error_f64(f64::INFINITY, &one), 64.0);
    assert_eq!(bits_of_error_f32(f32::NAN, &one), 32.0);
    let zero = ExactValue::Real {
        value: RealValue::Exact(Rational::new()),
        fmt: FloatFormat::Double,
    };
    // +0 and -0 are the same float to Herbie.
    assert_eq!(bits_of_error_f64(-0.0, &zero), 0.0);
    assert_eq!(bits_of_error_f64(-f64::from_bits(1), &zero), 1.0);
    // Beyond the format's range the exact value rounds to infinity, and an infinite result is then exact.
    let huge = ExactValue::Real {
        value: RealValue::Exact(Rational::from(2) * rational_of(f64::MAX)),
        fmt: FloatFormat::Double,
    };
    assert_eq!(bits_of_error_f64(f64::INFINITY, &huge), 0.0);
    assert_eq!(bits_of_error_f64(f64::MAX, &huge), 1.0);
}

#[test]
fn a_comparison_in_a_value_is_read_over_the_reals_a_branch_as_the_plain_build_takes_it() {
    // In IEEE arithmetic (1 + 1e-20) - 1 is 0; over the reals it is 1e-20 > 0.
    let (a, b) = (ArgValue::F64(1.0), ArgValue::F64(1e-20));
    let pair = modelled(
        "int positive(double a, double b) { return ((a + b) - a) > 0.0; }",
        "positive",
    );
    let (ret, _) = known(exact_at(&pair, &[a, b]));
    assert_eq!(ret, Some(ExactValue::Int(BigInt::from(1))));
    // A branch is part of the path: the reference follows the branch the plain build takes.
    let pair = modelled(
        "int positive(double a, double b) { if (((a + b) - a) > 0.0) return 1; return 0; }",
        "positive",
    );
    let (ret, _) = known(exact_at(&pair, &[a, b]));
    assert_eq!(ret, Some(ExactValue::Int(BigInt::from(0))));
}

#[test]
fn kahan_summation_of_values_read_through_a_pointer_is_their_exact_sum() {
    let source = "double kahan(const double *x) {
        double s = 0.0, c = 0.0;
        for (int i = 0; i < 4; i++) { double y = x[i] - c; double t = s + y; c = (t - s) - y; s = t; }
        return s;
    }";
    let xs = [1.0, 1e-17, -1.0, 3e-17];
    let mut input = vec![ArgValue::OutPtr];
    input.extend(xs.iter().map(|v| ArgValue::F64(*v)));
    // Four iterations are more than foe unrolls by default: the path that would go on is not modelled.
    let pair = modelled(source, "kahan");
    assert_eq!(
        exact_at(&pair, &input),
        Exact::NoReference(NoReference::PathStops(
            "a loop that runs more times than foe unrolls".into()
        ))
    );
    let cfg = AnalysisConfig {
        unroll_bound: 8,
        ..AnalysisConfig::default()
    };
    let pair = modelled_with(source, "kahan", &cfg);
    assert_eq!(
        pair.signature.params.len(),
        5,
        "{:?}",
        pair.signature.params
    );
    let (ret, writes) = known(exact_at(&pair, &input));
    assert!(writes.is_empty());
    let sum = xs
        .iter()
        .fold(Rational::new(), |acc, v| acc + rational_of(*v));
    assert_eq!(exact_rational(&ret.expect("value")), sum);
}
