//! Instructions whose results follow from the pure rules of `values.rs`: `fneg`, comparisons, integer
//! arithmetic and casts, `bitcast`, `select`, and the vector and aggregate instructions. None emits a query or
//! touches memory.

use super::Executor;
use crate::model::error::ModelError;
use crate::model::llvm::Ty;
use crate::model::llvm::{LLVMOpcode, LLVMRealPredicate, LLVMTypeKind, Val};
use crate::model::memory::Value;
use crate::model::state::{path_stop, State};
use crate::model::values::{
    bitcast, const_index, fcmp, fcmp_non_finite, fp_format, icmp, insert_value, int_binary,
    int_cast, int_to_fp, map1, no_mask_lanes, non_finite_operand, real_parts, scalar_bits, select,
};
use crate::model::Cancelling;
use crate::sym::{self, ArithOp};

impl<'m> Executor<'m> {
    pub(super) fn symex_fneg(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let a = self.operand(st, inst, 0)?;
        map1(a, &mut |a| match a {
            Value::Real { e, fmt } => Ok(Value::Real {
                e: sym::neg(e),
                fmt,
            }),
            other => {
                no_mask_lanes(&[&other])?;
                Err(ModelError::internal(format!("fneg of {other:?}")))
            }
        })
    }

    /// `fcmp` with predicate `pred` (lane by lane); a comparison with an infinite or NaN constant is decided
    /// without it. Where its sides can nearly cancel, that is asked for (a candidate of the aimed search).
    pub(super) fn symex_fcmp(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        pred: LLVMRealPredicate,
    ) -> Result<Value, ModelError> {
        if let Some((side, c)) = non_finite_operand(inst) {
            let other = self.operand(st, inst, 1 - side)?;
            return map1(other, &mut |x| fcmp_non_finite(pred, x, side, c));
        }
        let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
        self.lanes2(st, a, b, &mut |this, st, a, b| {
            // Where the two sides are a few floats apart, the builds' last-bit differences decide the comparison.
            if let (Some((x, fmt)), Some((y, _))) = (real_parts(&a), real_parts(&b)) {
                let bits = fmt.precision() as u32 - 2;
                let kind = (Cancelling::Comparison, ArithOp::Sub);
                this.emit_cancellation(st, kind, (&x, &y), bits);
            }
            fcmp(pred, a, b)
        })
    }

    pub(super) fn symex_icmp(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let pred = inst.icmp_predicate();
        let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
        self.lanes2(st, a, b, &mut |_, _, a, b| icmp(pred, a, b))
    }

    /// Integer arithmetic and bitwise operations (lane by lane).
    pub(super) fn symex_int_binary(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        opcode: LLVMOpcode,
    ) -> Result<Value, ModelError> {
        let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
        self.lanes2(st, a, b, &mut |_, _, a, b| int_binary(opcode, a, b))
    }

    /// `trunc`, `zext`, `sext`.
    pub(super) fn symex_int_cast(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        opcode: LLVMOpcode,
    ) -> Result<Value, ModelError> {
        let to = scalar_bits(inst.ty())?;
        let a = self.operand(st, inst, 0)?;
        map1(a, &mut |a| int_cast(opcode, a, to))
    }

    /// `sitofp` (`signed`) and `uitofp`.
    pub(super) fn symex_int_to_fp(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        signed: bool,
    ) -> Result<Value, ModelError> {
        let fmt = fp_format(inst.ty()).ok_or_else(|| {
            ModelError::Unsupported(format!("converts to `{}`", inst.ty().text()))
        })?;
        let a = self.operand(st, inst, 0)?;
        map1(a, &mut |a| int_to_fp(a, fmt, signed))
    }

    /// `bitcast` and `addrspacecast`: the value itself where only the pointer or type name changes.
    pub(super) fn symex_bitcast(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let from = inst
            .operand(0)
            .ok_or_else(|| ModelError::internal("cast without operand"))?
            .ty();
        let to = inst.ty();
        let a = self.operand(st, inst, 0)?;
        let lanes = |t: Ty<'_>| {
            (t.kind() == LLVMTypeKind::LLVMVectorTypeKind).then(|| t.vector_len() as usize)
        };
        if from == to
            || (from.kind() == LLVMTypeKind::LLVMPointerTypeKind && to.kind() == from.kind())
        {
            Ok(a)
        } else if lanes(from) == lanes(to) {
            map1(a, &mut |a| bitcast(a, to))
        } else {
            pack_bools(a, to)
        }
    }

    pub(super) fn symex_select(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let c = self.operand(st, inst, 0)?;
        let (a, b) = (self.operand(st, inst, 1)?, self.operand(st, inst, 2)?);
        select(c, a, b)
    }

    pub(super) fn symex_extract_element(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let v = self.operand(st, inst, 0)?;
        let i = const_index(&self.operand(st, inst, 1)?)?;
        Ok(match v {
            Value::Lanes(lanes) => lanes.get(i).cloned().unwrap_or(Value::Poison),
            _ => Value::Poison,
        })
    }

    pub(super) fn symex_insert_element(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let n = inst.ty().vector_len() as usize;
        let v = self.operand(st, inst, 0)?;
        let x = self.operand(st, inst, 1)?;
        let i = const_index(&self.operand(st, inst, 2)?)?;
        let mut lanes = match v {
            Value::Lanes(l) => l,
            _ => vec![Value::Poison; n],
        };
        if i < lanes.len() {
            lanes[i] = x;
        }
        Ok(Value::Lanes(lanes))
    }

    pub(super) fn symex_shuffle_vector(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let a = self.operand(st, inst, 0)?;
        let b = self.operand(st, inst, 1)?;
        let width = inst
            .operand(0)
            .map(|o| o.ty().vector_len() as usize)
            .unwrap_or(0);
        let lanes_of = |v: Value| match v {
            Value::Lanes(l) => l,
            _ => vec![Value::Poison; width],
        };
        let (a, b) = (lanes_of(a), lanes_of(b));
        Ok(Value::Lanes(
            inst.shuffle_mask()
                .into_iter()
                .map(|m| match m {
                    Some(m) if (m as usize) < width => {
                        a.get(m as usize).cloned().unwrap_or(Value::Poison)
                    }
                    Some(m) => b.get(m as usize - width).cloned().unwrap_or(Value::Poison),
                    None => Value::Poison,
                })
                .collect(),
        ))
    }

    pub(super) fn symex_extract_value(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let mut v = self.operand(st, inst, 0)?;
        for i in inst.indices() {
            v = match v {
                Value::Fields(f) => f.get(i as usize).cloned().unwrap_or(Value::Poison),
                _ => Value::Poison,
            };
        }
        Ok(v)
    }

    pub(super) fn symex_insert_value(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let agg = self.operand(st, inst, 0)?;
        let x = self.operand(st, inst, 1)?;
        insert_value(agg, inst.ty(), &inst.indices(), x, self.layout)
    }
}

/// A bitcast that changes the number of lanes: a vector of `i1` packed into an integer (`bitcast <4 x i1> to i4`,
/// how `-O2` reads `_mm_movemask_ps` of a comparison), lane i as bit i; any other reshaping ends the path.
fn pack_bools(a: Value, to: Ty<'_>) -> Result<Value, ModelError> {
    let bits = match (&a, to.kind()) {
        (Value::Lanes(l), LLVMTypeKind::LLVMIntegerTypeKind)
            if to.int_width() as usize == l.len() =>
        {
            to.int_width()
        }
        (Value::Poison, _) => return Ok(Value::Poison),
        _ => {
            return Err(path_stop(format!(
                "a vector reinterpreted as `{}` (bitcast to another shape)",
                to.text()
            )))
        }
    };
    let Value::Lanes(lanes) = a else {
        return Ok(Value::Poison);
    };
    let mut sum = sym::int_i(0);
    for (i, lane) in lanes.into_iter().enumerate() {
        let Value::Bool(c) = lane else {
            return Err(path_stop(
                "a vector reinterpreted as an integer (bitcast to another shape)",
            ));
        };
        let bit = sym::int(num_bigint::BigInt::from(1u64) << i);
        sum = sym::int_arith(sym::IntOp::Add, 64, sum, sym::ite(c, bit, sym::int_i(0)));
    }
    // Held in signed form, as every integer term.
    let e = match sum.as_int() {
        Some(v) => sym::int(sym::wrap_signed(v, bits)),
        None if bits >= 64 => sum,
        None => sym::ite(
            sym::ge(
                sum.clone(),
                sym::int(num_bigint::BigInt::from(1u64) << (bits - 1)),
            ),
            sym::int_arith(
                sym::IntOp::Sub,
                64,
                sum.clone(),
                sym::int(num_bigint::BigInt::from(1u64) << bits),
            ),
            sum,
        ),
    };
    Ok(Value::Int { e, bits })
}
