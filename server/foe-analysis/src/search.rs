//! The neighbourhood search (the paper's Algorithm 1): runs P and P' on each candidate and on the inputs within
//! `radius` nextafter steps of it, compares the exception traces, and reports the best divergent input per
//! candidate, plus the exceptions the plain build raises (the Ariadne view).
//!
//! Trace comparison follows the paper: a trace is the sequence of exception kinds in the order they are raised;
//! locations and operations are ignored when comparing (they are kept for reporting). A run that stopped at a
//! call foe does not execute (`RunEnd::Stopped`) has a complete trace up to the call and is compared like a
//! run that returned: two runs stopped at the same call compare the events before it, and a run that stopped
//! against one that returned diverges only if their exception events differ (see ARCHITECTURE.md).

use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::exec::{ExecError, RawPair, Runner};
use crate::report::{Divergence, DivergenceClass, NamedValue, PlainException};
use crate::rng::SplitMix;
use crate::round::{step_f32, step_f64};
use crate::types::{ArgValue, ExceptionKind, FunctionSignature, Input, ParamType};
use std::collections::{HashMap, HashSet};

mod explain;
pub mod results;

pub use explain::{compare_kinds, compare_traces};
pub(crate) use explain::{explain, result_summary};

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
    /// Whether the function's time budget ended the search before every neighbourhood was explored.
    pub out_of_time: bool,
    /// Special inputs and solver candidates on which both instrumented builds returned the same outputs and
    /// exception traces: what [`crate::confirm::shipped_only`] runs again on the binaries clang ships.
    pub agreed: Vec<Input>,
}

/// Executions that may time out in one function's search before it stops: each costs the whole time limit.
pub const MAX_TIMEOUTS: usize = 2;

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
    deadline: Option<std::time::Instant>,
) -> Result<SearchOutcome, ExecError> {
    run_search(runner, sig, candidates, domain, cfg, deadline, false)
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
    deadline: Option<std::time::Instant>,
    paths: &[crate::accuracy::PathOutputs],
) -> Result<SearchOutcome, ExecError> {
    let mut out = run_search(runner, sig, candidates, domain, cfg, deadline, true)?;
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
    deadline: Option<std::time::Instant>,
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
        plain_seen: HashSet::new(),
        found: vec![],
        executions: 0,
        timed_out: 0,
        crashed: 0,
        first_crash: None,
        unknown_data: 0,
        deadline,
        out_of_time: false,
        stopped: 0,
        first_stop: None,
        agreed: vec![],
        agreed_seen: HashSet::new(),
    };
    for (g, chunk) in cands.chunks(group).enumerate() {
        if state.timed_out >= MAX_TIMEOUTS {
            break;
        }
        if state.past_deadline() {
            state.out_of_time = true;
            break;
        }
        search_group(runner, sig, chunk, g * group, cfg, false, &mut state)?;
    }
    // Special values (NaN, infinities, zeros, subnormals, the range's edges) in each float input of the first
    // candidates, each run once: where finite-math and flush-to-zero change what the function computes.
    if special_inputs {
        run_special_inputs(runner, sig, &cands, cfg, &mut state)?;
    }
    let stopped_early = state.timed_out >= MAX_TIMEOUTS;
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
    if state.timed_out >= MAX_TIMEOUTS {
        return Ok(());
    }
    if state.past_deadline() {
        state.out_of_time = true;
        return Ok(());
    }
    let bases: Vec<&Input> = cands.iter().take(2).copied().collect();
    let special = results::special_inputs(sig, &bases);
    let single = AnalysisConfig {
        radius: 0,
        neighbourhood_budget: 1,
        ..cfg.clone()
    };
    let refs: Vec<&Input> = special.iter().collect();
    search_group(runner, sig, &refs, cands.len(), &single, true, state)
}

/// Inputs sent to the worker at once within a round: the first slice, and the most.
const FIRST_SLICE: usize = 8;
const RUN_SLICE: usize = 4096;

/// Points of all candidates of one group held at once.
const GROUP_POINTS: usize = 1 << 18;

/// The number of points [`neighbourhood`] gives at most.
fn neighbourhood_size(sig: &FunctionSignature, cfg: &AnalysisConfig) -> usize {
    let side = 2 * cfg.radius as u128 + 1;
    let cube = sig
        .searchable_params()
        .try_fold(1u128, |acc, _| acc.checked_mul(side))
        .unwrap_or(u128::MAX);
    cube.min(cfg.neighbourhood_budget.max(1) as u128) as usize
}

/// (outside the domain, class rank, candidate index), input key, report.
type Found = ((bool, u8, usize), Vec<u64>, Divergence);

struct SearchState<'a> {
    domain: Option<&'a Domain>,
    plain: Vec<PlainException>,
    plain_seen: HashSet<(ExceptionKind, Option<u32>, Option<u32>)>,
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
    /// When the search must stop (the function's time budget); checked between rounds.
    deadline: Option<std::time::Instant>,
    out_of_time: bool,
    stopped: usize,
    first_stop: Option<String>,
    /// Inputs (special ones and candidates themselves) on which the instrumented builds agree.
    agreed: Vec<Input>,
    agreed_seen: HashSet<Vec<u64>>,
}

impl SearchState<'_> {
    fn past_deadline(&self) -> bool {
        self.deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
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
    let mut runs: Vec<(Input, RawPair)> = Vec::new();
    let mut index: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut round_end = 1usize;
    loop {
        // The first round always runs (every candidate itself); later ones only within the time budget.
        if round_end > 1 && state.past_deadline() {
            state.out_of_time = true;
            break;
        }
        // Gather this round's new inputs from every active candidate.
        let mut batch: Vec<Input> = Vec::new();
        let mut batch_keys: HashSet<Vec<u64>> = HashSet::new();
        for c in cands.iter().filter(|c| !c.done) {
            for point in &c.points[c.next.min(c.points.len())..round_end.min(c.points.len())] {
                let key = point.key();
                if !index.contains_key(&key) && batch_keys.insert(key) {
                    batch.push(point.clone());
                }
            }
        }
        // A round runs in slices, so that runs that hang (each costing the execution time limit) or the time
        // budget stop it after the first slice rather than after thousands of inputs.
        // Slices start small and double, so a function whose runs hang stops after a few of them.
        let mut stop_after = batch.len();
        let mut results = Vec::with_capacity(batch.len());
        let mut start = 0;
        let mut slice_len = FIRST_SLICE;
        while start < batch.len() {
            if start > 0 && (state.timed_out >= MAX_TIMEOUTS || state.past_deadline()) {
                state.out_of_time |= state.past_deadline();
                stop_after = start;
                break;
            }
            let end = (start + slice_len).min(batch.len());
            let slice = &batch[start..end];
            start = end;
            slice_len = (slice_len * 2).min(RUN_SLICE);
            let ran = runner.run_raw(&sig.name, slice)?;
            state.timed_out += ran
                .iter()
                .flat_map(|pair| [&pair.p, &pair.pp])
                .filter(|run| matches!(run.end, crate::exec::RawEnd::TimedOut))
                .count();
            results.extend(ran);
        }
        let cut = stop_after < batch.len();
        batch.truncate(stop_after);
        if !batch.is_empty() {
            state.executions += results.len();
            for (input, pair) in batch.into_iter().zip(results) {
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
                index.insert(input.key(), runs.len());
                runs.push((input, pair));
            }
        }
        // Judge the round's points of each candidate, in order.
        let mut active = false;
        for c in cands.iter_mut().filter(|c| !c.done) {
            let hi = round_end.min(c.points.len());
            for pos in c.next..hi {
                let Some(&run) = index.get(&c.points[pos].key()) else {
                    continue;
                };
                let (input, pair) = &runs[run];
                if !pair.p.completed()
                    || !pair.pp.completed()
                    || pair.p.truncated
                    || pair.pp.truncated
                {
                    continue;
                }
                let inside = state.in_domain(input);
                let mut outputs_agree = false;
                if pair.p.returned() && pair.pp.returned() {
                    let (end_p, end_pp) = runner.results(sig, input, pair);
                    let differ = results::compare(&end_p, &end_pp, cfg.accuracy_bits);
                    outputs_agree = differ.is_none();
                    if let Some(d) = differ {
                        let rank = (!inside, d.class.rank(), pos);
                        if c.best_result.as_ref().is_none_or(|b| rank < b.rank) {
                            c.best_result = Some(Best {
                                rank,
                                run,
                                first: 0,
                                class: d.class,
                            });
                        }
                    }
                } else if pair.p.completed() && pair.pp.completed() {
                    // One build stops at a call foe does not run (an error handler) where the other returns.
                    let (end_p, end_pp) =
                        (runner.end(sig, pair.p.end), runner.end(sig, pair.pp.end));
                    outputs_agree = !results::endings_differ(&end_p, &end_pp);
                    if !outputs_agree {
                        let rank = (!inside, DivergenceClass::Ending.rank(), pos);
                        if c.best_result.as_ref().is_none_or(|b| rank < b.rank) {
                            c.best_result = Some(Best {
                                rank,
                                run,
                                first: 0,
                                class: DivergenceClass::Ending,
                            });
                        }
                    }
                }
                let kp: Vec<u8> = pair.p.kinds().collect();
                let kpp: Vec<u8> = pair.pp.kinds().collect();
                let Some((first, class)) = compare_kinds(&kp, &kpp) else {
                    if outputs_agree
                        && (special || pos == 0)
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
            active |= !c.done;
        }
        if !active || cut || state.timed_out >= MAX_TIMEOUTS {
            break;
        }
        round_end = round_end.saturating_mul(8);
    }
    for (i, c) in cands.iter().enumerate() {
        // A special-value input is not a solver candidate (Table III counts those).
        if c.best.is_some() && !special {
            state.diff_producing += 1;
        }
        let result_run = c.best_result.as_ref().map(|b| b.run);
        for b in c.best.iter().chain(
            c.best_result
                .as_ref()
                .filter(|r| c.best.as_ref().is_none_or(|b| b.run != r.run)),
        ) {
            let (input, pair) = &runs[b.run];
            let inside = state.in_domain(input);
            let mut d = divergence(runner, sig, input, pair, b.first, b.class, inside);
            // Table III counts solver candidates with an exception divergence; special inputs and result
            // divergences are findings of their own.
            d.candidates = usize::from(b.class.is_exception() && !special);
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
                        results::where_values_part(runner, sig, input, b.class, cfg.accuracy_bits);
                }
            }
            state
                .found
                .push(((!inside, b.class.rank(), first_index + i), input.key(), d));
        }
    }
    Ok(())
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

/// The points of a candidate's neighbourhood in search order (candidate first, by increasing L∞ shell, axis
/// points and diagonals before the rest), distinct, at most `cfg.neighbourhood_budget` (at least 1).
pub fn neighbourhood(
    sig: &FunctionSignature,
    candidate: &Input,
    cfg: &AnalysisConfig,
) -> Vec<Input> {
    let dims: Vec<(usize, ParamType)> = sig.searchable_params().map(|(i, p)| (i, p.ty)).collect();
    let m = dims.len();
    let r = cfg.radius as i64;
    let budget = cfg.neighbourhood_budget.max(1);
    let side = 2 * r as u128 + 1;
    let cube = (0..m)
        .try_fold(1u128, |acc, _| acc.checked_mul(side))
        .unwrap_or(u128::MAX);
    let mut offsets: Vec<Vec<i64>> = Vec::new();
    if cube <= budget as u128 {
        // The whole cube, ordered by (shell, category, lexicographic).
        let mut d = vec![-r; m];
        loop {
            offsets.push(d.clone());
            let mut i = 0;
            while i < m {
                d[i] += 1;
                if d[i] <= r {
                    break;
                }
                d[i] = -r;
                i += 1;
            }
            if i == m {
                break;
            }
        }
        offsets.sort_by_key(|d| (shell(d), category(d), d.clone()));
    } else {
        offsets = sampled_offsets(m, r, budget, candidate);
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(offsets.len());
    for d in offsets {
        let mut values = candidate.0.clone();
        for (&(param, ty), &k) in dims.iter().zip(&d) {
            values[param] = step_value(values[param], ty, k);
        }
        let input = Input(values);
        if seen.insert(input.key()) {
            out.push(input);
        }
        if out.len() >= budget {
            break;
        }
    }
    out
}

fn shell(d: &[i64]) -> i64 {
    d.iter().map(|x| x.abs()).max().unwrap_or(0)
}

/// 0: on an axis (at most one non-zero offset), 1: a diagonal (all offsets ±shell), 2: the rest.
fn category(d: &[i64]) -> u8 {
    let s = shell(d);
    if d.iter().filter(|&&x| x != 0).count() <= 1 {
        0
    } else if d.iter().all(|x| x.abs() == s) {
        1
    } else {
        2
    }
}

/// For cubes larger than the budget: per shell the axis points and (a sample of) the diagonals, then seeded
/// random points of the shells in turn for what is left of the budget; ordered by shell and category.
fn sampled_offsets(m: usize, r: i64, budget: usize, candidate: &Input) -> Vec<Vec<i64>> {
    let mut rng = SplitMix(
        candidate
            .key()
            .iter()
            .fold(0x9e37_79b9_7f4a_7c15u64, |h, k| {
                h.rotate_left(5) ^ k.wrapping_mul(0xbf58_476d_1ce4_e5b9)
            }),
    );
    let mut set: HashSet<Vec<i64>> = HashSet::new();
    let mut out: Vec<Vec<i64>> = Vec::new();
    let mut push = |d: Vec<i64>, out: &mut Vec<Vec<i64>>| {
        if set.insert(d.clone()) {
            out.push(d);
        }
    };
    push(vec![0; m], &mut out);
    // One dimension has nothing but axis points; otherwise they and the diagonals get half the budget.
    let structured_cap = if m <= 1 { budget } else { (budget / 2).max(1) };
    for k in 1..=r {
        for i in 0..m {
            for s in [-k, k] {
                let mut d = vec![0; m];
                d[i] = s;
                push(d, &mut out);
            }
        }
        // Diagonals: all 2^m sign patterns when few, else a sample.
        let per_shell = (structured_cap / r.max(1) as usize).max(2);
        if m < 20 && (1usize << m) <= per_shell {
            for signs in 0..(1u64 << m) {
                push(
                    (0..m)
                        .map(|i| if signs >> i & 1 == 1 { k } else { -k })
                        .collect(),
                    &mut out,
                );
            }
        } else {
            push(vec![k; m], &mut out);
            push(vec![-k; m], &mut out);
            for _ in 0..per_shell.saturating_sub(2) {
                push(
                    (0..m)
                        .map(|_| if rng.next() & 1 == 1 { k } else { -k })
                        .collect(),
                    &mut out,
                );
            }
        }
        if out.len() >= structured_cap {
            break;
        }
    }
    // The rest of the budget: random points, shells taken in turn (one coordinate at ±k, the others in
    // [-k, k]), so every distance gets an equal share.
    let mut tries = 0usize;
    let mut k = 0;
    while out.len() < budget && tries < budget.saturating_mul(4) {
        tries += 1;
        k = k % r + 1;
        let mut d: Vec<i64> = (0..m).map(|_| rng.range(-k, k)).collect();
        let i = (rng.next() % m as u64) as usize;
        d[i] = if rng.next() & 1 == 1 { k } else { -k };
        push(d, &mut out);
    }
    out.sort_by_key(|d| (shell(d), category(d)));
    out.truncate(budget);
    out
}

/// The value `k` steps from `v`: `nextafter` for floats, ±k (clamped to the C type) for integers.
pub fn step_value(v: ArgValue, ty: ParamType, k: i64) -> ArgValue {
    match (v, ty) {
        (ArgValue::F64(x), _) => ArgValue::F64(step_f64(x, k)),
        (ArgValue::F32(x), _) => ArgValue::F32(step_f32(x, k)),
        (ArgValue::Int(x), ParamType::Int { bits, signed }) => {
            let (lo, hi): (i128, i128) = match (bits, signed) {
                (1, _) => (0, 1),
                (64, true) => (i64::MIN as i128, i64::MAX as i128),
                (64, false) => (0, u64::MAX as i128),
                (b, true) => (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1),
                (b, false) => (0, (1i128 << b) - 1),
            };
            let base = if bits == 64 && !signed {
                x as u64 as i128
            } else {
                x as i128
            };
            let stepped = (base + k as i128).clamp(lo, hi);
            ArgValue::Int(if bits == 64 && !signed {
                stepped as u64 as i64
            } else {
                stepped as i64
            })
        }
        (other, _) => other,
    }
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
    seen: &mut HashSet<(ExceptionKind, Option<u32>, Option<u32>)>,
) {
    for &word in &pair.p.events {
        let Some(e) = runner.event(word) else {
            continue;
        };
        if seen.insert((e.kind, e.line, e.column)) {
            plain.push(PlainException {
                kind: e.kind,
                line: e.line,
                column: e.column,
                inputs: named_inputs(sig, input),
                avoidable: None,
            });
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
