//! The cheap layer before Z3, for formulae of one float parameter: each is first evaluated in IEEE arithmetic, as
//! the program computes it ([`check::Evaluator`]), on a fixed ladder of inputs (zero, one, and magnitudes from the
//! smallest subnormal to Ω, both signs).
//!
//! - **A ladder input raises the exception** (overflow, division by zero, invalid, underflow). The input is made
//!   ordinary where the formula allows (parameters set to 0 or ±1) and the first parameter that cannot be is
//!   bisected on the float line towards ±1 to the edge of the region where the formula holds, its last input
//!   inside: where the exception starts (an overflow threshold), which is where the two builds part. An
//!   underflow keeps three inputs of that walk: the edge (the largest subnormal result), the first float inward
//!   of it where the formula holds (in IEEE arithmetic an underflow is tiny and inexact, so `x·0.5` holds at
//!   every other float: there both builds underflow and only flush-to-zero changes the value) and the ladder
//!   input the walk started from, deep inside (often a subnormal operand, which denormals-are-zero reads as 0).
//!   Until 2026-12-02 underflows went to Z3, whose models lie inside; nlsat gave up on many of them after
//!   10-90 ms each (Cephes `tandg.c`: 21 of its 67 queries, nine tenths of its Z3 time, most of them on its
//!   range reduction, which the ladder does not reach either).
//! - **None does, but the operation crosses a threshold between two ladder inputs that take the formula's path**:
//!   the result changes sign (an underflow at a root of the path's arithmetic, a cancellation; for a product or
//!   quotient, either operand's sign, since `u³·u` comes nearest 0 where `u` changes sign), the divisor does
//!   (a division by zero), or the operands stop being finite (an overflow next to an earlier one). The crossing is
//!   bisected to the float next to it: the input Z3's real model rounds to, and like it, it misses the exception
//!   in IEEE arithmetic (the search explores its neighbourhood; no float raises it, so no FP retry is asked).
//!
//! Z3 is asked only when neither finds an input. Nlsat spends most of its time on the satisfiable queries (their
//! models are real algebraic numbers with thousand-bit coefficients near Ω or roots of the path's polynomials);
//! the unsatisfiable ones it refutes quickly. The ladder, the lines and the walks are fixed, so the same formula
//! gets the same input on every run.

use super::check::{ieee_arith, Evaluator};
use super::interval;
use crate::domain::Domain;
use crate::round::{between_f64, from_ordered_f32, from_ordered_f64, ordered_f32, ordered_f64};
use crate::sym::{ArithOp, Expr, Kind, Site, SiteOp};
use crate::types::{ArgValue, ExceptionKind, FunctionSignature, Input, ParamType};

/// An input the cheap layer found for a formula.
pub(super) struct Found {
    pub input: Input,
    /// Whether the formula holds on it in IEEE arithmetic (else it lies at a crossing, as a rounded real model).
    pub holds: bool,
    /// For an underflow, inputs inside its region beside `input` (its edge): a float just inward of the edge, and
    /// the ladder input the walk started from ([`Witness`]).
    pub inside: Vec<Input>,
}

/// Binary exponents of the ladder's magnitudes (clamped to the format's range). The mantissa is not 1, so that
/// products and quotients of ladder values are inexact, as an underflow needs.
const EXPONENTS: [i32; 42] = [
    -1074, -1064, -1050, -1030, -1022, -1000, -960, -900, -800, -700, -600, -540, -512, -480, -300,
    -160, -64, -32, -8, -3, -1, 0, 1, 3, 8, 32, 64, 160, 300, 480, 509, 512, 540, 600, 700, 800,
    900, 960, 1000, 1010, 1020, 1023,
];

/// A mantissa with many bits set (1 + 1/3 rounded).
const MANTISSA: f64 = 1.333_333_333_333_333_3;

/// Formulae of more float parameters are left to Z3: its models are spread over the parameters, where the ladder
/// finds few distinct inputs, and the search finds fewer divergences around those.
const MAX_FLOATS: usize = 1;

/// Floats inward of a region's edge looked at for [`Witness::inward`].
const INWARD_STEPS: i64 = 4;

/// Integer values the ladder's inputs cycle through.
const INTEGERS: [i64; 6] = [1, 0, 2, -1, 10, 100];

/// The inputs a formula is tried on before Z3, for one signature and domain.
pub(super) struct Seeds<'a> {
    sig: &'a FunctionSignature,
    domain: Option<&'a Domain>,
    inputs: Vec<Input>,
}

impl<'a> Seeds<'a> {
    pub(super) fn new(sig: &'a FunctionSignature, domain: Option<&'a Domain>) -> Seeds<'a> {
        let floats: Vec<usize> = (0..sig.params.len())
            .filter(|&i| sig.params[i].ty.float_format().is_some())
            .collect();
        let magnitudes: Vec<f64> = std::iter::once(0.0)
            .chain(EXPONENTS.iter().map(|&e| MANTISSA * pow2(e)))
            .chain([f64::MAX])
            .collect();
        let values: Vec<f64> = magnitudes
            .iter()
            .flat_map(|&m| if m == 0.0 { vec![m] } else { vec![m, -m] })
            .collect();
        let base = |k: usize, float: f64| -> Vec<ArgValue> {
            sig.params
                .iter()
                .map(|p| value_of(p.ty, float, INTEGERS[k % INTEGERS.len()]))
                .collect()
        };
        let mut inputs: Vec<Input> = Vec::new();
        // Every parameter at the same magnitude, then one float parameter walking the ladder with the others at 1.
        for (k, &v) in values.iter().enumerate() {
            inputs.push(Input(base(k, v)));
        }
        if floats.len() > 1 {
            for &j in &floats {
                for (k, &v) in values.iter().enumerate() {
                    let mut input = base(k, 1.0);
                    input[j] = value_of(sig.params[j].ty, v, 0);
                    inputs.push(Input(input));
                }
            }
        }
        if let Some(d) = domain {
            inputs = inputs.into_iter().map(|x| clamp_into(d, sig, x)).collect();
            for t in [0.5, 0.25, 0.75] {
                inputs.push(clamp_into(d, sig, Input(base(0, 0.0))).with_ranges(d, sig, t));
            }
        }
        let mut seen = std::collections::HashSet::new();
        inputs.retain(|x| domain.is_none_or(|d| d.contains(x)) && seen.insert(x.key()));
        Seeds {
            sig,
            domain,
            inputs,
        }
    }

    /// An input for `formula`: a ladder input on which it holds, walked to the edge of where it does, else the
    /// crossing of a threshold by its operation; `None` when there is neither (or the formula cannot be
    /// evaluated concretely).
    pub(super) fn find(&self, formula: &Expr) -> Option<Found> {
        let mentioned = self.mentioned(formula);
        if self.floats(&mentioned).len() > MAX_FLOATS {
            return None;
        }
        let mut eval = Evaluator::new(formula);
        if let Some(w) = self.witness(&mentioned, &mut eval) {
            let underflow =
                asked(formula).is_some_and(|(kind, ..)| kind == ExceptionKind::Underflow);
            let mut inside: Vec<Input> = Vec::new();
            if underflow {
                for x in w.inward.into_iter().chain([w.start]) {
                    if x.key() != w.edge.key() && inside.iter().all(|y| y.key() != x.key()) {
                        inside.push(x);
                    }
                }
            }
            return Some(Found {
                input: w.edge,
                holds: true,
                inside,
            });
        }
        self.found_crossing(formula, &mentioned, &[], &mut eval)
    }

    /// As [`find`](Self::find)'s crossing, with the ladder's points on the float parameter's line joined by the
    /// ends and quarters of `boxes` (where interval refutation left the formula open, bisected finer where it came
    /// closest): a root between two ladder inputs that take the formula's path, such as a series' zero between 4
    /// and 10.7.
    pub(super) fn find_crossing_in(
        &self,
        formula: &Expr,
        boxes: &[interval::Box],
    ) -> Option<Found> {
        let mentioned = self.mentioned(formula);
        let floats = self.floats(&mentioned);
        let [j] = floats.as_slice() else {
            return None;
        };
        // Each box's ends and the quarters between them (in floats, as the boxes were halved).
        let points: Vec<f64> = boxes
            .iter()
            .filter_map(|b| *b.get(*j)?)
            .flat_map(|(lo, hi)| (0..=4).map(move |k| between_f64(lo, hi, k, 4)))
            .filter(|v| v.is_finite())
            .collect();
        self.found_crossing(formula, &mentioned, &points, &mut Evaluator::new(formula))
    }

    /// The crossing as a found input, unless it is the edge of an underflow region.
    fn found_crossing(
        &self,
        formula: &Expr,
        mentioned: &[usize],
        extra: &[f64],
        eval: &mut Evaluator,
    ) -> Option<Found> {
        let input = self.crossing(formula, mentioned, extra, eval)?;
        let holds = eval.holds(&input.0) == Some(true);
        let underflow = asked(formula).is_some_and(|(kind, ..)| kind == ExceptionKind::Underflow);
        if underflow && holds {
            // The sign change of a product at zero: the edge of an underflow region, whose inside no ladder input
            // reached; left to Z3, whose models lie inside.
            return None;
        }
        Some(Found {
            input,
            holds,
            inside: Vec::new(),
        })
    }

    /// A ladder input on which `formula` holds, made ordinary and walked to the edge of where it holds.
    fn witness(&self, mentioned: &[usize], eval: &mut Evaluator) -> Option<Witness> {
        let mut holds = |x: &Input| eval.holds(&x.0) == Some(true);
        let seed = self.inputs.iter().find(|x| holds(x))?;
        // Parameters the formula does not mention get what Z3's models give them.
        let mut input = Input(
            seed.0
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    if mentioned.contains(&i) {
                        *v
                    } else {
                        super::unconstrained(self.sig.params[i].ty)
                    }
                })
                .collect(),
        );
        if !holds(&input) {
            input = seed.clone();
        }
        let in_domain = |x: &Input| self.domain.is_none_or(|d| d.contains(x));
        let mut walk = None;
        for &j in &self.floats(mentioned) {
            let here = as_f64(input.0[j]);
            let unit = if here.is_sign_negative() { -1.0 } else { 1.0 };
            let simpler = [0.0, unit]
                .into_iter()
                .filter(|&v| v != here)
                .map(|v| input.with(j, self.sig.params[j].ty, v))
                .find(|x| in_domain(x) && holds(x));
            match simpler {
                Some(x) => input = x,
                None if walk.is_none() => walk = Some(j),
                None => {}
            }
        }
        let start = input.clone();
        let mut inward = None;
        if let Some(j) = walk {
            let ty = self.sig.params[j].ty;
            let line = Line::Axis(j, ty);
            let here = as_f64(input.0[j]);
            let unit = if here.is_sign_negative() { -1.0 } else { 1.0 };
            let targets = [unit, 0.0].into_iter().chain(
                self.domain
                    .and_then(|d| range_ends(d, j))
                    .into_iter()
                    .flatten(),
            );
            for target in targets {
                let outside = input.with(j, ty, target);
                if in_domain(&outside) && !holds(&outside) {
                    input = bisect(&line, &input, target, here, &mut |x| holds(x)).1;
                    let edge = as_f64(input.0[j]);
                    // The first float inward where it holds: an underflow's region in IEEE arithmetic skips the
                    // floats whose result is exact (x·0.5 holds at every other one).
                    inward = (1..=INWARD_STEPS)
                        .map(|k| line.step(&input, edge, here, k))
                        .find(|x| holds(x));
                    break;
                }
            }
        }
        Some(Witness {
            edge: input,
            inward,
            start,
        })
    }

    /// The last float before the formula's operation crosses a threshold, along the lines through the ladder,
    /// on inputs that take the formula's path.
    fn crossing(
        &self,
        formula: &Expr,
        mentioned: &[usize],
        extra: &[f64],
        eval: &mut Evaluator,
    ) -> Option<Input> {
        let (kind, site, path) = asked(formula)?;
        let class = |eval: &mut Evaluator, x: &Input| -> Option<i8> {
            eval.evaluate(&x.0);
            if !path.iter().all(|c| eval.truth(c) == Some(true)) {
                return None;
            }
            let args: Option<Vec<f64>> = site.args.iter().map(|a| eval.float(a)).collect();
            crossing_class(kind, site, &args?)
        };
        let floats = self.floats(mentioned);
        // Parameters the formula does not mention get what Z3's models give them, the others start at 1.
        let base = Input(
            self.sig
                .params
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    if mentioned.contains(&i) {
                        value_of(p.ty, 1.0, 1)
                    } else {
                        super::unconstrained(p.ty)
                    }
                })
                .collect(),
        );
        let lines = std::iter::once(Line::Diagonal(floats.clone()))
            .filter(|_| floats.len() > 1)
            .chain(floats.iter().map(|&j| Line::Axis(j, self.sig.params[j].ty)));
        for line in lines {
            let mut points: Vec<f64> = self
                .inputs
                .iter()
                .filter_map(|x| line.position(x))
                .chain(
                    extra
                        .iter()
                        .copied()
                        .filter(|_| matches!(line, Line::Axis(..))),
                )
                .collect();
            points.sort_by(|a, b| a.total_cmp(b));
            points.dedup();
            let mut previous: Option<(f64, i8)> = None;
            for &t in &points {
                let x = line.at(&base, t);
                if !self.domain.is_none_or(|d| d.contains(&x)) {
                    previous = None;
                    continue;
                }
                let Some(c) = class(eval, &x) else {
                    previous = None;
                    continue;
                };
                // An underflow's crossing is a root: the result or, for a product or quotient, an operand
                // changes sign (a result rounding to zero is the edge of an underflow region, left to Z3).
                let crosses = |before: i8| {
                    before != c && (kind != ExceptionKind::Underflow || sign_flips(site, before, c))
                };
                if let Some((s, before)) = previous.filter(|(_, before)| crosses(*before)) {
                    let (outside, inside) =
                        bisect(&line, &base, s, t, &mut |x| class(eval, x) == Some(c));
                    // The side nearer the threshold: the smaller result, or the last finite operands.
                    let pick = if kind == ExceptionKind::Overflow && before == FINITE {
                        outside
                    } else if kind == ExceptionKind::Overflow {
                        inside
                    } else {
                        let size = |eval: &mut Evaluator, x: &Input| {
                            eval.evaluate(&x.0);
                            let args: Option<Vec<f64>> =
                                site.args.iter().map(|a| eval.float(a)).collect();
                            args.and_then(|a| result(site, &a))
                                .map_or(f64::INFINITY, f64::abs)
                        };
                        if size(eval, &inside) <= size(eval, &outside) {
                            inside
                        } else {
                            outside
                        }
                    };
                    if class(eval, &pick).is_some() {
                        return Some(pick);
                    }
                }
                if kind != ExceptionKind::Underflow || !has_zero(site, c) {
                    previous = Some((t, c));
                }
            }
        }
        None
    }

    /// The parameters `formula` mentions.
    fn mentioned(&self, formula: &Expr) -> Vec<usize> {
        formula
            .params()
            .into_iter()
            .map(|(i, _)| i as usize)
            .filter(|&i| i < self.sig.params.len())
            .collect()
    }

    /// The floating-point ones among `params`.
    fn floats(&self, params: &[usize]) -> Vec<usize> {
        params
            .iter()
            .copied()
            .filter(|&i| self.sig.params[i].ty.float_format().is_some())
            .collect()
    }
}

/// Operands that are all finite, in [`crossing_class`]'s reading for an overflow.
const FINITE: i8 = 1;

/// What changes at the threshold of the exception `kind` at `site`: the sign of the result (underflow, at a
/// root), of the divisor (division by zero), or whether the operands are finite (overflow, whose edge is where an
/// earlier operation overflows). `None` where it says nothing.
fn crossing_class(kind: ExceptionKind, site: &Site, args: &[f64]) -> Option<i8> {
    let sign = |v: f64| -> i8 {
        if v > 0.0 {
            1
        } else if v < 0.0 {
            -1
        } else {
            0
        }
    };
    match kind {
        ExceptionKind::Overflow => Some(if args.iter().all(|v| v.is_finite()) {
            FINITE
        } else {
            0
        }),
        _ if args.iter().any(|v| !v.is_finite()) => None,
        // `arg³·arg` never changes sign, but where `arg` does it comes as close to 0 as floats allow: the signs of
        // both operands, in base 3.
        ExceptionKind::Underflow if by_operands(site) => {
            Some(3 * sign(*args.first()?) + sign(*args.get(1)?))
        }
        ExceptionKind::Underflow => result(site, args).map(sign),
        ExceptionKind::DivideByZero if site.op == SiteOp::Arith(ArithOp::Div) => {
            Some(sign(*args.get(1)?))
        }
        _ => None,
    }
}

/// Whether an underflow's [`crossing_class`] holds the signs of the operation's two operands (`3·a + b`, for a
/// product or quotient) rather than its result's.
fn by_operands(site: &Site) -> bool {
    matches!(site.op, SiteOp::Arith(ArithOp::Mul | ArithOp::Div))
}

/// The signs (-1, 0, 1) an underflow's class holds: both operands' (`3·a + b`), or the result's twice.
fn signs(site: &Site, class: i8) -> [i8; 2] {
    if by_operands(site) {
        let b = (class + 1).rem_euclid(3) - 1;
        [(class - b) / 3, b]
    } else {
        [class, class]
    }
}

/// Whether a sign of an underflow's class goes from one side of zero to the other.
fn sign_flips(site: &Site, before: i8, after: i8) -> bool {
    let (b, a) = (signs(site, before), signs(site, after));
    b.iter().zip(&a).any(|(x, y)| x * y == -1)
}

/// Whether an underflow's class has a zero sign: a root hit exactly, not a side of one.
fn has_zero(site: &Site, class: i8) -> bool {
    signs(site, class).contains(&0)
}

/// The operation's IEEE result on `args`, for the arithmetic operations.
fn result(site: &Site, args: &[f64]) -> Option<f64> {
    match site.op {
        SiteOp::Arith(op) => Some(ieee_arith(op, site.fmt, *args.first()?, *args.get(1)?)),
        SiteOp::Fma => Some(args.first()?.mul_add(*args.get(1)?, *args.get(2)?)),
        _ => None,
    }
}

/// The exception a formula asks for, its site, and the rest of its conjuncts (the path to it); `None` for a
/// formula not of that shape.
pub(super) fn asked(formula: &Expr) -> Option<(ExceptionKind, &Site, Vec<&Expr>)> {
    let conjuncts: Vec<&Expr> = match formula.kind() {
        Kind::And(xs) => xs.iter().collect(),
        _ => vec![formula],
    };
    let mut atoms = conjuncts
        .iter()
        .filter(|c| matches!(c.kind(), Kind::Exception { .. }));
    let atom = atoms.next()?;
    if atoms.next().is_some() {
        return None;
    }
    let Kind::Exception { kind, site } = atom.kind() else {
        return None;
    };
    let path = conjuncts
        .iter()
        .copied()
        .filter(|c| c.fingerprint() != atom.fingerprint())
        .collect();
    Some((*kind, site, path))
}

/// Where the ladder found a formula to hold, and the edge its walk reached.
struct Witness {
    /// The last input inside the region on the walk towards ±1 (or 0, or the domain's ends): where an overflow
    /// starts; for an underflow, the largest subnormal result.
    edge: Input,
    /// The first float inward of the edge where the formula holds (of [`INWARD_STEPS`]): for an underflow, an
    /// inexact result just below the edge's, where both builds underflow and only flush-to-zero changes the value.
    inward: Option<Input>,
    /// The ordinary input the walk started from, deep inside (for an underflow, often a subnormal operand,
    /// which denormals-are-zero reads as 0).
    start: Input,
}

/// A line of inputs through a base input, by one float coordinate.
enum Line {
    /// Parameter `j` (of its type) varies.
    Axis(usize, ParamType),
    /// These float parameters vary together.
    Diagonal(Vec<usize>),
}

impl Line {
    /// Where `x` lies on the line when it lies on it (every varying parameter alike).
    fn position(&self, x: &Input) -> Option<f64> {
        match self {
            Line::Axis(j, _) => Some(as_f64(x.0[*j])),
            Line::Diagonal(js) => {
                let t = as_f64(x.0[*js.first()?]);
                js.iter().all(|&j| as_f64(x.0[j]) == t).then_some(t)
            }
        }
    }

    /// The input at `t` on the line through `base`.
    fn at(&self, base: &Input, t: f64) -> Input {
        match self {
            Line::Axis(j, ty) => base.with(*j, *ty, t),
            Line::Diagonal(js) => {
                let mut x = base.clone();
                for &j in js {
                    let ty = match x.0[j] {
                        ArgValue::F32(_) => ParamType::F32,
                        _ => ParamType::F64,
                    };
                    x = x.with(j, ty, t);
                }
                x
            }
        }
    }

    /// Whether positions are `float`s (bisection steps through `float`s then).
    fn single(&self, base: &Input) -> bool {
        match self {
            Line::Axis(_, ty) => *ty == ParamType::F32,
            Line::Diagonal(js) => js.iter().any(|&j| matches!(base.0[j], ArgValue::F32(_))),
        }
    }

    /// `v`'s place among the line's floats (in its format, `single` or double).
    fn ordered(single: bool, v: f64) -> i64 {
        if single {
            ordered_f32(v as f32)
        } else {
            ordered_f64(v)
        }
    }

    /// The float at place `o` among the line's floats ([`Line::ordered`]).
    fn from_ordered(single: bool, o: i64) -> f64 {
        if single {
            from_ordered_f32(o) as f64
        } else {
            from_ordered_f64(o)
        }
    }

    /// The input on the line through `base` `k` floats from `from` towards `towards` (in the line's format).
    fn step(&self, base: &Input, from: f64, towards: f64, k: i64) -> Input {
        let single = self.single(base);
        let (f, to) = (Line::ordered(single, from), Line::ordered(single, towards));
        self.at(base, Line::from_ordered(single, f + k * (to - f).signum()))
    }
}

/// Bisects the line through `base` between `outside` (where `inside_of` is false) and `inside` (where it is
/// true) down to two neighbouring floats: the inputs at them, the one where it is false first.
fn bisect(
    line: &Line,
    base: &Input,
    outside: f64,
    inside: f64,
    inside_of: &mut impl FnMut(&Input) -> bool,
) -> (Input, Input) {
    let single = line.single(base);
    let ord = |v: f64| Line::ordered(single, v);
    let unord = |o: i64| Line::from_ordered(single, o);
    let (mut out, mut is_in) = (ord(outside), ord(inside));
    while out.abs_diff(is_in) > 1 {
        let mid = out + (is_in - out) / 2;
        if inside_of(&line.at(base, unord(mid))) {
            is_in = mid;
        } else {
            out = mid;
        }
    }
    (line.at(base, unord(out)), line.at(base, unord(is_in)))
}

impl Input {
    /// This input with parameter `j` (of type `ty`) set to `v`.
    fn with(&self, j: usize, ty: ParamType, v: f64) -> Input {
        let mut out = self.clone();
        out.0[j] = value_of(ty, v, 0);
        out
    }

    /// This input with every ranged float parameter at fraction `t` of its finite range.
    fn with_ranges(mut self, d: &Domain, sig: &FunctionSignature, t: f64) -> Input {
        for r in &d.ranges {
            let (Some(lo), Some(hi)) = (r.lo, r.hi) else {
                continue;
            };
            if let Some(p) = sig
                .params
                .get(r.param)
                .filter(|p| p.ty.float_format().is_some())
            {
                self = self.with(r.param, p.ty, lo.value + t * (hi.value - lo.value));
            }
        }
        self
    }
}

/// `input` with each ranged parameter moved into its range (to the nearest end, one step inside an exclusive one).
fn clamp_into(d: &Domain, sig: &FunctionSignature, mut input: Input) -> Input {
    for r in &d.ranges {
        let Some(p) = sig
            .params
            .get(r.param)
            .filter(|p| p.ty.float_format().is_some())
        else {
            continue;
        };
        let mut v = as_f64(input.0[r.param]);
        if let Some(lo) = r.lo.filter(|b| b.value.is_finite()) {
            if v < lo.value || (v == lo.value && !lo.inclusive) {
                v = if lo.inclusive {
                    lo.value
                } else {
                    lo.value.next_up()
                };
            }
        }
        if let Some(hi) = r.hi.filter(|b| b.value.is_finite()) {
            if v > hi.value || (v == hi.value && !hi.inclusive) {
                v = if hi.inclusive {
                    hi.value
                } else {
                    hi.value.next_down()
                };
            }
        }
        input = input.with(r.param, p.ty, v);
    }
    input
}

/// The finite ends of parameter `j`'s declared range.
fn range_ends(d: &Domain, j: usize) -> Option<Vec<f64>> {
    let r = d.ranges.iter().find(|r| r.param == j)?;
    Some(
        [r.lo, r.hi]
            .into_iter()
            .flatten()
            .map(|b| b.value)
            .filter(|v| v.is_finite())
            .collect(),
    )
}

/// A parameter's value of type `ty`: `float` for floating-point types (rounded to `float`'s range), `int` for
/// integers.
fn value_of(ty: ParamType, float: f64, int: i64) -> ArgValue {
    match ty {
        ParamType::F64 => ArgValue::F64(float),
        ParamType::F32 => ArgValue::F32((float as f32).clamp(-f32::MAX, f32::MAX)),
        ParamType::Int { bits, signed } => ArgValue::Int(clamp_int(int, bits, signed)),
        ParamType::OutPtr { .. } => ArgValue::OutPtr,
    }
}

/// `v` clamped into the range of an integer of `bits` bits (a `bool` is one bit: 2 becomes 1, -1 becomes 0).
fn clamp_int(v: i64, bits: u32, signed: bool) -> i64 {
    crate::exec::int_range(bits, signed).map_or(v, |(lo, hi)| v.clamp(lo, hi))
}

/// 2^e for exponents down to the smallest subnormal's (`powi` alone flushes those to zero).
fn pow2(e: i32) -> f64 {
    2f64.powi(e / 2) * 2f64.powi(e - e / 2)
}

fn as_f64(v: ArgValue) -> f64 {
    match v {
        ArgValue::F64(x) => x,
        ArgValue::F32(x) => x as f64,
        ArgValue::Int(n) => n as f64,
        ArgValue::OutPtr => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::FloatFormat;
    use crate::sym::{self, param, ArithOp, Site, SiteOp, VarType};
    use crate::types::ExceptionKind;

    fn sig(n: usize) -> FunctionSignature {
        crate::solve::doubles(n)
    }

    /// `kind` at `x0 · y`, where `y` is `x1` (`two` parameters) or `x0`.
    fn product(kind: ExceptionKind, two: bool) -> Expr {
        let x = param(0, VarType::Float(FloatFormat::Double));
        let y = param(u32::from(two), VarType::Float(FloatFormat::Double));
        sym::exception(
            kind,
            Site {
                op: SiteOp::Arith(ArithOp::Mul),
                fmt: FloatFormat::Double,
                args: vec![x, y],
            },
        )
    }

    /// An overflowing product is walked to its threshold: the input found overflows, its neighbour towards 1
    /// does not.
    #[test]
    fn an_overflow_is_found_at_its_threshold() {
        let sig = sig(2);
        let formula = product(ExceptionKind::Overflow, false);
        let input = Seeds::new(&sig, None)
            .find(&formula)
            .expect("a witness")
            .input;
        assert_eq!(
            input.0[1],
            ArgValue::F64(0.0),
            "an unmentioned parameter is left at 0"
        );
        assert_eq!(super::super::check::holds(&formula, &input.0), Some(true));
        let walked = input
            .0
            .iter()
            .position(|v| !matches!(v, ArgValue::F64(x) if *x == 0.0 || x.abs() == 1.0))
            .expect("one parameter walked");
        let ArgValue::F64(x) = input.0[walked] else {
            unreachable!()
        };
        let mut inner = input.clone();
        inner.0[walked] = ArgValue::F64(x.next_down());
        assert_eq!(
            super::super::check::holds(&formula, &inner.0),
            Some(false),
            "{input:?}"
        );
    }

    /// The ladder's integers fit the parameters they are given to (a `bool` takes 0 and 1, an unsigned no -1):
    /// an input that does not fit its signature is dropped before it runs.
    #[test]
    fn the_ladder_s_integers_fit_their_parameters() {
        let mut sig = sig(1);
        for (bits, signed) in [(1, false), (8, false), (32, true)] {
            sig.params.push(crate::types::Param {
                name: format!("i{bits}"),
                ty: ParamType::Int { bits, signed },
                pointee: None,
                by_value: None,
            });
        }
        let seeds = Seeds::new(&sig, None);
        for input in &seeds.inputs {
            for (p, v) in sig.params.iter().zip(&input.0) {
                if let (ParamType::Int { bits, signed }, ArgValue::Int(v)) = (p.ty, v) {
                    assert!(crate::exec::int_fits(*v, bits, signed), "{} = {v}", p.name);
                }
            }
        }
        assert!(seeds.inputs.iter().any(|x| x.0[3] == ArgValue::Int(100)));
    }

    /// The ladder reaches the subnormals.
    #[test]
    fn the_ladder_holds_subnormals() {
        let sig = sig(1);
        let seeds = Seeds::new(&sig, None);
        assert!(seeds
            .inputs
            .iter()
            .any(|x| x.0[0] == ArgValue::F64(f64::from_bits(1))));
        assert!(seeds
            .inputs
            .iter()
            .any(|x| matches!(x.0[0], ArgValue::F64(v) if v > 0.0 && v < 1e-310)));
    }

    /// An underflow region (x·x tiny) gives three inputs: its edge towards 1, where the square is subnormal and the
    /// next float's is not, the float inward of it, and the ladder input the walk started from, whose x is itself
    /// subnormal (what denormals-are-zero reads as 0).
    #[test]
    fn an_underflow_region_gives_its_edge_and_a_subnormal_input_inside() {
        let sig = sig(1);
        let formula = product(ExceptionKind::Underflow, false);
        let found = Seeds::new(&sig, None).find(&formula).expect("a witness");
        assert!(found.holds);
        let double = |x: &Input| match x.0[0] {
            ArgValue::F64(v) => v,
            _ => panic!("a double"),
        };
        let tiny = |v: f64| v != 0.0 && v.abs() < f64::MIN_POSITIVE;
        let x = double(&found.input);
        assert!(tiny(x * x), "{x:e}");
        let outward = if x > 0.0 { x.next_up() } else { x.next_down() };
        assert!(!tiny(outward * outward), "{x:e} is not the edge");
        let [inward, start] = found.inside.as_slice() else {
            panic!("two inputs inside: {:?}", found.inside);
        };
        let inward = double(inward);
        assert!(
            tiny(inward * inward) && inward.abs() < x.abs(),
            "{inward:e} is not inward of {x:e}"
        );
        assert!(tiny(double(start)), "{:e} is not subnormal", double(start));
    }

    /// Halving underflows (tiny and inexact) only at every other float near the edge: the input inward of the edge
    /// skips the float whose half is exact, so both builds underflow there and only flush-to-zero changes the value.
    #[test]
    fn the_input_inward_of_a_halving_s_edge_has_an_inexact_half() {
        let sig = sig(1);
        let x = param(0, VarType::Float(FloatFormat::Double));
        let site = Site {
            op: SiteOp::Arith(ArithOp::Mul),
            fmt: FloatFormat::Double,
            args: vec![x, sym::real_f64(0.5)],
        };
        let formula = sym::exception(ExceptionKind::Underflow, site);
        let found = Seeds::new(&sig, None).find(&formula).expect("a witness");
        let ArgValue::F64(inward) = found.inside[0].0[0] else {
            panic!("a double");
        };
        let half = inward * 0.5;
        assert!(half != 0.0 && half.abs() < f64::MIN_POSITIVE, "{inward:e}");
        assert_ne!(half * 2.0, inward, "{inward:e}'s half is exact");
    }

    /// An overflow's witness is its threshold alone: outside an underflow no start is kept.
    #[test]
    fn an_overflow_keeps_no_second_input() {
        let sig = sig(1);
        let formula = product(ExceptionKind::Overflow, false);
        let found = Seeds::new(&sig, None).find(&formula).expect("a witness");
        assert!(found.holds && found.inside.is_empty());
    }

    /// An underflow at a root of the path's arithmetic (12.34·x + 9.69, where no float makes the sum tiny) is
    /// found at the crossing: the float next to the root, which Z3's real model would round to.
    #[test]
    fn a_root_is_found_by_its_crossing() {
        let sig = sig(1);
        let x = param(0, VarType::Float(FloatFormat::Double));
        let product = sym::arith(ArithOp::Mul, FloatFormat::Double, sym::real_f64(12.34), x);
        let site = Site {
            op: SiteOp::Arith(ArithOp::Add),
            fmt: FloatFormat::Double,
            args: vec![product, sym::real_f64(9.69)],
        };
        let formula = sym::exception(ExceptionKind::Underflow, site);
        let found = Seeds::new(&sig, None).find(&formula).expect("a crossing");
        let ArgValue::F64(v) = found.input.0[0] else {
            unreachable!()
        };
        let root = -9.69 / 12.34;
        assert!((v - root).abs() <= 2.0 * f64::EPSILON, "{v} vs {root}");
        assert_eq!(
            found.holds,
            super::super::check::holds(&formula, &found.input.0) == Some(true)
        );
    }

    /// An underflow of `u³·u` with `u = x - 0.985` (odometer's `arg⁴`): the product never changes sign, its operand
    /// `u` does, and the float next to that root is the input (the band is out of reach of doubles; nlsat gave up
    /// on such queries after 30-60 ms each).
    #[test]
    fn a_product_s_operand_crossing_zero_is_a_root_too() {
        let sig = sig(1);
        let d = FloatFormat::Double;
        let x = param(0, VarType::Float(d));
        let u = sym::arith(ArithOp::Sub, d, x, sym::real_f64(0.985));
        let square = sym::arith(ArithOp::Mul, d, u.clone(), u.clone());
        let cube = sym::arith(ArithOp::Mul, d, square, u.clone());
        let site = Site {
            op: SiteOp::Arith(ArithOp::Mul),
            fmt: d,
            args: vec![cube, u],
        };
        let formula = sym::exception(ExceptionKind::Underflow, site);
        let found = Seeds::new(&sig, None).find(&formula).expect("a crossing");
        let ArgValue::F64(v) = found.input.0[0] else {
            unreachable!()
        };
        assert!((v - 0.985).abs() <= 2.0 * f64::EPSILON, "{v}");
        assert!(!found.holds);
    }

    /// Two roots between neighbouring ladder inputs ((x - 4.5)·(x - 5), positive at 2.67 and at 10.7) are
    /// missed by the ladder and found among the ends of the boxes interval refutation leaves open.
    #[test]
    fn roots_between_ladder_inputs_are_found_among_the_open_boxes() {
        let sig = sig(1);
        let d = FloatFormat::Double;
        let x = param(0, VarType::Float(d));
        let square = sym::arith(ArithOp::Mul, d, x.clone(), x.clone());
        let linear = sym::arith(ArithOp::Mul, d, sym::real_f64(9.5), x);
        let site = Site {
            op: SiteOp::Arith(ArithOp::Add),
            fmt: d,
            args: vec![
                sym::arith(ArithOp::Sub, d, square, linear),
                sym::real_f64(22.5),
            ],
        };
        let formula = sym::exception(ExceptionKind::Underflow, site);
        let seeds = Seeds::new(&sig, None);
        assert!(
            seeds.find(&formula).is_none(),
            "the ladder steps over both roots"
        );
        let open =
            interval::refute(&formula, &sig, None).expect("not refuted: it holds near the roots");
        let found = seeds.find_crossing_in(&formula, &open).expect("a crossing");
        let ArgValue::F64(v) = found.input.0[0] else {
            unreachable!()
        };
        assert!(
            (v - 4.5).abs() < 1e-12 || (v - 5.0).abs() < 1e-12,
            "{v} is not next to a root"
        );
    }

    /// Inside a declared domain every seed and every witness respects it, and a condition the domain excludes has
    /// none.
    #[test]
    fn a_domain_is_respected() {
        let sig = sig(2);
        let source =
            "// foe: assume 0.5 <= x0 <= 2 && 0.5 <= x1 <= 2\ndouble f(double x0, double x1);\n";
        let (domain, errors) = crate::domain::domain_for(source, &sig, 0, 2);
        assert!(errors.is_empty() && domain.ranges.len() == 2, "{errors:?}");
        let seeds = Seeds::new(&sig, Some(&domain));
        assert!(seeds.inputs.iter().all(|x| domain.contains(x)));
        assert!(seeds
            .find(&product(ExceptionKind::Overflow, false))
            .is_none());
    }

    /// Formulae of several float parameters are left to Z3.
    #[test]
    fn several_float_parameters_go_to_z3() {
        let sig = sig(2);
        assert!(Seeds::new(&sig, None)
            .find(&product(ExceptionKind::Overflow, true))
            .is_none());
    }
}
