//! The x86 SSE/SSE2 intrinsics clang leaves as calls (`llvm.x86.sse.min.ps`, `llvm.x86.sse.rsqrt.ps`,
//! `llvm.x86.sse.movmsk.ps`, their `sse2` and scalar forms), lane by lane. The rest of `_mm_*` arithmetic is plain
//! IR (`fadd <4 x float>`, `llvm.sqrt.v4f32`, `shufflevector`, `fcmp` + `sext`, bitwise operations on the lanes'
//! bits: `bits.rs`), which the other instructions model.
//!
//! - `minps`/`maxps` are the SSE definitions, not IEEE `fmin`/`fmax`: `min(a, b) = a < b ? a : b`,
//!   `max(a, b) = a > b ? a : b`, so equal operands (`-0` and `+0`) and unordered ones give the second. Over the
//!   reals no operand is a NaN; the native runs see what the instruction does with one.
//! - `rsqrtps` and `rcpps` are estimates (12 bits) that raise no exception. The model reads them as the values they
//!   estimate, 1/√x and 1/x (the real-number intent of the code, as for the rest of the path), and emits no query
//!   for them; the native runs compute what the hardware gives. Over the reals they need x > 0 and x ≠ 0, which
//!   the path assumes from there on, as after a square root.
//! - `movmskps` packs the lanes' sign bits: a comparison mask's lane is its condition, a number's is `x < 0` (the
//!   sign of `-0` and of a NaN is not seen over the reals).

use super::Executor;
use crate::model::calls::SseCall;
use crate::model::error::ModelError;
use crate::model::llvm::Val;
use crate::model::memory::Value;
use crate::model::state::{path_stop, State};
use crate::model::values::{is_poison, real_parts};
use crate::sym::{self, ArithOp, IntOp, MathFn};

impl<'m> Executor<'m> {
    /// A call of the SSE intrinsic `op` (`inst`, with `argc` value arguments).
    pub(super) fn sse_call(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        op: SseCall,
        argc: u32,
    ) -> Result<Value, ModelError> {
        let mut args = Vec::with_capacity(argc as usize);
        for i in 0..argc {
            args.push(self.operand(st, inst, i)?);
        }
        let lanes = |v: Option<&Value>| match v {
            Some(Value::Lanes(l)) => Ok(l.clone()),
            _ => Err(ModelError::Unsupported(format!(
                "calls `{}` on a non-vector",
                self.at.operation
            ))),
        };
        let a = lanes(args.first())?;
        if op == SseCall::MoveMask {
            return move_mask(&a);
        }
        let b = match op {
            SseCall::MinMax { .. } => lanes(args.get(1))?,
            _ => a.clone(),
        };
        let scalar = matches!(
            op,
            SseCall::MinMax { scalar: true, .. }
                | SseCall::Rsqrt { scalar: true }
                | SseCall::Rcp { scalar: true }
        );
        let mut out = Vec::with_capacity(a.len());
        for (i, (x, y)) in a.into_iter().zip(b).enumerate() {
            out.push(if scalar && i > 0 {
                x
            } else {
                self.sse_lane(st, op, x, y)?
            });
        }
        Ok(Value::Lanes(out))
    }

    /// One lane of `op` on `x` (and `y` for min and max).
    fn sse_lane(
        &mut self,
        st: &mut State<'m>,
        op: SseCall,
        x: Value,
        y: Value,
    ) -> Result<Value, ModelError> {
        if is_poison(&x) || is_poison(&y) {
            return Ok(Value::Poison);
        }
        let (Some((a, fmt)), Some((b, _))) = (real_parts(&x), real_parts(&y)) else {
            return Err(path_stop(format!(
                "`{}` on a lane that is not a number (a comparison mask)",
                self.at.operation.trim_start_matches("call ")
            )));
        };
        let zero = || sym::real_i(0);
        let e = match op {
            SseCall::MinMax { min: true, .. } => sym::ite(sym::lt(a.clone(), b.clone()), a, b),
            SseCall::MinMax { min: false, .. } => sym::ite(sym::gt(a.clone(), b.clone()), a, b),
            SseCall::Rsqrt { .. } => {
                st.assume(sym::gt(a.clone(), zero()));
                let root = sym::math(MathFn::Sqrt, fmt, vec![a]);
                sym::arith(ArithOp::Div, fmt, sym::real_i(1), root)
            }
            SseCall::Rcp { .. } => {
                st.assume(sym::ne(a.clone(), zero()));
                sym::arith(ArithOp::Div, fmt, sym::real_i(1), a)
            }
            SseCall::MoveMask => return Err(ModelError::internal("movmsk as a lane operation")),
        };
        Ok(Value::Real { e, fmt })
    }
}

/// `movmskps`/`movmskpd`: bit i is lane i's sign, as a 32-bit integer.
fn move_mask(lanes: &[Value]) -> Result<Value, ModelError> {
    let mut sum = sym::int_i(0);
    for (i, lane) in lanes.iter().enumerate() {
        let negative = match lane {
            Value::Int { e, .. } => sym::lt(e.clone(), sym::int_i(0)),
            Value::Real { e, .. } => sym::lt(e.clone(), sym::real_i(0)),
            Value::Bool(c) => c.clone(),
            Value::Poison => return Ok(Value::Poison),
            _ => return Err(path_stop("the sign bits of lanes foe does not follow")),
        };
        let bit = sym::ite(negative, sym::int_i(1 << i), sym::int_i(0));
        sum = sym::int_arith(IntOp::Add, 32, sum, bit);
    }
    Ok(Value::Int { e: sum, bits: 32 })
}
