//! Interval refutation: a query whose exception condition cannot hold anywhere in the box of its inputs is
//! unsatisfiable, which interval arithmetic over the reals (outward rounded) often shows in microseconds where
//! nlsat needs milliseconds. The box is the declared input domain (or each format's finite values), narrowed by
//! the query's own conjuncts that bound a parameter (`x < 2`, `1/x <= y`, `0 <= 1 - x`, `|x| < 0.5`, `x*x < c`:
//! the path condition), a few rounds. A conjunct that keeps a parameter out of an interval (`|x| >= 1e-7`,
//! `|x - 1| >= 0.01`) cuts the box there, splitting it in two when the gap lies inside it.
//! Where the box as a whole proves nothing, it is bisected (a bounded number of times, depth first) and each half
//! tried again: the over-approximation of a polynomial shrinks with its box. Only a definite "no" is used;
//! everything else goes to Z3.

use crate::domain::Domain;
use crate::round::{between_f64, f64_to_rational, ordered_f64};
use crate::sym::{self, ArithOp, CmpOp, Expr, Kind};
use crate::types::{FunctionSignature, ParamType};
use num_rational::BigRational;
use num_traits::{One, Signed, Zero};

/// A three-valued truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truth {
    True,
    False,
    Unknown,
}

/// The abstract value of a node.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Abs {
    /// A real in [lo, hi] (endpoints may be infinite).
    Real(f64, f64),
    Bool(Truth),
    /// Anything (integers, functions of two arguments, NaN endpoints).
    Top,
}

/// Rounds of narrowing the box by the conjuncts: a bound found late can tighten another only in a later round.
const NARROWING_ROUNDS: usize = 3;

/// Gaps a box is split at (`|x| >= m` where x's interval spans (-m, m)): two boxes per gap.
const MAX_SPLITS: usize = 2;

/// The box: per parameter, its interval (`None` for parameters interval arithmetic knows nothing of).
pub(super) type Box = Vec<Option<(f64, f64)>>;

/// Whether `formula` is false for every input in the box of `domain` (parameters without a range span their
/// format's finite values), narrowed by the conjuncts of `formula` that bound a parameter.
pub(super) fn refutes(formula: &Expr, sig: &FunctionSignature, domain: Option<&Domain>) -> bool {
    refute(formula, sig, domain).is_none()
}

/// The boxes the formula may hold somewhere in, as far as the bisections went (the ones it was not refuted in,
/// the last level's and those left unexamined), in order along the parameters; `None` when it is false for every
/// input (see [`refutes`]). Their ends are where a search for an input looks closer.
pub(super) fn refute(
    formula: &Expr,
    sig: &FunctionSignature,
    domain: Option<&Domain>,
) -> Option<Vec<Box>> {
    let (bounds, gaps) = narrowed_box(formula, sig, domain)?;
    let mentioned: Vec<usize> = formula
        .params()
        .into_iter()
        .map(|(i, _)| i as usize)
        .filter(|&i| bounds.get(i).is_some_and(Option::is_some))
        .collect();
    let mut boxes = split_at_gaps(bounds, &gaps);
    boxes.reverse();
    let mut bisections = 0;
    let mut centred_refutations = 0;
    let mut nodes = None;
    let mut open = Vec::new();
    while let Some(b) = boxes.pop() {
        let mut memo = sym::FingerprintMap::default();
        if eval(formula, &b, &mut memo) == Abs::Bool(Truth::False) {
            continue;
        }
        if let [param] = mentioned.as_slice() {
            let nodes = nodes.get_or_insert_with(|| centred::Nodes::of(formula, *param));
            if centred::refutes(formula, nodes, &b, *param) {
                centred_refutations += 1;
                continue;
            }
        }
        let halves = (bisections < MAX_BISECTIONS && mentioned.len() == 1)
            .then(|| bisect(&b, &mentioned))
            .flatten();
        let Some((below, above)) = halves else {
            open.push(b);
            open.extend(boxes.drain(..).rev());
            break;
        };
        bisections += 1;
        boxes.push(above);
        boxes.push(below);
    }
    tracing::trace!(
        refuted = open.is_empty(),
        bisections,
        centred_refutations,
        params = mentioned.len(),
        "interval refutation"
    );
    (!open.is_empty()).then_some(open)
}

/// Bisections of the box a refutation may make: a box the formula may hold somewhere in is split in two and each
/// half tried again, depth first. Intervals over-approximate a polynomial by the spread of its terms, which halving
/// the box shrinks: the corpus's refutations took up to 14 (Cephes `dawsn`'s series, where nlsat gave up on eleven
/// underflow queries after 100-250 ms each). A formula that holds somewhere costs this many evaluations. Only
/// formulae of one parameter are bisected: of several, none was refuted so in the corpus, and GSL's
/// `dilogc_fundamental` (7281 formulae of three) spent a fifth more time for it.
const MAX_BISECTIONS: usize = 16;

/// Magnitudes up to which an interval with an end at zero is halved at its other end's `2^-SMALL_EXPONENT`.
const MODERATE: f64 = 1048576.0;
/// See [`MODERATE`]: the part of `[0, hi]` below `hi·2^-20` acts as zero for most formulae; the binades above
/// it matter.
const SMALL_EXPONENT: i32 = 20;

/// `b` halved across its widest parameter among `params` (in floats), in the middle of its floats: `[-Ω, Ω]`
/// splits at 0, `[0, Ω]` near 1, `[3, 1e9]` near 5e4 (binades halve first, and within a binade the float middle
/// is the arithmetic one); a moderate interval with an end at zero splits at its other end's `2^-20`, not among
/// the subnormals. `None` when no parameter's interval holds two floats.
fn bisect(b: &Box, params: &[usize]) -> Option<(Box, Box)> {
    let floats = |lo: f64, hi: f64| i128::from(ordered_f64(hi)) - i128::from(ordered_f64(lo));
    let (widest, (lo, hi)) = params
        .iter()
        .filter_map(|&i| Some((i, b[i]?)))
        .max_by_key(|&(i, (lo, hi))| (floats(lo, hi), std::cmp::Reverse(i)))?;
    if floats(lo, hi) < 2 {
        return None;
    }
    let small = 2f64.powi(-SMALL_EXPONENT);
    let mid = if lo == 0.0 && hi <= MODERATE {
        hi * small
    } else if hi == 0.0 && lo >= -MODERATE {
        lo * small
    } else {
        between_f64(lo, hi, 1, 2)
    };
    let (mut below, mut above) = (b.clone(), b.clone());
    below[widest] = Some((lo, mid));
    above[widest] = Some((mid, hi));
    Some((below, above))
}

/// Per parameter, the open intervals it lies outside of (`|x| >= m`, `|x - 1| >= 0.01`).
type Gaps = Vec<Vec<(f64, f64)>>;

/// The box of `domain` narrowed by the conjuncts of `formula`, with the gaps they leave in it; `None` when the
/// box is empty.
fn narrowed_box(
    formula: &Expr,
    sig: &FunctionSignature,
    domain: Option<&Domain>,
) -> Option<(Box, Gaps)> {
    let mut bounds: Box = (0..sig.params.len())
        .map(|i| declared_range(sig, domain, i))
        .collect();
    let mut gaps: Gaps = vec![Vec::new(); sig.params.len()];
    let conjuncts: &[Expr] = match formula.kind() {
        Kind::And(xs) => xs,
        _ => std::slice::from_ref(formula),
    };
    for _ in 0..NARROWING_ROUNDS {
        let mut memo = sym::FingerprintMap::default();
        let mut narrowed = false;
        for c in conjuncts {
            for bound in bounds_from(c, &bounds, &mut memo) {
                let (index, lo, hi) = match bound {
                    Bound::Within(index, lo, hi) => (index, lo, hi),
                    Bound::Outside(index, lo, hi) => {
                        if lo < hi && !gaps[index].contains(&(lo, hi)) {
                            gaps[index].push((lo, hi));
                        }
                        (index, f64::NEG_INFINITY, f64::INFINITY)
                    }
                };
                let Some((old_lo, old_hi)) = bounds[index] else {
                    continue;
                };
                let (mut new_lo, mut new_hi) = (old_lo.max(lo), old_hi.min(hi));
                // A gap cuts an interval that ends inside it (or starts inside it) back to its edge.
                for &(gap_lo, gap_hi) in &gaps[index] {
                    if new_lo > gap_lo {
                        new_lo = new_lo.max(gap_hi);
                    }
                    if new_hi < gap_hi {
                        new_hi = new_hi.min(gap_lo);
                    }
                }
                if new_lo > new_hi {
                    return None;
                }
                if (new_lo, new_hi) != (old_lo, old_hi) {
                    bounds[index] = Some((new_lo, new_hi));
                    narrowed = true;
                }
            }
        }
        if !narrowed {
            break;
        }
    }
    Some((bounds, gaps))
}

/// The boxes left of `bounds` by its gaps: a gap strictly inside its parameter's interval splits each box that
/// holds it in two (at most [`MAX_SPLITS`] gaps, so at most 2^MAX_SPLITS boxes).
fn split_at_gaps(bounds: Box, gaps: &Gaps) -> Vec<Box> {
    let mut boxes = vec![bounds];
    let all_gaps = gaps
        .iter()
        .enumerate()
        .flat_map(|(i, g)| g.iter().map(move |&(lo, hi)| (i, lo, hi)));
    let mut splits = 0;
    for (i, gap_lo, gap_hi) in all_gaps {
        if splits == MAX_SPLITS {
            break;
        }
        let inside = |b: &Box| b[i].is_some_and(|(lo, hi)| lo <= gap_lo && gap_hi <= hi);
        if !boxes.iter().any(inside) {
            continue;
        }
        splits += 1;
        boxes = boxes
            .into_iter()
            .flat_map(|b| {
                let Some((lo, hi)) = b[i].filter(|_| inside(&b)) else {
                    return vec![b];
                };
                let (mut below, mut above) = (b.clone(), b);
                below[i] = Some((lo, gap_lo));
                above[i] = Some((gap_hi, hi));
                vec![below, above]
            })
            .collect();
    }
    boxes
}

/// What one conjunct says of one parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    /// The parameter lies in `[lo, hi]`.
    Within(usize, f64, f64),
    /// The parameter lies outside the open interval `(lo, hi)`.
    Outside(usize, f64, f64),
}

/// What an expression is of one float parameter `x`, for bounding it: `a·x + b` (through conversions, which keep
/// the real, and constants added, subtracted, multiplied and divided by), its magnitude, or the square of `x`.
#[derive(Debug, Clone, PartialEq)]
enum OfParam {
    Linear(usize, BigRational, BigRational),
    Magnitude(usize, BigRational, BigRational),
    Squared(usize),
}

fn constant(e: &Expr) -> Option<&BigRational> {
    match e.kind() {
        Kind::RealConst(q) => Some(q),
        Kind::Convert { a, .. } => constant(a),
        _ => None,
    }
}

fn of_param(e: &Expr) -> Option<OfParam> {
    use OfParam::*;
    let linear = |e: &Expr| match of_param(e)? {
        Linear(i, a, b) => Some((i, a, b)),
        _ => None,
    };
    match e.kind() {
        Kind::Param {
            index,
            ty: sym::VarType::Float(_),
        } => Some(Linear(
            *index as usize,
            BigRational::one(),
            BigRational::zero(),
        )),
        Kind::Convert { a, .. } => of_param(a),
        Kind::Neg(a) => linear(a).map(|(i, a, b)| Linear(i, -a, -b)),
        Kind::Abs(a) => match of_param(a)? {
            Linear(i, a, b) | Magnitude(i, a, b) => Some(Magnitude(i, a, b)),
            Squared(i) => Some(Squared(i)),
        },
        Kind::Arith { op, a, b, .. } => {
            if *op == ArithOp::Mul && a.fingerprint() == b.fingerprint() {
                return match of_param(a)? {
                    Linear(i, s, t) | Magnitude(i, s, t) if s.abs().is_one() && t.is_zero() => {
                        Some(Squared(i))
                    }
                    _ => None,
                };
            }
            match (linear(a), constant(b), constant(a), linear(b)) {
                (Some((i, s, t)), Some(c), _, _) => match op {
                    ArithOp::Add => Some(Linear(i, s, t + c)),
                    ArithOp::Sub => Some(Linear(i, s, t - c)),
                    ArithOp::Mul if !c.is_zero() => Some(Linear(i, s * c, t * c)),
                    ArithOp::Div if !c.is_zero() => Some(Linear(i, s / c, t / c)),
                    _ => None,
                },
                (_, _, Some(c), Some((i, s, t))) => match op {
                    ArithOp::Add => Some(Linear(i, s, c + t)),
                    ArithOp::Sub => Some(Linear(i, -s, c - t)),
                    ArithOp::Mul if !c.is_zero() => Some(Linear(i, s * c, t * c)),
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}

/// The float at or below `q`, and at or above it.
fn down(q: &BigRational) -> f64 {
    let v = sym::const_f64(q);
    if v.is_finite() && f64_to_rational(v) > *q {
        v.next_down()
    } else {
        v
    }
}

fn up(q: &BigRational) -> f64 {
    let v = sym::const_f64(q);
    if v.is_finite() && f64_to_rational(v) < *q {
        v.next_up()
    } else {
        v
    }
}

/// `(v - b) / a` exactly, for a finite `v`.
fn solve_for(v: f64, a: &BigRational, b: &BigRational) -> Option<BigRational> {
    v.is_finite().then(|| (f64_to_rational(v) - b) / a)
}

/// What `e <= hi` says of a parameter.
fn at_most(e: &Expr, hi: f64) -> Option<Bound> {
    Some(match of_param(e)? {
        OfParam::Linear(i, a, b) => {
            let x = solve_for(hi, &a, &b)?;
            if a.is_positive() {
                Bound::Within(i, f64::NEG_INFINITY, up(&x))
            } else {
                Bound::Within(i, down(&x), f64::INFINITY)
            }
        }
        // -hi <= a·x + b <= hi
        OfParam::Magnitude(i, a, b) => {
            let (x1, x2) = (solve_for(-hi, &a, &b)?, solve_for(hi, &a, &b)?);
            let (lo, hi) = if x1 <= x2 { (x1, x2) } else { (x2, x1) };
            Bound::Within(i, down(&lo), up(&hi))
        }
        // x² <= hi < 0 holds nowhere: an empty interval.
        OfParam::Squared(i) if hi < 0.0 => Bound::Within(i, f64::INFINITY, f64::NEG_INFINITY),
        OfParam::Squared(i) => {
            let root = hi.sqrt().next_up();
            Bound::Within(i, -root, root)
        }
    })
}

/// What `lo <= e` says of a parameter.
fn at_least(e: &Expr, lo: f64) -> Option<Bound> {
    Some(match of_param(e)? {
        OfParam::Linear(i, a, b) => {
            let x = solve_for(lo, &a, &b)?;
            if a.is_positive() {
                Bound::Within(i, down(&x), f64::INFINITY)
            } else {
                Bound::Within(i, f64::NEG_INFINITY, up(&x))
            }
        }
        // a·x + b outside (-lo, lo): the gap rounded inwards.
        OfParam::Magnitude(i, a, b) if lo > 0.0 => {
            let (x1, x2) = (solve_for(-lo, &a, &b)?, solve_for(lo, &a, &b)?);
            let (g1, g2) = if x1 <= x2 { (x1, x2) } else { (x2, x1) };
            Bound::Outside(i, up(&g1), down(&g2))
        }
        OfParam::Squared(i) if lo > 0.0 => {
            let root = lo.sqrt().next_down();
            Bound::Outside(i, -root, root)
        }
        OfParam::Magnitude(..) | OfParam::Squared(_) => return None,
    })
}

/// The bounds a conjunct puts on parameters, or on their magnitudes, compared with something of known range.
fn bounds_from(c: &Expr, bounds: &Box, memo: &mut sym::FingerprintMap<Abs>) -> Vec<Bound> {
    let (op, a, b, negated) = match c.kind() {
        Kind::Cmp { op, a, b } => (*op, a, b, false),
        Kind::Not(inner) => match inner.kind() {
            Kind::Cmp { op, a, b } if *op != CmpOp::Eq => (*op, a, b, true),
            _ => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let mut range = |e: &Expr| match eval(e, bounds, memo) {
        Abs::Real(lo, hi) => Some((lo, hi)),
        _ => None,
    };
    // `a op b` (or, negated, `b < a` / `b <= a`): the lesser side is at most the greater side's upper end, the
    // greater side at least the lesser side's lower end; an equality bounds both sides both ways.
    let (less, more) = if negated { (b, a) } else { (a, b) };
    let mut out = Vec::new();
    if let Some((_, hi)) = range(more) {
        out.extend(at_most(less, hi));
    }
    if let Some((lo, _)) = range(less) {
        out.extend(at_least(more, lo));
    }
    if op == CmpOp::Eq {
        if let Some((_, hi)) = range(less) {
            out.extend(at_most(more, hi));
        }
        if let Some((lo, _)) = range(more) {
            out.extend(at_least(less, lo));
        }
    }
    out
}

fn widen(lo: f64, hi: f64) -> Abs {
    if lo.is_nan() || hi.is_nan() {
        return Abs::Top;
    }
    Abs::Real(lo.next_down(), hi.next_up())
}

/// Ulps a libm result may lie from the real function's value, each way (glibc's are within 1-2).
const LIBM_ULPS: u32 = 4;

/// `[lo, hi]` widened by [`LIBM_ULPS`] each way: the real value of a function computed at the endpoints.
fn widen_libm(lo: f64, hi: f64) -> Abs {
    if lo.is_nan() || hi.is_nan() {
        return Abs::Top;
    }
    let (mut lo, mut hi) = (lo, hi);
    for _ in 0..LIBM_ULPS {
        lo = lo.next_down();
        hi = hi.next_up();
    }
    Abs::Real(lo, hi)
}

/// The range of a one-argument elementary function over `[lo, hi]` (its real values): monotone ones at the
/// endpoints, sine and cosine within [-1, 1], cosh from its minimum; `Top` outside the function's domain.
fn elementary(func: sym::MathFn, (lo, hi): (f64, f64)) -> Abs {
    use sym::MathFn::*;
    let increasing = |f: fn(f64) -> f64| widen_libm(f(lo), f(hi));
    match func {
        Sqrt if lo >= 0.0 => increasing(f64::sqrt),
        Log if lo > 0.0 => increasing(f64::ln),
        Log2 if lo > 0.0 => increasing(f64::log2),
        Log10 if lo > 0.0 => increasing(f64::log10),
        Log1p if lo > -1.0 => increasing(f64::ln_1p),
        Exp => increasing(f64::exp),
        Exp2 => increasing(f64::exp2),
        Expm1 => increasing(f64::exp_m1),
        Atan => increasing(f64::atan),
        Cbrt => increasing(f64::cbrt),
        Sinh => increasing(f64::sinh),
        Tanh => increasing(f64::tanh),
        Asin if -1.0 <= lo && hi <= 1.0 => increasing(f64::asin),
        Acos if -1.0 <= lo && hi <= 1.0 => widen_libm(hi.acos(), lo.acos()),
        Sin | Cos => Abs::Real(-1.0, 1.0),
        Cosh if lo >= 0.0 => increasing(f64::cosh),
        Cosh if hi <= 0.0 => widen_libm(hi.cosh(), lo.cosh()),
        Cosh => widen_libm(1.0, lo.cosh().max(hi.cosh())),
        _ => Abs::Top,
    }
}

fn square((lo, hi): (f64, f64)) -> Abs {
    if lo >= 0.0 {
        widen(lo * lo, hi * hi)
    } else if hi <= 0.0 {
        widen(hi * hi, lo * lo)
    } else {
        widen(0.0, (lo * lo).max(hi * hi))
    }
}

fn hull(xs: [f64; 4]) -> Abs {
    if xs.iter().any(|x| x.is_nan()) {
        return Abs::Top;
    }
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    widen(lo, hi)
}

fn arith(op: ArithOp, (a, b): (f64, f64), (c, d): (f64, f64)) -> Abs {
    match op {
        ArithOp::Add => widen(a + c, b + d),
        ArithOp::Sub => widen(a - d, b - c),
        ArithOp::Mul => hull([a * c, a * d, b * c, b * d]),
        ArithOp::Div if c <= 0.0 && d >= 0.0 => Abs::Top,
        ArithOp::Div => hull([a / c, a / d, b / c, b / d]),
    }
}

/// A parameter's declared range: its domain's, else its format's finite values; `None` for integers.
fn declared_range(
    sig: &FunctionSignature,
    domain: Option<&Domain>,
    index: usize,
) -> Option<(f64, f64)> {
    let max = match sig.params.get(index).map(|p| p.ty) {
        Some(ParamType::F64) => f64::MAX,
        Some(ParamType::F32) => f32::MAX as f64,
        _ => return None,
    };
    let range = domain.and_then(|d| d.ranges.iter().find(|r| r.param == index));
    let lo = range.and_then(|r| r.lo).map_or(-max, |b| b.value.max(-max));
    let hi = range.and_then(|r| r.hi).map_or(max, |b| b.value.min(max));
    Some((lo, hi))
}

fn not(t: Truth) -> Truth {
    match t {
        Truth::True => Truth::False,
        Truth::False => Truth::True,
        Truth::Unknown => Truth::Unknown,
    }
}

fn compare(op: CmpOp, (a, b): (f64, f64), (c, d): (f64, f64)) -> Truth {
    match op {
        CmpOp::Lt if b < c => Truth::True,
        CmpOp::Lt if a >= d => Truth::False,
        CmpOp::Le if b <= c => Truth::True,
        CmpOp::Le if a > d => Truth::False,
        CmpOp::Eq if b < c || d < a => Truth::False,
        CmpOp::Eq if a == b && b == c && c == d => Truth::True,
        _ => Truth::Unknown,
    }
}

/// The abstract value of `e` within `bounds`, memoised by fingerprint.
fn eval(e: &Expr, bounds: &Box, memo: &mut sym::FingerprintMap<Abs>) -> Abs {
    if let Some(v) = memo.get(&e.fingerprint()) {
        return *v;
    }
    let v = match e.kind() {
        Kind::BoolConst(_)
        | Kind::Cmp { .. }
        | Kind::Not(_)
        | Kind::And(_)
        | Kind::Or(_)
        | Kind::Ite { .. }
        | Kind::Exception { .. } => eval_logic(e, bounds, memo),
        _ => eval_real(e, bounds, memo),
    };
    // A boolean node with no information still is a boolean.
    let v = match (v, e.sort()) {
        (Abs::Top, sym::Sort::Bool) => Abs::Bool(Truth::Unknown),
        (v, _) => v,
    };
    memo.insert(e.fingerprint(), v);
    v
}

/// The interval of a real-valued node, if it has one.
fn real(x: &Expr, bounds: &Box, memo: &mut sym::FingerprintMap<Abs>) -> Option<(f64, f64)> {
    match eval(x, bounds, memo) {
        Abs::Real(lo, hi) => Some((lo, hi)),
        _ => None,
    }
}

/// A real-valued node: constants, parameters, arithmetic, conversions, integral roundings and elementary
/// functions of one argument; `Top` for the rest.
fn eval_real(e: &Expr, bounds: &Box, memo: &mut sym::FingerprintMap<Abs>) -> Abs {
    match e.kind() {
        Kind::RealConst(q) => {
            let c = sym::const_f64(q);
            widen(c, c)
        }
        Kind::Param { index, .. } => bounds
            .get(*index as usize)
            .copied()
            .flatten()
            .map_or(Abs::Top, |(lo, hi)| Abs::Real(lo, hi)),
        // A square is never negative (the product of an interval with itself would say [-a², a²] around 0).
        Kind::Arith {
            op: ArithOp::Mul,
            a,
            b,
            ..
        } if a.fingerprint() == b.fingerprint() => real(a, bounds, memo).map_or(Abs::Top, square),
        Kind::Arith { op, a, b, .. } => match (real(a, bounds, memo), real(b, bounds, memo)) {
            (Some(x), Some(y)) => arith(*op, x, y),
            _ => Abs::Top,
        },
        Kind::Neg(a) => real(a, bounds, memo).map_or(Abs::Top, |(lo, hi)| Abs::Real(-hi, -lo)),
        Kind::Abs(a) => real(a, bounds, memo).map_or(Abs::Top, |(lo, hi)| {
            if lo >= 0.0 {
                Abs::Real(lo, hi)
            } else if hi <= 0.0 {
                Abs::Real(-hi, -lo)
            } else {
                Abs::Real(0.0, hi.max(-lo))
            }
        }),
        Kind::Fma { a, b, c, .. } => match (
            real(a, bounds, memo),
            real(b, bounds, memo),
            real(c, bounds, memo),
        ) {
            (Some(x), Some(y), Some(z)) => match arith(ArithOp::Mul, x, y) {
                Abs::Real(lo, hi) => arith(ArithOp::Add, (lo, hi), z),
                _ => Abs::Top,
            },
            _ => Abs::Top,
        },
        // A conversion between formats, or of an integer to a real: the same value over the reals.
        Kind::Convert { a, .. } | Kind::IntToReal(a) => {
            real(a, bounds, memo).map_or(Abs::Top, |(lo, hi)| Abs::Real(lo, hi))
        }
        // Monotone, and exact on floats.
        Kind::ToIntegral { mode, a, .. } => real(a, bounds, memo).map_or(Abs::Top, |(lo, hi)| {
            let f = |v: f64| match mode {
                sym::Integral::Floor => v.floor(),
                sym::Integral::Ceil => v.ceil(),
                sym::Integral::Trunc => v.trunc(),
                sym::Integral::Round => v.round(),
            };
            Abs::Real(f(lo), f(hi))
        }),
        Kind::Math { func, args, .. } => match args.as_slice() {
            [a] => real(a, bounds, memo).map_or(Abs::Top, |x| elementary(*func, x)),
            _ => Abs::Top,
        },
        Kind::IntConst(_)
        | Kind::FpToInt { .. }
        | Kind::IntArith { .. }
        | Kind::Unsigned { .. }
        | Kind::Opaque { .. } => integers::eval(e, bounds, memo),
        // Functions of two arguments and the rest: no information.
        _ => Abs::Top,
    }
}

/// A Boolean node: constants, comparisons, connectives, `ite` and exception conditions.
fn eval_logic(e: &Expr, bounds: &Box, memo: &mut sym::FingerprintMap<Abs>) -> Abs {
    match e.kind() {
        Kind::BoolConst(b) => Abs::Bool(if *b { Truth::True } else { Truth::False }),
        Kind::Cmp { op, a, b } => match (real(a, bounds, memo), real(b, bounds, memo)) {
            (Some(x), Some(y)) => Abs::Bool(compare(*op, x, y)),
            _ => Abs::Bool(Truth::Unknown),
        },
        Kind::Not(a) => match eval(a, bounds, memo) {
            Abs::Bool(t) => Abs::Bool(not(t)),
            _ => Abs::Bool(Truth::Unknown),
        },
        Kind::And(xs) | Kind::Or(xs) => {
            let is_and = matches!(e.kind(), Kind::And(_));
            let (absorbing, neutral) = if is_and {
                (Truth::False, Truth::True)
            } else {
                (Truth::True, Truth::False)
            };
            let mut all_neutral = true;
            let mut result = None;
            for x in xs {
                match eval(x, bounds, memo) {
                    Abs::Bool(t) if t == absorbing => {
                        result = Some(absorbing);
                        break;
                    }
                    Abs::Bool(t) if t == neutral => {}
                    _ => all_neutral = false,
                }
            }
            Abs::Bool(result.unwrap_or(if all_neutral { neutral } else { Truth::Unknown }))
        }
        Kind::Ite { c, a, b } => match eval(c, bounds, memo) {
            Abs::Bool(Truth::True) => eval(a, bounds, memo),
            Abs::Bool(Truth::False) => eval(b, bounds, memo),
            _ => match (eval(a, bounds, memo), eval(b, bounds, memo)) {
                (Abs::Real(a, b), Abs::Real(c, d)) => Abs::Real(a.min(c), b.max(d)),
                (Abs::Bool(x), Abs::Bool(y)) if x == y => Abs::Bool(x),
                (Abs::Bool(_), Abs::Bool(_)) => Abs::Bool(Truth::Unknown),
                _ => Abs::Top,
            },
        },
        Kind::Exception { .. } => eval(&sym::atom_condition(e).expect("an atom"), bounds, memo),
        _ => Abs::Top,
    }
}

mod centred;
mod grid;
pub(super) use grid::cancellation_instead;
mod integers;
#[cfg(test)]
mod tests;
