//! Hostile C files (`fixtures/hostile/*.c`): each tries, from code the analysis never asked to run, to kill or
//! stop foe, read its environment, write in `$HOME` or the workspace, reach a local listener, outlive foe, fork
//! without end, forge replies, or capture the runtime's symbols; each has a benign `control` function whose
//! divergence must still be reported. For every file: `foe check` ends with 0 or 1 in bounded time, the
//! control's finding is there, no canary file appears and nothing is deleted, nothing reaches the listener,
//! and no process started by foe is left.
//!
//! Run as root and, by `scripts/test.sh`, as an unprivileged user (the sandbox must hold without root).

use foe_e2e::foe_binary;
use serde_json::Value;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The port the hostile files connect to as written (`init_connect.c`); each run of the test listens on a port the
/// system hands out and writes it into its copy of the file, so that test runs side by side on one machine (a
/// stress run beside the suite) never contend for one port.
const WRITTEN_PORT: &str = "29317";
/// The bound on one `foe check` of a small hostile file.
const TIME_LIMIT: Duration = Duration::from_secs(120);

fn hostile_files() -> Vec<PathBuf> {
    let dir = foe_e2e::repo_root().join("fixtures/hostile");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures/hostile exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the hostile suite is in place");
    files
}

struct Listener {
    connections: Arc<AtomicUsize>,
    port: u16,
}

impl Listener {
    /// Listens on a loopback port of the system's choosing, counting connections.
    fn start() -> Option<Listener> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).ok()?;
        let port = listener.local_addr().ok()?.port();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                count.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut s) = stream {
                    let mut buf = [0u8; 64];
                    let _ = s.read(&mut buf);
                }
            }
        });
        Some(Listener { connections, port })
    }
}

/// Runs `foe check` on a copy of `file` in a fresh workspace with a fresh `$HOME`; returns the problems found.
fn check_hostile(file: &Path, listener: &Listener) -> Vec<String> {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let home = tempfile::Builder::new()
        .prefix("foe-hostile-home")
        .tempdir()
        .unwrap();
    let workspace = tempfile::Builder::new()
        .prefix("foe-hostile-ws")
        .tempdir()
        .unwrap();
    for dir in [home.path(), workspace.path()] {
        std::fs::write(dir.join("precious"), "keep me").unwrap();
    }
    let source = workspace.path().join(&name);
    let bytes = std::fs::read(file).unwrap();
    let copy = match String::from_utf8(bytes) {
        Ok(text) => text
            .replace(WRITTEN_PORT, &listener.port.to_string())
            .into_bytes(),
        Err(e) => e.into_bytes(),
    };
    std::fs::write(&source, copy).unwrap();
    let before = listener.connections.load(Ordering::SeqCst);
    let started = Instant::now();
    let mut child = Command::new(foe_binary())
        .args(["check", "--format", "json", "--solver-timeout-ms", "2000"])
        .arg(&source)
        .current_dir(workspace.path())
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("foe starts");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = vec![];
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = vec![];
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let mut problems = vec![];
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            problems.push(format!("{name}: foe did not finish in {TIME_LIMIT:?}"));
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out_reader.join().unwrap();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
    if let Some(status) = status {
        match status.code() {
            Some(0) | Some(1) => {}
            other => problems.push(format!(
                "{name}: foe ended with {other:?} ({status}); stderr: {stderr}"
            )),
        }
    }
    match serde_json::from_slice::<Value>(&stdout) {
        Ok(report) => {
            let control = report["functions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|f| f["name"] == "control");
            let found = control.is_some_and(|f| {
                f["divergences"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|d| d["location"]["line"].as_u64().is_some()))
            });
            if !found {
                problems.push(format!(
                    "{name}: the control's divergence is missing: {report}"
                ));
            }
        }
        Err(e) => problems.push(format!("{name}: no JSON report ({e}); stderr: {stderr}")),
    }
    // Anything left of foe's children has the unique $HOME in its environment.
    std::thread::sleep(Duration::from_millis(200));
    let left = foe_e2e::processes_with_env(&format!("HOME={}", home.path().display()));
    if !left.is_empty() {
        problems.push(format!("{name}: processes outlived foe: {left:?}"));
    }
    for dir in [home.path(), workspace.path()] {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let f = entry.file_name().to_string_lossy().into_owned();
            if f.contains("canary") {
                problems.push(format!(
                    "{name}: canary {} appeared",
                    entry.path().display()
                ));
            }
        }
        if !dir.join("precious").exists() {
            problems.push(format!(
                "{name}: {} was deleted",
                dir.join("precious").display()
            ));
        }
    }
    if listener.connections.load(Ordering::SeqCst) != before {
        problems.push(format!(
            "{name}: something connected to the test's listener"
        ));
    }
    problems
}

#[test]
fn hostile_files_are_contained() {
    let listener = Listener::start().expect("the test's listener binds a loopback port");
    let mut problems = vec![];
    for file in hostile_files() {
        problems.extend(check_hostile(&file, &listener));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
