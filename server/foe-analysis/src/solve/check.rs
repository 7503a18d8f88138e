//! Concrete IEEE evaluation of a query on an input: each operation in its own format, and each exception atom
//! decided by what the hardware raises (x86 SSE, round to nearest, tininess after rounding). A candidate whose
//! query does not hold here is retried with Z3's floating-point theory.

use crate::round::{f64_to_rational, FloatFormat};
use crate::sym::{self, ArithOp, CmpOp, Expr, IntOp, Integral, Kind, Site, SiteOp};
use crate::types::{ArgValue, ExceptionKind};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, ToPrimitive, Zero};

#[derive(Debug, Clone)]
enum V {
    F(f64),
    I(BigInt),
    B(bool),
}

fn in_format(v: f64, fmt: FloatFormat) -> f64 {
    match fmt {
        FloatFormat::Double => v,
        FloatFormat::Single => v as f32 as f64,
    }
}

pub(super) fn ieee_arith(op: ArithOp, fmt: FloatFormat, a: f64, b: f64) -> f64 {
    match fmt {
        FloatFormat::Double => match op {
            ArithOp::Add => a + b,
            ArithOp::Sub => a - b,
            ArithOp::Mul => a * b,
            ArithOp::Div => a / b,
        },
        FloatFormat::Single => {
            let (a, b) = (a as f32, b as f32);
            (match op {
                ArithOp::Add => a + b,
                ArithOp::Sub => a - b,
                ArithOp::Mul => a * b,
                ArithOp::Div => a / b,
            }) as f64
        }
    }
}

fn min_normal(fmt: FloatFormat) -> f64 {
    match fmt {
        FloatFormat::Double => f64::MIN_POSITIVE,
        FloatFormat::Single => f32::MIN_POSITIVE as f64,
    }
}

/// Whether a rounded result `r` of the exact value `exact` signals underflow: tiny and inexact.
fn underflows(exact: impl FnOnce() -> BigRational, r: f64, fmt: FloatFormat) -> bool {
    r.is_finite() && r.abs() < min_normal(fmt) && f64_to_rational(r) != exact()
}

/// Whether the formula holds when the program runs on `input`; `None` when it cannot be decided concretely.
pub(super) fn holds(formula: &Expr, input: &[ArgValue]) -> Option<bool> {
    Evaluator::new(formula).holds(input)
}

/// A formula prepared for evaluation on many inputs: its nodes in postorder, each with the slots of its children,
/// and its constants' values (rounding a rational to a double is most of a node's cost), computed once. An
/// evaluation fills one value slot per node in order, reading the children's slots: no hashing on the way.
pub(crate) struct Evaluator {
    /// Every node of the formula once, children before parents.
    nodes: Vec<Expr>,
    /// Per node, its children's fingerprints and slots.
    children: Vec<Vec<(u128, usize)>>,
    /// Per node, whether it is a constant (its slot is filled once, by `new`).
    constant: Vec<bool>,
    /// Per node, its value on the last input (`None`: it cannot be decided concretely).
    values: Vec<Option<V>>,
    /// The slot of each fingerprint, for the nodes asked about from outside.
    slot: sym::FingerprintMap<usize>,
    root: usize,
}

impl Evaluator {
    pub(crate) fn new(formula: &Expr) -> Evaluator {
        let nodes = formula.postorder();
        let slot: sym::FingerprintMap<usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, e)| (e.fingerprint(), i))
            .collect();
        let children: Vec<Vec<(u128, usize)>> = nodes
            .iter()
            .map(|e| {
                e.children()
                    .iter()
                    .filter_map(|c| Some((c.fingerprint(), *slot.get(&c.fingerprint())?)))
                    .collect()
            })
            .collect();
        let constant: Vec<bool> = nodes
            .iter()
            .map(|e| {
                matches!(
                    e.kind(),
                    Kind::RealConst(_) | Kind::IntConst(_) | Kind::BoolConst(_)
                )
            })
            .collect();
        let mut values: Vec<Option<V>> = vec![None; nodes.len()];
        for (i, e) in nodes.iter().enumerate() {
            if constant[i] {
                values[i] = eval_node(e, &[], Memo::new(&children[i], &values, &slot));
            }
        }
        let root = slot[&formula.fingerprint()];
        Evaluator {
            nodes,
            children,
            constant,
            values,
            slot,
            root,
        }
    }

    /// [`holds`] on `input`.
    pub(crate) fn holds(&mut self, input: &[ArgValue]) -> Option<bool> {
        self.evaluate(input);
        self.truth_at(self.root)
    }

    /// Evaluates every node on `input`; nodes that cannot be decided concretely, and those above them, have no
    /// value.
    pub(super) fn evaluate(&mut self, input: &[ArgValue]) {
        for i in 0..self.nodes.len() {
            if self.constant[i] {
                continue;
            }
            let memo = Memo::new(&self.children[i], &self.values, &self.slot);
            self.values[i] = eval_node(&self.nodes[i], input, memo);
        }
    }

    /// The truth of a Boolean node after [`Evaluator::evaluate`].
    pub(super) fn truth(&self, e: &Expr) -> Option<bool> {
        self.truth_at(*self.slot.get(&e.fingerprint())?)
    }

    fn truth_at(&self, slot: usize) -> Option<bool> {
        match self.values.get(slot)?.as_ref()? {
            V::B(b) => Some(*b),
            _ => None,
        }
    }

    /// The value of a floating-point node after [`Evaluator::evaluate`].
    pub(super) fn float(&self, e: &Expr) -> Option<f64> {
        match self
            .values
            .get(*self.slot.get(&e.fingerprint())?)?
            .as_ref()?
        {
            V::F(v) => Some(*v),
            _ => None,
        }
    }
}

/// The value of node `e` on `input`, from its children's values in `m`; `None` when it cannot be decided
/// concretely.
fn eval_node(e: &Expr, input: &[ArgValue], m: Memo<'_>) -> Option<V> {
    match e.kind() {
        Kind::RealConst(q) => Some(V::F(sym::const_f64(q))),
        Kind::IntConst(n) => Some(V::I(n.clone())),
        Kind::BoolConst(v) => Some(V::B(*v)),
        Kind::Param { index, ty } => eval_param(input.get(*index as usize)?, ty),
        kind if kind.is_float_operation() => eval_float(kind, m),
        Kind::FpToInt { .. }
        | Kind::IntToReal(_)
        | Kind::IntArith { .. }
        | Kind::Unsigned { .. }
        | Kind::Opaque { .. } => eval_integer(e.kind(), m),
        // `is_int`, `ite`, comparisons, connectives, exception atoms.
        kind => eval_logic(kind, m),
    }
}

/// The values of one node's children (by their slots), read by type.
#[derive(Clone, Copy)]
struct Memo<'a> {
    children: &'a [(u128, usize)],
    values: &'a [Option<V>],
    /// Every node's slot: for a node of many children (a long conjunction), and any other node asked.
    slot: &'a sym::FingerprintMap<usize>,
}

/// A node of more children than this finds them through the slot map rather than in its list.
const FEW_CHILDREN: usize = 8;

impl<'a> Memo<'a> {
    fn new(
        children: &'a [(u128, usize)],
        values: &'a [Option<V>],
        slot: &'a sym::FingerprintMap<usize>,
    ) -> Memo<'a> {
        Memo {
            children,
            values,
            slot,
        }
    }

    fn get(&self, x: &Expr) -> Option<&'a V> {
        let fingerprint = x.fingerprint();
        let found = (self.children.len() <= FEW_CHILDREN)
            .then(|| self.children.iter().find(|(f, _)| *f == fingerprint))
            .flatten()
            .map(|(_, s)| *s);
        let s = match found {
            Some(s) => s,
            None => *self.slot.get(&fingerprint)?,
        };
        self.values.get(s)?.as_ref()
    }

    /// A float value (an integer read as a float).
    fn f(&self, x: &Expr) -> Option<f64> {
        match self.get(x) {
            Some(V::F(v)) => Some(*v),
            Some(V::I(i)) => i.to_f64(),
            _ => None,
        }
    }

    fn i(&self, x: &Expr) -> Option<BigInt> {
        match self.get(x) {
            Some(V::I(v)) => Some(v.clone()),
            _ => None,
        }
    }

    fn b(&self, x: &Expr) -> Option<bool> {
        match self.get(x) {
            Some(V::B(v)) => Some(*v),
            _ => None,
        }
    }
}

/// An input parameter's value (`None` for a pointer).
fn eval_param(value: &ArgValue, ty: &sym::VarType) -> Option<V> {
    Some(match value {
        ArgValue::F64(v) => V::F(*v),
        ArgValue::F32(v) => V::F(*v as f64),
        ArgValue::Int(v) => match ty {
            // Integer terms hold the signed reading of the bits.
            sym::VarType::Int { bits, .. } if *bits > 1 => {
                V::I(sym::wrap_signed(&BigInt::from(*v), *bits))
            }
            _ => V::I(BigInt::from(*v)),
        },
        ArgValue::OutPtr => return None,
    })
}

/// Floating-point operations in IEEE arithmetic of their format; `None` for other kinds.
fn eval_float(kind: &Kind, m: Memo<'_>) -> Option<V> {
    Some(match kind {
        Kind::Arith { op, fmt, a, b } => V::F(ieee_arith(*op, *fmt, m.f(a)?, m.f(b)?)),
        Kind::Neg(a) => V::F(-m.f(a)?),
        Kind::Abs(a) => V::F(m.f(a)?.abs()),
        Kind::Fma { fmt, a, b, c } => V::F(match fmt {
            FloatFormat::Double => m.f(a)?.mul_add(m.f(b)?, m.f(c)?),
            FloatFormat::Single => (m.f(a)? as f32).mul_add(m.f(b)? as f32, m.f(c)? as f32) as f64,
        }),
        Kind::Convert { fmt, a } => match m.get(a)? {
            V::F(v) => V::F(in_format(*v, *fmt)),
            V::I(n) => V::F(match fmt {
                FloatFormat::Double => n.to_i128()? as f64,
                FloatFormat::Single => n.to_i128()? as f32 as f64,
            }),
            V::B(_) => return None,
        },
        Kind::Math { func, fmt, args } => {
            let xs: Option<Vec<f64>> = args.iter().map(|x| m.f(x)).collect();
            V::F(sym::ieee_math(*func, *fmt, &xs?))
        }
        Kind::ToIntegral { mode, a, .. } => {
            let x = m.f(a)?;
            V::F(match mode {
                Integral::Floor => x.floor(),
                Integral::Ceil => x.ceil(),
                Integral::Trunc => x.trunc(),
                Integral::Round => x.round(),
            })
        }
        _ => return None,
    })
}

/// Integer operations and the conversions between integers and reals; `None` for other kinds.
fn eval_integer(kind: &Kind, m: Memo<'_>) -> Option<V> {
    Some(match kind {
        Kind::FpToInt { bits, signed, a } => {
            let x = m.f(a)?;
            let (lo, hi) = int_range(*bits, *signed);
            let t = x.trunc();
            let in_range = t.is_finite() && {
                let q = f64_to_rational(t).to_integer();
                q >= lo && q <= hi
            };
            if in_range {
                V::I(sym::wrap_signed(&f64_to_rational(t).to_integer(), *bits))
            } else {
                // x86's "integer indefinite" value.
                V::I(-(BigInt::one() << (*bits as usize - 1)))
            }
        }
        Kind::IntToReal(a) => V::F(m.i(a)?.to_f64()?),
        Kind::IntArith { op, a, b } => {
            let (x, y) = (m.i(a)?, m.i(b)?);
            V::I(match op {
                IntOp::Add => x + y,
                IntOp::Sub => x - y,
                IntOp::Mul => x * y,
            })
        }
        Kind::Unsigned { bits, a } => V::I(sym::to_unsigned_value(&m.i(a)?, *bits)),
        Kind::Opaque { op, args, .. } if op == sym::FLOOR_POW2 => {
            let k = args.get(1)?.as_int()?.to_usize()?;
            V::I(m.i(args.first()?)? >> k)
        }
        Kind::Opaque { .. } => return None,
        _ => return None,
    })
}

/// Comparisons, Boolean connectives, `ite` and exception atoms; `None` for other kinds.
fn eval_logic(kind: &Kind, m: Memo<'_>) -> Option<V> {
    Some(match kind {
        Kind::IsInt(a) => V::B(m.f(a)?.fract() == 0.0),
        Kind::Ite { c, a, b: other } => {
            if m.b(c)? {
                m.get(a)?.clone()
            } else {
                m.get(other)?.clone()
            }
        }
        Kind::Cmp { op, a, b: y } => match (m.get(a)?, m.get(y)?) {
            (V::I(p), V::I(q)) => V::B(match op {
                CmpOp::Lt => p < q,
                CmpOp::Le => p <= q,
                CmpOp::Eq => p == q,
            }),
            (V::B(p), V::B(q)) if *op == CmpOp::Eq => V::B(p == q),
            _ => {
                let (p, q) = (m.f(a)?, m.f(y)?);
                V::B(match op {
                    CmpOp::Lt => p < q,
                    CmpOp::Le => p <= q,
                    CmpOp::Eq => p == q,
                })
            }
        },
        Kind::Not(a) => V::B(!m.b(a)?),
        Kind::And(xs) => {
            let mut all = true;
            for x in xs {
                all &= m.b(x)?;
            }
            V::B(all)
        }
        Kind::Or(xs) => {
            let mut any = false;
            for x in xs {
                any |= m.b(x)?;
            }
            V::B(any)
        }
        Kind::Exception { kind, site } => {
            let args: Option<Vec<f64>> = site.args.iter().map(|x| m.f(x)).collect();
            V::B(raises(*kind, site, &args?)?)
        }
        _ => return None,
    })
}

fn int_range(bits: u32, signed: bool) -> (BigInt, BigInt) {
    if signed {
        let half = BigInt::one() << (bits as usize - 1);
        (-half.clone(), half - 1)
    } else {
        (BigInt::zero(), (BigInt::one() << bits as usize) - 1)
    }
}

/// Whether the operation at `site` raises `kind` on these operand values.
fn raises(kind: ExceptionKind, site: &Site, args: &[f64]) -> Option<bool> {
    use ExceptionKind::*;
    let fmt = site.fmt;
    let x = *args.first()?;
    if args.iter().any(|v| !v.is_finite()) {
        // Operations on infinities or NaN: only the signalling cases matter, which the real model never reaches.
        return Some(false);
    }
    let exact = |v: f64| f64_to_rational(v);
    Some(match site.op {
        SiteOp::Arith(op) => {
            let y = *args.get(1)?;
            let r = ieee_arith(op, fmt, x, y);
            match (op, kind) {
                (ArithOp::Div, Invalid) => x == 0.0 && y == 0.0,
                (ArithOp::Div, DivideByZero) => x != 0.0 && y == 0.0,
                (ArithOp::Div, Overflow) => y != 0.0 && r.is_infinite(),
                (ArithOp::Div, Underflow) => y != 0.0 && underflows(|| exact(x) / exact(y), r, fmt),
                (_, Overflow) => r.is_infinite(),
                (ArithOp::Add, Underflow) => underflows(|| exact(x) + exact(y), r, fmt),
                (ArithOp::Sub, Underflow) => underflows(|| exact(x) - exact(y), r, fmt),
                (ArithOp::Mul, Underflow) => underflows(|| exact(x) * exact(y), r, fmt),
                _ => false,
            }
        }
        SiteOp::Fma => {
            let (y, z) = (*args.get(1)?, *args.get(2)?);
            let r = match fmt {
                FloatFormat::Double => x.mul_add(y, z),
                FloatFormat::Single => (x as f32).mul_add(y as f32, z as f32) as f64,
            };
            match kind {
                Overflow => r.is_infinite(),
                Underflow => underflows(|| exact(x) * exact(y) + exact(z), r, fmt),
                _ => false,
            }
        }
        SiteOp::Narrow => {
            let r = x as f32 as f64;
            match kind {
                Overflow => r.is_infinite(),
                Underflow => underflows(|| exact(x), r, FloatFormat::Single),
                _ => false,
            }
        }
        SiteOp::FpToInt { bits, signed } => {
            let (lo, hi) = int_range(bits, signed);
            let t = exact(x.trunc()).to_integer();
            kind == Invalid && (t < lo || t > hi)
        }
        SiteOp::Math(func) => {
            let r = sym::ieee_math(func, fmt, args);
            func.ieee_raises(kind, args, r, min_normal(fmt))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sym::{param, VarType};

    #[test]
    fn decides_overflow_and_underflow_of_a_product() {
        let x = param(0, VarType::Float(FloatFormat::Double));
        let site = Site {
            op: SiteOp::Arith(ArithOp::Mul),
            fmt: FloatFormat::Double,
            args: vec![x.clone(), x],
        };
        let overflow = sym::exception(ExceptionKind::Overflow, site.clone());
        let underflow = sym::exception(ExceptionKind::Underflow, site);
        assert_eq!(holds(&overflow, &[ArgValue::F64(1.5e154)]), Some(true));
        assert_eq!(holds(&overflow, &[ArgValue::F64(1e154)]), Some(false));
        assert_eq!(holds(&underflow, &[ArgValue::F64(1e-160)]), Some(true));
        assert_eq!(holds(&underflow, &[ArgValue::F64(0.0)]), Some(false));
    }

    /// Every function's IEEE check agrees with the kinds it declares: each declared kind is raised by some
    /// argument and not by an ordinary one.
    #[test]
    fn every_math_function_raises_what_it_declares() {
        use crate::sym::MathFn::*;
        use ExceptionKind::*;
        let cases: &[(crate::sym::MathFn, ExceptionKind, &[f64], &[f64])] = &[
            (Sqrt, Invalid, &[-1.0], &[4.0]),
            (Fmod, Invalid, &[1.0, 0.0], &[5.0, 3.0]),
            (Exp, Overflow, &[710.0], &[1.0]),
            (Exp, Underflow, &[-740.0], &[-1.0]),
            (Exp2, Overflow, &[1024.0], &[3.0]),
            (Exp2, Underflow, &[-1070.0], &[-3.0]),
            (Log, Invalid, &[-1.0], &[2.0]),
            (Log, DivideByZero, &[0.0], &[2.0]),
            (Log2, DivideByZero, &[0.0], &[2.0]),
            (Log10, Invalid, &[-2.0], &[10.0]),
            (Pow, Invalid, &[-2.0, 0.5], &[2.0, 0.5]),
            (Pow, DivideByZero, &[0.0, -1.0], &[0.0, 1.0]),
            (Pow, Overflow, &[10.0, 400.0], &[10.0, 3.0]),
            (Pow, Underflow, &[10.0, -320.0], &[10.0, -3.0]),
            (Hypot, Overflow, &[1.5e308, 1.5e308], &[3.0, 4.0]),
            (Sinh, Overflow, &[711.0], &[1.0]),
            (Cosh, Overflow, &[-711.0], &[1.0]),
            (Expm1, Overflow, &[710.0], &[1.0]),
            (Log1p, Invalid, &[-2.0], &[-0.5]),
            (Log1p, DivideByZero, &[-1.0], &[-0.5]),
            (Asin, Invalid, &[1.5], &[0.5]),
            (Acos, Invalid, &[-1.5], &[-0.5]),
        ];
        for &(func, kind, raising, ordinary) in cases {
            assert!(
                func.exception_kinds().contains(&kind),
                "{} does not declare {kind:?}",
                func.name()
            );
            let check = |args: &[f64]| {
                let r = sym::ieee_math(func, FloatFormat::Double, args);
                func.ieee_raises(kind, args, r, f64::MIN_POSITIVE)
            };
            assert!(
                check(raising),
                "{}({raising:?}) should raise {kind:?}",
                func.name()
            );
            assert!(
                !check(ordinary),
                "{}({ordinary:?}) should not raise {kind:?}",
                func.name()
            );
        }
    }
}
