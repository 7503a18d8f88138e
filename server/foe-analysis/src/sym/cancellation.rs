//! Cancellation conditions: when an addition or subtraction loses most of its operands' digits. Not an IEEE
//! exception but where a build's rounding earlier on is magnified: the two builds' results part there by about as
//! many bits as cancel, so inputs that satisfy it are candidates of the search aimed at results.

use super::*;

/// `a op b` (an addition or a subtraction) over the reals is non-zero and at most 2^-`bits` of |a|: about
/// `bits` leading bits of the operands cancel. `None` for other operations, an operand that is the constant 0, or
/// when the condition folds to a constant (the operands are constants, or cannot cancel).
pub fn cancellation(op: ArithOp, a: &Expr, b: &Expr, bits: u32) -> Option<Formula> {
    let is_zero = |e: &Expr| e.as_real().is_some_and(|q| q.is_zero());
    if !matches!(op, ArithOp::Add | ArithOp::Sub) || is_zero(a) || is_zero(b) {
        return None;
    }
    let zero = || real_i(0);
    let scaled = exact(
        ArithOp::Mul,
        exact(op, a.clone(), b.clone()),
        real(BigRational::from_integer(BigInt::one() << bits)),
    );
    // |r · 2^bits| ≤ |a|, split on the sign of a; r ≠ 0.
    let condition = and([
        ne(scaled.clone(), zero()),
        or([
            and([
                gt(a.clone(), zero()),
                le(neg(a.clone()), scaled.clone()),
                le(scaled.clone(), a.clone()),
            ]),
            and([
                lt(a.clone(), zero()),
                le(a.clone(), scaled.clone()),
                le(scaled, neg(a.clone())),
            ]),
        ]),
    ]);
    (!condition.is_const()).then_some(condition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::check::Evaluator;
    use crate::types::ArgValue;

    fn holds(formula: &Formula, values: &[f64]) -> Option<bool> {
        let input: Vec<ArgValue> = values.iter().map(|&v| ArgValue::F64(v)).collect();
        Evaluator::new(formula).holds(&input)
    }

    #[test]
    fn holds_where_the_difference_is_small_against_the_operands() {
        let (x, y) = (
            param(0, VarType::Float(FloatFormat::Double)),
            param(1, VarType::Float(FloatFormat::Double)),
        );
        let c = cancellation(ArithOp::Sub, &x, &y, 20).expect("a condition");
        assert_eq!(holds(&c, &[1.0, 1.0 + 1e-9]), Some(true));
        assert_eq!(holds(&c, &[1.0, 1.5]), Some(false));
        // exact cancellation is not the loss of digits it stands for
        assert_eq!(holds(&c, &[1.0, 1.0]), Some(false));
        let sum = cancellation(ArithOp::Add, &x, &y, 20).expect("a condition");
        assert_eq!(holds(&sum, &[-3.0, 3.0 + 1e-9]), Some(true));
        assert!(cancellation(ArithOp::Mul, &x, &y, 20).is_none());
        assert!(cancellation(ArithOp::Sub, &real_i(1), &real_i(2), 20).is_none());
        assert!(cancellation(ArithOp::Sub, &x, &real_i(0), 20).is_none());
    }
}
