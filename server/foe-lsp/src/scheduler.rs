//! Analysis jobs off the protocol loop: debounce, one engine run at a time, cancellation by newer versions,
//! progress, publishing, and the verification of quick fixes.
//!
//! A job snapshots the document when it is scheduled (version, generation, text, settings), sleeps the
//! debounce delay, waits for the engine permit, and runs the engine on a blocking thread. A newer edit starts
//! a new generation, which cancels the old job's token; a job whose generation is no longer current stores and
//! publishes nothing. Panics in the engine are caught and logged.

use crate::engine::Engine;
use crate::state::{Analysis, Job, Outcome, Shown, State};
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
use tokio::sync::{mpsc, Semaphore};
use tower_lsp::lsp_types::notification::Progress as ProgressNotification;
use tower_lsp::lsp_types::request::WorkDoneProgressCreate;
use tower_lsp::lsp_types::{
    MessageType, NumberOrString, ProgressParams, ProgressParamsValue, Url, WorkDoneProgress,
    WorkDoneProgressBegin, WorkDoneProgressCreateParams, WorkDoneProgressEnd,
    WorkDoneProgressReport,
};
use tower_lsp::Client;

mod fixes;

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
    /// Fix checks run one whole check at a time, in the order they were asked for (each takes a ticket when it
    /// is started; [`fixes`]): a function's check is several engine runs (the narrowest pragma, the callers it
    /// moved a difference into, the whole file), and checks taking turns at the permit kept the first warning's
    /// fix "verifying" until every function's first try was done.
    fix_tickets: AtomicU64,
    fix_serving: tokio::sync::watch::Sender<u64>,
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
                fix_tickets: AtomicU64::new(0),
                fix_serving: tokio::sync::watch::channel(0).0,
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
        // The checks run one at a time: the fixes of warnings first, in the order of their lines, as a user meets
        // them.
        let mut shown: Vec<_> = analysis
            .shown
            .findings
            .iter()
            .filter(|f| f.code.is_divergence())
            .collect();
        shown.sort_by_key(|f| (f.severity, f.line));
        let mut functions: Vec<String> = vec![];
        for f in shown {
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

    /// Stops every running job (shutdown).
    pub fn cancel_all(&self) {
        self.inner.state.cancel_all();
    }
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
