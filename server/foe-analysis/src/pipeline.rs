//! The analysis of one file, end to end: compile, model, solve, execute, search, report.
//!
//! This is the engine's entry point for the CLI and the language server. It is synchronous and runs on the
//! caller's thread (LLVM and Z3 contexts stay on the threads that create them); only plain values come out.

use crate::compile::{self, CompileError};
use crate::config::AnalysisConfig;
use crate::domain::{self, Domain};
use crate::fpfmt;
use crate::ir::FunctionInfo;
use crate::model::{self, Query};
use crate::report::{DivergenceClass, FileReport, FunctionReport, NamedValue, TraceEvent};
use crate::report::{FunctionStatus, ReasonCode};
use crate::types::Build;
use crate::types::{ArgValue, FunctionSignature, Input, ParamType};
use crate::{confirm, exec, ir, search, solve};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::FunctionValue;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    if let Some((_, flags)) = compile::flags_from_compile_commands(request.path) {
        config.extra_flags.extend(flags);
    }
    let defaults = AnalysisConfig::default();
    if config.flags_from_database
        && config.flags_p == defaults.flags_p
        && config.flags_p_prime == defaults.flags_p_prime
    {
        // An entry without an optimisation level or fast-math option describes no shipped build (databases
        // written for tools, debug builds): the defaults stay.
        if let Some(flags) = compile::build_flags_from_compile_commands(request.path).filter(|f| {
            f.iter()
                .any(|f| f.starts_with("-O") || compile::is_fast_math_option(f))
        }) {
            (config.flags_p, config.flags_p_prime) = compile::user_build_pair(&flags);
        }
    }
    config
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

/// The time budgets of one analysis. The phases run one after the other over all functions, so the file's budget
/// is split between them (each phase ends at a fixed share of it), and so is each function's (modelling gets the
/// first quarter, solving up to three quarters, the search the rest). A function gets a fair share of what is
/// left of a phase, at most what is left of its own budget, and never less than a floor that lets it make some
/// progress.
struct Budget {
    start: Instant,
    file: Duration,
    function: Duration,
}

/// Share of the budgets by the end of each phase.
const MODEL_SHARE: f64 = 0.25;
const SOLVE_SHARE: f64 = 0.75;
/// The least time a function gets in a phase, however late it comes.
const PHASE_FLOOR: Duration = Duration::from_millis(100);

impl Budget {
    fn new(config: &AnalysisConfig, start: Instant) -> Budget {
        Budget {
            start,
            file: Duration::from_millis(config.file_budget_ms.max(1)),
            function: Duration::from_millis(config.function_budget_ms.max(1)),
        }
    }

    /// The deadline of a function in the phase ending at `share` of the budgets, with `spent` already used by
    /// it and `waiting` functions (itself included) still to go through the phase.
    fn deadline(&self, share: f64, spent: Duration, waiting: usize) -> Instant {
        let now = Instant::now();
        let phase_end = self.start + self.file.mul_f64(share);
        let fair = phase_end.saturating_duration_since(now) / waiting.max(1) as u32;
        let own = self.function.mul_f64(share).saturating_sub(spent);
        now + fair.min(own).max(PHASE_FLOOR)
    }
}

/// Inputs that every function runs on when the solver found no candidate, so that its status rests on an
/// execution (ordinary magnitudes: 1 and 0.5 for every floating-point value, 1 and 2 for integers).
fn ordinary_inputs(sig: &FunctionSignature) -> Vec<Input> {
    [(1.0, 1), (0.5, 2)]
        .iter()
        .map(|&(x, n)| {
            Input(
                sig.params
                    .iter()
                    .map(|p| match p.ty {
                        ParamType::F64 => ArgValue::F64(x),
                        ParamType::F32 => ArgValue::F32(x as f32),
                        ParamType::Int { .. } => ArgValue::Int(n),
                        ParamType::OutPtr { .. } => ArgValue::OutPtr,
                    })
                    .collect(),
            )
        })
        .collect()
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
    // while the functions are solved.
    let signatures: Vec<FunctionSignature> =
        pending.iter().map(|p| p.info.signature.clone()).collect();
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
        for (i, item) in pending.into_iter().enumerate() {
            cancel.check()?;
            progress.phase(
                Phase::Solve,
                &format!("{} ({}/{count})", item.info.signature.name, i + 1),
            );
            let sig = &item.info.signature;
            let began = Instant::now();
            let deadline = budget.deadline(SOLVE_SHARE, item.spent, count - i);
            let solution = solve::child::solve_function_isolated(
                sig,
                &item.queries_p,
                &item.queries_pp,
                &item.domain,
                &config,
                Some(deadline),
                &|| cancel.is_cancelled(),
            );
            cancel.check()?;
            let mut item = item;
            let solution = solution.unwrap_or_else(|e| {
                tracing::warn!(function = %item.info.signature.name, "solving failed: {e}");
                item.notes.push((
                    Some(ReasonCode::SolverFailed),
                    format!("no solver candidates: {e}"),
                ));
                solve::child::Solution::default()
            });
            if Instant::now() > deadline && solution.timeouts > 0 {
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
            let mut shipped =
                confirm::Harness::new(&config, request.path, request.text, &signatures);
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
                match search::search(
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
                        confirm::confirm_function(&mut shipped, &item.info.signature, &mut report);
                        confirm_ms += ms(confirming);
                        if found.crashed > 0 {
                            let first = found.first_crash.as_deref().unwrap_or("crashed");
                            let note = format!(
                                "{} executions did not return normally (first: {first})",
                                found.crashed
                            );
                            report.reason = join_reason(&report.reason, &note);
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
    })
}

/// `paths not followed further: a call to `gsl_error` (2), ...`: where the model ended paths early, most frequent first.
fn path_stops_note(stops: &BTreeMap<String, usize>) -> String {
    let mut by_count: Vec<(&String, &usize)> = stops.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let list: Vec<String> = by_count
        .iter()
        .map(|(reason, n)| format!("{reason} ({n})"))
        .collect();
    format!("paths not followed further: {}", list.join(", "))
}

fn join_reason(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}; {b}")
    }
}

/// Whether the solver showed that neither build raises an exception on any input: no exception condition, or
/// every one unsatisfiable (none given up on).
fn no_exception_possible(item: &Pending, solved: &solve::child::Solution) -> bool {
    let solver_failed = item
        .notes
        .iter()
        .any(|(code, _)| *code == Some(ReasonCode::SolverFailed));
    (item.queries_p.is_empty() && item.queries_pp.is_empty())
        || (!solver_failed && solved.satisfiable == 0 && solved.timeouts == 0)
}

/// Why a function of P has no copy in P' that foe can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoOwnCopy {
    /// Inlined into every caller and removed.
    Inlined,
    /// Its copy's signature differs (an unused return value or argument dropped by the optimiser).
    SignatureChanged,
}

/// Settles the functions the fast-math build has no copy of: `inlined` through the analysed functions that run
/// their code (P' holds it inlined, P calls it), else skipped with the callers named.
fn settle_inlined(
    reports: &mut [Option<FunctionReport>],
    inlined_away: Vec<(usize, FunctionInfo, NoOwnCopy)>,
    p_ll: &str,
    pp_ll: &str,
) {
    if inlined_away.is_empty() {
        return;
    }
    let mut holders = crate::inlining::inlined_helpers(pp_ll);
    for ll in [p_ll, pp_ll] {
        for (callee, callers) in crate::inlining::direct_callers(ll) {
            holders.entry(callee).or_default().extend(callers);
        }
    }
    let ran: BTreeMap<String, bool> = reports
        .iter()
        .flatten()
        .map(|r| (r.name.clone(), r.status.ran()))
        .collect();
    for (index, info, why) in inlined_away {
        let name = &info.signature.name;
        let what = match why {
            NoOwnCopy::Inlined => "the fast-math build inlined it into its callers",
            NoOwnCopy::SignatureChanged => {
                "the fast-math build changed its signature (an unused return value or argument dropped)"
            }
        };
        let callers: Vec<String> = holders
            .get(name)
            .map(|c| c.iter().cloned().collect())
            .unwrap_or_default();
        let through: Vec<String> = callers
            .iter()
            .filter(|c| ran.get(*c).copied().unwrap_or(false))
            .cloned()
            .collect();
        let mut r = if !through.is_empty() {
            let mut r = FunctionReport::skipped(
                name,
                format!("{what}; analysed through {}", quoted_list(&through)),
            );
            r.status = FunctionStatus::ThroughCallers;
            r.through = through;
            r
        } else if callers.is_empty() {
            FunctionReport::skipped_because(
                name,
                ReasonCode::NoFastMathCopy,
                format!("{what}, and no function holds its code (unused, or folded away)"),
            )
        } else {
            FunctionReport::skipped_because(
                name,
                ReasonCode::NoFastMathCopy,
                format!("{what}: {}, which were not analysed", quoted_list(&callers)),
            )
        };
        r.signature = Some(info.signature.clone());
        r.span = info.span.clone();
        reports[index] = Some(r);
    }
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report of an analysed function before its search results are added; its status is settled after the
/// search ([`FunctionReport::settle_status`]).
fn base_report(item: &Pending, solved: &solve::child::Solution, limit_ms: u64) -> FunctionReport {
    let timeouts = solved.timeouts;
    let mut r = FunctionReport::skipped(&item.info.signature.name, "");
    r.status = FunctionStatus::Failed;
    r.formulae = solved.formulae.clone();
    r.satisfiable = solved.satisfiable;
    r.candidates = solved.candidates.len();
    r.solver_timeouts = timeouts;
    for (code, note) in &item.notes {
        match code {
            Some(code) => r.note(*code, note),
            None => r.reason = join_reason(&r.reason, note),
        }
    }
    if timeouts > 0 {
        let note = format!(
            "{timeouts} solver queries gave up (the {limit_ms} ms limit or a degree bound)"
        );
        r.note(ReasonCode::SolverTimeouts, &note);
    }
    r.signature = Some(item.info.signature.clone());
    r.span = item.info.span.clone();
    r.domain = item.domain.text.clone();
    r
}

/// The cache key of a function: its IR in both builds (and that of the functions it calls), its signature,
/// span and domain, and the settings. Lines count from the function's declaration, so a line inserted above
/// keeps the key (the cached report is shifted on reuse).
fn cache_key<'ctx>(
    config: &AnalysisConfig,
    info: &FunctionInfo,
    domain: &Domain,
    p_function: FunctionValue<'ctx>,
    pp_function: FunctionValue<'ctx>,
    p_module: &Module<'ctx>,
    pp_module: &Module<'ctx>,
) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(config.fingerprint().as_bytes());
    let base = info.span.as_ref().map_or(0, |s| s.line);
    let span = info
        .span
        .as_ref()
        .map(|s| (s.body_line - s.line, s.end_line - s.line));
    hasher.update(format!("{:?}{span:?}{:?}", info.signature, domain.text).as_bytes());
    for (function, module) in [(p_function, p_module), (pp_function, pp_module)] {
        for f in with_callees(function, module) {
            hasher.update(ir::function_fingerprint(f, base).as_bytes());
        }
    }
    hasher.finalize().to_hex().to_string()
}

/// `function` and every function of the same module it calls, transitively.
fn with_callees<'ctx>(
    function: FunctionValue<'ctx>,
    module: &Module<'ctx>,
) -> Vec<FunctionValue<'ctx>> {
    let mut seen = vec![function];
    let mut i = 0;
    while i < seen.len() {
        let f = seen[i];
        for block in f.get_basic_block_iter() {
            for inst in block.get_instructions() {
                if inst.get_opcode() != inkwell::values::InstructionOpcode::Call {
                    continue;
                }
                let n = inst.get_num_operands();
                let Some(inkwell::values::Operand::Value(callee)) =
                    inst.get_operand(n.saturating_sub(1))
                else {
                    continue;
                };
                let name = callee.get_name().to_string_lossy().into_owned();
                if let Some(g) = module.get_function(&name) {
                    if g.count_basic_blocks() > 0 && !seen.contains(&g) {
                        seen.push(g);
                    }
                }
            }
        }
        i += 1;
    }
    seen
}

/// The result of running both builds on one user-given input (`foe replay`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayReport {
    pub function: String,
    pub inputs: Vec<NamedValue>,
    pub trace_p: Vec<TraceEvent>,
    pub trace_p_prime: Vec<TraceEvent>,
    pub result_p: String,
    pub result_p_prime: String,
    /// Index of the first differing event and how the traces differ; None when they are equal.
    pub first_divergence: Option<usize>,
    pub class: Option<DivergenceClass>,
    pub flags_p: Vec<String>,
    pub flags_p_prime: Vec<String>,
}

/// Builds and runs both versions of `function` on exactly the given inputs (`NAME=VALUE` pairs).
pub fn replay(
    request: &AnalysisRequest<'_>,
    function: &str,
    assignments: &[(String, String)],
) -> Result<ReplayReport, AnalysisError> {
    let config = effective_config(request);
    let pair = compile::compile_pair(&config, request.path, request.text).map_err(compile_error)?;
    let (pair, _) = crate::project::link_units(pair, request.path, request.config);
    let context = Context::create();
    let p_module = ir::parse_module(&context, &pair.p_ll, "P").map_err(AnalysisError::Internal)?;
    let sig = ir::describe_functions(&p_module, &pair.p_ll)
        .into_iter()
        .find_map(|e| match e {
            Ok(info) if info.signature.name == function => Some(Ok(info)),
            Err((name, reason)) if name == function => Some(Err(reason)),
            _ => None,
        })
        .ok_or_else(|| {
            AnalysisError::Environment(format!(
                "no function `{function}` is defined in {}",
                request.path.display()
            ))
        })?
        .map_err(|reason| {
            AnalysisError::Environment(format!("cannot run `{function}`: {reason}"))
        })?;
    let info = sig;
    let mut sig = with_pointee_inputs(&context, p_module, &pair.pp_ll, info.signature, &config);
    ir::name_fields(&mut sig, &info.pointee_fields);
    let input = parse_assignments(&sig, assignments).map_err(AnalysisError::Environment)?;
    let mut runner =
        exec::Runner::build(&pair.p_ll, &pair.pp_ll, std::slice::from_ref(&sig), &config).map_err(
            |e| AnalysisError::Environment(format!("cannot build the instrumented program: {e}")),
        )?;
    let outcome = runner
        .run(&sig.name, std::slice::from_ref(&input))
        .map_err(|e| AnalysisError::Environment(format!("cannot run both builds: {e}")))?
        .into_iter()
        .next()
        .ok_or_else(|| AnalysisError::Internal("the runner returned no outcome".into()))?;
    let divergence = search::compare_traces(&outcome.p.trace, &outcome.pp.trace);
    Ok(ReplayReport {
        function: sig.name.clone(),
        inputs: sig
            .searchable_params()
            .map(|(i, p)| NamedValue::new(&p.name, input.0[i]))
            .collect(),
        result_p: exec::describe_end(&outcome.p.end),
        result_p_prime: exec::describe_end(&outcome.pp.end),
        trace_p: outcome.p.trace,
        trace_p_prime: outcome.pp.trace,
        first_divergence: divergence.map(|d| d.0),
        class: divergence.map(|d| d.1),
        flags_p: config.flags_p.clone(),
        flags_p_prime: config.flags_p_prime.clone(),
    })
}

/// `sig` with the values behind its pointers as inputs, as [`analyse`] finds them (both builds modelled); `sig`
/// itself when it has no pointer parameter or cannot be modelled (then its pointers get zeroed buffers).
fn with_pointee_inputs<'ctx>(
    context: &'ctx Context,
    p_module: inkwell::module::Module<'ctx>,
    pp_ll: &str,
    sig: FunctionSignature,
    config: &AnalysisConfig,
) -> FunctionSignature {
    if sig.params.iter().all(|p| p.ty.is_searchable()) {
        return sig;
    }
    let Ok(pp_module) = ir::parse_module(context, pp_ll, "P'") else {
        return sig;
    };
    if model::prepare_for_modelling(&p_module, Build::P).is_err()
        || model::prepare_for_modelling(&pp_module, Build::PPrime).is_err()
    {
        return sig;
    }
    match model::model_pair(&p_module, &pp_module, &sig, config, None) {
        Ok(modelled) => modelled.signature,
        Err(_) => sig,
    }
}

/// Parses `NAME=VALUE` pairs into an input for `sig`; every C parameter but pointers needs a value, a value
/// behind a pointer (`v[0]`) is zero unless given.
pub fn parse_assignments(
    sig: &FunctionSignature,
    assignments: &[(String, String)],
) -> Result<Input, String> {
    let mut values = Vec::new();
    for p in &sig.params {
        if !p.ty.is_searchable() {
            values.push(ArgValue::OutPtr);
            continue;
        }
        let text = match assignments.iter().find(|(n, _)| *n == p.name) {
            Some((_, text)) => text.as_str(),
            // A value behind a pointer is what the zeroed buffer holds unless given.
            None if p.pointee.is_some() => "0",
            None => {
                return Err(format!(
                    "missing a value for `{}` (give --input {}=VALUE)",
                    p.name, p.name
                ))
            }
        };
        let value = match p.ty {
            ParamType::F64 => ArgValue::F64(
                fpfmt::parse_f64(text).ok_or_else(|| format!("`{text}` is not a number"))?,
            ),
            ParamType::F32 => {
                let v =
                    fpfmt::parse_f64(text).ok_or_else(|| format!("`{text}` is not a number"))?;
                ArgValue::F32(v as f32)
            }
            ParamType::Int { .. } => ArgValue::Int(
                text.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("`{text}` is not an integer"))?,
            ),
            ParamType::OutPtr { .. } => ArgValue::OutPtr,
        };
        values.push(value);
    }
    if let Some((unknown, _)) = assignments
        .iter()
        .find(|(n, _)| !sig.params.iter().any(|p| &p.name == n))
    {
        return Err(format!("`{}` has no parameter `{unknown}`", sig.name));
    }
    Ok(Input(values))
}
