//! The analysis of one file, end to end: compile, model, solve, execute, search, report.
//!
//! This is the engine's entry point for the CLI and the language server. It is synchronous and runs on the
//! caller's thread (LLVM and Z3 contexts stay on the threads that create them); only plain values come out.

use crate::compile::{self, CompileError};
use crate::config::AnalysisConfig;
use crate::domain::{self, Domain};
use crate::ir::FunctionInfo;
use crate::model::{self, Query};
use crate::report::{FileReport, FunctionReport};
use crate::report::{FunctionStatus, ReasonCode};
use crate::types::Build;
use crate::types::FunctionSignature;
use crate::{confirm, exec, ir, search, solve};
use inkwell::context::Context;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod budget;
mod cache_key;
mod replay;
mod settle;

use budget::{ordinary_inputs, Budget, MODEL_SHARE};
use cache_key::cache_key;
pub use replay::{parse_assignments, replay, ReplayReport};
use settle::{
    base_report, join_reason, no_exception_possible, path_stops_note, settle_inlined, NoOwnCopy,
};

/// What to analyse.
#[derive(Debug, Clone)]
pub struct AnalysisRequest<'a> {
    /// The file's path (used for messages, `compile_commands.json` lookup and include resolution).
    pub path: &'a Path,
    /// The file's text, saved or not.
    pub text: &'a str,
    pub config: &'a AnalysisConfig,
    /// Analyse only this function (others are reported as skipped with reason "not selected").
    pub only_function: Option<&'a str>,
}

/// Failures that stop the analysis of the whole file. Per-function problems are not errors: they make
/// that function `skipped` with a reason.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error("{message}")]
    Compile {
        /// clang's first error, as `file:line:col: error: ...`.
        message: String,
        line: Option<u32>,
        column: Option<u32>,
        /// Everything clang printed.
        stderr: String,
    },
    #[error("analysis cancelled")]
    Cancelled,
    #[error("{0}")]
    Environment(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// The phases reported to a progress observer, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Compile,
    Model,
    Solve,
    BuildRunner,
    Execute,
    Done,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Compile => "compile",
            Phase::Model => "model",
            Phase::Solve => "solve",
            Phase::BuildRunner => "build_runner",
            Phase::Execute => "execute",
            Phase::Done => "done",
        }
    }
}

/// Receives phase changes (the language server turns them into `$/progress`).
pub trait Progress: Send + Sync {
    fn phase(&self, phase: Phase, detail: &str);
}

/// Ignores progress.
pub struct NoProgress;
impl Progress for NoProgress {
    fn phase(&self, _: Phase, _: &str) {}
}

/// Per-function results keyed by the function's IR in both builds and the settings.
pub trait FunctionCache: Send + Sync {
    fn get(&self, key: &str) -> Option<FunctionReport>;
    fn put(&self, key: String, report: FunctionReport);
}

/// A cache that keeps nothing.
pub struct NoCache;
impl FunctionCache for NoCache {
    fn get(&self, _: &str) -> Option<FunctionReport> {
        None
    }
    fn put(&self, _: String, _: FunctionReport) {}
}

/// Set by the caller to stop an analysis early (a newer edit arrived); checked between phases and functions.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst)
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
    pub fn check(&self) -> Result<(), AnalysisError> {
        if self.is_cancelled() {
            Err(AnalysisError::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Adds the flags of the file's `compile_commands.json` entry, if any, to the configuration: its include paths
/// and defines, and (see [`AnalysisConfig::flags_from_database`]) its build flags as P and P'.
fn effective_config(request: &AnalysisRequest<'_>) -> AnalysisConfig {
    let mut config = request.config.clone();
    let database = request.config.compile_commands.as_deref();
    if let Some((_, flags)) = compile::flags_from_compile_commands(request.path, database) {
        config.extra_flags.extend(flags);
    }
    let defaults = AnalysisConfig::default();
    if config.flags_from_database
        && config.flags_p == defaults.flags_p
        && config.flags_p_prime == defaults.flags_p_prime
    {
        // An entry without an optimisation level or fast-math option describes no shipped build (databases
        // written for tools, debug builds): the defaults stay.
        if let Some(flags) = compile::build_flags_from_compile_commands(request.path, database)
            .filter(|f| {
                f.iter()
                    .any(|f| f.starts_with("-O") || compile::is_fast_math_option(f))
            })
        {
            (config.flags_p, config.flags_p_prime) = compile::user_build_pair(&flags);
        }
    }
    config
}

/// The files the request's file includes (its database entry's flags applied), absolute, as clang lists them:
/// with the file's text, its entry and [`FileReport::linked_units`], what its report depends on.
pub fn included_files(
    request: &AnalysisRequest<'_>,
) -> Result<Vec<std::path::PathBuf>, AnalysisError> {
    compile::included_files(&effective_config(request), request.path, request.text)
        .map_err(compile_error)
}

fn compile_error(e: CompileError) -> AnalysisError {
    match e {
        CompileError::Rejected {
            first_error,
            line,
            column,
            stderr,
        } => AnalysisError::Compile {
            message: first_error,
            line,
            column,
            stderr,
        },
        CompileError::Unavailable { .. } => AnalysisError::Environment(e.to_string()),
    }
}

fn ms(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// What the model phase found for one function that still needs solving and searching.
struct Pending {
    index: usize,
    info: FunctionInfo,
    key: String,
    domain: Domain,
    queries_p: Vec<Query>,
    queries_pp: Vec<Query>,
    /// What modelling assumed or cut short, for the report's reason (with a category when something was cut).
    notes: Vec<(Option<ReasonCode>, String)>,
    /// Wall time spent on this function so far.
    spent: Duration,
}

/// Analyses one file.
pub fn analyse(
    request: &AnalysisRequest<'_>,
    cache: &dyn FunctionCache,
    progress: &dyn Progress,
    cancel: &CancelToken,
) -> Result<FileReport, AnalysisError> {
    let total = Instant::now();
    let config = effective_config(request);
    let mut timings = BTreeMap::new();

    progress.phase(Phase::Compile, "compiling P and P'");
    let started = Instant::now();
    let pair = compile::compile_pair(&config, request.path, request.text).map_err(compile_error)?;
    // Functions and globals of other units of the compilation database, linked in as the program links them.
    let (pair, linked) = crate::project::link_units(pair, request.path, request.config);
    timings.insert("compile".to_string(), ms(started));
    cancel.check()?;

    progress.phase(Phase::Model, "modelling the IR");
    let started = Instant::now();
    let context = Context::create();
    let p_module = ir::parse_module(&context, &pair.p_ll, "P").map_err(AnalysisError::Internal)?;
    let pp_module =
        ir::parse_module(&context, &pair.pp_ll, "P'").map_err(AnalysisError::Internal)?;
    let mut described = ir::describe_functions(&p_module, &pair.p_ll);
    described.retain(|entry| {
        let name = match entry {
            Ok(info) => &info.signature.name,
            Err((name, _)) => name,
        };
        !linked.functions.contains(name)
    });
    let budget = Budget::new(&config, total);
    // Functions the fast-math build has no copy of: settled after the others, through the callers holding them.
    let mut inlined_away: Vec<(usize, FunctionInfo, NoOwnCopy)> = Vec::new();

    let mut reports: Vec<Option<FunctionReport>> = vec![None; described.len()];
    let mut to_model: Vec<(usize, FunctionInfo, String, Domain)> = Vec::new();
    let mut prev_end = 0;
    for (index, entry) in described.into_iter().enumerate() {
        let info = match entry {
            Ok(info) => info,
            Err((name, reason)) => {
                reports[index] = Some(FunctionReport::skipped(&name, reason));
                continue;
            }
        };
        let name = info.signature.name.clone();
        let (decl_line, end_line) = info
            .span
            .as_ref()
            .map(|s| (s.line, s.end_line))
            .unwrap_or((0, 0));
        let (domain, domain_errors) =
            domain::domain_for(request.text, &info.signature, prev_end, decl_line);
        prev_end = end_line.max(prev_end);
        if request.only_function.is_some_and(|f| f != name) {
            let mut r =
                FunctionReport::skipped_because(&name, ReasonCode::NotSelected, "not selected");
            r.signature = Some(info.signature.clone());
            r.span = info.span.clone();
            reports[index] = Some(r);
            continue;
        }
        if let Some(err) = domain_errors.first() {
            tracing::warn!(function = %name, line = err.line, "ignored input domain annotation: {}", err.message);
        }
        let Some(pp_function) = pp_module
            .get_function(&name)
            .filter(|f| f.count_basic_blocks() > 0)
        else {
            inlined_away.push((index, info, NoOwnCopy::Inlined));
            continue;
        };
        let p_function = p_module
            .get_function(&name)
            .expect("described functions exist in P");
        // A static function whose unused return value or argument the optimiser dropped cannot be called with
        // the C signature in P'; its code runs inside its callers' executions.
        if p_function.get_type() != pp_function.get_type() {
            inlined_away.push((index, info, NoOwnCopy::SignatureChanged));
            continue;
        }
        let key = cache_key(
            &config,
            &info,
            &domain,
            p_function,
            pp_function,
            &p_module,
            &pp_module,
        );
        if let Some(mut hit) = cache.get(&key) {
            hit.cached = true;
            // Keys hold lines relative to the declaration: the cached function may have moved.
            if let (Some(now), Some(then)) = (&info.span, &hit.span) {
                hit.shift_lines(now.line as i64 - then.line as i64);
            }
            reports[index] = Some(hit);
            continue;
        }
        to_model.push((index, info, key, domain));
    }

    let mut pending = Vec::new();
    if !to_model.is_empty() {
        if let Err(e) = model::prepare_for_modelling(&p_module, Build::P) {
            return Err(AnalysisError::Internal(format!(
                "cannot prepare P for modelling: {e}"
            )));
        }
        if let Err(e) = model::prepare_for_modelling(&pp_module, Build::PPrime) {
            return Err(AnalysisError::Internal(format!(
                "cannot prepare P' for modelling: {e}"
            )));
        }
    }
    let waiting = to_model.len();
    for (i, (index, info, key, domain)) in to_model.into_iter().enumerate() {
        cancel.check()?;
        let sig = &info.signature;
        let began = Instant::now();
        let deadline = budget.deadline(MODEL_SHARE, Duration::ZERO, waiting - i);
        match model::model_pair(&p_module, &pp_module, sig, &config, Some(deadline)) {
            Ok(modelled) => {
                let mut notes = Vec::new();
                if !modelled.unmodelled_reads.is_empty() {
                    notes.push((None, format!(
                        "reads {} through a pointer where no input can stand for the value (a pointer, a \
                         boolean, or too many values): taken as zeros",
                        modelled.unmodelled_reads.join(", ")
                    )));
                }
                if modelled.symbolic_index_stops > 0 {
                    notes.push((Some(ReasonCode::PathsStopped), format!(
                        "{} paths stop at a memory access with a symbolic index and are not followed further",
                        modelled.symbolic_index_stops
                    )));
                }
                if modelled.out_of_time {
                    notes.push((
                        Some(ReasonCode::Budget),
                        "modelling ran out of its time budget; later paths are not modelled"
                            .to_string(),
                    ));
                } else if modelled.cut_short {
                    notes.push((
                        Some(ReasonCode::PathsStopped),
                        "exploration reached its path or step bound; later paths are not modelled"
                            .to_string(),
                    ));
                }
                // Paths that end at a call foe does not run are analysed up to the call by design: a note, not a
                // cut.
                if !modelled.path_stops.is_empty() {
                    notes.push((None, path_stops_note(&modelled.path_stops)));
                }
                let mut info = info;
                info.signature = modelled.signature;
                ir::name_fields(&mut info.signature, &info.pointee_fields);
                pending.push(Pending {
                    index,
                    info,
                    key,
                    domain,
                    queries_p: modelled.p,
                    queries_pp: modelled.pp,
                    notes,
                    spent: began.elapsed(),
                })
            }
            Err(reason) => {
                let code = ReasonCode::of_model_error(&reason);
                let mut r = FunctionReport::skipped_because(&sig.name, code, reason);
                r.signature = Some(sig.clone());
                r.span = info.span.clone();
                r.domain = domain.text.clone();
                reports[index] = Some(r);
            }
        }
    }
    drop(p_module);
    drop(pp_module);
    timings.insert("model".to_string(), ms(started));

    // The instrumented runner does not depend on the solver's results: it is built (clang and llc child processes)
    // while the functions are solved; so do the first shipped binaries, at the lowest priority.
    let signatures: Vec<FunctionSignature> =
        pending.iter().map(|p| p.info.signature.clone()).collect();
    let mut shipped = (!signatures.is_empty()).then(|| {
        confirm::EarlyHarness::start(|| {
            confirm::Harness::new(&config, request.path, request.text, &signatures)
                .with_units(&linked, &request.config.extra_flags)
        })
    });
    let (solved, runner) = std::thread::scope(|scope| -> Result<_, AnalysisError> {
        let builder = (!signatures.is_empty()).then(|| {
            scope.spawn(|| {
                let started = Instant::now();
                (
                    exec::Runner::build(&pair.p_ll, &pair.pp_ll, &signatures, &config),
                    ms(started),
                )
            })
        });
        progress.phase(
            Phase::Solve,
            &format!("solving {} functions", pending.len()),
        );
        let started = Instant::now();
        let mut solved = Vec::new();
        let count = pending.len();
        // The file's solver work so far, in milliseconds of budget (deterministic).
        let mut file_work = 0u64;
        // Verdicts of the functions solved so far: a formula is asked at most once per file.
        let mut known = solve::KnownVerdicts::new();
        for (i, item) in pending.into_iter().enumerate() {
            cancel.check()?;
            progress.phase(
                Phase::Solve,
                &format!("{} ({}/{count})", item.info.signature.name, i + 1),
            );
            let sig = &item.info.signature;
            let began = Instant::now();
            let limits = solve::SolveLimits {
                work_ms: Some(budget.solve_work(file_work, count - i)),
                deadline: Some(budget.solve_safety_net(item.spent, count - i)),
            };
            let solution = solve::child::solve_function_isolated(
                sig,
                &item.queries_p,
                &item.queries_pp,
                &item.domain,
                &known,
                &config,
                limits,
                &|| cancel.is_cancelled(),
            );
            cancel.check()?;
            let mut item = item;
            let mut solution = solution.unwrap_or_else(|e| {
                tracing::warn!(function = %item.info.signature.name, "solving failed: {e}");
                item.notes.push((
                    Some(ReasonCode::SolverFailed),
                    format!("no solver candidates: {e}"),
                ));
                solve::child::Solution::default()
            });
            file_work += solution.work_spent_ms;
            solve::remember(&mut known, std::mem::take(&mut solution.learned));
            let past_safety_net = limits.deadline.is_some_and(|d| Instant::now() > d);
            if solution.work_exhausted || (past_safety_net && solution.timeouts > 0) {
                item.notes.push((
                    Some(ReasonCode::Budget),
                    "solving ran out of its time budget".to_string(),
                ));
            }
            item.spent += began.elapsed();
            solved.push((item, solution));
        }
        timings.insert("solve".to_string(), ms(started));
        let runner = builder.map(|handle| match handle.join() {
            Ok((runner, took)) => {
                timings.insert("build_runner".to_string(), took);
                runner
            }
            Err(_) => Err(exec::ExecError::Toolchain(
                "the thread building the runner panicked".into(),
            )),
        });
        Ok((solved, runner))
    })?;
    cancel.check()?;

    let mut executions_total = 0usize;
    if let Some(runner) = runner {
        progress.phase(Phase::BuildRunner, "instrumented runner built");
        let mut runner = match runner {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!("cannot build the runner: {e}");
                for (item, solution) in &solved {
                    let mut r = base_report(item, solution, config.solver_timeout_ms);
                    r.note(
                        ReasonCode::RunnerFailed,
                        &format!("cannot build the instrumented program: {e}"),
                    );
                    r.reason_codes.retain(|c| *c == ReasonCode::RunnerFailed);
                    r.status = FunctionStatus::Failed;
                    reports[item.index] = Some(r);
                }
                None
            }
        };
        if let Some(runner) = runner.as_mut() {
            progress.phase(Phase::Execute, "running both builds");
            let started = Instant::now();
            let mut confirm_ms = 0;
            let count = solved.len();
            for (i, (item, solution)) in solved.iter().enumerate() {
                cancel.check()?;
                progress.phase(Phase::Execute, &item.info.signature.name);
                let began = Instant::now();
                let mut report = base_report(item, solution, config.solver_timeout_ms);
                // With no candidate, ordinary inputs give the function's status an execution to rest on.
                let ordinary;
                let candidates = if solution.candidates.is_empty() {
                    ordinary = ordinary_inputs(&item.info.signature);
                    &ordinary
                } else {
                    &solution.candidates
                };
                let domain = (!item.domain.is_empty()).then_some(&item.domain);
                let deadline = budget.deadline(1.0, item.spent, count - i);
                match search::search_with_special_inputs(
                    runner,
                    &item.info.signature,
                    candidates,
                    domain,
                    &config,
                    Some(deadline),
                ) {
                    Ok(found) => {
                        executions_total += found.executions;
                        report.divergences = found.divergences;
                        report.diff_producing = found.diff_producing;
                        report.executions = found.executions;
                        if config.report_plain_exceptions {
                            report.plain_exceptions = found.plain_exceptions;
                        }
                        let confirming = Instant::now();
                        if let Some(shipped) =
                            shipped.as_mut().filter(|_| !report.divergences.is_empty())
                        {
                            confirm::confirm_function(
                                shipped.get(),
                                &item.info.signature,
                                &mut report,
                            );
                        }
                        confirm_ms += ms(confirming);
                        if found.crashed > 0 {
                            let first = found.first_crash.as_deref().unwrap_or("crashed");
                            let note = format!(
                                "{} executions did not return normally (first: {first})",
                                found.crashed
                            );
                            // A run that read data no file defines computed nothing of the program: not compared.
                            if found.unknown_data > 0 {
                                report.note(ReasonCode::RunsIncomplete, &note);
                            } else {
                                report.reason = join_reason(&report.reason, &note);
                            }
                        }
                        if found.stopped > 0 {
                            let first = found.first_stop.as_deref().unwrap_or("stopped");
                            let note = format!(
                                "{} executions stopped at a call foe does not run (first: {first})",
                                found.stopped
                            );
                            report.reason = join_reason(&report.reason, &note);
                        }
                        if found.timed_out > 0 {
                            let note = format!(
                                "{} executions did not return within {} ms",
                                found.timed_out, config.exec_timeout_ms
                            );
                            if found.stopped_early {
                                report.note(
                                    ReasonCode::RunsIncomplete,
                                    &format!("{note}; search stopped early"),
                                );
                            } else {
                                report.reason = join_reason(&report.reason, &note);
                            }
                        }
                        if found.out_of_time {
                            report.note(
                                ReasonCode::Budget,
                                "the search ran out of its time budget before every neighbourhood was explored",
                            );
                        }
                        report.time_ms = (item.spent + began.elapsed()).as_millis() as u64;
                        report.settle_status(no_exception_possible(item, solution));
                        // A result cut short by a budget depends on the machine's load: it is not kept.
                        if !report.reason_codes.contains(&ReasonCode::Budget) {
                            cache.put(item.key.clone(), report.clone());
                        }
                    }
                    Err(e) => {
                        report.note(
                            ReasonCode::ExecutionFailed,
                            &format!("execution failed: {e}"),
                        );
                        report.time_ms = (item.spent + began.elapsed()).as_millis() as u64;
                        report.settle_status(false);
                    }
                }
                reports[item.index] = Some(report);
            }
            timings.insert("execute".to_string(), ms(started));
            timings.insert("confirm".to_string(), confirm_ms);
        }
    }
    settle_inlined(&mut reports, inlined_away, &pair.p_ll, &pair.pp_ll);
    timings.insert("executions".to_string(), executions_total as u64);
    timings.insert("total".to_string(), ms(total));
    tracing::debug!(?timings, "analysis finished");
    progress.phase(Phase::Done, "");

    Ok(FileReport {
        file: request.path.display().to_string(),
        functions: reports.into_iter().flatten().collect(),
        timings_ms: timings,
        flags_p: config.flags_p.clone(),
        flags_p_prime: config.flags_p_prime.clone(),
        ftz_p_prime: config.p_prime_ftz(),
        linked_units: linked
            .units
            .iter()
            .map(|u| u.display().to_string())
            .collect(),
        dropped_flags: compile::dropped_flags_from_compile_commands(
            request.path,
            request.config.compile_commands.as_deref(),
        ),
    })
}
