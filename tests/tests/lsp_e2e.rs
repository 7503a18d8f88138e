//! End-to-end LSP sessions: the real `foe lsp` binary driven over stdio by a small JSON-RPC client
//! (`foe_lsp::client::LspClient`: Content-Length framing, serde_json), on C fixtures written to a temp dir.
//!
//! Fixture lines carry their expectation as a trailing `// foe: divergence KIND` comment (the exception kind in
//! the diagnostic's code, or `any`); the diagnostics published must be exactly on those lines.

use foe_e2e::foe_binary;
use foe_lsp::client::{apply_text_edits, LspClient};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Longest wait for one analysis (the engine solves and runs both builds).
const ANALYSIS: Duration = Duration::from_secs(300);
const REQUEST: Duration = Duration::from_secs(60);

const FLAGGED: &str = include_str!("../nvim/flagged.c");

fn server_command() -> Command {
    let mut c = Command::new(foe_binary());
    c.arg("lsp");
    c
}

fn uri_of(path: &Path) -> String {
    foe_lsp::bench::file_uri(path)
}

/// A temp dir holding the fixtures and a server session rooted there.
struct Session {
    dir: tempfile::TempDir,
    client: LspClient,
}

impl Session {
    fn start(settings: Value) -> Session {
        let dir = tempfile::tempdir().unwrap();
        let mut client = LspClient::spawn(server_command()).expect("start foe lsp");
        client.set_settings(settings.clone());
        let init = client
            .initialize(&uri_of(dir.path()), settings, REQUEST)
            .expect("initialize");
        assert_eq!(init["serverInfo"]["name"], "foe");
        assert_eq!(
            init["capabilities"]["textDocumentSync"]["change"], 1,
            "full sync"
        );
        Session { dir, client }
    }

    /// Writes a fixture, opens it (version 1) and returns its URI and first diagnostics.
    fn open(&mut self, name: &str, text: &str) -> (String, Vec<Value>) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let uri = uri_of(&path);
        self.client.did_open(&uri, 1, text).unwrap();
        let diags = self.diagnostics(&uri, 1);
        (uri, diags)
    }

    fn diagnostics(&mut self, uri: &str, version: i64) -> Vec<Value> {
        let got = self
            .client
            .wait_diagnostics(uri, Some(version), ANALYSIS)
            .unwrap_or_else(|| panic!("no diagnostics for {uri} v{version}"));
        got.params()["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.client
            .request(method, Some(params), REQUEST)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    fn stats_functions(&mut self, uri: &str) -> Vec<Value> {
        let stats = self
            .client
            .request("foe/stats", None, REQUEST)
            .expect("foe/stats");
        stats["documents"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["uri"] == uri))
            .and_then(|d| d["analysis"]["functions"].as_array().cloned())
            .unwrap_or_default()
    }

    fn finish(self) {
        let status = self
            .client
            .shutdown(Duration::from_secs(10))
            .expect("shutdown and exit")
            .expect("a process");
        assert!(status.success(), "foe lsp exited with {status}");
    }
}

/// The `// foe: divergence KIND` lines of a fixture, 0-based.
fn expectations(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            l.split("// foe: divergence ")
                .nth(1)
                .map(|k| (i as u64, k.trim().to_string()))
        })
        .collect()
}

fn line_of(d: &Value) -> u64 {
    d["range"]["start"]["line"].as_u64().unwrap()
}

fn check_expectations(text: &str, diags: &[Value]) {
    let expected = expectations(text);
    let mut lines: Vec<u64> = diags.iter().map(line_of).collect();
    lines.sort();
    lines.dedup();
    let want: Vec<u64> = expected.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        lines, want,
        "flagged lines (0-based) differ from the fixture's expectations: {diags:#?}"
    );
    for (line, kind) in expected {
        let here: Vec<&Value> = diags.iter().filter(|d| line_of(d) == line).collect();
        let prefix = format!("fast-math-{kind}-");
        assert!(
            here.iter()
                .any(|d| kind == "any" || d["code"].as_str().unwrap().starts_with(&prefix)),
            "line {line}: expected a {kind} divergence, got {here:#?}"
        );
    }
}

fn on_line<'a>(diags: &'a [Value], text: &str, needle: &str) -> &'a Value {
    let line = text.lines().position(|l| l.contains(needle)).unwrap() as u64;
    diags
        .iter()
        .find(|d| line_of(d) == line)
        .unwrap_or_else(|| panic!("no diagnostic on the line of {needle:?}: {diags:#?}"))
}

#[test]
fn diagnostics_hover_replay_and_verified_fix() {
    let mut s = Session::start(json!({}));
    let (uri, diags) = s.open("flagged.c", FLAGGED);
    check_expectations(FLAGGED, &diags);

    for d in &diags {
        assert_eq!(d["source"], "foe");
        assert_eq!(d["severity"], 2, "divergences are warnings");
        let code = d["code"].as_str().unwrap();
        assert!(code.starts_with("fast-math-"), "{code}");
        let href = d["codeDescription"]["href"].as_str().unwrap();
        assert!(href.contains("diagnostics.md#fast-math-"), "{href}");
        assert!(
            !d["relatedInformation"].as_array().unwrap().is_empty(),
            "related event of the other build"
        );
        assert_eq!(d["relatedInformation"][0]["location"]["uri"], uri.as_str());
        assert!(
            d["message"].as_str().unwrap().contains('='),
            "message names the inputs: {d}"
        );
    }
    let identity = on_line(&diags, FLAGGED, "2 * x");
    assert_eq!(identity["data"]["function"], "identity");
    assert!(
        !identity["message"]
            .as_str()
            .unwrap()
            .contains("declared domain"),
        "identity declares no domain"
    );
    let turbine = on_line(&diags, FLAGGED, "0.125*(3-2*v)").clone();
    assert_eq!(turbine["data"]["function"], "turbine1");
    let message = turbine["message"].as_str().unwrap();
    assert!(
        message.contains("the declared domain"),
        "turbine1 declares a domain: {message}"
    );

    // Progress was reported while analysing.
    let progress: Vec<&Value> = s
        .client
        .history
        .iter()
        .filter(|r| r.method() == Some("$/progress"))
        .map(|r| r.params())
        .collect();
    assert!(
        progress.iter().any(|p| p["value"]["kind"] == "begin"),
        "no $/progress begin"
    );
    assert!(
        progress.iter().any(|p| p["value"]["kind"] == "end"),
        "no $/progress end"
    );

    // Hover on turbine1's flagged line: inputs in hex and decimal, both traces, results and flags.
    let hover = s.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": turbine["range"]["start"] }),
    );
    let md = hover["contents"]["value"].as_str().expect("markdown hover");
    for needle in [
        "Plain build P",
        "Fast-math build P'",
        "-ffast-math",
        "returns",
        "0x",
        "turbine1",
    ] {
        assert!(md.contains(needle), "hover lacks {needle:?}:\n{md}");
    }

    // `foe replay` with the hover's input confirms the divergence.
    let replay = md
        .lines()
        .find_map(|l| l.split("Replay: `foe replay ").nth(1))
        .expect("replay line in hover");
    let args: Vec<&str> = replay
        .trim_end_matches('`')
        .split_whitespace()
        .skip(1)
        .collect();
    let path = s.dir.path().join("flagged.c");
    let out = Command::new(foe_binary())
        .arg("replay")
        .arg(&path)
        .args(&args)
        .args(["--format", "json"])
        .output()
        .expect("run foe replay");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "foe replay {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replayed: Value = serde_json::from_str(&stdout).expect("foe replay --format json");
    assert!(
        !replayed["first_divergence"].is_null(),
        "foe replay does not confirm the divergence:\n{stdout}"
    );

    // The quick fix on identity is verified, and applying it clears identity's diagnostic.
    let identity = on_line(&diags, FLAGGED, "2 * x").clone();
    let actions = s.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": uri }, "range": identity["range"], "context": { "diagnostics": [identity] } }),
    );
    let action = actions
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["isPreferred"] == true)
        .unwrap_or_else(|| panic!("no preferred (verified) quick fix: {actions:#}"))
        .clone();
    assert_eq!(action["kind"], "quickfix");
    assert!(
        action["title"].as_str().unwrap().contains("verified"),
        "{action}"
    );
    assert_eq!(action["diagnostics"][0]["code"], identity["code"]);
    let doc_edit = &action["edit"]["documentChanges"][0];
    assert_eq!(doc_edit["textDocument"]["version"], 1);
    let fixed = apply_text_edits(FLAGGED, doc_edit["edits"].as_array().unwrap());
    assert!(
        fixed.contains("#pragma float_control(precise, on)"),
        "{fixed}"
    );
    s.client.did_change(&uri, 2, &fixed).unwrap();
    let after = s.diagnostics(&uri, 2);
    assert!(
        after.iter().all(|d| d["data"]["function"] != "identity"),
        "identity still flagged: {after:#?}"
    );
    on_line(&after, &fixed, "0.125*(3-2*v)");
    s.finish();
}

#[test]
fn editing_one_function_keeps_the_others_cached() {
    let mut s = Session::start(json!({}));
    let text = foe_lsp::bench::many_functions(6);
    let (uri, _) = s.open("many.c", &text);
    let first = s.stats_functions(&uri);
    assert_eq!(first.len(), 6, "{first:#?}");
    assert!(
        first.iter().all(|f| f["cached"] == false),
        "a fresh server has nothing cached: {first:#?}"
    );

    s.client
        .did_change(&uri, 2, &foe_lsp::bench::edit_function(&text, 2))
        .unwrap();
    s.diagnostics(&uri, 2);
    let second = s.stats_functions(&uri);
    for f in &second {
        let edited = f["name"] == "f02";
        assert_eq!(
            f["cached"], !edited,
            "after editing f02 only, {} cached = {}",
            f["name"], f["cached"]
        );
    }
    s.finish();
}

#[test]
fn a_flood_of_edits_publishes_only_the_last_version() {
    let mut s = Session::start(json!({}));
    let (uri, _) = s.open("flood.c", FLAGGED);
    let last = 40;
    for v in 2..=last {
        let text = FLAGGED.replace("2 * x", &format!("{v} * x"));
        s.client.did_change(&uri, v, &text).unwrap();
    }
    let diags = s.diagnostics(&uri, last);
    assert!(
        diags.iter().any(|d| d["data"]["function"] == "turbine1"),
        "{diags:#?}"
    );
    s.client.drain(Duration::from_millis(1500));
    let versions: Vec<i64> = s
        .client
        .history
        .iter()
        .filter(|r| r.method() == Some("textDocument/publishDiagnostics"))
        .filter_map(|r| r.params()["version"].as_i64())
        .collect();
    assert_eq!(
        versions,
        vec![1, last],
        "only the opened and the last version are published"
    );
    s.finish();
}

#[test]
fn a_file_that_does_not_compile_gives_one_diagnostic() {
    let mut s = Session::start(json!({}));
    let text =
        "double ok(double x) { return x * 2; }\n\ndouble broken(double x) {\n    return x * ;\n}\n";
    let (_, diags) = s.open("broken.c", text);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let d = &diags[0];
    assert_eq!(d["severity"], 1);
    assert_eq!(d["code"], "compile-error");
    assert_eq!(line_of(d), 3, "clang's first error is on line 4");
    assert!(d["message"].as_str().unwrap().contains("error"), "{d}");
    s.finish();
}

#[test]
fn unknown_requests_are_answered_with_errors_and_the_server_keeps_working() {
    let mut s = Session::start(json!({}));
    let err = s
        .client
        .request("foe/noSuchMethod", Some(json!({})), REQUEST)
        .unwrap_err();
    assert!(
        err.to_string().contains("-32601"),
        "MethodNotFound expected: {err}"
    );
    let err = s
        .client
        .request(
            "textDocument/hover",
            Some(json!({ "nonsense": true })),
            REQUEST,
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("-32602"),
        "InvalidParams expected: {err}"
    );
    // Garbage text and a hover on a document nobody opened do not hurt.
    let (uri, _) = s.open("garbage.c", "\u{0}\u{7f} ☃ double double ((( \n");
    let hover = s.request("textDocument/hover", json!({ "textDocument": { "uri": "file:///nowhere.c" }, "position": { "line": 0, "character": 0 } }));
    assert!(hover.is_null());
    s.client
        .did_change(&uri, 2, "double f(double x) { return x; }\n")
        .unwrap();
    let diags = s.diagnostics(&uri, 2);
    assert!(diags.is_empty(), "{diags:#?}");
    s.finish();
}
