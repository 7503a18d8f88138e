//! What a client can do to the language server: malformed framing and bodies are answered with the JSON-RPC
//! error and the session goes on; `shutdown` with null params works; `exit` without `shutdown`, the end of
//! input or SIGTERM during an analysis end foe at once with no child process and no temporary directory left;
//! 200 analyses in a row leave nothing behind (a process that is left is described: its state, where it waits).

use foe_e2e::foe_binary;
use foe_lsp::client::LspClient;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

const REQUEST: Duration = Duration::from_secs(60);
const ANALYSIS: Duration = Duration::from_secs(300);

/// A server with its own `$TMPDIR` and `$HOME` (both unique, so its temporary directories and its processes,
/// which inherit them, can be found).
struct Server {
    client: LspClient,
    tmp: tempfile::TempDir,
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let tmp = tempfile::Builder::new()
            .prefix("foe-lsp-tmp")
            .tempdir()
            .unwrap();
        let home = tempfile::Builder::new()
            .prefix("foe-lsp-home")
            .tempdir()
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(foe_binary());
        cmd.arg("lsp")
            .env("TMPDIR", tmp.path())
            .env("HOME", home.path())
            .env("XDG_CACHE_HOME", home.path().join(".cache"));
        let mut client = LspClient::spawn(cmd).expect("foe lsp starts");
        let root = foe_lsp::bench::file_uri(work.path());
        client
            .initialize(&root, json!({}), REQUEST)
            .expect("initialize");
        Server {
            client,
            tmp,
            home,
            work,
        }
    }

    fn open(&mut self, name: &str, version: i64, text: &str) -> String {
        let path = self.work.path().join(name);
        std::fs::write(&path, text).unwrap();
        let uri = foe_lsp::bench::file_uri(&path);
        self.client.did_open(&uri, version, text).unwrap();
        uri
    }

    /// Sends a body with a correct header.
    fn send_body(&mut self, body: &[u8]) {
        let mut bytes = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        bytes.extend_from_slice(body);
        self.client.send_raw(&bytes).unwrap();
    }

    fn expect_error(&mut self, code: i64, id: Value) {
        let answer = self
            .client
            .next_answer(REQUEST)
            .expect("an answer to the malformed message");
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert_eq!(answer["id"], id, "{answer}");
    }

    /// The server still answers.
    fn alive(&mut self) {
        let stats = self.client.request("foe/stats", None, REQUEST);
        assert!(stats.is_ok(), "the server stopped answering: {stats:?}");
    }

    /// Waits for the server to end; returns its exit code.
    fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let started = Instant::now();
        let child = self.client.child_mut().expect("a process");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                started.elapsed() < limit,
                "foe lsp did not end within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// No process with this server's `$HOME` and nothing in its `$TMPDIR` (after a short grace period).
    fn assert_nothing_left(&self) {
        let marker = format!("HOME={}", self.home.path().display());
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let procs = foe_e2e::processes_with_env(&marker);
            let temps: Vec<_> = std::fs::read_dir(self.tmp.path())
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if procs.is_empty() && temps.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "left behind: processes {procs:?}, temporary files {temps:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `processes` ("pid: command line") without the server's foe-cc, clang kept warm for as long as the server runs
/// (`process/warm_clang.rs`): one process, the server's child. A compile it forked is not left out.
fn besides_warm_clang(processes: Vec<String>, server: &str) -> Vec<String> {
    let parent = |pid: &str| -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // pid (comm) state ppid ...: the fields after the command name's closing parenthesis.
        let after = &stat[stat.rfind(')')? + 1..];
        after.split_whitespace().nth(1).map(str::to_owned)
    };
    let mut warm = 0;
    processes
        .into_iter()
        .filter(|p| {
            let (pid, command) = p.split_once(':').unwrap_or((p, ""));
            let program = command.split_whitespace().next().unwrap_or_default();
            let is_warm = program.ends_with("/foe-cc")
                && parent(pid.trim()).as_deref() == Some(server)
                && warm == 0;
            warm += usize::from(is_warm);
            !is_warm
        })
        .collect()
}

/// What is in the scratch directories under `tmp` besides their locks (and anything else in `tmp`).
fn scratch_contents(tmp: &std::path::Path) -> Vec<String> {
    let mut found = vec![];
    for entry in std::fs::read_dir(tmp).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("foe-") || !entry.path().is_dir() {
            found.push(name);
            continue;
        }
        for own in std::fs::read_dir(entry.path()).unwrap().flatten() {
            for item in std::fs::read_dir(own.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if item.file_name() != ".lock" {
                    found.push(item.path().display().to_string());
                }
            }
        }
    }
    found
}

/// A process's state for a failure message: its stat line, where it waits, its kernel stack when readable,
/// its command line and its parent.
fn process_state(pid: &str) -> String {
    let read = |what: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/{what}"))
            .map(|s| s.replace('\0', " ").trim().to_string())
            .unwrap_or_else(|e| format!("({e})"))
    };
    format!(
        "pid {pid}: stat {}; wchan {}; cmdline {}; stack {}; status {}",
        read("stat"),
        read("wchan"),
        read("cmdline"),
        read("stack"),
        read("status").replace('\n', ", ")
    )
}

fn slow_file() -> String {
    std::fs::read_to_string(foe_e2e::repo_root().join("fixtures/bench/jetengine.c")).unwrap()
}

#[test]
fn malformed_messages_are_answered_and_the_session_goes_on() {
    let mut s = Server::start();
    // Invalid JSON, truncated JSON, a body that is not UTF-8: parse errors with a null id.
    s.send_body(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ");
    s.expect_error(-32700, Value::Null);
    s.send_body(b"this is not json");
    s.expect_error(-32700, Value::Null);
    s.send_body(b"\xff\xfe\x00{\"jsonrpc\":\"2.0\"}");
    s.expect_error(-32700, Value::Null);
    s.alive();
    // A header without a length, a length that is not a number: parse errors, then the next message works.
    s.client
        .send_raw(b"Content-Type: application/json\r\n\r\n")
        .unwrap();
    s.expect_error(-32700, Value::Null);
    s.client.send_raw(b"Content-Length: many\r\n\r\n").unwrap();
    s.expect_error(-32700, Value::Null);
    s.alive();
    // Valid JSON that is no JSON-RPC message: invalid request, with its id when it has one.
    s.send_body(br#"{"jsonrpc":"2.0","id":77,"method":42}"#);
    s.expect_error(-32600, json!(77));
    s.send_body(br#"[1, 2, 3]"#);
    s.expect_error(-32600, Value::Null);
    s.send_body(br#"{"jsonrpc":"1.0","id":"x","method":"foe/stats"}"#);
    s.expect_error(-32600, json!("x"));
    s.alive();
    // The session still analyses.
    let uri = s.open(
        "ok.c",
        1,
        "double f(double x) {\n  double a = 2 * x;\n  return a * 0.5;\n}\n",
    );
    let diags = s
        .client
        .wait_diagnostics(&uri, Some(1), ANALYSIS)
        .expect("diagnostics after the abuse");
    assert!(!diags.params()["diagnostics"].as_array().unwrap().is_empty());
    // `shutdown` with null params, then `exit`: status 0.
    s.send_body(br#"{"jsonrpc":"2.0","id":900,"method":"shutdown","params":null}"#);
    let answer = s.client.next_answer(REQUEST).expect("shutdown answered");
    assert_eq!(answer["id"], 900, "{answer}");
    assert!(answer.get("error").is_none(), "{answer}");
    s.send_body(br#"{"jsonrpc":"2.0","method":"exit","params":null}"#);
    assert_eq!(s.wait_exit(Duration::from_secs(10)), Some(0));
    s.assert_nothing_left();
}

/// How a session can end in the middle of an analysis.
enum Ending {
    ExitWithoutShutdown,
    EndOfInput,
    Terminate,
}

fn end_during_analysis(ending: Ending) {
    let mut s = Server::start();
    s.open("slow.c", 1, &slow_file());
    // Wait until the analysis is under way (its solver or worker processes exist).
    let marker = format!("HOME={}", s.home.path().display());
    let started = Instant::now();
    while foe_e2e::processes_with_env(&marker).len() < 2
        && started.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = Instant::now();
    match ending {
        Ending::ExitWithoutShutdown => {
            s.client.notify("exit", Value::Null).unwrap();
        }
        Ending::EndOfInput => s.client.close_input(),
        Ending::Terminate => {
            let pid = s.client.child_mut().unwrap().id() as i32;
            // SAFETY: signals the server this test started.
            unsafe { libc_kill(pid, 15) };
        }
    }
    let code = s.wait_exit(Duration::from_secs(10));
    assert_ne!(code, Some(0), "the session did not end cleanly");
    assert!(
        ended.elapsed() < Duration::from_secs(5),
        "foe lsp took {:?} to end",
        ended.elapsed()
    );
    s.assert_nothing_left();
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn exit_without_shutdown_during_an_analysis_leaves_nothing() {
    end_during_analysis(Ending::ExitWithoutShutdown);
}

#[test]
fn end_of_input_during_an_analysis_leaves_nothing() {
    end_during_analysis(Ending::EndOfInput);
}

#[test]
fn sigterm_during_an_analysis_leaves_nothing() {
    end_during_analysis(Ending::Terminate);
}

#[test]
fn two_hundred_analyses_leave_nothing_behind() {
    let mut s = Server::start();
    let path = s.work.path().join("many.c");
    let text =
        |k: usize| format!("double f(double x) {{\n  double a = {k} * x;\n  return a * 0.5;\n}}\n");
    std::fs::write(&path, text(1)).unwrap();
    let uri = s.open("many.c", 1, &text(1));
    s.client
        .wait_diagnostics(&uri, Some(1), ANALYSIS)
        .expect("first analysis");
    for version in 2..=200 {
        s.client
            .did_change(&uri, version, &text(version as usize))
            .unwrap();
        s.client
            .wait_diagnostics(&uri, Some(version), ANALYSIS)
            .unwrap_or_else(|| panic!("no diagnostics for version {version}"));
    }
    let stats = s.client.request("foe/stats", None, REQUEST).unwrap();
    assert!(stats.is_object());
    // Between analyses nothing of them remains: no worker, no solver, no temporary directory. The quick fix of
    // the last version is verified in the background after its diagnostics: wait for that to end first.
    // Settled: the server says no job or verification runs, and only it is left, for a second on end (a
    // verification spawns clang and the worker one after another: a single look can fall between two).
    let marker = format!("HOME={}", s.home.path().display());
    let server = s.client.child_mut().expect("a process").id().to_string();
    let settle = Instant::now();
    let mut quiet_since: Option<Instant> = None;
    while settle.elapsed() < Duration::from_secs(60) {
        let idle = s
            .client
            .request("foe/stats", None, REQUEST)
            .is_ok_and(|v| v["jobsRunning"] == 0);
        if idle && besides_warm_clang(foe_e2e::processes_with_env(&marker), &server).len() <= 1 {
            let since = *quiet_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(1) {
                break;
            }
        } else {
            quiet_since = None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let me_and_server = besides_warm_clang(foe_e2e::processes_with_env(&marker), &server);
    let others: Vec<String> = me_and_server
        .iter()
        .filter(|p| p.split(':').next() != Some(server.as_str()))
        .map(|p| process_state(p.split(':').next().unwrap_or_default()))
        .collect();
    assert_eq!(
        me_and_server.len(),
        1,
        "only the server runs: {me_and_server:?}\nthe others:\n{}",
        others.join("\n")
    );
    // The server's scratch directory ($TMPDIR/foe-<uid>/<pid>) holds its lock and nothing else.
    let temps = scratch_contents(s.tmp.path());
    assert!(temps.is_empty(), "temporary files left: {temps:?}");
    let status = s.client.request("shutdown", None, REQUEST);
    assert!(status.is_ok());
    s.client.notify("exit", Value::Null).unwrap();
    assert_eq!(s.wait_exit(Duration::from_secs(10)), Some(0));
    s.assert_nothing_left();
}
