//! The analysis of one file, end to end, as named phases that hand typed values to each other: compile, select
//! (`select.rs`), model (`modelling.rs`), solve while the runner is built (`solving.rs`), search and confirm
//! (`searching.rs`), settle (`settle.rs`).
//!
//! This is the engine's entry point for the CLI and the language server. It is synchronous and runs on the
//! caller's thread (LLVM and Z3 contexts stay on the threads that create them); only plain values come out.

use crate::compile::{self, CompileDb, CompileError};
use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::ir::FunctionInfo;
use crate::model::FunctionQueries;
use crate::report::{FileReport, FunctionReport};
use crate::types::FunctionSignature;
use crate::{confirm, ir};
use inkwell::context::Context;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod budget;
mod cache_key;
mod modelling;
mod replay;
mod searching;
mod select;
mod settle;
mod solving;
#[cfg(test)]
mod tests;

pub use replay::{parse_assignments, replay, ReplayReport, ShippedReplay};
use settle::{note_static_callers, settle_inlined};

/// What to analyse.
#[derive(Debug, Clone)]
pub struct AnalysisRequest<'a> {
    /// The file's path (used for messages, `compile_commands.json` lookup and include resolution).
    pub path: &'a Path,
    /// The file's text, saved or not.
    pub text: &'a str,
    pub config: &'a AnalysisConfig,
    /// Analyse only these functions (others are reported as skipped with reason "not selected").
    pub only_functions: Option<&'a [String]>,
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

/// The request's compilation database: the one holding the file's entry ([`CompileDb::find`]), read once.
fn compile_db(request: &AnalysisRequest<'_>) -> Option<CompileDb> {
    CompileDb::find(request.path, request.config.compile_commands.as_deref())
}

/// Adds the flags of the file's entry in `db`, if any, to the configuration: its include paths and defines,
/// and (see [`AnalysisConfig::flags_from_database`]) its build flags as P and P'.
fn effective_config(request: &AnalysisRequest<'_>, db: Option<&CompileDb>) -> AnalysisConfig {
    let mut config = request.config.clone();
    let Some(entry) = db.and_then(|db| db.entry(request.path)) else {
        return config;
    };
    config
        .extra_flags
        .extend(entry.flags.meaning.iter().cloned());
    let defaults = AnalysisConfig::default();
    if config.flags_from_database
        && config.flags_p == defaults.flags_p
        && config.flags_p_prime == defaults.flags_p_prime
    {
        // An entry without an optimisation level or fast-math option describes no shipped build (databases
        // written for tools, debug builds): the defaults stay.
        let flags = &entry.flags.build;
        if flags
            .iter()
            .any(|f| f.starts_with("-O") || compile::is_fast_math_option(f))
        {
            (config.flags_p, config.flags_p_prime) = compile::user_build_pair(flags);
        }
    }
    config
}

/// The files the request's file includes (its entry's flags in `db`, the project's database, applied),
/// absolute, as clang lists them: with the file's text, its entry and [`FileReport::linked_units`], what its
/// report depends on.
pub fn included_files(
    request: &AnalysisRequest<'_>,
    db: Option<&CompileDb>,
) -> Result<Vec<std::path::PathBuf>, AnalysisError> {
    compile::included_files(&effective_config(request, db), request.path, request.text)
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

/// Starts building the first shipped binaries, at the lowest priority while the functions are solved (when the
/// builds have a floating-point operation: else only on demand); none for a first look, which confirms nothing.
fn start_shipped<'h>(
    request: &'h AnalysisRequest<'_>,
    config: &'h AnalysisConfig,
    signatures: &'h [FunctionSignature],
    linked: &'h crate::project::Linked,
    (db, fp_operations): (Option<&'h CompileDb>, bool),
) -> Option<confirm::EarlyHarness<'h>> {
    (!signatures.is_empty() && !config.quick).then(move || {
        let make = move || {
            confirm::Harness::new(config, request.path, request.text, signatures).with_units(
                linked,
                db,
                &request.config.extra_flags,
            )
        };
        match fp_operations {
            true => confirm::EarlyHarness::start(make),
            false => confirm::EarlyHarness::on_demand(make),
        }
    })
}

/// What the model phase found for one function that still needs solving and searching.
struct Pending {
    index: usize,
    info: FunctionInfo,
    key: String,
    /// The lines of the file's functions, which its report's positions are anchored to in the cache.
    ranges: std::sync::Arc<cache_key::SourceRanges>,
    domain: Domain,
    queries: FunctionQueries,
    /// P's explored paths with their outputs: the real-number reference of result divergences.
    p_outputs: Vec<crate::accuracy::PathOutputs>,
    /// What modelling assumed or cut short, for the report's reason (with a category when something was cut).
    notes: Vec<crate::report::Note>,
    /// Wall time spent on this function so far.
    spent: Duration,
}

/// Analyses one file: compile, select, model, solve (while the runner is built), search and confirm, settle.
pub fn analyse(
    request: &AnalysisRequest<'_>,
    cache: &dyn FunctionCache,
    progress: &dyn Progress,
    cancel: &CancelToken,
) -> Result<FileReport, AnalysisError> {
    let total = Instant::now();
    let db = compile_db(request);
    let config = effective_config(request, db.as_ref());
    tracing::trace!(ms = ms(total), "compilation database read");
    let mut timings = BTreeMap::new();

    progress.phase(Phase::Compile, "compiling P and P'");
    let started = Instant::now();
    let pair = compile::compile_pair(&config, request.path, request.text).map_err(compile_error)?;
    // A header's functions inlined where they are called, so that their operations are placed at the call.
    let pair = crate::headers::inline_header_functions(pair);
    // Functions and globals of other units of the compilation database, linked in as the program links them.
    let linking = Instant::now();
    let (pair, linked) =
        crate::project::link_units(pair, request.path, request.config, db.as_ref());
    tracing::trace!(ms = ms(linking), "project units linked");
    timings.insert("compile".to_string(), ms(started));
    cancel.check()?;

    progress.phase(Phase::Model, "modelling the IR");
    let started = Instant::now();
    let (mut reports, pending, inlined_away, budget, callees, fp_operations) = {
        let context = Context::create();
        let p_module =
            ir::parse_module(&context, &pair.p_ll, "P").map_err(AnalysisError::Internal)?;
        let pp_module =
            ir::parse_module(&context, &pair.pp_ll, "P'").map_err(AnalysisError::Internal)?;
        let fp_operations = crate::instrument::has_fp_operations(&p_module)
            || crate::instrument::has_fp_operations(&pp_module);
        let modules = (&p_module, &pp_module, pair.p_ll.as_str());
        let mut selection =
            select::select_functions(request, &config, modules, &linked.functions, cache);
        let pending = modelling::model_functions(
            (&p_module, &pp_module),
            selection.to_model,
            &config,
            &selection.budget,
            cancel,
            &mut selection.reports,
        )?;
        (
            selection.reports,
            pending,
            selection.inlined_away,
            selection.budget,
            selection.callees,
            fp_operations,
        )
    };
    timings.insert("model".to_string(), ms(started));

    let signatures: Vec<FunctionSignature> =
        pending.iter().map(|p| p.info.signature.clone()).collect();
    let mut shipped = start_shipped(
        request,
        &config,
        &signatures,
        &linked,
        (db.as_ref(), fp_operations),
    );
    let (solved, runner) = solving::solve_while_building_the_runner(
        pending,
        (&pair.p_ll, &pair.pp_ll),
        &signatures,
        (&config, &budget, &callees),
        cancel,
        progress,
        &mut timings,
    )?;
    cancel.check()?;

    let mut context = searching::SearchContext {
        config: &config,
        budget: &budget,
        cache,
        cancel,
        progress,
        shipped: shipped.as_mut(),
        shipped_sweep: fp_operations,
    };
    let executions =
        searching::search_functions(&solved, runner, &mut context, &mut reports, &mut timings)?;
    settle_inlined(&mut reports, inlined_away, &pair.p_ll, &pair.pp_ll);
    note_static_callers(&mut reports, &pair.p_ll);
    timings.insert("executions".to_string(), executions as u64);
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
        dropped_flags: dropped_flags(request, db.as_ref()),
        first_look: config.quick,
    })
}

/// The flags of the file's database entry that foe does not use (said in the report).
fn dropped_flags(request: &AnalysisRequest<'_>, db: Option<&compile::CompileDb>) -> Vec<String> {
    db.and_then(|db| db.entry(request.path))
        .map(|entry| entry.flags.dropped.clone())
        .unwrap_or_default()
}
