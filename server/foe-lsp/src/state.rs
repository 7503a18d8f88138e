//! The server's state: open documents and their versions, the latest analysis of each, the per-function cache.
//!
//! Invariants: a document's `generation` grows on every change or forced re-analysis, and only a job started
//! for the current generation may store its analysis (so only the latest version's results are published);
//! starting a job cancels the previous job's token. No lock is held across an `.await`.

use crate::config::ServerConfig;
use dashmap::DashMap;
use foe_analysis::findings::Finding;
use foe_analysis::fix::{self, FixTarget, SourceEdit};
use foe_analysis::pipeline::{CancelToken, FunctionCache};
use foe_analysis::report::{FileReport, FunctionReport};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;
use tokio::sync::watch;
use tower_lsp::lsp_types::Url;

/// What the client said it supports, read once at `initialize`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientCaps {
    /// `window.workDoneProgress`: the server may create `$/progress` tokens.
    pub work_done_progress: bool,
    /// `workspace.configuration`: the server may pull settings.
    pub configuration: bool,
    /// `workspace.workspaceEdit.documentChanges`: edits can carry the document version.
    pub document_changes: bool,
    /// `textDocument.codeAction.disabledSupport`: a fix that is not offered can be shown greyed, with the reason.
    pub disabled_code_actions: bool,
}

/// An open document.
pub struct Document {
    pub path: PathBuf,
    pub version: i32,
    pub text: Arc<str>,
    /// Bumped on every change and forced re-analysis.
    pub generation: u64,
    /// The token of the job for the current generation.
    pub cancel: CancelToken,
    /// The latest stored analysis (possibly of an older version while a newer one is pending).
    pub analysis: Option<Arc<Analysis>>,
}

/// A snapshot of one document for one analysis job.
#[derive(Clone)]
pub struct Job {
    pub uri: Url,
    pub path: PathBuf,
    pub version: i32,
    pub generation: u64,
    pub text: Arc<str>,
    pub cancel: CancelToken,
    pub config: Arc<ServerConfig>,
}

/// What an analysis produced.
pub enum Outcome {
    Report(Arc<FileReport>),
    /// The file does not compile: clang's first error.
    CompileError {
        message: String,
        line: Option<u32>,
        column: Option<u32>,
    },
}

/// The result of one analysis job, kept for hovers, code actions and statistics.
pub struct Analysis {
    pub version: i32,
    pub generation: u64,
    /// The text that was analysed (positions in the report refer to it).
    pub text: Arc<str>,
    pub path: PathBuf,
    /// The settings it ran with (reused to verify fixes).
    pub config: Arc<ServerConfig>,
    pub cancel: CancelToken,
    pub outcome: Outcome,
    pub elapsed: Duration,
    /// What is shown for it: its own findings, or, while it does not compile, the last ones that did (stale).
    pub shown: Shown,
    /// Verification of the fast-math-off fix, per edited function, started in the background after the analysis.
    pub fixes: Mutex<HashMap<String, watch::Receiver<Option<FixCheck>>>>,
}

impl Analysis {
    /// The analysis of `job`'s text that ended in `outcome`, showing `shown`, `elapsed` after the job started.
    pub fn of(job: &Job, outcome: Outcome, shown: Shown, elapsed: std::time::Duration) -> Analysis {
        Analysis {
            version: job.version,
            generation: job.generation,
            text: job.text.clone(),
            path: job.path.clone(),
            config: job.config.clone(),
            cancel: job.cancel.clone(),
            outcome,
            elapsed,
            shown,
            fixes: Mutex::new(Default::default()),
        }
    }
}

/// The findings published for an analysis, with the text and report their positions and inputs refer to.
#[derive(Clone)]
pub struct Shown {
    pub findings: Arc<Vec<Finding>>,
    /// The text the findings' lines refer to.
    pub text: Arc<str>,
    /// The report behind the findings (none for a compile error shown alone).
    pub report: Option<Arc<FileReport>>,
    /// The findings are of an earlier version: this one does not compile.
    pub stale: bool,
}

impl Analysis {
    pub fn report(&self) -> Option<&FileReport> {
        match &self.outcome {
            Outcome::Report(r) => Some(&**r),
            Outcome::CompileError { .. } => None,
        }
    }

    /// The fast-math-off fix that edits `function`, with the analysed functions to re-analyse (`fix::targets`).
    pub fn fix_target(&self, function: &str) -> Option<FixTarget> {
        fix::targets(self.report()?)
            .into_iter()
            .find(|t| t.function == function)
    }
}

/// The verdict on the quick fix of one function (the body the pragmas go in): the narrowest pragma that removes
/// what the edit aims at, else fast-math off ([`fix::scopes`]).
#[derive(Debug, Clone, PartialEq)]
pub enum FixCheck {
    /// Re-analysing the edited function found no divergence the edit targets; at `build_only` places some are
    /// left that only a build change removes (flush-to-zero at link).
    /// `added` information and hints show on the edited text that did not before (what another operation does
    /// once this one is exact).
    Verified {
        fix: Fix,
        build_only: usize,
        added: usize,
    },
    /// `remaining` divergences the edit aims at are still there on the edited text.
    Remains { fix: Fix, remaining: usize },
    /// The edited text shows `added` warnings the original did not, in the bodies of `moved_to`: the fix is not
    /// offered.
    Worse {
        fix: Fix,
        added: usize,
        moved_to: Vec<String>,
    },
    /// The edit could not be checked (the edited file failed to analyse, or a function to re-analyse was skipped).
    Unchecked { fix: Fix, why: String },
    /// The check is still running in the background.
    Pending(Fix),
    /// No edit to offer: the body's brace was not found, the pragmas are already there, or the document changed.
    Unavailable,
}

/// One quick fix: what it turns off and the edit that does it.
#[derive(Debug, Clone, PartialEq)]
pub struct Fix {
    pub scope: fix::FixScope,
    /// The pragmas' insertion, in the target's body first, then in the bodies of `also`.
    pub edits: Vec<SourceEdit>,
    /// Other functions the fix turns fast-math off in: where turning it off in the target alone moves the
    /// difference (a caller that computes on the helper's now exact result).
    pub also: Vec<String>,
    /// Whether the pragmas go at the top of the file ([`fix::file_pragma_edit`]): fast-math off in every function
    /// of the file and in what its headers define (inlined helpers a function's pragmas do not reach). The last
    /// resort, offered when no function's pragmas remove the difference without adding a warning.
    pub whole_file: bool,
}

impl Fix {
    /// A fix with one edit, in the target's body.
    pub fn one(scope: fix::FixScope, edit: SourceEdit) -> Fix {
        Fix {
            scope,
            edits: vec![edit],
            also: vec![],
            whole_file: false,
        }
    }
}

/// Per-function results shared by every document and job, with hit and miss counters.
#[derive(Default)]
pub struct SharedCache {
    map: DashMap<String, FunctionReport>,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

impl SharedCache {
    /// Most entries kept; the cache is emptied when it grows past this (edits leave old keys behind).
    const CAPACITY: usize = 20_000;

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl FunctionCache for SharedCache {
    fn get(&self, key: &str) -> Option<FunctionReport> {
        match self.map.get(key) {
            Some(r) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                let mut r = r.clone();
                r.cached = true;
                Some(r)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn put(&self, key: String, report: FunctionReport) {
        if self.map.len() >= Self::CAPACITY {
            self.map.clear();
        }
        self.map.insert(key, report);
    }
}

/// Everything the handlers and the scheduler share.
pub struct State {
    pub docs: DashMap<Url, Document>,
    pub cache: Arc<SharedCache>,
    config: RwLock<Arc<ServerConfig>>,
    pub caps: OnceLock<ClientCaps>,
    /// Set by `initialized`: no analysis runs before.
    pub initialized: AtomicBool,
    /// Set by `shutdown`: no analysis starts after.
    pub shutting_down: AtomicBool,
    /// Analyses completed (stored or dropped as stale), for statistics.
    pub analyses: AtomicU64,
}

impl Default for State {
    fn default() -> Self {
        State {
            docs: DashMap::new(),
            cache: Arc::new(SharedCache::default()),
            config: RwLock::new(Arc::new(ServerConfig::default())),
            caps: OnceLock::new(),
            initialized: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
            analyses: AtomicU64::new(0),
        }
    }
}

impl State {
    pub fn config(&self) -> Arc<ServerConfig> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_config(&self, config: ServerConfig) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
    }

    pub fn caps(&self) -> ClientCaps {
        self.caps.get().copied().unwrap_or_default()
    }

    /// Whether analyses may run now.
    pub fn accepting_jobs(&self) -> bool {
        self.initialized.load(Ordering::SeqCst) && !self.shutting_down.load(Ordering::SeqCst)
    }

    pub fn open(&self, uri: Url, path: PathBuf, version: i32, text: String) {
        if let Some(old) = self.docs.get(&uri) {
            old.cancel.cancel();
        }
        let doc = Document {
            path,
            version,
            text: text.into(),
            generation: 0,
            cancel: CancelToken::default(),
            analysis: None,
        };
        self.docs.insert(uri, doc);
    }

    /// Replaces the text; returns false (and changes nothing) for an unknown document or an older version.
    pub fn change(&self, uri: &Url, version: i32, text: String) -> bool {
        let Some(mut doc) = self.docs.get_mut(uri) else {
            return false;
        };
        if version < doc.version {
            return false;
        }
        doc.version = version;
        doc.text = text.into();
        doc.cancel.cancel();
        true
    }

    pub fn close(&self, uri: &Url) {
        if let Some((_, doc)) = self.docs.remove(uri) {
            doc.cancel.cancel();
        }
    }

    /// Starts a new generation of the document: cancels the running job and snapshots the text for a new one.
    pub fn begin_job(&self, uri: &Url) -> Option<Job> {
        let config = self.config();
        let mut doc = self.docs.get_mut(uri)?;
        doc.cancel.cancel();
        doc.cancel = CancelToken::default();
        doc.generation += 1;
        Some(Job {
            uri: uri.clone(),
            path: doc.path.clone(),
            version: doc.version,
            generation: doc.generation,
            text: doc.text.clone(),
            cancel: doc.cancel.clone(),
            config,
        })
    }

    /// Whether the job is for the document's current generation.
    pub fn is_current(&self, job: &Job) -> bool {
        self.docs
            .get(&job.uri)
            .is_some_and(|d| d.generation == job.generation)
    }

    /// Stores the analysis if its job is still current; returns whether it was stored.
    pub fn finish(&self, uri: &Url, analysis: Arc<Analysis>) -> bool {
        self.analyses.fetch_add(1, Ordering::Relaxed);
        let Some(mut doc) = self.docs.get_mut(uri) else {
            return false;
        };
        if doc.generation != analysis.generation {
            return false;
        }
        doc.analysis = Some(analysis);
        true
    }

    /// What the document's latest analysis shows, if it holds findings from a report (kept, marked stale, while
    /// the document does not compile).
    pub fn last_findings(&self, uri: &Url) -> Option<Shown> {
        let doc = self.docs.get(uri)?;
        let shown = &doc.analysis.as_ref()?.shown;
        shown.report.is_some().then(|| shown.clone())
    }

    /// The latest analysis of the document, only if it is of the document's current text.
    pub fn current_analysis(&self, uri: &Url) -> Option<Arc<Analysis>> {
        let doc = self.docs.get(uri)?;
        let a = doc.analysis.as_ref()?;
        (a.version == doc.version && *a.text == *doc.text).then(|| a.clone())
    }

    /// Open documents' addresses.
    pub fn uris(&self) -> Vec<Url> {
        self.docs.iter().map(|e| e.key().clone()).collect()
    }

    pub fn cancel_all(&self) {
        for doc in self.docs.iter() {
            doc.cancel.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri() -> Url {
        Url::parse("file:///tmp/a.c").unwrap()
    }

    #[test]
    fn older_versions_are_ignored_and_jobs_go_stale() {
        let s = State::default();
        s.open(uri(), "/tmp/a.c".into(), 1, "a".into());
        let j1 = s.begin_job(&uri()).unwrap();
        assert!(s.change(&uri(), 3, "c".into()));
        assert!(j1.cancel.is_cancelled());
        assert!(!s.change(&uri(), 2, "b".into()));
        let j2 = s.begin_job(&uri()).unwrap();
        assert_eq!(&*j2.text, "c");
        assert!(!s.is_current(&j1));
        assert!(s.is_current(&j2));
        assert!(!s.change(&Url::parse("file:///tmp/b.c").unwrap(), 1, String::new()));
    }

    #[test]
    fn cache_counts_hits_and_marks_them() {
        let c = SharedCache::default();
        assert!(c.get("k").is_none());
        c.put("k".into(), FunctionReport::skipped("f", "x"));
        let r = c.get("k").unwrap();
        assert!(r.cached);
        assert_eq!(c.hits.load(Ordering::Relaxed), 1);
        assert_eq!(c.misses.load(Ordering::Relaxed), 1);
    }
}
