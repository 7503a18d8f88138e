//! Linking objects into an executable without the clang driver in between.
//!
//! A file's analysis links about eight executables (the instrumented worker, the shipped builds, the cause
//! probes), each through `clang -o EXE OBJECTS -lm`: a driver process that starts clang (its dynamic relocations
//! alone cost ~20 ms) only to run the linker. The linker command depends on the clang and the link flags, not
//! on the objects, so it is learnt once per clang and flag set (`clang -###` with a stand-in object and output)
//! and the linker is run directly with the real objects and output put in the stand-ins' places, as the driver
//! would. The command is kept on disk beside the other cached builds, keyed by the clang binary (its path, size
//! and modification time) and the flags, and used only while every file it names still exists and nothing was
//! installed beside it since (a compiler or C library upgrade moves the start-up files, or adds a GCC
//! installation the driver would prefer). Where the driver's plan cannot be read (several jobs, no stand-in
//! object, an unreadable quote), the link goes through the driver as before.

use crate::process::{self, ToolOutput};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The object and output `clang -###` is asked to link; the input must exist, so the object is `/dev/null`.
const STAND_IN_OBJECT: &str = "/dev/null";
const STAND_IN_OUTPUT: &str = "foe-link-stand-in";

/// The linker command clang runs for `link_flags`, stand-ins in place, or `None` when clang does not say in a
/// form this module reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkerCommand(Vec<String>);

impl LinkerCommand {
    /// The command with `exe` for the output and `objects` for the stand-in object.
    fn for_objects(&self, exe: &Path, objects: &[PathBuf]) -> Vec<std::ffi::OsString> {
        let mut args = Vec::with_capacity(self.0.len() + objects.len());
        let mut after_o = false;
        for arg in &self.0 {
            if after_o && arg == STAND_IN_OUTPUT {
                args.push(exe.as_os_str().to_owned());
            } else if arg == STAND_IN_OBJECT {
                args.extend(objects.iter().map(|o| o.as_os_str().to_owned()));
            } else {
                args.push(arg.into());
            }
            after_o = arg == "-o";
        }
        args
    }

    /// Whether the command, learnt at `learnt`, still holds: every absolute path it names as an argument of its
    /// own (the linker, the start-up files, the dynamic linker) exists, and neither the directory holding it nor
    /// that directory's parent changed since (a compiler or C library installed or upgraded beside it, which
    /// clang's driver might now pick). Library directories (`-L`) may be missing: ld skips them.
    fn still_valid(&self, learnt: std::time::SystemTime) -> bool {
        // The file system's root is left out: its time changes as the machine starts.
        let unchanged = |dir: Option<&Path>| match dir {
            None => true,
            Some(d) if d.parent().is_none() => true,
            Some(d) => std::fs::metadata(d)
                .and_then(|m| m.modified())
                .is_ok_and(|modified| modified <= learnt),
        };
        self.0.iter().filter(|arg| arg.starts_with('/')).all(|arg| {
            let path = Path::new(arg);
            let parent = path.parent();
            path.exists() && unchanged(parent) && unchanged(parent.and_then(Path::parent))
        })
    }
}

/// Links `objects` with `link_flags` and libm into `exe` in `dir`, running the linker directly when its command
/// is known ([`linker_command`]), else through `clang`. The tool's output, as [`process::run_tool`] gives it.
pub fn link(
    clang: &Path,
    dir: &Path,
    link_flags: &[String],
    exe: &Path,
    objects: &[PathBuf],
    timeout: Duration,
) -> std::io::Result<ToolOutput> {
    if let Some(command) = linker_command(clang, link_flags) {
        let args = command.for_objects(exe, objects);
        let mut cmd = process::command(&args[0], dir);
        cmd.args(&args[1..]);
        return process::run_tool(cmd, None, timeout);
    }
    let mut cmd = process::command(clang, dir);
    cmd.args(link_flags)
        .arg("-o")
        .arg(exe)
        .args(objects)
        .arg("-lm");
    process::run_tool(cmd, None, timeout)
}

/// What clang runs to link objects with `link_flags` and libm: from this process's memo, the disk cache, or
/// `clang -###`.
pub fn linker_command(clang: &Path, link_flags: &[String]) -> Option<LinkerCommand> {
    type Commands = Mutex<HashMap<(PathBuf, Vec<String>), Option<LinkerCommand>>>;
    static KNOWN: OnceLock<Commands> = OnceLock::new();
    let key = (clang.to_path_buf(), link_flags.to_vec());
    let known = KNOWN.get_or_init(Default::default);
    if let Some(command) = known.lock().ok()?.get(&key) {
        return command.clone();
    }
    let cached = cache_path(clang, link_flags);
    let command = cached
        .as_deref()
        .and_then(read_cached)
        .filter(|(command, learnt)| command.still_valid(*learnt))
        .map(|(command, _)| command)
        .or_else(|| {
            let command = ask_clang(clang, link_flags)?;
            if let Some(path) = &cached {
                write_cached(path, &command);
            }
            Some(command)
        });
    if let Ok(mut known) = known.lock() {
        known.insert(key, command.clone());
    }
    command
}

/// `clang -###`'s plan for the link: its one job, when it names the stand-ins once each.
fn ask_clang(clang: &Path, link_flags: &[String]) -> Option<LinkerCommand> {
    let mut cmd = process::command(clang, &std::env::temp_dir());
    cmd.arg("-###")
        .args(link_flags)
        .args(["-o", STAND_IN_OUTPUT, STAND_IN_OBJECT, "-lm"]);
    let out = process::run_tool(cmd, None, Duration::from_secs(30)).ok()?;
    if out.status != Some(0) {
        return None;
    }
    let jobs: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with(" \""))
        .collect();
    let [job] = jobs.as_slice() else { return None };
    let args = split_quoted(job)?;
    let count = |s: &str| args.iter().filter(|a| *a == s).count();
    (count(STAND_IN_OBJECT) == 1 && count(STAND_IN_OUTPUT) == 1).then_some(LinkerCommand(args))
}

/// The arguments of a `-###` job line: each in double quotes, `\` escaping the next character.
fn split_quoted(line: &str) -> Option<Vec<String>> {
    let mut args = Vec::new();
    let mut chars = line.trim().chars();
    loop {
        match chars.next() {
            None => return (!args.is_empty()).then_some(args),
            Some(' ') => continue,
            Some('"') => {
                let mut arg = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => arg.push(chars.next()?),
                        c => arg.push(c),
                    }
                }
                args.push(arg);
            }
            Some(_) => return None,
        }
    }
}

/// Where the command for this clang binary and these flags is kept (`None` without a cache directory or when the
/// clang binary cannot be read).
fn cache_path(clang: &Path, link_flags: &[String]) -> Option<PathBuf> {
    let resolved = process::find_program(clang)?;
    let meta = std::fs::metadata(&resolved).ok()?;
    let mut h = blake3::Hasher::new();
    h.update(resolved.as_os_str().as_encoded_bytes());
    h.update(&meta.len().to_le_bytes());
    if let Ok(modified) = meta.modified() {
        if let Ok(since) = modified.duration_since(std::time::UNIX_EPOCH) {
            h.update(&since.as_nanos().to_le_bytes());
        }
    }
    for flag in link_flags {
        h.update(flag.as_bytes());
        h.update(&[0]);
    }
    let dir = crate::scratch::cache_subdir("link")?;
    Some(dir.join(format!("{}.json", &h.finalize().to_hex()[..16])))
}

/// The cached command and when it was learnt (the file's modification time).
fn read_cached(path: &Path) -> Option<(LinkerCommand, std::time::SystemTime)> {
    let learnt = std::fs::metadata(path).ok()?.modified().ok()?;
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice::<Vec<String>>(&text)
        .ok()
        .filter(|args| !args.is_empty())
        .map(|args| (LinkerCommand(args), learnt))
}

/// Writes the command into the cache (concurrent foes never read half of one); a failure only costs the next foe a
/// `clang -###`.
fn write_cached(path: &Path, command: &LinkerCommand) {
    let written = serde_json::to_vec(&command.0)
        .map_err(std::io::Error::from)
        .and_then(|text| crate::scratch::write_cache(path, &text));
    if let Err(e) = written {
        tracing::debug!("cannot cache the linker command: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_lines_are_split_at_their_quotes() {
        assert_eq!(
            split_quoted(r#" "/usr/bin/ld" "-o" "a b" "x\"y" "c\\d""#),
            Some(vec![
                "/usr/bin/ld".to_string(),
                "-o".into(),
                "a b".into(),
                "x\"y".into(),
                "c\\d".into()
            ])
        );
        assert_eq!(split_quoted(r#" "/usr/bin/ld" bare"#), None);
        assert_eq!(split_quoted(r#" "unterminated"#), None);
    }

    #[test]
    fn the_stand_ins_are_replaced_by_the_output_and_the_objects() {
        let command = LinkerCommand(
            [
                "/usr/bin/ld",
                "-o",
                STAND_IN_OUTPUT,
                "crt1.o",
                STAND_IN_OBJECT,
                "-lm",
                "-lc",
            ]
            .map(String::from)
            .to_vec(),
        );
        let args = command.for_objects(
            Path::new("/tmp/exe"),
            &[PathBuf::from("a.o"), PathBuf::from("b.o")],
        );
        assert_eq!(
            args,
            [
                "/usr/bin/ld",
                "-o",
                "/tmp/exe",
                "crt1.o",
                "a.o",
                "b.o",
                "-lm",
                "-lc"
            ]
            .map(std::ffi::OsString::from)
            .to_vec()
        );
    }

    #[test]
    fn a_command_naming_a_missing_or_newer_file_is_not_used() {
        let gone = LinkerCommand(vec![
            "/usr/bin/ld".into(),
            "/nonexistent/crtbeginS.o".into(),
        ]);
        let now = std::time::SystemTime::now();
        assert!(!gone.still_valid(now));
        let here = LinkerCommand(vec!["/".into(), "-L/nonexistent".into(), "-lm".into()]);
        assert!(here.still_valid(now));
        // A file whose directory changed after the command was learnt: something was installed beside it.
        let dir = crate::scratch::tempdir("foe-link-test").unwrap();
        let crt = dir.path().join("crt1.o");
        std::fs::write(&crt, b"").unwrap();
        let command = LinkerCommand(vec![crt.display().to_string()]);
        assert!(command.still_valid(std::time::SystemTime::now()));
        let before = std::time::SystemTime::UNIX_EPOCH;
        assert!(!command.still_valid(before));
    }

    /// The linker run directly makes an executable that runs as the driver's would, fast-math start-up code
    /// included (`-ffast-math` links `crtfastmath.o`, which sets flush-to-zero: 2^-1070 / 2 then reads 0).
    #[test]
    fn the_linker_run_directly_links_what_the_driver_would() {
        let clang = crate::config::AnalysisConfig::default().clang;
        // Tools write only in foe's scratch directory (their sandbox).
        let dir = crate::scratch::tempdir("foe-link-test").unwrap();
        let source = dir.path().join("m.c");
        std::fs::write(
            &source,
            "#include <stdio.h>\n#include <math.h>\nvolatile double x = 0x1p-1070;\n\
             int main(void) { printf(\"%g %g\\n\", x / 2, sqrt(x * 0 + 4)); return 0; }\n",
        )
        .unwrap();
        let object = dir.path().join("m.o");
        let mut cc = process::command(&clang, dir.path());
        cc.args(["-O0", "-c", "-o"]).arg(&object).arg(&source);
        assert_eq!(
            process::run_tool(cc, None, Duration::from_secs(60))
                .unwrap()
                .status,
            Some(0)
        );
        for (flags, expected) in [
            (vec![], "3.95253e-323 2"),
            (vec!["-ffast-math".to_string()], "0 2"),
        ] {
            let command = linker_command(&clang, &flags).expect("clang says how it links");
            assert!(!command.0[0].contains("clang"), "{command:?}");
            let exe = dir.path().join("m");
            let out = link(
                &clang,
                dir.path(),
                &flags,
                &exe,
                std::slice::from_ref(&object),
                Duration::from_secs(60),
            )
            .unwrap();
            assert_eq!(out.status, Some(0), "{}", out.stderr);
            let run = std::process::Command::new(&exe).output().unwrap();
            assert_eq!(
                String::from_utf8_lossy(&run.stdout).trim(),
                expected,
                "{flags:?}"
            );
        }
    }
}
