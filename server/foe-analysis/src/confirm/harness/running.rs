//! Running the shipped binaries: a batch of calls of one function per probe's binary, each input line run once
//! (the run cache), the driver processes kept running (`confirm/driver.rs`), the traces placed with each
//! binary's debug info.

use super::super::driver::{DriverLimits, DriverMode, Reply};
use super::super::{thunks, trace};
use super::{Harness, Probe, Produced, ShippedEnd, ShippedRun};
use crate::report::Cause;
use crate::types::{ArgValue, Input};
use std::path::Path;
use std::sync::Mutex;

impl Harness {
    /// Runs `function` of a probe's binary on each input; `Err` when the binary cannot be built or the function
    /// cannot be called from C as foe knows its signature.
    pub fn run(
        &mut self,
        probe: Probe,
        function: &str,
        inputs: &[Input],
    ) -> Result<Vec<ShippedRun>, String> {
        self.run_filled(probe, function, inputs, 0)
    }

    /// [`Harness::run`] with the stack below each call filled with `fill` first (the driver fills it with zeros
    /// otherwise): a run whose outcome changes with the fill read a local it never wrote.
    pub fn run_filled(
        &mut self,
        probe: Probe,
        function: &str,
        inputs: &[Input],
        fill: u8,
    ) -> Result<Vec<ShippedRun>, String> {
        let index = self
            .functions
            .iter()
            .position(|f| f.name == function)
            .ok_or_else(|| format!("`{function}` is not in the harness"))?;
        thunks::c_prototype(&self.functions[index])?;
        self.prepare(&[probe]);
        let exe = self.binaries[&probe].clone()?;
        let fill = match fill {
            0 => String::new(),
            fill => format!("~{fill:02x} "),
        };
        let lines: Vec<String> = inputs
            .iter()
            .map(|input| {
                let words: Vec<String> =
                    input.0.iter().map(|v| format!("{:x}", word(*v))).collect();
                format!("{fill}{index} {}\n", words.join(" "))
            })
            .collect();
        let mut runs: Vec<Option<ShippedRun>> =
            lines.iter().map(|l| self.runs.get(&exe, l)).collect();
        let todo: Vec<String> = lines
            .iter()
            .zip(&runs)
            .filter(|(_, run)| run.is_none())
            .map(|(l, _)| l.clone())
            .collect();
        if !todo.is_empty() {
            let (made, launches) = self.run_lines(probe, function, &exe, &todo)?;
            let mut fresh = made.into_iter();
            self.calls_run += todo.len() as u64;
            self.launches += launches;
            for (line, run) in lines.iter().zip(&mut runs) {
                if run.is_none() {
                    let made = fresh.next().expect("a run per line");
                    self.runs.insert(&exe, line, made.clone());
                    *run = Some(made);
                }
            }
        }
        Ok(runs
            .into_iter()
            .map(|r| r.expect("every line run"))
            .collect())
    }

    /// Runs `lines` (the driver's input lines) on `exe`, a process per stretch of lines up to a crash; the runs
    /// and the processes it took.
    fn run_lines(
        &mut self,
        probe: Probe,
        function: &str,
        exe: &Path,
        lines: &[String],
    ) -> Result<(Vec<ShippedRun>, u64), String> {
        let mut launches = 0;
        let limit_ms = self.config.exec_timeout_ms.max(1);
        let t0 = std::time::Instant::now();
        let mut replies: Vec<Reply> = Vec::with_capacity(lines.len());
        while replies.len() < lines.len() {
            let rest = &lines[replies.len()..];
            let drivers = self.drivers.get_mut().map_err(|_| "a driver panicked")?;
            let limits = DriverLimits {
                limit_ms,
                memory_mib: self.config.memory_limit_mib,
            };
            // Whether it was linked without `crtfastmath.o` or is the fast-math binary itself, the flush-to-zero
            // probe runs with FTZ/DAZ off.
            let mode = match probe {
                Probe::Without(Cause::FlushToZero) => DriverMode::WithoutDazFtz,
                _ => DriverMode::AsLinked,
            };
            let (got, started) = drivers.run(exe, rest, limits, mode)?;
            launches += u64::from(started);
            let n = got.len();
            let stopped = got.last().is_some_and(|r| r.0 == ShippedEnd::TimedOut);
            replies.extend(got);
            if n < rest.len() && !stopped {
                // The process died on the next input without replying.
                replies.push((
                    ShippedEnd::Crashed,
                    Vec::new(),
                    0,
                    None,
                    Produced::default(),
                ));
            }
        }
        replies.truncate(lines.len());
        let with_addresses = replies.iter().any(|r| r.1.iter().any(|e| e.addr.is_some()));
        let debug_info = match with_addresses {
            true => self
                .debug_info
                .entry(exe.to_path_buf())
                .or_insert_with(|| trace::loader(exe).map(Mutex::new))
                .as_ref()
                .and_then(|l| l.lock().ok()),
            false => None,
        };
        tracing::trace!(
            ?probe,
            function,
            inputs = lines.len(),
            ms = t0.elapsed().as_millis() as u64,
            "probe ran"
        );
        let lines_in_file = self.text.lines().count() as u32;
        Ok((
            replies
                .into_iter()
                .map(|(end, events, dropped, stopped_at, produced)| match end {
                    ShippedEnd::Raised(_) | ShippedEnd::Stopped(_) => ShippedRun {
                        end,
                        trace: trace::to_trace(debug_info.as_deref(), lines_in_file, &events),
                        dropped,
                        stopped_at,
                        produced,
                    },
                    _ => ShippedRun::ended(end),
                })
                .collect(),
            launches,
        ))
    }
}

/// The word the driver reads for one value (as the instrumented runner encodes it).
fn word(v: ArgValue) -> u64 {
    v.bits()
}
