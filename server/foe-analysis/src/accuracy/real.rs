//! One evaluation of sym terms over the reals at a given MPFR precision: rationals stay exact while only rational
//! operations produce them, elementary functions go through MPFR's correctly rounded functions (exact where MPFR
//! says the result is), integers are exact. The precision loop around it is in `accuracy.rs`.

use super::NoReference;
use crate::sym::{self, ArithOp, CmpOp, Expr, FingerprintMap, IntOp, Integral, Kind, MathFn};
use crate::types::{ArgValue, FunctionSignature};
use num_bigint::{BigInt, Sign};
use num_rational::BigRational;
use rug::float::Round;
use rug::integer::Order;
use rug::ops::Pow;
use rug::{Float, Integer, Rational};
use std::cmp::Ordering;

/// Bits (numerator and denominator together) beyond which an exact rational becomes an MPFR approximation: a
/// loop that squares a value would otherwise double its size at every step.
const EXACT_BITS_LIMIT: u32 = 1 << 16;

/// A real number during evaluation: exact while only rational operations (or MPFR operations that report an
/// exact result) produced it, else an MPFR approximation at the evaluation's precision.
#[derive(Debug, Clone)]
pub(super) enum Num {
    Exact(Rational),
    Approx(Float),
}

/// The value of a term.
#[derive(Debug, Clone)]
pub(super) enum Value {
    Real(Num),
    Int(Integer),
    Bool(bool),
}

/// The values of terms at one input and precision, each node evaluated once (a node that has no real value, such
/// as a division by zero in the branch a select does not take, keeps its reason and fails only where used).
pub(super) struct RealEvaluator<'a> {
    precision: u32,
    input: &'a [ArgValue],
    signature: &'a FunctionSignature,
    memo: FingerprintMap<Result<Value, NoReference>>,
    /// Whether any value so far is an MPFR approximation (else everything is exact and one evaluation suffices).
    pub(super) approximated: bool,
}

impl<'a> RealEvaluator<'a> {
    pub(super) fn new(
        precision: u32,
        input: &'a [ArgValue],
        signature: &'a FunctionSignature,
    ) -> RealEvaluator<'a> {
        RealEvaluator {
            precision,
            input,
            signature,
            memo: FingerprintMap::default(),
            approximated: false,
        }
    }

    /// The value of `term` (its nodes evaluated children first, each once across calls).
    pub(super) fn value(&mut self, term: &Expr) -> Result<Value, NoReference> {
        for node in term.postorder() {
            if !self.memo.contains_key(&node.fingerprint()) {
                let v = self.node(&node);
                self.approximated |= matches!(v, Ok(Value::Real(Num::Approx(_))));
                self.memo.insert(node.fingerprint(), v);
            }
        }
        self.get(term)
    }

    fn get(&self, e: &Expr) -> Result<Value, NoReference> {
        self.memo
            .get(&e.fingerprint())
            .cloned()
            .unwrap_or(Err(NoReference::Internal(
                "a term evaluated before its operands",
            )))
    }

    fn num(&self, e: &Expr) -> Result<Num, NoReference> {
        match self.get(e)? {
            Value::Real(n) => Ok(n),
            Value::Int(i) => Ok(Num::Exact(Rational::from(i))),
            Value::Bool(_) => Err(NoReference::Internal("a truth value used as a number")),
        }
    }

    fn int(&self, e: &Expr) -> Result<Integer, NoReference> {
        match self.get(e)? {
            Value::Int(i) => Ok(i),
            _ => Err(NoReference::Internal("a number used as an integer")),
        }
    }

    fn truth(&self, e: &Expr) -> Result<bool, NoReference> {
        match self.get(e)? {
            Value::Bool(b) => Ok(b),
            _ => Err(NoReference::Internal("a number used as a truth value")),
        }
    }

    fn float(&self, n: &Num) -> Float {
        match n {
            Num::Exact(q) => Float::with_val(self.precision, q),
            Num::Approx(f) => f.clone(),
        }
    }

    /// An MPFR result: exact when MPFR says it is and every operand was, else an approximation; an infinite or
    /// NaN result (beyond MPFR's exponent range) has no value.
    fn checked_result(
        &self,
        (value, rounding): (Float, Ordering),
        operands_exact: bool,
    ) -> Result<Num, NoReference> {
        if !value.is_finite() {
            return Err(NoReference::OutOfRange);
        }
        if operands_exact && rounding == Ordering::Equal {
            if let Some(q) = value.to_rational() {
                return Ok(Num::Exact(q));
            }
        }
        Ok(Num::Approx(value))
    }

    /// An exact rational, or its approximation when it has grown too large to carry exactly.
    fn exact(&self, q: Rational) -> Num {
        if q.numer().significant_bits() + q.denom().significant_bits() > EXACT_BITS_LIMIT {
            Num::Approx(Float::with_val(self.precision, &q))
        } else {
            Num::Exact(q)
        }
    }

    fn node(&self, e: &Expr) -> Result<Value, NoReference> {
        Ok(match e.kind() {
            Kind::RealConst(q) => Value::Real(Num::Exact(rational(q))),
            Kind::IntConst(n) => Value::Int(integer(n)),
            Kind::BoolConst(b) => Value::Bool(*b),
            Kind::Param { index, ty } => self.param(*index, *ty)?,
            // The same term less itself is exactly zero over the reals, however it is approximated.
            Kind::Arith {
                op: ArithOp::Sub,
                a,
                b,
                ..
            } if a == b => {
                self.num(a)?;
                Value::Real(Num::Exact(Rational::new()))
            }
            Kind::Arith { op, a, b, .. } => {
                Value::Real(self.arith(*op, self.num(a)?, self.num(b)?)?)
            }
            Kind::Neg(a) => Value::Real(match self.num(a)? {
                Num::Exact(q) => Num::Exact(-q),
                Num::Approx(f) => Num::Approx(-f),
            }),
            Kind::Abs(a) => Value::Real(match self.num(a)? {
                Num::Exact(q) => Num::Exact(q.abs()),
                Num::Approx(f) => Num::Approx(f.abs()),
            }),
            Kind::Fma { a, b, c, .. } => {
                let product = self.arith(ArithOp::Mul, self.num(a)?, self.num(b)?)?;
                Value::Real(self.arith(ArithOp::Add, product, self.num(c)?)?)
            }
            // A conversion is valued as its argument over the reals.
            Kind::Convert { a, .. } | Kind::IntToReal(a) => Value::Real(self.num(a)?),
            Kind::Math { func, args, .. } => {
                let args = args
                    .iter()
                    .map(|a| self.num(a))
                    .collect::<Result<Vec<_>, _>>()?;
                Value::Real(self.math(*func, &args)?)
            }
            Kind::ToIntegral { mode, a, .. } => Value::Real(to_integral(*mode, self.num(a)?)?),
            Kind::FpToInt { bits, signed, a } => Value::Int(self.fp_to_int(*bits, *signed, a)?),
            Kind::IntArith { op, a, b } => {
                let (x, y) = (self.int(a)?, self.int(b)?);
                Value::Int(match op {
                    IntOp::Add => x + y,
                    IntOp::Sub => x - y,
                    IntOp::Mul => x * y,
                })
            }
            Kind::Unsigned { bits, a } => {
                let x = self.int(a)?;
                Value::Int(if x < 0 {
                    x + (Integer::from(1) << *bits)
                } else {
                    x
                })
            }
            Kind::Opaque { op, args, .. } if op == sym::FLOOR_POW2 => {
                let (Some(x), Some(k)) = (args.first(), args.get(1).and_then(sym::const_i64))
                else {
                    return Err(NoReference::Opaque(op.clone()));
                };
                let k = u32::try_from(k).map_err(|_| NoReference::Opaque(op.clone()))?;
                // An arithmetic shift floors, as ⌊x / 2^k⌋ does.
                Value::Int(self.int(x)? >> k)
            }
            Kind::Opaque { op, .. } => return Err(NoReference::Opaque(op.clone())),
            Kind::IsInt(a) => Value::Bool(match self.num(a)? {
                Num::Exact(q) => *q.denom() == 1,
                Num::Approx(f) => f.is_integer(),
            }),
            Kind::Ite { c, a, b } => {
                if self.truth(c)? {
                    self.get(a)?
                } else {
                    self.get(b)?
                }
            }
            Kind::Cmp { op, a, b } => Value::Bool(self.compare(*op, a, b)?),
            Kind::Not(a) => Value::Bool(!self.truth(a)?),
            Kind::And(parts) => {
                let mut all = true;
                for p in parts {
                    all &= self.truth(p)?;
                }
                Value::Bool(all)
            }
            Kind::Or(parts) => {
                let mut any = false;
                for p in parts {
                    any |= self.truth(p)?;
                }
                Value::Bool(any)
            }
            Kind::Exception { .. } => {
                return Err(NoReference::Opaque("an exception condition".into()))
            }
        })
    }

    fn param(&self, index: u32, ty: sym::VarType) -> Result<Value, NoReference> {
        let name = || {
            self.signature
                .params
                .get(index as usize)
                .map_or_else(|| format!("input {index}"), |p| format!("`{}`", p.name))
        };
        let value = self
            .input
            .get(index as usize)
            .ok_or_else(|| NoReference::MissingInput(name()))?;
        let finite =
            |v: f64| Rational::from_f64(v).ok_or_else(|| NoReference::NonFiniteInput(name()));
        Ok(match value {
            ArgValue::F64(v) => Value::Real(Num::Exact(finite(*v)?)),
            ArgValue::F32(v) => Value::Real(Num::Exact(finite(*v as f64)?)),
            ArgValue::Int(v) => match ty {
                // Integer terms hold the signed reading of the bits, as the IEEE evaluator reads them.
                sym::VarType::Int { bits, .. } if bits > 1 => {
                    Value::Int(integer(&sym::wrap_signed(&BigInt::from(*v), bits)))
                }
                _ => Value::Int(Integer::from(*v)),
            },
            ArgValue::OutPtr => return Err(NoReference::MissingInput(name())),
        })
    }

    fn arith(&self, op: ArithOp, a: Num, b: Num) -> Result<Num, NoReference> {
        if let (Num::Exact(x), Num::Exact(y)) = (&a, &b) {
            let q = match op {
                ArithOp::Add => Rational::from(x + y),
                ArithOp::Sub => Rational::from(x - y),
                ArithOp::Mul => Rational::from(x * y),
                ArithOp::Div => {
                    if *y == 0 {
                        return Err(NoReference::DivisionByZero);
                    }
                    Rational::from(x / y)
                }
            };
            return Ok(self.exact(q));
        }
        let (x, y) = (self.float(&a), self.float(&b));
        let p = self.precision;
        let r = match op {
            ArithOp::Add => Float::with_val_round(p, &x + &y, Round::Nearest),
            ArithOp::Sub => Float::with_val_round(p, &x - &y, Round::Nearest),
            ArithOp::Mul => Float::with_val_round(p, &x * &y, Round::Nearest),
            ArithOp::Div => {
                if y.is_zero() {
                    return Err(NoReference::DivisionByZero);
                }
                Float::with_val_round(p, &x / &y, Round::Nearest)
            }
        };
        self.checked_result(r, false)
    }

    fn compare(&self, op: CmpOp, a: &Expr, b: &Expr) -> Result<bool, NoReference> {
        let order = match (self.get(a)?, self.get(b)?) {
            (Value::Int(x), Value::Int(y)) => x.cmp(&y),
            (Value::Bool(x), Value::Bool(y)) => x.cmp(&y),
            _ => match (self.num(a)?, self.num(b)?) {
                (Num::Exact(x), Num::Exact(y)) => x.cmp(&y),
                (Num::Approx(x), Num::Exact(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
                (Num::Exact(x), Num::Approx(y)) => {
                    y.partial_cmp(&x).unwrap_or(Ordering::Equal).reverse()
                }
                (Num::Approx(x), Num::Approx(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
            },
        };
        Ok(match op {
            CmpOp::Lt => order.is_lt(),
            CmpOp::Le => order.is_le(),
            CmpOp::Eq => order.is_eq(),
        })
    }

    /// C's conversion to an integer: the real truncated toward zero, in signed form; a value out of the type's
    /// range has none (C leaves it undefined).
    fn fp_to_int(&self, bits: u32, signed: bool, a: &Expr) -> Result<Integer, NoReference> {
        let t = match to_integral(Integral::Trunc, self.num(a)?)? {
            Num::Exact(q) => q.numer().clone(),
            Num::Approx(_) => return Err(NoReference::Internal("an integral value not exact")),
        };
        let (lo, hi) = if signed {
            (
                -(Integer::from(1) << (bits - 1)),
                (Integer::from(1) << (bits - 1)) - 1,
            )
        } else {
            (Integer::new(), (Integer::from(1) << bits) - 1)
        };
        if t < lo || t > hi {
            return Err(NoReference::ConversionOutOfRange);
        }
        Ok(integer(&sym::wrap_signed(&bigint(&t), bits)))
    }

    /// An elementary function in its real-number meaning, through MPFR.
    fn math(&self, func: MathFn, args: &[Num]) -> Result<Num, NoReference> {
        let p = self.precision;
        let exact = args.iter().all(|a| matches!(a, Num::Exact(_)));
        let x = args.first().ok_or(NoReference::Internal(
            "an elementary function without arguments",
        ))?;
        let sign_x = sign(x);
        let outside = || NoReference::OutsideDomain(func.name());
        let (xf, x_rounding) = match x {
            Num::Exact(q) => Float::with_val_round(p, q, Round::Nearest),
            Num::Approx(f) => (f.clone(), Ordering::Equal),
        };
        let second = || -> Result<(Float, Ordering), NoReference> {
            match args.get(1) {
                Some(Num::Exact(q)) => Ok(Float::with_val_round(p, q, Round::Nearest)),
                Some(Num::Approx(f)) => Ok((f.clone(), Ordering::Equal)),
                None => Err(NoReference::Internal(
                    "a two-argument function with one argument",
                )),
            }
        };
        // Exact only if the arguments were exactly representable at this precision too.
        let exact = exact && x_rounding == Ordering::Equal;
        macro_rules! round {
            ($value:expr) => {
                Float::with_val_round(p, $value, Round::Nearest)
            };
        }
        let r = match func {
            MathFn::Sqrt => {
                if sign_x < 0 {
                    return Err(outside());
                }
                round!(xf.sqrt_ref())
            }
            MathFn::Cbrt => round!(xf.cbrt_ref()),
            MathFn::Exp => round!(xf.exp_ref()),
            MathFn::Exp2 => round!(xf.exp2_ref()),
            MathFn::Expm1 => round!(xf.exp_m1_ref()),
            MathFn::Log | MathFn::Log2 | MathFn::Log10 => {
                if sign_x <= 0 {
                    return Err(if sign_x == 0 {
                        NoReference::Pole(func.name())
                    } else {
                        outside()
                    });
                }
                match func {
                    MathFn::Log => round!(xf.ln_ref()),
                    MathFn::Log2 => round!(xf.log2_ref()),
                    _ => round!(xf.log10_ref()),
                }
            }
            MathFn::Log1p => {
                let one_more = Float::with_val(p, &xf + 1u32);
                if one_more <= 0 {
                    return Err(if one_more == 0 {
                        NoReference::Pole(func.name())
                    } else {
                        outside()
                    });
                }
                round!(xf.ln_1p_ref())
            }
            MathFn::Sin => round!(xf.sin_ref()),
            MathFn::Cos => round!(xf.cos_ref()),
            MathFn::Tan => round!(xf.tan_ref()),
            MathFn::Atan => round!(xf.atan_ref()),
            MathFn::Sinh => round!(xf.sinh_ref()),
            MathFn::Cosh => round!(xf.cosh_ref()),
            MathFn::Tanh => round!(xf.tanh_ref()),
            MathFn::Asin | MathFn::Acos => {
                if xf.clone().abs() > 1 {
                    return Err(outside());
                }
                if func == MathFn::Asin {
                    round!(xf.asin_ref())
                } else {
                    round!(xf.acos_ref())
                }
            }
            MathFn::Pow => return self.pow(args, exact),
            MathFn::Fmod => return self.fmod(args),
            MathFn::Hypot => {
                let (y, y_rounding) = second()?;
                let r = round!(xf.hypot_ref(&y));
                return self.checked_result(r, exact && y_rounding == Ordering::Equal);
            }
            MathFn::Atan2 => {
                // atan2(y, x): the model keeps C's argument order.
                let (other, other_rounding) = second()?;
                if xf.is_zero() && other.is_zero() {
                    return Err(outside());
                }
                let r = round!(xf.atan2_ref(&other));
                return self.checked_result(r, exact && other_rounding == Ordering::Equal);
            }
        };
        self.checked_result(r, exact)
    }

    /// `pow(x, y)` over the reals: a negative base needs an integral exponent, zero a non-negative one.
    fn pow(&self, args: &[Num], exact: bool) -> Result<Num, NoReference> {
        let p = self.precision;
        let (Some(x), Some(y)) = (args.first(), args.get(1)) else {
            return Err(NoReference::Internal("`pow` without two arguments"));
        };
        let integral_exponent = match y {
            Num::Exact(q) => (*q.denom() == 1).then(|| q.numer().clone()),
            Num::Approx(_) => None,
        };
        match sign(x) {
            0 if sign(y) < 0 => return Err(NoReference::Pole("pow")),
            0 if sign(y) == 0 => return Ok(Num::Exact(Rational::from(1))),
            0 => return Ok(Num::Exact(Rational::new())),
            s if s < 0 && integral_exponent.is_none() => {
                return Err(NoReference::OutsideDomain("pow"))
            }
            _ => {}
        }
        // A rational to a small integral power stays exact.
        if let (Num::Exact(base), Some(n)) = (x, &integral_exponent) {
            if let Some(k) = n.to_i32().filter(|k| k.unsigned_abs() <= 64) {
                return Ok(self.exact(Rational::from(base.pow(k))));
            }
        }
        let (xf, xr) = match x {
            Num::Exact(q) => Float::with_val_round(p, q, Round::Nearest),
            Num::Approx(f) => (f.clone(), Ordering::Equal),
        };
        let (yf, yr) = match y {
            Num::Exact(q) => Float::with_val_round(p, q, Round::Nearest),
            Num::Approx(f) => (f.clone(), Ordering::Equal),
        };
        let r = Float::with_val_round(p, (&xf).pow(&yf), Round::Nearest);
        self.checked_result(r, exact && xr == Ordering::Equal && yr == Ordering::Equal)
    }

    /// `fmod(x, y)`: x − trunc(x / y)·y, which has no value for y = 0.
    fn fmod(&self, args: &[Num]) -> Result<Num, NoReference> {
        let (Some(x), Some(y)) = (args.first(), args.get(1)) else {
            return Err(NoReference::Internal("`fmod` without two arguments"));
        };
        if sign(y) == 0 {
            return Err(NoReference::OutsideDomain("fmod"));
        }
        if let (Num::Exact(a), Num::Exact(b)) = (x, y) {
            let quotient = Rational::from(a / b).trunc();
            return Ok(self.exact(a - quotient * b));
        }
        let (a, b) = (self.float(x), self.float(y));
        let r = Float::with_val_round(self.precision, &a % &b, Round::Nearest);
        self.checked_result(r, false)
    }
}

fn sign(n: &Num) -> i32 {
    let order = match n {
        Num::Exact(q) => q.cmp0(),
        Num::Approx(f) => f.cmp0().unwrap_or(Ordering::Equal),
    };
    order as i32
}

/// `floor`, `ceil`, `trunc`, `round` of a real: an exact integer (of an approximation too: only an approximation
/// within its error of an integer can round the wrong way, which the precision loop sees as a change).
fn to_integral(mode: Integral, n: Num) -> Result<Num, NoReference> {
    Ok(match n {
        Num::Exact(q) => Num::Exact(match mode {
            Integral::Floor => q.floor(),
            Integral::Ceil => q.ceil(),
            Integral::Trunc => q.trunc(),
            Integral::Round => q.round(),
        }),
        Num::Approx(f) => {
            let whole = match mode {
                Integral::Floor => f.floor(),
                Integral::Ceil => f.ceil(),
                Integral::Trunc => f.trunc(),
                Integral::Round => f.round(),
            };
            Num::Exact(Rational::from(
                whole.to_integer().ok_or(NoReference::OutOfRange)?,
            ))
        }
    })
}

/// A `num` integer as a GMP integer.
pub(super) fn integer(n: &BigInt) -> Integer {
    let (sign, bytes) = n.to_bytes_le();
    let magnitude = Integer::from_digits(&bytes, Order::Lsf);
    if sign == Sign::Minus {
        -magnitude
    } else {
        magnitude
    }
}

/// A GMP integer as a `num` integer.
pub(super) fn bigint(n: &Integer) -> BigInt {
    let magnitude = BigInt::from_bytes_le(Sign::Plus, &n.to_digits::<u8>(Order::Lsf));
    if *n < 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// A `num` rational as a GMP rational.
pub(super) fn rational(q: &BigRational) -> Rational {
    Rational::from((integer(q.numer()), integer(q.denom())))
}

/// A GMP rational as a `num` rational.
pub(super) fn big_rational(q: &Rational) -> BigRational {
    BigRational::new(bigint(q.numer()), bigint(q.denom()))
}
