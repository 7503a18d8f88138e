//! The driver's side of a shipped binary (`runtime/foe_confirm.c`): one line of argument words per call in, one
//! reply per call out (`r` returned, `s` stopped at a stub, `t` timed out), run in the worker's sandbox.

use super::harness::{Produced, ShippedEnd};
use super::trace::{self, RawEvent};
use crate::exec::RawOutput;
use crate::process::{self, SandboxLimits};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

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
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Duration::from_millis(limit_ms.saturating_mul(lines.len() as u64 + 2) + 5000);
    let waited = process::wait_with_deadline(&mut child, deadline);
    let _ = writer.join();
    let out = reader.join().unwrap_or_default();
    waited.map_err(|e| format!("cannot wait for the shipped binary: {e}"))?;
    Ok(out)
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
