//! Translation of [`sym`] terms into Z3's theory of reals (nonlinear, with integers where the program has
//! them), and exact reading of model values (rationals and algebraic numbers).

use crate::round::{round_rational, FloatFormat};
use crate::sym::{self, ArithOp, CmpOp, Expr, IntOp, Integral, Kind, Sort, VarType};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::One;
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::str::FromStr;
use z3::ast::{Ast, Bool, Int, Real};

/// The Z3 term of one node.
#[derive(Clone)]
enum Term {
    Real(Real),
    Int(Int),
    Bool(Bool),
}

/// Encodes terms into the current thread's Z3 context, sharing common subterms.
pub(super) struct RealEncoder {
    /// Ordered, so the terms are released in the same order every run: Z3 recycles the ids of released terms,
    /// and the ids of later terms order nlsat's variables (a `HashMap` made the models differ from run to run).
    memo: BTreeMap<u128, Term>,
    /// Side constraints of elementary functions and opaque integers met so far, encoded.
    pub(super) side: Vec<Bool>,
    pending: Vec<Expr>,
    /// Whether any integer-sorted term was encoded (then nlsat alone cannot decide the query).
    pub(super) uses_integers: bool,
}

/// The name of the Z3 constant of a parameter.
pub(super) fn param_name(index: u32, ty: VarType) -> String {
    match ty {
        VarType::Float(_) => format!("x{index}"),
        VarType::Int { .. } => format!("n{index}"),
    }
}

fn rational(q: &BigRational) -> Real {
    if !sym::is_long(q) {
        return Real::from_big_rational(q);
    }
    // As `Real::from_big_rational`, with the decimal text of the long ones (the format thresholds, in every
    // query) remembered: Z3 gets the same numeral.
    thread_local! {
        static TEXT: sym::PerThread<BigRational, (String, String)> = Default::default();
    }
    let (n, d) = sym::remembered(&TEXT, q, || {
        (q.numer().to_str_radix(10), q.denom().to_str_radix(10))
    });
    Real::from_rational_str(&n, &d).expect("a numeral Z3 reads")
}

fn int_const(i: &BigInt) -> Int {
    Int::from_big_int(i)
}

impl RealEncoder {
    pub(super) fn new() -> RealEncoder {
        RealEncoder {
            memo: BTreeMap::new(),
            side: Vec::new(),
            pending: Vec::new(),
            uses_integers: false,
        }
    }

    /// A formula as a Z3 boolean; side constraints accumulate in `self.side`.
    pub(super) fn formula(&mut self, e: &Expr) -> Bool {
        let b = self.bool(e);
        while let Some(c) = self.pending.pop() {
            let encoded = self.bool(&c);
            self.side.push(encoded);
        }
        b
    }

    pub(super) fn real(&mut self, e: &Expr) -> Real {
        match self.term(e) {
            Term::Real(r) => r,
            Term::Int(i) => Real::from_int(&i),
            Term::Bool(b) => b.ite(&Real::from_rational(1, 1), &Real::from_rational(0, 1)),
        }
    }

    pub(super) fn int(&mut self, e: &Expr) -> Int {
        match self.term(e) {
            Term::Int(i) => i,
            Term::Real(r) => Int::from_real(&r),
            Term::Bool(b) => b.ite(&Int::from_i64(1), &Int::from_i64(0)),
        }
    }

    pub(super) fn bool(&mut self, e: &Expr) -> Bool {
        match self.term(e) {
            Term::Bool(b) => b,
            _ => Bool::from_bool(false),
        }
    }

    fn term(&mut self, e: &Expr) -> Term {
        if let Some(t) = self.memo.get(&e.fingerprint()) {
            return t.clone();
        }
        for node in e.postorder() {
            if !self.memo.contains_key(&node.fingerprint()) {
                let t = self.node(&node);
                self.memo.insert(node.fingerprint(), t);
            }
        }
        self.memo[&e.fingerprint()].clone()
    }

    /// Encodes one node whose children are already encoded.
    fn node(&mut self, e: &Expr) -> Term {
        if e.sort() == Sort::Int || matches!(e.kind(), Kind::IsInt(_) | Kind::ToIntegral { .. }) {
            self.uses_integers = true;
        }
        match e.kind() {
            Kind::RealConst(q) => Term::Real(rational(q)),
            Kind::IntConst(i) => Term::Int(int_const(i)),
            Kind::BoolConst(b) => Term::Bool(Bool::from_bool(*b)),
            Kind::Param { index, ty } => match ty {
                VarType::Float(_) => Term::Real(Real::new_const(param_name(*index, *ty))),
                VarType::Int { .. } => Term::Int(Int::new_const(param_name(*index, *ty))),
            },
            Kind::Arith { op, a, b, .. } => Term::Real(self.arith(*op, a, b)),
            Kind::Neg(a) => Term::Real(-self.real(a)),
            Kind::Abs(a) => {
                let x = self.real(a);
                Term::Real(x.ge(Real::from_rational(0, 1)).ite(&x, &-x.clone()))
            }
            Kind::Fma { a, b, c, .. } => {
                let (x, y, z) = (self.real(a), self.real(b), self.real(c));
                Term::Real(x * y + z)
            }
            Kind::Convert { a, .. } => Term::Real(self.real(a)),
            Kind::IntToReal(a) => Term::Real(self.real(a)),
            Kind::Math { .. } => {
                self.pending.extend(sym::side_constraints(e));
                Term::Real(Real::new_const(format!("d{:032x}", e.fingerprint())))
            }
            Kind::ToIntegral { mode, a, .. } => Term::Real(self.integral_part(*mode, a)),
            Kind::FpToInt { bits, signed, a } => Term::Int(self.fp_to_int(*bits, *signed, a)),
            Kind::IntArith { op, a, b } => {
                let (x, y) = (self.int(a), self.int(b));
                Term::Int(match op {
                    IntOp::Add => x + y,
                    IntOp::Sub => x - y,
                    IntOp::Mul => x * y,
                })
            }
            Kind::Unsigned { bits, a } => {
                let x = self.int(a);
                let modulus = int_const(&(BigInt::one() << *bits as usize));
                Term::Int(x.lt(Int::from_i64(0)).ite(&(x.clone() + modulus), &x))
            }
            Kind::Opaque { .. } => {
                self.pending.extend(sym::side_constraints(e));
                Term::Int(Int::new_const(format!("o{:032x}", e.fingerprint())))
            }
            Kind::IsInt(a) => Term::Bool(self.real(a).is_int()),
            Kind::Ite { c, a, b } => self.ite(c, a, b),
            Kind::Cmp { op, a, b } => Term::Bool(self.cmp(*op, a, b)),
            Kind::Not(a) => Term::Bool(self.bool(a).not()),
            Kind::And(xs) => {
                let parts: Vec<Bool> = xs.iter().map(|x| self.bool(x)).collect();
                Term::Bool(Bool::and(&parts))
            }
            Kind::Or(xs) => {
                let parts: Vec<Bool> = xs.iter().map(|x| self.bool(x)).collect();
                Term::Bool(Bool::or(&parts))
            }
            Kind::Exception { .. } => {
                Term::Bool(self.bool(&sym::atom_condition(e).expect("an atom")))
            }
        }
    }

    /// `a op b` over the reals.
    fn arith(&mut self, op: ArithOp, a: &Expr, b: &Expr) -> Real {
        let (x, y) = (self.real(a), self.real(b));
        match op {
            ArithOp::Add => x + y,
            ArithOp::Sub => x - y,
            ArithOp::Mul => x * y,
            ArithOp::Div => x / y,
        }
    }

    /// `floor`, `ceil`, `trunc` or `round` of `a`, through Z3's integer part.
    fn integral_part(&mut self, mode: Integral, a: &Expr) -> Real {
        let zero = || Real::from_rational(0, 1);
        let x = self.real(a);
        let floor = |v: &Real| Real::from_int(&Int::from_real(v));
        let half = Real::from_rational(1, 2);
        match mode {
            Integral::Floor => floor(&x),
            Integral::Ceil => -floor(&-x.clone()),
            Integral::Trunc => x.ge(zero()).ite(&floor(&x), &-floor(&-x.clone())),
            Integral::Round => x.ge(zero()).ite(
                &floor(&(x.clone() + half.clone())),
                &-floor(&(-x.clone() + half)),
            ),
        }
    }

    /// `a` truncated toward zero to an integer of `bits`, in signed form.
    fn fp_to_int(&mut self, bits: u32, signed: bool, a: &Expr) -> Int {
        let zero = || Real::from_rational(0, 1);
        let x = self.real(a);
        let truncated = x
            .ge(zero())
            .ite(&Int::from_real(&x), &-Int::from_real(&-x.clone()));
        if signed {
            truncated
        } else {
            // Unsigned results are held in signed form.
            let half = int_const(&(BigInt::one() << (bits as usize - 1)));
            let modulus = int_const(&(BigInt::one() << bits as usize));
            truncated
                .ge(&half)
                .ite(&(truncated.clone() - modulus), &truncated)
        }
    }

    /// `if c then a else b` in the sort of `a`.
    fn ite(&mut self, c: &Expr, a: &Expr, b: &Expr) -> Term {
        let cond = self.bool(c);
        match a.sort() {
            Sort::Real => Term::Real(cond.ite(&self.real(a), &self.real(b))),
            Sort::Int => Term::Int(cond.ite(&self.int(a), &self.int(b))),
            Sort::Bool => Term::Bool(cond.ite(&self.bool(a), &self.bool(b))),
        }
    }

    /// `a op b` over integers when both are, as equivalence over Booleans, otherwise over the reals.
    fn cmp(&mut self, op: CmpOp, a: &Expr, b: &Expr) -> Bool {
        match (a.sort(), b.sort()) {
            (Sort::Int, Sort::Int) => {
                let (x, y) = (self.int(a), self.int(b));
                match op {
                    CmpOp::Lt => x.lt(&y),
                    CmpOp::Le => x.le(&y),
                    CmpOp::Eq => x.eq(&y),
                }
            }
            (Sort::Bool, Sort::Bool) => {
                let (x, y) = (self.bool(a), self.bool(b));
                match op {
                    CmpOp::Eq => x.iff(&y),
                    _ => Bool::from_bool(false),
                }
            }
            _ => {
                let (x, y) = (self.real(a), self.real(b));
                match op {
                    CmpOp::Lt => x.lt(&y),
                    CmpOp::Le => x.le(&y),
                    CmpOp::Eq => x.eq(&y),
                }
            }
        }
    }
}

/// Parses Z3's numeral text (`-12`, `3/4`) into a rational.
fn parse_numeral(text: &str) -> Option<BigRational> {
    let text = text.trim();
    match text.split_once('/') {
        Some((n, d)) => {
            let d = BigInt::from_str(d.trim()).ok()?;
            let n = BigInt::from_str(n.trim()).ok()?;
            (d != BigInt::from(0)).then(|| BigRational::new(n, d))
        }
        None => BigInt::from_str(text).ok().map(BigRational::from_integer),
    }
}

fn numeral_string(ctx: z3_sys::Z3_context, ast: z3_sys::Z3_ast) -> Option<String> {
    // SAFETY: `ast` is a numeral of `ctx`; Z3 returns a string it owns until the next call.
    unsafe {
        let p = z3_sys::Z3_get_numeral_string(ctx, ast);
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

/// The exact value of a model value `v` (a rational or an algebraic number); for an irrational value, a rational
/// close enough that it rounds to the same `fmt` value as the true one (or to within 10^-1200).
pub(super) fn model_rational(v: &Real, fmt: FloatFormat) -> Option<BigRational> {
    let ctx = v.get_ctx().get_z3_context();
    let ast = v.get_z3_ast();
    // SAFETY: plain queries on a live AST of the context; the bounds Z3 returns are wrapped (reference-counted)
    // before any further call.
    unsafe {
        if z3_sys::Z3_is_numeral_ast(ctx, ast) {
            return parse_numeral(&numeral_string(ctx, ast)?);
        }
        if !z3_sys::Z3_is_algebraic_number(ctx, ast) {
            return None;
        }
        let mut precision = 24u32;
        loop {
            let lower = Real::wrap(
                v.get_ctx(),
                z3_sys::Z3_get_algebraic_number_lower(ctx, ast, precision)?,
            );
            let upper = Real::wrap(
                v.get_ctx(),
                z3_sys::Z3_get_algebraic_number_upper(ctx, ast, precision)?,
            );
            let lo = parse_numeral(&numeral_string(ctx, lower.get_z3_ast())?)?;
            let hi = parse_numeral(&numeral_string(ctx, upper.get_z3_ast())?)?;
            if round_rational(&lo, fmt) == round_rational(&hi, fmt) || precision >= 1200 {
                return Some(lo);
            }
            precision *= 2;
        }
    }
}

/// The value of an integer model value.
pub(super) fn model_integer(v: &Int) -> Option<BigInt> {
    let ctx = v.get_ctx().get_z3_context();
    // SAFETY: plain query on a live AST of the context.
    unsafe {
        if !z3_sys::Z3_is_numeral_ast(ctx, v.get_z3_ast()) {
            return None;
        }
    }
    parse_numeral(&numeral_string(ctx, v.get_z3_ast())?).map(|q| q.to_integer())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numerals() {
        assert_eq!(
            parse_numeral("-3/4"),
            Some(BigRational::new((-3).into(), 4.into()))
        );
        assert_eq!(
            parse_numeral("12"),
            Some(BigRational::from_integer(12.into()))
        );
        assert_eq!(parse_numeral("1/0"), None);
    }
}
