//! Hostile `compile_commands.json` files: an entry that loads a plugin into the compiler (`-fplugin=`,
//! `-fpass-plugin=`, `-Xclang -load`), picks the linker or tool directory (`-fuse-ld=`, `-B`), passes options
//! through (`-mllvm`, `-Wl,`), writes a file (`-ftime-trace=`), brings a plugin in a response file or a `--config`
//! file, or names a compiler that is a script. For each: `foe check` ends with 0, 1 or 2, names what it dropped,
//! no canary appears, nothing is written in the repository, and nothing of foe is left in `$TMPDIR`.
//! `foe check` killed with SIGKILL mid-analysis leaves nothing once foe starts again.
//!
//! Run as root and, by `scripts/hostile-unprivileged.sh`, as an unprivileged user.

use foe_e2e::foe_binary;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIME_LIMIT: Duration = Duration::from_secs(120);

/// The system's clang (to build the evil plugin and show it is real).
fn clang() -> &'static str {
    [
        "/usr/lib/llvm-19/bin/clang",
        "/usr/bin/clang-19",
        "/usr/bin/clang",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .unwrap_or("clang")
}

/// A repository with the target file, an evil plugin, a linker script and a compiler script, each writing the
/// canary when run.
struct Repo {
    dir: tempfile::TempDir,
    canary: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::Builder::new()
            .prefix("foe-hostile-db")
            .tempdir()
            .unwrap();
        let canary = dir.path().join("CANARY");
        let fixtures = foe_e2e::repo_root().join("fixtures/hostile/databases");
        std::fs::copy(fixtures.join("target.c"), dir.path().join("target.c")).unwrap();
        let built = Command::new(clang())
            .args(["-shared", "-fPIC", "-o"])
            .arg(dir.path().join("evil.so"))
            .arg(fixtures.join("evil_plugin.c"))
            .arg(format!("-DCANARY=\"{}\"", canary.display()))
            .status()
            .unwrap();
        assert!(built.success(), "the evil plugin builds");
        let script = format!("#!/bin/sh\necho ran > '{}'\nexit 1\n", canary.display());
        for name in ["evil-ld", "evil-cc", "tools/ld", "tools/clang"] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &script).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // world-readable, so that the unprivileged run can read it
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Repo { dir, canary }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn database(&self, arguments: &[String]) {
        let mut args = vec![self.path("evil-cc")];
        args.extend(arguments.iter().cloned());
        args.extend(["-O2".to_string(), "-c".into(), "target.c".into()]);
        let db = serde_json::json!([{
            "directory": self.dir.path(),
            "arguments": args,
            "file": "target.c",
        }]);
        std::fs::write(
            self.dir.path().join("compile_commands.json"),
            db.to_string(),
        )
        .unwrap();
    }

    /// Every file in the repository (relative), to compare before and after.
    fn files(&self) -> Vec<String> {
        let mut out = vec![];
        let mut stack = vec![self.dir.path().to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                }
                out.push(
                    e.path()
                        .strip_prefix(self.dir.path())
                        .unwrap()
                        .display()
                        .to_string(),
                );
            }
        }
        out.sort();
        out
    }
}

fn check_drops(arguments: &[&str], named: &[&str]) {
    check_drops_in(arguments, named, &|_| {});
}

/// Runs `foe check` on a new repository's target (`prepare` adds files to it) whose entry has `arguments`, with
/// its own `$TMPDIR` and `$HOME`, and checks what it must not do; `named` ($REPO for the repository) must be
/// named as dropped.
fn check_drops_in(arguments: &[&str], named: &[&str], prepare: &dyn Fn(&Path)) {
    let repo = Repo::new();
    prepare(repo.dir.path());
    let arguments: Vec<String> = arguments
        .iter()
        .map(|a| a.replace("$REPO", &repo.dir.path().display().to_string()))
        .collect();
    repo.database(&arguments);
    let before = repo.files();
    let tmp = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(foe_binary())
        .args(["check", "--format", "json"])
        .arg(repo.dir.path().join("target.c"))
        .env("TMPDIR", tmp.path())
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < TIME_LIMIT, "foe check did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        matches!(status.code(), Some(0..=2)),
        "foe check ended with {status}: {stderr}"
    );
    assert!(
        !repo.canary.exists(),
        "the database ran code: {:?}",
        std::fs::read_to_string(&repo.canary)
    );
    for name in named {
        let name = name.replace("$REPO", &repo.dir.path().display().to_string());
        assert!(
            stderr.contains(&name),
            "foe does not say it dropped {name}: {stderr}"
        );
        if status.code() != Some(2) {
            assert!(stdout.contains(&name), "the report lists {name}: {stdout}");
        }
    }
    assert_eq!(repo.files(), before, "foe wrote in the repository");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in $TMPDIR: {left:?}");
}

#[test]
fn a_compiler_plugin_is_dropped() {
    // the fixture is real: clang given the flag runs the plugin
    let repo = Repo::new();
    let _ = Command::new(clang())
        .arg(format!("-fplugin={}", repo.path("evil.so")))
        .args(["-fsyntax-only", "-x", "c", "/dev/null"])
        .status();
    assert!(repo.canary.exists(), "the evil plugin writes its canary");
    check_drops(&["-fplugin=$REPO/evil.so"], &["-fplugin=$REPO/evil.so"]);
}

#[test]
fn a_pass_plugin_is_dropped() {
    check_drops(
        &["-fpass-plugin=$REPO/evil.so"],
        &["-fpass-plugin=$REPO/evil.so"],
    );
}

#[test]
fn xclang_load_is_dropped() {
    check_drops(
        &["-Xclang", "-load", "-Xclang", "$REPO/evil.so"],
        &["-Xclang -load", "-Xclang $REPO/evil.so"],
    );
}

#[test]
fn mllvm_is_dropped() {
    check_drops(
        &["-mllvm", "-load=$REPO/evil.so"],
        &["-mllvm -load=$REPO/evil.so"],
    );
}

#[test]
fn a_linker_of_the_repository_is_dropped() {
    check_drops(&["-fuse-ld=$REPO/evil-ld"], &["-fuse-ld=$REPO/evil-ld"]);
}

#[test]
fn a_tool_directory_is_dropped() {
    check_drops(&["-B$REPO/tools"], &["-B$REPO/tools"]);
}

#[test]
fn linker_options_are_dropped() {
    check_drops(
        &["-Wl,-plugin,$REPO/evil.so"],
        &["-Wl,-plugin,$REPO/evil.so"],
    );
}

#[test]
fn a_time_trace_file_is_dropped() {
    check_drops(
        &["-ftime-trace=$REPO/trace.json"],
        &["-ftime-trace=$REPO/trace.json"],
    );
}

#[test]
fn a_response_file_brings_nothing_more() {
    let write = |repo: &Path| {
        let text = format!("-fplugin={}/evil.so -DFROM_RSP", repo.display());
        std::fs::write(repo.join("flags.rsp"), text).unwrap()
    };
    check_drops_in(&["@flags.rsp"], &["-fplugin=$REPO/evil.so"], &write);
}

#[test]
fn a_config_file_is_not_read() {
    let write = |repo: &Path| {
        let text = format!("-fplugin={}/evil.so\n", repo.display());
        std::fs::write(repo.join("evil.cfg"), text).unwrap()
    };
    check_drops_in(
        &["--config", "$REPO/evil.cfg"],
        &["--config $REPO/evil.cfg"],
        &write,
    );
}

#[test]
fn the_entry_s_compiler_is_never_run() {
    // evil-cc is the entry's compiler in every database here; with nothing else in the entry
    check_drops(&[], &[]);
}

/// Processes (other than this test) whose environment holds `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == me {
            continue;
        }
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|kv| kv == marker.as_bytes()) {
            let cmd = std::fs::read_to_string(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!("{name}: {}", cmd.replace('\0', " ")));
        }
    }
    found
}

#[test]
fn sigkill_mid_analysis_leaves_nothing_once_foe_starts_again() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let marker = format!("HOME={}", home.path().display());
    let foe = |file: &Path| {
        let mut cmd = Command::new(foe_binary());
        cmd.args(["check", "--format", "json"])
            .arg(file)
            .env("TMPDIR", tmp.path())
            .env("HOME", home.path())
            .env("XDG_CACHE_HOME", home.path().join(".cache"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    };
    let slow = foe_e2e::repo_root().join("fixtures/bench/jetengine.c");
    let mut first = foe(&slow).spawn().unwrap();
    // wait until the analysis has children and temporary directories
    let started = Instant::now();
    let scratch_of_first = || {
        std::fs::read_dir(tmp.path())
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|root| {
                std::fs::read_dir(root.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .flat_map(|own| {
                std::fs::read_dir(own.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .filter(|e| e.file_name() != ".lock")
            .count()
    };
    while (processes_with(&marker).len() < 2 || scratch_of_first() == 0)
        && started.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(scratch_of_first() > 0, "the first foe made its directories");
    first.kill().unwrap();
    first.wait().unwrap();
    // children die with foe
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        processes_with(&marker),
        Vec::<String>::new(),
        "children of the killed foe"
    );
    // the next foe cleans what the first left
    let small = foe_e2e::repo_root().join("fixtures/hostile/databases/target.c");
    let status = foe(&small).status().unwrap();
    assert!(matches!(status.code(), Some(0..=2)), "{status}");
    assert!(processes_with(&marker).is_empty());
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in $TMPDIR: {left:?}");
}
