//! The seed ladder's witnesses, crossings and underflow windows on small formulae.

use super::*;
use crate::round::FloatFormat;
use crate::sym::{self, param, ArithOp, Site, SiteOp, VarType};
use crate::types::ExceptionKind;

fn sig(n: usize) -> FunctionSignature {
    crate::solve::doubles(n)
}

/// `kind` at `x0 · y`, where `y` is `x1` (`two` parameters) or `x0`.
fn product(kind: ExceptionKind, two: bool) -> Expr {
    let x = param(0, VarType::Float(FloatFormat::Double));
    let y = param(u32::from(two), VarType::Float(FloatFormat::Double));
    sym::exception(
        kind,
        Site {
            op: SiteOp::Arith(ArithOp::Mul),
            fmt: FloatFormat::Double,
            args: vec![x, y],
        },
    )
}

/// An overflowing product is walked to its threshold: the input found overflows, its neighbour towards 1
/// does not.
#[test]
fn an_overflow_is_found_at_its_threshold() {
    let sig = sig(2);
    let formula = product(ExceptionKind::Overflow, false);
    let input = Seeds::new(&sig, None)
        .find(&formula)
        .expect("a witness")
        .input;
    assert_eq!(
        input.0[1],
        ArgValue::F64(0.0),
        "an unmentioned parameter is left at 0"
    );
    assert_eq!(super::super::check::holds(&formula, &input.0), Some(true));
    let walked = input
        .0
        .iter()
        .position(|v| !matches!(v, ArgValue::F64(x) if *x == 0.0 || x.abs() == 1.0))
        .expect("one parameter walked");
    let ArgValue::F64(x) = input.0[walked] else {
        unreachable!()
    };
    let mut inner = input.clone();
    inner.0[walked] = ArgValue::F64(x.next_down());
    assert_eq!(
        super::super::check::holds(&formula, &inner.0),
        Some(false),
        "{input:?}"
    );
}

/// The ladder's integers fit the parameters they are given to (a `bool` takes 0 and 1, an unsigned no -1):
/// an input that does not fit its signature is dropped before it runs.
#[test]
fn the_ladder_s_integers_fit_their_parameters() {
    let mut sig = sig(1);
    for (bits, signed) in [(1, false), (8, false), (32, true)] {
        sig.params.push(crate::types::Param {
            name: format!("i{bits}"),
            ty: ParamType::Int { bits, signed },
            pointee: None,
            by_value: None,
        });
    }
    let seeds = Seeds::new(&sig, None);
    for input in &seeds.inputs {
        for (p, v) in sig.params.iter().zip(&input.0) {
            if let (ParamType::Int { bits, signed }, ArgValue::Int(v)) = (p.ty, v) {
                assert!(crate::exec::int_fits(*v, bits, signed), "{} = {v}", p.name);
            }
        }
    }
    assert!(seeds.inputs.iter().any(|x| x.0[3] == ArgValue::Int(100)));
}

/// The ladder reaches the subnormals.
#[test]
fn the_ladder_holds_subnormals() {
    let sig = sig(1);
    let seeds = Seeds::new(&sig, None);
    assert!(seeds
        .inputs
        .iter()
        .any(|x| x.0[0] == ArgValue::F64(f64::from_bits(1))));
    assert!(seeds
        .inputs
        .iter()
        .any(|x| matches!(x.0[0], ArgValue::F64(v) if v > 0.0 && v < 1e-310)));
}

/// An underflow region (x·x tiny) gives three inputs: its edge towards 1, where the square is subnormal and the
/// next float's is not, the float inward of it, and the ladder input the walk started from, whose x is itself
/// subnormal (what denormals-are-zero reads as 0).
#[test]
fn an_underflow_region_gives_its_edge_and_a_subnormal_input_inside() {
    let sig = sig(1);
    let formula = product(ExceptionKind::Underflow, false);
    let found = Seeds::new(&sig, None).find(&formula).expect("a witness");
    assert!(found.holds);
    let double = |x: &Input| match x.0[0] {
        ArgValue::F64(v) => v,
        _ => panic!("a double"),
    };
    let tiny = |v: f64| v != 0.0 && v.abs() < f64::MIN_POSITIVE;
    let x = double(&found.input);
    assert!(tiny(x * x), "{x:e}");
    let outward = if x > 0.0 { x.next_up() } else { x.next_down() };
    assert!(!tiny(outward * outward), "{x:e} is not the edge");
    let [inward, start] = found.inside.as_slice() else {
        panic!("two inputs inside: {:?}", found.inside);
    };
    let inward = double(inward);
    assert!(
        tiny(inward * inward) && inward.abs() < x.abs(),
        "{inward:e} is not inward of {x:e}"
    );
    assert!(tiny(double(start)), "{:e} is not subnormal", double(start));
}

/// Halving underflows (tiny and inexact) only at every other float near the edge: the input inward of the edge
/// skips the float whose half is exact, so both builds underflow there and only flush-to-zero changes the value.
#[test]
fn the_input_inward_of_a_halving_s_edge_has_an_inexact_half() {
    let sig = sig(1);
    let x = param(0, VarType::Float(FloatFormat::Double));
    let site = Site {
        op: SiteOp::Arith(ArithOp::Mul),
        fmt: FloatFormat::Double,
        args: vec![x, sym::real_f64(0.5)],
    };
    let formula = sym::exception(ExceptionKind::Underflow, site);
    let found = Seeds::new(&sig, None).find(&formula).expect("a witness");
    let ArgValue::F64(inward) = found.inside[0].0[0] else {
        panic!("a double");
    };
    let half = inward * 0.5;
    assert!(half != 0.0 && half.abs() < f64::MIN_POSITIVE, "{inward:e}");
    assert_ne!(half * 2.0, inward, "{inward:e}'s half is exact");
}

/// An overflow's witness is its threshold alone: outside an underflow no start is kept.
#[test]
fn an_overflow_keeps_no_second_input() {
    let sig = sig(1);
    let formula = product(ExceptionKind::Overflow, false);
    let found = Seeds::new(&sig, None).find(&formula).expect("a witness");
    assert!(found.holds && found.inside.is_empty());
}

/// An underflow at a root of the path's arithmetic (12.34·x + 9.69, where no float makes the sum tiny) is
/// found at the crossing: the float next to the root, which Z3's real model would round to.
#[test]
fn a_root_is_found_by_its_crossing() {
    let sig = sig(1);
    let x = param(0, VarType::Float(FloatFormat::Double));
    let product = sym::arith(ArithOp::Mul, FloatFormat::Double, sym::real_f64(12.34), x);
    let site = Site {
        op: SiteOp::Arith(ArithOp::Add),
        fmt: FloatFormat::Double,
        args: vec![product, sym::real_f64(9.69)],
    };
    let formula = sym::exception(ExceptionKind::Underflow, site);
    let found = Seeds::new(&sig, None).find(&formula).expect("a crossing");
    let ArgValue::F64(v) = found.input.0[0] else {
        unreachable!()
    };
    let root = -9.69 / 12.34;
    assert!((v - root).abs() <= 2.0 * f64::EPSILON, "{v} vs {root}");
    assert_eq!(
        found.holds,
        super::super::check::holds(&formula, &found.input.0) == Some(true)
    );
}

/// Two roots between neighbouring ladder inputs ((x - 4.5)·(x - 5), positive at 2.67 and at 10.7) are
/// missed by the ladder and found among the ends of the boxes interval refutation leaves open.
#[test]
fn roots_between_ladder_inputs_are_found_among_the_open_boxes() {
    let sig = sig(1);
    let d = FloatFormat::Double;
    let x = param(0, VarType::Float(d));
    let square = sym::arith(ArithOp::Mul, d, x.clone(), x.clone());
    let linear = sym::arith(ArithOp::Mul, d, sym::real_f64(9.5), x);
    let site = Site {
        op: SiteOp::Arith(ArithOp::Add),
        fmt: d,
        args: vec![
            sym::arith(ArithOp::Sub, d, square, linear),
            sym::real_f64(22.5),
        ],
    };
    let formula = sym::exception(ExceptionKind::Underflow, site);
    let seeds = Seeds::new(&sig, None);
    assert!(
        seeds.find(&formula).is_none(),
        "the ladder steps over both roots"
    );
    let open =
        interval::refute(&formula, &sig, None).expect("not refuted: it holds near the roots");
    let found = seeds.find_crossing_in(&formula, &open).expect("a crossing");
    let ArgValue::F64(v) = found.input.0[0] else {
        unreachable!()
    };
    assert!(
        (v - 4.5).abs() < 1e-12 || (v - 5.0).abs() < 1e-12,
        "{v} is not next to a root"
    );
}

/// Inside a declared domain every seed and every witness respects it, and a condition the domain excludes has
/// none.
#[test]
fn a_domain_is_respected() {
    let sig = sig(2);
    let source =
        "// foe: assume 0.5 <= x0 <= 2 && 0.5 <= x1 <= 2\ndouble f(double x0, double x1);\n";
    let (domain, errors) = crate::domain::domain_for(source, &sig, 0, 2);
    assert!(errors.is_empty() && domain.ranges.len() == 2, "{errors:?}");
    let seeds = Seeds::new(&sig, Some(&domain));
    assert!(seeds.inputs.iter().all(|x| domain.contains(x)));
    assert!(seeds
        .find(&product(ExceptionKind::Overflow, false))
        .is_none());
}

/// Formulae of several float parameters are left to Z3.
#[test]
fn several_float_parameters_go_to_z3() {
    let sig = sig(2);
    assert!(Seeds::new(&sig, None)
        .find(&product(ExceptionKind::Overflow, true))
        .is_none());
}

/// Cephes `exp2.c`'s `(x² + Q0)·x²` is subnormal only for `2^-537 < |x| < 2^-511`, between two ladder inputs: at
/// `2^-540` the square is already zero, at `2^-512` the product is normal. The window between them gives its edge,
/// where the formula holds and the next float outward's product is normal, and inputs deeper inside that hold too.
#[test]
fn an_underflow_window_between_ladder_inputs_is_found() {
    let sig = sig(1);
    let d = FloatFormat::Double;
    let x = param(0, VarType::Float(d));
    let square = sym::arith(ArithOp::Mul, d, x.clone(), x);
    let sum = sym::arith(ArithOp::Add, d, square.clone(), sym::real_f64(233.18));
    let site = Site {
        op: SiteOp::Arith(ArithOp::Mul),
        fmt: d,
        args: vec![sum, square],
    };
    let formula = sym::exception(ExceptionKind::Underflow, site);
    let seeds = Seeds::new(&sig, None);
    let mut eval = Evaluator::new(&formula);
    assert!(
        seeds.witness(&[0], &mut eval).is_none(),
        "no ladder input is inside the window"
    );
    let found = seeds.find(&formula).expect("the window");
    assert!(found.holds);
    let ArgValue::F64(v) = found.input.0[0] else {
        unreachable!()
    };
    let product = |v: f64| (v * v + 233.18) * (v * v);
    assert!(v.abs() > pow2(-537) && v.abs() < pow2(-511), "{v:e}");
    assert_eq!(super::super::check::holds(&formula, &found.input.0), Some(true));
    let outward = if v > 0.0 { v.next_up() } else { v.next_down() };
    assert!(product(outward) >= f64::MIN_POSITIVE, "{v:e} is not the edge");
    assert!(!found.inside.is_empty());
    for x in &found.inside {
        let ArgValue::F64(w) = x.0[0] else {
            unreachable!()
        };
        assert!(w.abs() < v.abs(), "{w:e} is not inside of {v:e}");
        assert_eq!(super::super::check::holds(&formula, &x.0), Some(true), "{w:e}");
    }
}
