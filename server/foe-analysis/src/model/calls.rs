//! Calls: which callees the model understands (functions of the module, libm and LLVM intrinsics,
//! memory intrinsics) and Ariadne's rules for elementary functions (Figure 3.3 of the thesis).

use super::exec::{const_fmod, real_parts, Executor, State};
use super::llvm::{Ty, Val};
use super::memory::Value;
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
            | Callee::Integer { name: n, .. } => n.clone(),
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
    match libm_call(base) {
        Some(func) => Ok(Callee::Math { name, func }),
        None => Err(format!("calls external function `{name}`")),
    }
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
