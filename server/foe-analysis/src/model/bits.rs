//! Bit layouts the model reads back: floating-point lanes read as bits, and the integer fields of a small struct
//! packed into one integer argument.
//!
//! Floating-point lanes read as bits (`bitcast <4 x float> to <4 x i32>`), as SSE code uses them: comparison masks
//! (`_mm_cmpgt_ps` leaves all ones or all zeros in each lane) that pick lanes with `and`, `andnot` and `or`
//! (`_mm_and_ps`, `_mm_andnot_ps`, `_mm_or_ps`, a blend), and the sign bit flipped or cleared (`_mm_xor_ps` with
//! `-0.0` negates, `and` with `0x7fffffff` is the absolute value).
//!
//! A float read as bits is the opaque integer `bitcast(x)`; a mask is a select of `-1` and `0`. Bitwise operations
//! distribute over selects, so a blend of `x` and `y` by the mask of `c` becomes `c ? bits(x) : bits(y)`, read back
//! as the float `c ? x : y` (select semantics). Anything else (two floats' bits combined, a mask read as a float and
//! used as a number) is not a value foe follows: the caller keeps the opaque integer, and reading it as a float
//! ends the path with a named reason.

use crate::sym::{self, Expr, Kind};
use num_bigint::BigInt;
use num_traits::{One, Zero};

/// The opaque operation of a float read as its bits.
pub(super) const BITCAST: &str = "bitcast";

/// How deep selects are followed (a blend of blends of blends).
const MAX_DEPTH: u32 = 8;

/// A bitwise operation on integers of one width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BitOp {
    And,
    Or,
    Xor,
}

/// The bits of the real term `x` of a `bits`-wide float: a constant's bits, a select of the bits of its branches
/// (so that a lane picked by a mask can be combined with another), else the opaque `bitcast(x)`.
pub(super) fn bits_of_float(x: Expr, bits: u32) -> Expr {
    bits_of_float_at(x, bits, 0)
}

fn bits_of_float_at(x: Expr, bits: u32, depth: u32) -> Expr {
    if let Some(q) = x.as_real() {
        let v = sym::const_f64(q);
        return match bits {
            64 => sym::int_i(v.to_bits() as i64),
            _ => sym::int_i((v as f32).to_bits() as i32 as i64),
        };
    }
    match x.kind() {
        Kind::Ite { c, a, b } if depth < MAX_DEPTH => sym::ite(
            c.clone(),
            bits_of_float_at(a.clone(), bits, depth + 1),
            bits_of_float_at(b.clone(), bits, depth + 1),
        ),
        _ => sym::opaque(BITCAST, bits, vec![x]),
    }
}

/// The float that the `bits`-wide integer term `e` holds: `x` for `bitcast(x)`, the float of a constant, `c ? x : y`
/// for a select of such; `None` when some branch is not a number (the all-ones of a mask is a NaN) or is bits foe
/// does not follow.
pub(super) fn float_of_bits(e: &Expr, bits: u32) -> Option<Expr> {
    float_of_bits_at(e, bits, 0)
}

fn float_of_bits_at(e: &Expr, bits: u32, depth: u32) -> Option<Expr> {
    if depth > MAX_DEPTH {
        return None;
    }
    match e.kind() {
        Kind::Opaque { op, bits: b, args } if op == BITCAST && *b == bits && args.len() == 1 => {
            Some(args[0].clone())
        }
        Kind::Ite { c, a, b } => Some(sym::ite(
            c.clone(),
            float_of_bits_at(a, bits, depth + 1)?,
            float_of_bits_at(b, bits, depth + 1)?,
        )),
        _ => {
            let v = sym::const_i64(e)?;
            let value = match bits {
                64 => f64::from_bits(v as u64),
                32 => f32::from_bits(v as u32) as f64,
                _ => return None,
            };
            value.is_finite().then(|| sym::real_f64(value))
        }
    }
}

/// Whether `e` is a comparison mask: a select whose leaves are all ones or all zeros.
pub(super) fn is_mask(e: &Expr) -> bool {
    match e.kind() {
        Kind::Ite { a, b, .. } => is_mask(a) && is_mask(b),
        _ => e
            .as_int()
            .is_some_and(|v| v.is_zero() || *v == -BigInt::one()),
    }
}

/// `x op y` on `bits`-wide integers (signed form) where a select (a mask) or the sign bit of a float's bits says
/// what it is; `None` for other operands.
pub(super) fn bitwise(op: BitOp, bits: u32, x: &Expr, y: &Expr) -> Option<Expr> {
    bitwise_at(op, bits, x, y, 0)
}

fn bitwise_at(op: BitOp, bits: u32, x: &Expr, y: &Expr, depth: u32) -> Option<Expr> {
    if depth > MAX_DEPTH {
        return None;
    }
    let all_ones = -BigInt::one();
    match (x.as_int(), y.as_int()) {
        (Some(p), Some(q)) => {
            let r = match op {
                BitOp::And => p & q,
                BitOp::Or => p | q,
                BitOp::Xor => p ^ q,
            };
            return Some(sym::int(sym::wrap_signed(&r, bits)));
        }
        (Some(p), None) => return with_constant(op, bits, p, y, &all_ones),
        (None, Some(q)) => return with_constant(op, bits, q, x, &all_ones),
        (None, None) => {}
    }
    if x == y {
        return Some(match op {
            BitOp::And | BitOp::Or => x.clone(),
            BitOp::Xor => sym::int_i(0),
        });
    }
    match (x.kind(), y.kind()) {
        (Kind::Ite { c, a, b }, Kind::Ite { c: d, a: e, b: f }) if c == d => Some(sym::ite(
            c.clone(),
            bitwise_at(op, bits, a, e, depth + 1)?,
            bitwise_at(op, bits, b, f, depth + 1)?,
        )),
        (Kind::Ite { c, a, b }, _) => Some(sym::ite(
            c.clone(),
            bitwise_at(op, bits, a, y, depth + 1)?,
            bitwise_at(op, bits, b, y, depth + 1)?,
        )),
        (_, Kind::Ite { .. }) => bitwise_at(op, bits, y, x, depth + 1),
        _ => None,
    }
}

/// `k op y` for the constant `k`: the identities of all ones and zero, and the sign-bit operations on a float's bits.
fn with_constant(op: BitOp, bits: u32, k: &BigInt, y: &Expr, all_ones: &BigInt) -> Option<Expr> {
    let sign = -(BigInt::one() << (bits as usize - 1));
    let magnitude = (BigInt::one() << (bits as usize - 1)) - 1;
    match op {
        BitOp::And if k.is_zero() => Some(sym::int_i(0)),
        BitOp::And if k == all_ones => Some(y.clone()),
        BitOp::Or if k.is_zero() => Some(y.clone()),
        BitOp::Or if k == all_ones => Some(sym::int_i(-1)),
        BitOp::Xor if k.is_zero() => Some(y.clone()),
        BitOp::Xor if *k == sign => float_bits(y, bits).map(|x| bits_of_float(sym::neg(x), bits)),
        BitOp::And if *k == magnitude => {
            float_bits(y, bits).map(|x| bits_of_float(sym::abs(x), bits))
        }
        _ => match y.kind() {
            // Through a select: `mask & k` (a mask of constants), `(c ? bits(x) : 0) ^ sign`.
            Kind::Ite { c, a, b } => Some(sym::ite(
                c.clone(),
                with_constant(op, bits, k, a, all_ones)?,
                with_constant(op, bits, k, b, all_ones)?,
            )),
            _ => {
                let v = y.as_int()?;
                bitwise(op, bits, &sym::int(k.clone()), &sym::int(v.clone()))
            }
        },
    }
}

/// The float `x` whose bits `e` is (`bitcast(x)` of the same width).
fn float_bits(e: &Expr, bits: u32) -> Option<Expr> {
    match e.kind() {
        Kind::Opaque { op, bits: b, args } if op == BITCAST && *b == bits && args.len() == 1 => {
            Some(args[0].clone())
        }
        _ => None,
    }
}

/// The opaque operation of integer fields packed into one integer ([`pack`]).
const PACK: &str = "pack";

/// The `bits`-wide integer that packs `fields` (term, bit offset, width in bits), as the x86-64 ABI passes
/// `struct { int start; uint16_t count; uint8_t kind, color; }` in one `i64`. It is read back field by field by a
/// shift right ([`pack_shift_right`]) and a truncation ([`pack_truncate`]), as SROA reads it; used otherwise it is
/// an integer foe does not follow.
pub(super) fn pack(fields: Vec<(Expr, u32, u32)>, bits: u32) -> Expr {
    let mut args = Vec::with_capacity(3 * fields.len());
    for (term, offset, width) in fields {
        args.extend([term, sym::int_i(offset as i64), sym::int_i(width as i64)]);
    }
    sym::opaque(PACK, bits, args)
}

/// The fields of a [`pack`]ed integer.
fn unpacked(e: &Expr) -> Option<Vec<(Expr, u32, u32)>> {
    let Kind::Opaque { op, args, .. } = e.kind() else {
        return None;
    };
    if op != PACK || args.len() % 3 != 0 {
        return None;
    }
    args.chunks(3)
        .map(|c| {
            let offset = u32::try_from(sym::const_i64(&c[1])?).ok()?;
            let width = u32::try_from(sym::const_i64(&c[2])?).ok()?;
            Some((c[0].clone(), offset, width))
        })
        .collect()
}

/// The packed fields as the `bits`-wide integer they make: one field at bit 0 narrower than it is that field's
/// unsigned value.
fn repack(fields: Vec<(Expr, u32, u32)>, bits: u32) -> Expr {
    match fields.as_slice() {
        [] => sym::int_i(0),
        [(term, 0, width)] if *width < bits => sym::unsigned(*width, term.clone()),
        _ => pack(fields, bits),
    }
}

/// `lshr` of a packed `bits`-wide integer by `shift`: the fields at or above it, moved down; `None` when a field
/// straddles it or `e` is not packed.
pub(super) fn pack_shift_right(e: &Expr, shift: u32, bits: u32) -> Option<Expr> {
    let fields = unpacked(e)?;
    if fields.iter().any(|(_, o, w)| *o < shift && o + w > shift) {
        return None;
    }
    let kept = fields
        .into_iter()
        .filter(|(_, o, _)| *o >= shift)
        .map(|(t, o, w)| (t, o - shift, w))
        .collect();
    Some(repack(kept, bits))
}

/// `trunc` to `to` bits of a packed integer, or of one field's unsigned value of that width: the field itself when
/// it fills the low bits, else the fields below `to`; `None` when a field straddles it.
pub(super) fn pack_truncate(e: &Expr, to: u32) -> Option<Expr> {
    if let Kind::Unsigned { bits, a } = e.kind() {
        return (*bits == to).then(|| a.clone());
    }
    let fields = unpacked(e)?;
    if fields.iter().any(|(_, o, w)| *o < to && o + w > to) {
        return None;
    }
    let kept: Vec<_> = fields.into_iter().filter(|(_, o, _)| *o < to).collect();
    match kept.as_slice() {
        [(term, 0, width)] if *width == to => Some(term.clone()),
        _ => Some(repack(kept, to)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::FloatFormat;
    use crate::sym::VarType;

    fn float(i: u32) -> Expr {
        sym::param(i, VarType::Float(FloatFormat::Single))
    }

    fn mask(c: &Expr) -> Expr {
        sym::ite(c.clone(), sym::int_i(-1), sym::int_i(0))
    }

    #[test]
    fn a_blend_by_a_comparison_mask_is_a_select() {
        let (x, y) = (float(0), float(1));
        let c = sym::gt(x.clone(), sym::real_i(0));
        let (bx, by) = (bits_of_float(x.clone(), 32), bits_of_float(y.clone(), 32));
        // _mm_or_ps(_mm_and_ps(mask, x), _mm_andnot_ps(mask, y))
        let picked = bitwise(BitOp::And, 32, &mask(&c), &bx).expect("and of a mask");
        let inverted = bitwise(BitOp::Xor, 32, &mask(&c), &sym::int_i(-1)).expect("not of a mask");
        assert!(is_mask(&inverted));
        let other = bitwise(BitOp::And, 32, &inverted, &by).expect("andnot of a mask");
        let blend = bitwise(BitOp::Or, 32, &picked, &other).expect("or of two picks");
        assert_eq!(float_of_bits(&blend, 32), Some(sym::ite(c, x, y)));
    }

    #[test]
    fn a_mask_alone_is_not_a_number() {
        let c = sym::gt(float(0), sym::real_i(0));
        assert!(is_mask(&mask(&c)));
        assert_eq!(float_of_bits(&mask(&c), 32), None);
        let zero_or_x = bitwise(BitOp::And, 32, &mask(&c), &bits_of_float(float(0), 32));
        assert_eq!(
            zero_or_x.and_then(|e| float_of_bits(&e, 32)),
            Some(sym::ite(c, float(0), sym::real_i(0)))
        );
    }

    #[test]
    fn the_sign_bit_negates_and_clears() {
        let bx = bits_of_float(float(0), 32);
        let sign = sym::int_i(i32::MIN as i64);
        let negated = bitwise(BitOp::Xor, 32, &bx, &sign).expect("xor with -0.0");
        assert_eq!(float_of_bits(&negated, 32), Some(sym::neg(float(0))));
        let cleared =
            bitwise(BitOp::And, 32, &sym::int_i(i32::MAX as i64), &bx).expect("fabs mask");
        assert_eq!(float_of_bits(&cleared, 32), Some(sym::abs(float(0))));
    }

    #[test]
    fn packed_fields_are_read_back_by_shifts_and_truncations() {
        let int = |i, bits| sym::param(i, VarType::Int { bits, signed: true });
        let (start, count, kind) = (int(0, 32), int(1, 16), int(2, 8));
        let word = pack(
            vec![
                (start.clone(), 0, 32),
                (count.clone(), 32, 16),
                (kind.clone(), 48, 8),
            ],
            64,
        );
        assert_eq!(pack_truncate(&word, 32), Some(start));
        let high = pack_shift_right(&word, 32, 64).expect("shift by a field boundary");
        assert_eq!(pack_truncate(&high, 16), Some(count));
        let top = pack_shift_right(&word, 48, 64).expect("the last field");
        assert_eq!(top, sym::unsigned(8, kind.clone()));
        assert_eq!(pack_truncate(&top, 8), Some(kind));
        assert_eq!(pack_shift_right(&word, 40, 64), None);
    }

    #[test]
    fn two_floats_combined_are_not_followed() {
        let (bx, by) = (bits_of_float(float(0), 32), bits_of_float(float(1), 32));
        assert_eq!(bitwise(BitOp::And, 32, &bx, &by), None);
        assert_eq!(bitwise(BitOp::Or, 32, &bx, &by), None);
    }
}
