//! The `LanguageServer` implementation: thin handlers that convert parameters, update the state or look up the
//! latest analysis, and convert the answer. Work that can take long (analyses, fix verification) goes to the
//! scheduler; request handlers that convert results run in a task so a bug there answers an error, not a crash.

use crate::config::ServerConfig;
use crate::engine::Engine;
use crate::scheduler::Scheduler;
use crate::state::{ClientCaps, State};
use crate::{from_proto, to_proto};
use serde_json::Value;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::*;
use tower_lsp::{Client, LanguageServer};

/// How long a code action waits for a fix verification that is still running before it answers "verifying".
const CODE_ACTION_PATIENCE: Duration = Duration::from_millis(100);

/// The command that re-analyses a document now (argument: its URI; none re-analyses every open document).
pub const ANALYSE_COMMAND: &str = "foe.analyse";

pub struct Backend {
    client: Client,
    state: Arc<State>,
    scheduler: Scheduler,
    /// Warnings about `initializationOptions`, shown once the client is initialised.
    init_warnings: std::sync::Mutex<Vec<String>>,
}

impl Backend {
    pub fn new(client: Client, engine: Arc<dyn Engine>) -> Backend {
        let state = Arc::new(State::default());
        let scheduler = Scheduler::new(state.clone(), engine, client.clone());
        Backend {
            client,
            state,
            scheduler,
            init_warnings: Default::default(),
        }
    }

    /// The shared state (read after the session ends to know whether `shutdown` came before `exit`).
    pub fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// `foe/stats`: cache counters and what each open document's latest analysis found.
    pub async fn stats(&self) -> Result<Value> {
        Ok(to_proto::stats(&self.state))
    }

    /// `foe/trace`: the inputs and both traces of every input at the flagged sites of a line, as markdown.
    pub async fn trace(&self, params: TextDocumentPositionParams) -> Result<Option<Value>> {
        let state = self.state.clone();
        guarded(async move {
            let analysis = state.current_analysis(&params.text_document.uri)?;
            let markdown = to_proto::trace_markdown(&analysis, params.position)?;
            Some(serde_json::json!({ "markdown": markdown }))
        })
        .await
    }

    async fn apply_settings(&self, value: &Value) {
        let mut config = (*self.state.config()).clone();
        let warnings = config.update(value);
        self.state.set_config(config);
        self.warn_settings(warnings).await;
    }

    /// Settings that were ignored: shown to the user once per change, and logged.
    async fn warn_settings(&self, warnings: Vec<String>) {
        if warnings.is_empty() {
            return;
        }
        let text = format!("foe: ignoring settings: {}", warnings.join("; "));
        self.client.show_message(MessageType::WARNING, &text).await;
        self.client.log_message(MessageType::WARNING, text).await;
    }
}

/// Runs a request's conversion in its own task: a panic there becomes an internal error answer.
async fn guarded<T: Send + 'static>(work: impl Future<Output = T> + Send + 'static) -> Result<T> {
    tokio::spawn(work).await.map_err(|e| {
        tracing::error!("request handler failed: {e}");
        Error::internal_error()
    })
}

#[tower_lsp::async_trait]
impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let caps = &params.capabilities;
        let _ = self.state.caps.set(ClientCaps {
            work_done_progress: caps
                .window
                .as_ref()
                .and_then(|w| w.work_done_progress)
                .unwrap_or(false),
            configuration: caps
                .workspace
                .as_ref()
                .and_then(|w| w.configuration)
                .unwrap_or(false),
            document_changes: caps
                .workspace
                .as_ref()
                .and_then(|w| w.workspace_edit.as_ref())
                .and_then(|e| e.document_changes)
                .unwrap_or(false),
            disabled_code_actions: caps
                .text_document
                .as_ref()
                .and_then(|t| t.code_action.as_ref())
                .and_then(|c| c.disabled_support)
                .unwrap_or(false),
        });
        if let Some(options) = &params.initialization_options {
            let (config, warnings) = ServerConfig::from_json(options);
            for w in &warnings {
                tracing::warn!("ignoring setting {w}");
            }
            *self.init_warnings.lock().unwrap_or_else(|e| e.into_inner()) = warnings;
            self.state.set_config(config);
        }
        Ok(InitializeResult {
            server_info: Some(ServerInfo {
                name: "foe".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            capabilities: ServerCapabilities {
                text_document_sync: Some(TextDocumentSyncCapability::Options(
                    TextDocumentSyncOptions {
                        open_close: Some(true),
                        change: Some(TextDocumentSyncKind::FULL),
                        save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                            include_text: Some(false),
                        })),
                        ..Default::default()
                    },
                )),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                code_action_provider: Some(CodeActionProviderCapability::Options(
                    CodeActionOptions {
                        code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                        ..Default::default()
                    },
                )),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: vec![ANALYSE_COMMAND.into()],
                    ..Default::default()
                }),
                ..Default::default()
            },
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        let warnings =
            std::mem::take(&mut *self.init_warnings.lock().unwrap_or_else(|e| e.into_inner()));
        self.warn_settings(warnings).await;
        self.state.initialized.store(true, Ordering::SeqCst);
        self.scheduler.schedule_all();
    }

    async fn shutdown(&self) -> Result<()> {
        self.state.shutting_down.store(true, Ordering::SeqCst);
        self.scheduler.cancel_all();
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let doc = params.text_document;
        let Some(path) = from_proto::path(&doc.uri) else {
            return;
        };
        self.state
            .open(doc.uri.clone(), path, doc.version, doc.text);
        self.scheduler.schedule(&doc.uri, Duration::ZERO);
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        // Full synchronisation: the last change holds the whole text.
        let Some(change) = params.content_changes.into_iter().last() else {
            return;
        };
        if self
            .state
            .change(&uri, params.text_document.version, change.text)
        {
            self.scheduler.schedule(&uri, self.state.config().debounce);
        }
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        let uri = params.text_document.uri;
        if self.state.current_analysis(&uri).is_none() {
            self.scheduler.schedule(&uri, Duration::ZERO);
        }
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        self.state.close(&params.text_document.uri);
        self.client
            .publish_diagnostics(params.text_document.uri, vec![], None)
            .await;
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        if ServerConfig::is_settings_value(&params.settings) {
            self.apply_settings(&params.settings).await;
        } else if self.state.caps().configuration {
            let item = ConfigurationItem {
                scope_uri: None,
                section: Some("foe".into()),
            };
            match self.client.configuration(vec![item]).await {
                Ok(values) => {
                    if let Some(v) = values.first() {
                        self.apply_settings(v).await;
                    }
                }
                Err(e) => {
                    self.client
                        .log_message(
                            MessageType::WARNING,
                            format!("foe: cannot read settings: {e}"),
                        )
                        .await
                }
            }
        }
        self.scheduler.schedule_all();
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let state = self.state.clone();
        guarded(async move {
            let p = params.text_document_position_params;
            let analysis = state.current_analysis(&p.text_document.uri)?;
            to_proto::hover(&analysis, p.position)
        })
        .await
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        if let Some(only) = &params.context.only {
            if !only
                .iter()
                .any(|k| k.as_str().starts_with(CodeActionKind::QUICKFIX.as_str()))
            {
                return Ok(None);
            }
        }
        let uri = params.text_document.uri.clone();
        let Some(analysis) = self.state.current_analysis(&uri) else {
            return Ok(None);
        };
        let caps = self.state.caps();
        let scheduler = self.scheduler.clone();
        guarded(async move {
            let mut actions = vec![];
            for (function, diagnostics) in from_proto::code_action_functions(&analysis, &params) {
                let check = scheduler
                    .fix_check_within(&analysis, &function, CODE_ACTION_PATIENCE)
                    .await;
                actions.extend(to_proto::code_action(
                    &uri,
                    &analysis,
                    &function,
                    &check,
                    diagnostics,
                    caps,
                ));
            }
            Some(to_proto::distinct_actions(actions))
        })
        .await
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        if params.command != ANALYSE_COMMAND {
            return Err(Error::invalid_params(format!(
                "unknown command {}",
                params.command
            )));
        }
        match params
            .arguments
            .first()
            .and_then(|a| a.as_str())
            .map(Url::parse)
        {
            Some(Ok(uri)) => self.scheduler.schedule(&uri, Duration::ZERO),
            Some(Err(e)) => return Err(Error::invalid_params(format!("not a URI: {e}"))),
            None => self.scheduler.schedule_all(),
        }
        Ok(None)
    }
}
