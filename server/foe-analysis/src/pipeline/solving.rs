//! The phase that solves each modelled function's queries (in a solver child, within the file's work budget,
//! taking over the verdicts of functions solved before it) while the instrumented runner is built on a thread of
//! its own: it depends on no solver result.

use super::budget::Budget;
use super::select::Callees;
use super::{ms, AnalysisError, CancelToken, Pending, Phase, Progress};
use crate::config::AnalysisConfig;
use crate::exec::{ExecError, Runner};
use crate::report::{Note, ReasonCode};
use crate::solve::{self, child::Solution};
use crate::types::FunctionSignature;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// The functions solved, each with its solution, and the runner (`None` when nothing is to run).
pub(super) type Solved = (Vec<(Pending, Solution)>, Option<Result<Runner, ExecError>>);

/// Solves `pending` in order while the runner of `signatures` is built from the two builds' IR.
#[allow(clippy::too_many_arguments)]
pub(super) fn solve_while_building_the_runner(
    pending: Vec<Pending>,
    (p_ll, pp_ll): (&str, &str),
    signatures: &[FunctionSignature],
    (config, budget, callees): (&AnalysisConfig, &Budget, &Callees),
    cancel: &CancelToken,
    progress: &dyn Progress,
    timings: &mut BTreeMap<String, u64>,
) -> Result<Solved, AnalysisError> {
    std::thread::scope(|scope| -> Result<_, AnalysisError> {
        let builder = (!signatures.is_empty()).then(|| {
            scope.spawn(|| {
                let started = Instant::now();
                (Runner::build(p_ll, pp_ll, signatures, config), ms(started))
            })
        });
        progress.phase(
            Phase::Solve,
            &format!("solving {} functions", pending.len()),
        );
        let started = Instant::now();
        let solved = solve_functions(pending, config, budget, callees, cancel, progress)?;
        timings.insert("solve".to_string(), ms(started));
        let runner = builder.map(|handle| match handle.join() {
            Ok((runner, took)) => {
                timings.insert("build_runner".to_string(), took);
                runner
            }
            Err(_) => Err(ExecError::Toolchain(
                "the thread building the runner panicked".into(),
            )),
        });
        Ok((solved, runner))
    })
}

/// How many functions' solver children run at once. Each child deals its queries to its own `threads` workers
/// exactly as it would alone, so its results do not depend on what runs beside it; running two fills the time a
/// child's other workers wait at the end of a batch for a query that runs into its safety net (a file of two
/// independent functions, Cephes `k0.c`: solve 1.8 -> 1.1 s). Solving in-process (no child binary: the engine's
/// own tests) shares the solver threads' contexts, so it is one at a time there.
const CONCURRENT_SOLVES: usize = 2;

/// Solves the functions, the ones a function calls before it, each within its share of the file's solver work
/// (counted in Z3's resource units, so the same function stops at the same query on any load), taking over the
/// verdicts of the functions it calls ([`Callees::sources`]: solved before it, or taken from the cache with
/// theirs). What a function takes over thus depends on the code its cache key holds, not on which functions a
/// run solved, nor on which ran beside it ([`CONCURRENT_SOLVES`]). Returns them in file order.
fn solve_functions(
    pending: Vec<Pending>,
    config: &AnalysisConfig,
    budget: &Budget,
    callees: &Callees,
    cancel: &CancelToken,
    progress: &dyn Progress,
) -> Result<Vec<(Pending, Solution)>, AnalysisError> {
    let count = pending.len();
    let pending = callees_first(pending, callees);
    let names: HashSet<String> = pending
        .iter()
        .map(|p| p.info.signature.name.clone())
        .collect();
    let queue = Mutex::new(Queue {
        waiting: pending
            .into_iter()
            .map(|item| {
                let sources = callees
                    .sources(&item.info.signature.name)
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                Some((item, sources))
            })
            .collect(),
        in_run: names,
        learned: HashMap::new(),
        solved: Vec::new(),
        started: 0,
        failed: None,
    });
    let finished = Condvar::new();
    // Takes the first function ready, solves it, and goes on until none is left; waits while every waiting
    // function waits for one being solved.
    let work = || loop {
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        let (mut item, known, ordinal) = loop {
            if q.failed.is_some() {
                return;
            }
            if let Some(taken) = q.take_ready(callees) {
                break taken;
            }
            if q.waiting.iter().all(Option::is_none) {
                return;
            }
            q = finished.wait(q).unwrap_or_else(|p| p.into_inner());
        };
        drop(q);
        let solution = solve_one(
            &mut item,
            &known,
            (config, budget, cancel, progress),
            (ordinal, count),
        );
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        match solution {
            Ok(solution) => {
                q.learned
                    .insert(item.info.signature.name.clone(), solution.learned.clone());
                q.solved.push((item, solution));
            }
            Err(e) => {
                q.failed.get_or_insert(e);
            }
        }
        finished.notify_all();
    };
    std::thread::scope(|scope| {
        let concurrent = match solve::child::solves_in_children() {
            true => CONCURRENT_SOLVES,
            false => 1,
        };
        for _ in 1..concurrent.min(count) {
            scope.spawn(work);
        }
        work();
    });
    let q = queue.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = q.failed {
        return Err(e);
    }
    let mut solved = q.solved;
    solved.sort_by_key(|(item, _)| item.index);
    Ok(solved)
}

/// The functions of [`solve_functions`] waiting, solved, and what the solved ones learned.
struct Queue {
    /// In [`callees_first`] order, each with the functions whose verdicts it takes over ([`Callees::sources`]);
    /// `None` once taken.
    waiting: Vec<Option<(Pending, Vec<String>)>>,
    /// The functions this run solves (a source outside it brings its verdicts from the cache).
    in_run: HashSet<String>,
    /// What each function solved so far learned, by name.
    learned: HashMap<String, Vec<(String, solve::KnownVerdict)>>,
    solved: Vec<(Pending, Solution)>,
    /// Functions taken so far (for the progress messages).
    started: usize,
    /// The first error (the analysis was cancelled): the others stop taking functions.
    failed: Option<AnalysisError>,
}

impl Queue {
    /// Takes the first waiting function whose sources in this run are solved, with the verdicts it takes over
    /// and its ordinal; None when every waiting function waits for one being solved.
    fn take_ready(&mut self, callees: &Callees) -> Option<(Pending, solve::KnownVerdicts, usize)> {
        let solved = |s: &String| !self.in_run.contains(s) || self.learned.contains_key(s);
        let i = self.waiting.iter().position(|w| {
            w.as_ref()
                .is_some_and(|(_, sources)| sources.iter().all(solved))
        })?;
        let (item, sources) = self.waiting[i].take()?;
        let mut known = solve::KnownVerdicts::new();
        for source in &sources {
            let theirs = self
                .learned
                .get(source)
                .or_else(|| callees.cached_learned.get(source));
            solve::remember(&mut known, theirs.cloned().unwrap_or_default());
        }
        self.started += 1;
        Some((item, known, self.started))
    }
}

/// Solves one function in its child, within its budget, with the verdicts `known` from its callees; notes what
/// cut it short.
fn solve_one(
    item: &mut Pending,
    known: &solve::KnownVerdicts,
    (config, budget, cancel, progress): (&AnalysisConfig, &Budget, &CancelToken, &dyn Progress),
    (ordinal, count): (usize, usize),
) -> Result<Solution, AnalysisError> {
    cancel.check()?;
    progress.phase(
        Phase::Solve,
        &format!("{} ({ordinal}/{count})", item.info.signature.name),
    );
    let began = Instant::now();
    let limits = solve::SolveLimits {
        work_ms: Some(budget.solve_work()),
        deadline: Some(budget.solve_safety_net()),
    };
    let solution = solve::child::solve_function_isolated(
        &item.info.signature,
        &item.queries,
        &item.domain,
        known,
        config,
        limits,
        &|| cancel.is_cancelled(),
    );
    cancel.check()?;
    let solution = solution.unwrap_or_else(|e| {
        tracing::warn!(function = %item.info.signature.name, "solving failed: {e}");
        item.notes.push(Note::cut(
            ReasonCode::SolverFailed,
            format!("no solver candidates: {e}"),
        ));
        Solution::default()
    });
    let past_safety_net = limits.deadline.is_some_and(|d| Instant::now() > d);
    if solution.work_exhausted {
        item.notes.push(Note::cut(
            ReasonCode::Budget,
            "solving ran out of its work budget",
        ));
    } else if past_safety_net {
        item.notes.push(Note::cut(
            ReasonCode::Clock,
            "solving was stopped by the clock before its work budget ran out (a loaded machine, or queries \
             slower than Z3 counts): another run may differ",
        ));
    }
    item.spent += began.elapsed();
    Ok(solution)
}

/// `pending` ordered so that each function comes after the functions whose verdicts it takes over (by the
/// length of its chain of such callees, then in file order).
fn callees_first(pending: Vec<Pending>, callees: &Callees) -> Vec<Pending> {
    let names: HashMap<String, usize> = pending
        .iter()
        .enumerate()
        .map(|(i, p)| (p.info.signature.name.clone(), i))
        .collect();
    fn depth(
        i: usize,
        pending: &[Pending],
        names: &HashMap<String, usize>,
        callees: &Callees,
        memo: &mut Vec<Option<usize>>,
    ) -> usize {
        if let Some(d) = memo[i] {
            return d;
        }
        // The sources relation has no cycle (a function is one of its callee's sources only if that callee does
        // not call it), so the recursion ends.
        let d = callees
            .sources(&pending[i].info.signature.name)
            .iter()
            .filter_map(|s| names.get(*s))
            .map(|&j| 1 + depth(j, pending, names, callees, memo))
            .max()
            .unwrap_or(0);
        memo[i] = Some(d);
        d
    }
    let mut memo = vec![None; pending.len()];
    let depths: Vec<usize> = (0..pending.len())
        .map(|i| depth(i, &pending, &names, callees, &mut memo))
        .collect();
    let mut ordered: Vec<(usize, Pending)> = depths.into_iter().zip(pending).collect();
    ordered.sort_by_key(|(d, p)| (*d, p.index));
    ordered.into_iter().map(|(_, p)| p).collect()
}
