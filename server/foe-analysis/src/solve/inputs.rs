//! The parameters in Z3: the constraints every query gets on them (the formats' ranges, the declared domain) and
//! the model's values read back, rounded exactly to their formats.

use super::real;
use crate::domain::{Bound, Domain};
use crate::round::{f64_to_rational, round_rational, FloatFormat};
use crate::sym::{self, VarType};
use crate::types::{ArgValue, FunctionSignature, ParamType};
use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive};
use z3::ast::{Bool, Int, Real};

/// The parameters the declared domain constrains.
pub(super) fn domain_params(domain: Option<&Domain>) -> Vec<usize> {
    domain
        .map(|d| d.ranges.iter().map(|r| r.param).collect())
        .unwrap_or_default()
}

/// For the parameters in `mentioned`: |x| ≤ Ω for floats (and, for underflow queries, x = 0 or |x| ≥ the
/// smallest subnormal: it costs nlsat time and matters only there), the width's range for integers, and the
/// declared domain.
pub(super) fn input_constraints(
    sig: &FunctionSignature,
    domain: Option<&Domain>,
    mentioned: &[usize],
    tiny_inputs_matter: bool,
) -> Vec<Bool> {
    let mut out = Vec::new();
    for (i, p) in sig.params.iter().enumerate() {
        if !mentioned.contains(&i) {
            continue;
        }
        match p.ty {
            ParamType::F64 | ParamType::F32 => {
                let fmt = p.ty.float_format().expect("a float parameter");
                let x = float_var(i, fmt);
                let max = Real::from_big_rational(&sym::max_finite(fmt));
                out.push(x.le(&max));
                out.push(x.ge(-max));
                if tiny_inputs_matter {
                    // A float is 0 or at least the smallest subnormal in magnitude: smaller models round to zero.
                    let tiny = Real::from_big_rational(&sym::min_subnormal(fmt));
                    let zero = Real::from_rational(0, 1);
                    out.push(Bool::or(&[x.eq(&zero), x.ge(&tiny), x.le(-tiny)]));
                }
            }
            ParamType::Int { bits, signed } => {
                let n = Int::new_const(real::param_name(i as u32, VarType::Int { bits, signed }));
                let (lo, hi) = int_param_range(bits);
                out.push(n.ge(Int::from_big_int(&lo)));
                out.push(n.le(Int::from_big_int(&hi)));
            }
            ParamType::OutPtr { .. } => {}
        }
    }
    for range in domain.map(|d| d.ranges.as_slice()).unwrap_or(&[]) {
        let Some(p) = sig
            .params
            .get(range.param)
            .filter(|_| mentioned.contains(&range.param))
        else {
            continue;
        };
        let value = match p.ty {
            ParamType::F64 => float_var(range.param, FloatFormat::Double),
            ParamType::F32 => float_var(range.param, FloatFormat::Single),
            ParamType::Int { bits, signed } => {
                let n = Int::new_const(real::param_name(
                    range.param as u32,
                    VarType::Int { bits, signed },
                ));
                let reading = if signed || bits == 1 {
                    n
                } else {
                    let modulus = Int::from_big_int(&(BigInt::one() << bits as usize));
                    n.lt(Int::from_i64(0)).ite(&(n.clone() + modulus), &n)
                };
                Real::from_int(&reading)
            }
            ParamType::OutPtr { .. } => continue,
        };
        let bound = |b: &Bound| Real::from_big_rational(&f64_to_rational(b.value));
        if let Some(lo) = range.lo.filter(|b| b.value.is_finite()) {
            out.push(if lo.inclusive {
                value.ge(bound(&lo))
            } else {
                value.gt(bound(&lo))
            });
        }
        if let Some(hi) = range.hi.filter(|b| b.value.is_finite()) {
            out.push(if hi.inclusive {
                value.le(bound(&hi))
            } else {
                value.lt(bound(&hi))
            });
        }
    }
    out
}

/// The range of an integer parameter's Z3 variable (signed form; `bool` is 0..=1).
pub(super) fn int_param_range(bits: u32) -> (BigInt, BigInt) {
    if bits == 1 {
        return (BigInt::from(0), BigInt::from(1));
    }
    let half = BigInt::one() << (bits as usize - 1);
    (-half.clone(), half - 1)
}

/// The model's values of `params`, rounded exactly to their formats (integers clamped to their width).
pub(super) fn param_values(
    sig: &FunctionSignature,
    model: &z3::Model,
    params: &[usize],
) -> Vec<(usize, ArgValue)> {
    params
        .iter()
        .filter_map(|&i| {
            let p = sig.params.get(i)?;
            let value = match p.ty {
                ParamType::F64 | ParamType::F32 => {
                    let fmt = p.ty.float_format().expect("a float parameter");
                    let x = float_var(i, fmt);
                    let rounded = model
                        .eval(&x, true)
                        .and_then(|v| real::model_rational(&v, fmt))
                        .map(|q| round_rational(&q, fmt))
                        .unwrap_or(0.0);
                    match fmt {
                        FloatFormat::Double => ArgValue::F64(rounded),
                        FloatFormat::Single => ArgValue::F32(rounded as f32),
                    }
                }
                ParamType::Int { bits, signed } => {
                    let n =
                        Int::new_const(real::param_name(i as u32, VarType::Int { bits, signed }));
                    let (lo, hi) = int_param_range(bits);
                    let v = model
                        .eval(&n, true)
                        .and_then(|v| real::model_integer(&v))
                        .unwrap_or_default();
                    let v = v.clamp(lo, hi);
                    // Unsigned parameters are shown as their unsigned value where it fits an i64.
                    let v = if !signed && bits < 64 && v.is_negative() {
                        v + (BigInt::one() << bits as usize)
                    } else {
                        v
                    };
                    ArgValue::Int(v.to_i64().unwrap_or(0))
                }
                ParamType::OutPtr { .. } => ArgValue::OutPtr,
            };
            Some((i, value))
        })
        .collect()
}

/// The value a parameter no formula constrains gets in a candidate.
pub(super) fn unconstrained(ty: ParamType) -> ArgValue {
    match ty {
        ParamType::F64 => ArgValue::F64(0.0),
        ParamType::F32 => ArgValue::F32(0.0),
        ParamType::Int { .. } => ArgValue::Int(0),
        ParamType::OutPtr { .. } => ArgValue::OutPtr,
    }
}

/// Whether parameter `i` of `sig` is a `double` or `float`.
pub(super) fn is_float_param(sig: &FunctionSignature, i: usize) -> bool {
    sig.params
        .get(i)
        .and_then(|p| p.ty.float_format())
        .is_some()
}

/// The Z3 variable of float parameter `i`.
fn float_var(i: usize, fmt: FloatFormat) -> Real {
    Real::new_const(real::param_name(i as u32, VarType::Float(fmt)))
}
