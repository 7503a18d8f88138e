//! Parallel Z3 work with deterministic budgets, and wall-clock limits that do not use Z3's own timers.
//!
//! A query's budget is a Z3 resource limit (`rlimit`, counted in Z3's own steps), so the same query gives the
//! same answer however loaded the machine is; budgets are given in milliseconds and converted at
//! [`RLIMIT_PER_MS`] (calibrated on an unloaded machine). Items are dealt to the workers in a fixed order (worker
//! `w` takes items `w`, `w + n`, ...), so each worker's Z3 context sees the same queries in the same order every
//! run.
//!
//! Time stays as a safety net only, for queries whose Z3 steps do not count their work (nlsat's arithmetic on
//! algebraic numbers with huge coefficients runs for seconds on a few thousand units): the query's thread CPU
//! time past [`CPU_TIME_FACTOR`] times its budget, which a loaded machine does not change (the thread runs less
//! often, not slower), and the wall clock past [`WALL_CLOCK_FACTOR`] times it as the last resort. Z3's `timeout`
//! parameter and its `try_for` tactics run on a pool of timer threads (`scoped_timer`) that deadlocks in libz3
//! 4.8.12 under concurrent use, and whose `pthread_atfork` handler spins when the process forks while a query runs
//! (Z3 issues #5990, PR #7618). So no query here sets a timeout or uses a tactic with one: a watchdog thread calls
//! `Z3_interrupt` on the context of a query that passes its deadline instead. An interrupted context stays
//! cancelled, so the worker continues in a fresh one; it does so after every query Z3 gave up on, so that which
//! context a query runs in (its terms' ids order Z3's rewriting) does not depend on which net stopped a query.
//! A query the net stopped counts its whole budget as spent and gives up, as if its units had run out, even when
//! Z3 answered before it noticed the interrupt.
//!
//! An interrupt can leave nlsat's heap corrupt (Z3 5.4.1 then aborts in `nlsat::solver::~solver`): before it
//! interrupts a query the watchdog writes the query's label to standard error ([`INTERRUPTING`]), so that the
//! solver process's parent can solve again without that query.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use z3::{SatResult, Solver};

/// Z3 resource units per millisecond of budget (nlsat and the SMT core on this project's queries, measured with
/// `cargo test -p foe-analysis rlimit_rate -- --ignored --nocapture`).
pub(super) const RLIMIT_PER_MS: u64 = 200;

/// The CPU-time safety net of a query: this many times its budget of its thread's CPU time (plus 50 ms). Z3
/// 5.4.1's nlsat counts its polynomial arithmetic against the resource limit, but slowly: some queries count 28
/// units per ms of CPU time, a seventh of [`RLIMIT_PER_MS`]. At twice the budget the units decide down to 80
/// units per ms; slower queries are stopped by the net, which gives up on them as their units would. (At 5 times
/// the budget, 49 queries of 33 corpus files took 35 s of the solver threads' time, 0.7 s each; at twice, the
/// files took 10% less time with the same findings but for 11 of 961, and turbine1, jetengine and a 3-argument
/// program still gave identical findings three times on a loaded machine.)
pub(super) const CPU_TIME_FACTOR: u64 = 2;

/// The wall-clock safety net of a query: this many times its budget (plus 100 ms), for a machine so loaded that
/// the query's thread hardly runs. (With the wall clock as the only net, jetengine's hardest queries, at 25-50
/// units per wall-clock ms on a loaded machine, were stopped at 3 times the budget before their units ran out.)
pub(super) const WALL_CLOCK_FACTOR: u64 = 20;

/// What the watchdog writes to standard error, followed by the query's label, before it interrupts the query.
pub const INTERRUPTING: &str = "foe-solver: interrupting query ";

/// What a solver process writes to standard error, followed by the query's label, before it ends itself because
/// the query kept running [`HUNG_CPU`] after its interrupt ([`end_process_when_hung`]).
pub const DID_NOT_STOP: &str = "foe-solver: query did not stop when interrupted: ";

/// The exit code of a solver process that ended itself after [`DID_NOT_STOP`].
pub const DID_NOT_STOP_EXIT: i32 = 75;

/// CPU time an interrupted query may go on using before its solver process ends itself. Z3 heeds an interrupt
/// up to a few hundred milliseconds late (its arithmetic on huge numbers does not look at the flag); a query
/// still running seconds later may run for minutes (seen with a libz3 built with GMP on GSL's `clausen.c`: a
/// query ran until the process's time limit, 25 s, in two functions). Its thread cannot be stopped from outside
/// Z3, so the process ends, and its parent solves again without that query.
const HUNG_CPU: Duration = Duration::from_secs(2);

/// What the watchdog does, once per query, when an interrupted query went on for [`HUNG_CPU`] (given its label):
/// set in a solver process to end it ([`end_process_when_hung`]). An in-process solve, without it, waits.
static WHEN_HUNG: OnceLock<fn(u128)> = OnceLock::new();

/// Makes a query that does not stop when interrupted end this process ([`HUNG_CPU`]); for solver processes only.
pub(super) fn end_process_when_hung() {
    let _ = WHEN_HUNG.set(end_hung_process);
}

fn end_hung_process(label: u128) {
    eprintln!("{DID_NOT_STOP}{label:032x}");
    // SAFETY: ends the process at once, without running destructors: the other threads are inside Z3, whose
    // state must not be torn down under them. The parent reads the exit code.
    unsafe { libc::_exit(DID_NOT_STOP_EXIT) };
}

/// A directory where each query the safety net stopped is written in SMT-LIB (`<label>.smt2`), to study them.
pub const DUMP_STOPPED_ENV: &str = "FOE_DUMP_STOPPED";

/// [`DUMP_STOPPED_ENV`]'s directory, read once (every query asks).
fn dump_stopped_dir() -> Option<&'static std::ffi::OsStr> {
    static DIR: OnceLock<Option<std::ffi::OsString>> = OnceLock::new();
    DIR.get_or_init(|| std::env::var_os(DUMP_STOPPED_ENV))
        .as_deref()
}

/// With [`DUMP_STOPPED_ENV`], queries that ran at least this many milliseconds are written too
/// (`<label>-<verdict>-<ms>.smt2`), whether the net stopped them or not.
pub const DUMP_SLOWER_THAN_ENV: &str = "FOE_DUMP_SLOWER_THAN_MS";

/// [`DUMP_SLOWER_THAN_ENV`]'s threshold, read once.
fn dump_slower_than() -> Option<Duration> {
    static MS: OnceLock<Option<u64>> = OnceLock::new();
    MS.get_or_init(|| std::env::var(DUMP_SLOWER_THAN_ENV).ok()?.parse().ok())
        .map(Duration::from_millis)
}

/// How often the watchdog looks at the running queries.
const WATCH_PERIOD: Duration = Duration::from_millis(3);

/// A running query: its context, label, deadlines, and whether the watchdog interrupted it.
struct Slot {
    context: RawContext,
    label: Option<u128>,
    deadline: Instant,
    /// The worker thread's CPU clock and the CPU time at which the query is stopped.
    cpu_deadline: Option<(CpuClock, Duration)>,
    fired: bool,
    /// The worker thread's CPU time when the watchdog interrupted the query.
    fired_at_cpu: Option<Duration>,
    /// Whether [`WHEN_HUNG`] was told the query went on after its interrupt.
    hung_reported: bool,
}

impl Slot {
    /// Whether the query kept running [`HUNG_CPU`] of its thread's CPU time after its interrupt.
    fn hung(&self) -> bool {
        let (Some((clock, _)), Some(at)) = (self.cpu_deadline, self.fired_at_cpu) else {
            return false;
        };
        clock.now().is_some_and(|t| t >= at + HUNG_CPU)
    }

    fn overdue(&self, now: Instant) -> bool {
        now >= self.deadline
            || self
                .cpu_deadline
                .is_some_and(|(clock, at)| clock.now().is_some_and(|t| t >= at))
    }
}

/// A thread's CPU-time clock (`pthread_getcpuclockid`): the time the thread ran, readable from other threads.
#[derive(Clone, Copy)]
struct CpuClock(libc::clockid_t);

impl CpuClock {
    /// The calling thread's clock, valid while the thread lives.
    fn of_this_thread() -> Option<CpuClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: `pthread_self` is the calling thread, alive during the call; `id` is a valid out pointer.
        let ok = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) } == 0;
        ok.then_some(CpuClock(id))
    }

    /// The thread's CPU time so far; `None` once the thread has ended.
    fn now(self) -> Option<Duration> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out pointer; an ended thread's clock id gives an error, not undefined behaviour.
        let ok = unsafe { libc::clock_gettime(self.0, &mut ts) } == 0;
        ok.then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
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
                if !slot.fired && slot.overdue(now) {
                    if let Some(label) = slot.label {
                        eprintln!("{INTERRUPTING}{label:032x}");
                    }
                    // SAFETY: the context is alive while its slot is registered (see RawContext).
                    unsafe { z3_sys::Z3_interrupt(slot.context.0) };
                    slot.fired = true;
                    slot.fired_at_cpu = slot.cpu_deadline.and_then(|(clock, _)| clock.now());
                } else if slot.fired && !slot.hung_reported && slot.hung() {
                    if let Some(when_hung) = WHEN_HUNG.get() {
                        slot.hung_reported = true;
                        when_hung(slot.label.unwrap_or(0));
                    }
                }
            }
        }
    }
}

/// Runs Z3 checks of one worker under the watchdog.
pub(super) struct Limiter<'a> {
    watchdog: &'a Watchdog,
    worker: usize,
    /// Whether Z3 gave up on a query (the worker's context is then replaced).
    gave_up: Cell<bool>,
    /// The label [`INTERRUPTING`] names the running query by.
    label: Cell<Option<u128>>,
    /// The budget the last check used, in milliseconds at [`RLIMIT_PER_MS`] (deterministic).
    last_spent_ms: Cell<u32>,
    /// The budget all checks of this worker used so far in this call of [`parallel`], likewise.
    total_spent_ms: Cell<u64>,
}

impl Limiter<'_> {
    /// Names the query the following checks belong to (a formula's fingerprint), for [`INTERRUPTING`].
    pub(super) fn label(&self, label: u128) {
        self.label.set(Some(label));
    }

    /// `solver.check()` within a resource limit worth `budget_ms`, giving `Unknown` when it runs out (or, as a
    /// safety net, when the thread's CPU time passes [`CPU_TIME_FACTOR`] times the budget or the wall clock
    /// [`WALL_CLOCK_FACTOR`] times).
    pub(super) fn check(&self, solver: &Solver, budget_ms: u32) -> SatResult {
        let units = (budget_ms.max(1) as u64 * RLIMIT_PER_MS).min(u32::MAX as u64) as u32;
        let mut params = z3::Params::new();
        params.set_u32("rlimit", units);
        solver.set_params(&params);
        let before = rlimit_count(solver);
        let context = RawContext(solver.get_context().get_z3_context());
        let wall = Duration::from_millis(budget_ms as u64 * WALL_CLOCK_FACTOR + 100);
        let cpu = Duration::from_millis(budget_ms as u64 * CPU_TIME_FACTOR + 50);
        let cpu_deadline =
            CpuClock::of_this_thread().and_then(|clock| Some((clock, clock.now()? + cpu)));
        self.set_slot(Some(Slot {
            context,
            label: self.label.get(),
            deadline: Instant::now() + wall,
            cpu_deadline,
            fired: false,
            fired_at_cpu: None,
            hung_reported: false,
        }));
        let dump = dump_stopped_dir().map(|dir| (dir, solver.to_string()));
        let started = Instant::now();
        let result = solver.check();
        let took = started.elapsed();
        let cpu_took = cpu_deadline.and_then(|(clock, at)| Some(clock.now()? + cpu - at));
        let stopped = self.take_slot().is_some_and(|s| s.fired);
        // A query the net stopped gives up, whatever Z3 answered: it heeds the interrupt up to a few hundred
        // milliseconds late, and an answer it gave meanwhile would depend on when it looked.
        let result = if stopped { SatResult::Unknown } else { result };
        if stopped {
            tracing::debug!(budget_ms, ?took, "query stopped by the time safety net");
        }
        if let Some((dir, text)) = dump {
            let label = self.label.get().unwrap_or(0);
            let name = if stopped {
                Some(format!("{label:032x}.smt2"))
            } else {
                dump_slower_than()
                    .filter(|slow| took >= *slow)
                    .map(|_| format!("{label:032x}-{result:?}-{}.smt2", took.as_millis()))
            };
            if let Some(name) = name {
                let _ = std::fs::write(std::path::Path::new(&dir).join(name), text);
            }
        }
        self.gave_up
            .set(self.gave_up.get() || result == SatResult::Unknown);
        let used = if stopped {
            units as u64
        } else {
            rlimit_count(solver).saturating_sub(before)
        };
        tracing::trace!(used, budget = units, ?result, ?took, ?cpu_took, reason = ?(result == SatResult::Unknown).then(|| solver.get_reason_unknown()), "z3 check");
        let spent = (used / RLIMIT_PER_MS).min(budget_ms as u64) as u32;
        self.last_spent_ms.set(spent);
        self.total_spent_ms
            .set(self.total_spent_ms.get() + spent as u64);
        result
    }

    /// The budget the last [`Limiter::check`] used, in milliseconds of budget (a count of Z3 steps, not time).
    pub(super) fn last_spent_ms(&self) -> u32 {
        self.last_spent_ms.get()
    }

    /// The budget all checks so far used, in milliseconds of budget.
    pub(super) fn total_spent_ms(&self) -> u64 {
        self.total_spent_ms.get()
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

/// The context's resource count so far (Z3's `rlimit count` statistic).
fn rlimit_count(solver: &Solver) -> u64 {
    match solver.get_statistics().value("rlimit count") {
        Some(z3::StatisticsValue::UInt(n)) => n as u64,
        Some(z3::StatisticsValue::Double(d)) => d as u64,
        None => 0,
    }
}

thread_local! {
    /// This solver thread's Z3 context, kept across calls of [`parallel`] until Z3 gives up on one of its queries
    /// (see the module's doc) or a new solve starts ([`exclusive_solve`]). Making a context costs milliseconds (Z3
    /// declares every theory's symbols and the kernel zeroes its fresh pages): a context per chunk of queries was
    /// a fifth of a solve.
    static WORKER_CONTEXT: RefCell<Option<(u64, z3::Context)>> = const { RefCell::new(None) };
}

/// Bumped by [`exclusive_solve`]: a worker context made in an earlier generation is replaced.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Starts a solve: the solver threads start its work in new contexts, so that what it gives does not depend on
/// what the process solved before it, and no other solve of this process runs until the guard drops (two solves
/// at once would share the threads and their contexts, and each one's answers would depend on the other's
/// queries: the engine's unit tests solve in-process, several at a time).
pub(super) fn exclusive_solve() -> std::sync::MutexGuard<'static, ()> {
    static ONE_SOLVE: Mutex<()> = Mutex::new(());
    let guard = ONE_SOLVE.lock().unwrap_or_else(|p| p.into_inner());
    GENERATION.fetch_add(1, Ordering::AcqRel);
    guard
}

/// This thread's worker context of the current generation, made if needed.
fn worker_context() -> z3::Context {
    let generation = GENERATION.load(Ordering::Acquire);
    WORKER_CONTEXT.with(|c| {
        let mut c = c.borrow_mut();
        match &*c {
            Some((g, ctx)) if *g == generation => ctx.clone(),
            _ => {
                let ctx = fresh_context();
                *c = Some((generation, ctx.clone()));
                ctx
            }
        }
    })
}

/// A new Z3 context with the default configuration, as `z3::with_z3_config` makes one, but owned by the caller.
fn fresh_context() -> z3::Context {
    // SAFETY: the config is freed after the context is made from it (Z3 copies it); the context is handed to the
    // `z3` crate, which deletes it when its last handle drops. No error handler: errors are read by the crate.
    unsafe {
        let cfg = z3_sys::Z3_mk_config().expect("Z3 cannot make a configuration");
        let ctx = z3_sys::Z3_mk_context_rc(cfg).expect("Z3 cannot make a context");
        z3_sys::Z3_del_config(cfg);
        z3_sys::Z3_set_error_handler(ctx, None);
        z3::Context::from_raw(ctx)
    }
}

/// The solver threads for `threads` workers, made once per process: their contexts outlive each call.
fn pool(threads: usize) -> Arc<rayon::ThreadPool> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    pools
        .entry(threads)
        .or_insert_with(|| {
            Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("foe-solver-{i}"))
                    // Z3's rewriters recurse on deep terms.
                    .stack_size(64 << 20)
                    .build()
                    .expect("cannot start the solver threads"),
            )
        })
        .clone()
}

/// Maps `f` over `items` on up to `threads` solver threads. Each thread works in its own Z3 context, kept from
/// call to call ([`WORKER_CONTEXT`]) and replaced after Z3 gave up on one of its queries. Results in item order,
/// `None` where a worker panicked.
pub(super) fn parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T, &Limiter<'_>) -> R + Sync,
) -> Vec<Option<R>> {
    let workers = threads.max(1).min(items.len());
    if workers == 0 {
        return Vec::new();
    }
    let watchdog = Watchdog {
        slots: Mutex::new((0..workers).map(|_| None).collect()),
        stop: AtomicBool::new(false),
    };
    // Takes items until none is left (true) or Z3 gave up on one (false); `state` holds the results so far and
    // the budget the worker spent.
    let work = |worker: usize, state: &Mutex<(Vec<(usize, R)>, u64)>| -> bool {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        let limiter = Limiter {
            watchdog: &watchdog,
            worker,
            gave_up: Cell::new(false),
            label: Cell::new(None),
            last_spent_ms: Cell::new(0),
            total_spent_ms: Cell::new(state.1),
        };
        let done = state.0.len();
        let mut finished = true;
        // Items dealt in turn: this worker's are worker, worker + workers, ... (dealing them in a shuffled order
        // balanced the threads better but made GSL's hyperg_1F1.c solve half as much in twice the time: a query
        // runs faster in a context that just solved its neighbour, the same operation's previous path).
        for i in (worker..items.len()).step_by(workers).skip(done) {
            limiter.label.set(None);
            let r = f(&items[i], &limiter);
            state.0.push((i, r));
            if limiter.gave_up.get() {
                finished = false;
                break;
            }
        }
        state.1 = limiter.total_spent_ms();
        finished
    };
    let run_worker = |worker: usize| -> Vec<(usize, R)> {
        if worker >= workers {
            return Vec::new();
        }
        let state = Mutex::new((Vec::new(), 0));
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loop {
            let context = worker_context();
            if z3::with_z3_context(&context, || work(worker, &state)) {
                break;
            }
            WORKER_CONTEXT.with(|c| c.borrow_mut().take());
        }));
        if ran.is_err() {
            tracing::error!("a solver thread panicked");
            // Its context may be mid-operation.
            WORKER_CONTEXT.with(|c| c.borrow_mut().take());
            return Vec::new();
        }
        state.into_inner().unwrap_or_else(|p| p.into_inner()).0
    };
    /// Stops the watchdog when the scope's body ends, also by a panic (else the scope would wait for it forever).
    struct StopOnDrop<'a>(&'a Watchdog, std::thread::Thread);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.stop.store(true, Ordering::Release);
            self.1.unpark();
        }
    }
    let pool = pool(threads.max(1));
    let done: Vec<Vec<(usize, R)>> = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| watchdog.run());
        let _stop = StopOnDrop(&watchdog, watcher.thread().clone());
        pool.broadcast(|ctx| run_worker(ctx.index()))
    });
    let mut results: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for (i, r) in done.into_iter().flatten() {
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

    /// Prints Z3's resource units per millisecond on queries like foe's (calibrates [`RLIMIT_PER_MS`]).
    #[test]
    #[ignore]
    fn rlimit_rate() {
        for degree in [20usize, 40, 80, 160] {
            let results = parallel(&[degree], 1, |degree, limiter| {
                let solver = hard_query(*degree);
                let started = Instant::now();
                let r = limiter.check(&solver, 2_000_000);
                (r, limiter.last_spent_ms(), started.elapsed())
            });
            let (r, spent, took) = results[0].expect("ran");
            let units = spent as u64 * RLIMIT_PER_MS;
            eprintln!(
                "degree {degree}: {r:?}, {units} units in {took:?}: {:.0} units/ms",
                units as f64 / took.as_secs_f64() / 1000.0
            );
        }
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

    /// turbine1's underflow query that stalled after its interrupt (`FOE_DUMP_STOPPED`), its thresholds (Ω, 2^1022,
    /// 2^1074) raised to the twelfth power: nlsat's root isolation then multiplies numbers of some 12,000 bits for
    /// seconds without looking at the interrupt flag.
    fn query_that_ignores_its_interrupt() -> Solver {
        let [omega, normal, subnormal] = super::super::binary64_limits().map(|b| b.pow(12));
        let text = "(declare-fun x2 () Real) (declare-fun x0 () Real) (declare-fun x1 () Real) \
            (assert (not (= (* x2 x2) 0.0))) \
            (assert (let ((a!1 (* (- x1) x1 (- (/ 3.0 8.0) (* x0 (/ 1.0 4.0))) x2 x2))) \
              (let ((a!2 (< (- (* (- 1.0 x0) (/ 1.0 N.0))) a!1)) (a!4 (< a!1 (- (* (- 1.0 x0) (/ 1.0 N.0)))))) \
              (let ((a!3 (and (< 0.0 (- 1.0 x0)) a!2 (< a!1 (* (- 1.0 x0) (/ 1.0 N.0))))) \
                    (a!5 (and (< (- 1.0 x0) 0.0) (< (* (- 1.0 x0) (/ 1.0 N.0)) a!1) a!4))) \
              (and (<= a!1 M.0) (<= (- M.0) a!1) (<= (- 1.0 x0) M.0) (<= (- M.0) (- 1.0 x0)) \
                   (not (= a!1 0.0)) (or a!3 a!5)))))) \
            (assert (<= x0 M.0)) (assert (>= x0 (- M.0))) \
            (assert (or (= x0 0.0) (>= x0 (/ 1.0 S.0)) (<= x0 (- (/ 1.0 S.0))))) \
            (assert (<= x1 M.0)) (assert (>= x1 (- M.0))) \
            (assert (or (= x1 0.0) (>= x1 (/ 1.0 S.0)) (<= x1 (- (/ 1.0 S.0))))) \
            (assert (<= x2 M.0)) (assert (>= x2 (- M.0))) \
            (assert (or (= x2 0.0) (>= x2 (/ 1.0 S.0)) (<= x2 (- (/ 1.0 S.0)))))"
            .replace("M.0", &format!("{omega}.0"))
            .replace("N.0", &format!("{normal}.0"))
            .replace("S.0", &format!("{subnormal}.0"));
        let s = z3::Tactic::new("qfnra-nlsat").solver();
        s.from_string(text);
        s
    }

    #[test]
    fn a_query_that_goes_on_after_its_interrupt_is_reported_once() {
        static HUNG: Mutex<Vec<u128>> = Mutex::new(Vec::new());
        WHEN_HUNG
            .set(|label| HUNG.lock().expect("not poisoned").push(label))
            .expect("only this test sets it in the test process");
        let results = parallel(&[()], 1, |_, limiter| {
            limiter.label(7);
            limiter.check(&query_that_ignores_its_interrupt(), 20)
        });
        assert_eq!(results, vec![Some(SatResult::Unknown)]);
        assert_eq!(*HUNG.lock().expect("not poisoned"), vec![7]);
    }

    #[test]
    fn overlong_queries_are_interrupted_and_the_context_stays_usable() {
        let results = parallel(&[300usize, 40], 1, |degree, limiter| {
            let started = Instant::now();
            let budget = if *degree == 300 { 20 } else { 500 };
            let r = limiter.check(&hard_query(*degree), budget);
            (r, started.elapsed())
        });
        let (first, took) = results[0].as_ref().expect("ran");
        assert_eq!(*first, SatResult::Unknown);
        assert!(*took < Duration::from_millis(500), "{took:?}");
        let (second, _) = results[1].as_ref().expect("ran");
        assert_eq!(*second, SatResult::Sat);
    }
}
