//! Tests of interval refutation on small formulae, with and without a declared domain.

use super::*;
use crate::domain::{Bound, ParamRange};
use crate::round::FloatFormat;

fn sig(n: usize) -> FunctionSignature {
    crate::solve::doubles(n)
}

fn domain(lo: f64, hi: f64) -> Domain {
    Domain {
        ranges: vec![ParamRange {
            param: 0,
            lo: Some(Bound {
                value: lo,
                inclusive: true,
            }),
            hi: Some(Bound {
                value: hi,
                inclusive: true,
            }),
        }],
        text: vec![],
    }
}

fn x() -> Expr {
    sym::param(0, sym::VarType::Float(FloatFormat::Double))
}

/// The overflow condition of `x * x`.
fn square_overflows() -> Expr {
    let product = sym::arith(ArithOp::Mul, FloatFormat::Double, x(), x());
    sym::ge(
        sym::abs(product),
        sym::real(sym::max_finite(FloatFormat::Double)),
    )
}

#[test]
fn a_product_of_small_values_cannot_overflow_but_of_large_ones_may() {
    let overflow = square_overflows();
    assert!(refutes(&overflow, &sig(1), Some(&domain(-4.5, 7.8))));
    assert!(!refutes(&overflow, &sig(1), Some(&domain(-1e200, 1e200))));
}

#[test]
fn division_by_an_interval_around_zero_proves_nothing() {
    let quotient = sym::arith(ArithOp::Div, FloatFormat::Double, sym::real_i(1), x());
    let big = sym::ge(quotient, sym::real_i(1000));
    assert!(!refutes(&big, &sig(1), Some(&domain(-1.0, 1.0))));
    assert!(refutes(&big, &sig(1), Some(&domain(0.5, 1.0))));
}

#[test]
fn the_path_condition_narrows_the_box() {
    let overflow = square_overflows();
    // 0 < x and x < 3: x * x stays far below Ω.
    let path = sym::and([
        sym::lt(sym::real_i(0), x()),
        sym::lt(x(), sym::real_i(3)),
        overflow.clone(),
    ]);
    assert!(refutes(&path, &sig(1), None));
    // Without the upper bound it may overflow.
    let open = sym::and([sym::lt(sym::real_i(0), x()), overflow.clone()]);
    assert!(!refutes(&open, &sig(1), None));
    // not(x < 10): x >= 10, contradicting x < 3.
    let empty = sym::and([
        sym::not(sym::lt(x(), sym::real_i(10))),
        sym::lt(x(), sym::real_i(3)),
    ]);
    assert!(refutes(&empty, &sig(1), None));
}

/// `x * x < 1e-300`: only near zero.
fn square_is_tiny() -> Expr {
    let product = sym::arith(ArithOp::Mul, FloatFormat::Double, x(), x());
    sym::lt(product, sym::real_f64(1e-300))
}

#[test]
fn a_square_is_never_negative() {
    let negative = sym::lt(
        sym::arith(ArithOp::Mul, FloatFormat::Double, x(), x()),
        sym::real_i(-1),
    );
    assert!(refutes(&negative, &sig(1), Some(&domain(-2.0, 3.0))));
}

#[test]
fn magnitudes_bound_a_parameter_on_both_sides_of_zero() {
    let small = sym::lt(sym::abs(x()), sym::real_i(2));
    let far_from_zero = sym::not(sym::lt(sym::abs(x()), sym::real_f64(1e-7)));
    // |x| < 2 keeps x * x from overflowing.
    assert!(refutes(
        &sym::and([small.clone(), square_overflows()]),
        &sig(1),
        None
    ));
    // |x| >= 1e-7 keeps x * x above 1e-300 on both sides of zero (the box is split there).
    let both = sym::and([small.clone(), far_from_zero.clone(), square_is_tiny()]);
    assert!(refutes(&both, &sig(1), None));
    // Without the floor x may be zero.
    assert!(!refutes(
        &sym::and([small, square_is_tiny()]),
        &sig(1),
        None
    ));
    // A floor on one side of zero cuts the interval instead: -1e-8 < x < 1e-8 has no |x| >= 1e-7.
    let near_zero = sym::and([
        sym::lt(x(), sym::real_f64(1e-8)),
        far_from_zero.clone(),
        sym::lt(sym::real_f64(-1e-8), x()),
    ]);
    assert!(refutes(&near_zero, &sig(1), None));
    let wide = sym::and([sym::lt(x(), sym::real_f64(1.0)), far_from_zero]);
    assert!(!refutes(&wide, &sig(1), None));
    // x * x < 2.5625 bounds x by 1.6 on both sides.
    let square = sym::arith(ArithOp::Mul, FloatFormat::Double, x(), x());
    let bounded_square = sym::and([sym::lt(square, sym::real_f64(2.5625)), square_overflows()]);
    assert!(refutes(&bounded_square, &sig(1), None));
}

#[test]
fn a_negated_parameter_and_its_integral_part_are_bounded_too() {
    // not(1e14 < -x) and x < 0: x in [-1e14, 0), so floor(-x / 45) squared stays far below Ω.
    let minus_x = sym::neg(x());
    let quotient = sym::arith(
        ArithOp::Div,
        FloatFormat::Double,
        minus_x.clone(),
        sym::real_i(45),
    );
    let whole = sym::to_integral(sym::Integral::Floor, FloatFormat::Double, quotient);
    let squared = sym::arith(ArithOp::Mul, FloatFormat::Double, whole.clone(), whole);
    let overflows = sym::ge(squared, sym::real(sym::max_finite(FloatFormat::Double)));
    let path = |upper: Expr| {
        sym::and([
            sym::lt(x(), sym::real_i(0)),
            sym::not(sym::lt(upper, minus_x.clone())),
            overflows.clone(),
        ])
    };
    assert!(refutes(&path(sym::real_f64(1e14)), &sig(1), None));
    assert!(!refutes(&path(sym::real_f64(1e300)), &sig(1), None));
}

#[test]
fn affine_bounds_and_gaps_off_zero_narrow_the_box() {
    // 0 <= 1 - x and 0 <= 1 + x: x in [-1, 1], so (x * x) * 1e300 cannot overflow.
    let one = || sym::real_i(1);
    let square = sym::arith(ArithOp::Mul, FloatFormat::Double, x(), x());
    let scaled = sym::arith(
        ArithOp::Mul,
        FloatFormat::Double,
        square,
        sym::real_f64(1e300),
    );
    let overflows = sym::ge(
        sym::abs(scaled),
        sym::real(sym::max_finite(FloatFormat::Double)),
    );
    let within = |c: Expr| {
        sym::and([
            sym::le(
                sym::real_i(0),
                sym::arith(ArithOp::Sub, FloatFormat::Double, one(), x()),
            ),
            sym::le(
                sym::real_i(0),
                sym::arith(ArithOp::Add, FloatFormat::Double, c, x()),
            ),
            overflows.clone(),
        ])
    };
    assert!(refutes(&within(one()), &sig(1), None));
    assert!(!refutes(&within(sym::real_f64(1e5)), &sig(1), None));
    // |x - 1| >= 0.01 leaves nothing of [0.995, 1.005]; both sides of [0.5, 1.5].
    let away = sym::not(sym::lt(
        sym::abs(sym::arith(ArithOp::Sub, FloatFormat::Double, x(), one())),
        sym::real_f64(0.01),
    ));
    assert!(refutes(&away, &sig(1), Some(&domain(0.995, 1.005))));
    assert!(!refutes(&away, &sig(1), Some(&domain(0.5, 1.5))));
    // ... and splits [0.5, 1.5] there: x * x is then never within 1e-3 of 1.
    let near_one = sym::lt(
        sym::abs(sym::arith(
            ArithOp::Sub,
            FloatFormat::Double,
            sym::arith(ArithOp::Mul, FloatFormat::Double, x(), x()),
            one(),
        )),
        sym::real_f64(1e-3),
    );
    let both = sym::and([away, near_one]);
    assert!(refutes(&both, &sig(1), Some(&domain(0.5, 1.5))));
}

#[test]
fn elementary_functions_are_bounded_by_their_ranges() {
    let f = |func, a: Expr| sym::math(func, FloatFormat::Double, vec![a]);
    // sin x * 1e300 never overflows; exp x for x <= 700 stays finite; sqrt x <= 2 for x <= 4, and sqrt of a
    // negative proves nothing.
    let scaled = sym::arith(
        ArithOp::Mul,
        FloatFormat::Double,
        f(sym::MathFn::Sin, x()),
        sym::real_f64(1e300),
    );
    let omega = || sym::real(sym::max_finite(FloatFormat::Double));
    assert!(refutes(&sym::ge(scaled, omega()), &sig(1), None));
    let exp = sym::ge(f(sym::MathFn::Exp, x()), omega());
    assert!(refutes(&exp, &sig(1), Some(&domain(-5.0, 700.0))));
    assert!(!refutes(&exp, &sig(1), Some(&domain(-5.0, 710.0))));
    let root = sym::lt(sym::real_i(3), f(sym::MathFn::Sqrt, x()));
    assert!(refutes(&root, &sig(1), Some(&domain(0.0, 4.0))));
    assert!(!refutes(&root, &sig(1), Some(&domain(0.0, 16.0))));
    assert!(!refutes(&root, &sig(1), Some(&domain(-1.0, 4.0))));
}

/// An underflow of `x·x - 2·x + c` in `[-10, 10]` (an addition whose operands are a product and a difference).
fn quadratic_underflows(c: f64) -> Expr {
    let d = FloatFormat::Double;
    let square = sym::arith(ArithOp::Mul, d, x(), x());
    let twice = sym::arith(ArithOp::Mul, d, sym::real_i(2), x());
    let difference = sym::arith(ArithOp::Sub, d, square, twice);
    let site = sym::Site {
        op: sym::SiteOp::Arith(ArithOp::Add),
        fmt: d,
        args: vec![difference, sym::real_f64(c)],
    };
    sym::exception(crate::types::ExceptionKind::Underflow, site)
}

/// `(x - 1)² + 1` written as `x·x - 2·x + 2` is at least 1, but the box's interval of it spans zero (the terms'
/// spreads add up): halves of the box show it, down to pieces where the spread is small. `(x - 1)²`, which is
/// tiny next to 1, is not refuted however often the box is halved.
#[test]
fn a_box_is_halved_until_its_pieces_refute_the_formula() {
    let bounded_away = quadratic_underflows(2.0);
    let whole = |f: &Expr| {
        let b: Box = vec![Some((-10.0, 10.0))];
        eval(f, &b, &mut sym::FingerprintMap::default())
    };
    assert_eq!(whole(&bounded_away), Abs::Bool(Truth::Unknown));
    assert!(refutes(&bounded_away, &sig(1), Some(&domain(-10.0, 10.0))));
    let touches_zero = quadratic_underflows(1.0);
    assert!(!refutes(&touches_zero, &sig(1), Some(&domain(-10.0, 10.0))));
}

/// An interval is halved in floats (its binades first), and one with an end at zero not among the subnormals.
#[test]
fn intervals_are_halved_in_floats() {
    let upper = |lo: f64, hi: f64| bisect(&vec![Some((lo, hi))], &[0]).unwrap().0[0].unwrap().1;
    assert!((1.0..2.0).contains(&upper(0.0, f64::MAX)));
    assert_eq!(upper(-10.0, 10.0), 0.0);
    assert!((4e4..7e4).contains(&upper(3.0, 1e9)), "{}", upper(3.0, 1e9));
    assert!((4.0..5.0).contains(&upper(4.0, 5.0)));
    assert_eq!(upper(0.0, 8.0), 8.0 / 1048576.0);
    assert!(bisect(&vec![Some((1.0, 1.0))], &[0]).is_none());
}

/// `(x + 1000)² - 2000·x - 10⁶ + 1/2`, which is `x² + 1/2`, written so that its terms are a million times its value.
fn cancelling_square() -> Expr {
    let d = FloatFormat::Double;
    let shifted = sym::arith(ArithOp::Add, d, x(), sym::real_i(1000));
    let square = sym::arith(ArithOp::Mul, d, shifted.clone(), shifted);
    let linear = sym::arith(ArithOp::Mul, d, sym::real_i(2000), x());
    let less = sym::arith(ArithOp::Sub, d, square, linear);
    let less = sym::arith(ArithOp::Sub, d, less, sym::real_i(1_000_000));
    sym::arith(ArithOp::Add, d, less, sym::real_f64(0.5))
}

#[test]
fn the_centred_form_refutes_a_tiny_value_of_a_series_whose_terms_cancel() {
    // Intervals alone cannot: on a box of width w the terms' spread is some 4000·w, and sixteen bisections do not
    // bring it under 1/2 everywhere; the centred form's excess is of the order of w².
    let tiny = sym::lt(sym::abs(cancelling_square()), sym::real_f64(1e-300));
    assert!(refutes(&tiny, &sig(1), Some(&domain(-1.0, 1.0))));
    let mut memo = sym::FingerprintMap::default();
    let whole = narrowed_box(&tiny, &sig(1), Some(&domain(-1.0, 1.0)))
        .unwrap()
        .0;
    assert_ne!(eval(&tiny, &whole, &mut memo), Abs::Bool(Truth::False));
    // Where the value does reach zero (x² - 1/2 has roots at ±0.707), the formula is not refuted.
    let root = sym::arith(
        ArithOp::Sub,
        FloatFormat::Double,
        cancelling_square(),
        sym::real_i(1),
    );
    let reaches = sym::lt(sym::abs(root), sym::real_f64(1e-300));
    assert!(!refutes(&reaches, &sig(1), Some(&domain(-1.0, 1.0))));
}

#[test]
fn on_a_box_where_intervals_leave_the_cancelling_series_open_the_centred_form_closes_it() {
    let tiny = sym::lt(sym::abs(cancelling_square()), sym::real_f64(1e-300));
    let (bounds, _) = narrowed_box(&tiny, &sig(1), Some(&domain(-1.0, 1.0))).unwrap();
    // Plain intervals on a box of width 2^-10 at the minimum: the terms spread over some 4, around 1/2.
    let w = 2f64.powi(-10);
    let mut near = bounds.clone();
    near[0] = Some((0.0, w));
    assert_ne!(
        eval(&tiny, &near, &mut Default::default()),
        Abs::Bool(Truth::False)
    );
    assert!(centred::refutes(
        &tiny,
        &centred::Nodes::of(&tiny, 0),
        &near,
        0
    ));
}

/// `(int) (x / 45)`, as C truncates it.
fn octant() -> Expr {
    let quotient = sym::arith(ArithOp::Div, FloatFormat::Double, x(), sym::real_i(45));
    sym::fp_to_int(32, true, quotient)
}

#[test]
fn integer_parts_have_intervals_too() {
    // On [0.5, 40] the truncated quotient is 0, so a path that needs it non-zero is refuted; on [0.5, 100] not.
    let nonzero = sym::ne(octant(), sym::int_i(0));
    assert!(refutes(&nonzero, &sig(1), Some(&domain(0.5, 40.0))));
    assert!(!refutes(&nonzero, &sig(1), Some(&domain(0.5, 100.0))));
    // `j & 1` is `j - 2⌊j/2⌋`: on [0, 179] `j` is at most 3, so `⌊j/2⌋` at most 1 and `j + ⌊j/2⌋` at most 4.
    let j = octant();
    let sum = sym::int_arith(sym::IntOp::Add, 32, j.clone(), sym::floor_pow2(32, j, 1));
    let big = sym::ge(sym::int_to_real(sum), sym::real_i(5));
    assert!(refutes(&big, &sig(1), Some(&domain(0.0, 179.0))));
    assert!(!refutes(&big, &sig(1), Some(&domain(0.0, 400.0))));
}

/// An underflow of `(x·x - 2·x) + 1`: over the reals it holds within 2^-1022 of x = 1, in doubles never (a sum with
/// the operand 1 is 0 or at least 2^-53). It is asked as the exact cancellation instead, which x = 1 satisfies.
/// A sum whose operands may both be tiny, or an overflow, is left as it is.
#[test]
fn an_underflow_of_a_sum_with_an_operand_far_from_zero_is_asked_as_its_cancellation() {
    use crate::types::ArgValue;
    let over = Some(domain(-10.0, 10.0));
    let underflow = quadratic_underflows(1.0);
    assert!(!refutes(&underflow, &sig(1), over.as_ref()));
    let cancels = cancellation_instead(&underflow, &sig(1), over.as_ref()).expect("a cancellation");
    let at_one = [ArgValue::F64(1.0)];
    assert_eq!(crate::solve::check::holds(&underflow, &at_one), Some(false));
    assert_eq!(crate::solve::check::holds(&cancels, &at_one), Some(true));
    assert_eq!(
        crate::solve::check::holds(&cancels, &[ArgValue::F64(2.0)]),
        Some(false)
    );

    let x_plus = |kind, c: f64| {
        let site = sym::Site {
            op: sym::SiteOp::Arith(ArithOp::Add),
            fmt: FloatFormat::Double,
            args: vec![x(), sym::real_f64(c)],
        };
        sym::exception(kind, site)
    };
    let both_tiny = x_plus(crate::types::ExceptionKind::Underflow, 0.0);
    assert!(cancellation_instead(&both_tiny, &sig(1), over.as_ref()).is_none());
    let overflow = x_plus(crate::types::ExceptionKind::Overflow, 1.0);
    assert!(cancellation_instead(&overflow, &sig(1), None).is_none());
}
