//! Calls of library functions: libm and the floating-point intrinsics (lane by lane for vector forms) and the
//! modelled C library functions ([`LibcCall`]). Their queries come from `fp_ops.rs`.

use super::Executor;
use crate::model::calls::{Class, LibcCall, MathCall};
use crate::model::error::ModelError;
use crate::model::llvm::{LLVMTypeKind, Ty};
use crate::model::memory::{Pointer, Scalar, Value};
use crate::model::state::{path_stop, State};
use crate::model::values::{
    fp_format, frexp_f64, min_normal, nextafter_f64, no_mask_lanes, pow2, real_parts,
};
use crate::round::FloatFormat;
use crate::sym::{self, ArithOp, Expr, Integral, MathFn};

impl<'m> Executor<'m> {
    /// A call of a libm function or FP intrinsic (lane by lane for vector forms).
    pub(super) fn math_call(
        &mut self,
        st: &mut State<'m>,
        func: MathCall,
        args: Vec<Value>,
        result_ty: Ty<'m>,
    ) -> Result<Value, ModelError> {
        if let Some(n) = args.iter().find_map(|a| {
            if let Value::Lanes(l) = a {
                Some(l.len())
            } else {
                None
            }
        }) {
            let mut lanes = Vec::with_capacity(n);
            for i in 0..n {
                let lane_args = args
                    .iter()
                    .map(|a| match a {
                        Value::Lanes(l) => l.get(i).cloned().unwrap_or(Value::Poison),
                        other => other.clone(),
                    })
                    .collect();
                lanes.push(self.math_scalar(st, func, lane_args, result_ty)?);
            }
            return Ok(Value::Lanes(lanes));
        }
        self.math_scalar(st, func, args, result_ty)
    }

    fn math_scalar(
        &mut self,
        st: &mut State<'m>,
        func: MathCall,
        args: Vec<Value>,
        result_ty: Ty<'m>,
    ) -> Result<Value, ModelError> {
        if args.iter().any(|a| matches!(a, Value::Poison)) {
            return Ok(Value::Poison);
        }
        // Every argument is a float but `powi`'s exponent.
        if !matches!(func, MathCall::Powi) {
            no_mask_lanes(&args.iter().collect::<Vec<_>>())?;
        }
        let fmt = fp_format(result_ty)
            .or_else(|| args.first().and_then(real_parts).map(|(_, f)| f))
            .ok_or_else(|| {
                ModelError::Unsupported(format!(
                    "calls `{}` on a non-float type",
                    self.at.operation
                ))
            })?;
        let reals: Vec<Expr> = args
            .iter()
            .filter_map(|a| real_parts(a).map(|(e, _)| e))
            .collect();
        let arg = |i: usize| -> Result<Expr, ModelError> {
            reals
                .get(i)
                .cloned()
                .ok_or_else(|| ModelError::internal("missing floating-point argument"))
        };
        let value = match func {
            MathCall::Fabs => sym::abs(arg(0)?),
            MathCall::CopySign => {
                let magnitude = sym::abs(arg(0)?);
                sym::ite(
                    sym::ge(arg(1)?, sym::real_i(0)),
                    magnitude.clone(),
                    sym::neg(magnitude),
                )
            }
            MathCall::MinMax { min } => {
                let (x, y) = (arg(0)?, arg(1)?);
                let x_smaller = sym::lt(x.clone(), y.clone());
                if min {
                    sym::ite(x_smaller, x, y)
                } else {
                    sym::ite(x_smaller, y, x)
                }
            }
            MathCall::Integral(mode) => {
                self.emit_integer_crossing(st, &arg(0)?, fmt);
                sym::to_integral(mode, fmt, arg(0)?)
            }
            MathCall::Fma => {
                let (a, b, c) = (arg(0)?, arg(1)?, arg(2)?);
                self.fma(st, fmt, a, b, c)
            }
            MathCall::Powi => {
                let x = arg(0)?;
                let n = match args.get(1) {
                    Some(Value::Int { e, .. }) => e.clone(),
                    _ => return Err(ModelError::internal("powi without an integer exponent")),
                };
                return self.powi(st, fmt, x, n);
            }
            MathCall::Fn(f) => return self.math_value(st, f, fmt, reals),
        };
        Ok(Value::Real { e: value, fmt })
    }

    /// A modelled C library call (see [`LibcCall`]); a value the model cannot follow stops the path.
    pub(super) fn libc_call(
        &mut self,
        st: &mut State<'m>,
        func: LibcCall,
        args: Vec<Value>,
        result_ty: Ty<'m>,
    ) -> Result<Value, ModelError> {
        if args.iter().any(|a| matches!(a, Value::Poison)) {
            return Ok(Value::Poison);
        }
        if args.iter().any(|a| matches!(a, Value::Lanes(_))) {
            return Err(path_stop(format!(
                "`{}` on a vector",
                self.at.operation.trim_start_matches("call ")
            )));
        }
        let name = self.at.operation.trim_start_matches("call ").to_string();
        let (x, fmt) = args.first().and_then(real_parts).ok_or_else(|| {
            ModelError::Unsupported(format!("calls `{name}` without a floating-point argument"))
        })?;
        match func {
            LibcCall::Classify(class) => classify(class, x, fmt, &args, result_ty),
            LibcCall::Scale => {
                let Some(Value::Int { e: n, .. }) = args.get(1) else {
                    return Err(ModelError::Unsupported(format!(
                        "calls `{name}` without an integer exponent"
                    )));
                };
                // x·2ⁿ rounded once: the exceptions of a multiplication by the exact power of two.
                let factor = match sym::const_i64(n) {
                    Some(k) => sym::real(pow2(k.clamp(-1_100, 1_100))),
                    None => sym::math(MathFn::Exp2, fmt, vec![sym::int_to_real(n.clone())]),
                };
                self.fp_arith(
                    st,
                    ArithOp::Mul,
                    Value::Real { e: x, fmt },
                    Value::Real { e: factor, fmt },
                )
            }
            LibcCall::Modf => modf(st, &name, x, fmt, &args),
            LibcCall::Frexp => frexp(st, &name, x, fmt, &args),
            LibcCall::NextAfter => nextafter(&name, x, fmt, &args),
        }
    }
}

/// `isnan`, `isinf`, `isfinite`, `signbit`, `fpclassify` and `llvm.is.fpclass` of `x` (the mask in `args[1]`).
fn classify<'m>(
    class: Class,
    x: Expr,
    fmt: FloatFormat,
    args: &[Value],
    result_ty: Ty<'m>,
) -> Result<Value, ModelError> {
    let int_result = |c: Expr| -> Value {
        match result_ty.kind() {
            LLVMTypeKind::LLVMIntegerTypeKind if result_ty.int_width() > 1 => Value::Int {
                e: sym::ite(c, sym::int_i(1), sym::int_i(0)),
                bits: result_ty.int_width(),
            },
            _ => Value::Bool(c),
        }
    };
    let zero = || sym::real_i(0);
    match class {
        // Values in the model are finite reals: never NaN nor infinite (−0 counts as +0).
        Class::IsNan | Class::IsInf => Ok(int_result(sym::fals())),
        Class::IsFinite => Ok(int_result(sym::tru())),
        Class::SignBit => Ok(int_result(sym::lt(x, zero()))),
        Class::Fpclassify => {
            let tiny = sym::lt(sym::abs(x.clone()), min_normal(fmt));
            let is_zero = sym::eq(x.clone(), zero());
            if let Some(Value::Int { e: mask, .. }) = args.get(1) {
                return is_fpclass(x, mask, tiny, is_zero);
            }
            // glibc's numbering: FP_ZERO 2, FP_SUBNORMAL 3, FP_NORMAL 4.
            let class = sym::ite(
                is_zero,
                sym::int_i(2),
                sym::ite(tiny, sym::int_i(3), sym::int_i(4)),
            );
            Ok(Value::Int {
                e: class,
                bits: result_ty.int_width().max(2),
            })
        }
    }
}

/// `llvm.is.fpclass(x, mask)`, given whether `x` is `tiny` (below the smallest normal) and `is_zero`.
fn is_fpclass(x: Expr, mask: &Expr, tiny: Expr, is_zero: Expr) -> Result<Value, ModelError> {
    let zero = || sym::real_i(0);
    // `llvm.is.fpclass(x, mask)`: bits 0-1 NaN, 2 −∞, 3 −normal, 4 −subnormal, 5 −0, 6 +0,
    // 7 +subnormal, 8 +normal, 9 +∞.
    let mask = sym::const_i64(mask)
        .ok_or_else(|| ModelError::internal("`llvm.is.fpclass` with a computed mask"))?;
    let bit = |i: u32| mask & (1 << i) != 0;
    let negative = || sym::lt(x.clone(), zero());
    let positive = || sym::gt(x.clone(), zero());
    let normal = || sym::not(tiny.clone());
    let subnormal = || sym::and([tiny.clone(), sym::not(is_zero.clone())]);
    let mut parts = Vec::new();
    if bit(3) {
        parts.push(sym::and([negative(), normal()]));
    }
    if bit(4) {
        parts.push(sym::and([negative(), subnormal()]));
    }
    if bit(5) || bit(6) {
        parts.push(is_zero.clone());
    }
    if bit(7) {
        parts.push(sym::and([positive(), subnormal()]));
    }
    if bit(8) {
        parts.push(sym::and([positive(), normal()]));
    }
    Ok(Value::Bool(sym::or(parts)))
}

/// The pointer `modf` and `frexp` store their second result through; the path stops where it is unknown.
fn second_pointer(name: &str, args: &[Value]) -> Result<Pointer, ModelError> {
    match args.get(1) {
        Some(Value::Ptr(p)) => Ok(*p),
        _ => Err(path_stop(format!(
            "`{name}` stores through an unknown pointer"
        ))),
    }
}

/// `modf(x, &whole)`: stores x truncated toward zero, returns the rest.
fn modf(
    st: &mut State<'_>,
    name: &str,
    x: Expr,
    fmt: FloatFormat,
    args: &[Value],
) -> Result<Value, ModelError> {
    let p = &second_pointer(name, args)?;
    let whole = sym::to_integral(Integral::Trunc, fmt, x.clone());
    st.memory.store_scalar(
        *p,
        Value::Real {
            e: whole.clone(),
            fmt,
        },
        Scalar::Float(fmt),
    )?;
    Ok(Value::Real {
        e: sym::exact(ArithOp::Sub, x, whole),
        fmt,
    })
}

/// `frexp(x, &exp)` of a constant `x`: stores the exponent, returns the mantissa.
fn frexp(
    st: &mut State<'_>,
    name: &str,
    x: Expr,
    fmt: FloatFormat,
    args: &[Value],
) -> Result<Value, ModelError> {
    let p = &second_pointer(name, args)?;
    let Some(c) = x.as_real() else {
        return Err(path_stop(format!("`{name}` of a computed value")));
    };
    let (m, e) = frexp_f64(sym::const_f64(c));
    st.memory.store_scalar(
        *p,
        Value::Int {
            e: sym::int_i(e as i64),
            bits: 32,
        },
        Scalar::Int(32),
    )?;
    Ok(Value::Real {
        e: sym::real_f64(m),
        fmt,
    })
}

/// `nextafter(x, y)` of constants, in `fmt`.
fn nextafter(name: &str, x: Expr, fmt: FloatFormat, args: &[Value]) -> Result<Value, ModelError> {
    let y = args.get(1).and_then(real_parts).map(|(y, _)| y);
    match (x.as_real(), y.as_ref().and_then(|y| y.as_real())) {
        (Some(a), Some(b)) => {
            let (a, b) = (sym::const_f64(a), sym::const_f64(b));
            let r = match fmt {
                FloatFormat::Double => nextafter_f64(a, b),
                FloatFormat::Single => {
                    let (a, b) = (a as f32, b as f32);
                    if a == b {
                        b as f64
                    } else if a == 0.0 {
                        f32::from_bits(1).copysign(b - a) as f64
                    } else {
                        let away = (b > a) == (a > 0.0);
                        let bits = a.to_bits();
                        f32::from_bits(if away { bits + 1 } else { bits - 1 }) as f64
                    }
                }
            };
            Ok(Value::Real {
                e: sym::real_f64(r),
                fmt,
            })
        }
        _ => Err(path_stop(format!("`{name}` of a computed value"))),
    }
}
