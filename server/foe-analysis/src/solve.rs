//! Solving exception queries with Z3: the union of both builds' queries, deduplicated syntactically, each solved
//! over the reals with a time limit on worker threads, models rounded exactly to the parameters' formats, and
//! (optionally) candidates that do not raise the exception in IEEE arithmetic retried in Z3's FP theory.
//!
//! Every worker thread uses its own thread-local Z3 context; only plain data crosses threads.

mod check;
pub mod child;
mod fp;
mod interval;
mod invert;
mod known;
mod limit;
mod real;
mod schedule;
mod seeds;
pub use known::{remember, KnownVerdict, KnownVerdicts};
pub use schedule::PATHS_PER_SITE;

use crate::config::AnalysisConfig;
use crate::domain::{Bound, Domain};
use crate::model::Query;
use crate::report::FormulaCounts;
use crate::round::{f64_to_rational, round_rational, step_f32, step_f64, FloatFormat};
use crate::sym::{self, Expr, VarType};
use crate::types::{
    ArgValue, Build, ExceptionKind, FunctionSignature, Input, ParamType, SourceLoc,
};
use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive};
use std::collections::{HashMap, HashSet};
use std::time::Instant;
use z3::ast::{Bool, Int, Real, BV};
use z3::{SatResult, Solver};

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

/// Queries started together between two looks at the work budget.
const CHUNK: usize = 8;

/// The work a solve has done, and its budget ([`SolveLimits::work_ms`]).
struct WorkMeter {
    limit: Option<u64>,
    spent: std::cell::Cell<u64>,
    exhausted: std::cell::Cell<bool>,
}

impl WorkMeter {
    /// Maps `f` over `items` on the solver threads in chunks of [`CHUNK`]; the items of chunks that would start
    /// once the budget is spent get `None`, as do those whose worker panicked.
    fn map<T: Sync, R: Send>(
        &self,
        items: &[T],
        threads: usize,
        f: impl Fn(&T, &limit::Limiter<'_>) -> R + Sync,
    ) -> Vec<Option<R>> {
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(CHUNK.max(threads)) {
            if self.limit.is_some_and(|l| self.spent.get() >= l) {
                self.exhausted.set(true);
                out.extend(chunk.iter().map(|_| None));
                continue;
            }
            let results = limit::parallel(chunk, threads, |item, limiter| {
                let before = limiter.total_spent_ms();
                let r = f(item, limiter);
                (r, limiter.total_spent_ms() - before)
            });
            for r in results {
                out.push(r.map(|(r, spent)| {
                    self.spent.set(self.spent.get() + spent);
                    r
                }));
            }
        }
        out
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
/// Three phases: every formula over the reals with half the time limit; the ones Z3 gave up on again with the
/// other half, by concretisation; then, with `cfg.fp_theory_fallback`, the formulae whose rounded model misses the
/// exception in IEEE arithmetic again in the FP theory, all of them within half the time the first phases took
/// (at most one query time limit).
pub fn solve(
    sig: &FunctionSignature,
    queries_p: &[Query],
    queries_pp: &[Query],
    domain: Option<&Domain>,
    cfg: &AnalysisConfig,
) -> SolveOutcome {
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
    let out_of_time = || limits.deadline.is_some_and(|d| Instant::now() >= d);
    let meter = WorkMeter {
        limit: limits.work_ms,
        spent: Default::default(),
        exhausted: Default::default(),
    };
    let gave_up = || RealResult {
        verdict: Verdict::Unknown,
        input: None,
        misses: false,
    };
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
    let timeout_ms = cfg.solver_timeout_ms.clamp(1, u32::MAX as u64) as u32;

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
    let mut real: Vec<Option<RealResult>> = (0..jobs.len())
        .map(|i| {
            if let Some(k) = known.get(i) {
                return k.clone();
            }
            let before = prior?.get(i)?;
            let inside = before
                .input
                .as_ref()
                .is_some_and(|x| domain.is_none_or(|d| d.contains(x)));
            match before.verdict {
                Verdict::Sat if !inside => None,
                Verdict::Sat => Some(RealResult {
                    misses: false,
                    ..before.clone()
                }),
                verdict => Some(RealResult {
                    verdict,
                    input: None,
                    misses: false,
                }),
            }
        })
        .collect();
    let todo: Vec<usize> = (0..jobs.len()).filter(|i| real[*i].is_none()).collect();
    // Phase one: every formula as a whole with half the time limit. Phase two: the ones Z3 gave up on with the
    // other half, multivariate parts by concretisation, binding parameters first to the models phase one found
    // for neighbouring formulae (which share most of their path conditions).
    let first_ms = (timeout_ms / 2).max(1);
    let seeds = seeds::Seeds::new(sig, domain);
    // Formulae whose input is a crossing the cheap layer found: the float next to the threshold, where no float
    // raises the exception, so the floating-point retry is not asked for one.
    let crossings = std::sync::Mutex::new(HashSet::new());
    let first_round = |&i: &usize, limiter: &limit::Limiter<'_>| {
        if out_of_time() {
            return gave_up();
        }
        if cfg.seed_inputs {
            if let Some(found) = seeds.find(&jobs[i].formula) {
                if !found.holds {
                    crossings.lock().expect("not poisoned").insert(i);
                }
                return RealResult {
                    verdict: Verdict::Sat,
                    input: Some(found.input),
                    misses: !found.holds,
                };
            }
        }
        if domain.is_some_and(|d| interval::refutes(&jobs[i].formula, sig, d)) {
            return RealResult {
                verdict: Verdict::Unsat,
                input: None,
                misses: false,
            };
        }
        let r = solve_real(
            sig,
            &jobs[i].formula,
            domain,
            first_ms,
            Approach::Whole,
            limiter,
        );
        r
    };
    let hits_before: Vec<bool> = real
        .iter()
        .map(|r| r.as_ref().is_some_and(RealResult::hits))
        .collect();
    let skipped = schedule::in_rounds(
        &jobs,
        &todo,
        |i| hits_before[i],
        |batch| {
            let results = meter.map(batch, cfg.threads, first_round);
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
    let given_up: Vec<usize> = todo
        .iter()
        .copied()
        .filter(|i| {
            real[*i]
                .as_ref()
                .is_none_or(|r| r.verdict == Verdict::Unknown)
        })
        .collect();
    if !given_up.is_empty() {
        let models: Vec<(usize, Input)> = real
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, r.as_ref()?.input.clone()?)))
            .collect();
        let retried = meter.map(&given_up, cfg.threads, |&i, limiter| {
            if out_of_time() {
                return gave_up();
            }
            let mut nearest = models.clone();
            nearest.sort_by_key(|(j, _)| j.abs_diff(i));
            let hints: Vec<Input> = nearest.into_iter().map(|(_, input)| input).collect();
            let rest_ms = (timeout_ms - first_ms).max(1);
            solve_real(
                sig,
                &jobs[i].formula,
                domain,
                rest_ms,
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
    let real_done = started.elapsed();
    let crossings = crossings.into_inner().expect("not poisoned");
    let mut fp: HashMap<usize, Input> = HashMap::new();
    if cfg.fp_theory_fallback {
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
        let found = meter.map(&retries, cfg.threads, |(_, q, input), limiter| {
            if out_of_time() {
                return None;
            }
            solve_fp(&q.formula, domain, per_retry, input, limiter)
        });
        fp.extend(
            retries
                .iter()
                .zip(found)
                .filter_map(|((i, _, _), r)| Some((*i, r??))),
        );
    }

    let mut outcome = SolveOutcome {
        formulae: FormulaCounts {
            p: queries_p.len(),
            p_prime: queries_pp.len(),
            unique: unique.len(),
        },
        capped,
        work_spent_ms: meter.spent.get(),
        work_exhausted: meter.exhausted.get(),
        ..SolveOutcome::default()
    };
    let mut keys = HashSet::new();
    for (i, (query, result)) in jobs.iter().zip(real).enumerate() {
        let result = result.unwrap_or(RealResult {
            verdict: Verdict::Unknown,
            input: None,
            misses: false,
        });
        let exact = fp.remove(&i);
        let input = exact.clone().or(result.input.clone());
        outcome.results.push(RealResult {
            input,
            misses: result.misses && exact.is_none(),
            ..result
        });
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
        for input in result.input.into_iter().chain(exact) {
            if keys.insert(input.key()) {
                outcome.candidates.push(Candidate {
                    input,
                    build: query.build,
                    kind: query.kind,
                    loc: query.loc,
                });
            }
        }
    }
    if domain.is_none() {
        outcome.learned = jobs
            .iter()
            .zip(&outcome.results)
            .enumerate()
            .filter(|(i, _)| !known.get(*i).is_some_and(Option::is_some))
            .map(|(_, (q, r))| (known::key(q.formula.fingerprint()), KnownVerdict::of(r)))
            .collect();
    }
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

/// A solver without Z3 timers (see [`limit`]): nlsat (with its preprocessing) for pure real queries, several
/// times faster on these than the default portfolio; the SMT core when integers occur.
fn solver(reals_only: bool) -> Solver {
    if !reals_only {
        return z3::Tactic::new("smt").solver();
    }
    // Z3's own `qfnra-nlsat` tactic, with nlsat's conflict resolution not factoring polynomials (`factor`): with
    // the huge coefficients of Ω and λ it costs more than it saves. (Spelling the tactic's pipeline out without its
    // `factor` tactic was faster with Z3 4.8.12; with 5.4.1 that pipeline answers `unknown` on most of carbongas's
    // queries within 1 % of their budget, so the tactic is used as Z3 ships it.)
    let solver = z3::Tactic::new("qfnra-nlsat").solver();
    let mut params = z3::Params::new();
    params.set_bool("factor", false);
    solver.set_params(&params);
    solver
}

/// Solves one formula over the reals and rounds its model; a model that misses the exception in IEEE arithmetic
/// is repaired by small steps where possible.
fn solve_real(
    sig: &FunctionSignature,
    formula: &Expr,
    domain: Option<&Domain>,
    timeout_ms: u32,
    approach: Approach<'_>,
    limiter: &limit::Limiter<'_>,
) -> RealResult {
    // The parts share the budget, counted in Z3's resource units (deterministic), not in time.
    let start = limiter.total_spent_ms();
    let mut values: HashMap<usize, ArgValue> = HashMap::new();
    let mut inverted: HashMap<usize, ArgValue> = HashMap::new();
    for part in independent_parts(formula, &domain_params(domain)) {
        let spent = limiter.total_spent_ms() - start;
        let remaining = (timeout_ms as u64).saturating_sub(spent) as u32;
        let (verdict, part_values) =
            solve_part(sig, &part, domain, remaining.max(1), approach, limiter);
        if verdict != Verdict::Sat {
            return RealResult {
                verdict,
                input: None,
                misses: false,
            };
        }
        let (part_values, part_inverted) = part_values;
        if let Some(alternative) = part_inverted {
            inverted.extend(alternative);
        }
        values.extend(part_values);
    }
    let input_of = |values: &HashMap<usize, ArgValue>| {
        Input(
            sig.params
                .iter()
                .enumerate()
                .map(|(i, p)| values.get(&i).copied().unwrap_or(unconstrained(p.ty)))
                .collect(),
        )
    };
    let input = input_of(&values);
    let verdict = Verdict::Sat;
    if check::holds(formula, &input.0) != Some(false) {
        return RealResult {
            verdict,
            input: Some(input),
            misses: false,
        };
    }
    if !inverted.is_empty() {
        let mut alternative = values.clone();
        alternative.extend(inverted);
        let alternative = input_of(&alternative);
        let found = std::iter::once(alternative.clone())
            .filter(|a| check::holds(formula, &a.0) == Some(true))
            .chain(repair(formula, &alternative))
            .next();
        if let Some(found) = found {
            return RealResult {
                verdict,
                input: Some(found),
                misses: false,
            };
        }
    }
    match repair(formula, &input) {
        // A neighbour of the rounded model raises it: Ariadne's findFloat step.
        Some(repaired) => RealResult {
            verdict,
            input: Some(repaired),
            misses: false,
        },
        None => RealResult {
            verdict,
            input: Some(input),
            misses: true,
        },
    }
}

/// Conjuncts of a query that share variables with each other but with no other part, and the parameters they
/// mention (KLEE's constraint independence): each part is solved on its own, pure real parts with nlsat.
struct Part {
    conjuncts: Vec<Expr>,
    params: Vec<usize>,
    /// [`rational_degree`] of the conjuncts.
    degree: u64,
}

/// Splits `formula` into independent parts; parameters in `constrained` that no conjunct mentions get parts of
/// their own (for their domain constraints).
fn independent_parts(formula: &Expr, constrained: &[usize]) -> Vec<Part> {
    let conjuncts: Vec<Expr> = match formula.kind() {
        sym::Kind::And(xs) => xs.clone(),
        _ => vec![formula.clone()],
    };
    // Union-find over conjuncts, joined through shared parameters and fresh values (elementary functions,
    // unmodelled integers).
    let mut parent: Vec<usize> = (0..conjuncts.len()).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut owner: HashMap<u128, usize> = HashMap::new();
    let mut params_of: Vec<Vec<usize>> = vec![Vec::new(); conjuncts.len()];
    for (c, conjunct) in conjuncts.iter().enumerate() {
        for node in conjunct.postorder() {
            let key = match node.kind() {
                sym::Kind::Param { index, .. } => {
                    params_of[c].push(*index as usize);
                    *index as u128
                }
                sym::Kind::Math { .. } | sym::Kind::Opaque { .. } => node.fingerprint() | 1 << 127,
                _ => continue,
            };
            match owner.get(&key) {
                Some(&other) => {
                    let (a, b) = (find(&mut parent, c), find(&mut parent, other));
                    parent[a] = b;
                }
                None => {
                    owner.insert(key, c);
                }
            }
        }
    }
    let mut parts: Vec<Part> = Vec::new();
    let mut part_of_root: HashMap<usize, usize> = HashMap::new();
    for (c, conjunct) in conjuncts.into_iter().enumerate() {
        let root = find(&mut parent, c);
        let k = *part_of_root.entry(root).or_insert_with(|| {
            parts.push(Part {
                conjuncts: Vec::new(),
                params: Vec::new(),
                degree: 0,
            });
            parts.len() - 1
        });
        parts[k].conjuncts.push(conjunct);
        parts[k].params.append(&mut params_of[c]);
    }
    for part in &mut parts {
        part.params.sort_unstable();
        part.params.dedup();
        part.degree = rational_degree(&part.conjuncts);
    }
    for &p in constrained {
        if !parts.iter().any(|part| part.params.contains(&p)) {
            parts.push(Part {
                conjuncts: Vec::new(),
                params: vec![p],
                degree: 0,
            });
        }
    }
    parts
}

/// How a formula's parts are solved.
#[derive(Clone, Copy)]
enum Approach<'a> {
    /// Each part as a whole.
    Whole,
    /// Parts with several float parameters by Ariadne's concretisation (seed 000, §3.3.1): all float parameters
    /// but one are bound to values, first those of these inputs, then sampled ones, and the remaining univariate
    /// problem, which nlsat decides quickly, is solved; up to [`MAX_CONCRETIZATIONS`] bindings. Other parts as a
    /// whole.
    Concretise(&'a [Input]),
}

/// Solves one independent part within `timeout_ms`; the values of its parameters when satisfiable.
fn solve_part(
    sig: &FunctionSignature,
    part: &Part,
    domain: Option<&Domain>,
    timeout_ms: u32,
    approach: Approach<'_>,
    limiter: &limit::Limiter<'_>,
) -> (Verdict, PartValues) {
    let floats: Vec<usize> = part
        .params
        .iter()
        .copied()
        .filter(|i| is_float_param(sig, *i))
        .collect();
    let hints = match approach {
        Approach::Concretise(hints) if floats.len() > 1 => hints,
        _ => return check_part(sig, part, domain, &[], timeout_ms, limiter),
    };
    // Budget spent so far, counted in Z3's resource units (deterministic), not in time.
    let mut spent = 0u32;
    let range_of = |i: usize| domain.and_then(|d| d.ranges.iter().find(|r| r.param == i));
    let hinted = |input: &Input, i: usize| match input.0.get(i) {
        Some(ArgValue::F64(v)) => Some(*v),
        Some(ArgValue::F32(v)) => Some(*v as f64),
        _ => None,
    };
    let mut sampler = Sampler::new(
        part.conjuncts
            .iter()
            .fold(0u64, |h, c| h ^ c.fingerprint() as u64),
    );
    let attempt_ms = (timeout_ms / 4).max(1);
    for attempt in 0..MAX_CONCRETIZATIONS {
        if spent + 1 >= timeout_ms {
            break;
        }
        let free = floats[attempt % floats.len()];
        let hint = hints.get(attempt / floats.len());
        let bindings: Vec<(usize, f64)> = floats
            .iter()
            .filter(|i| **i != free)
            .map(|&i| {
                let value = hint.and_then(|h| hinted(h, i));
                (
                    i,
                    value.unwrap_or_else(|| sampler.value(sig.params[i].ty, range_of(i))),
                )
            })
            .collect();
        let (verdict, values) = check_part(
            sig,
            part,
            domain,
            &bindings,
            attempt_ms.min(timeout_ms - spent),
            limiter,
        );
        // At least half an attempt's budget: nlsat counts few resource units inside polynomial arithmetic, so an
        // attempt may take far longer than its units say; this keeps the attempts at most twice the budget's share.
        spent += limiter.last_spent_ms().max(attempt_ms / 2).max(1);
        tracing::trace!(
            attempt,
            free,
            hinted = hint.is_some(),
            ?verdict,
            "concretised query part"
        );
        if verdict == Verdict::Sat {
            return (verdict, values);
        }
    }
    (Verdict::Unknown, Default::default())
}

/// Bindings of all float parameters but one tried per part that Z3 gives up on.
const MAX_CONCRETIZATIONS: usize = 8;

/// Deterministic sampling of parameter values for concretisation (Ariadne's `random(dom(s))`): within the
/// declared range when there is one, else a random sign and mantissa with an exponent that is small half of the
/// time and anywhere in the format's range otherwise (splitmix64, seeded from the formula so runs repeat).
struct Sampler(crate::rng::SplitMix);

impl Sampler {
    fn new(seed: u64) -> Sampler {
        Sampler(crate::rng::SplitMix(seed))
    }

    fn value(&mut self, ty: ParamType, range: Option<&crate::domain::ParamRange>) -> f64 {
        let max_exp = if ty == ParamType::F32 { 127 } else { 1023 };
        let lo = range
            .and_then(|r| r.lo)
            .map(|b| b.value)
            .filter(|v| v.is_finite());
        let hi = range
            .and_then(|r| r.hi)
            .map(|b| b.value)
            .filter(|v| v.is_finite());
        let v = match (lo, hi) {
            (Some(lo), Some(hi)) => lo + self.0.unit() * (hi - lo),
            _ => {
                let exp = if self.0.next() & 1 == 0 {
                    (self.0.next() % 17) as i32 - 8
                } else {
                    (self.0.next() % (2 * max_exp as u64 - 1)) as i32 - (max_exp - 1)
                };
                let sign = if self.0.next() & 1 == 0 { 1.0 } else { -1.0 };
                let v = sign * (1.0 + self.0.unit()) * 2f64.powi(exp);
                v.clamp(lo.unwrap_or(f64::MIN), hi.unwrap_or(f64::MAX))
            }
        };
        if ty == ParamType::F32 {
            v as f32 as f64
        } else {
            v
        }
    }
}

/// Queries whose rational functions have a higher degree (numerator plus denominator, after clearing
/// denominators) are not given to Z3: its preprocessing of such polynomials (a 20-step Newton iteration has
/// degree 2^20) does not heed interruption and would run for hours. The paper's programs stay below 40.
const MAX_DEGREE: u64 = 64;

/// The same bound for queries with integers, decided by Z3's SMT core (a recursive factorial unrolled a few
/// times made it spin for half an hour).
const MAX_INTEGER_DEGREE: u64 = 4;

/// The largest degree (numerator + denominator) of any term of `conjuncts` as a rational function of the
/// parameters, elementary-function values counting as variables.
fn rational_degree(conjuncts: &[Expr]) -> u64 {
    let mut memo: HashMap<u128, (u64, u64)> = HashMap::new();
    let mut worst = 0;
    for c in conjuncts {
        for node in c.postorder() {
            let get = |e: &Expr| memo.get(&e.fingerprint()).copied().unwrap_or((0, 0));
            let add = |(na, da): (u64, u64), (nb, db): (u64, u64)| {
                (
                    na.saturating_add(db).max(nb.saturating_add(da)),
                    da.saturating_add(db),
                )
            };
            let mul = |(na, da): (u64, u64), (nb, db): (u64, u64)| {
                (na.saturating_add(nb), da.saturating_add(db))
            };
            let d = match node.kind() {
                sym::Kind::Param { .. } | sym::Kind::Math { .. } | sym::Kind::Opaque { .. } => {
                    (1, 0)
                }
                sym::Kind::Arith { op, a, b, .. } => match op {
                    sym::ArithOp::Add | sym::ArithOp::Sub => add(get(a), get(b)),
                    sym::ArithOp::Mul => mul(get(a), get(b)),
                    sym::ArithOp::Div => {
                        let (nb, db) = get(b);
                        mul(get(a), (db, nb))
                    }
                },
                sym::Kind::IntArith { op, a, b } => match op {
                    sym::IntOp::Mul => mul(get(a), get(b)),
                    sym::IntOp::Add | sym::IntOp::Sub => add(get(a), get(b)),
                },
                sym::Kind::Fma { a, b, c, .. } => add(mul(get(a), get(b)), get(c)),
                sym::Kind::Cmp { a, b, .. } => add(get(a), get(b)),
                // The condition relates the operation's exact result (e.g. the product of the operands).
                sym::Kind::Exception { kind, site } => {
                    let d = rational_degree(&[sym::real_condition(*kind, site)]);
                    (d, 0)
                }
                _ => node.children().into_iter().map(get).max().unwrap_or((0, 0)),
            };
            worst = worst.max(d.0.saturating_add(d.1));
            memo.insert(node.fingerprint(), d);
        }
    }
    worst
}

/// A part's model: the rounded parameter values, and the same with the bare arguments of elementary functions
/// inverted at the functions' model values ([`invert::inverted`]), when any are.
type PartValues = (Vec<(usize, ArgValue)>, Option<Vec<(usize, ArgValue)>>);

/// One Z3 check of a part, with `bindings` fixing some float parameters to values.
fn check_part(
    sig: &FunctionSignature,
    part: &Part,
    domain: Option<&Domain>,
    bindings: &[(usize, f64)],
    timeout_ms: u32,
    limiter: &limit::Limiter<'_>,
) -> (Verdict, PartValues) {
    let started = Instant::now();
    let degree = part.degree;
    if degree > MAX_DEGREE {
        tracing::debug!(degree, "query part too high a degree for Z3");
        return (Verdict::Unknown, Default::default());
    }
    let mut encoder = real::RealEncoder::new();
    let goals: Vec<Bool> = part.conjuncts.iter().map(|c| encoder.formula(c)).collect();
    let underflow = part.conjuncts.iter().any(|c| {
        c.postorder().iter().any(|e| {
            matches!(
                e.kind(),
                sym::Kind::Exception {
                    kind: ExceptionKind::Underflow,
                    ..
                }
            )
        })
    });
    let constraints = input_constraints(sig, domain, &part.params, underflow);
    let fixed: Vec<Bool> = bindings
        .iter()
        .map(|&(i, v)| {
            let fmt = sig.params[i]
                .ty
                .float_format()
                .unwrap_or(FloatFormat::Double);
            Real::new_const(real::param_name(i as u32, VarType::Float(fmt)))
                .eq(Real::from_big_rational(&f64_to_rational(v)))
        })
        .collect();
    let reals_only = !encoder.uses_integers && part.params.iter().all(|i| is_float_param(sig, *i));
    if !reals_only && degree > MAX_INTEGER_DEGREE {
        // Nonlinear integer arithmetic of high degree: Z3's SMT core can spin in it without heeding interruption.
        tracing::debug!(degree, "integer query part too high a degree for Z3");
        return (Verdict::Unknown, Default::default());
    }
    let solver = solver(reals_only);
    for goal in goals
        .iter()
        .chain(&encoder.side)
        .chain(&constraints)
        .chain(&fixed)
    {
        solver.assert(goal);
    }
    let verdict = match limiter.check(&solver, timeout_ms) {
        SatResult::Sat => Verdict::Sat,
        SatResult::Unsat => Verdict::Unsat,
        SatResult::Unknown => Verdict::Unknown,
    };
    tracing::trace!(
        degree,
        ms = started.elapsed().as_millis() as u64,
        ?verdict,
        reals_only,
        fixed = fixed.len(),
        "real query part"
    );
    let model = match verdict {
        Verdict::Sat => solver.get_model(),
        _ => None,
    };
    match model {
        Some(model) => {
            let values = param_values(sig, &model, &part.params);
            let inverted = invert::inverted(sig, &model, &part.conjuncts, &values);
            (verdict, (values, inverted))
        }
        // Unsat under bindings says nothing about the part.
        None if verdict == Verdict::Sat || !bindings.is_empty() => {
            (Verdict::Unknown, Default::default())
        }
        None => (verdict, Default::default()),
    }
}

/// Steps of at most this many ulps are tried on each parameter of a rounded model that misses the exception.
const REPAIR_STEPS: [i64; 6] = [1, -1, 2, -2, 3, -3];
/// Then relative perturbations by these factors, which break accidental exactness (a model of 1.0 or 2^-1023
/// makes a product exact, and an exact result does not underflow).
const REPAIR_FACTORS: [f64; 8] = [
    1.0 + 1.0 / 3145728.0,
    1.0 - 1.0 / 3145728.0,
    1.0 + 1.0 / 5242880.0,
    1.0 - 1.0 / 5242880.0,
    1.0 + 1.0 / 3072.0,
    1.0 - 1.0 / 3072.0,
    1.0 + 1.0 / 7168.0,
    1.0 - 1.0 / 7168.0,
];

/// A neighbour (a few ulps or a small relative step away in one parameter) of `input` on which the query holds
/// in IEEE arithmetic.
fn repair(formula: &Expr, input: &Input) -> Option<Input> {
    let params = formula.params();
    let variants = |v: &ArgValue| -> Vec<ArgValue> {
        match *v {
            ArgValue::F64(x) => REPAIR_STEPS
                .iter()
                .map(|k| step_f64(x, *k))
                .chain(REPAIR_FACTORS.iter().map(|f| x * f))
                .map(ArgValue::F64)
                .collect(),
            ArgValue::F32(x) => REPAIR_STEPS
                .iter()
                .map(|k| step_f32(x, *k))
                .chain(REPAIR_FACTORS.iter().map(|f| (x as f64 * f) as f32))
                .map(ArgValue::F32)
                .collect(),
            _ => vec![],
        }
    };
    for (index, _) in &params {
        let i = *index as usize;
        for v in variants(input.0.get(i)?) {
            if matches!(v, ArgValue::F64(x) if !x.is_finite())
                || matches!(v, ArgValue::F32(x) if !x.is_finite())
            {
                continue;
            }
            let mut values = input.0.clone();
            values[i] = v;
            if check::holds(formula, &values) == Some(true) {
                return Some(Input(values));
            }
        }
    }
    None
}

/// The FP-theory retry: an input on which the operation really raises the exception, if Z3 finds one within
/// `budget_ms` (in Z3's resource units). Like Ariadne's concretization, it first solves for one parameter at a time with the others fixed to
/// the rounded model (small circuits), then for all of them.
fn solve_fp(
    formula: &Expr,
    domain: Option<&Domain>,
    budget_ms: u32,
    real_input: &Input,
    limiter: &limit::Limiter<'_>,
) -> Option<Input> {
    // Bit-blasting high-degree terms or integer conversions is where Z3 stops heeding interruption.
    if rational_degree(std::slice::from_ref(formula)) > MAX_INTEGER_DEGREE
        || formula
            .params()
            .iter()
            .any(|(_, ty)| !matches!(ty, VarType::Float(_)))
    {
        return None;
    }
    let free: Vec<u32> = formula
        .params()
        .into_iter()
        .filter(|(_, ty)| matches!(ty, VarType::Float(_)))
        .map(|(i, _)| i)
        .collect();
    let fixed_except = |keep: Option<u32>| -> HashMap<u32, ArgValue> {
        free.iter()
            .filter(|i| Some(**i) != keep)
            .filter_map(|i| real_input.0.get(*i as usize).map(|v| (*i, *v)))
            .collect()
    };
    let mut attempts: Vec<HashMap<u32, ArgValue>> = Vec::new();
    if free.len() > 1 {
        attempts.extend(free.iter().map(|i| fixed_except(Some(*i))));
    }
    attempts.push(HashMap::new());
    let mut spent = 0u32;
    for fixed in attempts {
        let timeout = budget_ms.saturating_sub(spent);
        if timeout < 5 {
            return None;
        }
        let query = fp::encode(formula, domain, &fixed)?;
        let solver = z3::Tactic::new("qffp").solver();
        solver.from_string(query.smtlib.as_str());
        let started = Instant::now();
        let result = limiter.check(&solver, timeout);
        spent += limiter.last_spent_ms().max(1);
        tracing::trace!(
            ms = started.elapsed().as_millis() as u64,
            fixed = fixed.len(),
            ?result,
            "fp query"
        );
        if result != SatResult::Sat {
            continue;
        }
        let model = solver.get_model()?;
        let mut values = real_input.0.clone();
        for (index, fmt) in &query.params {
            let width = if *fmt == FloatFormat::Double { 64 } else { 32 };
            let bits = model
                .eval(&BV::new_const(fp::bits_name(*index), width), true)?
                .as_u64()?;
            values[*index as usize] = match fmt {
                FloatFormat::Double => ArgValue::F64(f64::from_bits(bits)),
                FloatFormat::Single => ArgValue::F32(f32::from_bits(bits as u32)),
            };
        }
        if check::holds(formula, &values) != Some(false) {
            return Some(Input(values));
        }
    }
    None
}

/// The parameters the declared domain constrains.
fn domain_params(domain: Option<&Domain>) -> Vec<usize> {
    domain
        .map(|d| d.ranges.iter().map(|r| r.param).collect())
        .unwrap_or_default()
}

/// For the parameters in `mentioned`: |x| ≤ Ω for floats (and, for underflow queries, x = 0 or |x| ≥ the
/// smallest subnormal: it costs nlsat time and matters only there), the width's range for integers, and the
/// declared domain.
fn input_constraints(
    sig: &FunctionSignature,
    domain: Option<&Domain>,
    mentioned: &[usize],
    tiny_inputs_matter: bool,
) -> Vec<Bool> {
    let mut out = Vec::new();
    for (i, p) in sig.params.iter().enumerate() {
        if !mentioned.contains(&i) {
            continue;
        }
        match p.ty {
            ParamType::F64 | ParamType::F32 => {
                let fmt = if p.ty == ParamType::F64 {
                    FloatFormat::Double
                } else {
                    FloatFormat::Single
                };
                let x = Real::new_const(real::param_name(i as u32, VarType::Float(fmt)));
                let max = Real::from_big_rational(&sym::max_finite(fmt));
                out.push(x.le(&max));
                out.push(x.ge(-max));
                if tiny_inputs_matter {
                    // A float is 0 or at least the smallest subnormal in magnitude: smaller models round to zero.
                    let tiny = Real::from_big_rational(&sym::min_subnormal(fmt));
                    let zero = Real::from_rational(0, 1);
                    out.push(Bool::or(&[x.eq(&zero), x.ge(&tiny), x.le(-tiny)]));
                }
            }
            ParamType::Int { bits, signed } => {
                let n = Int::new_const(real::param_name(i as u32, VarType::Int { bits, signed }));
                let (lo, hi) = int_param_range(bits);
                out.push(n.ge(Int::from_big_int(&lo)));
                out.push(n.le(Int::from_big_int(&hi)));
            }
            ParamType::OutPtr { .. } => {}
        }
    }
    for range in domain.map(|d| d.ranges.as_slice()).unwrap_or(&[]) {
        let Some(p) = sig
            .params
            .get(range.param)
            .filter(|_| mentioned.contains(&range.param))
        else {
            continue;
        };
        let value = match p.ty {
            ParamType::F64 => Real::new_const(real::param_name(
                range.param as u32,
                VarType::Float(FloatFormat::Double),
            )),
            ParamType::F32 => Real::new_const(real::param_name(
                range.param as u32,
                VarType::Float(FloatFormat::Single),
            )),
            ParamType::Int { bits, signed } => {
                let n = Int::new_const(real::param_name(
                    range.param as u32,
                    VarType::Int { bits, signed },
                ));
                let reading = if signed || bits == 1 {
                    n
                } else {
                    let modulus = Int::from_big_int(&(BigInt::one() << bits as usize));
                    n.lt(Int::from_i64(0)).ite(&(n.clone() + modulus), &n)
                };
                Real::from_int(&reading)
            }
            ParamType::OutPtr { .. } => continue,
        };
        let bound = |b: &Bound| Real::from_big_rational(&f64_to_rational(b.value));
        if let Some(lo) = range.lo.filter(|b| b.value.is_finite()) {
            out.push(if lo.inclusive {
                value.ge(bound(&lo))
            } else {
                value.gt(bound(&lo))
            });
        }
        if let Some(hi) = range.hi.filter(|b| b.value.is_finite()) {
            out.push(if hi.inclusive {
                value.le(bound(&hi))
            } else {
                value.lt(bound(&hi))
            });
        }
    }
    out
}

/// The range of an integer parameter's Z3 variable (signed form; `bool` is 0..=1).
fn int_param_range(bits: u32) -> (BigInt, BigInt) {
    if bits == 1 {
        return (BigInt::from(0), BigInt::from(1));
    }
    let half = BigInt::one() << (bits as usize - 1);
    (-half.clone(), half - 1)
}

/// The model's values of `params`, rounded exactly to their formats (integers clamped to their width).
fn param_values(
    sig: &FunctionSignature,
    model: &z3::Model,
    params: &[usize],
) -> Vec<(usize, ArgValue)> {
    params
        .iter()
        .filter_map(|&i| {
            let p = sig.params.get(i)?;
            let value = match p.ty {
                ParamType::F64 | ParamType::F32 => {
                    let fmt = if p.ty == ParamType::F64 {
                        FloatFormat::Double
                    } else {
                        FloatFormat::Single
                    };
                    let x = Real::new_const(real::param_name(i as u32, VarType::Float(fmt)));
                    let rounded = model
                        .eval(&x, true)
                        .and_then(|v| real::model_rational(&v, fmt))
                        .map(|q| round_rational(&q, fmt))
                        .unwrap_or(0.0);
                    match fmt {
                        FloatFormat::Double => ArgValue::F64(rounded),
                        FloatFormat::Single => ArgValue::F32(rounded as f32),
                    }
                }
                ParamType::Int { bits, signed } => {
                    let n =
                        Int::new_const(real::param_name(i as u32, VarType::Int { bits, signed }));
                    let (lo, hi) = int_param_range(bits);
                    let v = model
                        .eval(&n, true)
                        .and_then(|v| real::model_integer(&v))
                        .unwrap_or_default();
                    let v = v.clamp(lo, hi);
                    // Unsigned parameters are shown as their unsigned value where it fits an i64.
                    let v = if !signed && bits < 64 && v.is_negative() {
                        v + (BigInt::one() << bits as usize)
                    } else {
                        v
                    };
                    ArgValue::Int(v.to_i64().unwrap_or(0))
                }
                ParamType::OutPtr { .. } => ArgValue::OutPtr,
            };
            Some((i, value))
        })
        .collect()
}

/// The value a parameter no formula constrains gets in a candidate.
fn unconstrained(ty: ParamType) -> ArgValue {
    match ty {
        ParamType::F64 => ArgValue::F64(0.0),
        ParamType::F32 => ArgValue::F32(0.0),
        ParamType::Int { .. } => ArgValue::Int(0),
        ParamType::OutPtr { .. } => ArgValue::OutPtr,
    }
}

/// Whether parameter `i` of `sig` is a `double` or `float`.
fn is_float_param(sig: &FunctionSignature, i: usize) -> bool {
    sig.params
        .get(i)
        .and_then(|p| p.ty.float_format())
        .is_some()
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
