//! Candidates aimed at results from the model: for each addition, subtraction or comparison of the plain build
//! whose operands the model shows can cancel ([`CancellationQuery`]), an input that makes them cancel, solved over
//! the reals and rounded like an exception's model. They go to the search aimed at results, which runs them and
//! their nearest neighbours on both builds: where cancellation magnifies a rounding difference the outputs part,
//! and where a comparison's sides meet its answer flips.
//!
//! They come after the exception queries and only from what those left of the function's work budget, at most
//! [`WORK_MS`], so the exception search (and the paper's Table III) is what it was. A function without a domain
//! takes over the verdicts its callees reached on the same queries ([`super::known`]): GSL's wrapper
//! `gsl_sf_bessel_Y0(x)` asks exactly what `gsl_sf_bessel_Y0_e(x, &r)` asked.

use super::known::{self, KnownVerdict, KnownVerdicts};
use super::parts::{solve_real, Approach};
use super::{interval, limit, SolveLimits, Verdict, WorkMeter};
use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::model::CancellationQuery;
use crate::rng::SplitMix;
use crate::round::FloatFormat;
use crate::sym::{self, Formula, VarType};
use crate::types::{ArgValue, FunctionSignature, Input};
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

/// `formula` with every float input but one pinned to an ordinary value with many significant bits (chosen from
/// the formula's fingerprint), and the pinned values. A quotient or product of inputs (`x / w`) that an integer
/// rounding then takes (`floor(x / w)`) is nonlinear integer arithmetic, which Z3 gives up on at once; with all
/// but one input fixed it is linear.
fn pinned(formula: &Formula) -> Vec<(Formula, Vec<(u32, ArgValue)>)> {
    let floats: Vec<(u32, VarType)> = formula
        .params()
        .into_iter()
        .filter(|(_, ty)| matches!(ty, VarType::Float(_)))
        .collect();
    if floats.len() < 2 {
        return vec![];
    }
    let mut rng = SplitMix(formula.fingerprint() as u64 ^ 0x9e37_79b9_7f4a_7c15);
    let mut variants = vec![];
    // Several sets of pinned values: whether the builds' roundings part where the free input meets the condition
    // depends on the pinned values (for `floor(x / w)` at x = n·w, on w's reciprocal), about one time in seven.
    for _ in 0..PINNED_SETS {
        let values: Vec<ArgValue> = floats
            .iter()
            .map(|(_, ty)| {
                let v = (1.0 + rng.unit()) * (2f64).powi(rng.range(-4, 4) as i32);
                match ty {
                    VarType::Float(FloatFormat::Single) => ArgValue::F32(v as f32),
                    _ => ArgValue::F64(v),
                }
            })
            .collect();
        for &(free, _) in floats.iter().take(PINNED_FREE) {
            let pins: Vec<(u32, ArgValue)> = floats
                .iter()
                .zip(&values)
                .filter(|((index, _), _)| *index != free)
                .map(|(&(index, _), &v)| (index, v))
                .collect();
            let terms = pins
                .iter()
                .filter_map(|&(index, v)| match v {
                    ArgValue::F64(v) => Some((index, sym::real_f64(v))),
                    ArgValue::F32(v) => Some((index, sym::real_f64(v as f64))),
                    _ => None,
                })
                .collect();
            variants.push((formula.substitute(&terms), pins));
        }
    }
    variants
}

/// The inputs [`pinned`] leaves free in turn, at most.
const PINNED_FREE: usize = 3;
/// The sets of ordinary values [`pinned`] gives the other inputs (each a seeded draw in [1/16, 32)).
const PINNED_SETS: usize = 6;

/// What solving the cancellation queries gave: distinct inputs in query order, the work spent, and (without a
/// domain) the verdicts reached, for the functions that call this one.
#[derive(Debug, Default)]
pub struct Cancellations {
    pub inputs: Vec<Input>,
    pub work_spent_ms: u64,
    pub learned: Vec<(String, KnownVerdict)>,
}

/// The queries' formulae by kind (comparisons, integers, sums), each once.
fn unique(queries: &[CancellationQuery]) -> Vec<&Formula> {
    let mut seen = HashSet::new();
    let mut ordered: Vec<&CancellationQuery> = queries.iter().collect();
    ordered.sort_by_key(|q| q.kind);
    ordered
        .into_iter()
        .map(|q| &q.formula)
        .filter(|f| !f.is_false() && seen.insert(f.fingerprint()))
        .collect()
}

/// What is asked first: each query anchored (an input with many significant bits), then as it is.
fn first_jobs(queries: &[&Formula]) -> Vec<Formula> {
    queries
        .iter()
        .flat_map(|f| anchored(f).into_iter().chain([(*f).clone()]))
        .collect()
}

/// The queries neither first form answered with an input (`answered`, by fingerprint), each asked again with
/// every float input but one pinned ([`pinned`]): the formulae, and the pinned values.
fn second_jobs(
    queries: &[&Formula],
    answered: impl Fn(u128) -> bool,
) -> Vec<(Formula, Vec<(u32, ArgValue)>)> {
    queries
        .iter()
        .filter(|q| {
            !answered(q.fingerprint()) && anchored(q).is_none_or(|a| !answered(a.fingerprint()))
        })
        .flat_map(|q| pinned(q))
        .collect()
}

/// The fingerprints of the formulae [`solve_cancellations`] may ask for `queries` when it takes over the verdicts
/// `known` (a function without a domain): the first forms, and the pinned forms of the queries `known` does not
/// answer. Every one of them known, it asks Z3 nothing and the function needs no solver process.
pub(super) fn may_ask(queries: &[CancellationQuery], known: &KnownVerdicts) -> Vec<u128> {
    let queries = unique(queries);
    let answered = |fingerprint: u128| {
        known
            .get(&known::key(fingerprint))
            .is_some_and(KnownVerdict::has_input)
    };
    let first = first_jobs(&queries).into_iter();
    let second = second_jobs(&queries, answered).into_iter().map(|(f, _)| f);
    first.chain(second).map(|f| f.fingerprint()).collect()
}

/// Whether every formula of [`may_ask`] has a verdict in `known` (what `solve_function_isolated` checks).
#[cfg(test)]
pub(crate) fn all_taken_over(queries: &[CancellationQuery], known: &KnownVerdicts) -> bool {
    may_ask(queries, known)
        .into_iter()
        .all(|f| known.contains_key(&known::key(f)))
}

/// A cancellation query's answer: its verdict, and the input when it is satisfiable.
type Answer = (Verdict, Option<Input>);

/// Solves `queries` (by kind: comparisons, integers, sums; deduplicated, each [`anchored`] first, inside `domain`
/// when there is one) within the work budget of `limits` (capped at [`WORK_MS`]) on the solver threads; without a
/// domain, a query whose verdict `known` holds (a callee's) is not asked again.
pub fn solve_cancellations(
    sig: &FunctionSignature,
    queries: &[CancellationQuery],
    domain: Option<&Domain>,
    known: &KnownVerdicts,
    cfg: &AnalysisConfig,
    limits: SolveLimits,
) -> Cancellations {
    let budget = limits.work_ms.map_or(WORK_MS, |w| w.min(WORK_MS));
    let queries = unique(queries);
    let jobs = first_jobs(&queries);
    if jobs.is_empty() || budget == 0 {
        return Cancellations::default();
    }
    // A callee's verdicts hold for this function's same formulae only where neither has a domain (they are
    // learned without one).
    let taken_over = |formula: &Formula| -> Option<Answer> {
        let verdict = known
            .get(&known::key(formula.fingerprint()))
            .filter(|_| domain.is_none())?
            .for_signature(sig);
        Some((verdict.verdict, verdict.input))
    };
    let solve = |formula: &&Formula, limiter: &limit::Limiter<'_>| -> Answer {
        // No wall-clock check: the work budget bounds these few queries, and a deadline would make which inputs
        // the search gets depend on the machine's load.
        if interval::refutes(formula, sig, domain) {
            return (Verdict::Unsat, None);
        }
        limiter.label(formula.fingerprint());
        let r = solve_real(sig, formula, domain, QUERY_MS, Approach::Whole, limiter);
        let input = (r.verdict == Verdict::Sat).then_some(r.input).flatten();
        (r.verdict, input)
    };
    // The answers to `formulae`: taken over, else solved (only those go to the solver threads, which make a Z3
    // context each); `None` where the budget ended first.
    let answer = |meter: &WorkMeter, formulae: &[Formula]| -> Vec<Option<Answer>> {
        let mut answers: Vec<Option<Answer>> = formulae.iter().map(taken_over).collect();
        let open: Vec<usize> = (0..formulae.len())
            .filter(|&i| answers[i].is_none())
            .collect();
        if !open.is_empty() {
            let asked: Vec<&Formula> = open.iter().map(|&i| &formulae[i]).collect();
            for (i, solved) in open.into_iter().zip(meter.map(&asked, cfg.threads, solve)) {
                answers[i] = solved;
            }
        }
        answers
    };
    // What this function's queries gave, for its callers (none with a domain): a verdict, or that it gave up
    // (Z3 did, or the budget ended first), as the exception queries' verdicts are taken over.
    let mut learned = Vec::new();
    let mut learn = |formulae: &[Formula], answers: &[Option<Answer>]| {
        if domain.is_some() {
            return;
        }
        for (formula, answer) in formulae.iter().zip(answers) {
            let key = known::key(formula.fingerprint());
            if known.contains_key(&key) {
                continue;
            }
            let verdict = match answer {
                Some((verdict, input)) => KnownVerdict::decided(*verdict, input.as_ref()),
                None => KnownVerdict::gave_up(),
            };
            learned.push((key, verdict));
        }
    };
    let meter = WorkMeter {
        limit: Some(budget),
        spent: Default::default(),
        exhausted: Default::default(),
    };
    let first = answer(&meter, &jobs);
    learn(&jobs, &first);
    let mut solved: Vec<Option<Option<Input>>> = first
        .into_iter()
        .map(|a| a.map(|(_, input)| input))
        .collect();
    // Then, from what is left, the queries neither form answered with inputs pinned but one ([`pinned`]).
    let answered: HashSet<u128> = jobs
        .iter()
        .zip(&solved)
        .filter(|(_, r)| matches!(r, Some(Some(_))))
        .map(|(f, _)| f.fingerprint())
        .collect();
    let (second, pins): (Vec<Formula>, Vec<_>) = second_jobs(&queries, |f| answered.contains(&f))
        .into_iter()
        .unzip();
    let spent = meter.spent.get();
    if spent >= budget {
        learn(&second, &vec![None; second.len()]);
    }
    if !second.is_empty() && spent < budget {
        let more = WorkMeter {
            limit: Some(budget - spent),
            spent: Default::default(),
            exhausted: Default::default(),
        };
        let answers = answer(&more, &second);
        learn(&second, &answers);
        // the pinned inputs are not in the model: put them back
        solved.extend(answers.into_iter().zip(pins).map(|(answer, pins)| {
            answer.map(|(_, input)| {
                input.map(|mut input| {
                    for (index, v) in pins {
                        if let Some(slot) = input.0.get_mut(index as usize) {
                            *slot = v;
                        }
                    }
                    input
                })
            })
        }));
        meter.spent.set(spent + more.spent.get());
    }
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
        taken_over = jobs.iter().filter(|f| taken_over(f).is_some()).count(),
        learned = learned.len(),
        work_ms = meter.spent.get(),
        inputs = ?inputs,
        "cancellations solved"
    );
    Cancellations {
        inputs,
        work_spent_ms: meter.spent.get(),
        learned,
    }
}
