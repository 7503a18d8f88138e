//! The phase that runs both builds on each solved function's candidates (the search, special inputs included),
//! confirms what it found on the shipped binaries, and settles the function's report: its notes, status and cache
//! entry.

use super::budget::{ordinary_inputs, Budget};
use super::settle::{base_report, no_exception_possible};
use super::{ms, AnalysisError, CancelToken, FunctionCache, Pending, Phase, Progress};
use crate::config::AnalysisConfig;
use crate::confirm::{self, EarlyHarness};
use crate::exec::{ExecError, Runner};
use crate::report::{FunctionReport, FunctionStatus, Note, ReasonCode, DID_NOT_RETURN};
use crate::search::{self, SearchBudget, SearchOutcome};
use crate::solve::child::Solution;
use std::collections::BTreeMap;
use std::time::Instant;

/// What the search phase needs beside the functions: settings, budget, cache, the shipped binaries.
pub(super) struct SearchContext<'a, 'h> {
    pub config: &'a AnalysisConfig,
    pub budget: &'a Budget,
    pub cache: &'a dyn FunctionCache,
    pub cancel: &'a CancelToken,
    pub progress: &'a dyn Progress,
    pub shipped: Option<&'a mut EarlyHarness<'h>>,
    /// Whether the inputs the instrumented builds agree on are run on the shipped binaries too: not when neither
    /// build has a floating-point operation, where their code generation has nothing fast-math changes.
    pub shipped_sweep: bool,
}

/// Runs and settles every solved function; the ones that cannot run (no runner) are settled as failed. Returns the
/// executions run.
pub(super) fn search_functions(
    solved: &[(Pending, Solution)],
    runner: Option<Result<Runner, ExecError>>,
    cx: &mut SearchContext<'_, '_>,
    reports: &mut [Option<FunctionReport>],
    timings: &mut BTreeMap<String, u64>,
) -> Result<usize, AnalysisError> {
    let Some(runner) = runner else {
        return Ok(0);
    };
    cx.progress
        .phase(Phase::BuildRunner, "instrumented runner built");
    let mut runner = match runner {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("cannot build the runner: {e}");
            for (item, solution) in solved {
                let mut r = base_report(item, solution, cx.config.solver_timeout_ms);
                r.note(
                    ReasonCode::RunnerFailed,
                    &format!("cannot build the instrumented program: {e}"),
                );
                r.reason_codes.retain(|c| *c == ReasonCode::RunnerFailed);
                r.status = FunctionStatus::Failed;
                reports[item.index] = Some(r);
            }
            return Ok(0);
        }
    };
    cx.progress.phase(Phase::Execute, "running both builds");
    let started = Instant::now();
    let mut confirm_ms = 0;
    let mut executions = 0;
    for (item, solution) in solved {
        cx.cancel.check()?;
        cx.progress.phase(Phase::Execute, &item.info.signature.name);
        let budget = cx.budget.search_work(solution.work_spent_ms);
        let (report, searched) = search_one(&mut runner, item, solution, budget, cx);
        executions += searched.executions;
        confirm_ms += searched.confirm_ms;
        reports[item.index] = Some(report);
    }
    timings.insert("execute".to_string(), ms(started));
    timings.insert("confirm".to_string(), confirm_ms);
    Ok(executions)
}

/// What searching one function cost.
struct Searched {
    executions: usize,
    confirm_ms: u64,
}

/// One function: search, confirm, notes, status, cache, within `budget`. Returns its report and what it cost.
fn search_one(
    runner: &mut Runner,
    item: &Pending,
    solution: &Solution,
    budget: SearchBudget,
    cx: &mut SearchContext<'_, '_>,
) -> (FunctionReport, Searched) {
    let began = Instant::now();
    let mut report = base_report(item, solution, cx.config.solver_timeout_ms);
    report.learned = solution.learned.clone();
    // With no candidate, ordinary inputs give the function's status an execution to rest on.
    let ordinary;
    let candidates = if solution.candidates.is_empty() {
        ordinary = ordinary_inputs(&item.info.signature);
        &ordinary
    } else {
        &solution.candidates
    };
    let domain = (!item.domain.is_empty()).then_some(&item.domain);
    // A first look runs the ordinary inputs themselves, not their neighbourhoods.
    let first_look;
    let config = match cx.config.quick {
        true => {
            first_look = search::each_once(cx.config);
            &first_look
        }
        false => cx.config,
    };
    let found = search::search_with_special_inputs(
        runner,
        &item.info.signature,
        candidates,
        domain,
        config,
        Some(budget),
        search::FromModel {
            paths: &item.p_outputs,
            cancellations: &solution.cancellations,
        },
    );
    let found = match found {
        Ok(found) => found,
        Err(e) => {
            report.note(
                ReasonCode::ExecutionFailed,
                &format!("execution failed: {e}"),
            );
            report.time_ms = (item.spent + began.elapsed()).as_millis() as u64;
            report.settle_status(false);
            let nothing = Searched {
                executions: 0,
                confirm_ms: 0,
            };
            return (report, nothing);
        }
    };
    report.divergences = found.divergences.clone();
    report.diff_producing = found.diff_producing;
    report.executions = found.executions;
    if cx.config.report_plain_exceptions {
        report.plain_exceptions = found.plain_exceptions.clone();
    }
    let confirming = Instant::now();
    confirm_on_shipped(runner, item, budget, &found, cx, &mut report);
    let confirm_ms = ms(confirming);
    note_search(&mut report, &found, cx.config);
    if cx.config.quick {
        report.note(
            ReasonCode::FirstLook,
            "a first look: ordinary, special and sampled inputs only, no solver, nothing confirmed yet",
        );
    }
    report.time_ms = (item.spent + began.elapsed()).as_millis() as u64;
    // A first look asked the solver nothing: it proves nothing.
    let proved = !cx.config.quick && no_exception_possible(item, solution);
    report.settle_status(proved);
    report.verdict = Some(crate::report::Verdict::of(&report, proved));
    // A result a clock cut short depends on the machine's load, and a first look is not the analysis: neither is
    // kept. One its work budget cut short is what a fresh analysis gives.
    if !report.stopped_by_the_clock() && !cx.config.quick {
        report.line_anchors = item.ranges.anchors(report.lines());
        cx.cache.put(item.key.clone(), report.clone());
    }
    let searched = Searched {
        executions: found.executions,
        confirm_ms,
    };
    (report, searched)
}

/// On the binaries clang ships: what only their code generation does, on the inputs the instrumented builds agree
/// on (within what the search left of `budget`), then the confirmation and cause of every divergence. Nothing
/// without shipped binaries (a first look, or none built).
fn confirm_on_shipped(
    runner: &mut Runner,
    item: &Pending,
    budget: SearchBudget,
    found: &SearchOutcome,
    cx: &mut SearchContext<'_, '_>,
    report: &mut FunctionReport,
) {
    let Some(shipped) = cx.shipped.as_deref_mut() else {
        return;
    };
    // (Nothing to run: the shipped binaries are not waited for.)
    if cx.shipped_sweep && !found.agreed.is_empty() {
        let sweep = confirm::Sweep {
            runner,
            sig: &item.info.signature,
            domain: (!item.domain.is_empty()).then_some(&item.domain),
            accuracy_bits: cx.config.accuracy_bits,
            paths: &item.p_outputs,
            budget: Some(budget.after(found.work_ns)),
        };
        let (more, _work) = confirm::shipped_only(shipped.get(), &found.agreed, sweep);
        report.divergences.extend(more);
    }
    if !report.divergences.is_empty() {
        confirm::confirm_function(shipped.get(), &item.info.signature, report);
    }
}

/// What the search has to say in the report's reason: runs that crashed, stopped, timed out, a budget.
fn note_search(report: &mut FunctionReport, found: &SearchOutcome, config: &AnalysisConfig) {
    report.runs = crate::report::RunTally {
        runs: 2 * found.executions,
        incomplete: found.crashed + found.timed_out,
        first: found.first_crash.clone().or_else(|| {
            (found.timed_out > 0)
                .then(|| format!("{DID_NOT_RETURN} {}", config.run_limits_in_words()))
        }),
    };
    for note in search_notes(found, config) {
        report.add(&note);
    }
}

/// The notes of [`note_search`], in the order they read.
fn search_notes(found: &SearchOutcome, config: &AnalysisConfig) -> Vec<Note> {
    let mut notes = vec![];
    if let Some(repair) = &found.integers_repaired {
        notes.push(Note::remark(repair.describe()));
    }
    // The search stops early on time-outs or on runs that crash far more often than they complete.
    let crashes_stopped = found.stopped_early && found.timed_out < search::MAX_TIMEOUTS;
    if found.crashed > 0 {
        let first = found.first_crash.as_deref().unwrap_or("crashed");
        let mut text = format!(
            "{} executions did not return normally (first: {first})",
            found.crashed
        );
        if crashes_stopped {
            text.push_str("; search stopped early");
        }
        // A run that read data no file defines computed nothing of the program: not compared.
        notes.push(match found.unknown_data > 0 || crashes_stopped {
            true => Note::cut(ReasonCode::RunsIncomplete, text),
            false => Note::remark(text),
        });
    }
    if found.stopped > 0 {
        let first = found.first_stop.as_deref().unwrap_or("stopped");
        notes.push(Note::remark(format!(
            "{} executions stopped at a call foe does not run (first: {first})",
            found.stopped
        )));
    }
    if found.timed_out > 0 {
        let text = format!(
            "{} executions {DID_NOT_RETURN} {}",
            found.timed_out,
            config.run_limits_in_words()
        );
        notes.push(match found.stopped_early && !crashes_stopped {
            true => Note::cut(
                ReasonCode::RunsIncomplete,
                format!("{text}; search stopped early"),
            ),
            false => Note::remark(text),
        });
    }
    if found.out_of_time && found.clock_stopped {
        notes.push(Note::cut(
            ReasonCode::Clock,
            "the search was stopped by the clock before its work budget ran out (a loaded machine, or runs \
             costlier than foe counts): another run may differ",
        ));
    } else if found.out_of_time {
        notes.push(Note::cut(
            ReasonCode::Budget,
            "the search ran out of its work budget before every neighbourhood was explored",
        ));
    }
    notes
}
