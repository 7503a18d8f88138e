//! The phase that solves each modelled function's queries (in a solver child, within the file's work budget,
//! taking over the verdicts of functions solved before it) while the instrumented runner is built on a thread of
//! its own: it depends on no solver result.

use super::budget::Budget;
use super::{ms, AnalysisError, CancelToken, Pending, Phase, Progress};
use crate::config::AnalysisConfig;
use crate::exec::{ExecError, Runner};
use crate::report::{Note, ReasonCode};
use crate::solve::{self, child::Solution};
use crate::types::FunctionSignature;
use std::collections::BTreeMap;
use std::time::Instant;

/// The functions solved, each with its solution, and the runner (`None` when nothing is to run).
pub(super) type Solved = (Vec<(Pending, Solution)>, Option<Result<Runner, ExecError>>);

/// Solves `pending` in order while the runner of `signatures` is built from the two builds' IR.
#[allow(clippy::too_many_arguments)]
pub(super) fn solve_while_building_the_runner(
    pending: Vec<Pending>,
    (p_ll, pp_ll): (&str, &str),
    signatures: &[FunctionSignature],
    config: &AnalysisConfig,
    budget: &Budget,
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
        let solved = solve_functions(pending, config, budget, cancel, progress)?;
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

/// Solves the functions in file order: each gets its share of the file's solver work (counted in Z3's resource
/// units, so the same file stops at the same query on any load) and takes over the verdicts asked before.
fn solve_functions(
    pending: Vec<Pending>,
    config: &AnalysisConfig,
    budget: &Budget,
    cancel: &CancelToken,
    progress: &dyn Progress,
) -> Result<Vec<(Pending, Solution)>, AnalysisError> {
    let mut solved = Vec::new();
    let count = pending.len();
    // The file's solver work so far, in milliseconds of budget (deterministic).
    let mut file_work = 0u64;
    // Verdicts of the functions solved so far: a formula is asked at most once per file.
    let mut known = solve::KnownVerdicts::new();
    for (i, mut item) in pending.into_iter().enumerate() {
        cancel.check()?;
        progress.phase(
            Phase::Solve,
            &format!("{} ({}/{count})", item.info.signature.name, i + 1),
        );
        let began = Instant::now();
        let limits = solve::SolveLimits {
            work_ms: Some(budget.solve_work(file_work, count - i)),
            deadline: Some(budget.solve_safety_net(item.spent, count - i)),
        };
        let solution = solve::child::solve_function_isolated(
            &item.info.signature,
            &item.queries,
            &item.domain,
            &known,
            config,
            limits,
            &|| cancel.is_cancelled(),
        );
        cancel.check()?;
        let mut solution = solution.unwrap_or_else(|e| {
            tracing::warn!(function = %item.info.signature.name, "solving failed: {e}");
            item.notes.push(Note::cut(
                ReasonCode::SolverFailed,
                format!("no solver candidates: {e}"),
            ));
            Solution::default()
        });
        file_work += solution.work_spent_ms;
        solve::remember(&mut known, std::mem::take(&mut solution.learned));
        let past_safety_net = limits.deadline.is_some_and(|d| Instant::now() > d);
        if solution.work_exhausted || (past_safety_net && solution.timeouts > 0) {
            item.notes.push(Note::cut(
                ReasonCode::Budget,
                "solving ran out of its time budget",
            ));
        }
        item.spent += began.elapsed();
        solved.push((item, solution));
    }
    Ok(solved)
}
