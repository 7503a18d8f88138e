//! Interval evaluation of the integer nodes (C's `int` arithmetic on the way to a float: `(int) x`, `j & 1`,
//! `j + 1`), as the real encoder defines them, so that a path through an integer part can be refuted too.
//! Until 2026-12-03 every integer node was unknown here, and such paths went to Z3 whatever their box (with
//! them, GSL `dilog.c` finds 29 more sites within its budget).

use super::{arith, real, widen, Abs, Box};
use crate::sym::{self, ArithOp, Expr, Kind};
use num_traits::ToPrimitive;

/// An integer node, as the real encoder defines it (`solve::real`): truncation toward zero (unsigned results in
/// signed form), exact sums and products, `⌊x / 2^k⌋`, and the range of its width for any other operation.
pub(super) fn eval(e: &Expr, bounds: &Box, memo: &mut sym::FingerprintMap<Abs>) -> Abs {
    let two_to = |bits: u32| 2f64.powi(bits as i32);
    match e.kind() {
        Kind::IntConst(i) => match i.to_f64() {
            // Exact up to 2^53 (so that `j == 0` can be decided), else the floats around it.
            Some(c) if c.abs() <= 2f64.powi(53) => Abs::Real(c, c),
            Some(c) if c.is_finite() => widen(c, c),
            _ => Abs::Top,
        },
        Kind::FpToInt { bits, signed, a } => real(a, bounds, memo).map_or(Abs::Top, |(lo, hi)| {
            let (lo, hi) = (lo.trunc(), hi.trunc());
            let half = two_to(bits - 1);
            if *signed || hi < half {
                Abs::Real(lo, hi)
            } else if lo >= half {
                widen(lo - 2.0 * half, hi - 2.0 * half)
            } else {
                Abs::Top
            }
        }),
        Kind::IntArith { op, a, b } => match (real(a, bounds, memo), real(b, bounds, memo)) {
            (Some(x), Some(y)) => arith(
                match op {
                    sym::IntOp::Add => ArithOp::Add,
                    sym::IntOp::Sub => ArithOp::Sub,
                    sym::IntOp::Mul => ArithOp::Mul,
                },
                x,
                y,
            ),
            _ => Abs::Top,
        },
        Kind::Unsigned { bits, a } => real(a, bounds, memo).map_or(Abs::Top, |(lo, hi)| {
            if lo >= 0.0 {
                Abs::Real(lo, hi)
            } else if hi < 0.0 {
                widen(lo + two_to(*bits), hi + two_to(*bits))
            } else {
                Abs::Top
            }
        }),
        Kind::Opaque { op, args, .. } if op == sym::FLOOR_POW2 => {
            let k = args.get(1).and_then(Expr::as_int).and_then(|k| k.to_i32());
            match (args.first().and_then(|x| real(x, bounds, memo)), k) {
                (Some((lo, hi)), Some(k)) => {
                    let scale = 2f64.powi(-k);
                    widen((lo * scale).floor(), (hi * scale).floor())
                }
                _ => Abs::Top,
            }
        }
        Kind::Opaque { bits, .. } => Abs::Real(-two_to(bits - 1), two_to(bits - 1)),
        _ => Abs::Top,
    }
}
