//! The server's scheduling and robustness, in process: the real `serve` over a socket pair with a scripted
//! engine behind the `Engine` seam, so timing (cancellation, debounce), panics and settings are controlled.
//! The real engine is exercised end to end by tests/tests/lsp_e2e.rs.

use foe_analysis::config::AnalysisConfig;
use foe_analysis::pipeline::{
    AnalysisError, AnalysisRequest, CancelToken, FunctionCache, Progress,
};
use foe_analysis::report::{
    Divergence, FileReport, FunctionReport, FunctionSpan, FunctionStatus, RunEnd, Scalar,
    TraceEvent,
};
use foe_analysis::types::{ExceptionKind, SourceLoc};
use foe_lsp::client::LspClient;
use foe_lsp::engine::Engine;
use serde_json::{json, Value};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

/// Flags line 1 of every text as an overflow in P'; sleeps `work` (watching the token) first; panics on texts
/// containing `PANIC`; records what it was asked.
#[derive(Default)]
struct Scripted {
    work: Duration,
    started: AtomicUsize,
    cancelled: AtomicUsize,
    /// Whole-file analyses: (text, settings).
    seen: Mutex<Vec<(String, AnalysisConfig)>>,
    /// Analyses with the quick fix applied (the server verifies fixes in the background after each published
    /// analysis): the fixed function's name.
    verifications: Mutex<Vec<String>>,
    /// Answer first looks (`AnalysisConfig::quick`) at once; otherwise they are refused as cancelled, so that
    /// the other tests see the analyses alone.
    first_looks: bool,
}

impl Engine for Scripted {
    fn analyse(
        &self,
        request: &AnalysisRequest<'_>,
        _: &dyn FunctionCache,
        _: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<FileReport, AnalysisError> {
        if request.config.quick && !self.first_looks {
            return Err(AnalysisError::Cancelled);
        }
        let quick = request.config.quick;
        if !quick {
            self.started.fetch_add(1, Ordering::SeqCst);
        }
        match request.only_functions {
            _ if quick => {}
            // The server's check of a quick fix: the whole edited text, with the fix's pragma in `f`.
            None if request.text.contains("#pragma") => {
                self.verifications.lock().unwrap().push("f".into())
            }
            Some(only) => self
                .verifications
                .lock()
                .unwrap()
                .extend(only.iter().cloned()),
            None => self
                .seen
                .lock()
                .unwrap()
                .push((request.text.to_string(), request.config.clone())),
        }
        if request.text.contains("PANIC") {
            panic!("scripted engine panics on request");
        }
        if request.text.contains("BROKEN") {
            return Err(AnalysisError::Compile {
                message: "t.c:1:1: error: expected ';'".into(),
                line: Some(1),
                column: Some(1),
                stderr: String::new(),
            });
        }
        let until = Instant::now() + if quick { Duration::ZERO } else { self.work };
        while Instant::now() < until {
            if cancel.is_cancelled() {
                self.cancelled.fetch_add(1, Ordering::SeqCst);
                return Err(AnalysisError::Cancelled);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let event = TraceEvent {
            kind: ExceptionKind::Overflow,
            line: Some(1),
            column: Some(1),
            operation: "fmul".into(),
        };
        let mut f = FunctionReport::skipped("f", "");
        f.status = FunctionStatus::Analysed;
        f.span = Some(FunctionSpan {
            line: 1,
            body_line: 1,
            end_line: 1,
        });
        f.divergences.push(Divergence {
            trace_p_prime: vec![event],
            end_p: RunEnd::returned(Some(Scalar::F64(1.0))),
            end_p_prime: RunEnd::returned(Some(Scalar::F64(f64::INFINITY))),
            location: Some(SourceLoc { line: 1, column: 1 }),
            ..Divergence::default()
        });
        Ok(FileReport {
            file: request.path.display().to_string(),
            functions: vec![f],
            timings_ms: Default::default(),
            flags_p: request.config.flags_p.clone(),
            flags_p_prime: request.config.flags_p_prime.clone(),
            ftz_p_prime: false,
            linked_units: vec![],
            dropped_flags: vec![],
            first_look: quick,
        })
    }
}

/// The code actions offered for `diagnostic` of the test document.
fn code_actions(client: &mut LspClient, diagnostic: &Value) -> Value {
    client
        .request(
            "textDocument/codeAction",
            Some(
                json!({ "textDocument": { "uri": URI }, "range": diagnostic["range"],
                         "context": { "diagnostics": [diagnostic] } }),
            ),
            WAIT,
        )
        .unwrap()
}

/// Serves one session in a thread; the handle yields whether it ended after `shutdown`.
fn start(engine: Arc<dyn Engine>) -> (LspClient, JoinHandle<bool>) {
    let (client_end, server_end) = UnixStream::pair().unwrap();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            server_end.set_nonblocking(true).unwrap();
            let (r, w) = tokio::net::UnixStream::from_std(server_end)
                .unwrap()
                .into_split();
            foe_lsp::serve(engine, r, w).await
        })
    });
    let reader = client_end.try_clone().unwrap();
    (LspClient::connect(reader, client_end), server)
}

const URI: &str = "file:///tmp/foe-scheduling-test.c";

fn init(client: &mut LspClient, options: Value) {
    client.initialize("file:///tmp", options, WAIT).unwrap();
}

fn published_versions(client: &LspClient) -> Vec<i64> {
    client
        .history
        .iter()
        .filter(|r| r.method() == Some("textDocument/publishDiagnostics"))
        .filter_map(|r| r.params()["version"].as_i64())
        .collect()
}

fn finish(client: LspClient, server: JoinHandle<bool>) {
    client.shutdown(WAIT).unwrap();
    assert!(server.join().unwrap(), "the session ended after shutdown");
}

#[test]
fn nothing_is_analysed_before_initialized() {
    let engine = Arc::new(Scripted::default());
    let (mut client, server) = start(engine.clone());
    client
        .request("initialize", Some(json!({ "capabilities": {} })), WAIT)
        .unwrap();
    client
        .did_open(URI, 1, "double f(double x) { return x * 2; }\n")
        .unwrap();
    client.drain(Duration::from_millis(500));
    assert_eq!(
        engine.started.load(Ordering::SeqCst),
        0,
        "analysed before initialized"
    );
    client.notify("initialized", json!({})).unwrap();
    let got = client
        .wait_diagnostics(URI, Some(1), WAIT)
        .expect("diagnostics after initialized");
    assert_eq!(
        got.params()["diagnostics"][0]["code"],
        "fast-math-overflow-appears"
    );
    finish(client, server);
}

#[test]
fn a_newer_edit_cancels_the_running_analysis() {
    let engine = Arc::new(Scripted {
        work: Duration::from_secs(5),
        ..Default::default()
    });
    let (mut client, server) = start(engine.clone());
    init(&mut client, json!({ "debounceMs": 0 }));
    client
        .did_open(URI, 1, "double f(double x) { return x * 2; }\n")
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while engine.started.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let sent = Instant::now();
    client
        .did_change(URI, 2, "double f(double x) { return x * 3; }\n")
        .unwrap();
    client
        .wait_diagnostics(URI, Some(2), WAIT)
        .expect("diagnostics of version 2");
    assert!(
        sent.elapsed() < Duration::from_secs(9),
        "version 1 was not cancelled"
    );
    assert_eq!(engine.cancelled.load(Ordering::SeqCst), 1);
    assert_eq!(
        published_versions(&client),
        vec![2],
        "the cancelled version published nothing"
    );
    finish(client, server);
}

#[test]
fn a_flood_of_edits_is_analysed_once_after_the_debounce() {
    let engine = Arc::new(Scripted::default());
    let (mut client, server) = start(engine.clone());
    init(&mut client, json!({ "debounceMs": 200 }));
    client
        .did_open(URI, 1, "double f(double x) { return x * 1; }\n")
        .unwrap();
    client.wait_diagnostics(URI, Some(1), WAIT).unwrap();
    for v in 2..=50 {
        client
            .did_change(
                URI,
                v,
                &format!("double f(double x) {{ return x * {v}; }}\n"),
            )
            .unwrap();
    }
    // An out-of-order (older) change is ignored.
    client
        .did_change(URI, 49, "double f(double x) { return STALE; }\n")
        .unwrap();
    client
        .wait_diagnostics(URI, Some(50), WAIT)
        .expect("diagnostics of the last version");
    client.drain(Duration::from_millis(500));
    assert_eq!(published_versions(&client), vec![1, 50]);
    let seen = engine.seen.lock().unwrap();
    assert_eq!(
        seen.len(),
        2,
        "one analysis for the open, one for the flood"
    );
    assert!(seen[1].0.contains("x * 50"));
    drop(seen);
    // Besides them, only the background verification of `f`'s quick fix: at most one check per published
    // analysis (the first may be cancelled by the flood before it starts), each trying `f`'s pragmas and then,
    // as a difference remains in the scripted engine, the file's.
    let verifications = engine.verifications.lock().unwrap().clone();
    assert!(
        !verifications.is_empty() && verifications.len() <= 4,
        "{verifications:?}"
    );
    assert!(verifications.iter().all(|f| f == "f"), "{verifications:?}");
    finish(client, server);
}

#[test]
fn a_panicking_engine_is_logged_and_the_server_keeps_serving() {
    let engine = Arc::new(Scripted::default());
    let (mut client, server) = start(engine.clone());
    init(&mut client, json!({ "debounceMs": 0 }));
    client.did_open(URI, 1, "PANIC\n").unwrap();
    let log = client
        .wait_for("window/logMessage", WAIT, |p| {
            p["type"] == 1 && p["message"].as_str().unwrap_or("").contains("crashed")
        })
        .expect("an error log for the crashed analysis");
    assert!(log.params()["message"]
        .as_str()
        .unwrap()
        .contains("scripted engine panics"));
    client
        .did_change(URI, 2, "double f(double x) { return x * 2; }\n")
        .unwrap();
    client
        .wait_diagnostics(URI, Some(2), WAIT)
        .expect("analysis after the panic");
    let hover = client
        .request("textDocument/hover", Some(json!({ "textDocument": { "uri": URI }, "position": { "line": 0, "character": 0 } })), WAIT)
        .unwrap();
    assert!(hover["contents"]["value"]
        .as_str()
        .unwrap()
        .contains("Fast-math build (`"));
    finish(client, server);
}

#[test]
fn settings_come_from_initialization_options_and_configuration_changes() {
    let engine = Arc::new(Scripted::default());
    let (mut client, server) = start(engine.clone());
    init(
        &mut client,
        json!({ "flagsPPrime": "-O3 -ffast-math", "debounceMs": 0, "pFlags": "-O1" }),
    );
    // A key the server does not read is shown to the user, not silently dropped.
    let shown = client
        .wait_for("window/showMessage", WAIT, |p| {
            p["message"]
                .as_str()
                .unwrap_or("")
                .contains("foe.pFlags: unknown setting")
        })
        .expect("the unknown key is reported");
    assert_eq!(shown.params()["type"], 2, "a warning");
    client
        .did_open(URI, 1, "double f(double x) { return x * 2; }\n")
        .unwrap();
    client.wait_diagnostics(URI, Some(1), WAIT).unwrap();
    assert_eq!(
        engine.seen.lock().unwrap()[0].1.flags_p_prime,
        vec!["-O3", "-ffast-math"]
    );

    // Pushed settings re-analyse the open documents.
    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({ "settings": { "foe": { "radius": 7 } } }),
        )
        .unwrap();
    client.wait_diagnostics(URI, Some(1), WAIT).unwrap();
    assert_eq!(engine.seen.lock().unwrap()[1].1.radius, 7);

    // An empty notification makes the server pull the `foe` section.
    client.set_settings(json!({ "radius": 9, "enable": true }));
    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({ "settings": null }),
        )
        .unwrap();
    client.wait_diagnostics(URI, Some(1), WAIT).unwrap();
    assert_eq!(engine.seen.lock().unwrap()[2].1.radius, 9);
    assert!(client
        .history
        .iter()
        .any(|r| r.method() == Some("workspace/configuration")));

    // Disabling clears the diagnostics and stops analysing.
    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({ "settings": { "foe": { "enable": false } } }),
        )
        .unwrap();
    let cleared = client.wait_diagnostics(URI, Some(1), WAIT).unwrap();
    assert_eq!(cleared.params()["diagnostics"], json!([]));
    assert_eq!(engine.seen.lock().unwrap().len(), 3);
    finish(client, server);
}

#[test]
fn a_compile_error_keeps_the_last_findings_marked_stale() {
    let engine = Arc::new(Scripted::default());
    let (mut client, server) = start(engine);
    init(&mut client, json!({ "debounceMs": 0 }));
    client
        .did_open(URI, 1, "double f(double x) { return x * 2; }\n")
        .unwrap();
    let first = client.wait_diagnostics(URI, Some(1), WAIT).unwrap();
    let first = first.params()["diagnostics"].as_array().unwrap().clone();
    assert_eq!(first.len(), 1, "{first:#?}");
    client
        .did_change(URI, 2, "double f(double x) { return x * BROKEN }\n")
        .unwrap();
    let kept = client.wait_diagnostics(URI, Some(2), WAIT).unwrap();
    let kept = kept.params()["diagnostics"].as_array().unwrap().clone();
    assert_eq!(
        kept.len(),
        1,
        "the finding is kept, no compile error added: {kept:#?}"
    );
    assert_eq!(kept[0]["code"], first[0]["code"]);
    assert!(
        kept[0]["message"]
            .as_str()
            .unwrap()
            .ends_with("(stale: the file does not compile)"),
        "{kept:#?}"
    );
    let status = client
        .wait_for("foe/status", WAIT, |p| p["state"] == "stale")
        .expect("a stale status");
    assert!(status.params()["message"]
        .as_str()
        .unwrap()
        .contains("does not compile"));
    // It compiles again: fresh findings, not stale.
    client
        .did_change(URI, 3, "double f(double x) { return x * 3; }\n")
        .unwrap();
    let fresh = client.wait_diagnostics(URI, Some(3), WAIT).unwrap();
    assert!(!fresh.params()["diagnostics"][0]["message"]
        .as_str()
        .unwrap()
        .contains("stale"));
    finish(client, server);
}

#[test]
fn code_actions_answer_at_once_while_the_fix_is_verified_in_the_background() {
    let engine = Arc::new(Scripted {
        work: Duration::from_millis(1500),
        ..Default::default()
    });
    let (mut client, server) = start(engine.clone());
    init(&mut client, json!({ "debounceMs": 0 }));
    let text = "double f(double x) {\n  return x * 2;\n}\n";
    client.did_open(URI, 1, text).unwrap();
    let published = client.wait_diagnostics(URI, Some(1), WAIT).unwrap();
    let diagnostic = published.params()["diagnostics"][0].clone();
    let ask = |client: &mut LspClient| {
        let sent = Instant::now();
        let actions = code_actions(client, &diagnostic);
        (sent.elapsed(), actions)
    };
    let (first_latency, actions) = ask(&mut client);
    assert!(
        first_latency < Duration::from_millis(500),
        "the first code action waited {first_latency:?} for the verification"
    );
    assert!(
        actions[0]["title"].as_str().unwrap().contains("verifying"),
        "{actions:#}"
    );
    // The verification started after the analysis, without waiting for a code action.
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, actions) = ask(&mut client);
        let title = actions[0]["title"].as_str().unwrap().to_string();
        if !title.contains("verifying") {
            // The scripted engine still finds the divergence in the edited text.
            assert!(title.contains("(1 finding would remain)"), "{title}");
            break;
        }
        assert!(Instant::now() < deadline, "the verification never ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    // `f`'s pragmas, then (a difference remains) the file's: one check, two analyses of edited texts.
    assert_eq!(engine.verifications.lock().unwrap().as_slice(), ["f", "f"]);
    finish(client, server);
}

#[test]
fn exit_without_shutdown_is_reported() {
    let engine = Arc::new(Scripted::default());
    let (mut client, server) = start(engine);
    init(&mut client, json!({}));
    client.notify("exit", Value::Null).unwrap();
    assert!(
        !server.join().unwrap(),
        "exit without shutdown is not a clean end"
    );
}

#[test]
fn a_first_look_is_shown_while_a_long_analysis_runs_then_replaced() {
    let engine = Arc::new(Scripted {
        work: Duration::from_millis(1500),
        first_looks: true,
        ..Scripted::default()
    });
    let (mut client, server) = start(engine.clone());
    init(&mut client, json!({ "debounceMs": 0 }));
    client
        .did_open(URI, 1, "double f(double x) { return x * 2; }\n")
        .unwrap();
    let first = client
        .wait_first_diagnostics(URI, Some(1), WAIT)
        .expect("a first look");
    assert!(
        foe_lsp::client::is_first_look(first.params()),
        "{:?}",
        first.params()
    );
    let status = client
        .wait_for("foe/status", WAIT, |p| {
            p["message"]
                .as_str()
                .is_some_and(|m| m.contains("first look"))
        })
        .expect("the status says a first look is shown");
    assert_eq!(status.params()["state"], "analysing");
    let last = client
        .wait_diagnostics(URI, Some(1), WAIT)
        .expect("the analysis");
    assert!(!foe_lsp::client::is_first_look(last.params()));
    assert_eq!(
        engine.seen.lock().unwrap().len(),
        1,
        "one analysis of the file, the first look aside"
    );
    // Once the analysis is shown, no first look comes after it.
    client.drain(Duration::from_millis(300));
    let after: Vec<bool> = client
        .history
        .iter()
        .filter(|r| r.method() == Some("textDocument/publishDiagnostics"))
        .map(|r| foe_lsp::client::is_first_look(r.params()))
        .collect();
    assert_eq!(
        after,
        vec![true, false],
        "the first look, then the analysis"
    );
    finish(client, server);
}

#[test]
fn no_first_look_when_it_is_turned_off() {
    let engine = Arc::new(Scripted {
        work: Duration::from_millis(500),
        first_looks: true,
        ..Scripted::default()
    });
    let (mut client, server) = start(engine.clone());
    init(&mut client, json!({ "debounceMs": 0, "firstLook": false }));
    client
        .did_open(URI, 1, "double f(double x) { return x * 2; }\n")
        .unwrap();
    let got = client
        .wait_first_diagnostics(URI, Some(1), WAIT)
        .expect("the analysis");
    assert!(!foe_lsp::client::is_first_look(got.params()));
    finish(client, server);
}

/// An engine whose helper's difference moves into its caller once the helper alone gets the fix: the caller's
/// analysis flags the helper's line (inlined there) until the helper's body has a pragma, then a line of the
/// caller's own body until the caller's has one too.
struct Moving;

const MOVING: &str = "double helper(double x) {\n  return x * 3.0 / 3.0;\n}\n\ndouble caller(double x) {\n  double y = helper(x);\n  return y * 2.0 - 1.0;\n}\n";

impl Engine for Moving {
    fn analyse(
        &self,
        request: &AnalysisRequest<'_>,
        _: &dyn FunctionCache,
        _: &dyn Progress,
        _: &CancelToken,
    ) -> Result<FileReport, AnalysisError> {
        if request.config.quick {
            return Err(AnalysisError::Cancelled);
        }
        let text = request.text;
        let line_of = |needle: &str| {
            text.lines()
                .position(|l| l.contains(needle))
                .map_or(1, |i| i as u32 + 1)
        };
        let (helper_at, caller_at) = (line_of("double helper"), line_of("double caller"));
        let (helper_body, caller_body) = text.split_at(text.find("double caller").unwrap_or(0));
        let (helper_fixed, caller_fixed) = (
            helper_body.contains("#pragma"),
            caller_body.contains("#pragma"),
        );
        let function = |name: &str, line: u32, end: u32| {
            let mut f = FunctionReport::skipped(name, "");
            f.status = FunctionStatus::Analysed;
            f.executions = 1;
            f.span = Some(FunctionSpan {
                line,
                body_line: line,
                end_line: end,
            });
            f
        };
        let mut helper = function("helper", helper_at, line_of("return x"));
        helper.status = FunctionStatus::ThroughCallers;
        helper.through = vec!["caller".into()];
        let mut caller = function("caller", caller_at, line_of("return y"));
        let flagged = match (helper_fixed, caller_fixed) {
            (false, _) => Some(line_of("return x")),
            (true, false) => Some(line_of("return y")),
            (true, true) => None,
        };
        if let Some(line) = flagged {
            caller.divergences.push(Divergence {
                trace_p_prime: vec![TraceEvent {
                    kind: ExceptionKind::Overflow,
                    line: Some(line),
                    column: Some(3),
                    operation: "fmul".into(),
                }],
                end_p: RunEnd::returned(Some(Scalar::F64(1.0))),
                end_p_prime: RunEnd::returned(Some(Scalar::F64(f64::INFINITY))),
                location: Some(SourceLoc { line, column: 3 }),
                ..Divergence::default()
            });
        }
        Ok(FileReport {
            file: request.path.display().to_string(),
            functions: vec![helper, caller],
            timings_ms: Default::default(),
            flags_p: request.config.flags_p.clone(),
            flags_p_prime: request.config.flags_p_prime.clone(),
            ftz_p_prime: false,
            linked_units: vec![],
            dropped_flags: vec![],
            first_look: false,
        })
    }
}

#[test]
fn a_fix_that_moves_the_difference_into_the_caller_is_widened_to_it() {
    let (mut client, server) = start(Arc::new(Moving));
    init(&mut client, json!({ "debounceMs": 0 }));
    client.did_open(URI, 1, MOVING).unwrap();
    let published = client.wait_diagnostics(URI, Some(1), WAIT).unwrap();
    let diagnostic = published.params()["diagnostics"][0].clone();
    assert_eq!(diagnostic["range"]["start"]["line"], 1, "{diagnostic:#}");
    let deadline = Instant::now() + WAIT;
    let actions = loop {
        let actions = code_actions(&mut client, &diagnostic);
        let verifying = actions[0]["title"]
            .as_str()
            .is_some_and(|t| t.contains("verifying"));
        if !verifying {
            break actions;
        }
        assert!(Instant::now() < deadline, "the verification never ended");
        std::thread::sleep(Duration::from_millis(100));
    };
    let title = actions[0]["title"].as_str().unwrap_or_default();
    assert_eq!(
        title, "Turn off fast-math in `helper` and `caller` (verified)",
        "{actions:#}"
    );
    let edits = actions[0]["edit"]["documentChanges"][0]["edits"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(edits.len(), 2, "a pragma in each body: {actions:#}");
    finish(client, server);
}
