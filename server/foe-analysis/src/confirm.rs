//! Confirmation on the binaries users ship, and the cause of each finding.
//!
//! The search runs instrumented IR compiled by `llc -O0`, which is not the machine code clang ships (the x86
//! backend re-associates `fmul` chains in its MachineCombiner; a `select` becomes a branch again). So every
//! divergence the search reports is run again by an independent harness: the file compiled by clang exactly as a
//! build would be (reference flags for P, fast-math flags for P' and the program linked with them, so
//! `crtfastmath.o` sets flush-to-zero/denormals-are-zero), no instrumentation, a small driver
//! (`runtime/foe_confirm.c`) that calls the function on the input and reads the sticky flags. A divergence whose
//! exception sets differ there is [`Confirmation::Confirmed`]; one whose sets agree but whose instrumented traces
//! differ in order or count only is [`Confirmation::TraceOnly`]; one whose set difference does not reproduce is
//! dropped and counted in [`FunctionReport::not_reproduced`].
//!
//! The cause of a confirmed divergence is found the same way: the input is run on builds of P' that differ in one
//! option ([`PROBES`]); the first whose exceptions equal P's names the [`Cause`].

use crate::compile;
use crate::config::{AnalysisConfig, FtzMode};
use crate::process::{self, SandboxLimits};
use crate::report::{Cause, Confirmation, Divergence, DivergenceClass, FunctionReport};
use crate::types::{ArgValue, ExceptionKind, FunctionSignature, Input, ParamType, ReturnType};
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

/// Removes [`START_UP_SECTIONS`] from `obj` in place (LLVM's objcopy, else binutils').
fn strip_start_up_code(obj: &Path, dir: &Path) -> Result<(), String> {
    let tool = ["/usr/lib/llvm-19/bin/llvm-objcopy", "/usr/bin/objcopy"]
        .into_iter()
        .find(|t| Path::new(t).is_file())
        .ok_or("no objcopy to remove start-up code from the shipped build")?;
    let mut cmd = process::command(tool, dir);
    cmd.arg("--wildcard");
    for section in START_UP_SECTIONS {
        cmd.arg(format!("--remove-section={section}"));
    }
    cmd.arg(obj);
    let out = process::run_tool(cmd, None, TOOL_TIMEOUT)
        .map_err(|e| format!("cannot run {tool}: {e}"))?;
    if out.status != Some(0) {
        return Err(format!(
            "cannot remove start-up code from the shipped build: {}",
            crate::exec::first_error(&out.stderr, out.timed_out)
        ));
    }
    Ok(())
}

/// The driver's source, embedded so foe works from any directory.
pub const CONFIRM_C: &str = include_str!("../../../runtime/foe_confirm.c");

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

/// The exceptions of a [`ShippedEnd::Raised`] bit set, in [`ExceptionKind::ALL`] order.
pub fn kinds(bits: u8) -> Vec<ExceptionKind> {
    ExceptionKind::ALL
        .into_iter()
        .enumerate()
        .filter(|(i, _)| bits >> i & 1 == 1)
        .map(|(_, k)| k)
        .collect()
}

/// The bit set of a trace's exception kinds, as [`ShippedEnd::Raised`] counts them.
fn bits_of(trace: &[crate::report::TraceEvent]) -> u8 {
    trace.iter().fold(0, |acc, e| {
        let i = ExceptionKind::ALL
            .iter()
            .position(|k| *k == e.kind)
            .unwrap_or(0);
        acc | 1 << i
    })
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
    stubbed: std::sync::Mutex<std::collections::BTreeSet<String>>,
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
    ) -> Result<Vec<ShippedEnd>, String> {
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
        let mut ends = Vec::with_capacity(inputs.len());
        while ends.len() < inputs.len() {
            let rest = &lines[ends.len()..];
            let replies = run_driver(&exe, rest, limit_ms, self.config.memory_limit_mib)?;
            let got = replies.len();
            let stopped = replies.last() == Some(&ShippedEnd::TimedOut);
            ends.extend(replies);
            if got < rest.len() && !stopped {
                // The process died on the next input without replying.
                ends.push(ShippedEnd::Crashed);
            }
        }
        ends.truncate(inputs.len());
        Ok(ends)
    }
}

/// Runs the driver on `lines` until it exits; its replies in order (fewer than `lines` when it crashed or timed out).
fn run_driver(
    exe: &Path,
    lines: &[String],
    limit_ms: u64,
    memory_mib: u64,
) -> Result<Vec<ShippedEnd>, String> {
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
                ends.push(ShippedEnd::Raised(bits & 0xf));
            }
            Some("t") => {
                ends.push(ShippedEnd::TimedOut);
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
    std::fs::write(&src, CONFIRM_C).map_err(|e| format!("cannot write the driver: {e}"))?;
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

/// The full input of a divergence (pointer placeholders included), from its named values.
fn input_of(sig: &FunctionSignature, d: &Divergence) -> Option<Input> {
    let mut named = d.inputs.iter();
    let mut values = Vec::with_capacity(sig.params.len());
    for p in &sig.params {
        if !p.ty.is_searchable() {
            values.push(ArgValue::OutPtr);
            continue;
        }
        let v = named.next()?;
        let value = match v.raw {
            Some(raw) => raw,
            None => match p.ty {
                ParamType::F64 => ArgValue::F64(crate::fpfmt::parse_f64(&v.value)?),
                ParamType::F32 => ArgValue::F32(crate::fpfmt::parse_f64(&v.value)? as f32),
                ParamType::Int { .. } => ArgValue::Int(v.value.parse().ok()?),
                ParamType::OutPtr { .. } => ArgValue::OutPtr,
            },
        };
        values.push(value);
    }
    Some(Input(values))
}

/// Confirms `report`'s divergences on the shipped binaries and finds their causes: sets
/// [`Divergence::confirmation`], the shipped exception sets and [`Divergence::cause`]; drops the divergences
/// whose set difference does not reproduce (counted in [`FunctionReport::not_reproduced`], noted in the reason);
/// makes `diff_producing` count the candidates of the divergences kept.
pub fn confirm_function(
    harness: &mut Harness,
    sig: &FunctionSignature,
    report: &mut FunctionReport,
) {
    if report.divergences.is_empty() {
        return;
    }
    let _span = tracing::debug_span!("confirm", function = %sig.name).entered();
    let inputs: Vec<Option<Input>> = report
        .divergences
        .iter()
        .map(|d| input_of(sig, d))
        .collect();
    let runnable: Vec<Input> = inputs.iter().flatten().cloned().collect();
    harness.prepare(&[Probe::Reference, Probe::Shipped]);
    let p = harness.run(Probe::Reference, &sig.name, &runnable);
    let pp = harness.run(Probe::Shipped, &sig.name, &runnable);
    let (p, pp) = match (p, pp) {
        (Ok(p), Ok(pp)) => (p, pp),
        (Err(e), _) | (_, Err(e)) => {
            let note = format!("not confirmed on the shipped binaries: {e}");
            report.reason = join(&report.reason, &note);
            return;
        }
    };
    // Per divergence: the shipped ends of P and P' (None when its input could not be rebuilt).
    let mut ends = p.into_iter().zip(pp);
    let shipped: Vec<Option<(ShippedEnd, ShippedEnd)>> = inputs
        .iter()
        .map(|i| i.as_ref().and_then(|_| ends.next()))
        .collect();
    let stubbed: Vec<String> = harness
        .stubbed
        .lock()
        .map(|s| s.iter().cloned().collect())
        .unwrap_or_default();
    let mut kept = Vec::new();
    let mut dropped = 0;
    let mut kept_unconfirmed = 0;
    let mut to_explain: Vec<(usize, Input, u8)> = Vec::new();
    for ((mut d, ends), input) in report.divergences.drain(..).zip(shipped).zip(inputs) {
        match ends {
            Some((ShippedEnd::Raised(a), ShippedEnd::Raised(b))) => {
                d.shipped_p = kinds(a);
                d.shipped_p_prime = kinds(b);
                if a != b {
                    d.confirmation = Confirmation::Confirmed;
                    to_explain.push((kept.len(), input.expect("ran"), a));
                } else if d.class == DivergenceClass::Appears
                    || bits_of(&d.trace_p) != bits_of(&d.trace_p_prime)
                {
                    let inputs: Vec<String> = d
                        .inputs
                        .iter()
                        .map(|v| format!("{}={}", v.name, v.value))
                        .collect();
                    tracing::debug!(inputs = %inputs.join(" "), shipped = ?d.shipped_p, "not reproduced");
                    if stubbed.is_empty() {
                        dropped += 1;
                        continue;
                    }
                    // The shipped binaries lack the project's other units: no verdict.
                    d.confirmation = Confirmation::NotRun;
                    kept_unconfirmed += 1;
                } else {
                    d.confirmation = Confirmation::TraceOnly;
                }
            }
            _ => d.confirmation = Confirmation::NotRun,
        }
        kept.push(d);
    }
    report.divergences = kept;
    report.not_reproduced = dropped;
    if kept_unconfirmed > 0 {
        let note = format!(
            "{kept_unconfirmed} divergences could not be checked on the shipped binaries, which lack what other \
             files define ({})",
            stubbed.join(", ")
        );
        report.reason = join(&report.reason, &note);
    }
    if dropped > 0 {
        let note = format!(
            "{dropped} divergences of the instrumented builds do not reproduce in the binaries clang ships and are not reported"
        );
        report.reason = join(&report.reason, &note);
    }
    report.diff_producing = report.divergences.iter().map(|d| d.candidates).sum();
    if to_explain.is_empty() {
        return;
    }
    let witnesses: Vec<Input> = to_explain.iter().map(|(_, i, _)| i.clone()).collect();
    let mut probes: Vec<Probe> = PROBES.iter().map(|(c, _)| Probe::Without(*c)).collect();
    probes.push(Probe::Without(Cause::Optimisation));
    harness.prepare(&probes);
    let results: Vec<(Probe, Option<Vec<ShippedEnd>>)> = probes
        .iter()
        .map(|&probe| (probe, harness.run(probe, &sig.name, &witnesses).ok()))
        .collect();
    for (w, (at, _, p_bits)) in to_explain.iter().enumerate() {
        let end = |probe: Probe| {
            results
                .iter()
                .find(|(p, _)| *p == probe)
                .and_then(|(_, r)| r.as_ref()?.get(w).copied())
        };
        report.divergences[*at].cause = decide(*p_bits, end);
    }
}

/// The cause of a divergence from the shipped ends of the probes: the first single option whose removal gives
/// P's exceptions; else optimisation when plain `-O2` diverges too; else several options together.
pub fn decide(p_bits: u8, end: impl Fn(Probe) -> Option<ShippedEnd>) -> Cause {
    let mut all_ran = true;
    for (cause, _) in PROBES {
        match end(Probe::Without(cause)) {
            Some(ShippedEnd::Raised(b)) if b == p_bits => return cause,
            Some(ShippedEnd::Raised(_)) => {}
            _ => all_ran = false,
        }
    }
    match end(Probe::Without(Cause::Optimisation)) {
        Some(ShippedEnd::Raised(b)) if b != p_bits => Cause::Optimisation,
        Some(ShippedEnd::Raised(_)) if all_ran => Cause::Combined,
        _ => Cause::Undetermined,
    }
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}; {b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Param;

    fn sig(name: &str, params: Vec<Param>, ret: ReturnType) -> FunctionSignature {
        FunctionSignature {
            name: name.into(),
            params,
            ret,
        }
    }

    #[test]
    fn shipped_builds_raise_what_clang_s_code_raises() {
        // `pick` at odd = 0: the select of the IR is a branch in clang's code, the division never runs.
        let src =
            "double pick(double x, int odd) { double r = x * 3.0; return odd ? -1.0 / r : r; }\n";
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pick.c");
        std::fs::write(&file, src).unwrap();
        let s = sig(
            "pick",
            vec![
                Param::new("x", ParamType::F64),
                Param::new(
                    "odd",
                    ParamType::Int {
                        bits: 32,
                        signed: true,
                    },
                ),
            ],
            ReturnType::F64,
        );
        let mut h = Harness::new(&AnalysisConfig::default(), &file, src, &[s]);
        let inputs = [
            Input(vec![ArgValue::F64(0.0), ArgValue::Int(0)]),
            Input(vec![ArgValue::F64(0.0), ArgValue::Int(1)]),
            Input(vec![ArgValue::F64(1e308), ArgValue::Int(0)]),
        ];
        let p = h.run(Probe::Reference, "pick", &inputs).unwrap();
        let pp = h.run(Probe::Shipped, "pick", &inputs).unwrap();
        assert_eq!(p[0], ShippedEnd::Raised(0));
        assert_eq!(pp[0], ShippedEnd::Raised(0), "no division at odd = 0");
        assert_eq!(p[1], ShippedEnd::Raised(2), "divide-by-zero");
        assert_eq!(pp[1], ShippedEnd::Raised(2));
        assert_eq!(p[2], ShippedEnd::Raised(4), "overflow");
    }

    #[test]
    fn start_up_code_of_the_file_does_not_run_in_the_shipped_builds() {
        // A constructor and an init-array entry that would trap at start-up: removed before linking, so the
        // function runs and raises what it raises.
        let src = "static void boom(void) { __builtin_trap(); }\n\
                   __attribute__((used, section(\".init_array\"))) static void (*p)(void) = boom;\n\
                   __attribute__((constructor)) static void boom2(void) { __builtin_trap(); }\n\
                   double twice(double x) { return x * 2.0; }\n";
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ctor.c");
        std::fs::write(&file, src).unwrap();
        let s = sig(
            "twice",
            vec![Param::new("x", ParamType::F64)],
            ReturnType::F64,
        );
        let mut h = Harness::new(&AnalysisConfig::default(), &file, src, &[s]);
        let inputs = [Input(vec![ArgValue::F64(1e308)])];
        for probe in [Probe::Reference, Probe::Shipped] {
            let ends = h.run(probe, "twice", &inputs).unwrap();
            assert_eq!(
                ends[0],
                ShippedEnd::Raised(4),
                "{probe:?}: overflow, no trap at start-up"
            );
        }
    }

    /// Searches exactly `input` (radius 0) on the instrumented builds, then confirms the result.
    fn search_and_confirm(src: &str, name: &str, input: Input) -> (usize, FunctionReport) {
        let config = AnalysisConfig {
            radius: 0,
            ..AnalysisConfig::default()
        };
        let (mut runner, sigs) = crate::exec::testutil::runner(src, &config);
        let sig = sigs.iter().find(|s| s.name == name).unwrap().clone();
        let found =
            crate::search::search(&mut runner, &sig, &[input], None, &config, None).unwrap();
        let instrumented = found.divergences.len();
        let mut report = FunctionReport::skipped(name, "");
        report.divergences = found.divergences;
        report.diff_producing = found.diff_producing;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.c");
        std::fs::write(&file, src).unwrap();
        let mut h = Harness::new(&config, &file, src, &sigs);
        confirm_function(&mut h, &sig, &mut report);
        (instrumented, report)
    }

    #[test]
    fn a_select_that_ships_as_a_branch_is_not_reported() {
        let src = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/trust/pick.c"
        ))
        .unwrap();
        let (instrumented, report) = search_and_confirm(
            &src,
            "pick",
            Input(vec![ArgValue::F64(0.0), ArgValue::Int(0)]),
        );
        assert_eq!(
            instrumented, 1,
            "the instrumented P' divides by zero at odd = 0"
        );
        assert!(report.divergences.is_empty(), "{:?}", report.divergences);
        assert_eq!(report.not_reproduced, 1);
        assert_eq!(report.diff_producing, 0);
    }

    #[test]
    fn machine_combiner_reassociation_is_judged_on_the_shipped_code() {
        // turbine1 at this input: the plain build overflows; foe's P' (llc -O0) does not, the shipped P' does,
        // because the x86 MachineCombiner re-associates the fmul chain.
        let src = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/trust/machine_combiner.c"
        ))
        .unwrap();
        let input = Input(vec![
            ArgValue::F64(-f64::from_bits(1)),
            ArgValue::F64(f64::from_bits(0x5fef_ffff_ffff_ffff)),
            ArgValue::F64(f64::from_bits(0x3ff0_0000_0000_0001)),
        ]);
        let (instrumented, report) = search_and_confirm(&src, "turbine1", input);
        assert_eq!(instrumented, 1);
        assert!(report.divergences.is_empty(), "{:?}", report.divergences);
        assert_eq!(report.not_reproduced, 1);
    }

    #[test]
    fn a_confirmed_divergence_gets_its_cause() {
        // A subnormal input: the shipped P' (linked with -ffast-math) flushes it to zero and divides by zero.
        let src = "double inv(double x) { return 1.0 / x; }\n";
        let (_, report) =
            search_and_confirm(src, "inv", Input(vec![ArgValue::F64(f64::from_bits(1))]));
        let d = &report.divergences[0];
        assert_eq!(d.confirmation, Confirmation::Confirmed);
        assert_eq!(d.shipped_p, vec![ExceptionKind::Overflow]);
        assert_eq!(d.shipped_p_prime, vec![ExceptionKind::DivideByZero]);
        assert_eq!(d.cause, Cause::FlushToZero);
    }

    #[test]
    fn functions_of_other_files_are_stubbed() {
        let src =
            "double helper(double);\ndouble f(double x) { return x > 0 ? helper(x) : x * 2; }\n";
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.c");
        std::fs::write(&file, src).unwrap();
        let s = sig("f", vec![Param::new("x", ParamType::F64)], ReturnType::F64);
        let mut h = Harness::new(&AnalysisConfig::default(), &file, src, &[s]);
        let inputs: Vec<Input> = [1.0, -1e308]
            .iter()
            .map(|&x| Input(vec![ArgValue::F64(x)]))
            .collect();
        let ends = h.run(Probe::Shipped, "f", &inputs).unwrap();
        assert_eq!(ends, vec![ShippedEnd::Crashed, ShippedEnd::Raised(4)]);
    }

    #[test]
    fn crashes_and_hangs_are_outcomes_and_the_rest_still_runs() {
        let src = "double f(double x) { if (x == 1) __builtin_trap(); while (x == 2) {} return x * 2; }\n";
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.c");
        std::fs::write(&file, src).unwrap();
        let s = sig("f", vec![Param::new("x", ParamType::F64)], ReturnType::F64);
        let config = AnalysisConfig {
            exec_timeout_ms: 100,
            ..AnalysisConfig::default()
        };
        let mut h = Harness::new(&config, &file, src, &[s]);
        let inputs: Vec<Input> = [1.0, 2.0, 1e308]
            .iter()
            .map(|&x| Input(vec![ArgValue::F64(x)]))
            .collect();
        let ends = h.run(Probe::Reference, "f", &inputs).unwrap();
        assert_eq!(
            ends,
            vec![
                ShippedEnd::Crashed,
                ShippedEnd::TimedOut,
                ShippedEnd::Raised(4)
            ]
        );
    }

    #[test]
    fn the_cause_is_the_first_option_whose_removal_gives_p_s_exceptions() {
        let ends = |ftz: u8, plain: u8| {
            move |probe: Probe| {
                Some(ShippedEnd::Raised(match probe {
                    Probe::Without(Cause::FlushToZero) => ftz,
                    Probe::Without(Cause::Optimisation) => plain,
                    _ => 2,
                }))
            }
        };
        assert_eq!(decide(0, ends(0, 0)), Cause::FlushToZero);
        assert_eq!(decide(0, ends(2, 2)), Cause::Optimisation);
        assert_eq!(decide(0, ends(2, 0)), Cause::Combined);
        assert_eq!(decide(0, |_| None), Cause::Undetermined);
    }
}
