//! The search's work: what its runs did, counted in nanoseconds of an idle machine, so that where the search stops
//! depends on the file and the settings, not on the load (the solver's Z3 resource units play the same part).
//!
//! A run costs a constant (the protocol, the worker's bookkeeping, judging it) plus a constant per operation the
//! runtime checked on it (`RawRun::ops`, counted by `__foe_check`); a run that timed out costs its whole limit
//! (one stopped at its operation limit, those operations); one that ended the worker (a crash other than an access far from every mapping, `exit`, a time-out) also
//! costs a restart. A run of the shipped binaries
//! (the confirmation sweep) costs a constant of its own. The constants are calibrated on an idle machine
//! (`docs/figures.md`), so the work budgets end where the wall-clock budgets did; the wall clock is kept only as a
//! safety net at a multiple of them.

use crate::exec::{RawEnd, RawPair, RawRun};
use std::time::Instant;

/// Work of one instrumented run besides its operations, in nanoseconds of an idle machine (measured: 0.8 µs on
/// the paper's programs, `examples/search_work.rs`; the judging of each run comes on top).
pub const RUN_NS: u64 = 1_500;
/// Work of one operation the runtime checked (measured: 11 ns in arithmetic loops, 16-18 ns with a libm call
/// in every other operation; library code such as GSL's calls costlier functions).
pub const OP_NS: u64 = 25;
/// Work of restarting the worker after a run that ended it.
pub const RESTART_NS: u64 = 5_000_000;
/// Work of a crash the worker survived (an access far from every mapping: the signal, the jump back, the record;
/// measured: 10,298 runs of Box2D's `b2SolveMoverJoint`, most of them such crashes, in 383 ms).
pub const CRASH_NS: u64 = 40_000;
/// Work of one run of a shipped binary (a line of text each way, the traps that record its trace; measured:
/// about 1 ms per input on both binaries in the sweep of GSL's `gamma.c`).
pub const SHIPPED_RUN_NS: u64 = 500_000;
/// Work of making one point of a neighbourhood, and of each of its coordinates (measured: a neighbourhood of 4096
/// points in 9 dimensions, Box2D's `b2CollideMoverAndPolygon`, took about 2.5 ms).
pub const NEIGHBOUR_NS: u64 = 100;
pub const NEIGHBOUR_COORD_NS: u64 = 55;

/// The work of making a neighbourhood of `points` points in `dims` dimensions.
pub fn neighbourhood_work(points: usize, dims: usize) -> u64 {
    points as u64 * (NEIGHBOUR_NS + dims as u64 * NEIGHBOUR_COORD_NS)
}

/// What the safety net adds to a multiple of the work: costs a search has once whatever its budget (starting the
/// worker, building a shipped binary's probe), which would otherwise make a small budget's net bind.
pub const SAFETY_MARGIN: std::time::Duration = std::time::Duration::from_millis(500);

/// When a search (and the confirmation sweep after it) stops: a work budget, and a wall-clock safety net.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchBudget {
    /// Work the search may do, in nanoseconds of an idle machine (deterministic).
    pub work_ns: u64,
    /// The wall-clock safety net: a multiple of the budget, reached only where the work does not count what
    /// runs cost (a loop without floating-point operations) or the machine is many times slower.
    pub safety_net: Instant,
}

impl SearchBudget {
    /// A budget of `ms` milliseconds of work with a safety net `factor` times as long from now, plus
    /// [`SAFETY_MARGIN`].
    pub fn from_ms(ms: u64, factor: u32) -> SearchBudget {
        SearchBudget {
            work_ns: ms.saturating_mul(1_000_000),
            safety_net: Instant::now()
                + std::time::Duration::from_millis(ms) * factor
                + SAFETY_MARGIN,
        }
    }

    /// Whether `spent` nanoseconds of work, or the safety net, end the search.
    pub fn exhausted(&self, spent: u64) -> bool {
        spent >= self.work_ns || Instant::now() >= self.safety_net
    }

    /// What is left after `spent`, for the sweep.
    pub fn after(&self, spent: u64) -> SearchBudget {
        SearchBudget {
            work_ns: self.work_ns.saturating_sub(spent),
            safety_net: self.safety_net,
        }
    }
}

/// The limits an instrumented run ends at when it does not return: what such a run cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// CPU time of one run, in milliseconds.
    pub timeout_ms: u64,
    /// Operations the runtime checks in one run before it times out (0: no limit).
    pub op_limit: u32,
}

impl RunLimits {
    pub fn of(cfg: &crate::config::AnalysisConfig) -> RunLimits {
        RunLimits {
            timeout_ms: cfg.exec_timeout_ms,
            op_limit: cfg.exec_op_limit,
        }
    }

    /// Whether a run that timed out with `ops` operations checked was stopped by the operation limit (the
    /// runtime stops it at the first operation past it), not by its time.
    pub fn stopped_by_ops(&self, ops: u64) -> bool {
        self.op_limit != 0 && ops > u64::from(self.op_limit)
    }
}

/// The work of one instrumented run.
pub fn run_work(run: &RawRun, limits: RunLimits) -> u64 {
    match run.end {
        RawEnd::TimedOut if limits.stopped_by_ops(run.ops) => {
            RUN_NS + run.ops.saturating_mul(OP_NS) + RESTART_NS
        }
        RawEnd::TimedOut => limits.timeout_ms.saturating_mul(1_000_000) + RESTART_NS,
        RawEnd::Returned(_) | RawEnd::Stopped(_) | RawEnd::UnknownData(_) | RawEnd::Outside(_) => {
            RUN_NS + run.ops.saturating_mul(OP_NS)
        }
        RawEnd::Crashed(_) | RawEnd::Exited(_) | RawEnd::Undefined(_) => {
            let ending = if run.ended_worker {
                RESTART_NS
            } else {
                CRASH_NS
            };
            RUN_NS + run.ops.saturating_mul(OP_NS) + ending
        }
    }
}

/// The work of runs of both builds.
pub fn pairs_work(pairs: &[RawPair], limits: RunLimits) -> u64 {
    pairs
        .iter()
        .map(|pair| run_work(&pair.p, limits) + run_work(&pair.pp, limits))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: RunLimits = RunLimits {
        timeout_ms: 500,
        op_limit: 1 << 24,
    };

    fn run(end: RawEnd, ops: u64) -> RawRun {
        RawRun {
            ops,
            ended_worker: !matches!(end, RawEnd::Returned(_)),
            ..RawRun::without_record(end)
        }
    }

    #[test]
    fn work_grows_with_operations_and_a_time_out_costs_its_limit() {
        let small = run_work(&run(RawEnd::Returned(0), 10), LIMITS);
        let large = run_work(&run(RawEnd::Returned(0), 10_000), LIMITS);
        assert!(small < large);
        assert_eq!(large - small, 9_990 * OP_NS);
        // A timed-out run's operations are whatever ran before the timer: they do not count.
        assert_eq!(
            run_work(&run(RawEnd::TimedOut, 1), LIMITS),
            run_work(&run(RawEnd::TimedOut, 123_456), LIMITS)
        );
        assert!(run_work(&run(RawEnd::TimedOut, 0), LIMITS) >= 500_000_000);
        // One stopped at the operation limit costs those operations, which are the same on every machine.
        let past = (1 << 24) + 1;
        assert_eq!(
            run_work(&run(RawEnd::TimedOut, past), LIMITS),
            RUN_NS + past * OP_NS + RESTART_NS
        );
        assert!(run_work(&run(RawEnd::Crashed(11), 10), LIMITS) > small);
        // A run that accessed an address far from every mapping ends without ending the worker: a signal, not a restart.
        let survived = RawRun {
            ended_worker: false,
            ..run(RawEnd::Crashed(11), 10)
        };
        assert_eq!(run_work(&survived, LIMITS), small + CRASH_NS);
    }

    #[test]
    fn a_budget_ends_at_its_work_and_hands_the_rest_on() {
        let b = SearchBudget::from_ms(10, 3);
        assert!(!b.exhausted(9_999_999));
        assert!(b.exhausted(10_000_000));
        assert_eq!(b.after(4_000_000).work_ns, 6_000_000);
        assert_eq!(b.after(40_000_000).work_ns, 0);
    }
}
