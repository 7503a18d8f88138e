//! The shipped binaries of a file: built by clang as a build ships them (`-g` added, which changes no code), with
//! the project's other units the file uses, run sandboxed by the driver `runtime/foe_confirm.c`, which replies
//! with the sticky flags and the trapped trace.

use super::build;
use super::driver::Drivers;
use super::reuse::{self, RunCache, SameBinaries};
use super::thunks;
use crate::compile;
use crate::config::{AnalysisConfig, FtzMode};
use crate::exec::RawOutput;
use crate::process;
use crate::report::{Cause, TraceEvent};
use crate::types::FunctionSignature;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

mod running;

pub use super::probe::{Probe, PROBES};

pub use build::CONFIRM_C;

/// How one call of a shipped binary ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShippedEnd {
    /// Returned; the exceptions raised, as bits (invalid 1, divide-by-zero 2, overflow 4, underflow 8).
    Raised(u8),
    /// Stopped at a call of a function no file of the project defines (named in [`ShippedRun::stopped_at`]),
    /// having raised these exceptions before it, as the instrumented worker stops its run there.
    Stopped(u8),
    Crashed,
    TimedOut,
}

impl ShippedEnd {
    /// The exceptions raised, for a call that returned or stopped at a call foe does not run.
    pub fn raised(self) -> Option<u8> {
        match self {
            ShippedEnd::Raised(bits) | ShippedEnd::Stopped(bits) => Some(bits),
            ShippedEnd::Crashed | ShippedEnd::TimedOut => None,
        }
    }
}

/// One call of a shipped binary: how it ended and, when it returned or stopped, the exceptions it trapped in
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShippedRun {
    pub end: ShippedEnd,
    /// The trapped events, placed by the binary's debug info (empty unless it returned or stopped).
    pub trace: Vec<TraceEvent>,
    /// Events the driver dropped past its capacity: the trace is then incomplete.
    pub dropped: usize,
    /// The function the call stopped at ([`ShippedEnd::Stopped`]).
    pub stopped_at: Option<String>,
    /// What a call that returned produced.
    pub produced: Produced,
}

/// What a shipped call that returned produced: the result bits and the words of its pointer parameters' buffers
/// it changed (as the instrumented runner reports them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Produced {
    pub result: u64,
    pub outputs: Vec<RawOutput>,
}

impl ShippedRun {
    fn ended(end: ShippedEnd) -> ShippedRun {
        ShippedRun {
            end,
            trace: Vec::new(),
            dropped: 0,
            stopped_at: None,
            produced: Produced::default(),
        }
    }

    /// The exceptions raised by two runs that ended alike (both returned, or both stopped at the same call),
    /// whose traces can therefore be compared; `None` otherwise.
    pub fn comparable(&self, other: &ShippedRun) -> Option<(u8, u8)> {
        match (self.end, other.end) {
            (ShippedEnd::Raised(a), ShippedEnd::Raised(b)) => Some((a, b)),
            (ShippedEnd::Stopped(a), ShippedEnd::Stopped(b))
                if self.stopped_at == other.stopped_at =>
            {
                Some((a, b))
            }
            _ => None,
        }
    }

    /// The exceptions of two runs whose sets can be compared: [`ShippedRun::comparable`] ones, and a returned
    /// run against one that stopped at a call foe does not run having already raised an exception the returned
    /// run never raised (a difference whatever the rest of the stopped call would have done).
    pub fn sets(&self, other: &ShippedRun) -> Option<(u8, u8)> {
        self.comparable(other)
            .or_else(|| match (self.end, other.end) {
                (ShippedEnd::Raised(a), ShippedEnd::Stopped(b))
                | (ShippedEnd::Stopped(b), ShippedEnd::Raised(a))
                    if b & !a != 0 =>
                {
                    self.end.raised().zip(other.end.raised())
                }
                _ => None,
            })
    }
}

/// What one probe's binary is built from.
#[derive(Clone, Copy)]
struct BuildSpec<'a> {
    probe: Probe,
    compile_flags: &'a [String],
    link_flags: &'a [String],
    /// The units' objects; `None` when they could not all be compiled (or linked) for this build.
    units: Option<&'a [PathBuf]>,
}

/// The shipped binaries of one file, built on first use.
pub struct Harness {
    pub(super) config: AnalysisConfig,
    file: PathBuf,
    text: String,
    functions: Vec<FunctionSignature>,
    /// The project's other units the file uses, each with its own entry's preprocessor flags: linked into every
    /// binary, as the program links them.
    units: Vec<(PathBuf, Vec<String>)>,
    /// Data the program reads that no file of the project defines (its value is unknown: a stub is not it).
    unresolved_data: std::collections::BTreeSet<String>,
    /// Symbols a unit of the project may define but that were not linked ([`crate::project::Linked::beyond_cap`]).
    beyond_cap: std::collections::BTreeSet<String>,
    /// The binaries' running drivers (ended before the directory holding them is removed).
    drivers: Mutex<Drivers>,
    /// The binaries' debug info, read once each (`None`: unreadable).
    debug_info: HashMap<PathBuf, Option<Mutex<addr2line::Loader>>>,
    /// A temporary directory holding the objects and binaries, made on first use.
    dir: Option<Result<tempfile::TempDir, String>>,
    driver: Option<Result<PathBuf, String>>,
    pub(super) binaries: HashMap<Probe, Result<PathBuf, String>>,
    /// The units' objects per compile flags (`Err` when one of them does not compile).
    unit_objects: HashMap<Vec<String>, Result<Vec<PathBuf>, String>>,
    /// The analysed file's objects per compile flags, shared with the siblings: probes that differ only at the
    /// link share one.
    objects: reuse::SharedObjects,
    /// Whether the file's preprocessed text depends on `__FAST_MATH__` ([`Harness::reads_fast_math_macro`]),
    /// shared with the siblings: the background works it out before a divergence asks.
    reads_macro: Arc<OnceLock<bool>>,
    /// The stubs an earlier link needed (names, object): linked into every later binary from the start.
    stubs: Mutex<Option<(Vec<String>, PathBuf)>>,
    /// What no file of the project and not the C library defines ([`crate::project::Linked::unresolved`]):
    /// stubbed before the first link, so that it does not fail for them.
    expected_stubs: Vec<String>,
    /// Symbols stubbed although the instrumented builds ran a definition of them (the project's units could not
    /// all be linked): a shipped run that stops at one of them is not the program's run, and gives no verdict.
    /// (A run that returned touched no stub: see [`build::compile_stubs`].)
    pub(super) stubbed: Mutex<std::collections::BTreeSet<String>>,
    /// Probes another harness is building on a background thread ([`Harness::build_later`]): taken over when
    /// one of them is needed.
    pub(super) background: Option<(Vec<Probe>, std::thread::JoinHandle<Harness>)>,
    /// Harnesses whose binaries this one took over, kept for their directories.
    pub(super) adopted: Vec<Harness>,
    /// The binaries linked so far, shared with the siblings: a probe that comes out the same is not linked again.
    same: SameBinaries,
    /// The runs made so far.
    runs: RunCache,
    /// How many calls the binaries ran (each input line of each binary once), for the search's work.
    calls_run: u64,
    /// How many processes ran them.
    launches: u64,
}

impl Harness {
    /// A harness for `functions` of `file` (its text, saved or not); nothing is built yet.
    pub fn new(
        config: &AnalysisConfig,
        file: &Path,
        text: &str,
        functions: &[FunctionSignature],
    ) -> Harness {
        Harness {
            config: config.clone(),
            file: file.to_path_buf(),
            text: text.to_string(),
            functions: functions.to_vec(),
            units: Vec::new(),
            unresolved_data: Default::default(),
            beyond_cap: Default::default(),
            drivers: Mutex::default(),
            debug_info: HashMap::new(),
            dir: None,
            driver: None,
            binaries: HashMap::new(),
            unit_objects: HashMap::new(),
            reads_macro: Arc::default(),
            objects: reuse::SharedObjects::default(),
            stubs: Mutex::new(None),
            expected_stubs: Vec::new(),
            stubbed: Default::default(),
            background: None,
            adopted: Vec::new(),
            same: SameBinaries::default(),
            runs: RunCache::default(),
            calls_run: 0,
            launches: 0,
        }
    }

    /// Links the project's units (as [`crate::project::Linked`] lists them) into every binary, each compiled with
    /// its own entry's preprocessor flags in `db` (the request's compilation database) and `base_flags` (the
    /// user's extra flags, without the analysed file's entry); its unresolved data make a binary that links a stub
    /// for them not the program.
    pub fn with_units(
        mut self,
        linked: &crate::project::Linked,
        db: Option<&compile::CompileDb>,
        base_flags: &[String],
    ) -> Harness {
        self.unresolved_data = linked.unresolved_data.clone();
        self.beyond_cap = linked.beyond_cap.clone();
        self.expected_stubs = linked
            .unresolved
            .iter()
            .filter(|s| !crate::project::c_library_defines(s))
            .cloned()
            .collect();
        let units = &linked.units;
        self.units = units
            .iter()
            .map(|unit| {
                let mut flags = base_flags.to_vec();
                if let Some(entry) = db.and_then(|db| db.entry(unit)) {
                    flags.extend(entry.flags.meaning.iter().cloned());
                }
                (unit.clone(), flags)
            })
            .collect();
        self
    }

    /// How many calls the shipped binaries ran so far (a call a cache answered is not one), and in how many
    /// processes.
    pub fn calls_run(&self) -> (u64, u64) {
        (self.calls_run, self.launches)
    }

    /// A harness of the same file, functions and units, with nothing built (its own directory).
    pub fn sibling(&self) -> Harness {
        let mut other = Harness::new(&self.config, &self.file, &self.text, &self.functions);
        other.units = self.units.clone();
        other.unresolved_data = self.unresolved_data.clone();
        other.beyond_cap = self.beyond_cap.clone();
        other.expected_stubs = self.expected_stubs.clone();
        other.same = self.same.clone();
        other.objects = self.objects.clone();
        other.reads_macro = self.reads_macro.clone();
        other
    }

    pub(super) fn dir(&mut self) -> Result<PathBuf, String> {
        let dir = self.dir.get_or_insert_with(|| {
            crate::scratch::tempdir("foe-confirm")
                .map_err(|e| format!("cannot make a directory for the harness: {e}"))
        });
        dir.as_ref()
            .map(|d| d.path().to_path_buf())
            .map_err(Clone::clone)
    }

    /// The compile and link flags of a probe's build.
    pub fn flags(&self, probe: Probe) -> (Vec<String>, Vec<String>) {
        let c = &self.config;
        let mut shipped_link = c.flags_p_prime.clone();
        match c.ftz_daz {
            FtzMode::On => shipped_link.push("-mdaz-ftz".into()),
            FtzMode::Off => shipped_link.push("-mno-daz-ftz".into()),
            FtzMode::Auto => {}
        }
        match probe {
            Probe::Reference => (c.flags_p.clone(), c.flags_p.clone()),
            Probe::Shipped => (c.flags_p_prime.clone(), shipped_link),
            Probe::Without(Cause::Optimisation) => {
                let plain = compile::without_fast_math(&c.flags_p_prime);
                (plain.clone(), plain)
            }
            Probe::Without(Cause::FlushToZero) => {
                let mut link = c.flags_p_prime.clone();
                link.push("-mno-daz-ftz".into());
                (c.flags_p_prime.clone(), link)
            }
            Probe::Without(cause) => {
                let option = crate::fast_math::option(cause).map(|o| o.negation.to_string());
                let mut compile = c.flags_p_prime.clone();
                compile.extend(option.clone());
                shipped_link.extend(option);
                (compile, shipped_link)
            }
        }
    }

    /// The compile flags of the units in a probe's binary: the probe's own for the reference, the shipped build
    /// and plain optimisation; the shipped build's for the single-option probes, which change the analysed file
    /// only.
    fn unit_flags(&self, probe: Probe) -> Vec<String> {
        match probe {
            Probe::Reference | Probe::Shipped | Probe::Without(Cause::Optimisation) => {
                self.flags(probe).0
            }
            Probe::Without(_) => self.flags(Probe::Shipped).0,
        }
    }

    /// Compiles the units for each of `flag_sets` not compiled yet, the units of one set in parallel (as many at
    /// once as the analysis has threads).
    fn compile_units(&mut self, flag_sets: &[Vec<String>], dir: &Path) {
        for flags in flag_sets {
            if self.units.is_empty() || self.unit_objects.contains_key(flags) {
                continue;
            }
            let clang = &self.config.clang;
            let width = self.config.threads.max(1);
            let stop = process::tools_stop_flag();
            let mut objects = Vec::new();
            for chunk in self.units.chunks(width) {
                let built: Vec<Result<PathBuf, String>> = std::thread::scope(|scope| {
                    let handles: Vec<_> = chunk
                        .iter()
                        .map(|(unit, own)| {
                            let stop = stop.clone();
                            scope.spawn(move || {
                                process::stop_tools_when(stop);
                                build::unit_object(clang, unit, own, flags, dir)
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| {
                            h.join()
                                .unwrap_or_else(|_| Err("a unit build panicked".into()))
                        })
                        .collect()
                });
                objects.extend(built);
            }
            let objects: Result<Vec<PathBuf>, String> = objects.into_iter().collect();
            if let Err(e) = &objects {
                tracing::debug!("the shipped binaries are linked without the project's units: {e}");
            }
            self.unit_objects.insert(flags.clone(), objects);
        }
    }

    /// Compiles stubs for [`Harness::expected_stubs`] before the first link (once), so that links do not fail
    /// for them first; those standing for data or for a unit past the limit make the binaries not the program,
    /// as when a failed link names them.
    fn stub_expected(&mut self, dir: &Path) {
        let known = self.stubs.get_mut().map(|k| k.is_some()).unwrap_or(true);
        if known || self.expected_stubs.is_empty() {
            return;
        }
        let names = std::mem::take(&mut self.expected_stubs);
        match build::compile_stubs(
            &self.config.clang,
            dir,
            &names,
            &self.unresolved_data,
            "expected-stubs.o",
        ) {
            Ok(obj) => {
                if let Ok(stubbed) = self.stubbed.get_mut() {
                    stubbed.extend(
                        names
                            .iter()
                            .filter(|m| {
                                self.unresolved_data.contains(*m) || self.beyond_cap.contains(*m)
                            })
                            .cloned(),
                    );
                }
                if let Ok(stubs) = self.stubs.get_mut() {
                    *stubs = Some((names, obj));
                }
            }
            Err(e) => tracing::debug!("the expected stubs are left to the links: {e}"),
        }
    }

    /// Has `other` (a harness of the same file) build `probes` on a thread of its own, which inherits the calling
    /// thread's priority and runs `then` on `other` when they are built; the first [`Harness::prepare`] that needs
    /// one of them, or of `then_builds` (what `then` may go on building in the background), waits for it and
    /// takes over its binaries (and what `then` left building).
    pub fn build_later(
        &mut self,
        probes: &[Probe],
        then_builds: &[Probe],
        mut other: Harness,
        then: impl FnOnce(&mut Harness) + Send + 'static,
    ) {
        let wanted = probes.to_vec();
        let building = [probes, then_builds].concat();
        let stop = process::tools_stop_flag();
        let spawned = std::thread::Builder::new()
            .name("foe-probes".into())
            .spawn(move || {
                process::stop_tools_when(stop);
                other.prepare(&wanted);
                then(&mut other);
                other
            });
        match spawned {
            Ok(handle) => self.background = Some((building, handle)),
            Err(e) => tracing::debug!("the later probes are built on demand: {e}"),
        }
    }

    /// Takes over the background harness's binaries when `probes` needs one of them, and what it still builds in
    /// the background.
    fn adopt_background(&mut self, probes: &[Probe]) {
        let Some((_, handle)) = self
            .background
            .take_if(|(building, _)| probes.iter().any(|p| building.contains(p)))
        else {
            return;
        };
        let Ok(mut other) = handle.join() else {
            tracing::warn!("the thread building the later probes panicked");
            return;
        };
        for (probe, exe) in std::mem::take(&mut other.binaries) {
            self.binaries.entry(probe).or_insert(exe);
        }
        let theirs = std::mem::take(other.stubbed.get_mut().unwrap_or_else(|p| p.into_inner()));
        self.stubbed
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .extend(theirs);
        self.background = other.background.take();
        self.adopted.push(other);
        // What it left building may be needed too.
        self.adopt_background(probes);
    }

    /// Waits for every build going on in the background (their tools are stopped when the analysis ends).
    pub(super) fn join_background(&mut self) {
        while let Some((_, handle)) = self.background.take() {
            match handle.join() {
                Ok(mut other) => self.background = other.background.take(),
                Err(_) => tracing::warn!("the thread building the later probes panicked"),
            }
        }
    }

    /// Builds the binaries of `probes` not built yet (in parallel); a failure is kept per probe.
    pub fn prepare(&mut self, probes: &[Probe]) {
        self.adopt_background(probes);
        let todo: Vec<Probe> = probes
            .iter()
            .copied()
            .filter(|p| !self.binaries.contains_key(p))
            .collect();
        if todo.is_empty() {
            return;
        }
        let dir = match self.dir() {
            Ok(d) => d,
            Err(e) => {
                for p in todo {
                    self.binaries.insert(p, Err(e.clone()));
                }
                return;
            }
        };
        let driver = self
            .driver
            .get_or_insert_with(|| build::driver_object(&self.config.clang, &dir))
            .clone();
        let unit_sets: Vec<Vec<String>> = todo.iter().map(|&p| self.unit_flags(p)).collect();
        self.compile_units(&unit_sets, &dir);
        self.stub_expected(&dir);
        let source = format!("{}\n{}", self.text, thunks::thunks(&self.functions));
        let this = &*self;
        let stop = process::tools_stop_flag();
        let built: Vec<(Probe, Result<PathBuf, String>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = todo
                .iter()
                .zip(&unit_sets)
                .map(|(&probe, unit_flags)| {
                    let (compile_flags, link_flags) = this.flags(probe);
                    let units = match this.unit_objects.get(unit_flags) {
                        Some(Ok(objects)) => Some(objects.as_slice()),
                        Some(Err(_)) => None,
                        None => Some(&[][..]),
                    };
                    let (dir, driver, source) = (&dir, &driver, &source);
                    let stop = stop.clone();
                    scope.spawn(move || {
                        process::stop_tools_when(stop);
                        let exe = driver.clone().and_then(|driver| {
                            let spec = BuildSpec {
                                probe,
                                compile_flags: &compile_flags,
                                link_flags: &link_flags,
                                units,
                            };
                            this.build(&spec, dir, &driver, source)
                        });
                        (probe, exe)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("harness build thread does not panic"))
                .collect()
        });
        // Builds stopped because the analysis ended (a small file is done before its probes are) are not failures.
        let ended = stop
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Acquire));
        for (probe, exe) in built {
            match &exe {
                Err(e) if ended => tracing::debug!(?probe, "shipped binary not built: {e}"),
                Err(e) => tracing::warn!(?probe, "cannot build the shipped binary: {e}"),
                Ok(_) => {}
            }
            self.binaries.insert(probe, exe);
        }
    }

    /// Whether P''s preprocessed text changes when `__FAST_MATH__` is undefined: the macro probe differs from P'
    /// only then. Two runs of the preprocessor, a fraction of a compile (Box2D's headers take half a second to
    /// compile, tens of milliseconds to preprocess); remembered. `true` when the preprocessor cannot say.
    pub fn reads_fast_math_macro(&self) -> bool {
        *self.reads_macro.get_or_init(|| {
            let (flags, cwd) = self.file_flags(&self.flags(Probe::Shipped).0);
            let preprocess = |undefine: bool| {
                let mut cmd = process::command(&self.config.clang, &cwd);
                cmd.args(&flags)
                    .args(["-w", "-E", "-P", "-x", "c", "-", "-o", "-"]);
                if undefine {
                    cmd.arg(crate::fast_math::MACRO.negation);
                }
                process::run_tool(cmd, Some(self.text.as_bytes()), build::TOOL_TIMEOUT)
                    .ok()
                    .filter(|out| out.status == Some(0) && !out.timed_out)
                    .map(|out| out.stdout)
            };
            // The two runs side by side: each is mostly clang starting.
            let stop = process::tools_stop_flag();
            let (with, without) = std::thread::scope(|s| {
                let without = s.spawn(|| {
                    process::stop_tools_when(stop);
                    preprocess(true)
                });
                (preprocess(false), without.join().ok().flatten())
            });
            let reads = match (with, without) {
                (Some(with), Some(without)) => with != without,
                _ => true,
            };
            tracing::debug!(reads, "does the preprocessed file read __FAST_MATH__");
            reads
        })
    }

    /// The flags that compile the analysed file with `compile_flags`, and the directory to run clang in: the
    /// file's own, so that it includes its headers from there.
    fn file_flags(&self, compile_flags: &[String]) -> (Vec<String>, PathBuf) {
        // A file named relative to the current directory (`foe check f.c`) includes its headers from there.
        let file = std::path::absolute(&self.file).unwrap_or_else(|_| self.file.clone());
        let cwd = file
            .parent()
            .filter(|d| d.is_dir())
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let mut flags = Vec::new();
        if let Some(parent) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            flags.push("-iquote".to_string());
            flags.push(parent.display().to_string());
        }
        flags.extend(self.config.extra_flags.iter().cloned());
        flags.extend(compile_flags.iter().cloned());
        (flags, cwd)
    }

    /// The analysed file's object for `compile_flags`, with debug info or without: built by an earlier probe with
    /// the same flags (of this harness or a sibling), or now, into `dir`.
    fn object(
        &self,
        dir: &Path,
        source: &str,
        compile_flags: &[String],
        debug_info: bool,
        name: &str,
    ) -> Result<PathBuf, String> {
        let mut compile_flags = compile_flags.to_vec();
        if debug_info {
            compile_flags.push(build::DEBUG_INFO.to_string());
        }
        self.objects.get_or_compile(&compile_flags, || {
            let obj = dir.join(format!("{name}.o"));
            let (flags, cwd) = self.file_flags(&compile_flags);
            let started = std::time::Instant::now();
            build::compile_file(&self.config.clang, &cwd, &flags, source, &obj, dir)?;
            tracing::trace!(
                name,
                flags = compile_flags.join(" "),
                ms = started.elapsed().as_millis() as u64,
                "shipped object compiled"
            );
            Ok(obj)
        })
    }

    /// Builds one probe's binary: the file's object, the driver, the units (`None` when they could not be
    /// compiled), the stubs known so far; when the link still misses symbols, stubs for them too. A link that
    /// fails with the units for another reason (a symbol defined twice) is tried again without them.
    fn build(
        &self,
        spec: &BuildSpec<'_>,
        dir: &Path,
        driver: &Path,
        source: &str,
    ) -> Result<PathBuf, String> {
        let clang = &self.config.clang;
        let name = match spec.probe {
            Probe::Reference => "p".to_string(),
            Probe::Shipped => "pp".to_string(),
            Probe::Without(cause) => format!("pp-{cause:?}").to_lowercase(),
        };
        let debug_info = spec.probe.needs_debug_info();
        let obj = self.object(dir, source, spec.compile_flags, debug_info, &name)?;
        let object = reuse::code_hash(&obj);
        if let Some(exe) = object.as_ref().and_then(|o| {
            self.same
                .find(clang, o, debug_info, spec.units, spec.link_flags)
        }) {
            tracing::debug!(probe = ?spec.probe, exe = %exe.display(), "the same binary as an earlier one");
            return Ok(exe);
        }
        let exe = dir.join(&name);
        if spec.probe == Probe::Without(Cause::FlushToZero) {
            if let Some(shipped) = object.as_ref().and_then(|o| self.shipped_of(o, spec.units)) {
                // `crtfastmath.o` only sets FTZ/DAZ at start-up (and the objects' own start-up code is removed),
                // so the fast-math binary with them cleared by its driver is the probe: no link. Under a name of
                // its own, so that its driver and its runs are not the fast-math binary's.
                if std::fs::hard_link(&shipped, &exe).is_ok() {
                    tracing::debug!(shipped = %shipped.display(), "the flush-to-zero probe is the fast-math binary");
                    return Ok(exe);
                }
            }
        }
        let built = |exe: PathBuf| {
            if let Some(object) = object {
                self.same
                    .add(object, debug_info, spec.units, spec.link_flags, &exe);
            }
            Ok(exe)
        };
        let with = |stubs: Option<&Path>| {
            let mut objects = vec![obj.clone(), driver.to_path_buf()];
            objects.extend(spec.units.unwrap_or_default().iter().cloned());
            objects.extend(stubs.map(Path::to_path_buf));
            objects
        };
        // The names this link would report undefined are stubbed before it, where the objects say (a failed link
        // costs as much as one that succeeds); the linker's own list covers what the objects cannot say.
        let unstubbed = with(None);
        let mut known = self.stubs.lock().ok().and_then(|s| s.clone());
        let mut missing = build::predicted_undefined(&unstubbed, spec.link_flags);
        missing.retain(|m| known.as_ref().is_none_or(|k| !k.0.contains(m)));
        if !missing.is_empty() {
            known = Some(self.stub(spec, dir, &name, known, missing, &unstubbed)?);
        }
        let out = match build::link(
            clang,
            dir,
            spec.link_flags,
            &exe,
            &with(known.as_ref().map(|k| k.1.as_path())),
        )? {
            Ok(()) => {
                self.remember_stubs(known);
                return built(exe);
            }
            Err(out) => out,
        };
        let missing = build::undefined_symbols(&out.stderr);
        tracing::debug!(probe = ?spec.probe, ?missing, "a link missed symbols the objects did not show");
        if missing.is_empty() || out.timed_out {
            if spec.units.is_some_and(|u| !u.is_empty()) {
                tracing::debug!(
                    "cannot link the shipped build with the project's units ({}): without them",
                    crate::exec::first_error(&out.stderr, out.timed_out)
                );
                let alone = BuildSpec {
                    units: None,
                    ..*spec
                };
                return self.build(&alone, dir, driver, source);
            }
            return Err(format!(
                "cannot link the shipped build: {}",
                crate::exec::first_error(&out.stderr, out.timed_out)
            ));
        }
        let known = self.stub(spec, dir, &name, known, missing, &unstubbed)?;
        match build::link(clang, dir, spec.link_flags, &exe, &with(Some(&known.1)))? {
            Ok(()) => {
                self.remember_stubs(Some(known));
                built(exe)
            }
            Err(out) => Err(format!(
                "cannot link the shipped build: {}",
                crate::exec::first_error(&out.stderr, out.timed_out)
            )),
        }
    }

    /// The fast-math binary (as shipped, with debug info) linked from the analysed file's `object` and `units`,
    /// where this machine's flush-to-zero is the one its driver can clear (x86-64's MXCSR).
    fn shipped_of(&self, object: &blake3::Hash, units: Option<&[PathBuf]>) -> Option<PathBuf> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        let (_, shipped_link) = self.flags(Probe::Shipped);
        self.same
            .find(&self.config.clang, object, true, units, &shipped_link)
    }

    /// Stubs `missing` (names a link of `objects` leaves undefined) with the stubs `known` so far: the names and
    /// the stubs' object. Without all of the project's units (or past the unit limit), a stub may stand for code
    /// the instrumented builds ran, and a stub for data stands for a value nobody knows: those make the binary
    /// not the program ([`Harness::stubbed`]).
    fn stub(
        &self,
        spec: &BuildSpec<'_>,
        dir: &Path,
        name: &str,
        known: Option<(Vec<String>, PathBuf)>,
        missing: Vec<String>,
        objects: &[PathBuf],
    ) -> Result<(Vec<String>, PathBuf), String> {
        if let Ok(mut stubbed) = self.stubbed.lock() {
            stubbed.extend(
                missing
                    .iter()
                    .filter(|m| {
                        spec.units.is_none()
                            || self.unresolved_data.contains(*m)
                            || self.beyond_cap.contains(*m)
                    })
                    .cloned(),
            );
        }
        let mut names: Vec<String> = known.map(|k| k.0).unwrap_or_default();
        names.extend(missing);
        names.sort();
        names.dedup();
        // What the project's IR knows is data, and what the objects read rather than call: a datum another
        // file defines is stubbed as code otherwise when the units could not be linked, or without a database.
        let mut data = build::referred_to_as_data(objects, &names);
        data.extend(self.unresolved_data.iter().cloned());
        let stubs = build::compile_stubs(
            &self.config.clang,
            dir,
            &names,
            &data,
            &format!("{name}-stubs.o"),
        )?;
        Ok((names, stubs))
    }

    /// Keeps `stubs` for the later links of this harness when they cover more names than the ones kept.
    fn remember_stubs(&self, stubs: Option<(Vec<String>, PathBuf)>) {
        let Some(stubs) = stubs else { return };
        if let Ok(mut known) = self.stubs.lock() {
            if known.as_ref().is_none_or(|k| k.0.len() < stubs.0.len()) {
                *known = Some(stubs);
            }
        }
    }
}
