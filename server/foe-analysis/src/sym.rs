//! Symbolic expressions over the reals, integers and booleans: the plain-data, hash-consed terms that
//! [`crate::model`] builds from LLVM IR and [`crate::solve`] hands to Z3.
//!
//! Real-valued nodes stand for the exact real result of the floating-point operation they model and keep
//! that operation's [`FloatFormat`], so the same term can also be read in IEEE arithmetic (the concrete
//! check and the floating-point-theory fallback). Every node carries a 128-bit structural fingerprint:
//! equality and hashing are O(1), and syntactically equal formulae built anywhere compare equal.
//! Constructors fold constants, so a condition that cannot hold comes out as the constant `false`.

use crate::round::{f64_to_rational, round_rational, FloatFormat};
use crate::types::ExceptionKind;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::RefCell;
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

/// Elementary functions modelled by a fresh value tied to its argument by side constraints
/// (Ariadne's dependent symbolic variables), except `Sqrt` which is exact (y·y = x, y ≥ 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MathFn {
    Sqrt,
    Exp,
    Exp2,
    Log,
    Log2,
    Log10,
    Pow,
    Sin,
    Cos,
    Tan,
    Atan,
    /// `fmod` / LLVM `frem`.
    Fmod,
    Hypot,
    Atan2,
    Cbrt,
    Sinh,
    Cosh,
    Tanh,
    Expm1,
    Log1p,
    Asin,
    Acos,
}

impl MathFn {
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Sqrt => "sqrt",
            MathFn::Exp => "exp",
            MathFn::Exp2 => "exp2",
            MathFn::Log => "log",
            MathFn::Log2 => "log2",
            MathFn::Log10 => "log10",
            MathFn::Pow => "pow",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Atan => "atan",
            MathFn::Fmod => "fmod",
            MathFn::Hypot => "hypot",
            MathFn::Atan2 => "atan2",
            MathFn::Cbrt => "cbrt",
            MathFn::Sinh => "sinh",
            MathFn::Cosh => "cosh",
            MathFn::Tanh => "tanh",
            MathFn::Expm1 => "expm1",
            MathFn::Log1p => "log1p",
            MathFn::Asin => "asin",
            MathFn::Acos => "acos",
        }
    }

    pub fn arity(self) -> usize {
        match self {
            MathFn::Pow | MathFn::Fmod | MathFn::Hypot | MathFn::Atan2 => 2,
            _ => 1,
        }
    }

    /// The exception kinds this function can raise on finite arguments, in a fixed order.
    pub fn exception_kinds(self) -> &'static [ExceptionKind] {
        use ExceptionKind::*;
        match self {
            MathFn::Sqrt | MathFn::Fmod => &[Invalid],
            MathFn::Exp | MathFn::Exp2 => &[Overflow, Underflow],
            MathFn::Log | MathFn::Log2 | MathFn::Log10 => &[Invalid, DivideByZero],
            MathFn::Pow => &[Invalid, DivideByZero, Overflow, Underflow],
            MathFn::Hypot | MathFn::Sinh | MathFn::Cosh | MathFn::Expm1 => &[Overflow],
            MathFn::Log1p => &[Invalid, DivideByZero],
            MathFn::Asin | MathFn::Acos => &[Invalid],
            MathFn::Sin
            | MathFn::Cos
            | MathFn::Tan
            | MathFn::Atan
            | MathFn::Atan2
            | MathFn::Cbrt
            | MathFn::Tanh => &[],
        }
    }

    /// Whether this function raises `kind` on the finite arguments `args`, whose IEEE result (the C library's,
    /// [`ieee_math`]) is `r`; `min_normal` is the format's smallest normal number. C Annex F: a pole is
    /// divide-by-zero, an argument outside the domain invalid, an infinite result of a finite argument overflow, a
    /// tiny nonzero-argument result underflow. Must agree with [`MathFn::exception_kinds`] (a test checks it).
    pub fn ieee_raises(self, kind: ExceptionKind, args: &[f64], r: f64, min_normal: f64) -> bool {
        use ExceptionKind::*;
        let x = args.first().copied().unwrap_or(0.0);
        let y = args.get(1).copied().unwrap_or(0.0);
        let tiny = r.abs() < min_normal;
        match (self, kind) {
            (MathFn::Sqrt, Invalid) => x < 0.0,
            (MathFn::Fmod, Invalid) => y == 0.0,
            (MathFn::Exp | MathFn::Exp2, Overflow) => r.is_infinite(),
            (MathFn::Exp | MathFn::Exp2, Underflow) => tiny && x != 0.0,
            (MathFn::Log | MathFn::Log2 | MathFn::Log10, Invalid) => x < 0.0,
            (MathFn::Log | MathFn::Log2 | MathFn::Log10, DivideByZero) => x == 0.0,
            (MathFn::Pow, Invalid) => x < 0.0 && y.fract() != 0.0,
            (MathFn::Pow, DivideByZero) => x == 0.0 && y < 0.0,
            (MathFn::Pow, Overflow) => x != 0.0 && r.is_infinite(),
            (MathFn::Pow, Underflow) => tiny && x != 0.0 && y != 0.0 && r.is_finite(),
            (MathFn::Hypot | MathFn::Sinh | MathFn::Cosh | MathFn::Expm1, Overflow) => {
                r.is_infinite()
            }
            (MathFn::Log1p, Invalid) => x < -1.0,
            (MathFn::Log1p, DivideByZero) => x == -1.0,
            (MathFn::Asin | MathFn::Acos, Invalid) => x.abs() > 1.0,
            _ => false,
        }
    }
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
        let mut seen = FingerprintSet::default();
        let mut out = Vec::new();
        let mut stack: Vec<(Expr, bool)> = vec![(self.clone(), false)];
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
        out
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
    let mut h = blake3::Hasher::new();
    // The derived Debug text of the payload names the variant and every scalar field; children contribute
    // their fingerprints (not their text), so this stays linear in the DAG size.
    let tag: String = match kind {
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
    h.update(tag.as_bytes());
    h.update(&[0xff]);
    let children = children_of(kind);
    h.update(&(children.len() as u32).to_le_bytes());
    for c in children {
        h.update(&c.fingerprint().to_le_bytes());
    }
    let bytes = h.finalize();
    u128::from_le_bytes(bytes.as_bytes()[..16].try_into().expect("16 bytes"))
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
// Wire format: terms cross to the solver process as JSON, each shared node written once
// ---------------------------------------------------------------------------------------------------------

thread_local! {
    /// While serialising under [`with_wire_tables`]: the post-order number of every node written so far, by
    /// fingerprint (structurally equal nodes are one node).
    static WRITTEN: RefCell<FingerprintMap<u32>> = RefCell::new(FingerprintMap::default());
    /// While deserialising under [`with_wire_tables`]: the nodes read so far, in post-order.
    static READ: RefCell<Vec<Expr>> = const { RefCell::new(Vec::new()) };
}

/// A node on the wire: its definition the first time, a reference to its post-order number after that, so a
/// DAG with sharing stays the size of the DAG.
#[derive(Serialize, Deserialize)]
enum WireNode<K> {
    #[serde(rename = "d")]
    Def(K),
    #[serde(rename = "r")]
    Ref(u32),
}

/// Runs `f` (one serialisation or deserialisation of a message holding terms) with fresh node tables, so that
/// references are numbered within the message.
pub fn with_wire_tables<T>(f: impl FnOnce() -> T) -> T {
    let clear = || {
        WRITTEN.with(|w| w.borrow_mut().clear());
        READ.with(|r| r.borrow_mut().clear());
    };
    clear();
    let out = f();
    clear();
    out
}

impl Serialize for Expr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let key = self.0.fingerprint;
        if let Some(id) = WRITTEN.with(|w| w.borrow().get(&key).copied()) {
            return WireNode::<&Kind>::Ref(id).serialize(serializer);
        }
        let done = WireNode::Def(&self.0.kind).serialize(serializer)?;
        // Numbered after its children, as the reader pushes it.
        WRITTEN.with(|w| {
            let mut w = w.borrow_mut();
            let id = w.len() as u32;
            w.insert(key, id);
        });
        Ok(done)
    }
}

impl<'de> Deserialize<'de> for Expr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Expr, D::Error> {
        match WireNode::<Kind>::deserialize(deserializer)? {
            WireNode::Ref(id) => READ
                .with(|r| r.borrow().get(id as usize).cloned())
                .ok_or_else(|| serde::de::Error::custom(format!("unknown term reference {id}"))),
            WireNode::Def(kind) => {
                let e = mk(kind);
                READ.with(|r| r.borrow_mut().push(e.clone()));
                Ok(e)
            }
        }
    }
}

fn mk(kind: Kind) -> Expr {
    let sort = sort_of(&kind);
    let fingerprint = fingerprint_of(&kind);
    Expr(Arc::new(Node {
        kind,
        sort,
        fingerprint,
    }))
}

// ---------------------------------------------------------------------------------------------------------
// Constants and thresholds
// ---------------------------------------------------------------------------------------------------------

pub fn real(q: BigRational) -> Expr {
    mk(Kind::RealConst(q))
}
pub fn real_i(n: i64) -> Expr {
    real(BigRational::from_integer(n.into()))
}
/// The exact value of a finite double (or of a float widened to double).
pub fn real_f64(v: f64) -> Expr {
    real(f64_to_rational(v))
}
pub fn int(n: BigInt) -> Expr {
    mk(Kind::IntConst(n))
}
pub fn int_i(n: i64) -> Expr {
    int(BigInt::from(n))
}
pub fn boolean(b: bool) -> Expr {
    mk(Kind::BoolConst(b))
}
pub fn tru() -> Expr {
    boolean(true)
}
pub fn fals() -> Expr {
    boolean(false)
}
pub fn param(index: u32, ty: VarType) -> Expr {
    mk(Kind::Param { index, ty })
}

fn pow2(e: i64) -> BigRational {
    if e >= 0 {
        BigRational::from_integer(BigInt::one() << e as usize)
    } else {
        BigRational::new(BigInt::one(), BigInt::one() << (-e) as usize)
    }
}

/// Ω, the largest finite value of `fmt`.
pub fn max_finite(fmt: FloatFormat) -> BigRational {
    match fmt {
        FloatFormat::Double => f64_to_rational(f64::MAX),
        FloatFormat::Single => f64_to_rational(f32::MAX as f64),
    }
}

/// Ω + 2^(emax−p): the smallest real that rounds to infinity under round-to-nearest-even.
pub fn overflow_threshold(fmt: FloatFormat) -> BigRational {
    match fmt {
        FloatFormat::Double => max_finite(fmt) + pow2(970),
        FloatFormat::Single => max_finite(fmt) + pow2(103),
    }
}

/// λ, the smallest positive normal value of `fmt`.
pub fn min_normal(fmt: FloatFormat) -> BigRational {
    match fmt {
        FloatFormat::Double => pow2(-1022),
        FloatFormat::Single => pow2(-126),
    }
}

/// The smallest positive subnormal value of `fmt`.
pub fn min_subnormal(fmt: FloatFormat) -> BigRational {
    match fmt {
        FloatFormat::Double => pow2(-1074),
        FloatFormat::Single => pow2(-149),
    }
}

/// The exact value `q` rounded to `fmt`, if finite.
fn round_to(q: &BigRational, fmt: FloatFormat) -> Option<BigRational> {
    let v = round_rational(q, fmt);
    v.is_finite().then(|| f64_to_rational(v))
}

// ---------------------------------------------------------------------------------------------------------
// Real-valued constructors (fold constants)
// ---------------------------------------------------------------------------------------------------------

/// The exact real `a op b` over constants (None for a division by zero).
fn exact_arith(op: ArithOp, a: &BigRational, b: &BigRational) -> Option<BigRational> {
    Some(match op {
        ArithOp::Add => a + b,
        ArithOp::Sub => a - b,
        ArithOp::Mul => a * b,
        ArithOp::Div => {
            if b.is_zero() {
                return None;
            }
            a / b
        }
    })
}

/// An IEEE operation of `fmt`: over constants the correctly rounded result (as the program computes it),
/// otherwise the exact real term.
pub fn arith(op: ArithOp, fmt: FloatFormat, a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_real(), b.as_real()) {
        if let Some(r) = exact_arith(op, x, y).and_then(|r| round_to(&r, fmt)) {
            return real(r);
        }
    }
    mk(Kind::Arith { op, fmt, a, b })
}

/// The exact real `a op b` (constants fold without rounding); used inside exception conditions.
pub fn exact(op: ArithOp, a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_real(), b.as_real()) {
        if let Some(r) = exact_arith(op, x, y) {
            return real(r);
        }
    }
    // The format is irrelevant to the real reading; Double marks "exact helper".
    mk(Kind::Arith {
        op,
        fmt: FloatFormat::Double,
        a,
        b,
    })
}

pub fn neg(a: Expr) -> Expr {
    match a.kind() {
        Kind::RealConst(q) => real(-q),
        _ => mk(Kind::Neg(a)),
    }
}

pub fn abs(a: Expr) -> Expr {
    match a.kind() {
        Kind::RealConst(q) => real(q.abs()),
        _ => mk(Kind::Abs(a)),
    }
}

pub fn fma(fmt: FloatFormat, a: Expr, b: Expr, c: Expr) -> Expr {
    if let (Some(x), Some(y), Some(z)) = (a.as_real(), b.as_real(), c.as_real()) {
        if let Some(r) = round_to(&(x * y + z), fmt) {
            return real(r);
        }
    }
    mk(Kind::Fma { fmt, a, b, c })
}

/// A conversion to `fmt` of a real (`fpext`, `fptrunc`) or of an integer (`sitofp`; `uitofp` passes
/// [`unsigned`] of it).
pub fn convert(fmt: FloatFormat, a: Expr) -> Expr {
    let exact = match a.kind() {
        Kind::RealConst(q) => Some(q.clone()),
        Kind::IntConst(i) => Some(BigRational::from_integer(i.clone())),
        _ => None,
    };
    if let Some(q) = exact {
        if let Some(r) = round_to(&q, fmt) {
            return real(r);
        }
    }
    // Widening a real changes nothing; keep the node only where rounding can happen.
    if let Kind::Convert { fmt: inner, .. } | Kind::Arith { fmt: inner, .. } = a.kind() {
        if *inner == fmt {
            return a;
        }
    }
    mk(Kind::Convert { fmt, a })
}

pub fn math(func: MathFn, fmt: FloatFormat, args: Vec<Expr>) -> Expr {
    mk(Kind::Math { func, fmt, args })
}

pub fn to_integral(mode: Integral, fmt: FloatFormat, a: Expr) -> Expr {
    if let Some(q) = a.as_real() {
        let r = match mode {
            Integral::Floor => q.floor(),
            Integral::Ceil => q.ceil(),
            Integral::Trunc => q.trunc(),
            Integral::Round => q.round(),
        };
        return real(r);
    }
    mk(Kind::ToIntegral { mode, fmt, a })
}

pub fn int_to_real(a: Expr) -> Expr {
    match a.kind() {
        Kind::IntConst(i) => real(BigRational::from_integer(i.clone())),
        _ => mk(Kind::IntToReal(a)),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Integer constructors
// ---------------------------------------------------------------------------------------------------------

/// `v` wrapped into the signed range of `bits` (two's complement).
pub fn wrap_signed(v: &BigInt, bits: u32) -> BigInt {
    let modulus = BigInt::one() << bits as usize;
    let half = BigInt::one() << (bits as usize - 1);
    let mut r = v % &modulus;
    if r.is_negative() {
        r += &modulus;
    }
    if r >= half {
        r -= modulus;
    }
    r
}

/// `v` (signed form) read as unsigned of `bits`.
pub fn to_unsigned_value(v: &BigInt, bits: u32) -> BigInt {
    if v.is_negative() {
        v + (BigInt::one() << bits as usize)
    } else {
        v.clone()
    }
}

/// Integer `a op b` of `bits` width: wraps exactly over constants, unbounded over symbolic operands.
pub fn int_arith(op: IntOp, bits: u32, a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        let r = match op {
            IntOp::Add => x + y,
            IntOp::Sub => x - y,
            IntOp::Mul => x * y,
        };
        return int(wrap_signed(&r, bits));
    }
    match (op, a.as_int(), b.as_int()) {
        (IntOp::Add, _, Some(y)) | (IntOp::Sub, _, Some(y)) if y.is_zero() => return a,
        (IntOp::Add, Some(x), _) if x.is_zero() => return b,
        (IntOp::Mul, _, Some(y)) if y.is_one() => return a,
        (IntOp::Mul, Some(x), _) if x.is_one() => return b,
        _ => {}
    }
    mk(Kind::IntArith { op, a, b })
}

/// The unsigned reading of a signed-form integer of `bits`.
pub fn unsigned(bits: u32, a: Expr) -> Expr {
    match a.kind() {
        Kind::IntConst(i) => int(to_unsigned_value(i, bits)),
        Kind::Unsigned { .. } => a,
        _ => mk(Kind::Unsigned { bits, a }),
    }
}

/// The name of the opaque integer `⌊x / 2^k⌋` (arguments `x` and the constant `k`), tied to `x` by
/// [`side_constraints`]: what a mask of low bits needs (`x & -4` is `4⌊x/4⌋`, as a vectorised loop's trip count).
pub const FLOOR_POW2: &str = "floor/2^k";

/// `⌊x / 2^k⌋` of a `bits`-wide integer in signed form.
pub fn floor_pow2(bits: u32, x: Expr, k: u32) -> Expr {
    if let Some(v) = x.as_int() {
        return int(v >> k as usize);
    }
    opaque(FLOOR_POW2, bits, vec![x, int_i(k as i64)])
}

/// `x & m` for a constant `m` whose unsigned form is one run of ones, bits `k` to `j - 1` (`-4`, `0x7ffffffc`,
/// `3`): `2^k⌊x/2^k⌋ - 2^j⌊x/2^j⌋`, exact over the signed form (two's complement); `None` for other masks.
pub fn and_mask(bits: u32, x: Expr, m: &BigInt) -> Option<Expr> {
    let u = to_unsigned_value(m, bits);
    if u.is_zero() {
        return Some(int_i(0));
    }
    let k = u.trailing_zeros()? as u32;
    let run = &u >> k as usize;
    let ones = run.bits() as u32;
    if run != (BigInt::one() << ones as usize) - 1 {
        return None;
    }
    let j = k + ones;
    let low = |x: Expr| {
        let q = floor_pow2(bits, x, k);
        int_arith(IntOp::Mul, bits, int(BigInt::one() << k as usize), q)
    };
    let kept = if k == 0 { x.clone() } else { low(x.clone()) };
    if j >= bits {
        return Some(kept);
    }
    let high = int_arith(
        IntOp::Mul,
        bits,
        int(BigInt::one() << j as usize),
        floor_pow2(bits, x, j),
    );
    Some(int_arith(IntOp::Sub, bits, kept, high))
}

pub fn opaque(op: &str, bits: u32, args: Vec<Expr>) -> Expr {
    mk(Kind::Opaque {
        op: op.to_string(),
        bits,
        args,
    })
}

/// Truncation toward zero of a real to an integer (`fptosi`/`fptoui`).
pub fn fp_to_int(bits: u32, signed: bool, a: Expr) -> Expr {
    if let Some(q) = a.as_real() {
        let t = q.trunc().to_integer();
        let in_range = if signed {
            let half = BigInt::one() << (bits as usize - 1);
            t >= -half.clone() && t < half
        } else {
            !t.is_negative() && t < (BigInt::one() << bits as usize)
        };
        if in_range {
            // Held in signed form like every other integer.
            return int(wrap_signed(&t, bits));
        }
    }
    mk(Kind::FpToInt { bits, signed, a })
}

// ---------------------------------------------------------------------------------------------------------
// Boolean constructors
// ---------------------------------------------------------------------------------------------------------

fn const_cmp(op: CmpOp, a: &Expr, b: &Expr) -> Option<bool> {
    let ord = match (a.kind(), b.kind()) {
        (Kind::RealConst(x), Kind::RealConst(y)) => x.cmp(y),
        (Kind::IntConst(x), Kind::IntConst(y)) => x.cmp(y),
        _ => {
            if a == b {
                return Some(op != CmpOp::Lt);
            }
            return None;
        }
    };
    Some(match op {
        CmpOp::Lt => ord.is_lt(),
        CmpOp::Le => ord.is_le(),
        CmpOp::Eq => ord.is_eq(),
    })
}

pub fn cmp(op: CmpOp, a: Expr, b: Expr) -> Expr {
    match const_cmp(op, &a, &b) {
        Some(v) => boolean(v),
        None => mk(Kind::Cmp { op, a, b }),
    }
}
pub fn lt(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Lt, a, b)
}
pub fn le(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Le, a, b)
}
pub fn gt(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Lt, b, a)
}
pub fn ge(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Le, b, a)
}
pub fn eq(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Eq, a, b)
}
pub fn ne(a: Expr, b: Expr) -> Expr {
    not(eq(a, b))
}

pub fn not(a: Expr) -> Expr {
    match a.kind() {
        Kind::BoolConst(b) => boolean(!b),
        Kind::Not(inner) => inner.clone(),
        _ => mk(Kind::Not(a)),
    }
}

/// Conjunction: flattens nested conjunctions, drops `true` and repeats, and is `false` if any part is.
pub fn and(parts: impl IntoIterator<Item = Expr>) -> Expr {
    let mut out: Vec<Expr> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |e: Expr, out: &mut Vec<Expr>| {
        if seen.insert(e.fingerprint()) {
            out.push(e);
        }
    };
    for p in parts {
        match p.kind() {
            Kind::BoolConst(true) => {}
            Kind::BoolConst(false) => return fals(),
            Kind::And(inner) => {
                for e in inner {
                    push(e.clone(), &mut out);
                }
            }
            _ => push(p, &mut out),
        }
    }
    match out.len() {
        0 => tru(),
        1 => out.pop().expect("one part"),
        _ => mk(Kind::And(out)),
    }
}

/// Disjunction: flattens, drops `false` and repeats, and is `true` if any part is.
pub fn or(parts: impl IntoIterator<Item = Expr>) -> Expr {
    let mut out: Vec<Expr> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in parts {
        match p.kind() {
            Kind::BoolConst(false) => {}
            Kind::BoolConst(true) => return tru(),
            Kind::Or(inner) => {
                for e in inner {
                    if seen.insert(e.fingerprint()) {
                        out.push(e.clone());
                    }
                }
            }
            _ => {
                if seen.insert(p.fingerprint()) {
                    out.push(p)
                }
            }
        }
    }
    match out.len() {
        0 => fals(),
        1 => out.pop().expect("one part"),
        _ => mk(Kind::Or(out)),
    }
}

pub fn implies(a: Expr, b: Expr) -> Expr {
    or([not(a), b])
}

pub fn is_int(a: Expr) -> Expr {
    match a.kind() {
        Kind::RealConst(q) => boolean(q.is_integer()),
        _ => mk(Kind::IsInt(a)),
    }
}

/// `if c then a else b` for any sort.
pub fn ite(c: Expr, a: Expr, b: Expr) -> Expr {
    match c.as_bool() {
        Some(true) => a,
        Some(false) => b,
        None if a == b => a,
        None if a.sort() == Sort::Bool => match (a.as_bool(), b.as_bool()) {
            (Some(true), Some(false)) => c,
            (Some(false), Some(true)) => not(c),
            _ => mk(Kind::Ite { c, a, b }),
        },
        None => mk(Kind::Ite { c, a, b }),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Exception conditions (Table I of the FOE notes, with round-to-nearest thresholds; Ariadne Fig. 3.3)
// ---------------------------------------------------------------------------------------------------------

/// The exception `kind` at `site`: the atom, or a constant when the real condition folds to one.
pub fn exception(kind: ExceptionKind, site: Site) -> Formula {
    let condition = real_condition(kind, &site);
    if condition.is_const() {
        return condition;
    }
    mk(Kind::Exception { kind, site })
}

/// |e| ≥ t for a constant t > 0.
fn abs_ge(e: &Expr, t: &BigRational) -> Expr {
    or([ge(e.clone(), real(t.clone())), le(e.clone(), real(-t))])
}

/// 0 < |e| < t for a constant t > 0.
fn abs_tiny(e: &Expr, t: &BigRational) -> Expr {
    let zero = real_i(0);
    or([
        and([lt(zero.clone(), e.clone()), lt(e.clone(), real(t.clone()))]),
        and([lt(real(-t), e.clone()), lt(e.clone(), zero)]),
    ])
}

fn rational_f64(v: f64) -> BigRational {
    f64_to_rational(v)
}

/// The condition over the reals under which `site` raises `kind` (false when it cannot). Overflow, underflow and
/// division by zero also require the operands to be finite (|a| ≤ Ω): an operation on an infinity raises none of
/// them.
pub fn real_condition(kind: ExceptionKind, site: &Site) -> Formula {
    let core = operation_condition(kind, site);
    let needs_finite = match kind {
        ExceptionKind::Overflow | ExceptionKind::Underflow => true,
        // Only a finite non-zero dividend divided by zero signals division by zero.
        ExceptionKind::DivideByZero => site.op == SiteOp::Arith(ArithOp::Div),
        ExceptionKind::Invalid => false,
    };
    if !needs_finite || core.is_false() {
        return core;
    }
    // The operands are finite (Ω of their own format); parameters already are. Earlier operations are not
    // constrained: that would be the negation of earlier exception conditions, which makes formulae large.
    let mut finite = Vec::new();
    for arg in &site.args {
        let fmt = match arg.kind() {
            Kind::Arith { fmt, .. } | Kind::Fma { fmt, .. } | Kind::Convert { fmt, .. } => *fmt,
            Kind::Math {
                func:
                    MathFn::Exp
                    | MathFn::Exp2
                    | MathFn::Pow
                    | MathFn::Tan
                    | MathFn::Hypot
                    | MathFn::Sinh
                    | MathFn::Cosh
                    | MathFn::Expm1,
                fmt,
                ..
            } => *fmt,
            _ => continue,
        };
        let max = max_finite(fmt);
        finite.push(le(arg.clone(), real(max.clone())));
        finite.push(ge(arg.clone(), real(-max)));
    }
    and(finite.into_iter().chain([core]))
}

/// The exception condition proper of Table I (and Figure 3.3 for elementary functions).
fn operation_condition(kind: ExceptionKind, site: &Site) -> Formula {
    use ExceptionKind::*;
    let fmt = site.fmt;
    let big = overflow_threshold(fmt);
    let tiny = min_normal(fmt);
    let zero = || real_i(0);
    let arg = |i: usize| site.args.get(i).cloned().unwrap_or_else(zero);
    match (site.op, kind) {
        (SiteOp::Arith(ArithOp::Div), _) => {
            let (x, y) = (arg(0), arg(1));
            match kind {
                Invalid => and([eq(x, zero()), eq(y, zero())]),
                DivideByZero => and([ne(x, zero()), eq(y, zero())]),
                Overflow => {
                    // |x| ≥ |y|·T, y ≠ 0, split on the sign of y.
                    let yt = exact(ArithOp::Mul, y.clone(), real(big));
                    let neg_yt = neg(yt.clone());
                    or([
                        and([
                            gt(y.clone(), zero()),
                            or([ge(x.clone(), yt.clone()), le(x.clone(), neg_yt.clone())]),
                        ]),
                        and([lt(y, zero()), or([ge(x.clone(), neg_yt), le(x, yt)])]),
                    ])
                }
                Underflow => {
                    // 0 < |x| < |y|·λ.
                    let yl = exact(ArithOp::Mul, y.clone(), real(tiny));
                    let neg_yl = neg(yl.clone());
                    and([
                        ne(x.clone(), zero()),
                        or([
                            and([
                                gt(y.clone(), zero()),
                                lt(neg_yl.clone(), x.clone()),
                                lt(x.clone(), yl.clone()),
                            ]),
                            and([lt(y, zero()), lt(yl, x.clone()), lt(x, neg_yl)]),
                        ]),
                    ])
                }
            }
        }
        (SiteOp::Arith(op), Overflow | Underflow) => {
            let r = exact(op, arg(0), arg(1));
            if kind == Overflow {
                abs_ge(&r, &big)
            } else {
                abs_tiny(&r, &tiny)
            }
        }
        (SiteOp::Fma, Overflow | Underflow) => {
            let r = exact(ArithOp::Add, exact(ArithOp::Mul, arg(0), arg(1)), arg(2));
            if kind == Overflow {
                abs_ge(&r, &big)
            } else {
                abs_tiny(&r, &tiny)
            }
        }
        (SiteOp::Narrow, Overflow) => abs_ge(&arg(0), &big),
        (SiteOp::Narrow, Underflow) => abs_tiny(&arg(0), &tiny),
        (SiteOp::FpToInt { bits, signed }, Invalid) => {
            // Valid iff the value truncated toward zero fits: −2^(w−1) − 1 < x < 2^(w−1), or −1 < x < 2^w.
            let x = arg(0);
            let (lo, hi) = if signed {
                let half = BigInt::one() << (bits as usize - 1);
                (-half.clone() - 1, half)
            } else {
                (BigInt::from(-1), BigInt::one() << bits as usize)
            };
            or([
                le(x.clone(), real(BigRational::from_integer(lo))),
                ge(x, real(BigRational::from_integer(hi))),
            ])
        }
        (SiteOp::Math(func), _) => math_condition(func, fmt, kind, &site.args),
        _ => fals(),
    }
}

/// Ariadne's rules for elementary functions, with thresholds of `fmt`.
fn math_condition(func: MathFn, fmt: FloatFormat, kind: ExceptionKind, args: &[Expr]) -> Formula {
    use ExceptionKind::*;
    let zero = || real_i(0);
    let x = args.first().cloned().unwrap_or_else(zero);
    let single = fmt == FloatFormat::Single;
    match (func, kind) {
        (MathFn::Sqrt, Invalid) => lt(x, zero()),
        (MathFn::Fmod, Invalid) => eq(args.get(1).cloned().unwrap_or_else(zero), zero()),
        (MathFn::Exp, Overflow) => {
            // ln(Ω): 709.782712893384 / 88.72283905206835 (the double just below the true value)
            gt(
                x,
                real(rational_f64(if single {
                    88.72283905206835
                } else {
                    709.782712893384
                })),
            )
        }
        (MathFn::Exp, Underflow) => {
            // ln(λ): −708.3964185322641 / −87.33654475055310
            lt(
                x,
                real(rational_f64(if single {
                    -87.3365447505531
                } else {
                    -708.3964185322641
                })),
            )
        }
        (MathFn::Expm1, Overflow) => gt(
            x,
            real(rational_f64(if single {
                88.72283905206835
            } else {
                709.782712893384
            })),
        ),
        // |x| > asinh(Ω) = acosh(Ω) ≈ ln(2Ω): 710.4758600739439 / 89.41598629223294 (doubles below the value).
        (MathFn::Sinh | MathFn::Cosh, Overflow) => {
            let t = real(rational_f64(if single {
                89.41598629223294
            } else {
                710.4758600739439
            }));
            or([gt(x.clone(), t.clone()), lt(x, neg(t))])
        }
        (MathFn::Hypot, Overflow) => {
            let y = args.get(1).cloned().unwrap_or_else(zero);
            let big = overflow_threshold(fmt);
            let squares = exact(
                ArithOp::Add,
                exact(ArithOp::Mul, x.clone(), x),
                exact(ArithOp::Mul, y.clone(), y),
            );
            ge(squares, real(&big * &big))
        }
        (MathFn::Log1p, Invalid) => lt(x, real_i(-1)),
        (MathFn::Log1p, DivideByZero) => eq(x, real_i(-1)),
        (MathFn::Asin | MathFn::Acos, Invalid) => or([gt(x.clone(), real_i(1)), lt(x, real_i(-1))]),
        (MathFn::Exp2, Overflow) => ge(x, real_i(if single { 128 } else { 1024 })),
        (MathFn::Exp2, Underflow) => lt(x, real_i(if single { -126 } else { -1022 })),
        (MathFn::Log | MathFn::Log2 | MathFn::Log10, Invalid) => lt(x, zero()),
        (MathFn::Log | MathFn::Log2 | MathFn::Log10, DivideByZero) => eq(x, zero()),
        (MathFn::Pow, _) => {
            let y = args.get(1).cloned().unwrap_or_else(zero);
            match kind {
                // A negative base with a non-integral exponent.
                Invalid => and([lt(x, zero()), not(is_int(y))]),
                DivideByZero => and([eq(x, zero()), lt(y, zero())]),
                // Sufficient conditions: 2^129 / 2^1025 overflow, 2^-160 / 2^-1080 underflow (inexactly).
                Overflow => and([
                    ge(x, real_i(2)),
                    ge(y, real_i(if single { 129 } else { 1025 })),
                ]),
                Underflow => and([
                    ge(x, real_i(2)),
                    le(y, real_i(if single { -160 } else { -1080 })),
                ]),
            }
        }
        _ => fals(),
    }
}

/// Facts that tie the fresh value of an elementary function (or an unmodelled integer) to its arguments;
/// every query mentioning `e` must include them.
pub fn side_constraints(e: &Expr) -> Vec<Formula> {
    let zero = || real_i(0);
    let one = || real_i(1);
    match e.kind() {
        Kind::Math { func, args, .. } => {
            let x = args.first().cloned().unwrap_or_else(zero);
            let d = e.clone();
            match func {
                MathFn::Sqrt => vec![
                    ge(d.clone(), zero()),
                    eq(exact(ArithOp::Mul, d.clone(), d), x),
                ],
                MathFn::Exp | MathFn::Exp2 => vec![
                    gt(d.clone(), zero()),
                    implies(ge(x.clone(), zero()), ge(d.clone(), one())),
                    implies(le(x.clone(), zero()), le(d.clone(), one())),
                    if *func == MathFn::Exp {
                        ge(d, exact(ArithOp::Add, one(), x))
                    } else {
                        tru()
                    },
                ],
                MathFn::Log | MathFn::Log2 | MathFn::Log10 => vec![
                    gt(x.clone(), zero()),
                    implies(ge(x.clone(), one()), ge(d.clone(), zero())),
                    implies(le(x.clone(), one()), le(d.clone(), zero())),
                    if *func == MathFn::Log {
                        le(d, exact(ArithOp::Sub, x, one()))
                    } else {
                        tru()
                    },
                ],
                MathFn::Sin | MathFn::Cos => vec![ge(d.clone(), real_i(-1)), le(d, one())],
                MathFn::Atan | MathFn::Asin => vec![gt(d.clone(), real_i(-2)), lt(d, real_i(2))],
                MathFn::Atan2 => vec![gt(d.clone(), real_i(-4)), lt(d, real_i(4))],
                MathFn::Acos => vec![ge(d.clone(), zero()), lt(d, real_i(4))],
                MathFn::Tanh => vec![ge(d.clone(), real_i(-1)), le(d, one())],
                // Exact like sqrt: d ≥ 0, d·d = x² + y²; d³ = x.
                MathFn::Hypot => {
                    let y = args.get(1).cloned().unwrap_or_else(zero);
                    vec![
                        ge(d.clone(), zero()),
                        eq(
                            exact(ArithOp::Mul, d.clone(), d),
                            exact(
                                ArithOp::Add,
                                exact(ArithOp::Mul, x.clone(), x),
                                exact(ArithOp::Mul, y.clone(), y),
                            ),
                        ),
                    ]
                }
                MathFn::Cbrt => vec![eq(
                    exact(ArithOp::Mul, exact(ArithOp::Mul, d.clone(), d.clone()), d),
                    x,
                )],
                // sinh x has the sign of x and |sinh x| ≥ |x|; cosh x ≥ 1; expm1 x ≥ x and > -1.
                MathFn::Sinh => vec![
                    implies(ge(x.clone(), zero()), ge(d.clone(), x.clone())),
                    implies(le(x.clone(), zero()), le(d, x)),
                ],
                MathFn::Cosh => vec![ge(d, one())],
                MathFn::Expm1 => vec![gt(d.clone(), real_i(-1)), ge(d, x)],
                // Defined for x > -1, and log1p x ≤ x.
                MathFn::Log1p => vec![gt(x.clone(), real_i(-1)), le(d, x)],
                MathFn::Tan => vec![],
                MathFn::Pow => {
                    let y = args.get(1).cloned().unwrap_or_else(zero);
                    vec![
                        implies(gt(x, zero()), gt(d.clone(), zero())),
                        implies(eq(y, zero()), eq(d, one())),
                    ]
                }
                MathFn::Fmod => {
                    let y = args.get(1).cloned().unwrap_or_else(zero);
                    vec![
                        lt(
                            exact(ArithOp::Mul, d.clone(), d.clone()),
                            exact(ArithOp::Mul, y.clone(), y),
                        ),
                        ge(exact(ArithOp::Mul, d, x), zero()),
                    ]
                }
            }
        }
        Kind::Opaque { op, args, .. } if op == FLOOR_POW2 => {
            let (Some(x), Some(k)) = (args.first(), args.get(1).and_then(|k| k.as_int()?.to_u32()))
            else {
                return vec![];
            };
            // 2^k q <= x < 2^k q + 2^k
            let scale = int(BigInt::one() << k as usize);
            let scaled = mk(Kind::IntArith {
                op: IntOp::Mul,
                a: scale.clone(),
                b: e.clone(),
            });
            let next = mk(Kind::IntArith {
                op: IntOp::Add,
                a: scaled.clone(),
                b: scale,
            });
            vec![le(scaled, x.clone()), lt(x.clone(), next)]
        }
        Kind::Opaque { bits, .. } => {
            let half = BigInt::one() << (*bits as usize - 1);
            vec![ge(e.clone(), int(-half.clone())), lt(e.clone(), int(half))]
        }
        _ => vec![],
    }
}

/// The value of a constant term as an `f64` (rounded), for display and concrete evaluation.
pub fn const_f64(q: &BigRational) -> f64 {
    round_rational(q, FloatFormat::Double)
}

// ---------------------------------------------------------------------------------------------------------
// Display: an SMT-LIB-like prefix form, cut off when large.
// ---------------------------------------------------------------------------------------------------------

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut budget = 2000usize;
        write_expr(self, f, &mut budget)
    }
}

fn write_expr(e: &Expr, f: &mut fmt::Formatter<'_>, budget: &mut usize) -> fmt::Result {
    if *budget == 0 {
        return write!(f, "…");
    }
    *budget -= 1;
    let head: String = match e.kind() {
        Kind::RealConst(q) => {
            let v = const_f64(q);
            return if q.is_integer()
                && q.abs() < BigRational::from_integer(BigInt::from(1u64 << 53))
            {
                write!(f, "{}", q.to_integer())
            } else if f64_to_rational(v) == *q || !v.is_finite() {
                write!(f, "{v:e}")
            } else {
                write!(f, "~{v:e}")
            };
        }
        Kind::IntConst(i) => return write!(f, "{i}"),
        Kind::BoolConst(b) => return write!(f, "{b}"),
        Kind::Param { index, ty } => {
            return match ty {
                VarType::Float(_) => write!(f, "x{index}"),
                VarType::Int { .. } => write!(f, "n{index}"),
            }
        }
        Kind::Arith { op, .. } => op.symbol().to_string(),
        Kind::Neg(_) => "-".into(),
        Kind::Abs(_) => "abs".into(),
        Kind::Fma { .. } => "fma".into(),
        Kind::Convert { fmt, .. } => format!(
            "to_{}",
            if *fmt == FloatFormat::Single {
                "f32"
            } else {
                "f64"
            }
        ),
        Kind::Math { func, .. } => func.name().into(),
        Kind::ToIntegral { mode, .. } => format!("{mode:?}").to_lowercase(),
        Kind::FpToInt { bits, signed, .. } => {
            format!("fpto{}i{bits}", if *signed { "s" } else { "u" })
        }
        Kind::IntToReal(_) => "to_real".into(),
        Kind::IntArith { op, .. } => match op {
            IntOp::Add => "+i",
            IntOp::Sub => "-i",
            IntOp::Mul => "*i",
        }
        .into(),
        Kind::Unsigned { bits, .. } => format!("u{bits}"),
        Kind::Opaque { op, bits, .. } => format!("{op}.i{bits}"),
        Kind::IsInt(_) => "is_int".into(),
        Kind::Ite { .. } => "ite".into(),
        Kind::Cmp { op, .. } => match op {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "=",
        }
        .into(),
        Kind::Not(_) => "not".into(),
        Kind::And(_) => "and".into(),
        Kind::Or(_) => "or".into(),
        Kind::Exception { kind, site } => {
            let op = match site.op {
                SiteOp::Arith(op) => op.symbol().to_string(),
                SiteOp::Fma => "fma".into(),
                SiteOp::Narrow => "fptrunc".into(),
                SiteOp::FpToInt { .. } => "fptoi".into(),
                SiteOp::Math(m) => m.name().into(),
            };
            format!("{kind}@{op}")
        }
    };
    write!(f, "({head}")?;
    for c in e.children() {
        write!(f, " ")?;
        write_expr(c, f, budget)?;
    }
    write!(f, ")")
}

/// An elementary function evaluated in IEEE arithmetic of `fmt`, as the system libm computes it.
pub fn ieee_math(func: MathFn, fmt: FloatFormat, args: &[f64]) -> f64 {
    let x = args.first().copied().unwrap_or(0.0);
    let y = args.get(1).copied().unwrap_or(0.0);
    if fmt == FloatFormat::Single {
        let (x, y) = (x as f32, y as f32);
        return match func {
            MathFn::Sqrt => x.sqrt(),
            MathFn::Exp => x.exp(),
            MathFn::Exp2 => x.exp2(),
            MathFn::Log => x.ln(),
            MathFn::Log2 => x.log2(),
            MathFn::Log10 => x.log10(),
            MathFn::Pow => x.powf(y),
            MathFn::Sin => x.sin(),
            MathFn::Cos => x.cos(),
            MathFn::Tan => x.tan(),
            MathFn::Atan => x.atan(),
            MathFn::Fmod => x % y,
            MathFn::Hypot => x.hypot(y),
            MathFn::Atan2 => x.atan2(y),
            MathFn::Cbrt => x.cbrt(),
            MathFn::Sinh => x.sinh(),
            MathFn::Cosh => x.cosh(),
            MathFn::Tanh => x.tanh(),
            MathFn::Expm1 => x.exp_m1(),
            MathFn::Log1p => x.ln_1p(),
            MathFn::Asin => x.asin(),
            MathFn::Acos => x.acos(),
        } as f64;
    }
    match func {
        MathFn::Sqrt => x.sqrt(),
        MathFn::Exp => x.exp(),
        MathFn::Exp2 => x.exp2(),
        MathFn::Log => x.ln(),
        MathFn::Log2 => x.log2(),
        MathFn::Log10 => x.log10(),
        MathFn::Pow => x.powf(y),
        MathFn::Sin => x.sin(),
        MathFn::Cos => x.cos(),
        MathFn::Tan => x.tan(),
        MathFn::Atan => x.atan(),
        MathFn::Fmod => x % y,
        MathFn::Hypot => x.hypot(y),
        MathFn::Atan2 => x.atan2(y),
        MathFn::Cbrt => x.cbrt(),
        MathFn::Sinh => x.sinh(),
        MathFn::Cosh => x.cosh(),
        MathFn::Tanh => x.tanh(),
        MathFn::Expm1 => x.exp_m1(),
        MathFn::Log1p => x.ln_1p(),
        MathFn::Asin => x.asin(),
        MathFn::Acos => x.acos(),
    }
}

/// Interprets a constant term as an `i64` (for integer constants that fit).
pub fn const_i64(e: &Expr) -> Option<i64> {
    e.as_int().and_then(|i| i.to_i64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x() -> Expr {
        param(0, VarType::Float(FloatFormat::Double))
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
        assert_eq!(
            round_rational(
                &overflow_threshold(FloatFormat::Double),
                FloatFormat::Double
            ),
            f64::INFINITY
        );
        let below = overflow_threshold(FloatFormat::Double) - pow2(-1);
        assert_eq!(round_rational(&below, FloatFormat::Double), f64::MAX);
        assert_eq!(
            round_rational(
                &overflow_threshold(FloatFormat::Single),
                FloatFormat::Single
            ),
            f64::INFINITY
        );
        let below = overflow_threshold(FloatFormat::Single) - pow2(-1);
        assert_eq!(round_rational(&below, FloatFormat::Single), f32::MAX as f64);
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
