//! foe-lsp: the language server over the foe engine (the only crate that knows LSP).
//!
//! Code map: [`server`] (the `LanguageServer` handlers), [`state`] (documents, versions, analyses, the
//! per-function cache), [`scheduler`] (debounce, jobs off the protocol loop, cancellation, fix verification),
//! [`to_proto`] / [`from_proto`] (every conversion between engine values and LSP types), [`config`] (the `foe`
//! settings section ↔ `AnalysisConfig`), [`engine`] (the seam to the engine), [`client`] and [`bench`] (a
//! minimal stdio client and the latency benchmark built on it).

pub mod bench;
pub mod client;
pub mod config;
pub mod engine;
pub mod from_proto;
pub mod scheduler;
pub mod server;
pub mod state;
pub mod to_proto;
pub mod transport;

pub use bench::{latency_benchmark, LatencyOptions, LatencyReport};

use engine::{Engine, FoeEngine};
use server::Backend;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tower_lsp::{LspService, Server};

/// Serves the Language Server Protocol on stdin/stdout until the client exits, its input ends, or foe gets
/// SIGTERM, SIGINT or SIGHUP; malformed messages are answered and the session goes on ([`transport`]).
///
/// Logs go to stderr (`FOE_LOG` sets the filter, default `warn`). Returns an error when the session ended
/// without a `shutdown` request (the client died or sent `exit` early), so the process exits with 1 as the
/// protocol asks. Analyses still running are cancelled and given a moment to remove their temporary
/// directories; child processes die with foe in any case (parent-death signal).
pub fn run_stdio() -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FOE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let clean = runtime.block_on(async {
        let (input, output, transport) = transport::harden(tokio::io::stdin(), tokio::io::stdout());
        let stop = async {
            let signal = termination().await;
            tracing::warn!("ending the session on {signal}");
        };
        let clean = serve_until(Arc::new(FoeEngine), input, output, stop).await;
        // Let the last answers (the `shutdown` reply) reach the client.
        let _ = tokio::time::timeout(Duration::from_millis(200), transport).await;
        clean
    });
    // Engine runs still in flight were cancelled when the session ended: they stop at their next check and
    // remove their temporary directories. Wait for them (not for the thread blocked reading stdin).
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while scheduler::jobs_running() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    runtime.shutdown_timeout(Duration::from_millis(50));
    if clean {
        Ok(())
    } else {
        anyhow::bail!("the client ended the session without a shutdown request")
    }
}

/// Serves one session over any byte streams; returns whether it ended after a `shutdown` request.
pub async fn serve<I, O>(engine: Arc<dyn Engine>, input: I, output: O) -> bool
where
    I: AsyncRead + Unpin,
    O: AsyncWrite,
{
    serve_until(engine, input, output, std::future::pending()).await
}

/// [`serve`], also ending the session (as the end of input does) when `stop` resolves.
pub async fn serve_until<I, O>(
    engine: Arc<dyn Engine>,
    input: I,
    output: O,
    stop: impl std::future::Future<Output = ()>,
) -> bool
where
    I: AsyncRead + Unpin,
    O: AsyncWrite,
{
    let state = Arc::new(OnceLock::new());
    let slot = state.clone();
    let (service, socket) = LspService::build(move |client| {
        let backend = Backend::new(client, engine);
        let _ = slot.set(backend.state().clone());
        backend
    })
    .custom_method("foe/stats", Backend::stats)
    .custom_method("foe/trace", Backend::trace)
    .finish();
    // tower-lsp notices `exit` only when the next message arrives; stop as soon as it is handled.
    let exited = Arc::new(tokio::sync::Notify::new());
    let service = ExitWatch {
        inner: service,
        exited: exited.clone(),
    };
    // Requests wait on fix verification; keep room so notifications are never stuck behind them.
    let server = Server::new(input, output, socket)
        .concurrency_level(64)
        .serve(service);
    tokio::select! {
        _ = server => {}
        _ = exited.notified() => {}
        _ = stop => {}
    }
    let state = state.get();
    if let Some(s) = state {
        // `exit` without `shutdown`, or the end of input: stop every analysis now.
        s.cancel_all();
    }
    state.is_some_and(|s: &Arc<state::State>| s.shutting_down.load(Ordering::SeqCst))
}

/// Resolves with the signal's name when foe is asked to terminate.
async fn termination() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    }
}

/// Passes requests through to the service and signals when `exit` has been handled.
struct ExitWatch<S> {
    inner: S,
    exited: Arc<tokio::sync::Notify>,
}

impl<S> tower_service::Service<tower_lsp::jsonrpc::Request> for ExitWatch<S>
where
    S: tower_service::Service<tower_lsp::jsonrpc::Request>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: tower_lsp::jsonrpc::Request) -> Self::Future {
        let exit = request.method() == "exit";
        let future = self.inner.call(request);
        if exit {
            self.exited.notify_one();
        }
        future
    }
}
