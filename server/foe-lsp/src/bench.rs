//! The latency benchmark: time from `didOpen` and from `didChange` to the matching `publishDiagnostics`, cold
//! (fresh server, empty cache) and warm, for turbine1 (one function) and a file of many functions of which one
//! changes. It drives a real server process over stdio with [`crate::client::LspClient`].

use crate::client::LspClient;
use serde_json::{json, Value};
use std::fmt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// turbine1 (FPBench, rosa) with its precondition as the declared domain.
pub const TURBINE1: &str = "\
// foe: assume -4.5 <= v <= -0.3
// foe: assume 0.4 <= w <= 0.9
// foe: assume 3.8 <= r <= 7.8
double turbine1(double v, double w, double r) {
    return 3 + 2/(r*r) - 0.125*(3-2*v)*(w*w*r*r)/(1-v) - 4.5;
}
";

/// A file of `n` small independent functions (`f00` … ), each a product, a sum and a division.
pub fn many_functions(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "double f{i:02}(double x, double y) {{\n    double a = x * y + {c}.5;\n    return a / (y - {c}.25);\n}}\n\n",
            c = i + 1
        ));
    }
    s
}

/// Changes the constants of function `f<i>` in a [`many_functions`] text (its IR changes, the others' do not).
pub fn edit_function(text: &str, i: usize) -> String {
    let c = i + 1;
    let head = format!("double f{i:02}(");
    let start = text.find(&head).expect("function present");
    let end = start + text[start..].find("\n}\n").expect("function end");
    let body = text[start..end].replace(&format!("{c}.5;"), &format!("{c}.75;"));
    format!("{}{}{}", &text[..start], body, &text[end..])
}

/// What to run.
#[derive(Debug, Clone)]
pub struct LatencyOptions {
    /// Functions in the many-function file; default 24.
    pub functions: usize,
    /// Repetitions of each measurement (cold ones start a fresh server each time); default 1.
    pub runs: usize,
    /// The server's debounce delay, which every didChange measurement includes; default 150 ms (the server's).
    pub debounce_ms: u64,
    /// Longest wait for one publication; default 600 s.
    pub timeout: Duration,
    /// Extra `foe` settings passed as initializationOptions.
    pub settings: Value,
}

impl Default for LatencyOptions {
    fn default() -> Self {
        LatencyOptions {
            functions: 24,
            runs: 1,
            debounce_ms: 150,
            timeout: Duration::from_secs(600),
            settings: json!({}),
        }
    }
}

/// One measured quantity.
#[derive(Debug, Clone)]
pub struct LatencyRow {
    pub file: String,
    pub functions: usize,
    pub event: String,
    /// Milliseconds, one per run.
    pub ms: Vec<f64>,
    /// Functions whose result came from the cache in the last run's analysis.
    pub cached: usize,
    /// Diagnostics published in the last run.
    pub diagnostics: usize,
}

impl LatencyRow {
    pub fn median(&self) -> f64 {
        let mut v = self.ms.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    }

    pub fn min(&self) -> f64 {
        self.ms.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

#[derive(Debug, Clone)]
pub struct LatencyReport {
    pub debounce_ms: u64,
    pub rows: Vec<LatencyRow>,
}

impl fmt::Display for LatencyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "time to publishDiagnostics (debounce {} ms, included in didChange rows)",
            self.debounce_ms
        )?;
        writeln!(
            f,
            "| file | functions | event | median ms | min ms | runs | from cache | diagnostics |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|")?;
        for r in &self.rows {
            writeln!(
                f,
                "| {} | {} | {} | {:.0} | {:.0} | {} | {}/{} | {} |",
                r.file,
                r.functions,
                r.event,
                r.median(),
                r.min(),
                r.ms.len(),
                r.cached,
                r.functions,
                r.diagnostics
            )?;
        }
        Ok(())
    }
}

/// Runs the benchmark; `server` builds the command that starts a fresh server (e.g. `foe lsp`).
pub fn latency_benchmark(
    server: &dyn Fn() -> Command,
    options: &LatencyOptions,
) -> anyhow::Result<LatencyReport> {
    let dir = foe_analysis::scratch::tempdir("foe-bench")?;
    let mut rows = vec![];
    let many = many_functions(options.functions);
    let changed = options.functions / 2;
    for (name, text, edited) in [
        (
            "turbine1.c",
            TURBINE1.to_string(),
            TURBINE1.replace("- 4.5;", "- 4.25;"),
        ),
        ("many.c", many.clone(), edit_function(&many, changed)),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &text)?;
        let functions =
            text.matches("\ndouble ").count() + usize::from(text.starts_with("double "));
        let row = |event: &str| LatencyRow {
            file: name.into(),
            functions,
            event: event.into(),
            ms: vec![],
            cached: 0,
            diagnostics: 0,
        };
        let (mut cold, mut reopen, mut change, mut comment) = (
            row("didOpen, cold"),
            row("didOpen, warm (reopened)"),
            row("didChange, one function edited"),
            row("didChange, comment only"),
        );
        for _ in 0..options.runs.max(1) {
            let mut s = Session::start(server, dir.path(), &path, options)?;
            s.open(&text, &mut cold)?;
            s.close()?;
            s.open(&text, &mut reopen)?;
            s.change(&edited, &mut change)?;
            s.change(&format!("{edited}// a comment\n"), &mut comment)?;
            s.client.shutdown(Duration::from_secs(10))?;
        }
        rows.extend([cold, reopen, change, comment]);
    }
    Ok(LatencyReport {
        debounce_ms: options.debounce_ms,
        rows,
    })
}

/// One server with one document.
struct Session {
    client: LspClient,
    uri: String,
    version: i64,
    timeout: Duration,
}

impl Session {
    fn start(
        server: &dyn Fn() -> Command,
        root: &Path,
        path: &Path,
        options: &LatencyOptions,
    ) -> anyhow::Result<Session> {
        let mut command = server();
        // The server's log is shown only when asked for (FOE_LOG), so the table stays readable.
        if std::env::var_os("FOE_LOG").is_none() {
            command.stderr(std::process::Stdio::null());
        }
        let mut client = LspClient::spawn(command)?;
        let mut settings = options.settings.clone();
        if !settings.is_object() {
            settings = json!({});
        }
        settings["debounceMs"] = json!(options.debounce_ms);
        client.set_settings(settings.clone());
        client.initialize(&file_uri(root), settings, Duration::from_secs(30))?;
        Ok(Session {
            client,
            uri: file_uri(path),
            version: 0,
            timeout: options.timeout,
        })
    }

    fn open(&mut self, text: &str, row: &mut LatencyRow) -> anyhow::Result<()> {
        self.version += 1;
        let sent = self.client.did_open(&self.uri, self.version, text)?;
        self.measure(sent, row)
    }

    fn close(&mut self) -> anyhow::Result<()> {
        self.client.notify(
            "textDocument/didClose",
            json!({ "textDocument": { "uri": self.uri } }),
        )?;
        // The server clears the diagnostics of a closed document (version null).
        let uri = self.uri.clone();
        self.client
            .wait_for("textDocument/publishDiagnostics", self.timeout, |p| {
                p["uri"] == uri && p["version"].is_null()
            });
        Ok(())
    }

    fn change(&mut self, text: &str, row: &mut LatencyRow) -> anyhow::Result<()> {
        self.version += 1;
        let sent = self.client.did_change(&self.uri, self.version, text)?;
        self.measure(sent, row)
    }

    fn measure(&mut self, sent: std::time::Instant, row: &mut LatencyRow) -> anyhow::Result<()> {
        let got = self
            .client
            .wait_diagnostics(&self.uri, Some(self.version), self.timeout)
            .ok_or_else(|| anyhow::anyhow!("no diagnostics for {} v{}", self.uri, self.version))?;
        row.ms
            .push(got.at.saturating_duration_since(sent).as_secs_f64() * 1000.0);
        row.diagnostics = got.params()["diagnostics"].as_array().map_or(0, Vec::len);
        let stats = self
            .client
            .request("foe/stats", None, Duration::from_secs(10))?;
        row.cached = stats["documents"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["uri"] == self.uri.as_str()))
            .and_then(|d| d["analysis"]["functions"].as_array())
            .map_or(0, |f| f.iter().filter(|f| f["cached"] == true).count());
        Ok(())
    }
}

/// `file://` URI of an absolute path.
pub fn file_uri(path: &Path) -> String {
    tower_lsp::lsp_types::Url::from_file_path(path)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("file://{}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editing_one_function_leaves_the_others_alone() {
        let text = many_functions(4);
        let edited = edit_function(&text, 2);
        assert_ne!(text, edited);
        let changed: Vec<(&str, &str)> = text
            .split("\n\n")
            .zip(edited.split("\n\n"))
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(changed.len(), 1);
        assert!(changed[0].0.starts_with("double f02("));
        assert_eq!(text.lines().count(), edited.lines().count());
    }
}
