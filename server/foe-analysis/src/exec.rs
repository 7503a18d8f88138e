//! Native execution of both builds: [`Runner::build`] instruments P and P', generates code without
//! re-optimising and links them with the C runtime into one worker program; [`Runner::run`] sends batches of
//! inputs to the worker (sandboxed, restarted after crashes and time-outs) and returns both builds' exception
//! traces and results per input.

mod outputs;
mod toolchain;
pub(crate) use toolchain::first_error;
mod worker;
pub use outputs::{initial_word, RawOutput};

use crate::config::AnalysisConfig;
use crate::instrument::{self, InstrumentError, SiteTable};
use crate::report::{RunEnd, Scalar, TraceEvent};
use crate::types::{
    ArgValue, Build, ExceptionKind, FunctionSignature, Input, ParamType, ReturnType,
};
use inkwell::context::Context;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
pub use worker::WALL_FACTOR;
use worker::{ExecLimits, Worker};

pub use toolchain::{FAULTS_H, LIBC_EXTRAS_C, RUNTIME_C, RUNTIME_H};

/// Why the runner could not be built or could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{0}")]
    Ir(String),
    #[error(transparent)]
    Instrument(#[from] InstrumentError),
    #[error("{0}")]
    Toolchain(String),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("function {0} is not in the runner")]
    UnknownFunction(String),
    #[error("function {function} cannot be run: {reason}")]
    Unavailable { function: String, reason: String },
    #[error("input does not fit {function}: {reason}")]
    BadInput { function: String, reason: String },
    #[error("worker failed: {0}")]
    Worker(String),
}

/// How one execution of one build went, with its exception trace.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub trace: Vec<TraceEvent>,
    pub end: RunEnd,
    /// The trace held more events than the runtime records (4096); `trace` is the prefix.
    pub truncated: bool,
}

/// Both builds on one input.
#[derive(Debug, Clone, PartialEq)]
pub struct PairOutcome {
    pub p: RunOutcome,
    pub pp: RunOutcome,
}

/// How a run ended, before formatting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawEnd {
    /// The result bits (see [`instrument::add_entry`]).
    Returned(u64),
    Crashed(i32),
    TimedOut,
    /// The code called `exit` (or died with this status).
    Exited(i32),
    /// The code called a function the file does not define (index into the runner's stubbed symbols).
    Undefined(u32),
    /// The run reached a call foe does not execute and stopped there (stop id of the [`SiteTable`]).
    Stopped(u32),
    /// The code read data no file defines (index into the runner's stubbed symbols): its stand-in is unreadable,
    /// so the run crashed rather than compute with a value nobody knows.
    UnknownData(u32),
    /// The code reached outside one of the file's arrays (index into the runner's bounded accesses,
    /// [`SiteTable::access`]): the run ended before the access, since what lies past the array is other data
    /// of the worker, which changes with the rest of the file.
    Outside(u32),
}

/// One run as the worker reports it: trace words `(site << 3) | kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRun {
    pub events: Vec<u32>,
    pub truncated: bool,
    pub end: RawEnd,
    /// The words of the pointer parameters' buffers the run changed (a run that returned).
    pub outputs: Vec<RawOutput>,
    /// Each operation's value in execution order (`param` is its site), in runs asked for them
    /// ([`Runner::values`]).
    pub values: Vec<RawOutput>,
    /// Operations the run checked (floating-point operations and calls, each once as it ran): its work, the
    /// same on any load (meaningless for a run that timed out).
    pub ops: u64,
    /// Whether the run ended the worker (a crash other than an access far from every mapping, `exit`, a
    /// time-out): the next run waits for a new one.
    pub ended_worker: bool,
}

impl RawRun {
    /// A run the worker reported nothing of (it overran its time limit, or the worker died): no events, no
    /// outputs, and the worker gone.
    pub fn without_record(end: RawEnd) -> RawRun {
        RawRun {
            events: vec![],
            truncated: false,
            end,
            outputs: vec![],
            values: vec![],
            ops: 0,
            ended_worker: true,
        }
    }

    pub fn returned(&self) -> bool {
        matches!(self.end, RawEnd::Returned(_))
    }
    /// Whether the run returned or stopped cleanly at a call foe does not execute: its trace is complete up to
    /// there, so it can be compared.
    pub fn completed(&self) -> bool {
        matches!(self.end, RawEnd::Returned(_) | RawEnd::Stopped(_))
    }
    /// The trace's exception kind codes ([`ExceptionKind::runtime_code`]).
    pub fn kinds(&self) -> impl Iterator<Item = u8> + '_ {
        self.events.iter().map(|e| (e & 7) as u8)
    }
}

/// Both builds on one input, raw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPair {
    pub p: RawRun,
    pub pp: RawRun,
}

struct Entry {
    sig: FunctionSignature,
    /// Why the function cannot run in one of the builds.
    unavailable: Option<String>,
    /// What its pointer parameters point to, to read what a run wrote there.
    layouts: Vec<crate::ir::PointeeFields>,
}

/// Counters for benchmarks and logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunnerStats {
    /// Time [`Runner::build`] took.
    pub build_time: Duration,
    /// Inputs run (each on both builds).
    pub executions: u64,
    /// Worker processes started (the first plus restarts).
    pub worker_starts: u64,
    /// Time spent in [`Runner::run`].
    pub run_time: Duration,
}

/// Both instrumented builds linked into a worker program, and the worker process.
pub struct Runner {
    /// Declared first so the worker is killed before its directory goes.
    worker: Option<Worker>,
    dir: tempfile::TempDir,
    exe: PathBuf,
    sites: SiteTable,
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    limits: ExecLimits,
    stats: RunnerStats,
    /// Symbols the file uses but does not define, stubbed (index = stub index).
    undefined: Vec<String>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("exe", &self.exe)
            .field("sites", &self.sites.len())
            .finish()
    }
}

impl Runner {
    /// Instruments P and P' (clang's textual IR of the whole file: P = `-O0 -Xclang -disable-O0-optnone
    /// -ffp-contract=off -g`, P' = `-O2 -ffast-math -g`), generates code without re-optimising, and links them
    /// with the runtime into one worker that can call every function of `functions` in both builds.
    /// A function one build cannot call (P' inlined a static function away, or changed its interface) is
    /// kept as unavailable: [`Runner::run`] reports why.
    pub fn build(
        p_ll: &str,
        pp_ll: &str,
        functions: &[FunctionSignature],
        cfg: &AnalysisConfig,
    ) -> Result<Runner, ExecError> {
        let _span = tracing::debug_span!("build_runner").entered();
        let started = Instant::now();
        let dir = crate::scratch::tempdir("foe-exec")?;
        let runtime = toolchain::runtime_object(&cfg.clang, dir.path())?;
        let module_obj = dir.path().join("builds.o");
        let mut sites = SiteTable::default();
        let mut entries: Vec<Entry> = functions
            .iter()
            .zip(crate::ir::pointee_layouts(p_ll, functions))
            .map(|(sig, layouts)| Entry {
                sig: sig.clone(),
                unavailable: None,
                layouts,
            })
            .collect();
        let (data_decls, declared) =
            instrument_builds(p_ll, pp_ll, &mut entries, &mut sites, &module_obj, started)?;
        let exe = dir.path().join("foe-worker");
        let undefined = link_with_stubs(
            &cfg.clang,
            dir.path(),
            &[&runtime, &module_obj],
            &exe,
            &data_decls,
            &declared,
        )?;
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.sig.name.clone(), i))
            .collect();
        let limits = ExecLimits {
            timeout_ms: cfg.exec_timeout_ms.max(1),
            op_limit: cfg.exec_op_limit,
            memory_mib: cfg.memory_limit_mib.max(64),
            p_ftz: cfg.p_ftz(),
            pp_ftz: cfg.p_prime_ftz(),
            values: false,
        };
        let stats = RunnerStats {
            build_time: started.elapsed(),
            ..RunnerStats::default()
        };
        tracing::debug!(
            ms = stats.build_time.as_millis() as u64,
            sites = sites.len(),
            "runner built"
        );
        Ok(Runner {
            dir,
            exe,
            sites,
            entries,
            by_name,
            limits,
            worker: None,
            stats,
            undefined,
        })
    }

    /// Runs both builds on each input (in order), batching many inputs per worker start.
    pub fn run(&mut self, function: &str, inputs: &[Input]) -> Result<Vec<PairOutcome>, ExecError> {
        let raw = self.run_raw(function, inputs)?;
        let sig = self.entries[self.by_name[function]].sig.clone();
        Ok(inputs
            .iter()
            .zip(&raw)
            .map(|(input, pair)| self.pair_outcome(&sig, input, pair))
            .collect())
    }

    /// The public form of both builds' raw runs of `sig` on `input`: traces placed, results and outputs read.
    pub fn pair_outcome(
        &self,
        sig: &FunctionSignature,
        input: &Input,
        pair: &RawPair,
    ) -> PairOutcome {
        let (end_p, end_pp) = self.results(sig, input, pair);
        PairOutcome {
            p: RunOutcome {
                end: end_p,
                ..self.outcome(sig, &pair.p)
            },
            pp: RunOutcome {
                end: end_pp,
                ..self.outcome(sig, &pair.pp)
            },
        }
    }

    /// How both builds' runs of `sig` on `input` ended, with what they returned and wrote through pointers (the
    /// same places read in both).
    pub fn results(
        &self,
        sig: &FunctionSignature,
        input: &Input,
        pair: &RawPair,
    ) -> (RunEnd, RunEnd) {
        let p = self.end(sig, pair.p.end);
        let pp = self.end(sig, pair.pp.end);
        self.with_outputs(sig, input, (p, pp), &pair.p.outputs, &pair.pp.outputs)
    }

    /// Two runs of `sig` on `input` that returned `results` (bits, as the worker and the shipped driver report
    /// them) having changed these words of the pointer buffers: what they returned and wrote, the same places
    /// read in both (for the shipped binaries' runs, read with the instrumented build's knowledge of the types).
    pub fn returned_pair(
        &self,
        sig: &FunctionSignature,
        input: &Input,
        results: (u64, u64),
        p: &[RawOutput],
        pp: &[RawOutput],
    ) -> (RunEnd, RunEnd) {
        let ends = (
            RunEnd::returned(return_value(sig.ret, results.0)),
            RunEnd::returned(return_value(sig.ret, results.1)),
        );
        self.with_outputs(sig, input, ends, p, pp)
    }

    fn with_outputs(
        &self,
        sig: &FunctionSignature,
        input: &Input,
        (mut p, mut pp): (RunEnd, RunEnd),
        words_p: &[RawOutput],
        words_pp: &[RawOutput],
    ) -> (RunEnd, RunEnd) {
        if let Some(entry) = self.by_name.get(&sig.name).map(|&i| &self.entries[i]) {
            let (out_p, out_pp) =
                outputs::decode_pair(sig, &entry.layouts, input, words_p, words_pp);
            for (end, decoded) in [(&mut p, out_p), (&mut pp, out_pp)] {
                if let RunEnd::Returned { outputs, .. } = end {
                    *outputs = decoded;
                }
            }
        }
        (p, pp)
    }

    /// As [`Runner::run`], with traces as raw site/kind words (what the search works on).
    pub fn run_raw(&mut self, function: &str, inputs: &[Input]) -> Result<Vec<RawPair>, ExecError> {
        let started = Instant::now();
        let index = *self
            .by_name
            .get(function)
            .ok_or_else(|| ExecError::UnknownFunction(function.to_string()))?;
        let entry = &self.entries[index];
        if let Some(reason) = &entry.unavailable {
            return Err(ExecError::Unavailable {
                function: function.to_string(),
                reason: reason.clone(),
            });
        }
        let nargs = entry.sig.params.len();
        let mut words = Vec::with_capacity(inputs.len() * nargs);
        for input in inputs {
            encode_input(&entry.sig, input, &mut words)?;
        }
        if inputs.is_empty() {
            return Ok(vec![]);
        }
        let out = worker::run_batches(
            &mut self.worker,
            &self.exe,
            self.dir.path(),
            &self.limits,
            index as u32,
            nargs,
            inputs.len(),
            &words,
            &mut self.stats.worker_starts,
        );
        self.stats.run_time += started.elapsed();
        let out = out?;
        for pair in &out {
            self.check_trace(&pair.p, Build::P)?;
            self.check_trace(&pair.pp, Build::PPrime)?;
        }
        self.stats.executions += out.len() as u64;
        Ok(out)
    }

    /// Both builds on one input again, recording each operation's value (site and bits, in execution order): what
    /// [`crate::search`] compares to find where the builds' values part.
    pub fn values(&mut self, function: &str, input: &Input) -> Result<RawPair, ExecError> {
        self.limits.values = true;
        let ran = self.run_raw(function, std::slice::from_ref(input));
        self.limits.values = false;
        // The next batch must not reuse a worker started for values: their flag is per batch, so it may.
        ran?.into_iter()
            .next()
            .ok_or_else(|| ExecError::Worker("no reply for the value run".into()))
    }

    /// A trace the worker sent must name only sites of the build it claims to be from, with a known kind: the
    /// reply is the user's process talking, and a forged event is an error, not a finding.
    fn check_trace(&self, run: &RawRun, build: Build) -> Result<(), ExecError> {
        for &word in &run.events {
            let kind_ok = ExceptionKind::from_runtime_code((word & 7) as u8).is_some();
            let site_ok = self.sites.get(word >> 3).is_some_and(|s| s.build == build);
            if !kind_ok || !site_ok {
                return Err(ExecError::Worker(format!(
                    "malformed reply: trace event {word:#x} names no {} site",
                    match build {
                        Build::P => "plain-build",
                        Build::PPrime => "fast-math-build",
                    }
                )));
            }
        }
        Ok(())
    }

    /// The public form of a raw run of `sig`, without its outputs (they are read in pairs: [`Runner::pair_outcome`]).
    pub fn outcome(&self, sig: &FunctionSignature, raw: &RawRun) -> RunOutcome {
        RunOutcome {
            trace: raw.events.iter().filter_map(|&e| self.event(e)).collect(),
            end: self.end(sig, raw.end),
            truncated: raw.truncated,
        }
    }

    /// The trace event of a raw trace word.
    pub fn event(&self, word: u32) -> Option<TraceEvent> {
        let kind = ExceptionKind::from_runtime_code((word & 7) as u8)?;
        let site = self.sites.get(word >> 3)?;
        Some(TraceEvent {
            kind,
            line: site.line,
            column: site.column,
            operation: site.operation.clone(),
        })
    }

    /// How a run ended, with the result formatted for `sig`'s return type.
    pub fn end(&self, sig: &FunctionSignature, end: RawEnd) -> RunEnd {
        match end {
            RawEnd::Returned(bits) => RunEnd::returned(return_value(sig.ret, bits)),
            RawEnd::Crashed(signal) => RunEnd::Crashed {
                signal,
                name: signal_name(signal),
            },
            RawEnd::TimedOut => RunEnd::TimedOut {
                limit_ms: self.limits.timeout_ms,
            },
            RawEnd::Exited(status) => RunEnd::Crashed {
                signal: 0,
                name: format!("exit({status})"),
            },
            RawEnd::Stopped(id) => match self.sites.stop(id) {
                Some(stop) => RunEnd::Stopped {
                    callee: stop.callee.clone(),
                    line: stop.line,
                    column: stop.column,
                },
                None => RunEnd::Stopped {
                    callee: String::new(),
                    line: None,
                    column: None,
                },
            },
            RawEnd::UnknownData(i) => RunEnd::Crashed {
                signal: libc::SIGSEGV,
                name: match self.undefined.get(i as usize) {
                    Some(d) => format!("read {d}, which no file defines"),
                    None => "read data no file defines".into(),
                },
            },
            RawEnd::Outside(i) => RunEnd::Crashed {
                signal: 0,
                name: match self.sites.access(i) {
                    Some(access) => access.describe(),
                    None => "an access outside an array".into(),
                },
            },
            RawEnd::Undefined(i) => RunEnd::Crashed {
                signal: 0,
                name: match self.undefined.get(i as usize) {
                    Some(f) => format!("call to {f}, which this file does not define"),
                    None => "call to a function this file does not define".into(),
                },
            },
        }
    }

    pub fn signature(&self, function: &str) -> Option<&FunctionSignature> {
        self.by_name.get(function).map(|&i| &self.entries[i].sig)
    }

    /// Why `function` cannot be run, if it cannot.
    pub fn unavailable(&self, function: &str) -> Option<&str> {
        self.by_name
            .get(function)
            .and_then(|&i| self.entries[i].unavailable.as_deref())
    }

    pub fn sites(&self) -> &SiteTable {
        &self.sites
    }

    pub fn stats(&self) -> RunnerStats {
        self.stats
    }
}

/// Instruments P and P' (their sites numbered into `sites`), adds an entry per function of `entries` (marking
/// those a build cannot call unavailable), links the two builds into one module and writes its object to
/// `module_obj`. Returns the data the module declares but does not define.
fn instrument_builds(
    p_ll: &str,
    pp_ll: &str,
    entries: &mut [Entry],
    sites: &mut SiteTable,
    module_obj: &std::path::Path,
    started: Instant,
) -> Result<(Vec<String>, Vec<String>), ExecError> {
    let ctx = Context::create();
    let p = crate::ir::parse_module(&ctx, p_ll, "P").map_err(ExecError::Ir)?;
    let pp = crate::ir::parse_module(&ctx, pp_ll, "P'").map_err(ExecError::Ir)?;
    instrument::call_replacements(&p);
    instrument::call_replacements(&pp);
    instrument::isolate_user_code(&p);
    instrument::isolate_user_code(&pp);
    instrument::replace_stopping_calls(&p, Build::P, sites)?;
    instrument::replace_stopping_calls(&pp, Build::PPrime, sites)?;
    instrument::instrument_module(&p, Build::P, sites)?;
    instrument::instrument_module(&pp, Build::PPrime, sites)?;
    instrument::guard_object_accesses(&p, sites)?;
    instrument::guard_object_accesses(&pp, sites)?;
    instrument::prefix_symbols(&p, Build::P);
    instrument::prefix_symbols(&pp, Build::PPrime);
    let names = add_entries(&p, &pp, entries)?;
    let kept: (Vec<_>, Vec<_>) = names
        .iter()
        .flatten()
        .map(|(a, b)| (p.get_function(a), pp.get_function(b)))
        .unzip();
    instrument::internalize(&p, &kept.0.into_iter().flatten().collect::<Vec<_>>())?;
    instrument::internalize(&pp, &kept.1.into_iter().flatten().collect::<Vec<_>>())?;
    p.link_in_module(pp)
        .map_err(|e| ExecError::Ir(format!("cannot link the two builds: {e}")))?;
    let table: Vec<_> = names
        .iter()
        .map(|n| match n {
            Some((a, b)) => (p.get_function(a), p.get_function(b)),
            None => (None, None),
        })
        .collect();
    instrument::add_entry_table(&p, &table);
    instrument::keep_only_entries(&p)?;
    let data_decls = instrument::data_declarations(&p);
    instrument::finish_module(&p)?;
    let declared = instrument::declared_names(&p);
    tracing::trace!(
        ms = started.elapsed().as_millis() as u64,
        "runner instrumented"
    );
    instrument::emit_object(&p, module_obj)?;
    tracing::trace!(
        ms = started.elapsed().as_millis() as u64,
        "runner object emitted"
    );
    Ok((data_decls, declared))
}

/// Adds both builds' entry wrappers for each of `entries`: their names, or `None` (the entry marked unavailable,
/// with the reason) when a build cannot call the function.
fn add_entries(
    p: &inkwell::module::Module<'_>,
    pp: &inkwell::module::Module<'_>,
    entries: &mut [Entry],
) -> Result<Vec<Option<(String, String)>>, ExecError> {
    let mut names = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter_mut().enumerate() {
        let ep = instrument::add_entry(p, Build::P, i, &entry.sig)?;
        let epp = instrument::add_entry(pp, Build::PPrime, i, &entry.sig)?;
        match (ep, epp) {
            (Ok(a), Ok(b)) => names.push(Some((fn_name(a), fn_name(b)))),
            (Err(reason), _) | (_, Err(reason)) => {
                entry.unavailable = Some(reason);
                names.push(None);
            }
        }
    }
    Ok(names)
}

/// Links `objects` into the worker `exe`; symbols of other files it misses are stubbed (so only the inputs
/// that reach them fail) and named in the result. Which of the names the objects use (`declared`) the link
/// misses is kept on disk: the next link of a module that uses the same names (the same file analysed again,
/// a file of the same library) stubs them at once instead of linking twice.
fn link_with_stubs(
    clang: &std::path::Path,
    dir: &std::path::Path,
    objects: &[&std::path::Path],
    exe: &std::path::Path,
    data_decls: &[String],
    declared: &[String],
) -> Result<Vec<String>, ExecError> {
    let remembered = missing_cache_path(clang, objects, declared);
    let cached: Option<Vec<String>> = remembered
        .as_deref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|text| serde_json::from_slice(&text).ok());
    let from_cache = cached.is_some();
    let mut missing = cached.unwrap_or_default();
    for attempt in 0..2 {
        let stubs = dir.join("stubs.o");
        let mut with_stubs: Vec<&std::path::Path> = objects.to_vec();
        if !missing.is_empty() {
            let ctx = Context::create();
            let module = instrument::stub_module(&ctx, &missing, data_decls)?;
            instrument::emit_object(&module, &stubs)?;
            with_stubs.push(stubs.as_path());
        }
        match toolchain::link_worker(clang, dir, &with_stubs, exe)? {
            Ok(()) => {
                if let Some(path) = remembered.as_deref().filter(|_| attempt > 0 || !from_cache) {
                    remember_missing(path, &missing);
                }
                if !missing.is_empty() {
                    tracing::debug!(symbols = ?missing, "stubbed symbols the file does not define");
                }
                return Ok(missing);
            }
            Err(more) if attempt == 0 => {
                // Functions and data of other files: stub them so only the inputs that reach them fail.
                missing.extend(more);
                missing.sort();
                missing.dedup();
            }
            Err(still) => {
                return Err(ExecError::Toolchain(format!(
                    "cannot link the worker: undefined {}",
                    still.join(", ")
                )))
            }
        }
    }
    unreachable!("the second attempt returns")
}

/// Where the names a worker's link missed are kept, keyed by the names its objects use, the clang and the
/// runtime object (whose name holds its hash).
fn missing_cache_path(
    clang: &std::path::Path,
    objects: &[&std::path::Path],
    declared: &[String],
) -> Option<PathBuf> {
    let mut h = blake3::Hasher::new();
    h.update(clang.as_os_str().as_encoded_bytes());
    if let Some(runtime) = objects.first() {
        h.update(runtime.as_os_str().as_encoded_bytes());
    }
    for name in declared {
        h.update(name.as_bytes());
        h.update(&[0]);
    }
    let dir = crate::scratch::cache_subdir("worker-stubs")?;
    Some(dir.join(format!("{}.json", &h.finalize().to_hex()[..24])))
}

/// Keeps `missing` at `path` in the cache; a failure only costs the next link its first attempt.
fn remember_missing(path: &std::path::Path, missing: &[String]) {
    if let Ok(text) = serde_json::to_vec(missing) {
        let _ = crate::scratch::write_cache(path, &text);
    }
}

fn fn_name(f: inkwell::values::FunctionValue<'_>) -> String {
    f.get_name().to_string_lossy().into_owned()
}

/// Appends one word per parameter, checking the values fit the signature.
fn encode_input(
    sig: &FunctionSignature,
    input: &Input,
    words: &mut Vec<u64>,
) -> Result<(), ExecError> {
    let bad = |reason: String| ExecError::BadInput {
        function: sig.name.clone(),
        reason,
    };
    if input.0.len() != sig.params.len() {
        return Err(bad(format!(
            "{} values for {} parameters",
            input.0.len(),
            sig.params.len()
        )));
    }
    for (param, value) in sig.params.iter().zip(&input.0) {
        let word = match (param.ty, *value) {
            (ParamType::F64, ArgValue::F64(v)) => v.to_bits(),
            (ParamType::F32, ArgValue::F32(v)) => v.to_bits() as u64,
            (ParamType::Int { bits, signed }, ArgValue::Int(v)) => {
                if !int_fits(v, bits, signed) {
                    return Err(bad(format!("{v} does not fit parameter {}", param.name)));
                }
                v as u64
            }
            (ParamType::OutPtr { .. }, ArgValue::OutPtr) => 0,
            (ty, v) => {
                return Err(bad(format!(
                    "parameter {} is {ty:?}, got {v:?}",
                    param.name
                )))
            }
        };
        words.push(word);
    }
    Ok(())
}

/// Whether `v` is a value of the C integer type (a 64-bit unsigned value is given as its bit pattern).
pub fn int_fits(v: i64, bits: u32, signed: bool) -> bool {
    int_range(bits, signed).is_some_and(|(lo, hi)| (lo..=hi).contains(&v))
}

/// The least and greatest value of the C integer type of `bits` bits (a `bool` is one bit, either signedness; a
/// 64-bit type takes every `i64`, an unsigned one as its bit pattern); `None` past 64 bits.
pub fn int_range(bits: u32, signed: bool) -> Option<(i64, i64)> {
    match (bits, signed) {
        (64, _) => Some((i64::MIN, i64::MAX)),
        (1, _) => Some((0, 1)),
        (b @ 2..=63, true) => Some((-(1i64 << (b - 1)), (1i64 << (b - 1)) - 1)),
        (b @ 2..=63, false) => Some((0, (1i64 << b) - 1)),
        _ => None,
    }
}

/// The value a function of return type `ret` returned, from the result bits the entry passes back; `None` for
/// `void` and types foe does not read.
pub fn return_value(ret: ReturnType, bits: u64) -> Option<Scalar> {
    match ret {
        ReturnType::F64 => Some(Scalar::F64(f64::from_bits(bits))),
        ReturnType::F32 => Some(Scalar::F32(f32::from_bits(bits as u32))),
        ReturnType::Int { signed: true, .. } => Some(Scalar::Int(bits as i64)),
        ReturnType::Int { bits: width, .. } if width >= 64 => Some(Scalar::UInt(bits)),
        ReturnType::Int { bits: width, .. } => Some(Scalar::UInt(bits & ((1u64 << width) - 1))),
        ReturnType::Void | ReturnType::Struct { .. } | ReturnType::Other => None,
    }
}

/// `SIGSEGV` etc. for the signals user code dies of.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSYS => "SIGSYS",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Compiling C snippets into the two builds for tests, as the pipeline does.
    use super::*;

    /// clang's textual IR of `src` for P and P' with the default flags, as the pipeline compiles it.
    pub fn compile_pair(src: &str) -> (String, String) {
        let cfg = AnalysisConfig::default();
        let dir = crate::scratch::tempdir("foe-test").expect("temp dir");
        let file = dir.path().join("t.c");
        std::fs::write(&file, src).expect("write source");
        let pair = crate::compile::compile_pair(&cfg, &file, src).expect("compile");
        (pair.p_ll, pair.pp_ll)
    }

    /// The signatures of the functions P defines.
    pub fn signatures(p_ll: &str) -> Vec<FunctionSignature> {
        let ctx = Context::create();
        let m = crate::ir::parse_module(&ctx, p_ll, "P").expect("parse P");
        crate::ir::describe_functions(&m, p_ll)
            .into_iter()
            .filter_map(|r| r.ok())
            .map(|i| i.signature)
            .collect()
    }

    pub fn runner(src: &str, cfg: &AnalysisConfig) -> (Runner, Vec<FunctionSignature>) {
        let (p, pp) = compile_pair(src);
        let sigs = signatures(&p);
        (
            Runner::build(&p, &pp, &sigs, cfg).expect("build runner"),
            sigs,
        )
    }
}

#[cfg(test)]
mod tests;
