//! What the float grid rules out and the reals do not: an underflow of `a ± b` where an operand is far from
//! zero. A sum of two floats is a multiple of the smaller one's ulp, so a tiny non-zero sum needs both operands
//! below 2^(emin+p+1) (`2^-968` for doubles). Over the reals `(3 + 2/r²) - q` comes within 2^-1022 of 0, and
//! nlsat takes hundreds of milliseconds to find such a model (turbine1's subtractions: 470-570 ms alone); no
//! pair of doubles does it. Such a query is asked as the exact cancellation `a ± b = 0` on the same path
//! instead, which nlsat answers in milliseconds (6-9 ms for turbine1's): its rounded model is what the band's
//! model rounded to, the input where the operands cancel, which the search aimed at results wants.

use super::{narrowed_box, real};
use crate::domain::Domain;
use crate::round::FloatFormat;
use crate::sym::{self, ArithOp, Expr, SiteOp};
use crate::types::{ExceptionKind, FunctionSignature};

/// Magnitudes at or above which an operand cannot be part of a tiny non-zero sum: 2^(emin+p+1), doubled for the
/// rounding between an operand's real value and its float.
fn band(fmt: FloatFormat) -> f64 {
    match fmt {
        FloatFormat::Double => (2f64).powi(-967),
        FloatFormat::Single => (2f64).powi(-100),
    }
}

/// For an underflow of `a ± b` that no floats can raise (an operand's interval over the query's box lies outside
/// the band), the query of its exact cancellation on the same path; `None` for every other formula.
pub(in crate::solve) fn cancellation_instead(
    formula: &Expr,
    sig: &FunctionSignature,
    domain: Option<&Domain>,
) -> Option<Expr> {
    let (kind, site, path) = super::super::seeds::asked(formula)?;
    let SiteOp::Arith(op @ (ArithOp::Add | ArithOp::Sub)) = site.op else {
        return None;
    };
    if kind != ExceptionKind::Underflow {
        return None;
    }
    let [a, b] = site.args.as_slice() else {
        return None;
    };
    let (bounds, _) = narrowed_box(formula, sig, domain)?;
    let mut memo = sym::FingerprintMap::default();
    let band = band(site.fmt);
    let far_from_zero = [a, b].into_iter().any(|operand| {
        real(operand, &bounds, &mut memo).is_some_and(|(lo, hi)| lo >= band || hi <= -band)
    });
    far_from_zero.then(|| {
        let cancels = sym::eq(sym::exact(op, a.clone(), b.clone()), sym::real_i(0));
        sym::and(path.into_iter().cloned().chain([cancels]))
    })
}
