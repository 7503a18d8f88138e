//! Inputs that give an elementary function its model value.
//!
//! The model ties the fresh value `d` of `exp(x)`, `pow(x, y)`, `log(x)`... to its arguments by facts only (Ariadne's
//! treatment), so the rounded model's `x` rarely gives `exp(x) = d`: an overflow that needs `pow(x, y)` within a
//! factor of four of `DBL_MAX` is found over the reals and missed in IEEE arithmetic. Where an argument is a bare
//! parameter, inverting the function at the model's `d` gives the parameter a value that does (`x = ln d`); the
//! caller keeps it only if the query then holds in IEEE arithmetic.

use super::real;
use crate::round::{round_rational, FloatFormat};
use crate::sym::{Expr, Kind, MathFn, VarType};
use crate::types::{ArgValue, FunctionSignature};
use z3::ast::Real;

/// The model's values of `values`' parameters, with each parameter that is the bare argument of an elementary
/// function replaced by the inverse of that function at its model value; `None` when nothing was inverted.
pub(super) fn inverted(
    sig: &FunctionSignature,
    model: &z3::Model,
    conjuncts: &[Expr],
    values: &[(usize, ArgValue)],
) -> Option<Vec<(usize, ArgValue)>> {
    let mut out = values.to_vec();
    let mut changed = false;
    let value_of = |out: &[(usize, ArgValue)], i: usize| {
        out.iter()
            .find(|(j, _)| *j == i)
            .and_then(|(_, v)| match v {
                ArgValue::F64(x) => Some(*x),
                ArgValue::F32(x) => Some(*x as f64),
                _ => None,
            })
    };
    for conjunct in conjuncts {
        for node in conjunct.postorder() {
            let Kind::Math { func, fmt, args } = node.kind() else {
                continue;
            };
            let d = Real::new_const(format!("d{:032x}", node.fingerprint()));
            let Some(d) = model
                .eval(&d, true)
                .and_then(|v| real::model_rational(&v, *fmt))
                .map(|q| round_rational(&q, FloatFormat::Double))
                .filter(|d| d.is_finite())
            else {
                continue;
            };
            let param = |k: usize| match args.get(k).map(Expr::kind) {
                Some(Kind::Param {
                    index,
                    ty: VarType::Float(_),
                }) => Some(*index as usize),
                _ => None,
            };
            // (the parameter to set, its new value)
            let target = match (func, param(0), param(1)) {
                (MathFn::Pow, base, Some(y)) if d > 0.0 => {
                    let model_base = match base {
                        Some(b) => value_of(&out, b),
                        None => args[0].as_real().map(crate::sym::const_f64),
                    };
                    match model_base.filter(|x| *x > 0.0 && *x != 1.0) {
                        Some(x) => Some((y, d.ln() / x.ln())),
                        // A base the model left where no power reaches d: base 2 when the base is a parameter.
                        None => base.map(|b| {
                            if let Some(slot) = out.iter_mut().find(|(j, _)| *j == b) {
                                slot.1 = match slot.1 {
                                    ArgValue::F32(_) => ArgValue::F32(2.0),
                                    _ => ArgValue::F64(2.0),
                                };
                                changed = true;
                            }
                            (y, d.log2())
                        }),
                    }
                }
                (MathFn::Pow, Some(x), None) => {
                    let y = args
                        .get(1)
                        .and_then(Expr::as_real)
                        .map(crate::sym::const_f64);
                    y.filter(|y| *y != 0.0 && d > 0.0)
                        .map(|y| (x, d.powf(1.0 / y)))
                }
                (_, Some(x), _) if args.len() == 1 => inverse(*func, d).map(|v| (x, v)),
                _ => None,
            };
            let Some((i, v)) = target.filter(|(_, v)| v.is_finite()) else {
                continue;
            };
            let Some(slot) = out.iter_mut().find(|(j, _)| *j == i) else {
                continue;
            };
            let new = match sig.params.get(i).map(|p| p.ty.float_format()) {
                Some(Some(FloatFormat::Single)) => ArgValue::F32(v as f32),
                Some(Some(FloatFormat::Double)) => ArgValue::F64(v),
                _ => continue,
            };
            changed |= slot.1 != new;
            slot.1 = new;
        }
    }
    changed.then_some(out)
}

/// `x` with `f(x) = d`, for the functions of one argument that have an inverse there.
fn inverse(f: MathFn, d: f64) -> Option<f64> {
    let x = match f {
        MathFn::Exp if d > 0.0 => d.ln(),
        MathFn::Exp2 if d > 0.0 => d.log2(),
        MathFn::Expm1 if d > -1.0 => d.ln_1p(),
        MathFn::Log => d.exp(),
        MathFn::Log2 => d.exp2(),
        MathFn::Log10 => 10f64.powf(d),
        MathFn::Log1p => d.exp_m1(),
        MathFn::Sinh => d.asinh(),
        MathFn::Cosh if d >= 1.0 => d.acosh(),
        MathFn::Tanh if d.abs() < 1.0 => d.atanh(),
        MathFn::Atan if d.abs() < std::f64::consts::FRAC_PI_2 => d.tan(),
        MathFn::Tan => d.atan(),
        MathFn::Sin if d.abs() <= 1.0 => d.asin(),
        MathFn::Cos if d.abs() <= 1.0 => d.acos(),
        MathFn::Asin if d.abs() <= std::f64::consts::FRAC_PI_2 => d.sin(),
        MathFn::Acos if (0.0..=std::f64::consts::PI).contains(&d) => d.cos(),
        MathFn::Cbrt => d * d * d,
        _ => return None,
    };
    Some(x)
}
