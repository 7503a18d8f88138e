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

/// Solves the functions in file order, each within its share of the file's solver work (counted in Z3's
/// resource units, so the same function stops at the same query on any load). Each is solved on its own: what
/// one function finds does not depend on the others (taking over the verdicts of the functions solved before
/// it would make it depend on which of them a run solved and which it took from the cache).
fn solve_functions(
    pending: Vec<Pending>,
    config: &AnalysisConfig,
    budget: &Budget,
    cancel: &CancelToken,
    progress: &dyn Progress,
) -> Result<Vec<(Pending, Solution)>, AnalysisError> {
    let mut solved = Vec::new();
    let count = pending.len();
    let nothing_known = solve::KnownVerdicts::new();
    for (i, mut item) in pending.into_iter().enumerate() {
        cancel.check()?;
        progress.phase(
            Phase::Solve,
            &format!("{} ({}/{count})", item.info.signature.name, i + 1),
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
            &nothing_known,
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
        solved.push((item, solution));
    }
    Ok(solved)
}
