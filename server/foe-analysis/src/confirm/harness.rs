//! The shipped binaries of a file: built by clang as a build ships them (`-g` added, which changes no code), run
//! sandboxed by the driver `runtime/foe_confirm.c`, which replies with the sticky flags and the trapped trace.

use super::trace::{self, RawEvent};
use crate::compile;
use crate::config::{AnalysisConfig, FtzMode};
use crate::process::{self, SandboxLimits};
use crate::report::{Cause, TraceEvent};
use crate::types::{ArgValue, FunctionSignature, Input, ParamType, ReturnType};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Sections whose code runs at start-up or exit (constructors, destructors, init and fini arrays, and their
/// relocations): the analysis never asks for them, so they are removed from the user's object before the
/// shipped binary is linked, as the worker's linking drops them.
const START_UP_SECTIONS: &[&str] = &[
    ".init_array*",
    ".fini_array*",
    ".preinit_array*",
    ".ctors*",
    ".dtors*",
    ".rela.init_array*",
    ".rela.fini_array*",
    ".rela.preinit_array*",
    ".rela.ctors*",
    ".rela.dtors*",
];

/// Removes [`START_UP_SECTIONS`] from `obj` in place (LLVM's objcopy, else binutils'), and the debug info too
/// when it refers to them.
fn strip_start_up_code(obj: &Path, dir: &Path) -> Result<(), String> {
    let tool = ["/usr/lib/llvm-19/bin/llvm-objcopy", "/usr/bin/objcopy"]
        .into_iter()
        .find(|t| Path::new(t).is_file())
        .ok_or("no objcopy to remove start-up code from the shipped build")?;
    let run = |strip_debug: bool| {
        let mut cmd = process::command(tool, dir);
        cmd.arg("--wildcard");
        if strip_debug {
            cmd.arg("--strip-debug");
        }
        for section in START_UP_SECTIONS {
            cmd.arg(format!("--remove-section={section}"));
        }
        cmd.arg(obj);
        process::run_tool(cmd, None, TOOL_TIMEOUT).map_err(|e| format!("cannot run {tool}: {e}"))
    };
    let mut out = run(false)?;
    if out.status != Some(0) {
        // The debug info refers to a start-up section (a global in `.init_array`): without it, this file's
        // shipped traces have no lines.
        tracing::debug!("removing the start-up code with the debug info");
        out = run(true)?;
    }
    if out.status != Some(0) {
        return Err(format!(
            "cannot remove start-up code from the shipped build: {}",
            crate::exec::first_error(&out.stderr, out.timed_out)
        ));
    }
    Ok(())
}

/// The driver's source, embedded so foe works from any directory.
pub const CONFIRM_C: &str = include_str!("../../../../runtime/foe_confirm.c");

const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// One binary of the harness: the shipped P and P', or P' with one option changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Probe {
    Reference,
    Shipped,
    /// P' without what `Cause` names (for [`Cause::Optimisation`]: P''s flags without any fast-math option).
    Without(Cause),
}

/// The single-option probes in the order they are tried, with the option added to P''s compile and link flags
/// (FTZ/DAZ: only to the link, where `crtfastmath.o` comes in).
pub const PROBES: [(Cause, &str); 7] = [
    (Cause::FlushToZero, "-mno-daz-ftz"),
    (Cause::Reassociation, "-fno-associative-math"),
    (Cause::Reciprocal, "-fno-reciprocal-math"),
    (Cause::Contraction, "-ffp-contract=off"),
    (Cause::FiniteMath, "-fno-finite-math-only"),
    (Cause::SignedZeros, "-fsigned-zeros"),
    (Cause::ApproxFunc, "-fno-approx-func"),
];

/// How one call of a shipped binary ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShippedEnd {
    /// Returned; the exceptions raised, as bits (invalid 1, divide-by-zero 2, overflow 4, underflow 8).
    Raised(u8),
    Crashed,
    TimedOut,
}

/// One call of a shipped binary: how it ended and, when it returned, the exceptions it trapped in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShippedRun {
    pub end: ShippedEnd,
    /// The trapped events, placed by the binary's debug info (empty unless it returned).
    pub trace: Vec<TraceEvent>,
    /// Events the driver dropped past its capacity: the trace is then incomplete.
    pub dropped: usize,
}

impl ShippedRun {
    fn ended(end: ShippedEnd) -> ShippedRun {
        ShippedRun {
            end,
            trace: Vec::new(),
            dropped: 0,
        }
    }
}

/// The shipped binaries of one file, built on first use.
pub struct Harness {
    config: AnalysisConfig,
    file: PathBuf,
    text: String,
    functions: Vec<FunctionSignature>,
    /// A temporary directory holding the objects and binaries, made on first use.
    dir: Option<Result<tempfile::TempDir, String>>,
    driver: Option<Result<PathBuf, String>>,
    binaries: HashMap<Probe, Result<PathBuf, String>>,
    /// Symbols of other files that the shipped binaries got trapping stubs for: where there are any, the binaries
    /// are not the program (a global's value, a callee's result are missing), so a difference they do not show
    /// is not taken as evidence against the instrumented builds.
    pub(super) stubbed: std::sync::Mutex<std::collections::BTreeSet<String>>,
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
            dir: None,
            driver: None,
            binaries: HashMap::new(),
            stubbed: Default::default(),
        }
    }

    fn dir(&mut self) -> Result<PathBuf, String> {
        let dir = self.dir.get_or_insert_with(|| {
            tempfile::Builder::new()
                .prefix("foe-confirm")
                .tempdir()
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
                let option = PROBES
                    .iter()
                    .find(|(c, _)| *c == cause)
                    .map(|(_, o)| o.to_string());
                let mut compile = c.flags_p_prime.clone();
                compile.extend(option.clone());
                shipped_link.extend(option);
                (compile, shipped_link)
            }
        }
    }

    /// Builds the binaries of `probes` not built yet (in parallel); a failure is kept per probe.
    pub fn prepare(&mut self, probes: &[Probe]) {
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
            .get_or_insert_with(|| compile_driver(&self.config.clang, &dir))
            .clone();
        let source = format!("{}\n{}", self.text, thunks(&self.functions));
        let this = &*self;
        let built: Vec<(Probe, Result<PathBuf, String>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = todo
                .iter()
                .map(|&probe| {
                    let (compile_flags, link_flags) = this.flags(probe);
                    let (dir, driver, source) = (&dir, &driver, &source);
                    scope.spawn(move || {
                        let exe = driver.clone().and_then(|driver| {
                            this.build(probe, dir, &driver, source, &compile_flags, &link_flags)
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
        for (probe, exe) in built {
            if let Err(e) = &exe {
                tracing::warn!(?probe, "cannot build the shipped binary: {e}");
            }
            self.binaries.insert(probe, exe);
        }
    }

    fn build(
        &self,
        probe: Probe,
        dir: &Path,
        driver: &Path,
        source: &str,
        compile_flags: &[String],
        link_flags: &[String],
    ) -> Result<PathBuf, String> {
        let clang = &self.config.clang;
        let name = match probe {
            Probe::Reference => "p".to_string(),
            Probe::Shipped => "pp".to_string(),
            Probe::Without(cause) => format!("pp-{cause:?}").to_lowercase(),
        };
        let obj = dir.join(format!("{name}.o"));
        let cwd = self
            .file
            .parent()
            .filter(|d| d.is_dir())
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let mut cmd = process::command(clang, &cwd);
        if let Some(parent) = self.file.parent().filter(|d| !d.as_os_str().is_empty()) {
            cmd.arg("-iquote").arg(parent);
        }
        cmd.args(&self.config.extra_flags)
            .args(compile_flags)
            .args([
                "-w",
                // Debug info for the trace's lines; it changes no instruction clang emits.
                "-g",
                "-Dmain=foe_confirm_user_main",
                "-c",
                "-x",
                "c",
                "-",
                "-o",
            ])
            .arg(&obj);
        let out = process::run_tool(cmd, Some(source.as_bytes()), TOOL_TIMEOUT)
            .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
        if out.status != Some(0) || !obj.is_file() {
            return Err(format!(
                "cannot compile the shipped build ({}): {}",
                compile_flags.join(" "),
                crate::exec::first_error(&out.stderr, out.timed_out)
            ));
        }
        strip_start_up_code(&obj, dir)?;
        let exe = dir.join(&name);
        let link = |extra: Option<&Path>| {
            let mut cmd = process::command(clang, dir);
            cmd.args(link_flags)
                .arg("-o")
                .arg(&exe)
                .arg(&obj)
                .arg(driver)
                .args(extra)
                .arg("-lm");
            process::run_tool(cmd, None, TOOL_TIMEOUT)
                .map_err(|e| format!("cannot run {}: {e}", clang.display()))
        };
        let out = link(None)?;
        if out.status == Some(0) && exe.is_file() {
            return Ok(exe);
        }
        // Functions of other files: stubs that trap, so only the inputs that reach them fail (they crash).
        let missing = undefined_symbols(&out.stderr);
        if missing.is_empty() || out.timed_out {
            return Err(format!(
                "cannot link the shipped build: {}",
                crate::exec::first_error(&out.stderr, out.timed_out)
            ));
        }
        if let Ok(mut stubbed) = self.stubbed.lock() {
            stubbed.extend(missing.iter().cloned());
        }
        let stubs = dir.join(format!("{name}-stubs.o"));
        let source: String = missing
            .iter()
            .map(|m| format!("void {m}(void) {{ __builtin_trap(); }}\n"))
            .collect();
        let mut cmd = process::command(clang, dir);
        cmd.args(["-w", "-c", "-x", "c", "-", "-o"]).arg(&stubs);
        let out = process::run_tool(cmd, Some(source.as_bytes()), TOOL_TIMEOUT)
            .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
        if out.status != Some(0) {
            return Err(format!(
                "cannot stub {}: {}",
                missing.join(", "),
                crate::exec::first_error(&out.stderr, out.timed_out)
            ));
        }
        let out = link(Some(&stubs))?;
        if out.status != Some(0) || !exe.is_file() {
            return Err(format!(
                "cannot link the shipped build: {}",
                crate::exec::first_error(&out.stderr, out.timed_out)
            ));
        }
        Ok(exe)
    }

    /// Runs `function` of a probe's binary on each input; `Err` when the binary cannot be built or the function
    /// cannot be called from C as foe knows its signature.
    pub fn run(
        &mut self,
        probe: Probe,
        function: &str,
        inputs: &[Input],
    ) -> Result<Vec<ShippedRun>, String> {
        let index = self
            .functions
            .iter()
            .position(|f| f.name == function)
            .ok_or_else(|| format!("`{function}` is not in the harness"))?;
        c_prototype(&self.functions[index])?;
        self.prepare(&[probe]);
        let exe = self.binaries[&probe].clone()?;
        let lines: Vec<String> = inputs
            .iter()
            .map(|input| {
                let words: Vec<String> =
                    input.0.iter().map(|v| format!("{:x}", word(*v))).collect();
                format!("{index} {}\n", words.join(" "))
            })
            .collect();
        let limit_ms = self.config.exec_timeout_ms.max(1);
        let mut replies: Vec<(ShippedEnd, Vec<RawEvent>, usize)> = Vec::with_capacity(inputs.len());
        while replies.len() < inputs.len() {
            let rest = &lines[replies.len()..];
            let got = run_driver(&exe, rest, limit_ms, self.config.memory_limit_mib)?;
            let n = got.len();
            let stopped = got.last().is_some_and(|r| r.0 == ShippedEnd::TimedOut);
            replies.extend(got);
            if n < rest.len() && !stopped {
                // The process died on the next input without replying.
                replies.push((ShippedEnd::Crashed, Vec::new(), 0));
            }
        }
        replies.truncate(inputs.len());
        let debug_info = replies
            .iter()
            .any(|r| r.1.iter().any(|e| e.addr.is_some()))
            .then(|| trace::loader(&exe))
            .flatten();
        let lines_in_file = self.text.lines().count() as u32;
        Ok(replies
            .into_iter()
            .map(|(end, events, dropped)| match end {
                ShippedEnd::Raised(_) => ShippedRun {
                    end,
                    trace: trace::to_trace(debug_info.as_ref(), lines_in_file, &events),
                    dropped,
                },
                _ => ShippedRun::ended(end),
            })
            .collect())
    }
}

/// Runs the driver on `lines` until it exits; its replies in order (fewer than `lines` when it crashed or timed
/// out), each with its events and how many it dropped.
fn run_driver(
    exe: &Path,
    lines: &[String],
    limit_ms: u64,
    memory_mib: u64,
) -> Result<Vec<(ShippedEnd, Vec<RawEvent>, usize)>, String> {
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
    let mut ends = Vec::new();
    for line in out.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("r") => {
                let bits = words
                    .next()
                    .and_then(|w| u8::from_str_radix(w, 16).ok())
                    .unwrap_or(0);
                let _result = words.next();
                let (events, dropped) = trace::parse_events(words)?;
                ends.push((ShippedEnd::Raised(bits & 0xf), events, dropped));
            }
            Some("t") => {
                ends.push((ShippedEnd::TimedOut, Vec::new(), 0));
                break;
            }
            _ => return Err(format!("the shipped binary replied `{line}`")),
        }
    }
    Ok(ends)
}

/// The word the driver reads for one value (as the instrumented runner encodes it).
fn word(v: ArgValue) -> u64 {
    v.bits()
}

/// The symbols a failed link reports undefined, sorted and distinct (C identifiers only).
fn undefined_symbols(stderr: &str) -> Vec<String> {
    static UNDEFINED: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = UNDEFINED.get_or_init(|| {
        regex::Regex::new(r"undefined reference to [`']([A-Za-z_][A-Za-z0-9_]*)'")
            .expect("valid regex")
    });
    let mut out: Vec<String> = re.captures_iter(stderr).map(|c| c[1].to_string()).collect();
    out.sort();
    out.dedup();
    out
}

/// Compiles the driver (without fast math) into `dir`.
fn compile_driver(clang: &Path, dir: &Path) -> Result<PathBuf, String> {
    let src = dir.join("foe_confirm.c");
    std::fs::write(&src, format!("{CONFIRM_C}\n{}", crate::exec::LIBC_EXTRAS_C))
        .map_err(|e| format!("cannot write the driver: {e}"))?;
    let obj = dir.join("foe_confirm.o");
    let mut cmd = process::command(clang, dir);
    cmd.args(["-c", "-O2", "-fno-fast-math", "-w"])
        .arg(&src)
        .arg("-o")
        .arg(&obj);
    let out = process::run_tool(cmd, None, TOOL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    if out.status != Some(0) || !obj.is_file() {
        return Err(format!(
            "cannot compile the harness driver: {}",
            crate::exec::first_error(&out.stderr, out.timed_out)
        ));
    }
    Ok(obj)
}

fn c_int(bits: u32, signed: bool) -> Option<&'static str> {
    Some(match (bits, signed) {
        (1, _) => "_Bool",
        (8, true) => "signed char",
        (8, false) => "unsigned char",
        (16, true) => "short",
        (16, false) => "unsigned short",
        (32, true) => "int",
        (32, false) => "unsigned int",
        (64, true) => "long long",
        (64, false) => "unsigned long long",
        _ => return None,
    })
}

/// The C return type and parameter types of `sig` as the driver calls it, or why it cannot be called.
fn c_prototype(sig: &FunctionSignature) -> Result<(String, Vec<String>), String> {
    let ret = match sig.ret {
        ReturnType::Void => "void",
        ReturnType::F64 => "double",
        ReturnType::F32 => "float",
        ReturnType::Int { bits, signed } => {
            c_int(bits, signed).ok_or_else(|| format!("returns a {bits}-bit integer"))?
        }
        ReturnType::Other => {
            return Err(
                "its return type (a pointer or an aggregate) cannot be called from the harness"
                    .into(),
            )
        }
    };
    let mut params = Vec::new();
    for p in sig.call_params() {
        params.push(match p.ty {
            ParamType::F64 => "double".to_string(),
            ParamType::F32 => "float".to_string(),
            ParamType::Int { bits, signed } => c_int(bits, signed)
                .ok_or_else(|| format!("`{}` is a {bits}-bit integer", p.name))?
                .to_string(),
            ParamType::OutPtr { .. } => "void *".to_string(),
        });
    }
    Ok((ret.to_string(), params))
}

/// The C appended to the file: a thunk per function that unpacks the words, calls the function through a
/// volatile pointer (so it is emitted and called as it ships, not inlined into the thunk), and packs the
/// result; and the table the driver calls through. Functions the driver cannot call get an empty thunk.
fn thunks(functions: &[FunctionSignature]) -> String {
    let mut out = String::from("\n/* foe confirmation harness */\n");
    for (i, sig) in functions.iter().enumerate() {
        out.push_str(&format!(
            "static void foe_confirm_call_{i}(const unsigned long long *w, unsigned long long *r) {{\n"
        ));
        if let Ok((ret, params)) = c_prototype(sig) {
            out.push_str(&format!(
                "  static void *volatile fn = (void *)&{};\n",
                sig.name
            ));
            let mut args = Vec::new();
            let mut c_index = 0;
            for (k, p) in sig.params.iter().enumerate() {
                if p.pointee.is_some() {
                    continue;
                }
                match p.ty {
                    ParamType::OutPtr { bytes } => out.push_str(&format!(
                        "  unsigned char a{k}[{}] __attribute__((aligned(16))) = {{0}};\n",
                        bytes.max(1)
                    )),
                    ParamType::F64 | ParamType::F32 => out.push_str(&format!(
                        "  {} a{k}; __builtin_memcpy(&a{k}, &w[{k}], sizeof a{k});\n",
                        params[c_index]
                    )),
                    ParamType::Int { .. } => out.push_str(&format!(
                        "  {} a{k} = ({})w[{k}];\n",
                        params[c_index], params[c_index]
                    )),
                }
                args.push(format!("a{k}"));
                c_index += 1;
            }
            for (k, p) in sig.params.iter().enumerate() {
                let Some(at) = p.pointee else { continue };
                let size = match p.ty {
                    ParamType::F64 => 8,
                    ParamType::F32 => 4,
                    ParamType::Int { bits, .. } => bits.div_ceil(8),
                    ParamType::OutPtr { .. } => continue,
                };
                out.push_str(&format!(
                    "  __builtin_memcpy(a{} + {}, &w[{k}], {size});\n",
                    at.param, at.offset
                ));
            }
            let call = format!(
                "(({ret} (*)({}))fn)({})",
                if params.is_empty() {
                    "void".to_string()
                } else {
                    params.join(", ")
                },
                args.join(", ")
            );
            match sig.ret {
                ReturnType::Void => out.push_str(&format!("  {call};\n  (void)r;\n")),
                ReturnType::F64 | ReturnType::F32 => out.push_str(&format!(
                    "  {ret} res = {call};\n  __builtin_memcpy(r, &res, sizeof res);\n"
                )),
                ReturnType::Int { signed: true, .. } => {
                    out.push_str(&format!("  *r = (unsigned long long)(long long){call};\n"))
                }
                _ => out.push_str(&format!("  *r = (unsigned long long){call};\n")),
            }
        } else {
            out.push_str("  (void)w; (void)r;\n");
        }
        out.push_str("}\n");
    }
    out.push_str(
        "typedef void (*foe_confirm_thunk)(const unsigned long long *, unsigned long long *);\n",
    );
    let entries: Vec<String> = (0..functions.len())
        .map(|i| format!("foe_confirm_call_{i}"))
        .collect();
    out.push_str(&format!(
        "foe_confirm_thunk const foe_confirm_table[] = {{{}}};\nconst int foe_confirm_count = {};\n",
        if entries.is_empty() {
            "0".to_string()
        } else {
            entries.join(", ")
        },
        functions.len()
    ));
    out
}
