//! Analysis jobs off the protocol loop: debounce, one engine run at a time, cancellation by newer versions,
//! progress, publishing, and the verification of quick fixes.
//!
//! A job snapshots the document when it is scheduled (version, generation, text, settings), sleeps the
//! debounce delay, waits for the engine permit, and runs the engine on a blocking thread. A newer edit starts
//! a new generation, which cancels the old job's token; a job whose generation is no longer current stores and
//! publishes nothing. Panics in the engine are caught and logged.

use crate::engine::Engine;
use crate::state::{Analysis, Fix, FixCheck, Job, Outcome, Shown, State};
use crate::to_proto;
use foe_analysis::config::AnalysisConfig;
use foe_analysis::findings::{self, Finding};
use foe_analysis::fix;
use foe_analysis::pipeline::{
    AnalysisError, AnalysisRequest, CancelToken, NoProgress, Phase, Progress,
};
use foe_analysis::report::FileReport;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch, Semaphore};
use tower_lsp::lsp_types::notification::Progress as ProgressNotification;
use tower_lsp::lsp_types::request::WorkDoneProgressCreate;
use tower_lsp::lsp_types::{
    MessageType, NumberOrString, ProgressParams, ProgressParamsValue, Url, WorkDoneProgress,
    WorkDoneProgressBegin, WorkDoneProgressCreateParams, WorkDoneProgressEnd,
    WorkDoneProgressReport,
};
use tower_lsp::Client;

#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

struct Inner {
    state: Arc<State>,
    engine: Arc<dyn Engine>,
    client: Client,
    /// Engine runs at once ([`engine_runs`]): the engine parallelises inside (both builds, the probes), and the
    /// machine is shared with the editor.
    permit: Semaphore,
    progress_ids: AtomicU64,
    /// Environment errors (no clang) are shown to the user once, then only logged.
    environment_error_shown: AtomicBool,
}

impl Scheduler {
    pub fn new(state: Arc<State>, engine: Arc<dyn Engine>, client: Client) -> Scheduler {
        Scheduler {
            inner: Arc::new(Inner {
                state,
                engine,
                client,
                permit: Semaphore::new(engine_runs()),
                progress_ids: AtomicU64::new(0),
                environment_error_shown: AtomicBool::new(false),
            }),
        }
    }

    /// Starts a new generation of the document and analyses it after `delay`, unless a newer one comes first.
    pub fn schedule(&self, uri: &Url, delay: Duration) {
        let state = &self.inner.state;
        if !state.accepting_jobs() {
            return;
        }
        let Some(job) = state.begin_job(uri) else {
            return;
        };
        if !job.config.enable() {
            let this = self.clone();
            tokio::spawn(async move {
                this.inner
                    .client
                    .publish_diagnostics(job.uri.clone(), vec![], Some(job.version))
                    .await;
                this.status(to_proto::status(
                    &job.uri,
                    job.version,
                    "disabled",
                    "foe is disabled (foe.enable)",
                    None,
                ))
                .await;
            });
            return;
        }
        let this = self.clone();
        tokio::spawn(async move { this.run(job, delay).await });
    }

    /// Re-analyses every open document now (settings changed, or the client asked).
    pub fn schedule_all(&self) {
        for uri in self.inner.state.uris() {
            self.schedule(&uri, Duration::ZERO);
        }
    }

    /// One job: wait for its turn, analyse, decide what to show, publish. Each step is a method below.
    async fn run(self, job: Job, delay: Duration) {
        let inner = &self.inner;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if !inner.state.is_current(&job) {
            return;
        }
        let Ok(_permit) = inner.permit.acquire().await else {
            return;
        };
        if !inner.state.is_current(&job) || job.cancel.is_cancelled() {
            return;
        }
        let started = Instant::now();
        let first_look = self.start_first_look(&job, started);
        let result = self.analyse(&job).await;
        if let Some(look) = first_look {
            look.end().await;
        }
        // A job stopped by a newer edit, a restart or shutdown may end in any error (its worker was killed):
        // that is the normal end of a cancelled job, not a failure to report.
        if job.cancel.is_cancelled() || inner.state.shutting_down.load(Ordering::SeqCst) {
            if let Ok(Err(e)) = &result {
                tracing::debug!("cancelled analysis of {} ended: {e}", file_name(&job));
            }
            return;
        }
        let Some(outcome) = self.outcome(&job, result).await else {
            return;
        };
        let shown = self.shown(&job, &outcome);
        let analysis = Arc::new(Analysis::of(&job, outcome, shown, started.elapsed()));
        if inner.state.finish(&job.uri, analysis.clone()) {
            self.publish(&job, &analysis).await;
        }
    }

    /// Starts a first look at the job's text beside its analysis (`foe.firstLook`): published if it ends first
    /// with something to show, with the status still `analysing`; the analysis's findings replace it.
    fn start_first_look(&self, job: &Job, started: Instant) -> Option<FirstLook> {
        if !job.config.settings.first_look {
            return None;
        }
        let look = FirstLook {
            cancel: CancelToken::default(),
            analysis_ended: Arc::new(tokio::sync::Mutex::new(false)),
        };
        let (this, job, cancel, ended) = (
            self.clone(),
            job.clone(),
            look.cancel.clone(),
            look.analysis_ended.clone(),
        );
        tokio::spawn(async move {
            let config = AnalysisConfig {
                quick: true,
                ..job.config.analysis().clone()
            };
            let (state, engine, j) = (
                this.inner.state.clone(),
                this.inner.engine.clone(),
                job.clone(),
            );
            let result = blocking(move || {
                let request = AnalysisRequest {
                    path: &j.path,
                    text: &j.text,
                    config: &config,
                    only_functions: None,
                };
                engine.analyse(&request, &*state.cache, &NoProgress, &cancel)
            })
            .await;
            let Ok(Ok(report)) = result else { return };
            // Held while publishing, so that the analysis's own publication cannot come in between.
            let ended = ended.lock().await;
            if *ended || job.cancel.is_cancelled() || !this.inner.state.is_current(&job) {
                return;
            }
            this.publish_first_look(&job, report, started).await;
        });
        Some(look)
    }

    /// Sends a first look's diagnostics (each marked `firstLook` in its data) and an `analysing` status that says
    /// the analysis goes on; nothing when it found nothing (an empty list would read as a clean file).
    async fn publish_first_look(&self, job: &Job, report: FileReport, started: Instant) {
        let outcome = Outcome::Report(Arc::new(report));
        let shown = self.shown(job, &outcome);
        if shown.findings.is_empty() {
            return;
        }
        let analysis = Analysis::of(job, outcome, shown, started.elapsed());
        let mut diagnostics = to_proto::diagnostics(&analysis, &job.uri);
        for d in &mut diagnostics {
            if let Some(data) = d.data.as_mut() {
                data["firstLook"] = serde_json::Value::Bool(true);
            }
        }
        self.inner
            .client
            .publish_diagnostics(job.uri.clone(), diagnostics, Some(job.version))
            .await;
        let message = format!(
            "first look at {} shown; analysing (solver and confirmation)",
            file_name(job)
        );
        self.status(to_proto::status(
            &job.uri,
            job.version,
            "analysing",
            &message,
            Some(&analysis),
        ))
        .await;
    }

    /// Runs the engine on the job's text on a blocking thread, with `analysing` status and `$/progress`.
    async fn analyse(
        &self,
        job: &Job,
    ) -> Result<Result<foe_analysis::report::FileReport, AnalysisError>, String> {
        let inner = &self.inner;
        self.status(to_proto::status(
            &job.uri,
            job.version,
            "analysing",
            &format!("analysing {}", file_name(job)),
            None,
        ))
        .await;
        let (progress, progress_done) = self.start_progress(job);
        let (state, engine, j) = (inner.state.clone(), inner.engine.clone(), job.clone());
        let result = blocking(move || {
            // The engine adds the flags of the file's compile_commands.json entry itself.
            let request = AnalysisRequest {
                path: &j.path,
                text: &j.text,
                config: j.config.analysis(),
                only_functions: None,
            };
            engine.analyse(&request, &*state.cache, &*progress, &j.cancel)
        })
        .await;
        // The observer was dropped with the closure: let `$/progress` end before the results are published.
        let _ = tokio::time::timeout(Duration::from_millis(500), progress_done).await;
        result
    }

    /// What the engine's answer means for the document: a report or a compile error; None (after telling the
    /// user) when the analysis failed or was cancelled.
    async fn outcome(
        &self,
        job: &Job,
        result: Result<Result<foe_analysis::report::FileReport, AnalysisError>, String>,
    ) -> Option<Outcome> {
        let name = file_name(job);
        let message = match result {
            Ok(Ok(report)) => return Some(Outcome::Report(Arc::new(report))),
            Ok(Err(AnalysisError::Compile {
                message,
                line,
                column,
                ..
            })) => {
                return Some(Outcome::CompileError {
                    message,
                    line,
                    column,
                })
            }
            Ok(Err(AnalysisError::Cancelled)) => return None,
            Ok(Err(e @ AnalysisError::Environment(_))) => {
                let message = format!("foe: cannot analyse {name}: {e}");
                if !self
                    .inner
                    .environment_error_shown
                    .swap(true, Ordering::SeqCst)
                {
                    self.inner
                        .client
                        .show_message(MessageType::ERROR, &message)
                        .await;
                }
                message
            }
            Ok(Err(e)) => format!("foe: analysis of {name} failed: {e}"),
            Err(panic) => format!("foe: analysis of {name} crashed: {panic}"),
        };
        self.job_failed(&job.uri, job.version, message).await;
        None
    }

    /// What to show for an outcome: its findings, or while the file does not compile the last findings marked
    /// stale (the compile error is clangd's to show), or the compile error when there are none.
    fn shown(&self, job: &Job, outcome: &Outcome) -> Shown {
        match outcome {
            Outcome::Report(report) => Shown {
                findings: Arc::new(findings::findings(report, &job.text, job.config.findings())),
                text: job.text.clone(),
                report: Some(report.clone()),
                stale: false,
            },
            Outcome::CompileError {
                message,
                line,
                column,
            } => match self.inner.state.last_findings(&job.uri) {
                Some(last) => Shown {
                    stale: true,
                    ..last
                },
                None => Shown {
                    findings: Arc::new(vec![Finding::compile_error(message, *line, *column)]),
                    text: job.text.clone(),
                    report: None,
                    stale: false,
                },
            },
        }
    }

    /// Sends the diagnostics, the status and a log line of a finished analysis, then starts verifying its fixes.
    async fn publish(&self, job: &Job, analysis: &Arc<Analysis>) {
        let client = &self.inner.client;
        let diagnostics = to_proto::diagnostics(analysis, &job.uri);
        client
            .publish_diagnostics(job.uri.clone(), diagnostics, Some(job.version))
            .await;
        let (state, message) = to_proto::status_summary(analysis);
        self.status(to_proto::status(
            &job.uri,
            job.version,
            state,
            &message,
            Some(analysis),
        ))
        .await;
        let summary = to_proto::analysis_summary(&file_name(job), analysis);
        client.log_message(MessageType::INFO, summary).await;
        self.prefetch_fixes(analysis);
    }

    /// Tells the client that the analysis of a version failed: a status and a logged error.
    async fn job_failed(&self, uri: &Url, version: i32, message: String) {
        self.status(to_proto::status(uri, version, "error", &message, None))
            .await;
        self.inner
            .client
            .log_message(MessageType::ERROR, message)
            .await;
    }

    async fn status(&self, params: serde_json::Value) {
        self.inner
            .client
            .send_notification::<to_proto::StatusNotification>(params)
            .await;
    }

    /// Starts verifying the quick fix of every function a shown divergence would edit (`fix::target`: the helper
    /// that holds an inlined operation), so code actions answer at once.
    fn prefetch_fixes(&self, analysis: &Arc<Analysis>) {
        if analysis.shown.stale {
            return;
        }
        let Some(report) = analysis.report() else {
            return;
        };
        let mut functions: Vec<String> = vec![];
        for f in analysis
            .shown
            .findings
            .iter()
            .filter(|f| f.code.is_divergence())
        {
            if let Some(t) = fix::target(report, &f.function, Some(f.line)) {
                if !functions.contains(&t.function) {
                    functions.push(t.function);
                }
            }
        }
        for f in functions {
            let _ = self.fix_check(analysis, &f);
        }
    }

    /// Creates a `$/progress` token (when the client supports it) and forwards the engine's phases to it, in
    /// order, until the returned observer is dropped; the returned task ends after the `end` notification.
    fn start_progress(&self, job: &Job) -> (Arc<dyn Progress>, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Phase, String)>();
        let client = self.inner.client.clone();
        let supported = self.inner.state.caps().work_done_progress;
        let token = NumberOrString::String(format!(
            "foe/analysis/{}",
            self.inner.progress_ids.fetch_add(1, Ordering::Relaxed)
        ));
        let title = format!("foe: analysing {} (v{})", file_name(job), job.version);
        let forwarder = tokio::spawn(async move {
            let send = |value: WorkDoneProgress| {
                let params = ProgressParams {
                    token: token.clone(),
                    value: ProgressParamsValue::WorkDone(value),
                };
                client.send_notification::<ProgressNotification>(params)
            };
            let created = supported
                && client
                    .send_request::<WorkDoneProgressCreate>(WorkDoneProgressCreateParams {
                        token: token.clone(),
                    })
                    .await
                    .is_ok();
            if created {
                send(WorkDoneProgress::Begin(WorkDoneProgressBegin {
                    title,
                    cancellable: Some(false),
                    message: None,
                    percentage: Some(0),
                }))
                .await;
            }
            while let Some((phase, detail)) = rx.recv().await {
                if created && phase != Phase::Done {
                    let message = if detail.is_empty() {
                        phase.name().to_string()
                    } else {
                        format!("{}: {detail}", phase.name())
                    };
                    send(WorkDoneProgress::Report(WorkDoneProgressReport {
                        cancellable: Some(false),
                        message: Some(message),
                        percentage: Some(phase as u32 * 100 / Phase::Done as u32),
                    }))
                    .await;
                }
            }
            if created {
                send(WorkDoneProgress::End(WorkDoneProgressEnd { message: None })).await;
            }
        });
        (Arc::new(ChannelProgress(tx)), forwarder)
    }

    /// The verdict on the fast-math-off fix that edits `function` in `analysis` as known now: the background check
    /// (started here if it was not) is [`FixCheck::Pending`] until it ends.
    pub fn fix_check(&self, analysis: &Arc<Analysis>, function: &str) -> FixCheck {
        let Some(target) = analysis.fix_target(function) else {
            return FixCheck::Unavailable;
        };
        let Some(edit) = fix::fast_math_off_edit(&analysis.text, &target.span) else {
            return FixCheck::Unavailable;
        };
        let pending = Fix::one(fix::FixScope::FastMath, edit);
        let mut fixes = analysis.fixes.lock().unwrap_or_else(|e| e.into_inner());
        let rx = match fixes.get(function) {
            Some(rx) => rx.clone(),
            None => {
                let (tx, rx) = watch::channel(None);
                fixes.insert(function.to_string(), rx.clone());
                let this = self.clone();
                let (analysis, function) = (analysis.clone(), function.to_string());
                // Counted from here, so that no gap between its scopes' engine runs looks idle.
                VERIFYING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let check = this.verify(&analysis, &function).await;
                    let _ = tx.send(Some(check));
                    VERIFYING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                });
                rx
            }
        };
        let known = rx.borrow().clone();
        known.unwrap_or(FixCheck::Pending(pending))
    }

    /// Like [`Scheduler::fix_check`], waiting at most `patience` for a check that is running.
    pub async fn fix_check_within(
        &self,
        analysis: &Arc<Analysis>,
        function: &str,
        patience: Duration,
    ) -> FixCheck {
        let check = self.fix_check(analysis, function);
        if !matches!(check, FixCheck::Pending(_)) {
            return check;
        }
        let rx = analysis
            .fixes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(function)
            .cloned();
        let Some(mut rx) = rx else { return check };
        let done = match tokio::time::timeout(patience, rx.wait_for(Option::is_some)).await {
            Ok(Ok(done)) => done.clone(),
            _ => None,
        };
        done.unwrap_or(check)
    }

    /// Re-analyses the functions that ran the target's code (the target itself, or the callers a helper was
    /// inlined into) on the edited text, and judges the divergences the edit aims at (`fix::judge_target`): the
    /// narrowest pragma first ([`fix::scopes`]), fast-math off when it does not remove them all.
    async fn verify(&self, analysis: &Arc<Analysis>, function: &str) -> FixCheck {
        let Some(target) = analysis.fix_target(function) else {
            return FixCheck::Unavailable;
        };
        let Some(report) = analysis.report() else {
            return FixCheck::Unavailable;
        };
        let mut check = FixCheck::Unavailable;
        for scope in fix::scopes(report, &target) {
            let Some(edit) = fix::pragma_edit(&analysis.text, &target.span, scope) else {
                continue;
            };
            check = self
                .verify_edit(
                    analysis,
                    std::slice::from_ref(&target),
                    Fix::one(scope, edit),
                )
                .await;
            if matches!(check, FixCheck::Verified { .. } | FixCheck::Unavailable) {
                break;
            }
        }
        // Exact in the target, the difference moved into other functions (a caller computing on the helper's
        // result): fast-math off in those too, verified the same way.
        if let FixCheck::Worse { moved_to, .. } = &check {
            if let Some((targets, fix)) = wider_fix(analysis, report, &target, moved_to) {
                let wider = self.verify_edit(analysis, &targets, fix).await;
                if matches!(wider, FixCheck::Verified { .. }) {
                    check = wider;
                }
            }
        }
        check
    }

    /// Re-analyses the reporters of `targets` (the functions `fix` edits, its target first) on the text `fix`
    /// makes and judges it.
    async fn verify_edit(
        &self,
        analysis: &Arc<Analysis>,
        targets: &[fix::FixTarget],
        fix: Fix,
    ) -> FixCheck {
        let Some(target) = targets.first() else {
            return FixCheck::Unavailable;
        };
        // What the added findings are looked for in: every reporter of every edited function.
        let mut all = target.clone();
        for t in &targets[1..] {
            for r in &t.reporters {
                if !all.reporters.contains(r) {
                    all.reporters.push(r.clone());
                }
            }
        }
        let fixed = fix::apply_edits(&analysis.text, &fix.edits);
        let Ok(_permit) = self.inner.permit.acquire().await else {
            return FixCheck::Unavailable;
        };
        if analysis.cancel.is_cancelled() {
            return FixCheck::Unavailable;
        }
        let (a, engine, cache, reporters, edited) = (
            analysis.clone(),
            self.inner.engine.clone(),
            self.inner.state.cache.clone(),
            all.reporters.clone(),
            fixed.clone(),
        );
        // One run of every reporter together (the file is compiled, linked and confirmed once), under the permit.
        let result = blocking(move || {
            let request = AnalysisRequest {
                path: &a.path,
                text: &fixed,
                config: a.config.analysis(),
                only_functions: Some(&reporters),
            };
            engine
                .analyse(&request, &*cache, &NoProgress, &a.cancel)
                .map(|report| vec![report])
        })
        .await;
        let unchecked = |why: String| {
            tracing::info!(function = %target.function, "the quick fix could not be verified: {why}");
            FixCheck::Unchecked {
                fix: fix.clone(),
                why,
            }
        };
        match result {
            Ok(Ok(reports)) => {
                // Against what the session shows now, with the same options.
                let added = fix::added_findings(
                    (&analysis.shown.findings, &analysis.text),
                    (&reports, &edited),
                    &all,
                    analysis.config.findings(),
                );
                self.judge_edit(fix.clone(), targets, &reports, added, unchecked)
            }
            Ok(Err(AnalysisError::Cancelled)) => FixCheck::Unavailable,
            Ok(Err(AnalysisError::Compile { message, .. })) => {
                unchecked(format!("the edited file does not compile: {message}"))
            }
            Ok(Err(e)) => unchecked(e.to_string()),
            Err(panic) => unchecked(format!("the re-analysis crashed: {panic}")),
        }
    }

    /// The verdict on an edit whose re-analysis gave `reports` and `added` new findings: withheld when it adds a
    /// warning, else as [`fix::judge_target`] says of every edited function together.
    fn judge_edit(
        &self,
        fix: Fix,
        targets: &[fix::FixTarget],
        reports: &[foe_analysis::report::FileReport],
        added: fix::Added,
        unchecked: impl Fn(String) -> FixCheck,
    ) -> FixCheck {
        let function = targets.first().map_or("", |t| t.function.as_str());
        if added.warnings > 0 {
            tracing::info!(%function, scope = fix.scope.what(), added = added.warnings,
                "the quick fix would add warnings, not offered: {}", added.examples.join("; "));
            return FixCheck::Worse {
                fix,
                added: added.warnings,
                moved_to: added.in_functions,
            };
        }
        let (mut build_only, mut remaining) = (0, 0);
        for target in targets {
            match fix::judge_target(reports, target) {
                Ok(fix::FixVerdict::Verified { build_only: b }) => build_only += b,
                Ok(fix::FixVerdict::Remains { remaining: r }) => remaining += r,
                Err(why) => return unchecked(why),
            }
        }
        match remaining {
            0 => FixCheck::Verified {
                fix,
                build_only,
                added: added.others,
            },
            remaining => FixCheck::Remains { fix, remaining },
        }
    }

    /// Stops every running job (shutdown).
    pub fn cancel_all(&self) {
        self.inner.state.cancel_all();
    }
}

/// Fast-math off in the target and in `moved_to` (the functions whose bodies hold the warnings the target's own
/// fix would add), with the targets to re-analyse; None when there is nothing other than the target to add, or
/// a body's brace is not found.
fn wider_fix(
    analysis: &Analysis,
    report: &foe_analysis::report::FileReport,
    target: &fix::FixTarget,
    moved_to: &[String],
) -> Option<(Vec<fix::FixTarget>, Fix)> {
    // A function's own target (an inlined helper is re-analysed through the callers that hold it).
    let all = fix::targets(report);
    let others: Vec<fix::FixTarget> = moved_to
        .iter()
        .filter(|f| **f != target.function)
        .filter_map(|f| {
            all.iter()
                .find(|t| t.function == *f)
                .cloned()
                .or_else(|| fix::target(report, f, None))
        })
        .collect();
    if others.is_empty() {
        return None;
    }
    let mut edits = vec![];
    for t in std::iter::once(target).chain(&others) {
        edits.push(fix::fast_math_off_edit(&analysis.text, &t.span)?);
    }
    let fix = Fix {
        scope: fix::FixScope::FastMath,
        edits,
        also: others.iter().map(|t| t.function.clone()).collect(),
    };
    let targets = std::iter::once(target.clone()).chain(others).collect();
    Some((targets, fix))
}

/// A first look running beside an analysis.
struct FirstLook {
    cancel: CancelToken,
    /// Set once the analysis has ended: a first look that ends later is not shown.
    analysis_ended: Arc<tokio::sync::Mutex<bool>>,
}

impl FirstLook {
    /// The analysis ended: stop the first look, and wait for a publication in progress to finish.
    async fn end(self) {
        self.cancel.cancel();
        *self.analysis_ended.lock().await = true;
    }
}

/// How many files are analysed side by side: one per two cores (an analysis keeps about two busy), at least one.
fn engine_runs() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).max(1)
}

/// Forwards phases to the task that turns them into `$/progress` notifications.
struct ChannelProgress(mpsc::UnboundedSender<(Phase, String)>);

impl Progress for ChannelProgress {
    fn phase(&self, phase: Phase, detail: &str) {
        let _ = self.0.send((phase, detail.to_string()));
    }
}

/// Engine runs in progress on the blocking pool (waited for when the session ends, so they can clean up).
static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Fix verifications in progress (each may run the engine several times, one scope after another).
static VERIFYING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many engine runs and fix verifications are in progress.
pub fn jobs_running() -> usize {
    RUNNING.load(std::sync::atomic::Ordering::SeqCst)
        + VERIFYING.load(std::sync::atomic::Ordering::SeqCst)
}

/// Runs `f` on the blocking pool; a panic becomes an error message instead of taking the server down.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    RUNNING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    match tokio::task::spawn_blocking(move || {
        struct Done;
        impl Drop for Done {
            fn drop(&mut self) {
                RUNNING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let _done = Done;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
    })
    .await
    {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(payload)) => Err(panic_message(&payload)),
        Err(e) => Err(e.to_string()),
    }
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

fn file_name(job: &Job) -> String {
    job.path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| job.uri.to_string())
}
