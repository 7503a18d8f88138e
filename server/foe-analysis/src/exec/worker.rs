//! The worker process and its binary protocol (see `runtime/foe_runtime.h`): sending batches, reading
//! records with a stall deadline, and restarting after a crash, time-out or unexplained death so the rest
//! of the batch still runs.
//!
//! The worker runs the user's code, so its replies are untrusted input: a record holds at most the runtime's
//! trace capacity of events, every record must be the next one expected (input and build), each must arrive
//! within the stall limit (a trickle of bytes does not keep a record alive), the hello comes once, and anything
//! else ends the batch with an error on that function, never a panic and never unbounded memory.

use super::{ExecError, RawEnd, RawOutput, RawPair, RawRun};
use crate::process::{self, SandboxLimits};
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

const BATCH_MAGIC: u32 = 0x4245_4f46;
const FLAG_P_FTZ: u32 = 1;
const FLAG_PP_FTZ: u32 = 2;
const FLAG_FLUSH_EACH: u32 = 4;
const FLAG_SKIP_FIRST_P: u32 = 8;
const FLAG_VALUES: u32 = 16;
const BUILD_DONE: u8 = 0xff;
const STATUS_RETURNED: u8 = 0;
const STATUS_CRASHED: u8 = 1;
const STATUS_TIMED_OUT: u8 = 2;
const STATUS_EXITED: u8 = 3;
const STATUS_ERROR: u8 = 4;
const STATUS_UNDEFINED: u8 = 5;
const STATUS_STOPPED: u8 = 6;
const STATUS_UNKNOWN_DATA: u8 = 7;
const STATUS_OUTSIDE: u8 = 8;
/// The [`STATUS_ERROR`] detail of an entry the runtime could not give a buffer (`FOE_ERROR_NO_BUFFER`).
const ERROR_NO_BUFFER: u32 = 7;
const RECORD_TRUNCATED: u16 = 1;
/// A crash the worker survived (`FOE_RECORD_GOES_ON`: the run accessed an address far from every mapping).
const RECORD_GOES_ON: u16 = 2;
const HELLO_INPUT: u32 = u32::MAX;
const PROTOCOL_VERSION: u32 = 7;
const RECORD_BYTES: usize = 40;
const OUTPUT_BYTES: usize = 16;
/// Most events one record may carry (`FOE_TRACE_CAP` of the runtime).
pub const MAX_EVENTS: usize = 4096;
/// Most outputs one record may carry (`FOE_OUTPUT_CAP` of the runtime).
pub const MAX_OUTPUTS: usize = 1024;
/// Most values one record may carry (`FOE_VALUE_CAP` of the runtime).
pub const MAX_VALUES: usize = 4096;
/// Most argument words sent in one batch (4 MiB); bounds the worker's input buffer.
const MAX_BATCH_WORDS: usize = 1 << 19;
/// A worker older than this is replaced before the next batch (its CPU-time limit is cumulative).
const MAX_WORKER_AGE: Duration = Duration::from_secs(1200);
/// CPU-seconds backstop of one worker process.
const WORKER_CPU_SECONDS: u64 = 3600;

/// How many times an execution's CPU-time limit it may wait without using the CPU (`FOE_WALL_FACTOR` of the
/// runtime): the wall-clock safety net of a run that sleeps.
pub const WALL_FACTOR: u64 = 8;

/// How the worker runs each execution.
#[derive(Debug, Clone, Copy)]
pub struct ExecLimits {
    /// CPU time of one execution of one build, in milliseconds; it may wait [`WALL_FACTOR`] times as long.
    pub timeout_ms: u64,
    /// Operations the runtime checks in one execution of one build before it times out (0: no limit).
    pub op_limit: u32,
    pub memory_mib: u64,
    pub p_ftz: bool,
    pub pp_ftz: bool,
    /// Record each operation's value (`FOE_FLAG_VALUES`): for the few runs whose values are compared.
    pub values: bool,
}

impl ExecLimits {
    /// How long the parent waits for any reply byte before it kills the worker. The worker flushes at least
    /// every 50 ms while records complete and reports its own time-outs after at most 1.25 × the limit of CPU
    /// time or [`WALL_FACTOR`] times that of wall-clock time, so silence this long means it is stuck (signals
    /// blocked by the user's code, say).
    fn stall_limit(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.saturating_mul(WALL_FACTOR * 5 + 2) / 4 + 1000)
    }
}

/// A running worker.
pub struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    buf: Vec<u8>,
    start: usize,
    started: Instant,
    greeted: bool,
}

struct Record {
    input: u32,
    build: u8,
    status: u8,
    flags: u16,
    detail: u32,
    ret: u64,
    /// Operations the run checked (its work).
    ops: u64,
    events: Vec<u32>,
    outputs: Vec<RawOutput>,
    values: Vec<RawOutput>,
}

enum Reply {
    Record(Record),
    /// The pipe closed or nothing arrived within the stall limit.
    Gone {
        stalled: bool,
    },
}

impl Worker {
    pub fn spawn(exe: &Path, dir: &Path, limits: &ExecLimits) -> Result<Worker, ExecError> {
        let scratch = dir.join("scratch");
        std::fs::create_dir_all(&scratch)?;
        let cmd = process::command(exe, &scratch);
        let sandbox = SandboxLimits {
            memory_mib: limits.memory_mib,
            cpu_seconds: WORKER_CPU_SECONDS,
        };
        let (mut child, _layers) = process::spawn_sandboxed(cmd, exe, &scratch, sandbox)
            .map_err(|e| ExecError::Worker(format!("cannot start the worker: {e}")))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| ExecError::Worker("the worker has no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| ExecError::Worker("the worker has no stdout".into()))?;
        Ok(Worker {
            child,
            stdin,
            stdout,
            buf: Vec::with_capacity(1 << 16),
            start: 0,
            started: Instant::now(),
            greeted: false,
        })
    }

    /// Kills the worker and reaps it ([`process::end_sandboxed`]); returns how it ended.
    fn kill(mut self) -> Option<std::process::ExitStatus> {
        process::end_sandboxed(&mut self.child).ok()
    }

    /// Reaps a worker that is exiting by itself (after a terminal record), killing it if it lingers.
    fn reap(mut self) -> Option<std::process::ExitStatus> {
        match process::wait_sandboxed_until(&mut self.child, Duration::from_secs(2), &|| false) {
            Ok(_) => self.child.wait().ok(),
            Err(_) => self.kill(),
        }
    }

    fn send(&mut self, header: [u32; 8], words: &[u64]) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(32 + words.len() * 8);
        for h in header {
            bytes.extend_from_slice(&h.to_le_bytes());
        }
        for w in words {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        self.stdin.write_all(&bytes)?;
        self.stdin.flush()
    }

    /// The next record, which must be complete within `stall`.
    fn next(&mut self, stall: Duration) -> Result<Reply, ExecError> {
        let deadline = Instant::now() + stall;
        loop {
            if let Some(rec) = self.parse()? {
                return Ok(Reply::Record(rec));
            }
            match self.fill(deadline)? {
                Fill::Data => {}
                Fill::Eof => return Ok(Reply::Gone { stalled: false }),
                Fill::Stalled => return Ok(Reply::Gone { stalled: true }),
            }
        }
    }

    fn parse(&mut self) -> Result<Option<Record>, ExecError> {
        let avail = &self.buf[self.start..];
        if avail.len() < RECORD_BYTES {
            return Ok(None);
        }
        let u32_at =
            |o: usize| u32::from_le_bytes([avail[o], avail[o + 1], avail[o + 2], avail[o + 3]]);
        let nevents = u32_at(12) as usize;
        if nevents > MAX_EVENTS {
            return Err(ExecError::Worker(format!(
                "malformed reply: a record claims {nevents} events (at most {MAX_EVENTS})"
            )));
        }
        let noutputs = u32_at(24) as usize;
        if noutputs > MAX_OUTPUTS || (noutputs > 0 && avail[5] != STATUS_RETURNED) {
            return Err(ExecError::Worker(format!(
                "malformed reply: a record claims {noutputs} outputs (at most {MAX_OUTPUTS}, and only for a \
                 run that returned)"
            )));
        }
        let nvalues = u32_at(28) as usize;
        if nvalues > MAX_VALUES
            || (nvalues > 0 && !matches!(avail[5], STATUS_RETURNED | STATUS_STOPPED))
        {
            return Err(ExecError::Worker(format!(
                "malformed reply: a record claims {nvalues} values (at most {MAX_VALUES}, and only for a run \
                 that returned or stopped)"
            )));
        }
        let events_end = RECORD_BYTES + nevents * 4;
        let outputs_end = events_end + noutputs * OUTPUT_BYTES;
        let total = outputs_end + nvalues * OUTPUT_BYTES;
        if avail.len() < total {
            return Ok(None);
        }
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&avail[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let events = (0..nevents).map(|i| u32_at(RECORD_BYTES + 4 * i)).collect();
        let triple = |at: usize| RawOutput {
            param: u32_at(at),
            offset: u32_at(at + 4),
            word: u64_at(at + 8),
        };
        let outputs = (0..noutputs)
            .map(|i| triple(events_end + OUTPUT_BYTES * i))
            .collect();
        let values = (0..nvalues)
            .map(|i| triple(outputs_end + OUTPUT_BYTES * i))
            .collect();
        let rec = Record {
            input: u32_at(0),
            build: avail[4],
            status: avail[5],
            flags: u16::from_le_bytes([avail[6], avail[7]]),
            detail: u32_at(8),
            ret: u64_at(16),
            ops: u64_at(32),
            events,
            outputs,
            values,
        };
        self.start += total;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(rec))
    }

    /// Reads what the worker sent until `deadline`. The buffer holds at most one partial record (bounded by
    /// [`MAX_EVENTS`]) plus one read.
    fn fill(&mut self, deadline: Instant) -> Result<Fill, ExecError> {
        if self.start > 0 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let fd = self.stdout.as_raw_fd();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Fill::Stalled);
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: polls one valid descriptor owned by `self.stdout`.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(ExecError::Io(e));
            }
            if r == 0 {
                continue;
            }
            let len = self.buf.len();
            self.buf.resize(len + (1 << 16), 0);
            match self.stdout.read(&mut self.buf[len..]) {
                Ok(0) => {
                    self.buf.truncate(len);
                    return Ok(Fill::Eof);
                }
                Ok(n) => {
                    self.buf.truncate(len + n);
                    return Ok(Fill::Data);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => self.buf.truncate(len),
                Err(_) => {
                    self.buf.truncate(len);
                    return Ok(Fill::Eof);
                }
            }
        }
    }
}

enum Fill {
    Data,
    Eof,
    Stalled,
}

/// Runs entry `function` on `n` inputs of `nargs` words each (`words` holds `n * nargs`), restarting the
/// worker in `slot` as needed. Returns one pair per input, in order; counts worker starts in `starts`.
#[allow(clippy::too_many_arguments)]
pub fn run_batches(
    slot: &mut Option<Worker>,
    exe: &Path,
    dir: &Path,
    limits: &ExecLimits,
    function: u32,
    nargs: usize,
    n: usize,
    words: &[u64],
    starts: &mut u64,
) -> Result<Vec<RawPair>, ExecError> {
    let mut run = Batches {
        slot,
        p: vec![None; n],
        pp: vec![None; n],
        next: (0, 0),
        flush_each: false,
    };
    let chunk = (MAX_BATCH_WORDS / nargs.max(1)).max(1);
    let stall = limits.stall_limit();
    while run.next.0 < n {
        run.ensure_worker(exe, dir, limits, starts)?;
        let count = (n - run.next.0).min(chunk);
        let end = run.next.0 + count;
        let header = [
            BATCH_MAGIC,
            function,
            nargs as u32,
            count as u32,
            run.next.0 as u32,
            run.flags(limits),
            limits.timeout_ms.min(u32::MAX as u64) as u32,
            limits.op_limit,
        ];
        // A failed send means the worker died; its replies (maybe a hello) and its end are read below.
        let _ = worker_mut(run.slot).send(header, &words[run.next.0 * nargs..end * nargs]);
        run.read_batch(stall, end)?;
    }
    run.p
        .into_iter()
        .zip(run.pp)
        .map(|(p, pp)| match (p, pp) {
            (Some(p), Some(pp)) => Ok(RawPair { p, pp }),
            _ => Err(ExecError::Worker(
                "a run is missing from the replies".into(),
            )),
        })
        .collect()
}

/// One [`run_batches`]: the worker slot and the runs received so far.
struct Batches<'a> {
    slot: &'a mut Option<Worker>,
    p: Vec<Option<RawRun>>,
    pp: Vec<Option<RawRun>>,
    /// The next (input, build) whose record is expected; build 0 = P, 1 = P'.
    next: (usize, u8),
    /// Whether the worker flushes after each run (set after an unexplained death).
    flush_each: bool,
}

/// Whether a batch's replies go on after one.
enum Flow {
    More,
    BatchOver,
}

impl Batches<'_> {
    /// Replaces a worker past [`MAX_WORKER_AGE`] and starts one if none runs.
    fn ensure_worker(
        &mut self,
        exe: &Path,
        dir: &Path,
        limits: &ExecLimits,
        starts: &mut u64,
    ) -> Result<(), ExecError> {
        if self
            .slot
            .as_ref()
            .is_some_and(|w| w.started.elapsed() > MAX_WORKER_AGE)
        {
            if let Some(w) = self.slot.take() {
                w.kill();
            }
        }
        if self.slot.is_none() {
            *self.slot = Some(Worker::spawn(exe, dir, limits)?);
            *starts += 1;
        }
        Ok(())
    }

    /// The next batch's header flags.
    fn flags(&self, limits: &ExecLimits) -> u32 {
        let mut flags = 0;
        if limits.p_ftz {
            flags |= FLAG_P_FTZ;
        }
        if limits.pp_ftz {
            flags |= FLAG_PP_FTZ;
        }
        if self.flush_each {
            flags |= FLAG_FLUSH_EACH;
        }
        if self.next.1 == 1 {
            flags |= FLAG_SKIP_FIRST_P;
        }
        if limits.values {
            flags |= FLAG_VALUES;
        }
        flags
    }

    /// Reads the replies to the batch sent, up to input `end`, until it is over (done, or the worker ended).
    fn read_batch(&mut self, stall: Duration, end: usize) -> Result<(), ExecError> {
        loop {
            let reply = match worker_mut(self.slot).next(stall) {
                Ok(reply) => reply,
                Err(e) => {
                    kill(self.slot);
                    return Err(e);
                }
            };
            let flow = match reply {
                Reply::Record(rec) if rec.build == BUILD_DONE => self.on_done(&rec, end)?,
                Reply::Record(rec) => self.on_record(rec, end)?,
                Reply::Gone { stalled } => self.on_gone(stalled)?,
            };
            if let Flow::BatchOver = flow {
                return Ok(());
            }
        }
    }

    /// A record of no build: the hello, the worker's rejection of the batch, or the batch's end.
    fn on_done(&mut self, rec: &Record, end: usize) -> Result<Flow, ExecError> {
        let slot = &mut *self.slot;
        if rec.input == HELLO_INPUT && rec.status == STATUS_RETURNED {
            if worker_mut(slot).greeted {
                kill(slot);
                return Err(ExecError::Worker("malformed reply: a second hello".into()));
            }
            if rec.detail != PROTOCOL_VERSION {
                return Err(ExecError::Worker(format!(
                    "the worker speaks protocol {} instead of {PROTOCOL_VERSION}",
                    rec.detail
                )));
            }
            worker_mut(slot).greeted = true;
            return Ok(Flow::More);
        }
        if rec.status == STATUS_ERROR {
            kill(slot);
            return Err(ExecError::Worker(match rec.detail {
                ERROR_NO_BUFFER => {
                    "the worker could not map a pointer parameter's buffer".to_string()
                }
                code => format!("the worker rejected a batch (code {code})"),
            }));
        }
        if self.next != (end, 0) {
            kill(slot);
            return Err(ExecError::Worker("the worker ended a batch early".into()));
        }
        Ok(Flow::BatchOver)
    }

    /// The record of one run: it must be the next one expected; stored, and the batch is over when the worker
    /// exits after it.
    fn on_record(&mut self, rec: Record, end: usize) -> Result<Flow, ExecError> {
        let slot = &mut *self.slot;
        if !worker_mut(slot).greeted {
            kill(slot);
            return Err(ExecError::Worker(
                "malformed reply: a record before the hello".into(),
            ));
        }
        let next = self.next;
        if next.0 >= end || rec.input as usize != next.0 || rec.build != next.1 {
            kill(slot);
            return Err(ExecError::Worker(format!(
                "unexpected record for input {} build {} (expected {} build {})",
                rec.input, rec.build, next.0, next.1
            )));
        }
        let end = match rec.status {
            STATUS_RETURNED => RawEnd::Returned(rec.ret),
            STATUS_CRASHED => RawEnd::Crashed(rec.detail as i32),
            STATUS_TIMED_OUT => RawEnd::TimedOut,
            STATUS_EXITED => RawEnd::Exited(rec.detail as i32),
            STATUS_UNDEFINED => RawEnd::Undefined(rec.detail),
            STATUS_STOPPED => RawEnd::Stopped(rec.detail),
            STATUS_UNKNOWN_DATA => RawEnd::UnknownData(rec.detail),
            STATUS_OUTSIDE => RawEnd::Outside(rec.detail),
            other => {
                kill(slot);
                return Err(ExecError::Worker(format!("unknown record status {other}")));
            }
        };
        // A run that read unknown data ends at the read, one that reached outside one of the file's arrays before the
        // access (`__foe_bounds`), one that accessed an address far from every mapping at it; the worker goes on
        // (foe_on_crash).
        let survived = matches!(end, RawEnd::Crashed(_)) && rec.flags & RECORD_GOES_ON != 0;
        let terminal = !survived
            && !matches!(
                end,
                RawEnd::Returned(_)
                    | RawEnd::Stopped(_)
                    | RawEnd::UnknownData(_)
                    | RawEnd::Outside(_)
            );
        let truncated = rec.flags & RECORD_TRUNCATED != 0;
        store(
            &mut self.p,
            &mut self.pp,
            &mut self.next,
            RawRun {
                events: rec.events,
                truncated,
                end,
                outputs: rec.outputs,
                values: rec.values,
                ops: rec.ops,
                ended_worker: terminal,
            },
        );
        if terminal {
            // The worker exits after a crash, time-out or exit record.
            if let Some(w) = self.slot.take() {
                w.reap();
            }
            return Ok(Flow::BatchOver);
        }
        Ok(Flow::More)
    }

    /// The worker is gone without a record saying why: an error if it never said hello, otherwise the run it
    /// was in is recorded as its death and the batch is over.
    fn on_gone(&mut self, stalled: bool) -> Result<Flow, ExecError> {
        let w = self.slot.take().expect("worker present");
        let greeted = w.greeted;
        let status = w.kill();
        if !greeted {
            return Err(ExecError::Worker(format!(
                "the worker did not start ({})",
                describe_status(status, stalled)
            )));
        }
        unexplained_death(
            &mut self.p,
            &mut self.pp,
            &mut self.next,
            &mut self.flush_each,
            status,
            stalled,
        );
        Ok(Flow::BatchOver)
    }
}

fn worker_mut(slot: &mut Option<Worker>) -> &mut Worker {
    slot.as_mut().expect("the worker is started before use")
}

fn kill(slot: &mut Option<Worker>) {
    if let Some(w) = slot.take() {
        w.kill();
    }
}

fn store(p: &mut [Option<RawRun>], pp: &mut [Option<RawRun>], next: &mut (usize, u8), run: RawRun) {
    if next.1 == 0 {
        p[next.0] = Some(run);
        next.1 = 1;
    } else {
        pp[next.0] = Some(run);
        *next = (next.0 + 1, 0);
    }
}

/// The worker died without a terminal record. With buffered replies the culprit is unknown, so the rest is
/// re-run flushing after every record; when that mode is already on, the next expected run is the culprit
/// (and the mode goes back to buffered unless the worker was stuck).
fn unexplained_death(
    p: &mut [Option<RawRun>],
    pp: &mut [Option<RawRun>],
    next: &mut (usize, u8),
    flush_each: &mut bool,
    status: Option<std::process::ExitStatus>,
    stalled: bool,
) {
    if !*flush_each {
        *flush_each = true;
        return;
    }
    let end = if stalled {
        RawEnd::TimedOut
    } else {
        match status {
            Some(s) if s.signal().is_some() => RawEnd::Crashed(s.signal().unwrap_or(0)),
            Some(s) => RawEnd::Exited(s.code().unwrap_or(-1)),
            None => RawEnd::Crashed(0),
        }
    };
    store(p, pp, next, RawRun::without_record(end));
    // After a stall the other build is likely stuck too: stay in flush mode to find it without a second wait.
    *flush_each = stalled;
}

fn describe_status(status: Option<std::process::ExitStatus>, stalled: bool) -> String {
    if stalled {
        return "no reply".into();
    }
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (_, Some(sig)) => format!("killed by {}", super::signal_name(sig)),
            _ => "unknown status".into(),
        },
        None => "unknown status".into(),
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = process::end_sandboxed(&mut self.child);
    }
}
