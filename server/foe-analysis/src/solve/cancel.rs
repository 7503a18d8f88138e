//! Candidates aimed at results from the model: for each addition, subtraction or comparison of the plain build
//! whose operands the model shows can cancel ([`CancellationQuery`]), an input that makes them cancel, solved over
//! the reals and rounded like an exception's model. They go to the search aimed at results, which runs them and
//! their nearest neighbours on both builds: where cancellation magnifies a rounding difference the outputs part,
//! and where a comparison's sides meet its answer flips.
//!
//! They come after the exception queries and only from what those left of the function's work budget, at most
//! [`WORK_MS`], so the exception search (and the paper's Table III) is what it was.

use super::parts::{solve_real, Approach};
use super::{interval, limit, SolveLimits, Verdict, WorkMeter};
use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::model::CancellationQuery;
use crate::rng::SplitMix;
use crate::sym::{self, Formula, VarType};
use crate::types::{FunctionSignature, Input};
use std::collections::HashSet;

/// Z3 work (in milliseconds of budget) one function's cancellation queries may spend at most.
pub const WORK_MS: u64 = 50;
/// The time limit of one cancellation query (they are mostly answered in a few milliseconds).
const QUERY_MS: u32 = 20;

/// `formula` with its first float input held to a narrow interval at an ordinary magnitude chosen from the
/// formula's fingerprint. Z3's models are simple numbers (1, 1/2), on which the builds' roundings mostly agree; a
/// model pinned to a value with 40 significant bits or more is an input where they part as often as anywhere.
fn anchored(formula: &Formula) -> Option<Formula> {
    let (index, ty) = formula
        .params()
        .into_iter()
        .find(|(_, ty)| matches!(ty, VarType::Float(_)))?;
    let mut rng = SplitMix(formula.fingerprint() as u64);
    let sign = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
    let near = sign * (1.0 + rng.unit()) * (2f64).powi(rng.range(-8, 8) as i32);
    let (lo, hi) = (near, near * (1.0 + (2f64).powi(-40)));
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    let p = sym::param(index, ty);
    Some(sym::and([
        formula.clone(),
        sym::ge(p.clone(), sym::real_f64(lo)),
        sym::le(p, sym::real_f64(hi)),
    ]))
}

/// What solving the cancellation queries gave: distinct inputs in query order, and the work spent.
#[derive(Debug, Default)]
pub struct Cancellations {
    pub inputs: Vec<Input>,
    pub work_spent_ms: u64,
}

/// Solves `queries` (by kind: comparisons, integers, sums; deduplicated, each [`anchored`] first, inside `domain`
/// when there is one) within the work budget of `limits` (capped at [`WORK_MS`]) on the solver threads.
pub fn solve_cancellations(
    sig: &FunctionSignature,
    queries: &[CancellationQuery],
    domain: Option<&Domain>,
    cfg: &AnalysisConfig,
    limits: SolveLimits,
) -> Cancellations {
    let budget = limits.work_ms.map_or(WORK_MS, |w| w.min(WORK_MS));
    let mut seen = HashSet::new();
    // Each query anchored first (an input with many significant bits), then as it is.
    let mut ordered: Vec<&CancellationQuery> = queries.iter().collect();
    ordered.sort_by_key(|q| q.kind);
    let jobs: Vec<Formula> = ordered
        .into_iter()
        .filter(|q| !q.formula.is_false() && seen.insert(q.formula.fingerprint()))
        .flat_map(|q| anchored(&q.formula).into_iter().chain([q.formula.clone()]))
        .collect();
    if jobs.is_empty() || budget == 0 {
        return Cancellations::default();
    }
    let meter = WorkMeter {
        limit: Some(budget),
        spent: Default::default(),
        exhausted: Default::default(),
    };
    let solved = meter.map(
        &jobs,
        cfg.threads,
        |formula, limiter: &limit::Limiter<'_>| {
            // No wall-clock check: the work budget bounds these few queries, and a deadline would make which inputs
            // the search gets depend on the machine's load.
            if interval::refutes(formula, sig, domain) {
                return None;
            }
            limiter.label(formula.fingerprint());
            let r = solve_real(sig, formula, domain, QUERY_MS, Approach::Whole, limiter);
            (r.verdict == Verdict::Sat).then_some(r.input).flatten()
        },
    );
    let mut keys = HashSet::new();
    let inputs: Vec<Input> = solved
        .into_iter()
        .flatten()
        .flatten()
        .filter(|input| keys.insert(input.key()))
        .collect();
    tracing::debug!(
        function = %sig.name,
        queries = jobs.len(),
        work_ms = meter.spent.get(),
        inputs = ?inputs,
        "cancellations solved"
    );
    Cancellations {
        inputs,
        work_spent_ms: meter.spent.get(),
    }
}
