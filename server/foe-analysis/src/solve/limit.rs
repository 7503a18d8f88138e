//! Parallel Z3 work with wall-clock limits that do not use Z3's own timers.
//!
//! Z3's `timeout` parameter and its `try_for` tactics run on a pool of timer threads (`scoped_timer`) that
//! deadlocks in libz3 4.8.12 under concurrent use, and whose `pthread_atfork` handler spins when the process
//! forks while a query runs (Z3 issues #5990, PR #7618). So no query here sets a timeout or uses a tactic with
//! one: a watchdog thread calls `Z3_interrupt` on the context of a query that passes its deadline instead.
//! An interrupted context stays cancelled, so the worker continues in a fresh one.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use z3::{SatResult, Solver};

/// How often the watchdog looks at the running queries.
const WATCH_PERIOD: Duration = Duration::from_millis(3);

/// A running query: its context, deadline, and whether the watchdog interrupted it.
struct Slot {
    context: RawContext,
    deadline: Instant,
    fired: bool,
}

/// A Z3 context handle for `Z3_interrupt`, which may be called from any thread.
struct RawContext(z3_sys::Z3_context);
// SAFETY: only used for `Z3_interrupt`, which Z3 documents as callable from another thread, and only while the
// owning worker has the slot registered (it unregisters before its context can be dropped).
unsafe impl Send for RawContext {}

struct Watchdog {
    slots: Mutex<Vec<Option<Slot>>>,
    stop: AtomicBool,
}

impl Watchdog {
    fn run(&self) {
        while !self.stop.load(Ordering::Acquire) {
            std::thread::park_timeout(WATCH_PERIOD);
            let now = Instant::now();
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            for slot in slots.iter_mut().flatten() {
                if !slot.fired && now >= slot.deadline {
                    // SAFETY: the context is alive while its slot is registered (see RawContext).
                    unsafe { z3_sys::Z3_interrupt(slot.context.0) };
                    slot.fired = true;
                }
            }
        }
    }
}

/// Runs Z3 checks of one worker under the watchdog.
pub(super) struct Limiter<'a> {
    watchdog: &'a Watchdog,
    worker: usize,
    interrupted: Cell<bool>,
}

impl Limiter<'_> {
    /// `solver.check()`, interrupted (giving `Unknown`) if it runs longer than `timeout_ms`.
    pub(super) fn check(&self, solver: &Solver, timeout_ms: u32) -> SatResult {
        let context = RawContext(solver.get_context().get_z3_context());
        let deadline = Instant::now() + Duration::from_millis(timeout_ms as u64);
        self.set_slot(Some(Slot {
            context,
            deadline,
            fired: false,
        }));
        let result = solver.check();
        if self.take_slot().is_some_and(|s| s.fired) {
            self.interrupted.set(true);
        }
        result
    }

    fn set_slot(&self, slot: Option<Slot>) {
        let mut slots = self
            .watchdog
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        slots[self.worker] = slot;
    }

    fn take_slot(&self) -> Option<Slot> {
        let mut slots = self
            .watchdog
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        slots[self.worker].take()
    }
}

/// Maps `f` over `items` on up to `threads` threads: the calling thread and `threads - 1` scoped ones. Every
/// thread works in a context of its own, made for this call (a thread's default context may have been
/// interrupted by an earlier call, and an interrupted context stays cancelled), and in a fresh one after one of
/// its queries was interrupted. Results in item order, `None` where a worker panicked.
pub(super) fn parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T, &Limiter<'_>) -> R + Sync,
) -> Vec<Option<R>> {
    let workers = threads.max(1).min(items.len());
    if workers == 0 {
        return Vec::new();
    }
    let next = AtomicUsize::new(0);
    let watchdog = Watchdog {
        slots: Mutex::new((0..workers).map(|_| None).collect()),
        stop: AtomicBool::new(false),
    };
    // Takes items until none is left (true) or a query was interrupted (false).
    let work = |worker: usize, out: &Mutex<Vec<(usize, R)>>| -> bool {
        let limiter = Limiter {
            watchdog: &watchdog,
            worker,
            interrupted: Cell::new(false),
        };
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return true;
            };
            let r = f(item, &limiter);
            out.lock().unwrap_or_else(|p| p.into_inner()).push((i, r));
            if limiter.interrupted.get() {
                return false;
            }
        }
    };
    let run_worker = |worker: usize| -> Vec<(usize, R)> {
        let out = Mutex::new(Vec::new());
        let mut finished = false;
        while !finished {
            finished = z3::with_z3_config(&z3::Config::new(), || work(worker, &out));
        }
        out.into_inner().unwrap_or_else(|p| p.into_inner())
    };
    /// Stops the watchdog when the scope's body ends, also by a panic (else the scope would wait for it forever).
    struct StopOnDrop<'a>(&'a Watchdog, std::thread::Thread);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.stop.store(true, Ordering::Release);
            self.1.unpark();
        }
    }
    let done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| watchdog.run());
        let _stop = StopOnDrop(&watchdog, watcher.thread().clone());
        let others: Vec<_> = (1..workers)
            .map(|worker| scope.spawn(move || run_worker(worker)))
            .collect();
        let mut results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_worker(0)))
            .unwrap_or_else(|_| {
                tracing::error!("a solver thread panicked");
                Vec::new()
            });
        for handle in others {
            results.extend(handle.join().unwrap_or_else(|_| {
                tracing::error!("a solver thread panicked");
                Vec::new()
            }));
        }
        results
    });
    let mut results: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for (i, r) in done {
        results[i] = Some(r);
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use z3::ast::Real;

    /// A univariate polynomial equation of high degree that nlsat needs a while for.
    fn hard_query(degree: usize) -> Solver {
        let x = Real::new_const("x");
        let mut p = x.clone();
        for _ in 0..degree {
            p = &p * &x + Real::from_rational(3, 7);
        }
        let s = z3::Tactic::new("qfnra-nlsat").solver();
        s.assert(
            p.eq(Real::from_rational_str("123456789012345678901234567890", "7").expect("numeral")),
        );
        s
    }

    #[test]
    fn a_panicking_query_loses_its_worker_s_results_but_does_not_hang() {
        for threads in [1, 2] {
            let results = parallel(&[0, 1, 2, 3], threads, |i, _| {
                if *i == 0 {
                    panic!("query 0")
                } else {
                    *i
                }
            });
            assert!(results[0].is_none());
            assert_eq!(results.len(), 4);
        }
    }

    #[test]
    fn overlong_queries_are_interrupted_and_the_context_stays_usable() {
        let results = parallel(&[300usize, 40], 1, |degree, limiter| {
            let started = Instant::now();
            let r = limiter.check(&hard_query(*degree), 20);
            (r, started.elapsed())
        });
        let (first, took) = results[0].as_ref().expect("ran");
        assert_eq!(*first, SatResult::Unknown);
        assert!(*took < Duration::from_millis(500), "{took:?}");
        let (second, _) = results[1].as_ref().expect("ran");
        assert_eq!(*second, SatResult::Sat);
    }
}
