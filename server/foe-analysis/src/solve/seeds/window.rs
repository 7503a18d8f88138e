//! Underflow regions the ladder steps over: between two neighbouring ladder inputs on the formula's path, the
//! operation's result goes from normal to exactly zero (an operand itself underflowed to zero, as `x·x` does for
//! `|x| < 2^-537`), so somewhere between them it is subnormal. Cephes `exp2.c`'s `(x² + Q0)·x²` is subnormal only
//! for `2^-537 < |x| < 2^-511`, between the ladder's `2^-540` and `2^-512`; over the reals the condition also holds
//! at an `x` a hair beyond an integer (where `x - round(x)` is tiny), which no double is, and Z3 spent its whole
//! budget on that integer part.
//!
//! The result's magnitude is bisected on the float line to where it leaves the normal range: the float past that
//! point is the region's edge (the largest subnormal result, as the ladder's walk gives it), and the region's other
//! end, where the result is about to become zero, is the input deep inside.

use super::{asked, bisect, result, Found, Input, Line, Seeds, INWARD_STEPS};
use crate::round::FloatFormat;
use crate::solve::check::Evaluator;
use crate::sym::Expr;
use crate::types::ExceptionKind;

impl Seeds<'_> {
    /// An underflow's region between two ladder inputs (and `extra` points) where its result is normal at one and
    /// zero at the other, all on the formula's path: its edge, with the float inward of it and the far end inside.
    pub(super) fn window(
        &self,
        formula: &Expr,
        mentioned: &[usize],
        extra: &[f64],
        eval: &mut Evaluator,
    ) -> Option<Found> {
        let (kind, site, path) = asked(formula)?;
        if kind != ExceptionKind::Underflow {
            return None;
        }
        let [j] = self.floats(mentioned)[..] else {
            return None;
        };
        let smallest_normal = match site.fmt {
            FloatFormat::Double => f64::MIN_POSITIVE,
            FloatFormat::Single => f64::from(f32::MIN_POSITIVE),
        };
        let base = self.line_base(mentioned);
        let line = Line::Axis(j, self.sig.params[j].ty);
        // The result's magnitude on an input of the domain that takes the formula's path.
        let size = |eval: &mut Evaluator, x: &Input| -> Option<f64> {
            if !self.domain.is_none_or(|d| d.contains(x)) {
                return None;
            }
            eval.evaluate(&x.0);
            if !path.iter().all(|c| eval.truth(c) == Some(true)) {
                return None;
            }
            let args: Option<Vec<f64>> = site.args.iter().map(|a| eval.float(a)).collect();
            let args = args?;
            if args.iter().any(|v| !v.is_finite()) {
                return None;
            }
            result(site, &args).map(f64::abs)
        };
        let mut previous: Option<(f64, f64)> = None;
        for t in self.line_points(&line, extra) {
            let Some(here) = size(eval, &line.at(&base, t)) else {
                previous = None;
                continue;
            };
            if let Some((s, before)) = previous {
                let ends = if before >= smallest_normal && here == 0.0 {
                    Some((t, s))
                } else if before == 0.0 && here >= smallest_normal {
                    Some((s, t))
                } else {
                    None
                };
                if let Some((zero, normal)) = ends {
                    let mut normal_at = |x: &Input| size(eval, x).is_some_and(|m| m >= smallest_normal);
                    let (below, _) = bisect(&line, &base, zero, normal, &mut normal_at);
                    if let Some(found) = self.inside_window(&line, &base, &below, zero, eval) {
                        return Some(found);
                    }
                }
            }
            previous = Some((t, here));
        }
        None
    }

    /// The region below `below` (the first float past the normal results, towards `zero`): its edge where the
    /// formula holds within [`INWARD_STEPS`] floats, the float inward of it, and the end nearest `zero`.
    fn inside_window(
        &self,
        line: &Line,
        base: &Input,
        below: &Input,
        zero: f64,
        eval: &mut Evaluator,
    ) -> Option<Found> {
        let mut holds = |x: &Input| eval.holds(&x.0) == Some(true);
        let from = line.position(below)?;
        let edge_at = (0..INWARD_STEPS).find(|&k| holds(&line.step(base, from, zero, k)))?;
        let edge = line.step(base, from, zero, edge_at);
        let inward = (edge_at + 1..=edge_at + INWARD_STEPS)
            .map(|k| line.step(base, from, zero, k))
            .find(|x| holds(x));
        let deep = (!holds(&line.at(base, zero))).then(|| {
            let edge_pos = line.position(&edge).unwrap_or(from);
            bisect(line, base, zero, edge_pos, &mut holds).1
        });
        let mut inside: Vec<Input> = Vec::new();
        for x in inward.into_iter().chain(deep) {
            if x.key() != edge.key() && inside.iter().all(|y| y.key() != x.key()) {
                inside.push(x);
            }
        }
        Some(Found {
            input: edge,
            holds: true,
            inside,
        })
    }
}
