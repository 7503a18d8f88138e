//! The neighbourhood search (the paper's Algorithm 1): runs P and P' on each candidate and on the inputs within
//! `radius` nextafter steps of it, compares the exception traces, and reports the best divergent input per
//! candidate, plus the exceptions the plain build raises (the Ariadne view).
//!
//! Trace comparison follows the paper: a trace is the sequence of exception kinds in the order they are raised;
//! locations and operations are ignored when comparing (they are kept for reporting). A run that stopped at a
//! call foe does not execute (`RunEnd::Stopped`) has a complete trace up to the call and is compared like a
//! run that returned: two runs stopped at the same call compare the events before it, and a run that stopped
//! against one that returned diverges only if their exception events differ (see ARCHITECTURE.md).
//!
//! The search stops at a work budget ([`SearchBudget`]): its runs are counted in [`work`] units (a constant per
//! run plus one per operation the runtime checked), which the load does not change, so the same file stops at
//! the same slice on any machine load; the wall clock is only a safety net.

use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::exec::{ExecError, RawPair, Runner};
use crate::report::{Divergence, DivergenceClass, NamedValue, PlainException};
use crate::types::{ArgValue, ExceptionKind, FunctionSignature, Input, ParamType};
use std::collections::{HashMap, HashSet};

mod aimed;
mod explain;
mod neighbourhood;
pub mod results;
pub mod work;

pub use explain::{compare_kinds, compare_traces};
pub(crate) use explain::{explain, result_summary};
use neighbourhood::neighbourhood_size;
#[cfg(test)]
use neighbourhood::shell;
pub use neighbourhood::{neighbourhood, step_value};
pub use work::SearchBudget;

/// What the search of one function found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchOutcome {
    /// One per diff-producing candidate (its best input), identical inputs merged, best first.
    pub divergences: Vec<Divergence>,
    /// Candidates whose neighbourhood held at least one input with diverging exception traces (the paper's
    /// diff-producing candidates; special-value inputs and result divergences are not counted).
    pub diff_producing: usize,
    /// Inputs run (each on both builds); an input shared by the neighbourhoods of candidates far apart in the
    /// candidate list may run twice.
    pub executions: usize,
    /// Distinct (kind, line, column) P raised on in-domain inputs, with one witness each.
    pub plain_exceptions: Vec<PlainException>,
    /// Executions (of either build) that did not return within the time limit.
    pub timed_out: usize,
    /// Executions (of either build) that crashed, with the first crash's description.
    pub crashed: usize,
    pub first_crash: Option<String>,
    /// Of those, the executions that read data no file defines (its stand-in is unreadable).
    pub unknown_data: usize,
    /// Executions (of either build) that stopped at a call foe does not execute, with the first one's
    /// description (`stopped at `gsl_error` (line 12:5)`).
    pub stopped: usize,
    pub first_stop: Option<String>,
    /// Whether the search stopped early because too many executions timed out.
    pub stopped_early: bool,
    /// Whether the function's work budget ended the search before every neighbourhood was explored.
    pub out_of_time: bool,
    /// The work the search did ([`work`]), in nanoseconds of an idle machine: the same on any load.
    pub work_ns: u64,
    /// Operations its runs checked (runs that timed out included): for calibration and logs.
    pub ops: u64,
    /// Special inputs and solver candidates on which both instrumented builds returned the same outputs and
    /// exception traces: what [`crate::confirm::shipped_only`] runs again on the binaries clang ships.
    pub agreed: Vec<Input>,
}

/// Executions that may time out in one function's search before it stops: each costs the whole time limit.
pub const MAX_TIMEOUTS: usize = 2;

/// Runs that may crash in one function's search, while hardly any completes, before it stops: each costs a
/// new worker (tens of milliseconds). Code that dereferences what a zeroed buffer cannot give (Box2D's world and
/// context pointers) crashes on every input.
pub const MAX_CRASHES: usize = 24;

/// For each candidate (distinct inputs from the solver), runs P and P' on it and its nextafter neighbourhood.
///
/// The neighbourhood of a candidate is every input whose searchable arguments are within `cfg.radius` steps
/// of the candidate's (floats by `nextafter`, integers by ±1). The full cube is run when it fits
/// `cfg.neighbourhood_budget`; otherwise the candidate, the axis-aligned points and diagonals of each shell,
/// and a seeded sample of the rest, by increasing L∞ distance. Neighbourhoods are run in rounds of growing
/// size, all candidates' points in one batch per round; a candidate stops once an `appears` divergence within
/// the declared domain (or with no domain declared) was found. Runs that crashed, timed out or overflowed the
/// trace buffer are not compared (their traces are incomplete).
///
/// The best input of a candidate is the first by (inside the domain, class, search order); divergences are
/// sorted the same way across candidates.
pub fn search(
    runner: &mut Runner,
    sig: &FunctionSignature,
    candidates: &[Input],
    domain: Option<&Domain>,
    cfg: &AnalysisConfig,
    budget: Option<SearchBudget>,
) -> Result<SearchOutcome, ExecError> {
    run_search(runner, sig, candidates, domain, cfg, budget, false)
}

/// [`search`], then the special-value and ordinary-magnitude inputs of [`results::special_inputs`] around the
/// first candidates, each run once (what the pipeline runs: the paper's search plus the inputs where finite-math
/// and flush-to-zero change what a function computes).
#[allow(clippy::too_many_arguments)]
pub fn search_with_special_inputs(
    runner: &mut Runner,
    sig: &FunctionSignature,
    candidates: &[Input],
    domain: Option<&Domain>,
    cfg: &AnalysisConfig,
    budget: Option<SearchBudget>,
    paths: &[crate::accuracy::PathOutputs],
) -> Result<SearchOutcome, ExecError> {
    let mut out = run_search(runner, sig, candidates, domain, cfg, budget, true)?;
    // Ariadne's avoidable and unavoidable overflows and underflows of the plain build.
    for e in out
        .plain_exceptions
        .iter_mut()
        .filter(|_| cfg.report_plain_exceptions)
    {
        if let Some(input) = input_of_named(sig, &e.inputs) {
            e.avoidable = results::avoidability(e.kind, paths, sig, &input);
        }
    }
    // The real-number result of each result divergence's output, on the path its input takes in P.
    for d in &mut out.divergences {
        let Some(input) = full_input(sig, d) else {
            continue;
        };
        if let Some(r) = d.result.as_mut() {
            r.reference = Some(results::reference(r, &d.end_p, paths, sig, &input));
        }
    }
    Ok(out)
}

/// The whole input of a divergence (pointer placeholders included), from its named values.
fn full_input(sig: &FunctionSignature, d: &Divergence) -> Option<Input> {
    input_of_named(sig, &d.inputs)
}

/// The whole input (pointer placeholders included) from the named values of the searchable parameters.
pub(crate) fn input_of_named(sig: &FunctionSignature, inputs: &[NamedValue]) -> Option<Input> {
    let mut named = inputs.iter();
    let values = sig
        .params
        .iter()
        .map(|p| match p.ty.is_searchable() {
            false => Some(ArgValue::OutPtr),
            true => named.next().and_then(|v| v.raw),
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Input(values))
}

fn run_search(
    runner: &mut Runner,
    sig: &FunctionSignature,
    candidates: &[Input],
    domain: Option<&Domain>,
    cfg: &AnalysisConfig,
    budget: Option<SearchBudget>,
    special_inputs: bool,
) -> Result<SearchOutcome, ExecError> {
    let _span = tracing::debug_span!("search", function = %sig.name).entered();
    // Distinct, well-formed candidates.
    let mut seen = HashSet::new();
    let mut cands: Vec<&Input> = Vec::new();
    for c in candidates {
        match fits(sig, c) {
            Err(reason) => tracing::warn!(function = %sig.name, %reason, "candidate skipped"),
            Ok(()) if seen.insert(c.key()) => {
                tracing::trace!(candidate = ?c.0, "candidate");
                cands.push(c)
            }
            Ok(()) => {}
        }
    }
    // Candidates are searched in groups so memory stays bounded however many there are; all points of a
    // group's round go to the worker in one batch.
    let per_candidate = neighbourhood_size(sig, cfg).max(1);
    let group = (GROUP_POINTS / per_candidate).max(1);
    let mut state = SearchState {
        domain,
        diff_producing: 0,
        plain: vec![],
        plain_seen: HashMap::new(),
        found: vec![],
        executions: 0,
        timed_out: 0,
        crashed: 0,
        first_crash: None,
        unknown_data: 0,
        budget,
        work_ns: 0,
        exec_timeout_ms: cfg.exec_timeout_ms,
        ops: 0,
        started: std::time::Instant::now(),
        out_of_time: false,
        stopped: 0,
        first_stop: None,
        runs_crashed: 0,
        runs_completed: 0,
        agreed: vec![],
        agreed_seen: HashSet::new(),
    };
    for (g, chunk) in cands.chunks(group).enumerate() {
        if state.hopeless() {
            break;
        }
        if state.out_of_budget() {
            state.out_of_time = true;
            break;
        }
        search_group(runner, sig, chunk, g * group, cfg, false, &mut state)?;
    }
    // Special values (NaN, infinities, zeros, subnormals, the range's edges) in each float input of the first
    // candidates, each run once: where finite-math and flush-to-zero change what the function computes.
    if special_inputs {
        run_special_inputs(runner, sig, &cands, cfg, &mut state)?;
        run_aimed_search(runner, sig, &cands, cfg, &mut state)?;
    }
    let stopped_early = state.hopeless();
    let diff_producing = state.diff_producing;
    state.found.sort_by_key(|f| f.0);
    // Candidates that found the same input share one report, which counts them all.
    let mut reported: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut divergences: Vec<Divergence> = Vec::new();
    for (_, key, d) in state.found {
        match reported.get(&key) {
            Some(&at) => divergences[at].candidates += d.candidates,
            None => {
                reported.insert(key, divergences.len());
                divergences.push(d);
            }
        }
    }
    tracing::debug!(
        candidates = cands.len(),
        executions = state.executions,
        diff_producing,
        work_ms = state.work_ns / 1_000_000,
        ops = state.ops,
        wall_ms = state.started.elapsed().as_millis() as u64,
        "search done"
    );
    Ok(SearchOutcome {
        divergences,
        diff_producing,
        executions: state.executions,
        plain_exceptions: state.plain,
        timed_out: state.timed_out,
        crashed: state.crashed,
        first_crash: state.first_crash,
        unknown_data: state.unknown_data,
        stopped: state.stopped,
        first_stop: state.first_stop,
        stopped_early,
        out_of_time: state.out_of_time,
        work_ns: state.work_ns,
        ops: state.ops,
        agreed: state.agreed,
    })
}

/// Special values (NaN, infinities, zeros, subnormals, the range's edges) and ordinary magnitudes in each float
/// input of the first candidates, each run once: where finite-math and flush-to-zero change what the function
/// computes. Their divergences count no candidate (Table III counts the solver's).
fn run_special_inputs(
    runner: &mut Runner,
    sig: &FunctionSignature,
    cands: &[&Input],
    cfg: &AnalysisConfig,
    state: &mut SearchState<'_>,
) -> Result<(), ExecError> {
    if state.hopeless() {
        return Ok(());
    }
    if state.out_of_budget() {
        state.out_of_time = true;
        return Ok(());
    }
    let bases: Vec<&Input> = cands.iter().take(2).copied().collect();
    let special = results::special_inputs(sig, &bases);
    let single = each_once(cfg);
    let refs: Vec<&Input> = special.iter().collect();
    search_group(runner, sig, &refs, cands.len(), &single, true, state)
}

/// The search aimed at results ([`aimed`]): sampled inputs, then a local search towards the inputs whose outputs
/// lie the most bits apart; the furthest apart are judged like special inputs (reported when they differ by the
/// accuracy threshold or in category, else run on the shipped binaries with the other agreed inputs).
fn run_aimed_search(
    runner: &mut Runner,
    sig: &FunctionSignature,
    cands: &[&Input],
    cfg: &AnalysisConfig,
    state: &mut SearchState<'_>,
) -> Result<(), ExecError> {
    if state.hopeless() || aimed::float_inputs(sig).is_empty() {
        return Ok(());
    }
    let Some(base) = cands.first() else {
        return Ok(());
    };
    let mut tried: HashSet<Vec<u64>> = HashSet::new();
    let mut scored: Vec<(Input, f64)> = vec![];
    let samples = aimed::sampled_inputs(sig, base, aimed::seed_of(&sig.name));
    let mut batch: Vec<Input> = samples
        .into_iter()
        .filter(|i| tried.insert(i.key()))
        .collect();
    for _ in 0..=aimed::CLIMB_ROUNDS {
        if batch.is_empty() || state.out_of_budget() || state.hopeless() {
            break;
        }
        let before = best_score(&scored);
        scored.extend(run_scored(runner, sig, batch, state)?);
        if best_score(&scored) <= before && before > 0.0 {
            break;
        }
        batch = climb_from(sig, &scored, state, &mut tried);
    }
    // The furthest apart (inside the domain first), judged as findings.
    scored.retain(|(_, bits)| *bits > 0.0);
    scored.sort_by(|a, b| {
        (!state.in_domain(&a.0))
            .cmp(&!state.in_domain(&b.0))
            .then(b.1.total_cmp(&a.1))
    });
    let judged: Vec<&Input> = scored.iter().take(aimed::JUDGED).map(|(i, _)| i).collect();
    if judged.is_empty() {
        return Ok(());
    }
    let single = each_once(cfg);
    search_group(runner, sig, &judged, cands.len(), &single, true, state)
}

/// The largest finite score so far (an infinite one is a finding already: nothing to climb towards).
fn best_score(scored: &[(Input, f64)]) -> f64 {
    scored
        .iter()
        .map(|(_, b)| *b)
        .filter(|b| b.is_finite())
        .fold(0.0, f64::max)
}

/// The next round of the local search: the neighbours of the [`aimed::CLIMBERS`] inputs whose outputs lie the
/// most (finite, non-zero) bits apart, not tried before, at most [`aimed::CLIMB_POINTS`].
fn climb_from(
    sig: &FunctionSignature,
    scored: &[(Input, f64)],
    state: &SearchState<'_>,
    tried: &mut HashSet<Vec<u64>>,
) -> Vec<Input> {
    let mut climbers: Vec<&(Input, f64)> = scored
        .iter()
        .filter(|(i, b)| b.is_finite() && *b > 0.0 && state.in_domain(i))
        .collect();
    climbers.sort_by(|a, b| b.1.total_cmp(&a.1));
    climbers
        .iter()
        .take(aimed::CLIMBERS)
        .flat_map(|(i, _)| aimed::neighbours(sig, i))
        .filter(|i| tried.insert(i.key()))
        .take(aimed::CLIMB_POINTS)
        .collect()
}

/// Runs `batch` on both builds and scores each input by how many bits apart the outputs are
/// ([`results::bits_apart`]); inputs whose runs did not complete are left out.
fn run_scored(
    runner: &mut Runner,
    sig: &FunctionSignature,
    batch: Vec<Input>,
    state: &mut SearchState<'_>,
) -> Result<Vec<(Input, f64)>, ExecError> {
    let (pairs, ran) = run_in_slices(runner, sig, &batch, state)?;
    state.executions += pairs.len();
    Ok(batch
        .into_iter()
        .take(ran)
        .zip(pairs)
        .filter_map(|(input, pair)| {
            let (p, pp) = runner.results(sig, &input, &pair);
            results::bits_apart(&p, &pp).map(|bits| (input, bits))
        })
        .collect())
}

/// `cfg` with no neighbourhood: each input run once (special inputs, the aimed search's judged inputs).
pub(crate) fn each_once(cfg: &AnalysisConfig) -> AnalysisConfig {
    AnalysisConfig {
        radius: 0,
        neighbourhood_budget: 1,
        ..cfg.clone()
    }
}

/// Inputs sent to the worker at once within a round: the first slice, and the most.
const FIRST_SLICE: usize = 8;
const RUN_SLICE: usize = 4096;

/// Points of all candidates of one group held at once.
const GROUP_POINTS: usize = 1 << 18;

/// (outside the domain, class rank, candidate index), input key, report.
type Found = ((bool, u8, usize), Vec<u64>, Divergence);

struct SearchState<'a> {
    domain: Option<&'a Domain>,
    plain: Vec<PlainException>,
    /// Index into `plain` of each (kind, line, column) seen.
    plain_seen: HashMap<(ExceptionKind, Option<u32>, Option<u32>), usize>,
    /// Per diff-producing candidate: its rank, input key and report (its best exception divergence, and its best
    /// result divergence on another input).
    found: Vec<Found>,
    /// Solver candidates whose neighbourhood held an exception divergence.
    diff_producing: usize,
    executions: usize,
    timed_out: usize,
    crashed: usize,
    first_crash: Option<String>,
    unknown_data: usize,
    /// When the search must stop (the function's work budget); checked between slices of runs.
    budget: Option<SearchBudget>,
    /// The per-run time limit: what a run that timed out cost ([`work::pairs_work`]).
    exec_timeout_ms: u64,
    /// The work done so far ([`work`]), and the operations the runs checked (for the log).
    work_ns: u64,
    ops: u64,
    started: std::time::Instant,
    out_of_time: bool,
    stopped: usize,
    first_stop: Option<String>,
    /// Runs (of either build) that crashed, and that completed, counted as each slice returns.
    runs_crashed: usize,
    runs_completed: usize,
    /// Inputs (special ones and candidates themselves) on which the instrumented builds agree.
    agreed: Vec<Input>,
    agreed_seen: HashSet<Vec<u64>>,
}

impl SearchState<'_> {
    fn out_of_budget(&self) -> bool {
        self.budget.is_some_and(|b| b.exhausted(self.work_ns))
    }

    /// Whether running more inputs is pointless: too many time-outs, or runs that crash far more often than they
    /// complete ([`MAX_CRASHES`]). Counts of what the runs did, not of time: the same on any machine.
    fn hopeless(&self) -> bool {
        self.timed_out >= MAX_TIMEOUTS
            || (self.runs_crashed >= MAX_CRASHES && self.runs_completed * 4 < self.runs_crashed)
    }

    fn in_domain(&self, input: &Input) -> bool {
        self.domain.is_none_or(|d| d.contains(input))
    }
}

/// Runs the neighbourhoods of one group of candidates in rounds of growing size (1, 8, 64, ... points per
/// candidate), dropping candidates whose search is over.
fn search_group(
    runner: &mut Runner,
    sig: &FunctionSignature,
    group: &[&Input],
    first_index: usize,
    cfg: &AnalysisConfig,
    special: bool,
    state: &mut SearchState<'_>,
) -> Result<(), ExecError> {
    let mut cands: Vec<CandidateState> = group
        .iter()
        .map(|c| CandidateState {
            points: neighbourhood(sig, c, cfg),
            next: 0,
            best: None,
            best_result: None,
            done: false,
        })
        .collect();
    let mut search = GroupSearch {
        runner,
        sig,
        cfg,
        special,
        runs: Vec::new(),
        index: HashMap::new(),
    };
    let mut round_end = 1usize;
    loop {
        // The first round always runs (every candidate itself); later ones only within the work budget.
        if round_end > 1 && state.out_of_budget() {
            state.out_of_time = true;
            break;
        }
        let batch = search.round_inputs(&cands, round_end);
        let cut = search.run_round(batch, state)?;
        let active = search.judge_round(&mut cands, round_end, state);
        if !active || cut || state.hopeless() {
            break;
        }
        round_end = round_end.saturating_mul(8);
    }
    search.report(&cands, first_index, state);
    Ok(())
}

/// The search of one group of candidates: what it runs with, and every run so far.
struct GroupSearch<'a> {
    runner: &'a mut Runner,
    sig: &'a FunctionSignature,
    cfg: &'a AnalysisConfig,
    /// Whether the candidates are special-value inputs rather than solver candidates.
    special: bool,
    /// Every input run, with its runs on both builds.
    runs: Vec<(Input, RawPair)>,
    /// Index into `runs` by input key.
    index: HashMap<Vec<u64>, usize>,
}

impl GroupSearch<'_> {
    /// This round's new inputs from every active candidate (points before `round_end`), each once.
    fn round_inputs(&self, cands: &[CandidateState], round_end: usize) -> Vec<Input> {
        let mut batch: Vec<Input> = Vec::new();
        let mut batch_keys: HashSet<Vec<u64>> = HashSet::new();
        for c in cands.iter().filter(|c| !c.done) {
            for point in &c.points[c.next.min(c.points.len())..round_end.min(c.points.len())] {
                let key = point.key();
                if !self.index.contains_key(&key) && batch_keys.insert(key) {
                    batch.push(point.clone());
                }
            }
        }
        batch
    }

    /// Runs one round's `batch` and records its runs; whether the round was cut short (too many time-outs, or
    /// the work budget).
    fn run_round(
        &mut self,
        mut batch: Vec<Input>,
        state: &mut SearchState<'_>,
    ) -> Result<bool, ExecError> {
        let (results, stop_after) = run_in_slices(self.runner, self.sig, &batch, state)?;
        let cut = stop_after < batch.len();
        batch.truncate(stop_after);
        if !batch.is_empty() {
            state.executions += results.len();
            for (input, pair) in batch.into_iter().zip(results) {
                self.record(input, pair, state);
            }
        }
        Ok(cut)
    }

    /// Counts how the runs of `input` ended, collects the plain build's exceptions inside the domain, and keeps
    /// the runs.
    fn record(&mut self, input: Input, pair: RawPair, state: &mut SearchState<'_>) {
        let (runner, sig) = (&*self.runner, self.sig);
        for run in [&pair.p, &pair.pp] {
            match run.end {
                // Counted as the slice returned.
                crate::exec::RawEnd::TimedOut => {}
                crate::exec::RawEnd::Returned(_) => {}
                crate::exec::RawEnd::Stopped(_) => {
                    state.stopped += 1;
                    if state.first_stop.is_none() {
                        state.first_stop = Some(runner.end(sig, run.end).describe());
                    }
                }
                other => {
                    state.crashed += 1;
                    if matches!(other, crate::exec::RawEnd::UnknownData(_)) {
                        state.unknown_data += 1;
                    }
                    if state.first_crash.is_none() {
                        state.first_crash = Some(runner.end(sig, other).describe());
                    }
                }
            }
        }
        if state.in_domain(&input) {
            collect_plain(
                runner,
                sig,
                &input,
                &pair,
                &mut state.plain,
                &mut state.plain_seen,
            );
        }
        self.index.insert(input.key(), self.runs.len());
        self.runs.push((input, pair));
    }

    /// Judges the round's points of each active candidate, in order; whether any candidate is still active.
    fn judge_round(
        &self,
        cands: &mut [CandidateState],
        round_end: usize,
        state: &mut SearchState<'_>,
    ) -> bool {
        let mut active = false;
        for c in cands.iter_mut().filter(|c| !c.done) {
            self.judge_candidate(c, round_end, state);
            active |= !c.done;
        }
        active
    }

    /// Judges one candidate's points up to `round_end`, keeping its best divergences; it is done once an
    /// `appears` divergence inside the domain is found or its neighbourhood is exhausted.
    fn judge_candidate(
        &self,
        c: &mut CandidateState,
        round_end: usize,
        state: &mut SearchState<'_>,
    ) {
        let hi = round_end.min(c.points.len());
        for pos in c.next..hi {
            let Some(&run) = self.index.get(&c.points[pos].key()) else {
                continue;
            };
            let (input, pair) = &self.runs[run];
            if !pair.p.completed() || !pair.pp.completed() || pair.p.truncated || pair.pp.truncated
            {
                continue;
            }
            let inside = state.in_domain(input);
            let outputs_agree = self.judge_outputs(c, run, pos, inside);
            let kp: Vec<u8> = pair.p.kinds().collect();
            let kpp: Vec<u8> = pair.pp.kinds().collect();
            let Some((first, class)) = compare_kinds(&kp, &kpp) else {
                if outputs_agree
                    && (self.special || pos == 0)
                    && state.agreed_seen.insert(input.key())
                {
                    state.agreed.push(input.clone());
                }
                continue;
            };
            let rank = (!inside, class.rank(), pos);
            if c.best.as_ref().is_none_or(|b| rank < b.rank) {
                c.best = Some(Best {
                    rank,
                    run,
                    first,
                    class,
                });
            }
            if class == DivergenceClass::Appears && inside {
                c.done = true;
                break;
            }
        }
        c.next = hi;
        if c.next >= c.points.len() {
            c.done = true;
        }
    }

    /// Compares the outputs (or endings) of the completed runs `run`, at position `pos` of candidate `c`, keeping
    /// the candidate's best result divergence; whether they agree.
    fn judge_outputs(&self, c: &mut CandidateState, run: usize, pos: usize, inside: bool) -> bool {
        let (runner, sig) = (&*self.runner, self.sig);
        let (input, pair) = &self.runs[run];
        let mut outputs_agree = false;
        if pair.p.returned() && pair.pp.returned() {
            let (end_p, end_pp) = runner.results(sig, input, pair);
            let differ = results::compare(&end_p, &end_pp, self.cfg.accuracy_bits);
            outputs_agree = differ.is_none();
            if let Some(d) = differ {
                c.offer_result((!inside, d.class.rank(), pos), run, d.class);
            }
        } else if pair.p.completed() && pair.pp.completed() {
            // One build stops at a call foe does not run (an error handler) where the other returns.
            let (end_p, end_pp) = (runner.end(sig, pair.p.end), runner.end(sig, pair.pp.end));
            outputs_agree = !results::endings_differ(&end_p, &end_pp);
            if !outputs_agree {
                let class = DivergenceClass::Ending;
                c.offer_result((!inside, class.rank(), pos), run, class);
            }
        }
        outputs_agree
    }

    /// Reports each candidate's best divergences into `state.found` (its best exception divergence, and its
    /// best result divergence on another input), and counts the diff-producing ones.
    fn report(
        &mut self,
        cands: &[CandidateState],
        first_index: usize,
        state: &mut SearchState<'_>,
    ) {
        for (i, c) in cands.iter().enumerate() {
            // A special-value input is not a solver candidate (Table III counts those).
            if c.best.is_some() && !self.special {
                state.diff_producing += 1;
            }
            let result_run = c.best_result.as_ref().map(|b| b.run);
            for b in c.best.iter().chain(
                c.best_result
                    .as_ref()
                    .filter(|r| c.best.as_ref().is_none_or(|b| b.run != r.run)),
            ) {
                let (input, _) = &self.runs[b.run];
                let (inside, key) = (state.in_domain(input), input.key());
                let d = self.report_one(b, inside, result_run);
                state
                    .found
                    .push(((!inside, b.class.rank(), first_index + i), key, d));
            }
        }
    }

    /// The report of the best input `b`: its divergence, with the result comparison, summary and location its
    /// class calls for.
    fn report_one(&mut self, b: &Best, inside: bool, result_run: Option<usize>) -> Divergence {
        let (sig, cfg) = (self.sig, self.cfg);
        let (input, pair) = &self.runs[b.run];
        let mut d = divergence(self.runner, sig, input, pair, b.first, b.class, inside);
        // Table III counts solver candidates with an exception divergence; special inputs and result
        // divergences are findings of their own.
        d.candidates = usize::from(b.class.is_exception() && !self.special);
        if !b.class.is_exception() || result_run == Some(b.run) {
            d.result = results::compare(&d.end_p, &d.end_p_prime, cfg.accuracy_bits);
        }
        if b.class == DivergenceClass::Ending {
            d.summary = results::ending_summary(&d.end_p, &d.end_p_prime);
            d.location = results::where_endings_part(&d.end_p, &d.end_p_prime).or(d.location);
        } else if !b.class.is_exception() {
            d.summary = result_summary(&d);
            if d.location.is_none() {
                d.location =
                    results::where_values_part(self.runner, sig, input, b.class, cfg.accuracy_bits);
            }
        }
        d
    }
}

/// Runs `batch` in slices; the runs, and how many inputs of `batch` they cover.
fn run_in_slices(
    runner: &mut Runner,
    sig: &FunctionSignature,
    batch: &[Input],
    state: &mut SearchState<'_>,
) -> Result<(Vec<RawPair>, usize), ExecError> {
    // A round runs in slices, so that runs that hang (each costing the execution time limit) or the work
    // budget stop it after the first slice rather than after thousands of inputs.
    // Slices start small and double, so a function whose runs hang stops after a few of them.
    let mut stop_after = batch.len();
    let mut results = Vec::with_capacity(batch.len());
    let mut start = 0;
    let mut slice_len = FIRST_SLICE;
    while start < batch.len() {
        if start > 0 && (state.hopeless() || state.out_of_budget()) {
            state.out_of_time |= state.out_of_budget();
            stop_after = start;
            break;
        }
        let end = (start + slice_len).min(batch.len());
        let slice = &batch[start..end];
        start = end;
        slice_len = (slice_len * 2).min(RUN_SLICE);
        let ran = runner.run_raw(&sig.name, slice)?;
        state.work_ns += work::pairs_work(&ran, state.exec_timeout_ms);
        state.ops += ran.iter().map(|pair| pair.p.ops + pair.pp.ops).sum::<u64>();
        for run in ran.iter().flat_map(|pair| [&pair.p, &pair.pp]) {
            match run.end {
                crate::exec::RawEnd::TimedOut => state.timed_out += 1,
                _ if run.completed() => state.runs_completed += 1,
                _ => state.runs_crashed += 1,
            }
        }
        results.extend(ran);
    }
    Ok((results, stop_after))
}

struct CandidateState {
    /// The neighbourhood in search order, the candidate first.
    points: Vec<Input>,
    /// Points before this were judged.
    next: usize,
    best: Option<Best>,
    /// The best input whose outputs differ (it may also be `best`).
    best_result: Option<Best>,
    done: bool,
}

struct Best {
    /// (outside the domain, class rank, position in the search order): smaller is better.
    rank: (bool, u8, usize),
    /// Index into the runs.
    run: usize,
    first: usize,
    class: DivergenceClass,
}

impl CandidateState {
    /// Keeps the runs `run` as the best result divergence if `rank` is better than the one kept.
    fn offer_result(&mut self, rank: (bool, u8, usize), run: usize, class: DivergenceClass) {
        if self.best_result.as_ref().is_none_or(|b| rank < b.rank) {
            self.best_result = Some(Best {
                rank,
                run,
                first: 0,
                class,
            });
        }
    }
}

/// Whether an input fits the signature (so one bad candidate cannot fail a batch).
fn fits(sig: &FunctionSignature, input: &Input) -> Result<(), String> {
    if input.0.len() != sig.params.len() {
        return Err(format!(
            "{} values for {} parameters",
            input.0.len(),
            sig.params.len()
        ));
    }
    for (p, v) in sig.params.iter().zip(&input.0) {
        let ok = match (p.ty, v) {
            (ParamType::F64, ArgValue::F64(_)) | (ParamType::F32, ArgValue::F32(_)) => true,
            (ParamType::OutPtr { .. }, ArgValue::OutPtr) => true,
            (ParamType::Int { bits, signed }, ArgValue::Int(v)) => {
                crate::exec::int_fits(*v, bits, signed)
            }
            _ => false,
        };
        if !ok {
            return Err(format!("value {v:?} does not fit parameter {}", p.name));
        }
    }
    Ok(())
}

pub(crate) fn named_inputs(sig: &FunctionSignature, input: &Input) -> Vec<NamedValue> {
    sig.params
        .iter()
        .zip(&input.0)
        .filter(|(p, _)| p.ty.is_searchable())
        .map(|(p, v)| NamedValue::new(&p.name, *v))
        .collect()
}

fn collect_plain(
    runner: &Runner,
    sig: &FunctionSignature,
    input: &Input,
    pair: &RawPair,
    plain: &mut Vec<PlainException>,
    seen: &mut HashMap<(ExceptionKind, Option<u32>, Option<u32>), usize>,
) {
    // Each location counts an input once, however often the run raised there.
    let mut here = HashSet::new();
    for &word in &pair.p.events {
        let Some(e) = runner.event(word) else {
            continue;
        };
        let key = (e.kind, e.line, e.column);
        if !here.insert(key) {
            continue;
        }
        match seen.get(&key) {
            Some(&at) => plain[at].inputs_raising += 1,
            None => {
                seen.insert(key, plain.len());
                plain.push(PlainException {
                    kind: e.kind,
                    line: e.line,
                    column: e.column,
                    inputs: named_inputs(sig, input),
                    inputs_raising: 1,
                    avoidable: None,
                });
            }
        }
    }
}

/// The report of one divergent input, from its actual runs.
fn divergence(
    runner: &Runner,
    sig: &FunctionSignature,
    input: &Input,
    pair: &RawPair,
    first: usize,
    class: DivergenceClass,
    in_domain: bool,
) -> Divergence {
    let crate::exec::PairOutcome { p, pp } = runner.pair_outcome(sig, input, pair);
    let (summary, location) = explain(&p.trace, &pp.trace, first, class);
    Divergence {
        inputs: named_inputs(sig, input),
        trace_p: p.trace,
        trace_p_prime: pp.trace,
        first_divergence: first,
        class,
        in_domain,
        location,
        summary,
        confirmation: Default::default(),
        shipped_p: vec![],
        shipped_p_prime: vec![],
        shipped_trace_p: vec![],
        shipped_trace_p_prime: vec![],
        cause: Default::default(),
        candidates: 1,
        end_p: p.end,
        end_p_prime: pp.end,
        result: None,
        shipped_only: false,
    }
}

#[cfg(test)]
mod tests;
