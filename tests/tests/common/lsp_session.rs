//! An LSP session of the end-to-end tests: the real `foe lsp` binary driven over stdio by a small JSON-RPC client
//! (`foe_lsp::client::LspClient`), rooted in a temp dir that holds the fixtures it opens.

#![allow(dead_code)] // each test binary uses part of it

use foe_e2e::foe_binary;
use foe_lsp::client::LspClient;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Longest wait for one analysis (the engine solves and runs both builds).
pub const ANALYSIS: Duration = Duration::from_secs(300);
pub const REQUEST: Duration = Duration::from_secs(60);

pub fn server_command() -> Command {
    let mut c = Command::new(foe_binary());
    c.arg("lsp");
    c
}

pub fn uri_of(path: &Path) -> String {
    foe_lsp::bench::file_uri(path)
}

/// A temp dir holding the fixtures and a server session rooted there.
pub struct Session {
    pub dir: tempfile::TempDir,
    pub client: LspClient,
}

impl Session {
    pub fn start(settings: Value) -> Session {
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
    pub fn open(&mut self, name: &str, text: &str) -> (String, Vec<Value>) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let uri = uri_of(&path);
        self.client.did_open(&uri, 1, text).unwrap();
        let diags = self.diagnostics(&uri, 1);
        (uri, diags)
    }

    pub fn diagnostics(&mut self, uri: &str, version: i64) -> Vec<Value> {
        let got = self
            .client
            .wait_diagnostics(uri, Some(version), ANALYSIS)
            .unwrap_or_else(|| {
                let seen: Vec<String> = self
                    .client
                    .history
                    .iter()
                    .rev()
                    .take(12)
                    .map(|r| {
                        format!(
                            "{:?} v{} {} first look {}",
                            r.method(),
                            r.params()["version"],
                            r.params()["state"],
                            foe_lsp::client::is_first_look(r.params())
                        )
                    })
                    .collect();
                panic!("no diagnostics for {uri} v{version}; the last messages, latest first: {seen:#?}")
            });
        got.params()["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The latest diagnostics published for a document.
    pub fn diagnostics_now(&self, uri: &str) -> Vec<Value> {
        self.client
            .history
            .iter()
            .rev()
            .find(|r| {
                r.method() == Some("textDocument/publishDiagnostics") && r.params()["uri"] == uri
            })
            .and_then(|r| r.params()["diagnostics"].as_array().cloned())
            .unwrap_or_default()
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.client
            .request(method, Some(params), REQUEST)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    pub fn stats_functions(&mut self, uri: &str) -> Vec<Value> {
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

    pub fn finish(self) {
        let status = self
            .client
            .shutdown(Duration::from_secs(10))
            .expect("shutdown and exit")
            .expect("a process");
        assert!(status.success(), "foe lsp exited with {status}");
    }
}

impl Session {
    /// Waits until the analysis of the document's `version` is at rest (its diagnostics already received) and
    /// returns its diagnostics in comparable form (range, code, severity, message; the session's directory left
    /// out).
    pub fn at_rest(&mut self, uri: &str, version: i64) -> Vec<String> {
        self.client
            .wait_for("foe/status", ANALYSIS, |p| {
                p["uri"] == uri && p["version"] == version && p["state"] != "analysing"
            })
            .expect("foe/status at rest");
        let dir = self.dir.path().display().to_string();
        let latest = self.diagnostics_now(uri);
        assert!(!latest.is_empty());
        latest
            .iter()
            .map(|d| {
                format!(
                    "{} {} {} {}",
                    d["range"], d["code"], d["severity"], d["message"]
                )
                .replace(&dir, "DIR")
            })
            .collect()
    }
}
