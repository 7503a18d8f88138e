//! The analysis of one file, end to end: compile, model, solve, execute, search, report.
//!
//! This is the engine's entry point for the CLI and the language server. It is synchronous and runs on the
//! caller's thread (LLVM and Z3 contexts stay on the threads that create them); only plain values come out.

use crate::compile::{self, CompileError};
use crate::config::AnalysisConfig;
use crate::{exec, ir, search};
use inkwell::context::Context;
use crate::fpfmt;
use crate::report::{DivergenceClass, FileReport, FunctionReport, NamedValue, TraceEvent};
use crate::types::{ArgValue, FunctionSignature, Input, ParamType};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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

/// Adds the flags of the file's `compile_commands.json` entry, if any, to the configuration.
fn effective_config(request: &AnalysisRequest<'_>) -> AnalysisConfig {
    let mut config = request.config.clone();
    if let Some((_, flags)) = compile::flags_from_compile_commands(request.path) {
        config.extra_flags.extend(flags);
    }
    config
}

fn compile_error(e: CompileError) -> AnalysisError {
    match e {
        CompileError::Rejected { first_error, line, column, stderr } => {
            AnalysisError::Compile { message: first_error, line, column, stderr }
        }
        CompileError::Unavailable { .. } => AnalysisError::Environment(e.to_string()),
    }
}

/// Analyses one file.
pub fn analyse(
    request: &AnalysisRequest<'_>,
    cache: &dyn FunctionCache,
    progress: &dyn Progress,
    cancel: &CancelToken,
) -> Result<FileReport, AnalysisError> {
    let _ = (request, cache, progress, cancel);
    Err(AnalysisError::Internal("pipeline not yet assembled".into()))
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
    let context = Context::create();
    let p_module = ir::parse_module(&context, &pair.p_ll, "P").map_err(AnalysisError::Internal)?;
    let sig = ir::describe_functions(&p_module, &pair.p_ll)
        .into_iter()
        .find_map(|e| match e {
            Ok(info) if info.signature.name == function => Some(Ok(info.signature)),
            Err((name, reason)) if name == function => Some(Err(reason)),
            _ => None,
        })
        .ok_or_else(|| AnalysisError::Environment(format!("no function `{function}` is defined in {}", request.path.display())))?
        .map_err(|reason| AnalysisError::Environment(format!("cannot run `{function}`: {reason}")))?;
    let input = parse_assignments(&sig, assignments).map_err(AnalysisError::Environment)?;
    let mut runner = exec::Runner::build(&pair.p_ll, &pair.pp_ll, std::slice::from_ref(&sig), &config)
        .map_err(|e| AnalysisError::Environment(format!("cannot build the instrumented program: {e}")))?;
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

/// Parses `NAME=VALUE` pairs into an input for `sig`; every searchable parameter needs a value.
pub fn parse_assignments(sig: &FunctionSignature, assignments: &[(String, String)]) -> Result<Input, String> {
    let mut values = Vec::new();
    for p in &sig.params {
        if !p.ty.is_searchable() {
            values.push(ArgValue::OutPtr);
            continue;
        }
        let (_, text) = assignments
            .iter()
            .find(|(n, _)| *n == p.name)
            .ok_or_else(|| format!("missing a value for `{}` (give --input {}=VALUE)", p.name, p.name))?;
        let value = match p.ty {
            ParamType::F64 => ArgValue::F64(fpfmt::parse_f64(text).ok_or_else(|| format!("`{text}` is not a number"))?),
            ParamType::F32 => {
                let v = fpfmt::parse_f64(text).ok_or_else(|| format!("`{text}` is not a number"))?;
                ArgValue::F32(v as f32)
            }
            ParamType::Int { .. } => {
                ArgValue::Int(text.trim().parse::<i64>().map_err(|_| format!("`{text}` is not an integer"))?)
            }
            ParamType::OutPtr { .. } => ArgValue::OutPtr,
        };
        values.push(value);
    }
    if let Some((unknown, _)) = assignments.iter().find(|(n, _)| !sig.params.iter().any(|p| &p.name == n)) {
        return Err(format!("`{}` has no parameter `{unknown}`", sig.name));
    }
    Ok(Input(values))
}
