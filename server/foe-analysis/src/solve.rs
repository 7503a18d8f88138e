//! Solving exception queries with Z3: the union of both builds' queries, deduplicated syntactically, each solved
//! over the reals with a time limit on worker threads, models rounded exactly to the parameters' formats, and
//! (optionally) candidates that do not raise the exception in IEEE arithmetic retried in Z3's FP theory.
//!
//! Every worker thread uses its own thread-local Z3 context; only plain data crosses threads.
//!
//! This file schedules and combines; one formula is solved in `parts.rs` (over the reals, parts, concretisation,
//! rounding, repair), `seeds.rs` first tries it without Z3, `retry.rs` retries a missed model in the FP theory,
//! `inputs.rs` constrains the parameters and reads models back, `known.rs` keeps the file's verdicts.

mod cancel;
pub(crate) mod check;
pub mod child;
mod fp;
mod inputs;
mod interval;
mod invert;
mod known;
mod limit;
mod parts;
mod real;
mod retry;
mod schedule;
mod seeds;
#[cfg(test)]
pub(crate) use cancel::all_taken_over;
pub use cancel::{solve_cancellations, Cancellations};
pub use known::{remember, KnownVerdict, KnownVerdicts};
pub use schedule::PATHS_PER_SITE;

use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::model::Query;
use crate::report::FormulaCounts;
use crate::types::{Build, ExceptionKind, FunctionSignature, Input, SourceLoc};
use inputs::unconstrained;
use parts::{solve_real, Approach};
use retry::solve_fp;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// The full version of the libz3 this process loaded (`Z3_get_full_version`), e.g. "5.4.1.0".
pub fn z3_version() -> &'static str {
    z3::full_version()
}

/// An input the solver proposes for one exception condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// One value per parameter of the signature (`ArgValue::OutPtr` for pointers).
    pub input: Input,
    pub build: Build,
    pub kind: ExceptionKind,
    pub loc: Option<SourceLoc>,
}

/// How much one solve may do. The work budget decides (Z3's resource units, counted in milliseconds at
/// [`limit::RLIMIT_PER_MS`]): queries are started in fixed chunks and a chunk that would start after the budget is
/// spent is given up, so where a solve stops does not depend on the machine's load. The deadline is a wall-clock
/// safety net only (a query not started by then gives up).
#[derive(Debug, Clone, Copy, Default)]
pub struct SolveLimits {
    pub work_ms: Option<u64>,
    pub deadline: Option<Instant>,
}

/// The work a solve has done, and its budget ([`SolveLimits::work_ms`]).
struct WorkMeter {
    limit: Option<u64>,
    spent: std::cell::Cell<u64>,
    exhausted: std::cell::Cell<bool>,
}

impl WorkMeter {
    /// Maps `f` over `items` on the solver threads, each thread with an equal share of the budget left: a thread
    /// takes its next item only while its own work stays under its share, so which items run does not depend on
    /// the threads' timing, and no thread waits for another. Items not started (the budget is spent) get `None`,
    /// as do those whose worker panicked.
    fn map<T: Sync, R: Send>(
        &self,
        items: &[T],
        threads: usize,
        f: impl Fn(&T, &limit::Limiter<'_>) -> R + Sync,
    ) -> Vec<Option<R>> {
        let workers = threads.max(1).min(items.len()).max(1) as u64;
        let share = self
            .limit
            .map(|l| l.saturating_sub(self.spent.get()).div_ceil(workers));
        let started = Instant::now();
        let results = limit::parallel(items, threads, |item, limiter| {
            if share.is_some_and(|s| limiter.total_spent_ms() >= s) {
                return None;
            }
            let before = limiter.total_spent_ms();
            let r = f(item, limiter);
            Some((r, limiter.total_spent_ms() - before))
        });
        tracing::trace!(
            items = items.len(),
            ms = started.elapsed().as_millis() as u64,
            "solver batch"
        );
        results
            .into_iter()
            .map(|r| match r {
                Some(Some((r, spent))) => {
                    self.spent.set(self.spent.get() + spent);
                    Some(r)
                }
                Some(None) => {
                    self.exhausted.set(true);
                    None
                }
                None => None,
            })
            .collect()
    }
}

/// What solving one function's queries produced.
#[derive(Debug, Clone, Default)]
pub struct SolveOutcome {
    /// The Z3 work done, in milliseconds of budget ([`SolveLimits::work_ms`]).
    pub work_spent_ms: u64,
    /// Whether queries were given up because the work budget was spent.
    pub work_exhausted: bool,
    /// Formulae built from P, from P', and unique after syntactic deduplication.
    pub formulae: FormulaCounts,
    /// Unique formulae Z3 found satisfiable over the reals.
    pub satisfiable: usize,
    /// Unique formulae Z3 gave up on (time limit or incompleteness).
    pub timeouts: usize,
    /// Unique formulae not solved because [`schedule::PATHS_PER_SITE`] paths of their site gave no input.
    pub capped: usize,
    /// Distinct (by bit pattern) candidate inputs, in query order.
    pub candidates: Vec<Candidate>,
    /// What the real phases gave for each satisfiable-looking unique formula, for [`solve_within`].
    results: Vec<RealResult>,
    /// Unique formulae whose verdict an earlier function of the file reached ([`KnownVerdicts`]).
    pub known: usize,
    /// The verdicts this solve reached, for the functions solved after it (without a domain only).
    pub learned: Vec<(String, KnownVerdict)>,
}

/// The verdict on one unique formula.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Verdict {
    Sat,
    Unsat,
    Unknown,
}

/// What solving one formula over the reals gave.
#[derive(Debug, Clone)]
struct RealResult {
    verdict: Verdict,
    /// The rounded model (or a neighbour of it that raises the exception).
    input: Option<Input>,
    /// Whether the input was checked not to raise the exception in IEEE arithmetic.
    misses: bool,
    /// Given up on in a part with more than one float parameter, which phase two's concretisation can bind
    /// differently (a univariate part would be asked again exactly as phase one asked it).
    concretisable: bool,
    /// For an underflow the cheap layer found: inputs inside the region beside the edge `input` is on, searched
    /// after it ([`seeds::Found::inside`]); a function taking the verdict over takes them over too.
    inside: Vec<Input>,
}

impl RealResult {
    /// A model whose rounding raises the exception.
    fn hits(&self) -> bool {
        self.verdict == Verdict::Sat && self.input.is_some() && !self.misses
    }
}

/// Solves the union of both builds' queries (deduplicated syntactically), each with a per-query time limit, in
/// parallel on `cfg.threads` threads. With `domain` the declared parameter ranges are added to every query.
///
/// Three phases: every formula over the reals with half the time limit; the ones Z3 gave up on in a part of
/// several float parameters again with the other half, by concretisation; then, with `cfg.fp_theory_fallback`, the
/// formulae whose rounded model misses the exception in IEEE arithmetic again in the FP theory, all of them within
/// half the time the first phases took (at most one query time limit).
pub fn solve(
    sig: &FunctionSignature,
    queries_p: &[Query],
    queries_pp: &[Query],
    domain: Option<&Domain>,
    cfg: &AnalysisConfig,
) -> SolveOutcome {
    // Z3's answers depend on what its context solved before: a solve starts with fresh ones, alone.
    let _one_solve = limit::exclusive_solve();
    solve_reusing(
        sig,
        queries_p,
        queries_pp,
        domain,
        Prior::None,
        cfg,
        SolveLimits::default(),
    )
}

/// [`solve`] (over all inputs) within `limits` (the function's budget), taking over the verdicts `known` from
/// the file's earlier functions; the queries given up on for it, or for the function whose verdict it took,
/// count as time-outs.
pub fn solve_until(
    sig: &FunctionSignature,
    queries_p: &[Query],
    queries_pp: &[Query],
    known: &KnownVerdicts,
    cfg: &AnalysisConfig,
    limits: SolveLimits,
) -> SolveOutcome {
    solve_reusing(
        sig,
        queries_p,
        queries_pp,
        None,
        Prior::Known(known),
        cfg,
        limits,
    )
}

/// What a solve takes over instead of asking Z3.
#[derive(Clone, Copy)]
enum Prior<'a> {
    None,
    /// The same formulae's results without the domain ([`solve_within`]).
    Anywhere(&'a [RealResult]),
    /// Verdicts of the file's earlier functions.
    Known(&'a KnownVerdicts),
}

/// [`solve`] within `domain` after `anywhere` solved the same queries without it: a formula unsatisfiable or
/// given up on anywhere is not solved again, nor one whose candidate already lies in the domain.
pub fn solve_within(
    sig: &FunctionSignature,
    queries_p: &[Query],
    queries_pp: &[Query],
    domain: &Domain,
    anywhere: &SolveOutcome,
    cfg: &AnalysisConfig,
    limits: SolveLimits,
) -> SolveOutcome {
    solve_reusing(
        sig,
        queries_p,
        queries_pp,
        Some(domain),
        Prior::Anywhere(&anywhere.results),
        cfg,
        limits,
    )
}

/// [`solve`], [`solve_until`] and [`solve_within`]: the results taken over from `prior`, then the three phases
/// on the rest, then the outcome.
fn solve_reusing(
    sig: &FunctionSignature,
    queries_p: &[Query],
    queries_pp: &[Query],
    domain: Option<&Domain>,
    prior: Prior<'_>,
    cfg: &AnalysisConfig,
    limits: SolveLimits,
) -> SolveOutcome {
    let started = Instant::now();
    let (unique, jobs) = unique_queries(queries_p, queries_pp);
    let timeout_ms = query_limit_ms(cfg.solver_timeout_ms, jobs.len());
    let run = SolveRun {
        sig,
        domain,
        cfg,
        limits,
        meter: WorkMeter {
            limit: limits.work_ms,
            spent: Default::default(),
            exhausted: Default::default(),
        },
        timeout_ms,
        phase_ms: phase_limits_ms(timeout_ms, &jobs),
        jobs,
    };
    let (known, mut real) = run.taken_over(prior);
    let todo: Vec<usize> = (0..run.jobs.len()).filter(|i| real[*i].is_none()).collect();
    let first = run.first_phase(todo, &mut real);
    run.concretise_given_up(&first.todo, &mut real);
    let real_done = started.elapsed();
    let fp = run.fp_retries(&real, &known, &first.crossings);

    let outcome = SolveOutcome {
        formulae: FormulaCounts {
            p: queries_p.len(),
            p_prime: queries_pp.len(),
            unique: unique.len(),
        },
        capped: first.capped,
        work_spent_ms: run.meter.spent.get(),
        work_exhausted: run.meter.exhausted.get(),
        ..SolveOutcome::default()
    };
    let outcome = run.settle(outcome, real, &known, &first.todo, fp);
    tracing::debug!(
        function = %sig.name,
        unique = outcome.formulae.unique,
        known = outcome.known,
        sat = outcome.satisfiable,
        timeouts = outcome.timeouts,
        candidates = outcome.candidates.len(),
        real_ms = real_done.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "solved"
    );
    outcome
}

/// Functions of more unique formulae than this get half the per-query time limit.
///
/// What a long limit buys is mostly give-ups: on 21 GSL and Cephes files (2026-11-27), 21 of 12,900 answered
/// queries took more than half the limit, while the queries Z3 gave up on took 47% of the solver's CPU time.
/// Halving the limit on twelve of them cut their time by a quarter with the same confirmed sites (two gained). A function of few
/// formulae has no other paths to make up for one query: Table III's `jetengine` (118 formulae) gets three of its
/// satisfiable models after 110-120 ms and fell from 37 diff-producing inputs to 29 without them.
const MANY_FORMULAE: usize = 128;

/// The per-query time limit of a function with `formulae` unique formulae to solve: the configured one, halved
/// for a function of more than [`MANY_FORMULAE`] (it depends on the function's text alone, as its cache key does).
fn query_limit_ms(configured: u64, formulae: usize) -> u32 {
    let limit = configured.clamp(1, u32::MAX as u64) as u32;
    if formulae > MANY_FORMULAE {
        half(limit)
    } else {
        limit
    }
}

/// Half a time limit, at least a millisecond.
fn half(ms: u32) -> u32 {
    (ms / 2).max(1)
}

/// Each job's share of the per-query limit `timeout_ms` in phase one (half) and phase two (the rest). A job whose
/// site has other paths ([`schedule::has_other_paths`]) gets half the limit: on the 30 GSL and Cephes files around
/// the corpus median, 2026-11-27, the solve's time fell by a tenth with the same confirmed sites and one more; the
/// straight-line programs of Table III have one path per site.
fn phase_limits_ms(timeout_ms: u32, jobs: &[&Query]) -> Vec<(u32, u32)> {
    schedule::has_other_paths(jobs)
        .into_iter()
        .map(|shared| {
            let limit = if shared { half(timeout_ms) } else { timeout_ms };
            let first = half(limit);
            (first, limit.saturating_sub(first).max(1))
        })
        .collect()
}

/// Both builds' queries deduplicated syntactically (in query order), and of those the ones to solve: all but
/// the constant `false`.
fn unique_queries<'a>(
    queries_p: &'a [Query],
    queries_pp: &'a [Query],
) -> (Vec<&'a Query>, Vec<&'a Query>) {
    let mut seen = HashSet::new();
    let unique: Vec<&Query> = queries_p
        .iter()
        .chain(queries_pp)
        .filter(|q| seen.insert(q.formula.clone()))
        .collect();
    let jobs: Vec<&Query> = unique
        .iter()
        .copied()
        .filter(|q| !q.formula.is_false())
        .collect();
    (unique, jobs)
}

/// One solve's fixed context, shared by its phases.
struct SolveRun<'a> {
    sig: &'a FunctionSignature,
    domain: Option<&'a Domain>,
    cfg: &'a AnalysisConfig,
    limits: SolveLimits,
    meter: WorkMeter,
    /// The unique formulae to solve, in query order; the phases index them.
    jobs: Vec<&'a Query>,
    /// The per-query time limit in milliseconds ([`query_limit_ms`]).
    timeout_ms: u32,
    /// Per job, its time limit in phase one and in phase two ([`phase_limits_ms`]).
    phase_ms: Vec<(u32, u32)>,
}

/// What phase one leaves to the phases after it.
struct FirstPhase {
    /// Formulae not solved because [`schedule::PATHS_PER_SITE`] paths of their site gave no input.
    capped: usize,
    /// The formulae asked of Z3 and not skipped by the rounds, in order.
    todo: Vec<usize>,
    /// Formulae whose input is a crossing the cheap layer found (not retried in the FP theory).
    crossings: HashSet<usize>,
}

impl RealResult {
    /// No verdict: Z3 gave up, or the query was not started.
    fn gave_up() -> RealResult {
        RealResult::without_input(Verdict::Unknown, false)
    }

    /// A verdict without a model: unsatisfiable, or given up on (`concretisable` as the field says).
    fn without_input(verdict: Verdict, concretisable: bool) -> RealResult {
        RealResult {
            verdict,
            input: None,
            misses: false,
            concretisable,
            inside: Vec::new(),
        }
    }

    /// Satisfiable with `input`, which `misses` the exception in IEEE arithmetic or raises it.
    fn satisfied(input: Input, misses: bool) -> RealResult {
        RealResult {
            verdict: Verdict::Sat,
            input: Some(input),
            misses,
            concretisable: false,
            inside: Vec::new(),
        }
    }
}

impl SolveLimits {
    /// Whether the wall-clock safety net has passed (a query not started by then gives up).
    fn out_of_time(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

// The closures the solver threads run capture fields, not `self`: the work meter is not `Sync`.
impl SolveRun<'_> {
    /// The results taken over instead of asking Z3, one per job (`None`: ask Z3), and the verdicts of the file's
    /// earlier functions among them (one per job with [`Prior::Known`], empty otherwise).
    fn taken_over(&self, prior: Prior<'_>) -> (Vec<Option<RealResult>>, Vec<Option<RealResult>>) {
        let (sig, jobs, domain) = (self.sig, &self.jobs, self.domain);
        let known: Vec<Option<RealResult>> = match prior {
            Prior::Known(known) => jobs
                .iter()
                .map(|q| {
                    Some(
                        known
                            .get(&known::key(q.formula.fingerprint()))?
                            .for_signature(sig),
                    )
                })
                .collect(),
            Prior::None | Prior::Anywhere(_) => Vec::new(),
        };
        let prior: Option<&[RealResult]> = match prior {
            Prior::Anywhere(results) => Some(results),
            Prior::None | Prior::Known(_) => None,
        };
        let real: Vec<Option<RealResult>> = (0..jobs.len())
            .map(|i| {
                if let Some(k) = known.get(i) {
                    return k.clone();
                }
                let before = prior?.get(i)?;
                let in_domain = |x: &Input| domain.is_none_or(|d| d.contains(x));
                match before.verdict {
                    Verdict::Sat if !before.input.as_ref().is_some_and(in_domain) => None,
                    Verdict::Sat => Some(RealResult {
                        misses: false,
                        inside: before
                            .inside
                            .iter()
                            .filter(|x| in_domain(x))
                            .cloned()
                            .collect(),
                        ..before.clone()
                    }),
                    verdict => Some(RealResult::without_input(verdict, false)),
                }
            })
            .collect();
        (known, real)
    }

    /// Phase one: every formula of `todo` as a whole with half the time limit, in the rounds per site of
    /// [`schedule::in_rounds`], its result written to `real`.
    fn first_phase(&self, todo: Vec<usize>, real: &mut [Option<RealResult>]) -> FirstPhase {
        let (sig, jobs, domain, cfg, limits) =
            (self.sig, &self.jobs, self.domain, self.cfg, self.limits);
        let phase_ms = &self.phase_ms;
        let seeds = seeds::Seeds::new(sig, domain);
        // Formulae whose input is a crossing the cheap layer found: the float next to the threshold, where no float
        // raises the exception, so the floating-point retry is not asked for one.
        let crossings = std::sync::Mutex::new(HashSet::new());
        let first_round = |&i: &usize, limiter: &limit::Limiter<'_>| {
            if limits.out_of_time() {
                return RealResult::gave_up();
            }
            limiter.label(jobs[i].formula.fingerprint());
            let seeded = |found: seeds::Found| {
                if !found.holds {
                    crossings.lock().expect("not poisoned").insert(i);
                }
                RealResult {
                    inside: found.inside,
                    ..RealResult::satisfied(found.input, !found.holds)
                }
            };
            if cfg.seed_inputs {
                if let Some(found) = seeds.find(&jobs[i].formula) {
                    return seeded(found);
                }
            }
            let Some(open) = interval::refute(&jobs[i].formula, sig, domain) else {
                return RealResult::without_input(Verdict::Unsat, false);
            };
            // The boxes refutation left open, bisected finest where it came closest, hold crossings the ladder
            // steps over.
            if cfg.seed_inputs {
                if let Some(found) = seeds.find_crossing_in(&jobs[i].formula, &open) {
                    return seeded(found);
                }
            }
            // An underflow of a sum the float grid rules out: its exact cancellation instead, whose rounded
            // model misses the exception as the band's would have, and which no floating-point retry can hit.
            if let Some(cancels) = interval::cancellation_instead(&jobs[i].formula, sig, domain) {
                crossings.lock().expect("not poisoned").insert(i);
                let r = solve_real(
                    sig,
                    &cancels,
                    domain,
                    phase_ms[i].0,
                    Approach::Whole,
                    limiter,
                );
                return match r.input {
                    Some(input) if r.verdict == Verdict::Sat => RealResult::satisfied(input, true),
                    _ => RealResult::without_input(r.verdict, false),
                };
            }
            solve_real(
                sig,
                &jobs[i].formula,
                domain,
                phase_ms[i].0,
                Approach::Whole,
                limiter,
            )
        };
        let hits_before: Vec<bool> = real
            .iter()
            .map(|r| r.as_ref().is_some_and(RealResult::hits))
            .collect();
        let skipped = schedule::in_rounds(
            jobs,
            &todo,
            |i| hits_before[i],
            |batch| {
                let results = self.meter.map(batch, cfg.threads, first_round);
                batch
                    .iter()
                    .zip(results)
                    .map(|(&i, r)| {
                        let answer = match &r {
                            Some(r) if r.hits() => schedule::Answer::Hit,
                            Some(r) if r.verdict != Verdict::Unknown => schedule::Answer::NoHit,
                            _ => schedule::Answer::GaveUp,
                        };
                        real[i] = r;
                        answer
                    })
                    .collect()
            },
        );
        let capped = skipped
            .iter()
            .filter(|(_, why)| *why == schedule::Skip::Capped)
            .count();
        let todo: Vec<usize> = todo
            .into_iter()
            .filter(|i| skipped.binary_search_by_key(i, |(j, _)| *j).is_err())
            .collect();
        FirstPhase {
            capped,
            todo,
            crossings: crossings.into_inner().expect("not poisoned"),
        }
    }

    /// Phase two: the formulae of `todo` Z3 gave up on in a multivariate part, with the other half of the time
    /// limit, multivariate parts by concretisation, binding parameters first to the models phase one found for
    /// neighbouring formulae (which share most of their path conditions). A verdict replaces the result in `real`.
    fn concretise_given_up(&self, todo: &[usize], real: &mut [Option<RealResult>]) {
        let (sig, jobs, domain, limits) = (self.sig, &self.jobs, self.domain, self.limits);
        let phase_ms = &self.phase_ms;
        let given_up: Vec<usize> = todo
            .iter()
            .copied()
            // Not started, or given up on where concretisation asks something new.
            .filter(|i| real[*i].as_ref().is_none_or(|r| r.concretisable))
            .collect();
        if given_up.is_empty() {
            return;
        }
        let models: Vec<(usize, Input)> = real
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, r.as_ref()?.input.clone()?)))
            .collect();
        let retried = self.meter.map(&given_up, self.cfg.threads, |&i, limiter| {
            if limits.out_of_time() {
                return RealResult::gave_up();
            }
            limiter.label(jobs[i].formula.fingerprint());
            let mut nearest = models.clone();
            nearest.sort_by_key(|(j, _)| j.abs_diff(i));
            let hints: Vec<Input> = nearest.into_iter().map(|(_, input)| input).collect();
            solve_real(
                sig,
                &jobs[i].formula,
                domain,
                phase_ms[i].1,
                Approach::Concretise(&hints),
                limiter,
            )
        });
        for (i, r) in given_up.into_iter().zip(retried) {
            if r.as_ref().is_some_and(|r| r.verdict != Verdict::Unknown) {
                real[i] = r;
            }
        }
    }

    /// Phase three, with `cfg.fp_theory_fallback`: the formulae whose rounded model misses the exception in IEEE
    /// arithmetic, again in the FP theory; the exact inputs found, by job.
    fn fp_retries(
        &self,
        real: &[Option<RealResult>],
        known: &[Option<RealResult>],
        crossings: &HashSet<usize>,
    ) -> HashMap<usize, Input> {
        let (jobs, domain, cfg, limits) = (&self.jobs, self.domain, self.cfg, self.limits);
        let timeout_ms = self.timeout_ms;
        let mut fp: HashMap<usize, Input> = HashMap::new();
        if !cfg.fp_theory_fallback {
            return fp;
        }
        let retries: Vec<(usize, &Query, &Input)> = real
            .iter()
            .enumerate()
            // A verdict taken over was retried by the function that reached it.
            .filter(|(i, _)| !known.get(*i).is_some_and(Option::is_some))
            .filter(|(i, _)| !crossings.contains(i))
            .filter_map(|(i, r)| match r {
                Some(RealResult {
                    input: Some(input),
                    misses: true,
                    ..
                }) => Some((i, jobs[i], input)),
                _ => None,
            })
            .collect();
        // The retries share one query time limit per thread, at least 10 ms and at most a quarter of the limit each,
        // counted in Z3's resource units so the same retries get the same answers however loaded the machine is:
        // most misses are cancellations or exact results that no float input turns into the exception, and a small
        // function's whole solve should not wait on them.
        let quarter = (timeout_ms / 4).max(10);
        let per_retry = (timeout_ms as usize * cfg.threads.max(1) / retries.len().max(1))
            .clamp(10, quarter as usize) as u32;
        let found = self
            .meter
            .map(&retries, cfg.threads, |(_, q, input), limiter| {
                if limits.out_of_time() {
                    return None;
                }
                limiter.label(q.formula.fingerprint());
                solve_fp(&q.formula, domain, per_retry, input, limiter)
            });
        fp.extend(
            retries
                .iter()
                .zip(found)
                .filter_map(|((i, _, _), r)| Some((*i, r??))),
        );
        fp
    }

    /// Fills `outcome` from the phases' results: each job's result (an exact input of the FP theory preferred),
    /// the counts, the distinct candidates in query order (an underflow's input inside its region after its
    /// edge) and, without a domain, the verdicts learned.
    fn settle(
        &self,
        mut outcome: SolveOutcome,
        real: Vec<Option<RealResult>>,
        known: &[Option<RealResult>],
        todo: &[usize],
        mut fp: HashMap<usize, Input>,
    ) -> SolveOutcome {
        let jobs = &self.jobs;
        let mut keys = HashSet::new();
        for (i, (query, result)) in jobs.iter().zip(real).enumerate() {
            let result = result.unwrap_or(RealResult::gave_up());
            let exact = fp.remove(&i);
            let inputs = result.input.iter().chain(&exact).chain(&result.inside);
            for input in inputs {
                if keys.insert(input.key()) {
                    outcome.candidates.push(Candidate {
                        input: input.clone(),
                        build: query.build,
                        kind: query.kind,
                        loc: query.loc,
                    });
                }
            }
            let inherited = known.get(i).is_some_and(Option::is_some);
            outcome.known += usize::from(inherited);
            match result.verdict {
                Verdict::Sat => outcome.satisfiable += 1,
                // Given up on here or by the earlier function of the file whose verdict was taken over, not in the
                // solve without the domain.
                Verdict::Unknown if inherited || todo.binary_search(&i).is_ok() => {
                    outcome.timeouts += 1
                }
                Verdict::Unknown | Verdict::Unsat => {}
            }
            outcome.results.push(RealResult {
                input: exact.clone().or(result.input),
                misses: result.misses && exact.is_none(),
                ..result
            });
        }
        if self.domain.is_none() {
            outcome.learned = jobs
                .iter()
                .zip(&outcome.results)
                .enumerate()
                .filter(|(i, _)| !known.get(*i).is_some_and(Option::is_some))
                .map(|(_, (q, r))| (known::key(q.formula.fingerprint()), KnownVerdict::of(r)))
                .collect();
        }
        outcome
    }
}

/// A signature of `n` `double` parameters `x0`, `x1`, … returning `double`, for tests.
#[cfg(test)]
fn doubles(n: usize) -> FunctionSignature {
    FunctionSignature {
        name: "f".into(),
        params: (0..n)
            .map(|i| crate::types::Param::new(format!("x{i}"), crate::types::ParamType::F64))
            .collect(),
        ret: crate::types::ReturnType::F64,
    }
}

/// binary64's largest finite value Ω, the smallest normal's reciprocal 2^1022 and the smallest subnormal's
/// 2^1074, exactly: the bounds foe's queries carry, for tests that rebuild a query.
#[cfg(test)]
fn binary64_limits() -> [num_bigint::BigInt; 3] {
    let power_of_two = |n: u32| num_bigint::BigInt::from(1u32) << n;
    [
        power_of_two(1024) - power_of_two(971),
        power_of_two(1022),
        power_of_two(1074),
    ]
}

#[cfg(test)]
mod tests {
    /// The binaries load the Z3 that `.cargo/config.toml` names (FOE_Z3_PREFIX ends in its version), not
    /// another libz3 that the linker or the loader found first.
    #[test]
    fn loads_the_z3_of_the_configured_prefix() {
        let prefix = env!("FOE_Z3_PREFIX");
        let version = super::z3_version();
        assert!(
            prefix.ends_with(&format!("/z3-{version}")),
            "loaded Z3 {version}, but FOE_Z3_PREFIX is {prefix}"
        );
    }
}
