//! Symbolic expressions over the reals, integers and booleans: the plain-data, hash-consed terms that
//! [`crate::model`] builds from LLVM IR and [`crate::solve`] hands to Z3.
//!
//! Real-valued nodes stand for the exact real result of the floating-point operation they model and keep
//! that operation's [`FloatFormat`], so the same term can also be read in IEEE arithmetic (the concrete
//! check and the floating-point-theory fallback). Every node carries a 128-bit structural fingerprint:
//! equality and hashing are O(1), and syntactically equal formulae built anywhere compare equal.
//! Constructors fold constants, so a condition that cannot hold comes out as the constant `false`.

mod build;
mod cancellation;
mod display;
mod exceptions;
mod libm;
mod substitute;
mod wire;

pub use build::*;
pub use cancellation::*;
pub use exceptions::*;
pub use libm::*;
pub use wire::*;

use crate::round::{f64_to_rational, round_rational, FloatFormat};
use crate::types::ExceptionKind;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A map keyed by [`Expr::fingerprint`]: the keys are hashes already, so a fast non-cryptographic hasher.
pub type FingerprintMap<V> = rustc_hash::FxHashMap<u128, V>;
/// A set of [`Expr::fingerprint`]s (see [`FingerprintMap`]).
pub type FingerprintSet = rustc_hash::FxHashSet<u128>;

/// A symbolic term (real, integer or boolean valued).
#[derive(Clone)]
pub struct Expr(Arc<Node>);

/// A boolean-sorted [`Expr`]: a path condition or an exception condition.
pub type Formula = Expr;

struct Node {
    kind: Kind,
    sort: Sort,
    fingerprint: u128,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Sort {
    Real,
    Int,
    Bool,
}

/// The type of an input variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VarType {
    Float(FloatFormat),
    /// An integer of `bits` width. Every integer term holds the signed (two's complement) reading of its
    /// bits, whatever its C type; `signed` only says how to present the value (and `bits == 1` ranges 0..=1).
    Int {
        bits: u32,
        signed: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl ArithOp {
    pub fn symbol(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IntOp {
    Add,
    Sub,
    Mul,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpOp {
    Lt,
    Le,
    Eq,
}

/// Rounding of a real to an integral value (C `floor`, `ceil`, `trunc`, `round`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Integral {
    Floor,
    Ceil,
    Trunc,
    /// Half away from zero.
    Round,
}

/// The floating-point operation an exception condition is about, with its operands.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Site {
    pub op: SiteOp,
    /// The format of the operation's result (of the operand for `FpToInt`).
    pub fmt: FloatFormat,
    pub args: Vec<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SiteOp {
    Arith(ArithOp),
    /// a·b + c with one rounding (`fma`, `llvm.fmuladd`).
    Fma,
    /// Narrowing conversion (`fptrunc`) to `fmt`.
    Narrow,
    /// `fptosi` / `fptoui` to an integer of `bits`.
    FpToInt {
        bits: u32,
        signed: bool,
    },
    Math(MathFn),
}

/// A node of the term DAG.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kind {
    RealConst(BigRational),
    IntConst(BigInt),
    BoolConst(bool),
    /// Input parameter `index` of the analysed function.
    Param {
        index: u32,
        ty: VarType,
    },
    /// An IEEE `+ - * /` of `fmt`, valued as the exact real result.
    Arith {
        op: ArithOp,
        fmt: FloatFormat,
        a: Expr,
        b: Expr,
    },
    Neg(Expr),
    Abs(Expr),
    /// a·b + c exactly.
    Fma {
        fmt: FloatFormat,
        a: Expr,
        b: Expr,
        c: Expr,
    },
    /// A conversion to `fmt` (`fpext`, `fptrunc`, `sitofp`, `uitofp`): valued as its (real or integer) argument.
    Convert {
        fmt: FloatFormat,
        a: Expr,
    },
    /// An elementary function: a fresh value constrained by [`side_constraints`].
    Math {
        func: MathFn,
        fmt: FloatFormat,
        args: Vec<Expr>,
    },
    /// `floor`, `ceil`, `trunc`, `round` of a real: an integral real.
    ToIntegral {
        mode: Integral,
        fmt: FloatFormat,
        a: Expr,
    },
    /// `fptosi`/`fptoui`: the real truncated toward zero, held in signed form like every integer.
    FpToInt {
        bits: u32,
        signed: bool,
        a: Expr,
    },
    IntToReal(Expr),
    /// Integer arithmetic without wrap-around (symbolic operands only; constants wrap exactly).
    IntArith {
        op: IntOp,
        a: Expr,
        b: Expr,
    },
    /// The unsigned reading of an integer of `bits` held in signed form.
    Unsigned {
        bits: u32,
        a: Expr,
    },
    /// An integer operation foe does not model (`xor`, `udiv`, ... on symbolic values): an unconstrained
    /// integer of `bits` width that depends only on its arguments.
    Opaque {
        op: String,
        bits: u32,
        args: Vec<Expr>,
    },
    /// Whether a real is an integer.
    IsInt(Expr),
    Ite {
        c: Expr,
        a: Expr,
        b: Expr,
    },
    Cmp {
        op: CmpOp,
        a: Expr,
        b: Expr,
    },
    Not(Expr),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// The exception `kind` raised by `site`: over the reals it means [`real_condition`].
    Exception {
        kind: ExceptionKind,
        site: Site,
    },
}

impl Kind {
    /// Whether the node is a real-valued operation of floating-point code: arithmetic, negation, absolute value,
    /// `fma`, a conversion, an elementary function or an integral rounding.
    pub fn is_float_operation(&self) -> bool {
        matches!(
            self,
            Kind::Arith { .. }
                | Kind::Neg(_)
                | Kind::Abs(_)
                | Kind::Fma { .. }
                | Kind::Convert { .. }
                | Kind::Math { .. }
                | Kind::ToIntegral { .. }
        )
    }
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.fingerprint == other.0.fingerprint
    }
}
impl Eq for Expr {}
impl Hash for Expr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.fingerprint as u64);
    }
}
impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Expr {
    pub fn kind(&self) -> &Kind {
        &self.0.kind
    }
    pub fn sort(&self) -> Sort {
        self.0.sort
    }
    /// The structural fingerprint: equal for syntactically equal terms.
    pub fn fingerprint(&self) -> u128 {
        self.0.fingerprint
    }
    pub fn as_real(&self) -> Option<&BigRational> {
        match self.kind() {
            Kind::RealConst(q) => Some(q),
            _ => None,
        }
    }
    pub fn as_int(&self) -> Option<&BigInt> {
        match self.kind() {
            Kind::IntConst(i) => Some(i),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self.kind() {
            Kind::BoolConst(b) => Some(*b),
            _ => None,
        }
    }
    pub fn is_false(&self) -> bool {
        self.as_bool() == Some(false)
    }
    pub fn is_true(&self) -> bool {
        self.as_bool() == Some(true)
    }
    pub fn is_const(&self) -> bool {
        matches!(
            self.kind(),
            Kind::RealConst(_) | Kind::IntConst(_) | Kind::BoolConst(_)
        )
    }

    /// The direct subterms, in order.
    pub fn children(&self) -> Vec<&Expr> {
        children_of(self.kind())
    }

    /// Every distinct node reachable from `self`, children before parents.
    pub fn postorder(&self) -> Vec<Expr> {
        postorder_of(std::iter::once(self))
    }

    /// The input parameters this term mentions, by index.
    pub fn params(&self) -> Vec<(u32, VarType)> {
        let mut out: Vec<(u32, VarType)> = self
            .postorder()
            .iter()
            .filter_map(|e| match e.kind() {
                Kind::Param { index, ty } => Some((*index, *ty)),
                _ => None,
            })
            .collect();
        out.sort_by_key(|(i, _)| *i);
        out.dedup_by_key(|(i, _)| *i);
        out
    }
}

fn sort_of(kind: &Kind) -> Sort {
    match kind {
        Kind::RealConst(_)
        | Kind::Arith { .. }
        | Kind::Neg(_)
        | Kind::Abs(_)
        | Kind::Fma { .. }
        | Kind::Convert { .. }
        | Kind::Math { .. }
        | Kind::ToIntegral { .. }
        | Kind::IntToReal(_) => Sort::Real,
        Kind::Param {
            ty: VarType::Float(_),
            ..
        } => Sort::Real,
        Kind::IntConst(_)
        | Kind::Param {
            ty: VarType::Int { .. },
            ..
        }
        | Kind::FpToInt { .. }
        | Kind::IntArith { .. }
        | Kind::Unsigned { .. }
        | Kind::Opaque { .. } => Sort::Int,
        Kind::Ite { a, .. } => a.sort(),
        Kind::BoolConst(_)
        | Kind::IsInt(_)
        | Kind::Cmp { .. }
        | Kind::Not(_)
        | Kind::And(_)
        | Kind::Or(_)
        | Kind::Exception { .. } => Sort::Bool,
    }
}

/// The structural fingerprint of a node from its own payload and its children's fingerprints.
fn fingerprint_of(kind: &Kind) -> u128 {
    // The derived Debug text of the payload names the variant and every scalar field; children contribute
    // their fingerprints (not their text), so this stays linear in the DAG size.
    let tag: String = match kind {
        Kind::RealConst(q) if is_long(q) => {
            thread_local! {
                static KNOWN: PerThread<BigRational, u128> = Default::default();
            }
            // Remembered: writing a thousand-bit rational in decimal is most of what this costs.
            return remembered(&KNOWN, q, || hash_node(&format!("q{q}"), &[]));
        }
        Kind::RealConst(q) => format!("q{q}"),
        Kind::IntConst(i) => format!("i{i}"),
        Kind::BoolConst(b) => format!("b{b}"),
        Kind::Param { index, ty } => format!("p{index}{ty:?}"),
        Kind::Arith { op, fmt, .. } => format!("ar{op:?}{fmt:?}"),
        Kind::Neg(_) => "neg".into(),
        Kind::Abs(_) => "abs".into(),
        Kind::Fma { fmt, .. } => format!("fma{fmt:?}"),
        Kind::Convert { fmt, .. } => format!("cv{fmt:?}"),
        Kind::Math { func, fmt, .. } => format!("m{func:?}{fmt:?}"),
        Kind::ToIntegral { mode, fmt, .. } => format!("ti{mode:?}{fmt:?}"),
        Kind::FpToInt { bits, signed, .. } => format!("fi{bits}{signed}"),
        Kind::IntToReal(_) => "i2r".into(),
        Kind::IntArith { op, .. } => format!("ia{op:?}"),
        Kind::Unsigned { bits, .. } => format!("u{bits}"),
        Kind::Opaque { op, bits, .. } => format!("o{op}/{bits}"),
        Kind::IsInt(_) => "isint".into(),
        Kind::Ite { .. } => "ite".into(),
        Kind::Cmp { op, .. } => format!("c{op:?}"),
        Kind::Not(_) => "not".into(),
        Kind::And(_) => "and".into(),
        Kind::Or(_) => "or".into(),
        Kind::Exception { kind, site } => format!("x{kind:?}{:?}{:?}", site.op, site.fmt),
    };
    hash_node(&tag, &children_of(kind))
}

/// The fingerprint of a node of payload text `tag` and these children.
fn hash_node(tag: &str, children: &[&Expr]) -> u128 {
    let mut h = blake3::Hasher::new();
    h.update(tag.as_bytes());
    h.update(&[0xff]);
    h.update(&(children.len() as u32).to_le_bytes());
    for c in children {
        h.update(&c.fingerprint().to_le_bytes());
    }
    let bytes = h.finalize();
    u128::from_le_bytes(bytes.as_bytes()[..16].try_into().expect("16 bytes"))
}

/// Whether a rational is long enough that writing it in decimal costs more than looking it up: the format
/// thresholds (Ω, the smallest normal and their roundings) have a thousand bits and come back in every exception
/// condition.
pub(crate) fn is_long(q: &BigRational) -> bool {
    q.numer().bits() + q.denom().bits() > 256
}

/// A per-thread memo of [`remembered`].
pub(crate) type PerThread<K, V> = std::cell::RefCell<rustc_hash::FxHashMap<K, V>>;

/// `make()` for `key`, remembered in `memo` (at most a few thousand entries: it starts again when full).
pub(crate) fn remembered<K, V>(
    memo: &'static std::thread::LocalKey<PerThread<K, V>>,
    key: &K,
    make: impl FnOnce() -> V,
) -> V
where
    K: Hash + Eq + Clone,
    V: Clone,
{
    const KEPT: usize = 4096;
    if let Some(v) = memo.with(|m| m.borrow().get(key).cloned()) {
        return v;
    }
    let v = make();
    memo.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= KEPT {
            m.clear();
        }
        m.insert(key.clone(), v.clone());
    });
    v
}

/// The direct subterms of a node, in order (for an exception atom, its operation's operands).
fn children_of(kind: &Kind) -> Vec<&Expr> {
    match kind {
        Kind::RealConst(_) | Kind::IntConst(_) | Kind::BoolConst(_) | Kind::Param { .. } => vec![],
        Kind::Arith { a, b, .. } | Kind::IntArith { a, b, .. } | Kind::Cmp { a, b, .. } => {
            vec![a, b]
        }
        Kind::Neg(a)
        | Kind::Abs(a)
        | Kind::Convert { a, .. }
        | Kind::ToIntegral { a, .. }
        | Kind::FpToInt { a, .. }
        | Kind::IntToReal(a)
        | Kind::Unsigned { a, .. }
        | Kind::IsInt(a)
        | Kind::Not(a) => vec![a],
        Kind::Fma { a, b, c, .. } => vec![a, b, c],
        Kind::Ite { c, a, b } => vec![c, a, b],
        Kind::Math { args, .. } | Kind::Opaque { args, .. } | Kind::And(args) | Kind::Or(args) => {
            args.iter().collect()
        }
        Kind::Exception { site, .. } => site.args.iter().collect(),
    }
}

// ---------------------------------------------------------------------------------------------------------
thread_local! {
    /// Terms made on this thread so far: the work of building them, the same on every run of the same text.
    static TERMS_MADE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many terms this thread has made so far (a deterministic measure of the work of modelling).
pub fn terms_made() -> u64 {
    TERMS_MADE.with(|n| n.get())
}

fn mk(kind: Kind) -> Expr {
    TERMS_MADE.with(|n| n.set(n.get() + 1));
    let sort = sort_of(&kind);
    let fingerprint = fingerprint_of(&kind);
    Expr(Arc::new(Node {
        kind,
        sort,
        fingerprint,
    }))
}

// ---------------------------------------------------------------------------------------------------------

/// The value of a constant term as an `f64` (rounded), for display and concrete evaluation.
pub fn const_f64(q: &BigRational) -> f64 {
    round_rational(q, FloatFormat::Double)
}

/// Interprets a constant term as an `i64` (for integer constants that fit).
pub fn const_i64(e: &Expr) -> Option<i64> {
    e.as_int().and_then(|i| i.to_i64())
}

/// Every distinct node reachable from any of `roots`, children before parents: each shared subterm once, however
/// many roots reach it (the queries of one function share their path conditions).
pub fn postorder_of<'a>(roots: impl IntoIterator<Item = &'a Expr>) -> Vec<Expr> {
    let mut seen = FingerprintSet::default();
    let mut out = Vec::new();
    for root in roots {
        let mut stack: Vec<(Expr, bool)> = vec![(root.clone(), false)];
        while let Some((e, expanded)) = stack.pop() {
            if expanded {
                out.push(e);
                continue;
            }
            if !seen.insert(e.fingerprint()) {
                continue;
            }
            stack.push((e.clone(), true));
            for c in e.children().into_iter().rev() {
                if !seen.contains(&c.fingerprint()) {
                    stack.push((c.clone(), false));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x() -> Expr {
        param(0, VarType::Float(FloatFormat::Double))
    }

    #[test]
    fn a_big_constant_has_the_fingerprint_of_its_decimal_text_cold_and_remembered() {
        // Ω / 3: a thousand-bit numerator, remembered per thread after the first use.
        let q = f64_to_rational(f64::MAX) / BigRational::from_integer(3.into());
        assert!(is_long(&q));
        let mut h = blake3::Hasher::new();
        h.update(format!("q{q}").as_bytes());
        h.update(&[0xff]);
        h.update(&0u32.to_le_bytes());
        let text = u128::from_le_bytes(h.finalize().as_bytes()[..16].try_into().unwrap());
        assert_eq!(real(q.clone()).fingerprint(), text, "computed");
        assert_eq!(real(q.clone()).fingerprint(), text, "remembered");
        // A small one takes the ordinary way, to the same kind of value.
        let small = BigRational::new(3.into(), 7.into());
        let mut h = blake3::Hasher::new();
        h.update(format!("q{small}").as_bytes());
        h.update(&[0xff]);
        h.update(&0u32.to_le_bytes());
        let text = u128::from_le_bytes(h.finalize().as_bytes()[..16].try_into().unwrap());
        assert_eq!(real(small).fingerprint(), text);
    }

    #[test]
    fn equal_structure_is_equal_and_hashes_alike() {
        let a = arith(ArithOp::Mul, FloatFormat::Double, x(), real_i(2));
        let b = arith(ArithOp::Mul, FloatFormat::Double, x(), real_i(2));
        assert_eq!(a, b);
        assert_ne!(a, arith(ArithOp::Mul, FloatFormat::Single, x(), real_i(2)));
        let mut set = std::collections::HashSet::new();
        set.insert(a);
        assert!(set.contains(&b));
    }

    #[test]
    fn constants_fold_with_rounding_and_conditions_fold_exactly() {
        let third = arith(ArithOp::Div, FloatFormat::Double, real_i(1), real_i(3));
        assert_eq!(third.as_real(), Some(&f64_to_rational(1.0 / 3.0)));
        let site = Site {
            op: SiteOp::Arith(ArithOp::Div),
            fmt: FloatFormat::Double,
            args: vec![real_i(2), x()],
        };
        assert!(exception(ExceptionKind::Invalid, site.clone()).is_false());
        assert!(!exception(ExceptionKind::DivideByZero, site).is_const());
        let big = real_f64(f64::MAX);
        let site = Site {
            op: SiteOp::Arith(ArithOp::Mul),
            fmt: FloatFormat::Double,
            args: vec![big, real_i(2)],
        };
        assert!(exception(ExceptionKind::Overflow, site).is_true());
    }

    #[test]
    fn thresholds_are_the_rounding_ties() {
        for (fmt, max) in [
            (FloatFormat::Double, f64::MAX),
            (FloatFormat::Single, f32::MAX as f64),
        ] {
            assert_eq!(round_rational(&overflow_threshold(fmt), fmt), f64::INFINITY);
            let below = overflow_threshold(fmt) - pow2(-1);
            assert_eq!(round_rational(&below, fmt), max);
        }
    }

    #[test]
    fn boolean_folding() {
        let c = lt(x(), real_i(1));
        assert_eq!(and([tru(), c.clone(), c.clone()]), c);
        assert!(and([c.clone(), fals()]).is_false());
        assert!(or([c.clone(), tru()]).is_true());
        assert_eq!(not(not(c.clone())), c);
        assert_eq!(ite(c.clone(), tru(), fals()), c);
    }

    #[test]
    fn integers_wrap_when_constant() {
        let r = int_arith(IntOp::Add, 32, int_i(i32::MAX as i64), int_i(1));
        assert_eq!(const_i64(&r), Some(i32::MIN as i64));
        assert_eq!(const_i64(&unsigned(32, int_i(-1))), Some(u32::MAX as i64));
        assert_eq!(const_i64(&fp_to_int(32, true, real_f64(-2.7))), Some(-2));
        assert!(!fp_to_int(32, true, real_f64(3e9)).is_const());
    }
}
