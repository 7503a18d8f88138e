//! Compiling the C runtime (once per runtime source and clang, cached on disk) and linking the worker.

use super::ExecError;
use crate::process;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The runtime sources, embedded so foe works from any directory.
pub const RUNTIME_C: &str = include_str!("../../../../runtime/foe_runtime.c");
/// Classification functions glibc has only as macros, appended to the runtime and the shipped-binary driver.
pub const LIBC_EXTRAS_C: &str = include_str!("../../../../runtime/foe_libc_extras.c");
pub const RUNTIME_H: &str = include_str!("../../../../runtime/foe_runtime.h");
/// Which faults lie far from every mapping: shared by the runtime and the shipped-binary driver.
pub const FAULTS_H: &str = include_str!("../../../../runtime/foe_faults.h");

const RUNTIME_FLAGS: &[&str] = &[
    "-c",
    "-O2",
    "-fPIC",
    "-fno-fast-math",
    "-ffp-contract=off",
    "-w",
];
const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// The runtime object for `clang`: from this process's memo, the on-disk cache, or a fresh compile into
/// the cache (or into `scratch` when no cache directory is writable).
pub fn runtime_object(clang: &Path, scratch: &Path) -> Result<PathBuf, ExecError> {
    static MEMO: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());
    if let Some((_, obj)) = MEMO
        .lock()
        .ok()
        .and_then(|m| m.iter().find(|(c, o)| c == clang && o.is_file()).cloned())
    {
        return Ok(obj);
    }
    let key = {
        let mut h = blake3::Hasher::new();
        h.update(RUNTIME_C.as_bytes());
        h.update(LIBC_EXTRAS_C.as_bytes());
        h.update(RUNTIME_H.as_bytes());
        h.update(FAULTS_H.as_bytes());
        h.update(clang.as_os_str().as_encoded_bytes());
        h.update(RUNTIME_FLAGS.join(" ").as_bytes());
        h.finalize().to_hex()[..16].to_string()
    };
    let dir = crate::scratch::cache_dir()
        .filter(|d| std::fs::create_dir_all(d).is_ok())
        .unwrap_or_else(|| scratch.to_path_buf());
    let obj = dir.join(format!("foe-runtime-{key}.o"));
    if !obj.is_file() {
        compile_runtime(clang, &obj, &key)?;
    }
    if let Ok(mut m) = MEMO.lock() {
        m.push((clang.to_path_buf(), obj.clone()));
    }
    Ok(obj)
}

/// Compiles in a directory of this process's scratch directory (so that a foe killed meanwhile leaves nothing
/// the next foe keeps), then puts the object in place as [`crate::scratch::into_cache`] does (safe against
/// concurrent foes).
fn compile_runtime(clang: &Path, obj: &Path, key: &str) -> Result<(), ExecError> {
    let tmp = crate::scratch::tempdir("foe-runtime-build")?;
    std::fs::write(
        tmp.path().join("foe_runtime.c"),
        format!("{RUNTIME_C}\n{LIBC_EXTRAS_C}"),
    )?;
    std::fs::write(tmp.path().join("foe_runtime.h"), RUNTIME_H)?;
    std::fs::write(tmp.path().join("foe_faults.h"), FAULTS_H)?;
    let out = tmp.path().join(format!("foe-runtime-{key}.o"));
    let mut cmd = process::command(clang, tmp.path());
    cmd.args(RUNTIME_FLAGS)
        .arg("foe_runtime.c")
        .arg("-o")
        .arg(&out);
    let result = process::run_tool(cmd, None, TOOL_TIMEOUT)
        .map_err(|e| ExecError::Toolchain(format!("cannot run {}: {e}", clang.display())))?;
    if result.status != Some(0) || !out.is_file() {
        return Err(ExecError::Toolchain(format!(
            "cannot compile the runtime: {}",
            first_error(&result.stderr, result.timed_out)
        )));
    }
    crate::scratch::into_cache(&out, obj)?;
    Ok(())
}

/// Links the worker: runtime + instrumented builds (+ stubs) + libm. On failure returns the symbols the linker
/// reported undefined (functions or data of other files), so the caller can stub them and link again.
pub fn link_worker(
    clang: &Path,
    dir: &Path,
    objects: &[&Path],
    exe: &Path,
) -> Result<Result<(), Vec<String>>, ExecError> {
    let objects: Vec<PathBuf> = objects.iter().map(|o| o.to_path_buf()).collect();
    let result = crate::link::link(clang, dir, &[], exe, &objects, TOOL_TIMEOUT).map_err(|e| {
        ExecError::Toolchain(format!(
            "cannot run the linker for {}: {e}",
            clang.display()
        ))
    })?;
    if result.status == Some(0) && exe.is_file() {
        return Ok(Ok(()));
    }
    static UNDEFINED: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = UNDEFINED.get_or_init(|| {
        regex::Regex::new(r"undefined reference to [`']([^`']+)'").expect("valid regex")
    });
    let mut missing: Vec<String> = re
        .captures_iter(&result.stderr)
        .map(|c| c[1].to_string())
        .collect();
    missing.sort();
    missing.dedup();
    if missing.is_empty() || result.timed_out {
        return Err(ExecError::Toolchain(format!(
            "cannot link the worker: {}",
            first_error(&result.stderr, result.timed_out)
        )));
    }
    Ok(Err(missing))
}

/// The first line of a tool's error output that names an error (else its first line), for messages.
pub(crate) fn first_error(stderr: &str, timed_out: bool) -> String {
    if timed_out {
        return "timed out".into();
    }
    stderr
        .lines()
        .find(|l| l.contains("error"))
        .or_else(|| stderr.lines().next())
        .unwrap_or("no output")
        .trim()
        .to_string()
}
