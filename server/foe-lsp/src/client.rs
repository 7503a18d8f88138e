//! A minimal blocking LSP client over a child process's stdio (or any pair of streams) (Content-Length framing, serde_json), used by
//! the latency benchmark and the end-to-end tests to drive the real `foe lsp` binary.
//!
//! A reader thread stamps every message with its arrival time. Requests from the server are answered at
//! once: `window/workDoneProgress/create` and `client/registerCapability` with `null`, `workspace/configuration`
//! with the settings given to [`LspClient::set_settings`].

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A message from the server with the time it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    pub message: Value,
}

impl Received {
    pub fn method(&self) -> Option<&str> {
        self.message.get("method")?.as_str()
    }

    pub fn params(&self) -> &Value {
        &self.message["params"]
    }
}

pub struct LspClient {
    /// The server process, when the client started one.
    child: Option<Child>,
    writer: Option<Box<dyn Write + Send>>,
    incoming: mpsc::Receiver<Received>,
    next_id: i64,
    /// Notifications not yet consumed by a `wait_*` call, in arrival order.
    pending: VecDeque<Received>,
    /// Every notification and server request received, in arrival order.
    pub history: Vec<Received>,
    settings: Value,
}

/// An error answer to a request.
#[derive(Debug, Clone)]
pub struct ResponseError(pub Value);

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error response: {}", self.0)
    }
}

impl std::error::Error for ResponseError {}

impl LspClient {
    /// Starts the server; its stdin and stdout are taken over, stderr is left as `command` sets it.
    pub fn spawn(mut command: Command) -> std::io::Result<LspClient> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin: ChildStdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut client = LspClient::connect(stdout, stdin);
        client.child = Some(child);
        Ok(client)
    }

    /// A client over any pair of streams (e.g. one end of a socket pair whose other end a server serves).
    pub fn connect(
        reader: impl std::io::Read + Send + 'static,
        writer: impl Write + Send + 'static,
    ) -> LspClient {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(reader);
            while let Some(message) = read_message(&mut reader) {
                if tx
                    .send(Received {
                        at: Instant::now(),
                        message,
                    })
                    .is_err()
                {
                    break;
                }
            }
        });
        LspClient {
            child: None,
            writer: Some(Box::new(writer)),
            incoming: rx,
            next_id: 1,
            pending: VecDeque::new(),
            history: vec![],
            settings: Value::Null,
        }
    }

    /// The value returned to `workspace/configuration` requests (the `foe` section).
    pub fn set_settings(&mut self, settings: Value) {
        self.settings = settings;
    }

    fn write(&mut self, message: &Value) -> std::io::Result<()> {
        let body = serde_json::to_string(message)?;
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the server's input is closed"))?;
        write!(writer, "Content-Length: {}\r\n\r\n{body}", body.len())?;
        writer.flush()
    }

    /// Writes raw bytes to the server (for malformed messages).
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the server's input is closed"))?;
        writer.write_all(bytes)?;
        writer.flush()
    }

    /// Closes the server's input (end of stream).
    pub fn close_input(&mut self) {
        self.writer = None;
    }

    /// The server process, when the client started one.
    pub fn child_mut(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// The next message that is not a notification or server request: an answer, maybe with a null id.
    pub fn next_answer(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let received = self.next(deadline)?;
            if received.method().is_none() {
                return Some(received.message);
            }
        }
    }

    /// Sends a notification; returns the time it was written.
    pub fn notify(&mut self, method: &str, params: Value) -> std::io::Result<Instant> {
        self.write(&json!({ "jsonrpc": "2.0", "method": method, "params": params }))?;
        Ok(Instant::now())
    }

    /// Sends a request without waiting; returns its id.
    pub fn send_request(&mut self, method: &str, params: Option<Value>) -> std::io::Result<i64> {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({ "jsonrpc": "2.0", "id": id, "method": method });
        if let Some(p) = params {
            message["params"] = p;
        }
        self.write(&message)?;
        Ok(id)
    }

    /// Sends a request and waits for its answer, buffering notifications that arrive meanwhile.
    pub fn request(
        &mut self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> anyhow::Result<Value> {
        let id = self.send_request(method, params)?;
        self.response(id, timeout)
    }

    /// Waits for the answer to request `id`.
    pub fn response(&mut self, id: i64, timeout: Duration) -> anyhow::Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self
                .next(deadline)
                .ok_or_else(|| anyhow::anyhow!("no answer to request {id} within {timeout:?}"))?;
            if r.message.get("id").and_then(Value::as_i64) == Some(id) && r.method().is_none() {
                if let Some(e) = r.message.get("error") {
                    return Err(ResponseError(e.clone()).into());
                }
                return Ok(r.message.get("result").cloned().unwrap_or(Value::Null));
            }
        }
    }

    /// The next message from the server, after bookkeeping: server requests are answered and recorded,
    /// notifications are recorded and queued for `wait_for`.
    fn next(&mut self, deadline: Instant) -> Option<Received> {
        let wait = deadline.checked_duration_since(Instant::now())?;
        let r = self.incoming.recv_timeout(wait).ok()?;
        match (r.method(), r.message.get("id")) {
            (Some(method), Some(id)) => {
                let result = match method {
                    "workspace/configuration" => {
                        let n = r.params()["items"].as_array().map_or(1, Vec::len);
                        Value::Array(vec![self.settings.clone(); n])
                    }
                    _ => Value::Null,
                };
                let _ = self.write(&json!({ "jsonrpc": "2.0", "id": id, "result": result }));
                self.history.push(r.clone());
            }
            (Some(_), None) => {
                self.history.push(r.clone());
                self.pending.push_back(r.clone());
            }
            _ => {}
        }
        Some(r)
    }

    /// Waits for the first unconsumed notification with `method` that satisfies `pred`; it and the
    /// notifications before it are consumed.
    pub fn wait_for(
        &mut self,
        method: &str,
        timeout: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Option<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self
                .pending
                .iter()
                .position(|r| r.method() == Some(method) && pred(r.params()))
            {
                let found = self.pending[i].clone();
                self.pending.drain(..=i);
                return Some(found);
            }
            let _ = self.next(deadline)?;
        }
    }

    /// Waits for `publishDiagnostics` of `uri` at `version` (any version when None).
    pub fn wait_diagnostics(
        &mut self,
        uri: &str,
        version: Option<i64>,
        timeout: Duration,
    ) -> Option<Received> {
        self.wait_published(uri, version, timeout, false)
    }

    /// The first diagnostics of a document's version, a first look included (`foe.firstLook`).
    pub fn wait_first_diagnostics(
        &mut self,
        uri: &str,
        version: Option<i64>,
        timeout: Duration,
    ) -> Option<Received> {
        self.wait_published(uri, version, timeout, true)
    }

    fn wait_published(
        &mut self,
        uri: &str,
        version: Option<i64>,
        timeout: Duration,
        first_looks_too: bool,
    ) -> Option<Received> {
        self.wait_for("textDocument/publishDiagnostics", timeout, |p| {
            p["uri"] == uri
                && (version.is_none() || p["version"].as_i64() == version)
                && (first_looks_too || !is_first_look(p))
        })
    }

    /// Reads whatever arrives within `duration` (to check that nothing unexpected comes).
    pub fn drain(&mut self, duration: Duration) {
        let deadline = Instant::now() + duration;
        while self.next(deadline).is_some() {}
    }

    /// `initialize` (with progress, configuration and versioned edits supported) and `initialized`.
    pub fn initialize(
        &mut self,
        root_uri: &str,
        options: Value,
        timeout: Duration,
    ) -> anyhow::Result<Value> {
        let params = json!({
            "processId": std::process::id(),
            "rootUri": root_uri,
            "capabilities": {
                "window": { "workDoneProgress": true },
                "workspace": { "configuration": true, "workspaceEdit": { "documentChanges": true } },
                "textDocument": {
                    "publishDiagnostics": { "relatedInformation": true, "versionSupport": true, "codeDescriptionSupport": true },
                    "hover": { "contentFormat": ["markdown", "plaintext"] },
                    "codeAction": { "codeActionLiteralSupport": { "codeActionKind": { "valueSet": ["quickfix"] } }, "isPreferredSupport": true }
                }
            },
            "initializationOptions": options,
        });
        let result = self.request("initialize", Some(params), timeout)?;
        self.notify("initialized", json!({}))?;
        Ok(result)
    }

    pub fn did_open(&mut self, uri: &str, version: i64, text: &str) -> std::io::Result<Instant> {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "c", "version": version, "text": text } }),
        )
    }

    pub fn did_change(&mut self, uri: &str, version: i64, text: &str) -> std::io::Result<Instant> {
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": [{ "text": text }] }),
        )
    }

    /// `shutdown` then `exit`; waits for the server process to end (None when the client started none).
    pub fn shutdown(mut self, timeout: Duration) -> anyhow::Result<Option<ExitStatus>> {
        self.request("shutdown", None, timeout)?;
        self.notify("exit", Value::Null)?;
        self.writer = None;
        let Some(child) = self.child.as_mut() else {
            return Ok(None);
        };
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() > deadline {
                anyhow::bail!("the server did not exit within {timeout:?} of `exit`");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for LspClient {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Reads one framed message; None at end of stream or on a malformed frame.
fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

/// Applies LSP text edits (0-based lines, UTF-16 columns) to a text, as an editor would.
pub fn apply_text_edits(text: &str, edits: &[Value]) -> String {
    let offset = |pos: &Value| -> usize {
        let line = pos["line"].as_u64().unwrap_or(0) as usize;
        let character = pos["character"].as_u64().unwrap_or(0) as usize;
        let mut start = 0;
        for (i, l) in text.split_inclusive('\n').enumerate() {
            if i == line {
                let mut units = 0;
                for (b, c) in l.char_indices() {
                    if units >= character || c == '\n' {
                        return start + b;
                    }
                    units += c.len_utf16();
                }
                return start + l.len();
            }
            start += l.len();
        }
        text.len()
    };
    let mut spans: Vec<(usize, usize, &str)> = edits
        .iter()
        .map(|e| {
            (
                offset(&e["range"]["start"]),
                offset(&e["range"]["end"]),
                e["newText"].as_str().unwrap_or(""),
            )
        })
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_string();
    for (s, e, t) in spans {
        out.replace_range(s..e, t);
    }
    out
}

/// Whether a `publishDiagnostics` is a first look (its diagnostics marked `firstLook`): the analysis's own
/// findings follow.
pub fn is_first_look(params: &Value) -> bool {
    params["diagnostics"]
        .as_array()
        .is_some_and(|ds| ds.iter().any(|d| d["data"]["firstLook"] == true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let body = r#"{"jsonrpc":"2.0","method":"x"}"#;
        let framed = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        let mut r = BufReader::new(framed.as_bytes());
        assert_eq!(read_message(&mut r).unwrap()["method"], "x");
        assert!(read_message(&mut r).is_none());
    }

    #[test]
    fn applies_edits_in_utf16() {
        let edits = vec![
            json!({"range": {"start": {"line": 1, "character": 2}, "end": {"line": 1, "character": 2}}, "newText": "X"}),
        ];
        assert_eq!(apply_text_edits("a\né{b\n", &edits), "a\né{Xb\n");
    }
}
