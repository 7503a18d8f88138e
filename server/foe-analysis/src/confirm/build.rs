//! Building the shipped binaries: the analysed file with the harness's thunks compiled as a build ships it, the
//! project's other units compiled likewise (cached on disk), stubs for what no file of the project defines, the
//! driver (cached on disk), and the link.

use crate::process;
use crate::types::{FunctionSignature, ParamType, ReturnType};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// The driver's source, embedded so foe works from any directory.
pub const CONFIRM_C: &str = include_str!("../../../../runtime/foe_confirm.c");

/// Flags of the driver: no fast math, so it leaves the floating-point environment as the build's start-up code
/// set it.
const DRIVER_FLAGS: &[&str] = &["-c", "-O2", "-fno-fast-math", "-w"];

/// Debug info for the traces' lines and columns (inlined frames included), and no more: it changes no
/// instruction clang emits, and compiles and links faster than full `-g`.
const DEBUG_INFO: &str = "-gline-tables-only";

/// Sections whose code runs at start-up or exit (constructors, destructors, init and fini arrays, and their
/// relocations): the analysis never asks for them, so they are removed from the user's objects before the
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

/// The directory `sub` of foe's on-disk cache, made on first use.
fn cache_dir(sub: &str) -> Option<PathBuf> {
    let dir = crate::exec::cache_dir()?.join(sub);
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Puts `built` into the cache as `cached` ([`crate::scratch::into_cache`]: concurrent foes never see half a file)
/// and returns the cached path; `built` itself when there is no cache or that fails.
fn into_cache(built: PathBuf, cached: Option<PathBuf>) -> PathBuf {
    let Some(cached) = cached else { return built };
    match crate::scratch::into_cache(&built, &cached) {
        Ok(()) => cached,
        Err(_) => built,
    }
}

/// Removes [`START_UP_SECTIONS`] from `obj` in place (LLVM's objcopy, else binutils'), and the debug info too
/// when it refers to them.
pub(super) fn strip_start_up_code(obj: &Path, dir: &Path) -> Result<(), String> {
    if has_start_up_code(obj) == Some(false) {
        return Ok(());
    }
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

/// Whether the object has a section of [`START_UP_SECTIONS`]; `None` when it cannot be read. Most have none,
/// and reading the section headers is cheaper than running objcopy.
fn has_start_up_code(obj: &Path) -> Option<bool> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(obj).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let matches = |name: &str| {
        START_UP_SECTIONS
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == *pattern,
            })
    };
    Some(
        file.sections()
            .any(|section| section.name().is_ok_and(matches)),
    )
}

/// The driver object for `clang`: from the on-disk cache, else compiled into `dir` (and cached).
pub(super) fn driver_object(clang: &Path, dir: &Path) -> Result<PathBuf, String> {
    let key = {
        let mut h = blake3::Hasher::new();
        h.update(CONFIRM_C.as_bytes());
        h.update(crate::exec::LIBC_EXTRAS_C.as_bytes());
        h.update(DRIVER_FLAGS.join(" ").as_bytes());
        h.update(clang.as_os_str().as_encoded_bytes());
        h.finalize().to_hex()[..16].to_string()
    };
    let cached = cache_dir("confirm").map(|d| d.join(format!("foe-confirm-{key}.o")));
    if let Some(c) = cached.as_ref().filter(|c| c.is_file()) {
        return Ok(c.clone());
    }
    let src = dir.join("foe_confirm.c");
    std::fs::write(&src, format!("{CONFIRM_C}\n{}", crate::exec::LIBC_EXTRAS_C))
        .map_err(|e| format!("cannot write the driver: {e}"))?;
    let obj = dir.join("foe_confirm.o");
    let mut cmd = process::command(clang, dir);
    cmd.args(DRIVER_FLAGS).arg(&src).arg("-o").arg(&obj);
    let out = process::run_tool(cmd, None, TOOL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    if out.status != Some(0) || !obj.is_file() {
        return Err(format!(
            "cannot compile the harness driver: {}",
            crate::exec::first_error(&out.stderr, out.timed_out)
        ));
    }
    Ok(into_cache(obj, cached))
}

/// One of the project's other translation units compiled as the build ships it: its own entry's preprocessor
/// flags (`unit_flags`), the build's `compile_flags`, `-g`; start-up code removed. Cached on disk by the unit's
/// contents, flags and compiler.
pub(super) fn unit_object(
    clang: &Path,
    unit: &Path,
    unit_flags: &[String],
    compile_flags: &[String],
    dir: &Path,
) -> Result<PathBuf, String> {
    let text = std::fs::read(unit).map_err(|e| format!("cannot read {}: {e}", unit.display()))?;
    let key = {
        let mut h = blake3::Hasher::new();
        h.update(&text);
        h.update(unit.as_os_str().as_encoded_bytes());
        h.update(unit_flags.join("\u{0}").as_bytes());
        h.update(b"\x01");
        h.update(compile_flags.join("\u{0}").as_bytes());
        h.update(clang.as_os_str().as_encoded_bytes());
        h.update(DEBUG_INFO.as_bytes());
        h.finalize().to_hex()[..24].to_string()
    };
    let cached = cache_dir("units").map(|d| d.join(format!("{key}.shipped.o")));
    if let Some(c) = cached.as_ref().filter(|c| c.is_file()) {
        return Ok(c.clone());
    }
    let obj = dir.join(format!("unit-{key}.o"));
    let cwd = unit
        .parent()
        .filter(|d| d.is_dir())
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let mut cmd = process::command(clang, &cwd);
    cmd.args(unit_flags)
        .args(compile_flags)
        .args(["-w", DEBUG_INFO, "-Dmain=foe_confirm_unit_main", "-c"])
        .arg(unit)
        .arg("-o")
        .arg(&obj);
    let out = process::run_tool(cmd, None, TOOL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    if out.status != Some(0) || !obj.is_file() {
        return Err(format!(
            "cannot compile {}: {}",
            unit.display(),
            crate::exec::first_error(&out.stderr, out.timed_out)
        ));
    }
    strip_start_up_code(&obj, dir)?;
    Ok(into_cache(obj, cached))
}

/// Compiles `source` (C, from standard input) with `flags` and `-g` into `obj`, start-up code removed.
pub(super) fn compile_file(
    clang: &Path,
    cwd: &Path,
    flags: &[String],
    source: &str,
    obj: &Path,
    dir: &Path,
) -> Result<(), String> {
    let mut cmd = process::command(clang, cwd);
    cmd.args(flags)
        .args([
            "-w",
            DEBUG_INFO,
            "-Dmain=foe_confirm_user_main",
            "-c",
            "-x",
            "c",
            "-",
            "-o",
        ])
        .arg(obj);
    let out = process::run_tool(cmd, Some(source.as_bytes()), TOOL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    if out.status != Some(0) || !obj.is_file() {
        return Err(format!(
            "cannot compile the shipped build ({}): {}",
            flags.join(" "),
            crate::exec::first_error(&out.stderr, out.timed_out)
        ));
    }
    strip_start_up_code(obj, dir)
}

/// Links `objects` with `link_flags` and libm into `exe`; `Err` with the linker's words when it fails.
pub(super) fn link(
    clang: &Path,
    dir: &Path,
    link_flags: &[String],
    exe: &Path,
    objects: &[PathBuf],
) -> Result<Result<(), process::ToolOutput>, String> {
    let mut cmd = process::command(clang, dir);
    cmd.args(link_flags)
        .arg("-o")
        .arg(exe)
        .args(objects)
        .arg("-lm");
    let out = process::run_tool(cmd, None, TOOL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    Ok(if out.status == Some(0) && exe.is_file() {
        Ok(())
    } else {
        Err(out)
    })
}

/// Compiles stubs for `names` into `obj`, all weak (so a real definition always wins). A function's ends the
/// current call there through the driver's `foe_confirm_stop`, as the instrumented worker stops its run at a call
/// of a function no file defines: nothing of the callee runs. A datum's (`data`: an extern constant no file
/// defines) is a page of its own in the section `foe_guard`, which the driver makes unreadable: a run that reads
/// a value nobody knows crashes (and is not checked) rather than computing with garbage.
pub(super) fn compile_stubs(
    clang: &Path,
    dir: &Path,
    names: &[String],
    data: &std::collections::BTreeSet<String>,
    obj: &Path,
) -> Result<(), String> {
    let mut source = String::from("void foe_confirm_stop(const char *);\n");
    for name in names {
        if data.contains(name) {
            source.push_str(&format!(
                "__attribute__((weak, aligned(4096), section(\"foe_guard\"))) char {name}[4096];\n"
            ));
        } else {
            source.push_str(&format!(
                "__attribute__((weak)) void {name}(void) {{ foe_confirm_stop(\"{name}\"); }}\n"
            ));
        }
    }
    let mut cmd = process::command(clang, dir);
    cmd.args(["-w", "-c", "-x", "c", "-", "-o"]).arg(obj);
    let out = process::run_tool(cmd, Some(source.as_bytes()), TOOL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    if out.status != Some(0) {
        return Err(format!(
            "cannot stub {}: {}",
            names.join(", "),
            crate::exec::first_error(&out.stderr, out.timed_out)
        ));
    }
    Ok(())
}

/// The symbols a failed link reports undefined, sorted and distinct (C identifiers only).
pub(super) fn undefined_symbols(stderr: &str) -> Vec<String> {
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
pub(super) fn c_prototype(sig: &FunctionSignature) -> Result<(String, Vec<String>), String> {
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

/// Most changed words of pointer parameters one shipped call reports (`FOE_SHIPPED_OUTPUTS` of the driver).
pub const SHIPPED_OUTPUTS: usize = 256;

/// The C appended to the file: a thunk per function that unpacks the words, calls the function through a
/// volatile pointer (so it is emitted and called as it ships, not inlined into the thunk), and packs the
/// result in `r[0]`, then the words of its pointer parameters' buffers the call changed: their count in `r[1]`,
/// then (parameter, offset, word) triples, at most [`SHIPPED_OUTPUTS`] (as the instrumented runner reports
/// them); and the table the driver calls through. Functions the driver cannot call get an empty thunk.
pub(super) fn thunks(functions: &[FunctionSignature]) -> String {
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
            let args = unpack_args(sig, &params, &mut out);
            fill_pointees(sig, &mut out);
            // The buffers as the call starts, to report the words it changed.
            for (k, p) in sig.params.iter().enumerate() {
                if let (ParamType::OutPtr { bytes }, None) = (p.ty, p.pointee) {
                    out.push_str(&format!(
                        "  static unsigned char b{k}[{}]; __builtin_memcpy(b{k}, a{k}, sizeof b{k});\n",
                        bytes.max(1)
                    ));
                }
            }
            call_and_pack(sig, &ret, &params, &args, &mut out);
            report_changed_words(sig, &mut out);
        } else {
            out.push_str("  (void)w; r[0] = 0; r[1] = 0;\n");
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

/// Declares the C arguments `a<k>` of a thunk from the words `w` (a zeroed, aligned buffer for an out-parameter);
/// their names, in call order. `params` are the C types of the parameters passed.
fn unpack_args(sig: &FunctionSignature, params: &[String], out: &mut String) -> Vec<String> {
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
    args
}

/// Copies the values behind pointers from their words into their pointer's buffer.
fn fill_pointees(sig: &FunctionSignature, out: &mut String) {
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
}

/// Calls the function through `fn` with `args` and packs its result (of C type `ret`) in `r[0]`.
fn call_and_pack(
    sig: &FunctionSignature,
    ret: &str,
    params: &[String],
    args: &[String],
    out: &mut String,
) {
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
        ReturnType::Void => out.push_str(&format!("  {call};\n  r[0] = 0;\n")),
        ReturnType::F64 | ReturnType::F32 => out.push_str(&format!(
            "  {ret} res = {call};\n  __builtin_memcpy(r, &res, sizeof res);\n"
        )),
        ReturnType::Int { signed: true, .. } => {
            out.push_str(&format!("  *r = (unsigned long long)(long long){call};\n"))
        }
        _ => out.push_str(&format!("  *r = (unsigned long long){call};\n")),
    }
}

/// Reports the words of the out-parameters' buffers the call changed: their count in `r[1]`, then (parameter,
/// offset, word) triples.
fn report_changed_words(sig: &FunctionSignature, out: &mut String) {
    out.push_str("  unsigned long long n = 0;\n");
    for (k, p) in sig.params.iter().enumerate() {
        let c_index = sig.params[..k]
            .iter()
            .filter(|q| q.pointee.is_none())
            .count();
        if let (ParamType::OutPtr { bytes }, None) = (p.ty, p.pointee) {
            out.push_str(&format!(
                "  for (unsigned o = 0; o + 8 <= {bytes}u; o += 8) {{\n    unsigned long long now, was;\n    \
                 __builtin_memcpy(&now, a{k} + o, 8); __builtin_memcpy(&was, b{k} + o, 8);\n    \
                 if (now != was && n < {SHIPPED_OUTPUTS}) {{ r[2 + 3 * n] = {c_index}; r[3 + 3 * n] = o; \
                 r[4 + 3 * n] = now; n++; }}\n  }}\n"
            ));
        }
    }
    out.push_str("  r[1] = n;\n");
}
