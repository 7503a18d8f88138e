//! Calls: which callees the model understands (functions of the module, libm and LLVM intrinsics,
//! memory intrinsics) and Ariadne's rules for elementary functions (Figure 3.3 of the thesis).

use super::exec::{const_fmod, path_stop, real_parts, Executor, State};
use super::llvm::{LLVMTypeKind, Ty, Val};
use super::memory::{Scalar, Value};
use crate::round::FloatFormat;
use crate::sym::{self, ArithOp, Expr, Integral, MathFn, Site, SiteOp};
use crate::types::ExceptionKind;

/// What a call instruction calls.
pub(super) enum Callee<'m> {
    /// A function defined in the module: inlined.
    Defined(Val<'m>),
    /// Debug, lifetime and assumption intrinsics: no effect on values.
    Ignored(String),
    Memory {
        name: String,
        kind: MemoryOp,
    },
    Math {
        name: String,
        func: MathCall,
    },
    /// `llvm.vector.reduce.fadd/fmul(start, vector)`.
    Reduce {
        name: String,
        op: ArithOp,
    },
    /// `llvm.smin/smax/umin/umax` and `llvm.abs` on integers.
    Integer {
        name: String,
        op: IntegerCall,
    },
    /// C library functions of the numeric programmer that the model knows (`ldexp`, `frexp`, `modf`,
    /// `nextafter`, the classification functions); they run natively in the worker.
    Libc {
        name: String,
        func: LibcCall,
    },
    /// A function foe does not run: no definition in the module, not libm nor a modelled C library function
    /// (typically an error reporter such as `gsl_error`, I/O, allocation, `exit`). The path ends at the call;
    /// the worker replaces the call by a stop (see [`runs_natively`]).
    Stop {
        name: String,
    },
}

/// C library functions with a model of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LibcCall {
    /// `ldexp`, `scalbn`, `scalbln`: x·2ⁿ, rounded once.
    Scale,
    /// `frexp(x, &e)`: the mantissa in [0.5, 1) and the exponent.
    Frexp,
    /// `modf(x, &ip)`: the fractional part, the integral part stored.
    Modf,
    /// `nextafter(x, y)`: the neighbour of x towards y.
    NextAfter,
    /// `isnan`, `isinf`, `finite`/`isfinite`, `signbit`, `fpclassify` as functions (`__isnan`, `__fpclassify`).
    Classify(Class),
}

/// What a classification function answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    IsNan,
    IsInf,
    IsFinite,
    SignBit,
    /// glibc's `FP_ZERO` etc. numbering: NAN 0, INFINITE 1, ZERO 2, SUBNORMAL 3, NORMAL 4.
    Fpclassify,
}

/// Integer intrinsics, modelled by a comparison and a choice.
#[derive(Debug, Clone, Copy)]
pub(super) enum IntegerCall {
    MinMax { signed: bool, min: bool },
    Abs,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum MemoryOp {
    Set,
    Copy,
}

/// The elementary operations a libm call or intrinsic performs.
#[derive(Debug, Clone, Copy)]
pub(super) enum MathCall {
    Fn(MathFn),
    Fabs,
    Fma,
    Integral(Integral),
    MinMax {
        min: bool,
    },
    CopySign,
    /// `llvm.powi`: a real to an integer power.
    Powi,
}

impl Callee<'_> {
    pub(super) fn name(&self) -> String {
        match self {
            Callee::Defined(f) => f.name(),
            Callee::Ignored(n)
            | Callee::Memory { name: n, .. }
            | Callee::Math { name: n, .. }
            | Callee::Reduce { name: n, .. }
            | Callee::Integer { name: n, .. }
            | Callee::Libc { name: n, .. }
            | Callee::Stop { name: n } => n.clone(),
        }
    }
}

/// Classifies the callee of `call`; an error names what cannot be modelled.
pub(super) fn classify(call: Val<'_>) -> Result<Callee<'_>, String> {
    let called = call
        .called_value()
        .ok_or("internal: call without a callee")?;
    if called.is_inline_asm() {
        return Err("uses inline assembly".into());
    }
    if !called.is_function() {
        return Err("makes an indirect call (through a function pointer)".into());
    }
    let name = called.name();
    if let Some(rest) = name.strip_prefix("llvm.") {
        let base = rest.split('.').next().unwrap_or("");
        return match base {
            "dbg" | "lifetime" | "assume" | "experimental" | "invariant" | "var" | "annotation"
            | "donothing" | "prefetch" | "sideeffect" | "pseudoprobe" => Ok(Callee::Ignored(name)),
            "memset" => Ok(Callee::Memory {
                name,
                kind: MemoryOp::Set,
            }),
            "memcpy" | "memmove" => Ok(Callee::Memory {
                name,
                kind: MemoryOp::Copy,
            }),
            "fmuladd" => Ok(Callee::Math {
                name,
                func: MathCall::Fma,
            }),
            "powi" => Ok(Callee::Math {
                name,
                func: MathCall::Powi,
            }),
            "minnum" | "minimum" => Ok(Callee::Math {
                name,
                func: MathCall::MinMax { min: true },
            }),
            "maxnum" | "maximum" => Ok(Callee::Math {
                name,
                func: MathCall::MinMax { min: false },
            }),
            "vector" if rest.starts_with("vector.reduce.fadd.") => Ok(Callee::Reduce {
                name,
                op: ArithOp::Add,
            }),
            "vector" if rest.starts_with("vector.reduce.fmul.") => Ok(Callee::Reduce {
                name,
                op: ArithOp::Mul,
            }),
            "smin" | "smax" | "umin" | "umax" => Ok(Callee::Integer {
                op: IntegerCall::MinMax {
                    signed: base.starts_with('s'),
                    min: base.ends_with("min"),
                },
                name,
            }),
            "abs" => Ok(Callee::Integer {
                name,
                op: IntegerCall::Abs,
            }),
            "is" if rest.starts_with("is.fpclass.") => Ok(Callee::Libc {
                name,
                func: LibcCall::Classify(Class::Fpclassify),
            }),
            "rint" | "nearbyint" | "roundeven" => Ok(Callee::Math {
                name,
                func: MathCall::Integral(Integral::Round),
            }),
            other => match libm_call(other) {
                Some(func) => Ok(Callee::Math { name, func }),
                None => Err(format!("calls the intrinsic `{name}`")),
            },
        };
    }
    if called.entry_block().is_some() {
        return Ok(Callee::Defined(called));
    }
    let base = name
        .strip_suffix('f')
        .filter(|b| libm_call(b).is_some())
        .unwrap_or(&name);
    if let Some(func) = libm_call(base) {
        return Ok(Callee::Math { name, func });
    }
    match libc_call(&name) {
        Some(func) => Ok(Callee::Libc { name, func }),
        None => Ok(Callee::Stop { name }),
    }
}

/// Whether the worker may execute a call to the declared (not defined) function `name`: LLVM intrinsics, the
/// libm functions and the C library functions the model knows. Any other call is replaced by a stop of the run
/// (`instrument::replace_stopping_calls`), exactly where the model ends the path ([`Callee::Stop`]).
pub fn runs_natively(name: &str) -> bool {
    if name.starts_with("llvm.") || name.starts_with("__foe") {
        return true;
    }
    let base = name
        .strip_suffix('f')
        .filter(|b| libm_call(b).is_some())
        .unwrap_or(name);
    libm_call(base).is_some() || libc_call(name).is_some()
}

/// The modelled C library functions (double forms; `float` forms end in `f`).
fn libc_call(name: &str) -> Option<LibcCall> {
    let base = match name.strip_suffix('f') {
        Some(b) if libc_call_double(b).is_some() => b,
        _ => name,
    };
    libc_call_double(base)
}

fn libc_call_double(name: &str) -> Option<LibcCall> {
    Some(match name {
        "ldexp" | "scalbn" | "scalbln" => LibcCall::Scale,
        "frexp" => LibcCall::Frexp,
        "modf" => LibcCall::Modf,
        "nextafter" => LibcCall::NextAfter,
        "isnan" | "__isnan" => LibcCall::Classify(Class::IsNan),
        "isinf" | "__isinf" => LibcCall::Classify(Class::IsInf),
        "finite" | "__finite" | "isfinite" => LibcCall::Classify(Class::IsFinite),
        "__signbit" | "signbit" => LibcCall::Classify(Class::SignBit),
        "__fpclassify" | "fpclassify" => LibcCall::Classify(Class::Fpclassify),
        _ => return None,
    })
}

/// libm functions (double names; the `f` variants are stripped by the caller).
fn libm_call(name: &str) -> Option<MathCall> {
    Some(match name {
        "sqrt" => MathCall::Fn(MathFn::Sqrt),
        "exp" => MathCall::Fn(MathFn::Exp),
        "exp2" => MathCall::Fn(MathFn::Exp2),
        "log" => MathCall::Fn(MathFn::Log),
        "log2" => MathCall::Fn(MathFn::Log2),
        "log10" => MathCall::Fn(MathFn::Log10),
        "pow" => MathCall::Fn(MathFn::Pow),
        "sin" => MathCall::Fn(MathFn::Sin),
        "cos" => MathCall::Fn(MathFn::Cos),
        "tan" => MathCall::Fn(MathFn::Tan),
        "atan" => MathCall::Fn(MathFn::Atan),
        "hypot" => MathCall::Fn(MathFn::Hypot),
        "atan2" => MathCall::Fn(MathFn::Atan2),
        "cbrt" => MathCall::Fn(MathFn::Cbrt),
        "sinh" => MathCall::Fn(MathFn::Sinh),
        "cosh" => MathCall::Fn(MathFn::Cosh),
        "tanh" => MathCall::Fn(MathFn::Tanh),
        "expm1" => MathCall::Fn(MathFn::Expm1),
        "log1p" => MathCall::Fn(MathFn::Log1p),
        "asin" => MathCall::Fn(MathFn::Asin),
        "acos" => MathCall::Fn(MathFn::Acos),
        "fmod" => MathCall::Fn(MathFn::Fmod),
        "fabs" => MathCall::Fabs,
        "fma" => MathCall::Fma,
        "floor" => MathCall::Integral(Integral::Floor),
        "ceil" => MathCall::Integral(Integral::Ceil),
        "trunc" => MathCall::Integral(Integral::Trunc),
        "round" => MathCall::Integral(Integral::Round),
        "fmin" => MathCall::MinMax { min: true },
        "fmax" => MathCall::MinMax { min: false },
        "copysign" => MathCall::CopySign,
        _ => return None,
    })
}

impl<'m> Executor<'m> {
    /// A call of a libm function or FP intrinsic (lane by lane for vector forms).
    pub(super) fn math_call(
        &mut self,
        st: &mut State<'m>,
        func: MathCall,
        args: Vec<Value>,
        result_ty: Ty<'m>,
    ) -> Result<Value, String> {
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
    ) -> Result<Value, String> {
        if args.iter().any(|a| matches!(a, Value::Poison)) {
            return Ok(Value::Poison);
        }
        let fmt = super::exec::fp_format(result_ty)
            .or_else(|| args.first().and_then(real_parts).map(|(_, f)| f))
            .ok_or_else(|| format!("calls `{}` on a non-float type", self.at.operation))?;
        let reals: Vec<Expr> = args
            .iter()
            .filter_map(|a| real_parts(a).map(|(e, _)| e))
            .collect();
        let arg = |i: usize| -> Result<Expr, String> {
            reals
                .get(i)
                .cloned()
                .ok_or_else(|| "internal: missing floating-point argument".to_string())
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
            MathCall::Integral(mode) => sym::to_integral(mode, fmt, arg(0)?),
            MathCall::Fma => {
                let (a, b, c) = (arg(0)?, arg(1)?, arg(2)?);
                let site = Site {
                    op: SiteOp::Fma,
                    fmt,
                    args: vec![a.clone(), b.clone(), c.clone()],
                };
                self.emit(
                    st,
                    &[ExceptionKind::Overflow, ExceptionKind::Underflow],
                    &site,
                );
                sym::fma(fmt, a, b, c)
            }
            MathCall::Powi => {
                let x = arg(0)?;
                let n = match args.get(1) {
                    Some(Value::Int { e, .. }) => e.clone(),
                    _ => return Err("internal: powi without an integer exponent".into()),
                };
                return self.powi(st, fmt, x, n);
            }
            MathCall::Fn(f) => return self.math_value(st, f, fmt, reals),
        };
        Ok(Value::Real { e: value, fmt })
    }

    /// An elementary function: its exception queries, its value, and the assumptions its result needs.
    pub(super) fn math_value(
        &mut self,
        st: &mut State<'m>,
        func: MathFn,
        fmt: FloatFormat,
        args: Vec<Expr>,
    ) -> Result<Value, String> {
        if args.len() != func.arity() {
            return Err(format!(
                "calls `{}` with {} arguments",
                func.name(),
                args.len()
            ));
        }
        let site = Site {
            op: SiteOp::Math(func),
            fmt,
            args: args.clone(),
        };
        self.emit(st, func.exception_kinds(), &site);
        let constants: Option<Vec<_>> = args.iter().map(|a| a.as_real().cloned()).collect();
        let value = match constants {
            Some(c) if func == MathFn::Fmod => const_fmod(&c[0], &c[1]).map(sym::real),
            Some(c) => {
                let v =
                    sym::ieee_math(func, fmt, &c.iter().map(sym::const_f64).collect::<Vec<_>>());
                v.is_finite().then(|| sym::real_f64(v))
            }
            None => None,
        }
        .unwrap_or_else(|| sym::math(func, fmt, args.clone()));
        let zero = || sym::real_i(0);
        match func {
            MathFn::Sqrt => st.assume(sym::ge(args[0].clone(), zero())),
            MathFn::Log | MathFn::Log2 | MathFn::Log10 => {
                st.assume(sym::gt(args[0].clone(), zero()))
            }
            MathFn::Fmod => st.assume(sym::ne(args[1].clone(), zero())),
            _ => {}
        }
        Ok(Value::Real { e: value, fmt })
    }

    /// `llvm.powi(x, n)`: Ariadne's pow rules with an integral exponent; small constant powers are exact
    /// products.
    fn powi(
        &mut self,
        st: &mut State<'m>,
        fmt: FloatFormat,
        x: Expr,
        n: Expr,
    ) -> Result<Value, String> {
        let exponent = sym::int_to_real(n.clone());
        let site = Site {
            op: SiteOp::Math(MathFn::Pow),
            fmt,
            args: vec![x.clone(), exponent.clone()],
        };
        self.emit(st, MathFn::Pow.exception_kinds(), &site);
        let value = match sym::const_i64(&n) {
            Some(k) if (0..=16).contains(&k) => {
                let mut acc = sym::real_i(1);
                for _ in 0..k {
                    acc = sym::exact(ArithOp::Mul, acc, x.clone());
                }
                acc
            }
            _ => sym::math(MathFn::Pow, fmt, vec![x, exponent]),
        };
        Ok(Value::Real { e: value, fmt })
    }
}

/// 2ⁿ as an exact rational.
fn pow2(n: i64) -> num_rational::BigRational {
    let p = num_bigint::BigInt::from(1) << n.unsigned_abs();
    if n >= 0 {
        num_rational::BigRational::from_integer(p)
    } else {
        num_rational::BigRational::new(1.into(), p)
    }
}

/// The smallest normal magnitude of `fmt`.
fn min_normal(fmt: FloatFormat) -> Expr {
    sym::real(pow2(match fmt {
        FloatFormat::Double => -1022,
        FloatFormat::Single => -126,
    }))
}

/// `frexp` of a finite value: (m, e) with x = m·2ᵉ and 0.5 ≤ |m| < 1 (0 for 0).
fn frexp_f64(x: f64) -> (f64, i32) {
    if x == 0.0 {
        return (x, 0);
    }
    let (scaled, bias) = if x.abs() < f64::MIN_POSITIVE {
        (x * 2f64.powi(54), -54)
    } else {
        (x, 0)
    };
    let bits = scaled.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32 - 1022;
    let m = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (m, exp + bias)
}

/// `nextafter(x, y)` on finite doubles.
fn nextafter_f64(x: f64, y: f64) -> f64 {
    if x == y {
        return y;
    }
    if x == 0.0 {
        return if y > 0.0 {
            f64::from_bits(1)
        } else {
            -f64::from_bits(1)
        };
    }
    let bits = x.to_bits();
    let away = (y > x) == (x > 0.0);
    f64::from_bits(if away { bits + 1 } else { bits - 1 })
}

impl<'m> Executor<'m> {
    /// A modelled C library call (see [`LibcCall`]); a value the model cannot follow stops the path.
    pub(super) fn libc_call(
        &mut self,
        st: &mut State<'m>,
        func: LibcCall,
        args: Vec<Value>,
        result_ty: Ty<'m>,
    ) -> Result<Value, String> {
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
        let (x, fmt) = args
            .first()
            .and_then(real_parts)
            .ok_or_else(|| format!("calls `{name}` without a floating-point argument"))?;
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
        match func {
            // Values in the model are finite reals: never NaN nor infinite (−0 counts as +0).
            LibcCall::Classify(Class::IsNan | Class::IsInf) => Ok(int_result(sym::fals())),
            LibcCall::Classify(Class::IsFinite) => Ok(int_result(sym::tru())),
            LibcCall::Classify(Class::SignBit) => Ok(int_result(sym::lt(x, zero()))),
            LibcCall::Classify(Class::Fpclassify) => {
                let tiny = sym::lt(sym::abs(x.clone()), min_normal(fmt));
                let is_zero = sym::eq(x.clone(), zero());
                if let Some(Value::Int { e: mask, .. }) = args.get(1) {
                    // `llvm.is.fpclass(x, mask)`: bits 0-1 NaN, 2 −∞, 3 −normal, 4 −subnormal, 5 −0, 6 +0,
                    // 7 +subnormal, 8 +normal, 9 +∞.
                    let mask = sym::const_i64(mask)
                        .ok_or("internal: `llvm.is.fpclass` with a computed mask")?;
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
                    return Ok(Value::Bool(sym::or(parts)));
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
            LibcCall::Scale => {
                let Some(Value::Int { e: n, .. }) = args.get(1) else {
                    return Err(format!("calls `{name}` without an integer exponent"));
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
            LibcCall::Modf => {
                let Some(Value::Ptr(p)) = args.get(1) else {
                    return Err(path_stop(format!(
                        "`{name}` stores through an unknown pointer"
                    )));
                };
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
            LibcCall::Frexp => {
                let Some(Value::Ptr(p)) = args.get(1) else {
                    return Err(path_stop(format!(
                        "`{name}` stores through an unknown pointer"
                    )));
                };
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
            LibcCall::NextAfter => {
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
        }
    }
}
