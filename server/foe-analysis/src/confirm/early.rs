//! The shipped binaries built early: they depend on the file and its flags, not on what the solver and the
//! search find, so P and P' are built on a thread of the lowest priority while the functions are solved (whose
//! threads leave a core idle about half of the time) and searched, and the first stage of cause probes after
//! them, on a thread of their own. The first function with inputs to run on the shipped binaries waits for P and P'
//! only; the first divergence whose cause is looked for waits for the first stage of probes ([`Harness::prepare`]
//! takes them over). While no function has asked for the harness, the later stages are built after the first, one
//! after the other, and after the second whether the file reads `__FAST_MATH__` is worked out (the macro probe's
//! question, two preprocessor runs).
//! When the analysis ends (or is cancelled), whatever is still being built is stopped (its clang killed, no new one
//! started) and waited for: no build outlives it.

use super::{Harness, Probe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The binaries a divergence needs first: P and P' to confirm it (and to run the inputs the instrumented builds
/// agree on), then the first stage of cause probes ([`super::probe_stages`]: flush-to-zero, plain `-O2` and the
/// first option, which [`super::decide`] asks first).
pub fn early_probes() -> Vec<Probe> {
    let mut probes = vec![Probe::Reference, Probe::Shipped];
    probes.extend(super::probe_stages().into_iter().next().unwrap_or_default());
    probes
}

/// The stages of cause probes [`super::decide`] asks after the first, in its order.
fn later_stages() -> Vec<Vec<Probe>> {
    super::probe_stages().into_iter().skip(1).collect()
}

/// Whether the background goes on building: no one has asked for the harness and the analysis has not ended.
type GoingOn = Arc<dyn Fn() -> bool + Send + Sync>;

/// While `going_on`, builds `stages` one after the other, each on a sibling of `built` on a thread of its own
/// (taken over when a divergence needs one of its probes), and after the first of them (with `ask_macro`) works
/// out whether the file reads `__FAST_MATH__`. Half of the corpus's files need every probe (a `combined` cause) or
/// the finite-math one.
fn build_stages_after(
    built: &mut Harness,
    mut stages: Vec<Vec<Probe>>,
    going_on: GoingOn,
    ask_macro: bool,
) {
    if stages.is_empty() || !going_on() {
        return;
    }
    let stage = stages.remove(0);
    let next = built.sibling();
    built.build_later(&stage, &stages.concat(), next, move |built| {
        if ask_macro && going_on() {
            built.reads_fast_math_macro();
        }
        build_stages_after(built, stages, going_on, false)
    });
}

/// A harness being prepared in the background, or ready.
pub struct EarlyHarness<'a> {
    building: Option<JoinHandle<Harness>>,
    /// Whether no one has asked for the harness yet: only then does the background go on to the next stage.
    unclaimed: Arc<AtomicBool>,
    /// Set when the analysis ends: the background builds stop ([`crate::process::stop_tools_when`]).
    stop: Arc<AtomicBool>,
    ready: Option<Harness>,
    /// Makes a harness again when the background thread could not start or panicked.
    make: Box<dyn Fn() -> Harness + 'a>,
}

impl<'a> EarlyHarness<'a> {
    /// Starts building [`early_probes`] of the harness `make` gives: P and P', then the first cause stage on a
    /// thread of its own.
    pub fn start(make: impl Fn() -> Harness + 'a) -> EarlyHarness<'a> {
        let mut harness = make();
        let unclaimed = Arc::new(AtomicBool::new(true));
        let still_unclaimed = unclaimed.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_builds = stop.clone();
        let building = std::thread::Builder::new()
            .name("foe-shipped".into())
            .spawn(move || {
                lowest_priority();
                crate::process::stop_tools_when(Some(stop_builds.clone()));
                let early = early_probes();
                let (shipped, causes) = early.split_at(2);
                let first_pair = harness.sibling();
                harness.prepare(shipped);
                if !stop_builds.load(Ordering::Acquire) {
                    let stopped = stop_builds.clone();
                    let going_on: GoingOn = Arc::new(move || {
                        still_unclaimed.load(Ordering::Acquire) && !stopped.load(Ordering::Acquire)
                    });
                    let later = later_stages();
                    harness.build_later(
                        causes,
                        &later.concat(),
                        first_pair,
                        move |built: &mut Harness| build_stages_after(built, later, going_on, true),
                    );
                }
                harness
            })
            .map_err(|e| tracing::debug!("the shipped binaries are built on demand: {e}"))
            .ok();
        EarlyHarness {
            building,
            unclaimed,
            stop,
            ready: None,
            make: Box::new(make),
        }
    }

    /// A harness nothing is built for before a divergence needs it (a file whose builds have no floating-point
    /// operation: only the search's own divergences are confirmed there, and few files have one).
    pub fn on_demand(make: impl Fn() -> Harness + 'a) -> EarlyHarness<'a> {
        EarlyHarness {
            building: None,
            unclaimed: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            ready: None,
            make: Box::new(make),
        }
    }

    /// The harness, once its early binaries are built.
    pub fn get(&mut self) -> &mut Harness {
        self.unclaimed.store(false, Ordering::Release);
        if let Some(handle) = self.building.take() {
            match handle.join() {
                Ok(harness) => self.ready = Some(harness),
                Err(_) => tracing::warn!("the thread building the shipped binaries panicked"),
            }
        }
        let make = &self.make;
        self.ready.get_or_insert_with(make)
    }
}

impl Drop for EarlyHarness<'_> {
    /// Stops the builds still running in the background and waits for their threads (their clang is killed, so
    /// this is quick): nothing of the analysis goes on after it.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(handle) = self.building.take() {
            if let Ok(harness) = handle.join() {
                self.ready = Some(harness);
            }
        }
        if let Some(harness) = self.ready.as_mut() {
            harness.join_background();
        }
    }
}

/// Gives this thread, and the processes it starts (clang, the linker, which inherit it), the lowest scheduling
/// priority: they take what the solver and the search leave idle.
fn lowest_priority() {
    // SAFETY: setpriority on this thread's own id; it only changes its nice value (Linux keeps one per thread).
    let tid = unsafe { libc::gettid() };
    // SAFETY: as above.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
    if rc != 0 {
        tracing::debug!("cannot lower the priority of the shipped builds");
    }
}
