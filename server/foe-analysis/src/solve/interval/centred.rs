//! The mean-value (centred) form for formulae of one parameter: over a box `X` with centre `c`, every real node
//! `f` lies in `f(c) + f'(X)·(X - c)` as well as in its interval, where `f'(X)` encloses its derivative over the
//! box (forward differentiation in interval arithmetic, outward rounded). Intervals over-approximate a
//! polynomial by the spread of its terms, which halving the box shrinks linearly; the centred form's excess
//! shrinks with the square of the width. A Chebyshev recurrence (GSL's `cheb_eval_e`, Cephes' `chbevl`) has
//! terms far larger than its value, so an unsatisfiable underflow query on it (a subnormal value, which needs a
//! root of the series inside the box) stays open after every bisection and goes to nlsat. Here each node's
//! interval is the intersection of the two, computed children first, and the formula is then evaluated with
//! those intervals. (On `bessel_K1.c` it refuted nothing: its open queries were satisfiable. How often it
//! refutes on the corpus was not measured.)
//!
//! Elementary functions, integer nodes and undecided `ite`s have no slope: the nodes above them keep their
//! intervals (the functions are valued as the real function within a few ulps, which a slope would not bound).

use super::{arith, eval, eval_real, Abs, Box, Truth};
use crate::sym::{self, ArithOp, Expr, Kind};

/// The formula's nodes, children first, with the real conditions of its exception nodes (which the evaluation
/// builds when it meets them) in front of each, and whether each depends on the parameter: computed once per
/// formula, used on every box.
pub(in crate::solve) struct Nodes(Vec<(Expr, bool)>);

impl Nodes {
    pub(in crate::solve) fn of(formula: &Expr, param: usize) -> Nodes {
        let mut nodes = Vec::new();
        let mut seen = sym::FingerprintSet::default();
        for e in formula.postorder() {
            if let Some(condition) = sym::atom_condition(&e) {
                for c in condition.postorder() {
                    if seen.insert(c.fingerprint()) {
                        nodes.push(c);
                    }
                }
            }
            if seen.insert(e.fingerprint()) {
                nodes.push(e);
            }
        }
        let mut depends = sym::FingerprintSet::default();
        let nodes = nodes
            .into_iter()
            .map(|e| {
                let on_param = match e.kind() {
                    Kind::Param { index, .. } => *index as usize == param,
                    _ => e
                        .children()
                        .iter()
                        .any(|c| depends.contains(&c.fingerprint())),
                };
                if on_param {
                    depends.insert(e.fingerprint());
                }
                (e, on_param)
            })
            .collect();
        Nodes(nodes)
    }
}

/// Whether `formula` is false everywhere in `b` by the centred form in parameter `param`.
pub(super) fn refutes(formula: &Expr, nodes: &Nodes, b: &Box, param: usize) -> bool {
    let Some((lo, hi)) = b.get(param).copied().flatten() else {
        return false;
    };
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return false;
    }
    let c = lo / 2.0 + hi / 2.0;
    let offset = ((lo - c).next_down(), (hi - c).next_up());
    let mut point = b.clone();
    point[param] = Some((c, c));
    let mut at_centre = sym::FingerprintMap::default();
    let mut tight = sym::FingerprintMap::default();
    let mut slopes: sym::FingerprintMap<Option<(f64, f64)>> = sym::FingerprintMap::default();
    for (e, on_param) in &nodes.0 {
        if e.sort() != sym::Sort::Real {
            continue;
        }
        let value = match e.kind() {
            Kind::Ite { .. } => eval(e, b, &mut tight),
            _ => eval_real(e, b, &mut tight),
        };
        let slope = match *on_param {
            true => slope(e, param, b, &mut tight, &slopes),
            false => Some((0.0, 0.0)),
        };
        slopes.insert(e.fingerprint(), slope);
        let centred = slope.and_then(|d| {
            let Abs::Real(plo, phi) = eval(e, &point, &mut at_centre) else {
                return None;
            };
            match arith(ArithOp::Mul, d, offset) {
                Abs::Real(slo, shi) => match arith(ArithOp::Add, (plo, phi), (slo, shi)) {
                    Abs::Real(l, h) if l <= h => Some((l, h)),
                    _ => None,
                },
                _ => None,
            }
        });
        let value = match (value, centred) {
            (Abs::Real(vlo, vhi), Some((mlo, mhi))) if vlo.max(mlo) <= vhi.min(mhi) => {
                Abs::Real(vlo.max(mlo), vhi.min(mhi))
            }
            (Abs::Real(..), _) => value,
            (_, Some((mlo, mhi))) => Abs::Real(mlo, mhi),
            (v, None) => v,
        };
        tight.insert(e.fingerprint(), value);
    }
    eval(formula, b, &mut tight) == Abs::Bool(Truth::False)
}

/// An interval holding the derivative of `e`, which depends on parameter `param`, over `b` (its children's
/// known), `None` where the node has none this module bounds.
fn slope(
    e: &Expr,
    param: usize,
    b: &Box,
    values: &mut sym::FingerprintMap<Abs>,
    slopes: &sym::FingerprintMap<Option<(f64, f64)>>,
) -> Option<(f64, f64)> {
    const ZERO: Option<(f64, f64)> = Some((0.0, 0.0));
    let d = |x: &Expr| slopes.get(&x.fingerprint()).copied().flatten();
    let v = |values: &sym::FingerprintMap<Abs>, x: &Expr| match values.get(&x.fingerprint()) {
        Some(Abs::Real(lo, hi)) => Some((*lo, *hi)),
        _ => None,
    };
    let real = |a: Abs| match a {
        Abs::Real(lo, hi) => Some((lo, hi)),
        _ => None,
    };
    let mul = |x: (f64, f64), y: (f64, f64)| real(arith(ArithOp::Mul, x, y));
    let add = |x: (f64, f64), y: (f64, f64)| real(arith(ArithOp::Add, x, y));
    let neg = |(lo, hi): (f64, f64)| (-hi, -lo);
    match e.kind() {
        Kind::RealConst(_) => ZERO,
        Kind::Param { index, .. } if *index as usize == param => Some((1.0, 1.0)),
        Kind::Param { .. } => ZERO,
        Kind::Convert { a, .. } => d(a),
        Kind::Neg(a) => d(a).map(neg),
        Kind::Abs(a) => {
            let (lo, hi) = v(values, a)?;
            let da = d(a)?;
            if lo >= 0.0 {
                Some(da)
            } else if hi <= 0.0 {
                Some(neg(da))
            } else {
                let m = da.0.abs().max(da.1.abs());
                Some((-m, m))
            }
        }
        Kind::Arith { op, a, b: y, .. } => {
            let (da, db) = (d(a)?, d(y)?);
            let (va, vb) = (v(values, a)?, v(values, y)?);
            match op {
                ArithOp::Add => add(da, db),
                ArithOp::Sub => add(da, neg(db)),
                ArithOp::Mul => add(mul(da, vb)?, mul(va, db)?),
                // (a/b)' = (a' - (a/b)·b') / b
                ArithOp::Div => {
                    let q = real(arith(ArithOp::Div, va, vb))?;
                    real(arith(ArithOp::Div, add(da, neg(mul(q, db)?))?, vb))
                }
            }
        }
        Kind::Fma { a, b: y, c, .. } => {
            let (da, db, dc) = (d(a)?, d(y)?, d(c)?);
            let (va, vb) = (v(values, a)?, v(values, y)?);
            add(add(mul(da, vb)?, mul(va, db)?)?, dc)
        }
        // Constant where no integer lies inside its argument's interval.
        Kind::ToIntegral { .. } => match eval_real(e, b, values) {
            Abs::Real(lo, hi) if lo == hi => ZERO,
            _ => None,
        },
        Kind::Ite { c, a, b: y } => match eval(c, b, values) {
            Abs::Bool(Truth::True) => d(a),
            Abs::Bool(Truth::False) => d(y),
            _ => None,
        },
        _ => None,
    }
}
