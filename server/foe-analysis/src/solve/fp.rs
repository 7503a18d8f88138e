//! The floating-point-theory fallback: a query re-encoded in SMT-LIB's FloatingPoint theory (round to
//! nearest even), with each float input declared as its bit pattern so the model gives the exact input.

use crate::domain::Domain;
use crate::round::FloatFormat;
use crate::sym::{ArithOp, CmpOp, Expr, Integral, Kind, MathFn, SiteOp, VarType};
use crate::types::{ArgValue, ExceptionKind};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed};
use std::collections::HashMap;
use std::fmt::Write;

/// An FP-theory query: the SMT-LIB text and the float parameters whose bit patterns it solves for.
pub(super) struct FpQuery {
    pub(super) smtlib: String,
    pub(super) params: Vec<(u32, FloatFormat)>,
}

pub(super) fn bits_name(index: u32) -> String {
    format!("fpbits{index}")
}

fn sort(fmt: FloatFormat) -> &'static str {
    match fmt {
        FloatFormat::Double => "(_ FloatingPoint 11 53)",
        FloatFormat::Single => "(_ FloatingPoint 8 24)",
    }
}

fn to_fp(fmt: FloatFormat) -> &'static str {
    match fmt {
        FloatFormat::Double => "(_ to_fp 11 53)",
        FloatFormat::Single => "(_ to_fp 8 24)",
    }
}

fn width(fmt: FloatFormat) -> u32 {
    match fmt {
        FloatFormat::Double => 64,
        FloatFormat::Single => 32,
    }
}

/// A real literal in SMT-LIB syntax.
fn real_literal(q: &BigRational) -> String {
    let body = format!("(/ {}.0 {}.0)", q.numer().abs(), q.denom());
    if q.is_negative() {
        format!("(- {body})")
    } else {
        body
    }
}

fn finite(v: &str) -> String {
    format!("(not (or (fp.isInfinite {v}) (fp.isNaN {v})))")
}

struct Encoder {
    /// Format of each real-sorted node, by fingerprint.
    formats: crate::sym::FingerprintMap<FloatFormat>,
    names: crate::sym::FingerprintMap<String>,
    text: String,
}

impl Encoder {
    /// A real operand in `fmt`: a literal, a defined node, or a conversion of one.
    fn operand(&self, e: &Expr, fmt: FloatFormat) -> Option<String> {
        if let Kind::RealConst(q) = e.kind() {
            return Some(format!("({} RNE {})", to_fp(fmt), real_literal(q)));
        }
        let name = self.names.get(&e.fingerprint())?.clone();
        match self.formats.get(&e.fingerprint()) {
            Some(f) if *f == fmt => Some(name),
            Some(_) => Some(format!("({} RNE {name})", to_fp(fmt))),
            None => Some(name),
        }
    }

    /// The format two operands should be compared or combined in.
    fn common_format(&self, a: &Expr, b: &Expr) -> Option<FloatFormat> {
        self.formats
            .get(&a.fingerprint())
            .or_else(|| self.formats.get(&b.fingerprint()))
            .copied()
    }

    fn boolean(&self, e: &Expr) -> Option<String> {
        match e.kind() {
            Kind::BoolConst(b) => Some(b.to_string()),
            _ => self.names.get(&e.fingerprint()).cloned(),
        }
    }

    /// The SMT-LIB definition of one node (children already defined), with its sort and format.
    fn node(&self, e: &Expr) -> Option<(String, String, Option<FloatFormat>)> {
        match e.kind() {
            kind if kind.is_float_operation() => self.float_node(e),
            Kind::Ite { a, .. } if a.sort() == crate::sym::Sort::Real => self.float_node(e),
            Kind::Ite { .. }
            | Kind::Cmp { .. }
            | Kind::Not(_)
            | Kind::And(_)
            | Kind::Or(_)
            | Kind::Exception { .. } => self.bool_node(e),
            _ => None,
        }
    }

    /// A floating-point node: an operation rounded to nearest, a conversion, `sqrt`, an integral rounding or a
    /// floating-point `ite`; `None` for other kinds.
    fn float_node(&self, e: &Expr) -> Option<(String, String, Option<FloatFormat>)> {
        let real = |fmt: FloatFormat, body: String| Some((sort(fmt).to_string(), body, Some(fmt)));
        match e.kind() {
            Kind::Arith { op, fmt, a, b } => {
                let name = match op {
                    ArithOp::Add => "fp.add",
                    ArithOp::Sub => "fp.sub",
                    ArithOp::Mul => "fp.mul",
                    ArithOp::Div => "fp.div",
                };
                real(
                    *fmt,
                    format!(
                        "({name} RNE {} {})",
                        self.operand(a, *fmt)?,
                        self.operand(b, *fmt)?
                    ),
                )
            }
            Kind::Neg(a) | Kind::Abs(a) => {
                let fmt = *self.formats.get(&a.fingerprint())?;
                let op = if matches!(e.kind(), Kind::Neg(_)) {
                    "fp.neg"
                } else {
                    "fp.abs"
                };
                real(fmt, format!("({op} {})", self.operand(a, fmt)?))
            }
            Kind::Fma { fmt, a, b, c } => real(
                *fmt,
                format!(
                    "(fp.fma RNE {} {} {})",
                    self.operand(a, *fmt)?,
                    self.operand(b, *fmt)?,
                    self.operand(c, *fmt)?
                ),
            ),
            Kind::Convert { fmt, a } if a.sort() == crate::sym::Sort::Real => {
                let from = *self.formats.get(&a.fingerprint())?;
                real(
                    *fmt,
                    format!("({} RNE {})", to_fp(*fmt), self.operand(a, from)?),
                )
            }
            Kind::Math {
                func: MathFn::Sqrt,
                fmt,
                args,
            } => real(
                *fmt,
                format!("(fp.sqrt RNE {})", self.operand(args.first()?, *fmt)?),
            ),
            Kind::ToIntegral { mode, fmt, a } => {
                let rm = match mode {
                    Integral::Floor => "RTN",
                    Integral::Ceil => "RTP",
                    Integral::Trunc => "RTZ",
                    Integral::Round => "RNA",
                };
                real(
                    *fmt,
                    format!("(fp.roundToIntegral {rm} {})", self.operand(a, *fmt)?),
                )
            }
            Kind::Ite { c, a, b } if a.sort() == crate::sym::Sort::Real => {
                let fmt = self.common_format(a, b)?;
                real(
                    fmt,
                    format!(
                        "(ite {} {} {})",
                        self.boolean(c)?,
                        self.operand(a, fmt)?,
                        self.operand(b, fmt)?
                    ),
                )
            }
            _ => None,
        }
    }

    /// A Boolean node: a Boolean `ite`, a floating-point comparison, a connective or an exception condition;
    /// `None` for other kinds.
    fn bool_node(&self, e: &Expr) -> Option<(String, String, Option<FloatFormat>)> {
        let boolean = |body: String| Some(("Bool".to_string(), body, None));
        match e.kind() {
            Kind::Ite { c, a, b } if a.sort() == crate::sym::Sort::Bool => boolean(format!(
                "(ite {} {} {})",
                self.boolean(c)?,
                self.boolean(a)?,
                self.boolean(b)?
            )),
            Kind::Cmp { op, a, b } if a.sort() == crate::sym::Sort::Real => {
                let fmt = self.common_format(a, b)?;
                let name = match op {
                    CmpOp::Lt => "fp.lt",
                    CmpOp::Le => "fp.leq",
                    CmpOp::Eq => "fp.eq",
                };
                boolean(format!(
                    "({name} {} {})",
                    self.operand(a, fmt)?,
                    self.operand(b, fmt)?
                ))
            }
            Kind::Not(a) => boolean(format!("(not {})", self.boolean(a)?)),
            Kind::And(xs) | Kind::Or(xs) => {
                let op = if matches!(e.kind(), Kind::And(_)) {
                    "and"
                } else {
                    "or"
                };
                let parts: Option<Vec<String>> = xs.iter().map(|x| self.boolean(x)).collect();
                boolean(format!("({op} {})", parts?.join(" ")))
            }
            Kind::Exception { kind, site } => {
                let fmt = site.fmt;
                let arg_fmt = |i: usize| -> Option<FloatFormat> {
                    let a = site.args.get(i)?;
                    Some(self.formats.get(&a.fingerprint()).copied().unwrap_or(fmt))
                };
                let arg =
                    |i: usize| -> Option<String> { self.operand(site.args.get(i)?, arg_fmt(i)?) };
                boolean(exception_condition(*kind, site.op, fmt, &arg)?)
            }
            _ => None,
        }
    }
}

/// What the hardware checks for `kind` at an operation, in FP terms; `None` where the fallback does not apply.
fn exception_condition(
    kind: ExceptionKind,
    op: SiteOp,
    fmt: FloatFormat,
    arg: &dyn Fn(usize) -> Option<String>,
) -> Option<String> {
    use ExceptionKind::*;
    Some(match op {
        SiteOp::Arith(op) => {
            let (a, b) = (arg(0)?, arg(1)?);
            let name = match op {
                ArithOp::Add => "fp.add",
                ArithOp::Sub => "fp.sub",
                ArithOp::Mul => "fp.mul",
                ArithOp::Div => "fp.div",
            };
            let r = format!("({name} RNE {a} {b})");
            let operands_finite = format!("(and {} {})", finite(&a), finite(&b));
            match (op, kind) {
                (ArithOp::Div, Invalid) => format!("(and (fp.isZero {a}) (fp.isZero {b}))"),
                (ArithOp::Div, DivideByZero) => {
                    format!("(and (fp.isZero {b}) (not (fp.isZero {a})) {})", finite(&a))
                }
                (_, Overflow) => {
                    let divisor_nonzero = if op == ArithOp::Div {
                        format!(" (not (fp.isZero {b}))")
                    } else {
                        String::new()
                    };
                    format!("(and {operands_finite}{divisor_nonzero} (fp.isInfinite {r}))")
                }
                (ArithOp::Mul | ArithOp::Div, Underflow) => format!(
                    "(and {operands_finite} (not (fp.isZero {a})) (not (fp.isZero {b})) \
                     (or (fp.isSubnormal {r}) (fp.isZero {r})))"
                ),
                // Sums of floats that land in the subnormal range are exact: no underflow on x86.
                _ => return None,
            }
        }
        SiteOp::Fma => {
            let (a, b, c) = (arg(0)?, arg(1)?, arg(2)?);
            let r = format!("(fp.fma RNE {a} {b} {c})");
            let operands_finite = format!("(and {} {} {})", finite(&a), finite(&b), finite(&c));
            match kind {
                Overflow => format!("(and {operands_finite} (fp.isInfinite {r}))"),
                Underflow => format!("(and {operands_finite} (fp.isSubnormal {r}))"),
                _ => return None,
            }
        }
        SiteOp::Narrow => {
            let x = arg(0)?;
            let r = format!("({} RNE {x})", to_fp(fmt));
            match kind {
                Overflow => format!("(and {} (fp.isInfinite {r}))", finite(&x)),
                Underflow => format!(
                    "(and {} (or (fp.isSubnormal {r}) (and (fp.isZero {r}) (not (fp.isZero {x})))))",
                    finite(&x)
                ),
                _ => return None,
            }
        }
        SiteOp::FpToInt { bits, signed } => {
            let x = arg(0)?;
            let t = format!("(fp.roundToIntegral RTZ {x})");
            let pow = |k: usize| real_literal(&BigRational::from_integer(BigInt::one() << k));
            let (lo, hi) = if signed {
                (
                    format!("(- {})", pow(bits as usize - 1)),
                    pow(bits as usize - 1),
                )
            } else {
                ("0.0".to_string(), pow(bits as usize))
            };
            let lit = |v: &str| format!("({} RNE {v})", to_fp(fmt));
            format!(
                "(and {} (or (fp.lt {t} {}) (fp.geq {t} {})))",
                finite(&x),
                lit(&lo),
                lit(&hi)
            )
        }
        SiteOp::Math(MathFn::Sqrt) if kind == Invalid => {
            format!("(fp.lt {} ({} RNE 0.0))", arg(0)?, to_fp(fmt))
        }
        SiteOp::Math(_) => return None,
    })
}

/// The FP-theory form of `formula` with finite inputs and the `domain`, when every part of it has one (no
/// integers, no elementary functions but `sqrt`, no sums' underflow).
///
/// Parameters in `fixed` are constants (their bit patterns); the others are solved for.
pub(super) fn encode(
    formula: &Expr,
    domain: Option<&Domain>,
    fixed: &HashMap<u32, ArgValue>,
) -> Option<FpQuery> {
    let nodes = formula.postorder();
    let mut params: Vec<(u32, FloatFormat)> = Vec::new();
    let mut enc = Encoder {
        formats: Default::default(),
        names: Default::default(),
        text: String::new(),
    };
    for node in &nodes {
        match node.kind() {
            Kind::RealConst(_) | Kind::BoolConst(_) => {}
            Kind::Param {
                index,
                ty: VarType::Float(fmt),
            } => {
                let name = format!("fpx{index}");
                let bits = match fixed.get(index) {
                    Some(ArgValue::F64(v)) => format!("#x{:016x}", v.to_bits()),
                    Some(ArgValue::F32(v)) => format!("#x{:08x}", v.to_bits()),
                    _ => {
                        params.push((*index, *fmt));
                        let _ = writeln!(
                            enc.text,
                            "(declare-const {} (_ BitVec {}))",
                            bits_name(*index),
                            width(*fmt)
                        );
                        let _ = writeln!(
                            enc.text,
                            "(assert {})",
                            finite(&format!("({} {})", to_fp(*fmt), bits_name(*index)))
                        );
                        bits_name(*index)
                    }
                };
                let _ = writeln!(
                    enc.text,
                    "(define-fun {name} () {} ({} {bits}))",
                    sort(*fmt),
                    to_fp(*fmt)
                );
                enc.formats.insert(node.fingerprint(), *fmt);
                enc.names.insert(node.fingerprint(), name);
            }
            _ => {
                let (sort, body, fmt) = enc.node(node)?;
                let name = format!("fpn{}", enc.names.len());
                let _ = writeln!(enc.text, "(define-fun {name} () {sort} {body})");
                if let Some(fmt) = fmt {
                    enc.formats.insert(node.fingerprint(), fmt);
                }
                enc.names.insert(node.fingerprint(), name);
            }
        }
    }
    for range in domain.map(|d| d.ranges.as_slice()).unwrap_or(&[]) {
        if !params.iter().any(|(i, _)| *i as usize == range.param) {
            continue;
        }
        let x = format!("(fp.to_real fpx{})", range.param);
        for (bound, op_inclusive, op_strict) in [(range.lo, ">=", ">"), (range.hi, "<=", "<")] {
            if let Some(b) = bound {
                if !b.value.is_finite() {
                    continue;
                }
                let op = if b.inclusive { op_inclusive } else { op_strict };
                let lit = real_literal(&crate::round::f64_to_rational(b.value));
                let _ = writeln!(enc.text, "(assert ({op} {x} {lit}))");
            }
        }
    }
    let root = enc.boolean(formula)?;
    let _ = writeln!(enc.text, "(assert {root})");
    Some(FpQuery {
        smtlib: enc.text,
        params,
    })
}
