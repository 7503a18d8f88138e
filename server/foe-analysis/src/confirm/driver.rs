//! The driver's side of a shipped binary (`runtime/foe_confirm.c`): one line of argument words per call in, one
//! reply per call out (`r` returned, `s` stopped at a stub, `t` timed out), run in the worker's sandbox.

use super::harness::{Produced, ShippedEnd};
use super::trace::{self, RawEvent};
use crate::exec::RawOutput;
use crate::exec::WALL_FACTOR;
use crate::process::{self, SandboxLimits};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One reply of the driver: how the call ended, its events, how many it dropped, where it stopped.
pub(super) type Reply = (ShippedEnd, Vec<RawEvent>, usize, Option<String>, Produced);

/// Runs the driver on `lines` until it exits; its replies in order (fewer than `lines` when it crashed or timed
/// out), each with its events and how many it dropped.
pub(super) fn run_driver(
    exe: &Path,
    lines: &[String],
    limit_ms: u64,
    memory_mib: u64,
) -> Result<Vec<Reply>, String> {
    let out = exchange(exe, lines, limit_ms, memory_mib)?;
    parse_replies(&out)
}

/// Starts the driver sandboxed, writes `lines` to it and reads all it writes until it exits.
fn exchange(
    exe: &Path,
    lines: &[String],
    limit_ms: u64,
    memory_mib: u64,
) -> Result<String, String> {
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let mut cmd = process::command(exe, dir);
    cmd.arg(limit_ms.to_string());
    let limits = SandboxLimits {
        memory_mib: memory_mib.max(64),
        cpu_seconds: (lines.len() as u64 * limit_ms / 1000).max(1) + 10,
    };
    // The shipped binary runs the user's code: in the same sandbox as the worker, writing only in a scratch
    // directory of its own.
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("cannot make a scratch directory: {e}"))?;
    let (mut child, _layers) = process::spawn_sandboxed(cmd, exe, &scratch, limits)
        .map_err(|e| format!("cannot start the shipped binary: {e}"))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or("the shipped binary has no stdin")?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or("the shipped binary has no stdout")?;
    let text: String = lines.concat();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(text.as_bytes());
    });
    // The driver replies after each call, within the CPU-time limit or `WALL_FACTOR` times it by the wall clock:
    // silence longer than that means it is stuck (signals blocked by the user's code). How long a whole batch
    // takes depends on the load, so it decides nothing but a generous backstop.
    let started = Instant::now();
    let last_reply_ms = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&last_reply_ms);
    let reader = std::thread::spawn(move || read_all(&mut stdout, started, &seen));
    // (Plus 5 s for starting: loading the binary and its libraries on a loaded machine.)
    let stall = limit_ms.saturating_mul(WALL_FACTOR + 1) + 5000;
    let backstop = Duration::from_millis(
        limit_ms
            .saturating_mul(WALL_FACTOR)
            .saturating_mul(lines.len() as u64 + 2)
            + 5000,
    );
    let stuck = || {
        let since = started.elapsed().as_millis() as u64;
        since.saturating_sub(last_reply_ms.load(Ordering::Relaxed)) > stall
    };
    let waited = process::wait_sandboxed_until(&mut child, backstop, &stuck);
    let _ = writer.join();
    let out = reader.join().unwrap_or_default();
    waited.map_err(|e| format!("cannot wait for the shipped binary: {e}"))?;
    Ok(out)
}

/// Reads `stdout` to its end, noting in `seen` when each piece arrived (milliseconds after `started`).
fn read_all(stdout: &mut impl Read, started: Instant, seen: &AtomicU64) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 1 << 14];
    loop {
        match stdout.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(0) | Err(_) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                seen.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The driver's replies, one a line, up to the first time-out.
fn parse_replies(out: &str) -> Result<Vec<Reply>, String> {
    let mut ends = Vec::new();
    for line in out.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("r") => ends.push(parse_returned(line, words)?),
            Some("s") => {
                let bits = words
                    .next()
                    .and_then(|w| u8::from_str_radix(w, 16).ok())
                    .unwrap_or(0);
                let name = words.next().map(str::to_string);
                let (events, dropped) = trace::parse_events(words)?;
                ends.push((
                    ShippedEnd::Stopped(bits & 0xf),
                    events,
                    dropped,
                    name,
                    Produced::default(),
                ));
            }
            Some("t") => {
                ends.push((
                    ShippedEnd::TimedOut,
                    Vec::new(),
                    0,
                    None,
                    Produced::default(),
                ));
                break;
            }
            _ => return Err(format!("the shipped binary replied `{line}`")),
        }
    }
    Ok(ends)
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
