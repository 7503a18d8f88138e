//! Floating-point operations and their exception conditions: arithmetic, remainders, conversions, reductions,
//! fused multiply-adds and elementary functions. Every [`Query`] is emitted here (`emit`).

use super::Executor;
use crate::model::error::ModelError;
use crate::model::llvm::{LLVMOpcode, Val};
use crate::model::memory::Value;
use crate::model::state::State;
use crate::model::values::{
    const_fmod, fp_format, is_poison, no_mask_lanes, real_parts, scalar_bits,
};
use crate::model::{CancellationQuery, Cancelling, Query};
use crate::round::FloatFormat;
use crate::sym::{self, ArithOp, Expr, MathFn, Site, SiteOp};
use crate::types::{Build, ExceptionKind};

/// Bits an addition or subtraction must cancel for its inputs to be asked for: the two builds' results part by
/// about as many bits (their operands' last-place differences magnified), well past the default accuracy threshold
/// (20 bits).
pub(super) const CANCELLED_BITS: u32 = 30;

impl<'m> Executor<'m> {
    /// `fadd`, `fsub`, `fmul`, `fdiv` (lane by lane).
    pub(super) fn symex_fp_arith(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        opcode: LLVMOpcode,
    ) -> Result<Value, ModelError> {
        let op = match opcode {
            LLVMOpcode::LLVMFAdd => ArithOp::Add,
            LLVMOpcode::LLVMFSub => ArithOp::Sub,
            LLVMOpcode::LLVMFMul => ArithOp::Mul,
            _ => ArithOp::Div,
        };
        let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
        self.lanes2(st, a, b, &mut |this, st, a, b| this.fp_arith(st, op, a, b))
    }

    /// `frem` (lane by lane), C's `fmod`.
    pub(super) fn symex_frem(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
        self.lanes2(st, a, b, &mut |this, st, a, b| this.fp_rem(st, a, b))
    }

    /// `fptosi` (`signed`) and `fptoui` (lane by lane).
    pub(super) fn symex_fp_to_int(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        signed: bool,
    ) -> Result<Value, ModelError> {
        let to = scalar_bits(inst.ty())?;
        let a = self.operand(st, inst, 0)?;
        self.lanes1(st, a, &mut |this, st, a| this.fp_to_int(st, a, to, signed))
    }

    /// `fptrunc` and `fpext` (lane by lane).
    pub(super) fn symex_fp_convert(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let fmt = fp_format(inst.ty()).ok_or_else(|| {
            ModelError::Unsupported(format!("converts to `{}`", inst.ty().text()))
        })?;
        let a = self.operand(st, inst, 0)?;
        self.lanes1(st, a, &mut |this, st, a| this.fp_convert(st, a, fmt))
    }

    /// Records the queries for `kinds` at `site` under the current path condition.
    fn emit(&mut self, st: &State<'m>, kinds: &[ExceptionKind], site: &Site) {
        for &kind in kinds {
            let condition = sym::exception(kind, site.clone());
            let formula = if condition.is_false() {
                condition
            } else {
                sym::and(st.pc.iter().cloned().chain([condition]))
            };
            self.queries.push(Query {
                build: self.build,
                kind,
                operation: self.at.operation.clone(),
                loc: self.at.loc,
                instruction: self.at.instruction,
                formula,
            });
        }
    }

    /// In the plain build, records where `a op b` (an addition or subtraction, or the difference a comparison
    /// decides on) cancels `bits` bits ([`sym::cancellation`]) on this path, within [`super::CANCELLATION_PATHS`]
    /// and [`super::MAX_CANCELLATIONS`].
    pub(super) fn emit_cancellation(
        &mut self,
        st: &State<'m>,
        (kind, op): (Cancelling, ArithOp),
        (a, b): (&Expr, &Expr),
        bits: u32,
    ) {
        if self.build != Build::P || self.cancellations.len() >= super::MAX_CANCELLATIONS {
            return;
        }
        let paths = self
            .cancellation_paths
            .entry((self.at.loc, self.at.instruction))
            .or_default();
        if *paths >= super::CANCELLATION_PATHS {
            return;
        }
        let Some(condition) = sym::cancellation(op, a, b, bits) else {
            return;
        };
        *paths += 1;
        self.cancellations.push(CancellationQuery {
            kind,
            operation: self.at.operation.clone(),
            loc: self.at.loc,
            formula: sym::and(st.pc.iter().cloned().chain([condition])),
        });
    }

    /// Where `x`, about to be rounded to an integer (`floor`, a conversion to `int`), lies within two floats of
    /// the nearest integer without being it: the builds' last-bit differences pick different integers there.
    pub(super) fn emit_integer_crossing(&mut self, st: &State<'m>, x: &Expr, fmt: FloatFormat) {
        if matches!(x.kind(), sym::Kind::ToIntegral { .. }) {
            return; // `(int)floor(t)`: asked at the `floor`
        }
        let nearest = sym::to_integral(sym::Integral::Round, fmt, x.clone());
        let bits = fmt.precision() as u32 - 2;
        let kind = (Cancelling::Integer, ArithOp::Sub);
        self.emit_cancellation(st, kind, (x, &nearest), bits);
    }

    pub(super) fn fp_arith(
        &mut self,
        st: &mut State<'m>,
        op: ArithOp,
        a: Value,
        b: Value,
    ) -> Result<Value, ModelError> {
        let ((x, fmt), (y, _)) = match (real_parts(&a), real_parts(&b)) {
            (Some(x), Some(y)) => (x, y),
            _ if is_poison(&a) || is_poison(&b) => return Ok(Value::Poison),
            _ => {
                no_mask_lanes(&[&a, &b])?;
                return Err(ModelError::internal(format!(
                    "FP arithmetic on {a:?} and {b:?}"
                )));
            }
        };
        let site = Site {
            op: SiteOp::Arith(op),
            fmt,
            args: vec![x.clone(), y.clone()],
        };
        self.emit_cancellation(st, (Cancelling::Sum, op), (&x, &y), CANCELLED_BITS);
        use ExceptionKind::*;
        if op == ArithOp::Div {
            self.emit(st, &[Invalid, DivideByZero, Overflow, Underflow], &site);
        } else {
            self.emit(st, &[Overflow, Underflow], &site);
        }
        let r = sym::arith(op, fmt, x, y.clone());
        if op == ArithOp::Div {
            st.assume(sym::ne(y, sym::real_i(0)));
        }
        Ok(Value::Real { e: r, fmt })
    }

    fn fp_rem(&mut self, st: &mut State<'m>, a: Value, b: Value) -> Result<Value, ModelError> {
        let ((x, fmt), (y, _)) = match (real_parts(&a), real_parts(&b)) {
            (Some(x), Some(y)) => (x, y),
            _ => {
                no_mask_lanes(&[&a, &b])?;
                return Ok(Value::Poison);
            }
        };
        self.math_value(st, MathFn::Fmod, fmt, vec![x, y])
    }

    fn fp_to_int(
        &mut self,
        st: &mut State<'m>,
        a: Value,
        bits: u32,
        signed: bool,
    ) -> Result<Value, ModelError> {
        let Some((x, fmt)) = real_parts(&a) else {
            no_mask_lanes(&[&a])?;
            return Ok(Value::Poison);
        };
        let site = Site {
            op: SiteOp::FpToInt { bits, signed },
            fmt,
            args: vec![x.clone()],
        };
        self.emit(st, &[ExceptionKind::Invalid], &site);
        self.emit_integer_crossing(st, &x, fmt);
        let e = sym::fp_to_int(bits, signed, x);
        Ok(if bits == 1 {
            Value::Bool(sym::ne(e, sym::int_i(0)))
        } else {
            Value::Int { e, bits }
        })
    }

    fn fp_convert(
        &mut self,
        st: &mut State<'m>,
        a: Value,
        to: FloatFormat,
    ) -> Result<Value, ModelError> {
        let Some((x, from)) = real_parts(&a) else {
            no_mask_lanes(&[&a])?;
            return Ok(Value::Poison);
        };
        if from == FloatFormat::Double && to == FloatFormat::Single {
            let site = Site {
                op: SiteOp::Narrow,
                fmt: to,
                args: vec![x.clone()],
            };
            self.emit(
                st,
                &[ExceptionKind::Overflow, ExceptionKind::Underflow],
                &site,
            );
        }
        Ok(Value::Real {
            e: sym::convert(to, x),
            fmt: to,
        })
    }

    /// `llvm.vector.reduce.fadd/fmul` as the code generator expands it: in lane order from `start` without
    /// `reassoc`; with it, halving the vector pairwise (lane i with lane i + n/2) and then `start op result`, where
    /// a `start` of the operation's identity (-0.0, 1.0) is dropped.
    pub(super) fn reduce(
        &mut self,
        st: &mut State<'m>,
        op: ArithOp,
        start: Value,
        mut lanes: Vec<Value>,
        reassociate: bool,
    ) -> Result<Value, ModelError> {
        if !reassociate || !lanes.len().is_power_of_two() {
            let mut acc = start;
            for lane in lanes {
                acc = self.fp_arith(st, op, acc, lane)?;
            }
            return Ok(acc);
        }
        while lanes.len() > 1 {
            let upper = lanes.split_off(lanes.len() / 2);
            lanes = lanes
                .into_iter()
                .zip(upper)
                .map(|(a, b)| self.fp_arith(st, op, a, b))
                .collect::<Result<_, _>>()?;
        }
        let folded = lanes
            .pop()
            .ok_or_else(|| ModelError::internal("reducing an empty vector"))?;
        let identity = match op {
            ArithOp::Mul => sym::real_i(1),
            _ => sym::real_i(0),
        };
        match &start {
            Value::Real { e, .. } if *e == identity => Ok(folded),
            _ => self.fp_arith(st, op, start, folded),
        }
    }

    /// `fma(a, b, c)` (and `llvm.fmuladd`): its overflow and underflow queries and its value.
    pub(super) fn fma(
        &mut self,
        st: &State<'m>,
        fmt: FloatFormat,
        a: Expr,
        b: Expr,
        c: Expr,
    ) -> Expr {
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

    /// An elementary function: its exception queries, its value, and the assumptions its result needs.
    pub(super) fn math_value(
        &mut self,
        st: &mut State<'m>,
        func: MathFn,
        fmt: FloatFormat,
        args: Vec<Expr>,
    ) -> Result<Value, ModelError> {
        if args.len() != func.arity() {
            return Err(ModelError::Unsupported(format!(
                "calls `{}` with {} arguments",
                func.name(),
                args.len()
            )));
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
    pub(super) fn powi(
        &mut self,
        st: &mut State<'m>,
        fmt: FloatFormat,
        x: Expr,
        n: Expr,
    ) -> Result<Value, ModelError> {
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
