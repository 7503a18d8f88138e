//! Pure value rules: how integer arithmetic, comparisons, casts, `select` and aggregates act on symbolic
//! values, and the constant folding the executor needs. Nothing here knows the executor.

use super::bits::{self, BitOp};
use super::error::ModelError;
use super::llvm::{LLVMIntPredicate, LLVMOpcode, LLVMRealPredicate, LLVMTypeKind, Layout, Ty, Val};
use super::memory::{flatten_type, unflatten, Scalar, Value};
use super::state::path_stop;
use crate::round::FloatFormat;
use crate::sym::{self, Expr, IntOp};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};

/// The parts of a real value.
pub(super) fn real_parts(v: &Value) -> Option<(Expr, FloatFormat)> {
    match v {
        Value::Real { e, fmt } => Some((e.clone(), *fmt)),
        _ => None,
    }
}

pub(super) fn is_poison(v: &Value) -> bool {
    matches!(v, Value::Poison)
}

/// The float format of a scalar or vector type.
pub(super) fn fp_format(ty: Ty<'_>) -> Option<FloatFormat> {
    match ty.kind() {
        LLVMTypeKind::LLVMDoubleTypeKind => Some(FloatFormat::Double),
        LLVMTypeKind::LLVMFloatTypeKind => Some(FloatFormat::Single),
        LLVMTypeKind::LLVMVectorTypeKind => fp_format(ty.element()),
        _ => None,
    }
}

/// The width of an integer (or integer vector) type.
pub(super) fn scalar_bits(ty: Ty<'_>) -> Result<u32, ModelError> {
    let t = if ty.kind() == LLVMTypeKind::LLVMVectorTypeKind {
        ty.element()
    } else {
        ty
    };
    match Scalar::of(t)? {
        Scalar::Int(bits) => Ok(bits),
        _ => Err(ModelError::internal(format!(
            "expected an integer type, found `{}`",
            ty.text()
        ))),
    }
}

pub(super) fn map1(
    a: Value,
    f: &mut dyn FnMut(Value) -> Result<Value, ModelError>,
) -> Result<Value, ModelError> {
    match a {
        Value::Lanes(xs) => Ok(Value::Lanes(
            xs.into_iter().map(&mut *f).collect::<Result<_, _>>()?,
        )),
        Value::Poison => Ok(Value::Poison),
        x => f(x),
    }
}

pub(super) fn const_index(v: &Value) -> Result<usize, ModelError> {
    match v {
        Value::Int { e, .. } => sym::const_i64(e).and_then(|i| usize::try_from(i).ok()),
        _ => None,
    }
    .ok_or_else(|| ModelError::unsupported("selects a vector lane with a symbolic index"))
}

/// Ends the path where a float operation meets a float lane that holds a comparison mask's bits (`bits.rs`): all
/// ones is a NaN, all zeros `+0`, not a number foe follows.
pub(super) fn no_mask_lanes(args: &[&Value]) -> Result<(), ModelError> {
    if args.iter().any(|v| matches!(v, Value::Int { .. })) {
        return Err(path_stop(
            "arithmetic on a comparison mask read as a float (a NaN)",
        ));
    }
    Ok(())
}

pub(super) fn fcmp(pred: LLVMRealPredicate, a: Value, b: Value) -> Result<Value, ModelError> {
    use LLVMRealPredicate::*;
    no_mask_lanes(&[&a, &b])?;
    let (Some((x, _)), Some((y, _))) = (real_parts(&a), real_parts(&b)) else {
        return Ok(Value::Poison);
    };
    // Values are finite reals: ordered and unordered predicates agree, `uno` never holds.
    let c = match pred {
        LLVMRealPredicateFalse | LLVMRealUNO => sym::fals(),
        LLVMRealPredicateTrue | LLVMRealORD => sym::tru(),
        LLVMRealOEQ | LLVMRealUEQ => sym::eq(x, y),
        LLVMRealONE | LLVMRealUNE => sym::ne(x, y),
        LLVMRealOGT | LLVMRealUGT => sym::gt(x, y),
        LLVMRealOGE | LLVMRealUGE => sym::ge(x, y),
        LLVMRealOLT | LLVMRealULT => sym::lt(x, y),
        LLVMRealOLE | LLVMRealULE => sym::le(x, y),
    };
    Ok(Value::Bool(c))
}

/// The operand (0 or 1) of an `fcmp` that is an infinite or NaN constant, and its value.
pub(super) fn non_finite_operand(inst: Val<'_>) -> Option<(u32, f64)> {
    (0..2).find_map(|i| {
        let v = inst.operand(i)?;
        (v.is_constant_fp() && !v.const_fp().is_finite()).then(|| (i, v.const_fp()))
    })
}

/// `fcmp` of a finite value `x` with the infinity or NaN `c` (operand `side`): a constant, since NaN is unordered
/// with everything and every finite value lies strictly between −∞ and +∞.
pub(super) fn fcmp_non_finite(
    pred: LLVMRealPredicate,
    x: Value,
    side: u32,
    c: f64,
) -> Result<Value, ModelError> {
    use LLVMRealPredicate::*;
    if matches!(x, Value::Poison) {
        return Ok(Value::Poison);
    }
    let holds = if c.is_nan() {
        matches!(
            pred,
            LLVMRealPredicateTrue
                | LLVMRealUNO
                | LLVMRealUEQ
                | LLVMRealUNE
                | LLVMRealUGT
                | LLVMRealUGE
                | LLVMRealULT
                | LLVMRealULE
        )
    } else {
        // Whether the left operand is the smaller one.
        let left_smaller = (side == 1) == (c > 0.0);
        match pred {
            LLVMRealPredicateFalse | LLVMRealUNO | LLVMRealOEQ | LLVMRealUEQ => false,
            LLVMRealPredicateTrue | LLVMRealORD | LLVMRealONE | LLVMRealUNE => true,
            LLVMRealOLT | LLVMRealULT | LLVMRealOLE | LLVMRealULE => left_smaller,
            LLVMRealOGT | LLVMRealUGT | LLVMRealOGE | LLVMRealUGE => !left_smaller,
        }
    };
    Ok(Value::Bool(sym::boolean(holds)))
}

/// An integer operand in signed form with its width (`i1` as 0/−1).
pub(super) fn int_parts(v: &Value) -> Option<(Expr, u32)> {
    match v {
        Value::Int { e, bits } => Some((e.clone(), *bits)),
        Value::Bool(b) => Some((sym::ite(b.clone(), sym::int_i(-1), sym::int_i(0)), 1)),
        _ => None,
    }
}

pub(super) fn icmp(pred: LLVMIntPredicate, a: Value, b: Value) -> Result<Value, ModelError> {
    use LLVMIntPredicate::*;
    if let (Value::Ptr(p), Value::Ptr(q)) = (&a, &b) {
        let same = p.region == q.region;
        let c = match pred {
            LLVMIntEQ => same && p.offset == q.offset,
            LLVMIntNE => !(same && p.offset == q.offset),
            _ if !same => {
                return Err(ModelError::unsupported(
                    "compares pointers into different objects",
                ))
            }
            LLVMIntULT | LLVMIntSLT => p.offset < q.offset,
            LLVMIntULE | LLVMIntSLE => p.offset <= q.offset,
            LLVMIntUGT | LLVMIntSGT => p.offset > q.offset,
            LLVMIntUGE | LLVMIntSGE => p.offset >= q.offset,
        };
        return Ok(Value::Bool(sym::boolean(c)));
    }
    let (Some((x, bits)), Some((y, _))) = (int_parts(&a), int_parts(&b)) else {
        return Ok(Value::Poison);
    };
    let u = |e: Expr| sym::unsigned(bits, e);
    let c = match pred {
        LLVMIntEQ => sym::eq(x, y),
        LLVMIntNE => sym::ne(x, y),
        LLVMIntSLT => sym::lt(x, y),
        LLVMIntSLE => sym::le(x, y),
        LLVMIntSGT => sym::gt(x, y),
        LLVMIntSGE => sym::ge(x, y),
        LLVMIntULT => sym::lt(u(x), u(y)),
        LLVMIntULE => sym::le(u(x), u(y)),
        LLVMIntUGT => sym::gt(u(x), u(y)),
        LLVMIntUGE => sym::ge(u(x), u(y)),
    };
    Ok(Value::Bool(c))
}

/// Integer arithmetic and bitwise operations: exact over constants, modelled or opaque otherwise.
pub(super) fn int_binary(opcode: LLVMOpcode, a: Value, b: Value) -> Result<Value, ModelError> {
    use LLVMOpcode::*;
    if let (Value::Bool(x), Value::Bool(y)) = (&a, &b) {
        let (x, y) = (x.clone(), y.clone());
        return Ok(Value::Bool(match opcode {
            LLVMAnd | LLVMMul => sym::and([x, y]),
            LLVMOr => sym::or([x, y]),
            LLVMXor | LLVMAdd | LLVMSub => sym::ne(
                sym::ite(x, sym::int_i(1), sym::int_i(0)),
                sym::ite(y, sym::int_i(1), sym::int_i(0)),
            ),
            _ => {
                return match (x.as_bool(), y.as_bool()) {
                    (Some(_), Some(_)) => {
                        int_binary(opcode, bool_as_int(&x), bool_as_int(&y)).map(|v| match v {
                            Value::Int { e, .. } => Value::Bool(sym::ne(e, sym::int_i(0))),
                            other => other,
                        })
                    }
                    _ => Ok(Value::Bool(sym::ne(
                        sym::opaque(opcode_name(opcode), 1, vec![bool_int(&x), bool_int(&y)]),
                        sym::int_i(0),
                    ))),
                }
            }
        }));
    }
    let (Value::Int { e: x, bits }, Value::Int { e: y, .. }) = (&a, &b) else {
        if is_poison(&a) || is_poison(&b) {
            return Ok(Value::Poison);
        }
        return Err(ModelError::internal(format!(
            "integer operation on {a:?} and {b:?}"
        )));
    };
    let bits = *bits;
    let (x, y) = (x.clone(), y.clone());
    if let (Some(p), Some(q)) = (x.as_int(), y.as_int()) {
        return Ok(match const_int_op(opcode, p, q, bits) {
            Some(r) => Value::Int {
                e: sym::int(sym::wrap_signed(&r, bits)),
                bits,
            },
            None => Value::Poison,
        });
    }
    let bit_op = match opcode {
        LLVMAnd => Some(BitOp::And),
        LLVMOr => Some(BitOp::Or),
        LLVMXor => Some(BitOp::Xor),
        _ => None,
    };
    // Masks and sign bits of float lanes read as integers (`_mm_and_ps`, `_mm_xor_ps`): see `bits.rs`.
    if let Some(e) = bit_op.and_then(|op| bits::bitwise(op, bits, &x, &y)) {
        return Ok(Value::Int { e, bits });
    }
    let e = match opcode {
        LLVMAdd => sym::int_arith(IntOp::Add, bits, x, y),
        LLVMSub => sym::int_arith(IntOp::Sub, bits, x, y),
        LLVMMul => sym::int_arith(IntOp::Mul, bits, x, y),
        LLVMLShr => y
            .as_int()
            .and_then(|k| k.to_u32())
            .and_then(|k| bits::pack_shift_right(&x, k, bits))
            .unwrap_or_else(|| sym::opaque("lshr", bits, vec![x, y])),
        LLVMShl => match y.as_int().and_then(|k| k.to_u32()).filter(|k| *k < bits) {
            Some(k) => sym::int_arith(IntOp::Mul, bits, x, sym::int(BigInt::one() << k as usize)),
            None => sym::opaque("shl", bits, vec![x, y]),
        },
        LLVMAnd => match (x.as_int(), y.as_int()) {
            (_, Some(m)) => sym::and_mask(bits, x.clone(), m),
            (Some(m), _) => sym::and_mask(bits, y.clone(), m),
            _ => None,
        }
        .unwrap_or_else(|| sym::opaque("and", bits, vec![x, y])),
        _ => sym::opaque(opcode_name(opcode), bits, vec![x, y]),
    };
    Ok(Value::Int { e, bits })
}

fn bool_int(b: &Expr) -> Expr {
    sym::ite(b.clone(), sym::int_i(-1), sym::int_i(0))
}

fn bool_as_int(b: &Expr) -> Value {
    Value::Int {
        e: bool_int(b),
        bits: 1,
    }
}

/// An integer operation over constants (signed form in, unwrapped result out); `None` is poison.
fn const_int_op(opcode: LLVMOpcode, p: &BigInt, q: &BigInt, bits: u32) -> Option<BigInt> {
    use LLVMOpcode::*;
    let up = sym::to_unsigned_value(p, bits);
    let uq = sym::to_unsigned_value(q, bits);
    let shift = || uq.to_u32().filter(|k| *k < bits);
    Some(match opcode {
        LLVMAdd => p + q,
        LLVMSub => p - q,
        LLVMMul => p * q,
        LLVMSDiv if !q.is_zero() => p / q,
        LLVMSRem if !q.is_zero() => p % q,
        LLVMUDiv if !uq.is_zero() => &up / &uq,
        LLVMURem if !uq.is_zero() => &up % &uq,
        LLVMShl => up << shift()? as usize,
        LLVMLShr => up >> shift()? as usize,
        LLVMAShr => {
            let k = shift()?;
            // Floor division by 2^k is an arithmetic shift.
            let d = BigInt::one() << k as usize;
            let (q, r) = (p / &d, p % &d);
            if r.is_negative() {
                q - 1
            } else {
                q
            }
        }
        LLVMAnd => up & uq,
        LLVMOr => up | uq,
        LLVMXor => up ^ uq,
        _ => return None,
    })
}

pub(super) fn int_cast(opcode: LLVMOpcode, a: Value, to: u32) -> Result<Value, ModelError> {
    use LLVMOpcode::*;
    let as_value = |e: Expr| {
        if to == 1 {
            Value::Bool(sym::ne(e, sym::int_i(0)))
        } else {
            Value::Int { e, bits: to }
        }
    };
    match (opcode, a) {
        (LLVMZExt, Value::Bool(b)) => Ok(Value::Int {
            e: sym::ite(b, sym::int_i(1), sym::int_i(0)),
            bits: to,
        }),
        (LLVMSExt, Value::Bool(b)) => Ok(Value::Int {
            e: bool_int(&b),
            bits: to,
        }),
        (LLVMZExt, Value::Int { e, bits }) => Ok(Value::Int {
            e: sym::unsigned(bits, e),
            bits: to,
        }),
        (LLVMSExt, Value::Int { e, .. }) => Ok(Value::Int { e, bits: to }),
        (LLVMTrunc, Value::Int { e, .. }) => Ok(match e.as_int() {
            Some(v) => as_value(sym::int(sym::wrap_signed(v, to))),
            None => as_value(
                bits::pack_truncate(&e, to).unwrap_or_else(|| sym::opaque("trunc", to, vec![e])),
            ),
        }),
        (LLVMTrunc, Value::Bool(b)) => Ok(Value::Bool(b)),
        (_, Value::Poison) => Ok(Value::Poison),
        (_, other) => Err(ModelError::internal(format!("integer cast of {other:?}"))),
    }
}

/// A bitcast between a float and an integer of the same width: exact for constants; a symbolic float read as
/// bits is the opaque integer `bitcast(x)`; an integer read as a float is the float it holds where `bits.rs` can
/// tell (the bits of a float, a select of such by a comparison mask), a comparison mask stays the integer it is (a
/// float lane holding a mask, as `_mm_cmpgt_ps` returns it), and any other integer ends the path.
pub(super) fn bitcast(a: Value, to: Ty<'_>) -> Result<Value, ModelError> {
    let to_scalar = if to.kind() == LLVMTypeKind::LLVMVectorTypeKind {
        to.element()
    } else {
        to
    };
    let unsupported =
        || ModelError::Unsupported(format!("reinterprets bits as `{}` (bitcast)", to.text()));
    match (a, Scalar::of(to_scalar).map_err(|_| unsupported())?) {
        (Value::Real { e, fmt }, Scalar::Int(bits))
            if bits == if fmt == FloatFormat::Double { 64 } else { 32 } =>
        {
            Ok(Value::Int {
                e: bits::bits_of_float(e, bits),
                bits,
            })
        }
        // A float lane that holds a comparison mask, read back as the integer it is.
        (Value::Int { e, bits }, Scalar::Int(to_bits)) if to_bits == bits => {
            Ok(Value::Int { e, bits })
        }
        (Value::Int { e, bits }, Scalar::Float(fmt))
            if bits == if fmt == FloatFormat::Double { 64 } else { 32 } =>
        {
            let v = match (sym::const_i64(&e), fmt) {
                (Some(b), FloatFormat::Double) => f64::from_bits(b as u64),
                (Some(b), FloatFormat::Single) => f32::from_bits(b as u32) as f64,
                (None, _) => {
                    if let Some(x) = bits::float_of_bits(&e, bits) {
                        return Ok(Value::Real { e: x, fmt });
                    }
                    if bits::is_mask(&e) {
                        return Ok(Value::Int { e, bits });
                    }
                    // Not the bits of a float, nor a select of them by a comparison mask.
                    return Err(path_stop("computed bits read as a floating-point value"));
                }
            };
            if sym::const_i64(&e) == Some(-1)
                || (bits == 32 && sym::const_i64(&e) == Some(0xffff_ffff))
            {
                // All ones: a lane of a comparison mask that is always true.
                return Ok(Value::Int { e, bits });
            }
            if !v.is_finite() {
                return Err(path_stop("an infinity or NaN built from its bits"));
            }
            Ok(Value::Real {
                e: sym::real_f64(v),
                fmt,
            })
        }
        (Value::Poison, _) => Ok(Value::Poison),
        _ => Err(unsupported()),
    }
}

pub(super) fn int_to_fp(a: Value, fmt: FloatFormat, signed: bool) -> Result<Value, ModelError> {
    let e = match a {
        Value::Bool(b) => sym::ite(b, sym::int_i(if signed { -1 } else { 1 }), sym::int_i(0)),
        Value::Int { e, bits } => {
            if signed {
                e
            } else {
                sym::unsigned(bits, e)
            }
        }
        Value::Poison => return Ok(Value::Poison),
        other => return Err(ModelError::internal(format!("int-to-float of {other:?}"))),
    };
    Ok(Value::Real {
        e: sym::convert(fmt, e),
        fmt,
    })
}

pub(super) fn select(c: Value, a: Value, b: Value) -> Result<Value, ModelError> {
    match (c, a, b) {
        (Value::Lanes(cs), Value::Lanes(xs), Value::Lanes(ys)) => Ok(Value::Lanes(
            cs.into_iter()
                .zip(xs)
                .zip(ys)
                .map(|((c, x), y)| select(c, x, y))
                .collect::<Result<_, _>>()?,
        )),
        (Value::Bool(c), a, b) => match c.as_bool() {
            Some(true) => Ok(a),
            Some(false) => Ok(b),
            None => merge(&c, a, b),
        },
        (Value::Poison, _, _) => Ok(Value::Poison),
        (c, _, _) => Err(ModelError::internal(format!("select on {c:?}"))),
    }
}

/// `if c then a else b` of two values of the same type.
fn merge(c: &Expr, a: Value, b: Value) -> Result<Value, ModelError> {
    Ok(match (a, b) {
        (Value::Real { e: x, fmt }, Value::Real { e: y, .. }) => Value::Real {
            e: sym::ite(c.clone(), x, y),
            fmt,
        },
        (Value::Int { e: x, bits }, Value::Int { e: y, .. }) => Value::Int {
            e: sym::ite(c.clone(), x, y),
            bits,
        },
        (Value::Bool(x), Value::Bool(y)) => Value::Bool(sym::ite(c.clone(), x, y)),
        (Value::Ptr(p), Value::Ptr(q)) if p == q => Value::Ptr(p),
        (Value::Ptr(_), Value::Ptr(_)) => {
            return Err(ModelError::unsupported(
                "selects between pointers on a symbolic condition",
            ))
        }
        (Value::Lanes(xs), Value::Lanes(ys)) => Value::Lanes(
            xs.into_iter()
                .zip(ys)
                .map(|(x, y)| merge(c, x, y))
                .collect::<Result<_, _>>()?,
        ),
        (Value::Fields(xs), Value::Fields(ys)) => Value::Fields(
            xs.into_iter()
                .zip(ys)
                .map(|(x, y)| merge(c, x, y))
                .collect::<Result<_, _>>()?,
        ),
        // A float and a float lane that holds a comparison mask's bits (`bits.rs`): a choice between bits.
        (Value::Real { e: x, fmt }, Value::Int { e: y, bits })
            if bits == if fmt == FloatFormat::Double { 64 } else { 32 } =>
        {
            Value::Int {
                e: sym::ite(c.clone(), bits::bits_of_float(x, bits), y),
                bits,
            }
        }
        (Value::Int { e: x, bits }, Value::Real { e: y, fmt })
            if bits == if fmt == FloatFormat::Double { 64 } else { 32 } =>
        {
            Value::Int {
                e: sym::ite(c.clone(), x, bits::bits_of_float(y, bits)),
                bits,
            }
        }
        // Choosing poison on one side: the program's value is the other one whenever it is defined.
        (Value::Poison, other) | (other, Value::Poison) => other,
        (x, y) => {
            return Err(ModelError::internal(format!(
                "select between {x:?} and {y:?}"
            )))
        }
    })
}

/// `insertvalue agg, x, indices`, materialising an undefined aggregate from its type.
pub(super) fn insert_value(
    agg: Value,
    ty: Ty<'_>,
    indices: &[u32],
    x: Value,
    layout: Layout<'_>,
) -> Result<Value, ModelError> {
    let Some((&first, rest)) = indices.split_first() else {
        return Ok(x);
    };
    let mut fields = match agg {
        Value::Fields(f) => f,
        _ => {
            let n = flatten_type(ty, layout)?.len();
            match unflatten(ty, &mut vec![Value::Poison; n].into_iter())? {
                Value::Fields(f) => f,
                _ => return Err(ModelError::internal("insertvalue into a non-aggregate")),
            }
        }
    };
    let field_ty = match ty.kind() {
        LLVMTypeKind::LLVMStructTypeKind => *ty
            .struct_fields()
            .get(first as usize)
            .ok_or_else(|| ModelError::internal("bad field"))?,
        _ => ty.element(),
    };
    let slot = fields
        .get_mut(first as usize)
        .ok_or_else(|| ModelError::internal("insertvalue index out of range"))?;
    *slot = insert_value(
        std::mem::replace(slot, Value::Poison),
        field_ty,
        rest,
        x,
        layout,
    )?;
    Ok(Value::Fields(fields))
}

/// The exact `fmod` of two constants (the result of fmod is always exact).
pub(super) fn const_fmod(x: &BigRational, y: &BigRational) -> Option<BigRational> {
    if y.is_zero() {
        return None;
    }
    let q = (x / y).trunc();
    Some(x - q * y)
}

pub(super) fn opcode_name(op: LLVMOpcode) -> &'static str {
    use LLVMOpcode::*;
    match op {
        LLVMRet => "ret",
        LLVMBr => "br",
        LLVMSwitch => "switch",
        LLVMIndirectBr => "indirectbr",
        LLVMInvoke => "invoke",
        LLVMUnreachable => "unreachable",
        LLVMCallBr => "callbr",
        LLVMFNeg => "fneg",
        LLVMAdd => "add",
        LLVMFAdd => "fadd",
        LLVMSub => "sub",
        LLVMFSub => "fsub",
        LLVMMul => "mul",
        LLVMFMul => "fmul",
        LLVMUDiv => "udiv",
        LLVMSDiv => "sdiv",
        LLVMFDiv => "fdiv",
        LLVMURem => "urem",
        LLVMSRem => "srem",
        LLVMFRem => "frem",
        LLVMShl => "shl",
        LLVMLShr => "lshr",
        LLVMAShr => "ashr",
        LLVMAnd => "and",
        LLVMOr => "or",
        LLVMXor => "xor",
        LLVMAlloca => "alloca",
        LLVMLoad => "load",
        LLVMStore => "store",
        LLVMGetElementPtr => "getelementptr",
        LLVMTrunc => "trunc",
        LLVMZExt => "zext",
        LLVMSExt => "sext",
        LLVMFPToUI => "fptoui",
        LLVMFPToSI => "fptosi",
        LLVMUIToFP => "uitofp",
        LLVMSIToFP => "sitofp",
        LLVMFPTrunc => "fptrunc",
        LLVMFPExt => "fpext",
        LLVMPtrToInt => "ptrtoint",
        LLVMIntToPtr => "inttoptr",
        LLVMBitCast => "bitcast",
        LLVMAddrSpaceCast => "addrspacecast",
        LLVMICmp => "icmp",
        LLVMFCmp => "fcmp",
        LLVMPHI => "phi",
        LLVMCall => "call",
        LLVMSelect => "select",
        LLVMUserOp1 | LLVMUserOp2 => "user-op",
        LLVMVAArg => "va_arg",
        LLVMExtractElement => "extractelement",
        LLVMInsertElement => "insertelement",
        LLVMShuffleVector => "shufflevector",
        LLVMExtractValue => "extractvalue",
        LLVMInsertValue => "insertvalue",
        LLVMFreeze => "freeze",
        LLVMFence => "fence",
        LLVMAtomicCmpXchg => "cmpxchg",
        LLVMAtomicRMW => "atomicrmw",
        LLVMResume => "resume",
        LLVMLandingPad => "landingpad",
        LLVMCleanupRet => "cleanupret",
        LLVMCatchRet => "catchret",
        LLVMCatchPad => "catchpad",
        LLVMCleanupPad => "cleanuppad",
        LLVMCatchSwitch => "catchswitch",
    }
}

/// 2ⁿ as an exact rational.
pub(super) fn pow2(n: i64) -> num_rational::BigRational {
    let p = num_bigint::BigInt::from(1) << n.unsigned_abs();
    if n >= 0 {
        num_rational::BigRational::from_integer(p)
    } else {
        num_rational::BigRational::new(1.into(), p)
    }
}

/// The smallest normal magnitude of `fmt`.
pub(super) fn min_normal(fmt: FloatFormat) -> Expr {
    sym::real(pow2(match fmt {
        FloatFormat::Double => -1022,
        FloatFormat::Single => -126,
    }))
}

/// `frexp` of a finite value: (m, e) with x = m·2ᵉ and 0.5 ≤ |m| < 1 (0 for 0).
pub(super) fn frexp_f64(x: f64) -> (f64, i32) {
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
pub(super) fn nextafter_f64(x: f64, y: f64) -> f64 {
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
