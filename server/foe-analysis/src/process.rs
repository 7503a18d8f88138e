//! The one place that spawns processes: every child gets a working directory, a clean environment, a time
//! limit and a parent-death signal (it ends when foe does); user code runs in the sandbox of [`crate::sandbox`].

use std::cell::RefCell;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod warm_clang;

pub use crate::sandbox::{Layers, SandboxLimits};

/// What a finished tool invocation produced.
#[derive(Debug)]
pub struct ToolOutput {
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub timed_out: bool,
}

thread_local! {
    /// Set by [`stop_tools_when`]: the tools this thread runs stop when it is set.
    static STOP: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// From now on, the tools this thread runs ([`run_tool`]) are killed as soon as `flag` is set, and none is
/// started after it (work in the background that must not outlive its analysis); `None` undoes it.
pub fn stop_tools_when(flag: Option<Arc<AtomicBool>>) {
    STOP.with(|s| *s.borrow_mut() = flag);
}

/// The flag [`stop_tools_when`] gave this thread, to hand on to the threads it starts.
pub fn tools_stop_flag() -> Option<Arc<AtomicBool>> {
    STOP.with(|s| s.borrow().clone())
}

/// Builds a command with the working directory and the minimal environment foe's children get.
pub fn command(program: impl AsRef<std::ffi::OsStr>, cwd: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(cwd).env_clear();
    for key in ["PATH", "HOME", "LANG", "TMPDIR", "LD_LIBRARY_PATH"] {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    cmd
}

/// The file `program` names: itself when it is a path, else the first match on `PATH`.
pub fn find_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return Some(program.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Runs a tool (clang, the linker, objcopy) to completion with `stdin` fed in, killing it after `timeout`, in
/// the compiler's sandbox ([`crate::sandbox::confine_tool`]): it writes only in foe's scratch directory
/// ([`crate::scratch`]) and foe's cache, where its outputs go, and its temporary files go there too.
///
/// A compile by the clang foe-cc runs goes through it ([`warm_clang`]): the same program on the same arguments,
/// without a process start.
pub fn run_tool(
    mut cmd: Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> std::io::Result<ToolOutput> {
    let flag = tools_stop_flag();
    let stopped = || flag.as_ref().is_some_and(|f| f.load(Ordering::Acquire));
    if !stopped() {
        if let Some(out) = warm_clang::run(&cmd, stdin, timeout, &stopped) {
            return out;
        }
    }
    confine_tool(&mut cmd, None)?;
    run_child(cmd, stdin, timeout, &|| false)
}

/// Ends the clang kept warm for this process's compiles (foe-cc), if any, and waits until it is gone: for the end
/// of `foe`, so that nothing it started outlives it.
pub fn end_warm_clang() {
    warm_clang::shut_down();
}

/// How compiles by `clang` run: kept warm by foe-cc (started now if it was not), or why each starts a process.
pub fn describe_compiles(clang: &Path) -> String {
    warm_clang::describe(clang)
}

/// Sets `cmd` up as [`run_tool`] runs it: dies with foe, confined ([`crate::sandbox::confine_tool`]) with foe's
/// scratch directory (its `TMPDIR`) and cache writable; the layers it gets are written to `report` when given
/// ([`crate::sandbox::probe_tool`]).
pub(crate) fn confine_tool(
    cmd: &mut Command,
    report: Option<std::os::fd::RawFd>,
) -> std::io::Result<()> {
    let mut writable = vec![crate::scratch::dir()?.to_path_buf()];
    if let Some(cache) = crate::scratch::cache_dir().filter(|c| c.is_dir()) {
        writable.push(cache);
    }
    let program = std::path::PathBuf::from(cmd.get_program());
    cmd.env("TMPDIR", &writable[0]);
    die_with_foe(cmd);
    crate::sandbox::confine_tool(cmd, &program, &writable, report);
    Ok(())
}

/// Runs one of foe's own programs (the solver child, a child `foe check`) to completion with `stdin` fed in,
/// outside the compiler's sandbox, killing it after `timeout` or as soon as `stop()` says so (reported as timed
/// out).
pub fn run_tool_until(
    mut cmd: Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<ToolOutput> {
    die_with_foe(&mut cmd);
    run_child(cmd, stdin, timeout, stop)
}

/// Runs `cmd` (its parent-death signal already set up) with pipes, a deadline and [`stop_tools_when`]'s flag.
fn run_child(
    mut cmd: Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<ToolOutput> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let flag = tools_stop_flag();
    let stopped = || flag.as_ref().is_some_and(|f| f.load(Ordering::Acquire));
    if stopped() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "stopped: the analysis ended",
        ));
    }
    let stop = &|| stop() || stopped();
    let started = Instant::now();
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd.spawn()?;
    if let Some(data) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
    }
    let mut out_pipe = child.stdout.take().expect("piped stdout");
    let mut err_pipe = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out_pipe.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err_pipe.read_to_end(&mut buf);
        buf
    });
    let (status, timed_out) = wait_until(&mut child, timeout, stop)?;
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    tracing::trace!(
        program,
        ?status,
        ms = started.elapsed().as_millis() as u64,
        "tool ran"
    );
    Ok(ToolOutput {
        status,
        stdout,
        stderr,
        timed_out,
    })
}

/// Waits for `child`, killing it at the deadline; returns its exit code (None when killed by a signal).
pub fn wait_with_deadline(
    child: &mut Child,
    timeout: Duration,
) -> std::io::Result<(Option<i32>, bool)> {
    wait_until(child, timeout, &|| false)
}

/// [`wait_with_deadline`], also killing `child` as soon as `stop()` says so.
pub(crate) fn wait_until(
    child: &mut Child,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<(Option<i32>, bool)> {
    wait_then(child, timeout, stop, &mut |child| {
        let _ = child.kill();
        child.wait()
    })
}

/// [`wait_until`] for a child of [`spawn_sandboxed`], ended with [`end_sandboxed`].
pub(crate) fn wait_sandboxed_until(
    child: &mut Child,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<(Option<i32>, bool)> {
    wait_then(child, timeout, stop, &mut end_sandboxed)
}

/// Waits for `child` until `timeout` or `stop()`, then ends it with `end`; its exit code and whether it was ended.
fn wait_then(
    child: &mut Child,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
    end: &mut dyn FnMut(&mut Child) -> std::io::Result<std::process::ExitStatus>,
) -> std::io::Result<(Option<i32>, bool)> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status.code(), false));
        }
        if Instant::now() >= deadline || stop() {
            return Ok((end(child)?.code(), true));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Makes the child end (SIGKILL) when foe's spawning thread ends, and not start if foe is already gone.
fn die_with_foe(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// How long [`end_sandboxed`] waits for the process between foe and the sandboxed one to reap it and end.
const REAP_GRACE: Duration = Duration::from_secs(1);

/// The processes inside a child of [`spawn_sandboxed`] (its children, as the kernel lists them; none where it does
/// not list them).
fn processes_inside(child: &Child) -> Vec<libc::pid_t> {
    let pid = child.id();
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Kills the processes inside a child of [`spawn_sandboxed`] (the process between then reaps them and ends);
/// whether the kernel listed any. Several children are ended sooner by killing inside all of them first, then
/// reaping each with [`reap_sandboxed`].
pub fn kill_inside(child: &Child) -> bool {
    let inside = processes_inside(child);
    for &p in &inside {
        // SAFETY: signals a child of our own child, listed by the kernel a moment ago; the process between cannot
        // reap it (and the number be reused) before being signalled itself, as it waits for this very process.
        unsafe {
            libc::kill(p, libc::SIGKILL);
        }
    }
    !inside.is_empty()
}

/// Ends a child of [`spawn_sandboxed`] and the process inside it, and reaps them: when this returns, neither
/// runs. The process inside (PID 1 of its namespace, a grandchild of foe) is killed first, so that the process
/// between, which waits for it, reaps it and ends; killing the two together would leave the inside one to die on
/// its own time, an orphan that outlives foe for a moment. Where the kernel does not list the child's children
/// (or the process between lingers), the whole process group is killed as before.
pub fn end_sandboxed(child: &mut Child) -> std::io::Result<std::process::ExitStatus> {
    if let Some(status) = child.try_wait()? {
        return Ok(status);
    }
    let killed = kill_inside(child);
    reap_sandboxed(child, killed)
}

/// Reaps a child of [`spawn_sandboxed`] whose inside processes [`kill_inside`] killed (`inside_killed`): the
/// process between is given a moment to reap them and end; else (or when it lingers) its whole process group is
/// killed.
pub fn reap_sandboxed(
    child: &mut Child,
    inside_killed: bool,
) -> std::io::Result<std::process::ExitStatus> {
    let pid = child.id();
    if inside_killed {
        let deadline = Instant::now() + REAP_GRACE;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // SAFETY: signals the process group the sandbox put the child in.
    unsafe {
        libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
    }
    let _ = child.kill();
    child.wait()
}

/// Whether the process a child of [`spawn_sandboxed`] runs (the one inside, else the child itself) sleeps in a
/// futex wait without a time-out (`/proc/PID/syscall`): a semaphore no thread posts, a lock no thread releases, a
/// thread that never started. The sandbox lets it start no thread and share no memory, so nothing can wake it but
/// a signal: the sandboxed call's own wall-clock limit would end it, seconds later. `false` when the kernel does
/// not say (the file unreadable, the process gone or running).
pub fn sandboxed_waits_forever(child: &Child) -> bool {
    let target = processes_inside(child)
        .first()
        .map_or(child.id(), |&p| p as u32);
    let Ok(call) = std::fs::read_to_string(format!("/proc/{target}/syscall")) else {
        return false;
    };
    // `NUMBER ARG1 ... ARG6 SP PC`, the arguments in hexadecimal; futex(uaddr, op, val, timeout, ...).
    let words: Vec<&str> = call.split_whitespace().collect();
    let arg = |i: usize| {
        words
            .get(i)
            .and_then(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok())
    };
    const FUTEX_CMD_MASK: u64 = !(libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME) as u64;
    let waits = |op: u64| {
        let cmd = op & FUTEX_CMD_MASK;
        cmd == libc::FUTEX_WAIT as u64 || cmd == libc::FUTEX_WAIT_BITSET as u64
    };
    words.first().and_then(|n| n.parse::<i64>().ok()) == Some(libc::SYS_futex)
        && arg(2).is_some_and(waits)
        && arg(4) == Some(0)
}

/// Spawns `exe` (the command `cmd` runs) on the user's code in the sandbox ([`crate::sandbox`]), with `scratch`
/// as its only writable directory and working directory: stdin/stdout piped for the batch protocol, stderr
/// discarded. Returns the child (its own process group) and the sandbox layers it got.
pub fn spawn_sandboxed(
    mut cmd: Command,
    exe: &Path,
    scratch: &Path,
    limits: SandboxLimits,
) -> std::io::Result<(Child, Layers)> {
    cmd.current_dir(scratch)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    crate::sandbox::spawn(cmd, exe, scratch, limits)
}
