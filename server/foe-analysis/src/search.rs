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
mod group;
mod integers;
mod neighbourhood;
pub mod results;
pub mod work;

pub use explain::{compare_kinds, compare_traces};
pub(crate) use explain::{explain, result_summary};
use group::{run_in_slices, search_group};
pub use integers::IntegerRepair;
#[cfg(test)]
use neighbourhood::shell;
pub use neighbourhood::{neighbourhood, step_value};
use neighbourhood::{neighbourhood_prefix, neighbourhood_size};
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
    /// Whether it was the budget's wall-clock safety net, not its work, that ended it.
    pub clock_stopped: bool,
    /// The work the search did ([`work`]), in nanoseconds of an idle machine: the same on any load.
    pub work_ns: u64,
    /// Operations its runs checked (runs that timed out included): for calibration and logs.
    pub ops: u64,
    /// Special inputs and solver candidates on which both instrumented builds returned the same outputs and
    /// exception traces: what [`crate::confirm::shipped_only`] runs again on the binaries clang ships.
    pub agreed: Vec<Input>,
    /// The integer parameters set to a count the runs return on, where every run on the solver's values crashed or
    /// hung.
    pub integers_repaired: Option<IntegerRepair>,
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
    run_search(runner, sig, candidates, domain, cfg, budget, None)
}

/// What the model gives the searches aimed at results.
#[derive(Clone, Copy, Default)]
pub struct FromModel<'a> {
    /// P's explored paths with their outputs: the real-number reference of result divergences.
    pub paths: &'a [crate::accuracy::PathOutputs],
    /// Inputs where an addition or subtraction of P cancels (solved from the model): where the aimed search also
    /// starts.
    pub cancellations: &'a [Input],
}

/// [`search`], then the special-value and ordinary-magnitude inputs of [`results::special_inputs`] around the
/// first candidates, each run once, and the search aimed at results (what the pipeline runs: the paper's search
/// plus the inputs where finite-math, flush-to-zero and re-association change what a function computes).
pub fn search_with_special_inputs(
    runner: &mut Runner,
    sig: &FunctionSignature,
    candidates: &[Input],
    domain: Option<&Domain>,
    cfg: &AnalysisConfig,
    budget: Option<SearchBudget>,
    model: FromModel<'_>,
) -> Result<SearchOutcome, ExecError> {
    let paths = model.paths;
    let mut out = run_search(
        runner,
        sig,
        candidates,
        domain,
        cfg,
        budget,
        Some(model.cancellations),
    )?;
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
    aimed_at_results: Option<&[Input]>,
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
        run_limits: work::RunLimits::of(cfg),
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
    // Integer parameters at a count no caller passes (a loop bound of 0) crash every run: set to one that returns.
    let repaired: Vec<Input>;
    let (cands, integers_repaired) = match integers::repair(runner, sig, &cands, &mut state)? {
        Some((inputs, repair)) => {
            repaired = inputs;
            (repaired.iter().collect::<Vec<&Input>>(), Some(repair))
        }
        None => (cands, None),
    };
    // Candidates are searched in groups so memory stays bounded however many there are; all points of a
    // group's round go to the worker in one batch.
    let per_candidate = neighbourhood_size(sig, cfg).max(1);
    let group = (GROUP_POINTS / per_candidate).max(1);
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
    // Then the search aimed at results, from sampled inputs and the model's cancellations.
    if let Some(cancellations) = aimed_at_results {
        run_special_inputs(runner, sig, &cands, cfg, &mut state)?;
        let from_model: Vec<&Input> = cancellations
            .iter()
            .filter(|c| fits(sig, c).is_ok())
            .collect();
        aimed::run_aimed_search(runner, sig, &cands, &from_model, cfg, &mut state)?;
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
        clock_stopped: state.out_of_time && state.budget.is_some_and(|b| state.work_ns < b.work_ns),
        work_ns: state.work_ns,
        ops: state.ops,
        agreed: state.agreed,
        integers_repaired,
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

/// `cfg` with no neighbourhood: each input run once (special inputs, the aimed search's judged inputs).
pub(crate) fn each_once(cfg: &AnalysisConfig) -> AnalysisConfig {
    AnalysisConfig {
        radius: 0,
        neighbourhood_budget: 1,
        ..cfg.clone()
    }
}

/// Inputs sent to the worker at once within a round: the first slice, and the most. The first is one input: a
/// run that hangs costs the execution limit on both builds, and two such runs end the search
/// ([`MAX_TIMEOUTS`]), so a round whose first input hangs stops after it, not after a slice of them.
const FIRST_SLICE: usize = 1;
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
    /// The per-run limits: what a run that timed out cost ([`work::pairs_work`]).
    run_limits: work::RunLimits,
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
