//! Building the shipped binaries: the analysed file with the harness's thunks compiled as a build ships it, the
//! project's other units compiled likewise (cached on disk), stubs for what no file of the project defines, the
//! driver (cached on disk), and the link. The thunks the file is compiled with are in `thunks.rs`.

use crate::process;
use crate::scratch::cache_subdir;
use crate::scratch::manifest;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// The driver's source, embedded so foe works from any directory.
pub const CONFIRM_C: &str = include_str!("../../../../runtime/foe_confirm.c");

/// Flags of the driver: no fast math, so it leaves the floating-point environment as the build's start-up code
/// set it.
const DRIVER_FLAGS: &[&str] = &["-c", "-O2", "-fno-fast-math", "-w"];

/// Debug info for the traces' lines and columns (inlined frames included), and no more: it changes no
/// instruction clang emits, and compiles and links faster than full `-g`. The analysed file's object has it
/// where its traces are placed (P, P'), not in the cause probes' ([`super::Probe::needs_debug_info`]).
pub(super) const DEBUG_INFO: &str = "-gline-tables-only";

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
        h.update(crate::exec::FAULTS_H.as_bytes());
        h.update(DRIVER_FLAGS.join(" ").as_bytes());
        h.update(clang.as_os_str().as_encoded_bytes());
        h.finalize().to_hex()[..16].to_string()
    };
    let cached = cache_subdir("confirm").map(|d| d.join(format!("foe-confirm-{key}.o")));
    if let Some(c) = cached.as_ref().filter(|c| c.is_file()) {
        return Ok(c.clone());
    }
    let src = dir.join("foe_confirm.c");
    std::fs::write(&src, format!("{CONFIRM_C}\n{}", crate::exec::LIBC_EXTRAS_C))
        .map_err(|e| format!("cannot write the driver: {e}"))?;
    std::fs::write(dir.join("foe_faults.h"), crate::exec::FAULTS_H)
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
    let cached = cache_subdir("units").map(|d| d.join(format!("{key}.shipped.o")));
    let headers = cached.as_ref().map(|c| c.with_extension("headers"));
    if let Some(c) = cached.as_ref().filter(|c| c.is_file()) {
        if headers.as_deref().is_some_and(manifest::holds) {
            return Ok(c.clone());
        }
    }
    let obj = dir.join(format!("unit-{key}.o"));
    let deps = dir.join(format!("unit-{key}.d"));
    let cwd = unit
        .parent()
        .filter(|d| d.is_dir())
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let mut cmd = process::command(clang, &cwd);
    cmd.args(unit_flags)
        .args(compile_flags)
        .args([
            "-w",
            DEBUG_INFO,
            "-Dmain=foe_confirm_unit_main",
            "-c",
            "-MD",
            "-MF",
        ])
        .arg(&deps)
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
    // Cached only with the list of the headers it was compiled from ([`manifest`]).
    let listed = headers.as_deref().is_some_and(|h| {
        std::fs::read_to_string(&deps)
            .is_ok_and(|rule| manifest::write(h, &crate::compile::rule_prerequisites(&rule, &cwd)))
    });
    Ok(into_cache(obj, cached.filter(|_| listed)))
}

/// Compiles `source` (C, from standard input) with `flags` (which say whether with [`DEBUG_INFO`]) into `obj`,
/// start-up code removed.
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
    let out = crate::link::link(clang, dir, link_flags, exe, objects, TOOL_TIMEOUT)
        .map_err(|e| format!("cannot run the linker for {}: {e}", clang.display()))?;
    Ok(if out.status == Some(0) && exe.is_file() {
        Ok(())
    } else {
        Err(out)
    })
}

/// Compiles stubs for `names` into `obj`, all weak (so a real definition always wins). A function's ends the
/// current call there through the driver's `foe_confirm_stop`, as the instrumented worker stops its run at a call
/// of a function no file defines: nothing of the callee runs. A datum's (`data`: an extern constant no file
/// defines, or a name the code reads rather than calls, [`referred_to_as_data`]) is a page of its own in the
/// section `foe_guard`, which the driver makes unreadable: a run that reads a value nobody knows crashes (and is
/// not checked) rather than computing with garbage. So a run that returned touched no stub, and its verdict is
/// the program's. The object is
/// `dir/file_name`, or the cached one for the same stubs (many files of a library miss the same names, and every
/// analysis of a file the same ones); its path is returned.
pub(super) fn compile_stubs(
    clang: &Path,
    dir: &Path,
    names: &[String],
    data: &std::collections::BTreeSet<String>,
    file_name: &str,
) -> Result<PathBuf, String> {
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
    let key = {
        let mut h = blake3::Hasher::new();
        h.update(source.as_bytes());
        h.update(clang.as_os_str().as_encoded_bytes());
        h.finalize().to_hex()[..24].to_string()
    };
    let cached = cache_subdir("stubs").map(|d| d.join(format!("{key}.o")));
    if let Some(c) = cached.as_ref().filter(|c| c.is_file()) {
        return Ok(c.clone());
    }
    let obj = dir.join(file_name);
    let mut cmd = process::command(clang, dir);
    cmd.args(["-w", "-c", "-x", "c", "-", "-o"]).arg(&obj);
    let out = process::run_tool(cmd, Some(source.as_bytes()), TOOL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    if out.status != Some(0) || !obj.is_file() {
        return Err(format!(
            "cannot stub {}: {}",
            names.join(", "),
            crate::exec::first_error(&out.stderr, out.timed_out)
        ));
    }
    Ok(into_cache(obj, cached))
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

/// The names a link of `objects` (with libm and the C library) would report undefined, as far as the objects
/// say: the C identifiers they refer to that none of them defines, that the C library does not define, and that
/// are not reserved (`__muldc3` and the like come from the compiler's runtime). Empty when `link_flags` bring
/// libraries of their own (a stub would stand in front of their definitions) or an object cannot be read: the
/// link then names what it misses.
pub(super) fn predicted_undefined(objects: &[PathBuf], link_flags: &[String]) -> Vec<String> {
    use object::{Object, ObjectSymbol};
    let brings_libraries = link_flags.iter().any(|f| {
        [
            "-l",
            "-L",
            "-Wl",
            "-Xlinker",
            "-nostdlib",
            "-nodefaultlibs",
            "-static",
            "-fuse-ld",
        ]
        .iter()
        .any(|p| f.starts_with(p))
            || [".a", ".so", ".o"].iter().any(|e| f.ends_with(e))
            || f.contains(".so.")
    });
    if brings_libraries {
        return Vec::new();
    }
    let mut needed = std::collections::BTreeSet::new();
    let mut defined = std::collections::HashSet::new();
    for obj in objects {
        let Some(bytes) = std::fs::read(obj).ok() else {
            return Vec::new();
        };
        let Ok(file) = object::File::parse(&*bytes) else {
            return Vec::new();
        };
        for symbol in file.symbols().filter(|s| !s.is_local()) {
            let Ok(name) = symbol.name() else { continue };
            if !symbol.is_undefined() {
                defined.insert(name.to_string());
            } else if !symbol.is_weak() {
                needed.insert(name.to_string());
            }
        }
    }
    needed
        .into_iter()
        .filter(|n| !defined.contains(n) && is_unreserved_identifier(n))
        .filter(|n| !crate::project::c_library_defines(n))
        .collect()
}

/// Whether `name` is a C identifier a program may define: not starting with `__` or `_` and a capital.
fn is_unreserved_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
        && !(name.starts_with('_') && name[1..].starts_with(|c: char| c.is_ascii_uppercase()))
}

/// Those of `names` that the objects `objects` refer to other than by calling them (a load, or an address taken):
/// possibly data, so their stubs are guard pages ([`compile_stubs`]). A stub function read as data would give
/// its code bytes as a value, and both builds would compute with them; a guard page crashes the run instead
/// (not checked). A function whose address is taken gets one too: a call through the pointer crashes rather
/// than stops, which loses that run's verdict but never makes one up. An object that cannot be read counts
/// every name as data.
pub(super) fn referred_to_as_data(
    objects: &[PathBuf],
    names: &[String],
) -> std::collections::BTreeSet<String> {
    use object::{Object, ObjectSection, ObjectSymbol, RelocationFlags, RelocationTarget};
    let wanted: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let mut data = std::collections::BTreeSet::new();
    for obj in objects {
        let Some(bytes) = std::fs::read(obj).ok() else {
            return names.iter().cloned().collect();
        };
        let Ok(file) = object::File::parse(&*bytes) else {
            return names.iter().cloned().collect();
        };
        for section in file.sections() {
            // The debug info names variables and functions alike; it is never read by the code.
            if section.name().is_ok_and(|n| n.starts_with(".debug")) {
                continue;
            }
            for (_, reloc) in section.relocations() {
                let RelocationTarget::Symbol(index) = reloc.target() else {
                    continue;
                };
                let Some(name) = file.symbol_by_index(index).ok().and_then(|s| s.name().ok())
                else {
                    continue;
                };
                let called = matches!(
                    reloc.flags(),
                    RelocationFlags::Elf { r_type } if r_type == object::elf::R_X86_64_PLT32
                );
                if !called && wanted.contains(name) {
                    data.insert(name.to_string());
                }
            }
        }
    }
    data
}
