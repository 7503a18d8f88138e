//! Compiles through foe-cc (`server/foe-cc`), clang's driver kept warm: one process started on first use, confined
//! as clang is ([`super::confine_tool`]), that forks a child for each compile and runs clang's main in it. A
//! compile then costs clang's work without a `clang` process start (about a fifth of a GSL file's compile).
//!
//! Only what `clang` itself would do goes there: a compile (`-c`, `-S`, `-E`, `-M`, `-fsyntax-only`) by the very
//! clang foe-cc was built on (the same libraries; foe-cc refuses another), with the command's arguments, working
//! directory, standard input and nice value; its output, errors and exit code come back as [`ToolOutput`]. Everything else,
//! and everything when foe-cc is missing, refused or gone, runs `clang` as before: the warm path is a way of
//! running the same program, never a different result. `FOE_WARM_CLANG=0` turns it off.

use super::ToolOutput;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable that turns the warm path off (`0`), or names foe-cc's executable.
const ENV: &str = "FOE_WARM_CLANG";

/// How long after its own limit a compile is waited for before foe-cc is taken for gone.
const GRACE: Duration = Duration::from_secs(5);

#[derive(Serialize)]
struct Request<'a> {
    id: u64,
    cwd: &'a str,
    args: Vec<&'a str>,
    stdin: Option<&'a str>,
    stdout: &'a str,
    stderr: &'a str,
    timeout_ms: u64,
    nice: i32,
}

#[derive(Deserialize)]
struct Done {
    id: u64,
    status: Option<i32>,
    timed_out: bool,
}

#[derive(Deserialize)]
struct Hello {
    ready: Option<String>,
    unavailable: Option<String>,
}

/// The running foe-cc.
struct Server {
    /// The clang it runs (canonical path).
    clang: PathBuf,
    requests: Mutex<ChildStdin>,
    waiting: Arc<Mutex<HashMap<u64, Sender<Done>>>>,
    next_id: AtomicU64,
    alive: Arc<AtomicBool>,
    /// foe-cc's process id, and whether the thread that started it has reaped it.
    pid: u32,
    reaped: Arc<(Mutex<bool>, std::sync::Condvar)>,
}

/// foe-cc, once started; why not, when it could not be.
static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// Runs `cmd` through foe-cc when it is a compile by the clang foe-cc runs; `None` when it is not (or foe-cc is
/// not there, or went away meanwhile), for the caller to run `clang` itself.
pub(super) fn run(
    cmd: &Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> Option<std::io::Result<ToolOutput>> {
    if turned_off() {
        return None;
    }
    let args: Vec<&str> = cmd.get_args().map(|a| a.to_str()).collect::<Option<_>>()?;
    if !is_compile(&args) {
        return None;
    }
    let program = resolved(Path::new(cmd.get_program()))?;
    let server = SERVER.get_or_init(|| start(&program)).as_ref().ok()?;
    if server.clang != program || !server.alive.load(Ordering::Acquire) {
        return None;
    }
    let cwd = cmd.get_current_dir()?.to_str()?;
    server.compile(cwd, args, stdin, timeout, stop)
}

/// How compiles by `clang` run in this process, for `foe --version`: kept warm by foe-cc, or why not.
pub(super) fn describe(clang: &Path) -> String {
    if turned_off() {
        return format!("a {} process each ({ENV}=0)", clang.display());
    }
    let Some(program) = resolved(clang) else {
        return format!("{} not found", clang.display());
    };
    match SERVER.get_or_init(|| start(&program)) {
        Ok(server) if server.clang == program => {
            format!(
                "{} kept warm by foe-cc (a fork per compile)",
                program.display()
            )
        }
        Ok(server) => format!(
            "a {} process each (foe-cc runs {})",
            program.display(),
            server.clang.display()
        ),
        Err(why) => format!("a {} process each: {why}", program.display()),
    }
}

/// Ends foe-cc, if this process started it, and waits (at most two seconds) until it is reaped: foe ends with
/// nothing of its own still running (foe-cc would die with it anyway, but a moment after).
pub(super) fn shut_down() {
    let Some(Ok(server)) = SERVER.get() else {
        return;
    };
    if server.alive.swap(false, Ordering::AcqRel) {
        // SAFETY: kill(2) on foe-cc's pid, which is not reaped yet (the reader thread reaps it after `alive`
        // turns false on its side, and only then); it changes no memory of this process.
        unsafe { libc::kill(server.pid as libc::pid_t, libc::SIGKILL) };
    }
    let (done, ended) = &*server.reaped;
    let done = done.lock().unwrap_or_else(|p| p.into_inner());
    let _ = ended.wait_timeout_while(done, Duration::from_secs(2), |reaped| !*reaped);
}

/// Whether `FOE_WARM_CLANG=0` turned the warm path off.
fn turned_off() -> bool {
    std::env::var_os(ENV).is_some_and(|v| v == "0")
}

/// The file `program` runs, canonical (foe-cc is compared with it by path).
fn resolved(program: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(super::find_program(program)?).ok()
}

/// Whether clang's arguments ask for a compile (no link, no `-###`, no version or help).
fn is_compile(args: &[&str]) -> bool {
    let mode = args
        .iter()
        .any(|a| matches!(*a, "-c" | "-S" | "-E" | "-M" | "-MM" | "-fsyntax-only"));
    let other = args.iter().any(|a| {
        matches!(
            *a,
            "-###" | "-v" | "--version" | "-cc1" | "-help" | "--help"
        )
    });
    mode && !other
}

/// foe-cc's executable: `FOE_WARM_CLANG` when it names one, else beside foe's (or one level up, for the test
/// binaries in `target/*/deps`).
fn executable() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(ENV).filter(|v| v != "1" && !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join("foe-cc"), dir.parent()?.join("foe-cc")]
        .into_iter()
        .find(|p| p.is_file())
}

/// Starts foe-cc for `clang` on a thread of its own, which then reads its answers for as long as it lives (a
/// child dies with the thread that started it, so not with a passing one).
fn start(clang: &Path) -> Result<Server, String> {
    let exe = executable().ok_or("no foe-cc beside foe")?;
    let scratch = super::super::scratch::dir().map_err(|e| e.to_string())?;
    let mut cmd = super::command(&exe, scratch);
    cmd.arg(clang)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    super::confine_tool(&mut cmd, None).map_err(|e| e.to_string())?;
    let (ready_tx, ready_rx) = mpsc::channel();
    let waiting: Arc<Mutex<HashMap<u64, Sender<Done>>>> = Arc::default();
    let alive = Arc::new(AtomicBool::new(false));
    let reaped: Arc<(Mutex<bool>, std::sync::Condvar)> = Arc::default();
    let (reader_waiting, reader_alive, reader_reaped) =
        (waiting.clone(), alive.clone(), reaped.clone());
    let spawned = std::thread::Builder::new()
        .name("foe-cc".into())
        .spawn(move || {
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("cannot start foe-cc: {e}")));
                    return;
                }
            };
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return;
            };
            let mut lines = BufReader::new(stdout).lines();
            let hello = lines
                .next()
                .and_then(Result::ok)
                .and_then(|l| serde_json::from_str::<Hello>(&l).ok());
            match hello {
                Some(Hello { ready: Some(_), .. }) => {
                    reader_alive.store(true, Ordering::Release);
                    let _ = ready_tx.send(Ok((stdin, child.id())));
                }
                other => {
                    let why = other
                        .and_then(|h| h.unavailable)
                        .unwrap_or_else(|| "foe-cc did not start".into());
                    let _ = ready_tx.send(Err(why));
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
            }
            for line in lines.map_while(Result::ok) {
                let Ok(done) = serde_json::from_str::<Done>(&line) else {
                    continue;
                };
                let waiter = reader_waiting
                    .lock()
                    .ok()
                    .and_then(|mut w| w.remove(&done.id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(done);
                }
            }
            // foe-cc is gone: every compile still waiting runs clang itself.
            reader_alive.store(false, Ordering::Release);
            if let Ok(mut w) = reader_waiting.lock() {
                w.clear();
            }
            let _ = child.wait();
            let (done, ended) = &*reader_reaped;
            *done.lock().unwrap_or_else(|p| p.into_inner()) = true;
            ended.notify_all();
        });
    if let Err(e) = spawned {
        return Err(format!("no thread for foe-cc: {e}"));
    }
    let started = match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok((requests, pid))) => Ok(Server {
            clang: clang.to_path_buf(),
            requests: Mutex::new(requests),
            waiting,
            next_id: AtomicU64::new(1),
            alive,
            pid,
            reaped,
        }),
        Ok(Err(why)) => Err(why),
        Err(_) => Err("foe-cc did not say it was ready".into()),
    };
    match &started {
        Ok(_) => tracing::debug!(clang = %clang.display(), "compiles go through foe-cc"),
        Err(why) => tracing::debug!("foe runs clang itself: {why}"),
    }
    started
}

impl Server {
    fn compile(
        &self,
        cwd: &str,
        args: Vec<&str>,
        stdin: Option<&[u8]>,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Option<std::io::Result<ToolOutput>> {
        let dir = match super::super::scratch::tempdir("foe-cc") {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        let path = |name: &str| dir.path().join(name).to_str().map(str::to_owned);
        let (stdin_path, stdout_path, stderr_path) =
            (path("stdin")?, path("stdout")?, path("stderr")?);
        if let Some(data) = stdin {
            if let Err(e) = std::fs::write(&stdin_path, data) {
                return Some(Err(e));
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.waiting.lock().ok()?.insert(id, tx);
        let request = Request {
            id,
            cwd,
            args,
            stdin: stdin.map(|_| stdin_path.as_str()),
            stdout: &stdout_path,
            stderr: &stderr_path,
            timeout_ms: timeout.as_millis().max(1) as u64,
            nice: thread_nice(),
        };
        let started = Instant::now();
        if !self.send(&request) {
            self.waiting.lock().ok()?.remove(&id);
            return None;
        }
        let deadline = started + timeout + GRACE;
        let mut killed = false;
        let done = loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(done) => break done,
                Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if !killed && stop() {
                killed = true;
                self.send(&serde_json::json!({ "kill": id }));
            }
            if Instant::now() >= deadline {
                // foe-cc no longer answers: take it for gone.
                self.alive.store(false, Ordering::Release);
                self.waiting.lock().ok()?.remove(&id);
                return None;
            }
        };
        tracing::trace!(
            program = "clang (foe-cc)",
            status = ?done.status,
            ms = started.elapsed().as_millis() as u64,
            "tool ran"
        );
        let stdout = std::fs::read(&stdout_path).unwrap_or_default();
        let stderr = std::fs::read(&stderr_path).unwrap_or_default();
        Some(Ok(ToolOutput {
            status: done.status,
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            timed_out: done.timed_out,
        }))
    }

    /// Writes one request line; false when foe-cc cannot be written to (it is then taken for gone).
    fn send(&self, message: &impl Serialize) -> bool {
        let Ok(mut line) = serde_json::to_vec(message) else {
            return false;
        };
        line.push(b'\n');
        let sent = self
            .requests
            .lock()
            .is_ok_and(|mut w| w.write_all(&line).and_then(|()| w.flush()).is_ok());
        if !sent {
            self.alive.store(false, Ordering::Release);
        }
        sent
    }
}

/// The calling thread's nice value (Linux keeps one per thread; a `clang` it started would inherit it).
fn thread_nice() -> i32 {
    // SAFETY: reads this thread's own scheduling priority.
    let tid = unsafe { libc::gettid() };
    // SAFETY: as above; -1 is also an error value, which leaves the child at foe-cc's priority.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{command, confine_tool, run_child};

    /// clang's result on `source` with `args` (the output file `out` in a fresh directory): through foe-cc, and by
    /// running `clang` itself; each with the bytes of `out` when there is one.
    fn both_ways(source: &str, args: &[&str]) -> [(ToolOutput, Option<Vec<u8>>); 2] {
        let clang = crate::config::AnalysisConfig::default().clang;
        let dir = crate::scratch::tempdir("warm-test").expect("scratch directory");
        let way = |warm: bool| {
            let out_path = dir.path().join(if warm { "warm.o" } else { "cold.o" });
            let mut cmd = command(&clang, dir.path());
            cmd.args(
                args.iter()
                    .map(|a| a.replace("OUT", out_path.to_str().unwrap())),
            );
            let timeout = Duration::from_secs(60);
            let out = if warm {
                run(&cmd, Some(source.as_bytes()), timeout, &|| false).expect(
                    "foe-cc runs this compile (build it first: cargo build -p foe-cc; FOE_WARM_CLANG unset)",
                )
            } else {
                confine_tool(&mut cmd, None).expect("confined");
                run_child(cmd, Some(source.as_bytes()), timeout, &|| false)
            }
            .expect("clang ran");
            (out, std::fs::read(&out_path).ok())
        };
        [way(true), way(false)]
    }

    #[test]
    fn warm_and_cold_clang_build_the_same_object() {
        let source = "double f(double a, double b) { return a * b + a / b; }\n";
        let [(warm, warm_obj), (cold, cold_obj)] = both_ways(
            source,
            &[
                "-O2",
                "-ffast-math",
                "-gline-tables-only",
                "-c",
                "-x",
                "c",
                "-",
                "-o",
                "OUT",
            ],
        );
        assert_eq!(
            (warm.status, cold.status),
            (Some(0), Some(0)),
            "{}",
            warm.stderr
        );
        assert!(warm_obj.is_some(), "foe-cc wrote the object");
        assert_eq!(warm_obj, cold_obj, "the same object both ways");
    }

    #[test]
    fn warm_and_cold_clang_write_the_same_ir_to_stdout() {
        let source = "float g(float x) { return x != x ? 0.0f : x * 2.0f; }\n";
        let [(warm, _), (cold, _)] = both_ways(
            source,
            &["-S", "-emit-llvm", "-O1", "-x", "c", "-", "-o", "-"],
        );
        assert_eq!(warm.status, Some(0));
        assert!(String::from_utf8_lossy(&warm.stdout).contains("define"));
        assert_eq!(warm.stdout, cold.stdout);
    }

    #[test]
    fn warm_clang_reports_an_error_as_clang_does() {
        let source = "int f(void) { return undefined_name; }\n";
        let [(warm, _), (cold, _)] = both_ways(source, &["-c", "-x", "c", "-", "-o", "OUT"]);
        assert_eq!(warm.status, Some(1));
        assert_eq!(warm.status, cold.status);
        assert!(warm
            .stderr
            .contains("use of undeclared identifier 'undefined_name'"));
        assert_eq!(warm.stderr, cold.stderr);
    }

    #[test]
    fn only_compiles_go_warm() {
        assert!(is_compile(&["-O2", "-c", "-x", "c", "-", "-o", "x.o"]));
        assert!(is_compile(&["-S", "-emit-llvm", "-o", "-"]));
        assert!(!is_compile(&["x.o", "-o", "a.out"]));
        assert!(!is_compile(&["-###", "-c", "x.c"]));
        assert!(!is_compile(&["--version"]));
    }
}
