//! The driver's side of a shipped binary (`runtime/foe_confirm.c`): one line of argument words per call in, one
//! reply per call out (`r` returned, `s` stopped at a stub, `t` timed out), run in the worker's sandbox and kept
//! running between batches.

use super::harness::{Produced, ShippedEnd};
use super::trace::{self, RawEvent};
use crate::exec::RawOutput;
use crate::exec::WALL_FACTOR;
use crate::process::{self, SandboxLimits};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One reply of the driver: how the call ended, its events, how many it dropped, where it stopped.
pub(super) type Reply = (ShippedEnd, Vec<RawEvent>, usize, Option<String>, Produced);

/// A binary's driver kept running between batches: starting one in the sandbox costs about 10 ms, and a file of
/// 400 functions asks each binary for a batch per function. One process per binary, replaced when it crashed,
/// timed out, grew old, or was started by another thread (a child dies with the thread that started it).
struct LiveDriver {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    /// The driver's reply lines, read on a thread of their own so that a batch never waits on a full pipe.
    replies: mpsc::Receiver<String>,
    started: Instant,
    /// Calls it was sent.
    calls: usize,
    thread: std::thread::ThreadId,
}

/// A driver older than this is replaced before its next batch (its CPU-time backstop is cumulative).
const MAX_DRIVER_AGE: Duration = Duration::from_secs(600);
/// A driver that ran this many calls is replaced before its next batch: what the user's code leaks (memory it
/// allocates and never frees) must not make later calls fail where a fresh process would not.
const MAX_DRIVER_CALLS: usize = 4096;
/// CPU-seconds backstop of one driver process.
const DRIVER_CPU_SECONDS: u64 = 1800;

impl Drop for LiveDriver {
    fn drop(&mut self) {
        drop(self.stdin.take());
        // Returns at once for a driver [`Drivers`]' drop reaped already.
        let _ = process::end_sandboxed(&mut self.child);
    }
}

/// The drivers of a harness's binaries, one running process per binary.
#[derive(Default)]
pub(super) struct Drivers {
    /// Per binary and mode: a binary the flush-to-zero probe shares with P' (linked without FTZ/DAZ already) has
    /// a driver for each.
    live: HashMap<(PathBuf, DriverMode), LiveDriver>,
}

impl Drop for Drivers {
    /// Ends every driver at once (its input closed, the process inside killed) before each is reaped: the waits
    /// overlap instead of adding up (a file's harness ends about eight).
    fn drop(&mut self) {
        // Per driver still running, whether its inside was killed; one that ended is reaped already (and its
        // number may be another process's by now: it is not signalled).
        let killed: Vec<Option<bool>> = self
            .live
            .values_mut()
            .map(|d| {
                drop(d.stdin.take());
                matches!(d.child.try_wait(), Ok(None)).then(|| process::kill_inside(&d.child))
            })
            .collect();
        for (driver, killed) in self.live.values_mut().zip(killed) {
            if let Some(killed) = killed {
                let _ = process::reap_sandboxed(&mut driver.child, killed);
            }
        }
    }
}

impl Drivers {
    /// Runs `exe`'s driver on `lines`: its replies in order (fewer than `lines` when it crashed or timed out on
    /// the next one; the process is then gone) and whether a process had to be started.
    pub(super) fn run(
        &mut self,
        exe: &Path,
        lines: &[String],
        limits: DriverLimits,
        mode: DriverMode,
    ) -> Result<(Vec<Reply>, bool), String> {
        let limit_ms = limits.limit_ms;
        let key = (exe.to_path_buf(), mode);
        let reusable = self.live.get_mut(&key).is_some_and(|d| {
            d.thread == std::thread::current().id()
                && d.started.elapsed() < MAX_DRIVER_AGE
                && d.calls < MAX_DRIVER_CALLS
                && matches!(d.child.try_wait(), Ok(None))
        });
        if !reusable {
            tracing::trace!(exe = %exe.display(), ?mode, "starting a driver");
            self.live.remove(&key);
            self.live.insert(key.clone(), start(exe, limits, mode)?);
        }
        let driver = self.live.get_mut(&key).expect("just made");
        let exchanged = exchange(driver, lines, limit_ms);
        if !matches!(exchanged, Ok((_, true))) {
            self.live.remove(&key);
        }
        exchanged.map(|(replies, _)| (replies, !reusable))
    }
}

/// A driver's limits: per call, in milliseconds of CPU time, and for the process's memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct DriverLimits {
    pub limit_ms: u64,
    pub memory_mib: u64,
}

/// How a driver runs its binary's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum DriverMode {
    /// With the floating-point state the binary's start-up code left.
    AsLinked,
    /// With flush-to-zero and denormals-are-zero cleared first: the flush-to-zero probe, which so runs the
    /// fast-math binary itself instead of a link without `crtfastmath.o` (that object only sets them), under a
    /// path of its own so that its runs are cached apart from P''s.
    WithoutDazFtz,
}

/// Starts `exe`'s driver sandboxed (as the worker is: the shipped binary runs the user's code), writing only in a
/// scratch directory of its own.
fn start(exe: &Path, limits: DriverLimits, mode: DriverMode) -> Result<LiveDriver, String> {
    let DriverLimits {
        limit_ms,
        memory_mib,
    } = limits;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let mut cmd = process::command(exe, dir);
    // The driver's own limit per call.
    cmd.arg(limit_ms.to_string());
    if mode == DriverMode::WithoutDazFtz {
        cmd.arg("no-daz-ftz");
    }
    let limits = SandboxLimits {
        memory_mib: memory_mib.max(64),
        cpu_seconds: DRIVER_CPU_SECONDS,
    };
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("cannot make a scratch directory: {e}"))?;
    let (mut child, _layers) = process::spawn_sandboxed(cmd, exe, &scratch, limits)
        .map_err(|e| format!("cannot start the shipped binary: {e}"))?;
    let stdin = child.stdin.take();
    let mut stdout = child
        .stdout
        .take()
        .ok_or("the shipped binary has no stdout")?;
    let (send, replies) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(&mut stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    Ok(LiveDriver {
        child,
        stdin,
        replies,
        started: Instant::now(),
        calls: 0,
        thread: std::thread::current().id(),
    })
}

/// How often [`exchange`] looks at a driver that has not replied, for a call that waits for what never comes.
const WAITING_LOOK: Duration = Duration::from_millis(50);

/// Writes `lines` to the driver and reads a reply per line, up to a crash (the process ends without one), a
/// time-out (its `t` reply ends the process), a call that waits for what never comes (asleep in a futex wait
/// without a time-out, [`process::sandboxed_waits_forever`]: killed, the call timed out, as the driver's own
/// wall-clock limit would say seconds later; Box2D's `b2WaitSemaphore` waited 4 s so in each shipped binary) or
/// silence past the stall limit (the process is stuck with its signals blocked: killed). The replies, and whether
/// the driver is still running.
fn exchange(
    driver: &mut LiveDriver,
    lines: &[String],
    limit_ms: u64,
) -> Result<(Vec<Reply>, bool), String> {
    let text: String = lines.concat();
    driver.calls += lines.len();
    let mut stdin = driver
        .stdin
        .take()
        .ok_or("the shipped binary has no stdin")?;
    // On a thread: the driver reads a line only when it has answered the one before.
    let writer = std::thread::spawn(move || {
        let ok = stdin.write_all(text.as_bytes()).and_then(|_| stdin.flush());
        ok.is_ok().then_some(stdin)
    });
    // The driver replies after each call, within the CPU-time limit or `WALL_FACTOR` times it by the wall clock,
    // plus 5 s for starting (loading the binary and its libraries on a loaded machine).
    let stall = Duration::from_millis(limit_ms.saturating_mul(WALL_FACTOR + 1) + 5000);
    let mut replies = Vec::with_capacity(lines.len());
    let mut alive = true;
    let mut last_reply = Instant::now();
    while replies.len() < lines.len() {
        match driver.replies.recv_timeout(WAITING_LOOK) {
            Err(mpsc::RecvTimeoutError::Timeout) if last_reply.elapsed() < stall => {
                if process::sandboxed_waits_forever(&driver.child) {
                    tracing::debug!(
                        call = replies.len(),
                        "a shipped call waits for what never comes: timed out"
                    );
                    replies.push(parse_reply("t")?);
                    alive = false;
                    break;
                }
            }
            Ok(line) => {
                last_reply = Instant::now();
                let reply = match parse_reply(&line) {
                    Ok(reply) => reply,
                    Err(e) => {
                        // Its later replies cannot be told apart: the driver is ended.
                        let _ = process::end_sandboxed(&mut driver.child);
                        let _ = writer.join();
                        return Err(e);
                    }
                };
                let timed_out = reply.0 == ShippedEnd::TimedOut;
                replies.push(reply);
                if timed_out {
                    alive = false;
                    break;
                }
            }
            Err(_) => {
                alive = false;
                break;
            }
        }
    }
    if !alive {
        let _ = process::end_sandboxed(&mut driver.child);
    }
    driver.stdin = writer.join().ok().flatten();
    Ok((replies, alive && driver.stdin.is_some()))
}

/// One reply line of the driver.
fn parse_reply(line: &str) -> Result<Reply, String> {
    let mut words = line.split_whitespace();
    match words.next() {
        Some("r") => parse_returned(line, words),
        Some("s") => {
            let bits = words
                .next()
                .and_then(|w| u8::from_str_radix(w, 16).ok())
                .unwrap_or(0);
            let name = words.next().map(str::to_string);
            let (events, dropped) = trace::parse_events(words)?;
            Ok((
                ShippedEnd::Stopped(bits & 0xf),
                events,
                dropped,
                name,
                Produced::default(),
            ))
        }
        // A fault far from every mapping: the call crashed, the driver went on.
        Some("c") => Ok((
            ShippedEnd::Crashed,
            Vec::new(),
            0,
            None,
            Produced::default(),
        )),
        Some("t") => Ok((
            ShippedEnd::TimedOut,
            Vec::new(),
            0,
            None,
            Produced::default(),
        )),
        _ => Err(format!("the shipped binary replied `{line}`")),
    }
}

/// An `r` reply (its `words` after the `r`): the flags raised, the result, the changed words (`o:`) and the
/// events.
fn parse_returned<'a>(
    line: &str,
    mut words: impl Iterator<Item = &'a str>,
) -> Result<Reply, String> {
    let bits = words
        .next()
        .and_then(|w| u8::from_str_radix(w, 16).ok())
        .unwrap_or(0);
    let result = words
        .next()
        .and_then(|w| u64::from_str_radix(w, 16).ok())
        .unwrap_or(0);
    let mut produced = Produced {
        result,
        outputs: vec![],
    };
    let mut rest = vec![];
    for w in words {
        match w.strip_prefix("o:").map(parse_output) {
            Some(Some(o)) => produced.outputs.push(o),
            Some(None) => return Err(format!("the shipped binary replied `{line}`")),
            None => rest.push(w),
        }
    }
    let (events, dropped) = trace::parse_events(rest.into_iter())?;
    Ok((
        ShippedEnd::Raised(bits & 0xf),
        events,
        dropped,
        None,
        produced,
    ))
}

/// `PARAM:OFFSET:WORD` (hexadecimal) of an `o:` reply word.
fn parse_output(text: &str) -> Option<RawOutput> {
    let mut parts = text.split(':').map(|p| u64::from_str_radix(p, 16).ok());
    let (param, offset, word) = (parts.next()??, parts.next()??, parts.next()??);
    Some(RawOutput {
        param: u32::try_from(param).ok()?,
        offset: u32::try_from(offset).ok()?,
        word,
    })
}
