//! Hostile `compile_commands.json` files: an entry that loads a plugin into the compiler (`-fplugin=`,
//! `-fpass-plugin=`, `-Xclang -load`), picks the linker or tool directory (`-fuse-ld=`, `-B`), passes options
//! through (`-mllvm`, `-Wl,`), writes a file (`-ftime-trace=`), brings a plugin in a response file or a `--config`
//! file, or names a compiler that is a script. For each: `foe check` ends with 0, 1 or 2, names what it dropped,
//! no canary appears, nothing is written in the repository, and nothing of foe is left in `$TMPDIR`.
//! `foe check` killed with SIGKILL mid-analysis (the worker running) or while clang builds its runtime
//! leaves nothing once foe starts again: no process, nothing in `$TMPDIR`, no temporary file in its cache.
//!
//! Run as root and, by `scripts/hostile-unprivileged.sh`, as an unprivileged user.

use foe_e2e::foe_binary;
use std::os::unix::process::CommandExt;
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

    /// An entry for the target: `arguments` between the repository's compiler and `-O2 -c target.c`, as an
    /// `arguments` array, or `command` as written (a shell command line, `$REPO` the repository).
    fn database(&self, entry: &Entry) {
        let repo = self.dir.path().display().to_string();
        let (key, value) = match entry {
            Entry::Arguments(arguments) => {
                let mut args = vec![self.path("evil-cc")];
                args.extend(arguments.iter().map(|a| a.replace("$REPO", &repo)));
                args.extend(["-O2".to_string(), "-c".into(), "target.c".into()]);
                ("arguments", serde_json::json!(args))
            }
            Entry::Command(command) => (
                "command",
                serde_json::json!(command.replace("$REPO", &repo)),
            ),
        };
        let mut entry = serde_json::json!({
            "directory": self.dir.path(),
            "file": "target.c",
        });
        entry[key] = value;
        let db = serde_json::json!([entry]);
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

/// The compilation database's entry for the target, in either form a database may use.
enum Entry<'a> {
    Arguments(&'a [&'a str]),
    Command(&'a str),
}

fn check_drops(arguments: &[&str], named: &[&str]) {
    check_drops_in(arguments, named, &|_| {});
}

fn check_drops_in(arguments: &[&str], named: &[&str], prepare: &dyn Fn(&Path)) {
    check_entry(&Entry::Arguments(arguments), named, prepare);
}

/// Runs `foe check` on a new repository's target (`prepare` adds files to it) whose database has `entry`, with
/// its own `$TMPDIR` and `$HOME`, and checks what it must not do; `named` ($REPO for the repository) must be
/// named as dropped.
fn check_entry(entry: &Entry, named: &[&str], prepare: &dyn Fn(&Path)) {
    let repo = Repo::new();
    prepare(repo.dir.path());
    repo.database(entry);
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

#[test]
fn xclang_plugins_in_every_spelling_are_dropped() {
    check_drops(
        &[
            "-Xclang",
            "-load",
            "-Xclang",
            "$REPO/evil.so",
            "-Xclang",
            "-plugin",
            "-Xclang",
            "evil",
            "-Xclang=-load",
            "-Xclang=$REPO/evil.so",
        ],
        &[
            "-Xclang $REPO/evil.so",
            "-Xclang -plugin",
            "-Xclang=-load",
            "-Xclang=$REPO/evil.so",
        ],
    );
}

#[test]
fn linker_plugins_and_linker_paths_are_dropped() {
    check_drops(
        &[
            "-Wl,-plugin=$REPO/evil.so",
            "--ld-path=$REPO/evil-ld",
            "-Xlinker",
            "-plugin",
            "-Xlinker",
            "$REPO/evil.so",
        ],
        &[
            "-Wl,-plugin=$REPO/evil.so",
            "--ld-path=$REPO/evil-ld",
            "-Xlinker $REPO/evil.so",
        ],
    );
}

#[test]
fn files_the_entry_would_write_are_not_written() {
    // profiles (written when the shipped build runs), dependency files, the object, temporaries, crash reports,
    // module caches, serialised diagnostics, split debug info: none lands in the repository
    check_drops(
        &[
            "-fprofile-generate=$REPO/prof",
            "-fprofile-instr-generate=$REPO/p.profraw",
            "-fcoverage-compilation-dir=$REPO",
            "-fdebug-compilation-dir=$REPO",
            "-MD",
            "-MMD",
            "-MF",
            "$REPO/dep.d",
            "-o",
            "$REPO/out.o",
            "-o$REPO/out2.o",
            "-save-temps=obj",
            "-fcrash-diagnostics-dir=$REPO/crash",
            "-fmodules-cache-path=$REPO/modules",
            "--serialize-diagnostics",
            "$REPO/diag.dia",
            "-gsplit-dwarf",
            "-ftime-report",
            "-fembed-bitcode",
        ],
        &[
            "-fprofile-generate=$REPO/prof",
            "-fprofile-instr-generate=$REPO/p.profraw",
            "-fcoverage-compilation-dir=$REPO",
            "-fdebug-compilation-dir=$REPO",
            "-save-temps=obj",
            "-fcrash-diagnostics-dir=$REPO/crash",
            "-fmodules-cache-path=$REPO/modules",
            "--serialize-diagnostics $REPO/diag.dia",
            "-ftime-report",
            "-fembed-bitcode",
        ],
    );
}

#[test]
fn assembler_preprocessor_and_driver_options_are_dropped() {
    check_drops(
        &[
            "-Wa,-o,$REPO/as.o",
            "-Xassembler",
            "--defsym=X=1",
            "-Xpreprocessor",
            "-dependency-file",
            "-Xpreprocessor",
            "$REPO/pp.d",
            "--driver-mode=cl",
            "-ccc-install-dir",
            "$REPO/tools",
            "-ccc-gcc-name",
            "$REPO/evil-cc",
            "-fsanitize-ignorelist=$REPO/list.txt",
        ],
        &[
            "-Wa,-o,$REPO/as.o",
            "-Xassembler --defsym=X=1",
            "-Xpreprocessor $REPO/pp.d",
            "--driver-mode=cl",
            "-ccc-install-dir $REPO/tools",
            "-ccc-gcc-name $REPO/evil-cc",
            "-fsanitize-ignorelist=$REPO/list.txt",
        ],
    );
}

#[test]
fn a_target_that_is_a_path_is_dropped() {
    // clang makes paths of the triple (`<triple>-ld`, the GCC installation it looks for)
    check_drops(
        &["--target=x86_64-$REPO/tools", "-target", "$REPO/evil"],
        &["--target=x86_64-$REPO/tools", "-target $REPO/evil"],
    );
}

#[test]
fn joined_and_separate_spellings_are_dropped_alike() {
    let write = |repo: &Path| {
        let text = format!("-fplugin={}/evil.so\n", repo.display());
        std::fs::write(repo.join("evil.cfg"), text).unwrap()
    };
    check_drops_in(
        &[
            "--config=$REPO/evil.cfg",
            "--sysroot",
            "$REPO",
            "--sysroot=$REPO",
            "-B",
            "$REPO/tools",
            "-MJ",
            "$REPO/frag.json",
            "-MJ$REPO/frag2.json",
            "--output",
            "$REPO/o1.o",
            "--output=$REPO/o2.o",
        ],
        &[
            "--config=$REPO/evil.cfg",
            "--sysroot $REPO",
            "--sysroot=$REPO",
            "-B $REPO/tools",
            "-MJ $REPO/frag.json",
            "-MJ$REPO/frag2.json",
        ],
        &write,
    );
}

#[test]
fn a_command_string_with_shell_quoting_is_read_as_an_arguments_array() {
    // the plugin in a directory whose name needs quoting
    let put = |repo: &Path| {
        std::fs::create_dir(repo.join("sub dir")).unwrap();
        std::fs::copy(repo.join("evil.so"), repo.join("sub dir/evil.so")).unwrap();
    };
    check_entry(
        &Entry::Command(
            "$REPO/evil-cc '-fplugin=$REPO/sub dir/evil.so' -Xclang -load -Xclang \"$REPO/sub dir/evil.so\" \
             -o $REPO/sub\\ dir/out.o -O2 -c target.c",
        ),
        &[
            "-fplugin=$REPO/sub dir/evil.so",
            "-Xclang $REPO/sub dir/evil.so",
        ],
        &put,
    );
}

/// Processes (other than this test) whose environment holds `marker` or whose process group is `group`; zombies
/// (already dead, waiting for a parent to reap them) are not counted.
fn processes_of(marker: &str, group: u32) -> Vec<String> {
    foe_e2e::live_processes(|env, g| g == Some(group) || env.contains(&marker.as_bytes()))
}

/// Everything under `dir`, `depth` levels deep, whose name `pick` takes.
fn entries_under(dir: &Path, depth: usize, pick: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if pick(&e.file_name().to_string_lossy()) {
            out.push(e.path());
        }
        if depth > 0 && e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(entries_under(&e.path(), depth - 1, pick));
        }
    }
    out
}

/// What a foe was in the middle of when it was killed.
enum Moment {
    /// The worker runs (a program in the scratch directory).
    Worker,
    /// clang compiles the C runtime (in its build directory).
    RuntimeBuild,
}

/// Starts `foe check` on a slow file with empty `$TMPDIR` and `$HOME`, kills it with SIGKILL at `moment`, starts
/// foe again, and checks that no process of the first and none of its temporary directories or files remain,
/// in `$TMPDIR` or in foe's cache.
fn sigkill_at(moment: Moment) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join(".cache");
    let marker = format!("HOME={}", home.path().display());
    // The runtime's build takes a fraction of a second, which a poll of the process table on a loaded machine can
    // miss: the first foe's compiler (the user's own setting, `--clang`) waits 60 s before it compiles the
    // runtime, in the process that then becomes clang, so only a kill that reaches the compiler ends it in time.
    // The script spells the runtime's name in two pieces: only the compile of the runtime names it whole.
    let tools = tempfile::tempdir().unwrap();
    let slow_clang = tools.path().join("clang");
    std::fs::write(
        &slow_clang,
        "#!/bin/sh\nexec python3 -c 'import os, sys, time\n\
         if any(a.endswith(\"foe_\" \"runtime.c\") for a in sys.argv[1:]): time.sleep(60)\n\
         os.execvp(\"clang-19\", [\"clang-19\"] + sys.argv[1:])' \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &slow_clang,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let foe = |file: &Path, first: bool| {
        let mut cmd = Command::new(foe_binary());
        cmd.args(["check", "--format", "json"]);
        if first && matches!(moment, Moment::RuntimeBuild) {
            cmd.arg("--clang").arg(&slow_clang);
        }
        cmd.arg(file)
            .env("TMPDIR", tmp.path())
            .env("HOME", home.path())
            .env("XDG_CACHE_HOME", &cache)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    };
    let slow = foe_e2e::repo_root().join("fixtures/bench/jetengine.c");
    let mut first = foe(&slow, true).process_group(0).spawn().unwrap();
    let group = first.id();
    let runtime_builds = || {
        let pick = |n: &str| n.starts_with("foe-runtime-build");
        let mut found = entries_under(tmp.path(), 3, &pick);
        found.extend(entries_under(&cache, 3, &pick));
        found
    };
    let running = |what: &dyn Fn(&str) -> bool| {
        processes_of(&marker, group)
            .iter()
            .any(|p| what(p.split_once(": ").map_or("", |(_, cmd)| cmd)))
    };
    let tmp_path = tmp.path().display().to_string();
    let ready = || match moment {
        Moment::Worker => running(&|cmd| cmd.starts_with(&tmp_path)),
        Moment::RuntimeBuild => {
            !runtime_builds().is_empty() && running(&|cmd| cmd.contains("foe_runtime.c"))
        }
    };
    let started = Instant::now();
    while !ready() {
        assert!(
            first.try_wait().unwrap().is_none(),
            "foe ended before the moment to kill it"
        );
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the moment to kill foe never came: {:?}",
            processes_of(&marker, group)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    // children die with foe
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_of(&marker, group).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        processes_of(&marker, group),
        Vec::<String>::new(),
        "processes of the killed foe"
    );
    // the next foe cleans what the first left
    let small = foe_e2e::repo_root().join("fixtures/hostile/databases/target.c");
    let status = foe(&small, false).status().unwrap();
    assert!(matches!(status.code(), Some(0..=2)), "{status}");
    assert_eq!(processes_of(&marker, group), Vec::<String>::new());
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in $TMPDIR: {left:?}");
    let temporary = entries_under(&cache, 3, &|n| {
        n.starts_with("foe-runtime-build") || n.contains(".foe-part-") || n.contains(".tmp")
    });
    assert!(temporary.is_empty(), "left in foe's cache: {temporary:?}");
}

#[test]
fn sigkill_mid_analysis_leaves_nothing_once_foe_starts_again() {
    sigkill_at(Moment::Worker);
}

#[test]
fn sigkill_while_the_runtime_builds_leaves_nothing_once_foe_starts_again() {
    sigkill_at(Moment::RuntimeBuild);
}
