//! Helpers shared by the end-to-end tests: locating the `foe` binary and running it, reading a quick fix.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// The `foe` binary of the current profile, built on demand.
pub fn foe_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        repo_root().join(target)
    };
    let bin = target.join("debug").join("foe");
    static BUILD: std::sync::Once = std::sync::Once::new();
    BUILD.call_once(|| {
        // scripts/test.sh builds foe first; building from inside a test would rebuild with another environment
        if bin.is_file() {
            return;
        }
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "foe-cli"])
            .current_dir(repo_root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building foe failed");
    });
    bin
}

/// Runs `foe` with `args` from the repository root.
pub fn foe(args: &[&str]) -> Output {
    Command::new(foe_binary())
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("foe runs")
}

/// Whether `text` holds the pragmas of one of the quick fixes (the narrowest one verified is offered: for a
/// divergence re-association alone causes, `clang fp reassociate(off)`).
pub fn has_a_fix(text: &str) -> bool {
    use foe_analysis::fix::FixScope;
    [
        FixScope::Reassociation,
        FixScope::Contraction,
        FixScope::FastMath,
    ]
    .iter()
    .any(|scope| scope.pragmas().iter().all(|p| text.contains(p)))
}

/// The live processes (zombies and this test aside) that `pick` takes, as `pid: command line`; `pick` is given
/// the process's environment entries (`KEY=value`) and its process group.
pub fn live_processes(pick: impl Fn(&[&[u8]], Option<u32>) -> bool) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == me {
            continue;
        }
        // state and process group follow the command name's closing parenthesis
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        if fields.is_empty() || fields[0] == "Z" {
            continue;
        }
        let group = fields.get(2).and_then(|g| g.parse().ok());
        let env = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let env: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        if pick(&env, group) {
            let cmd = std::fs::read_to_string(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!("{name}: {}", cmd.replace('\0', " ")));
        }
    }
    found
}

/// The live processes whose environment holds `entry` (`HOME=…`: the unique home a test gives foe, which every
/// child of foe inherits).
pub fn processes_with_env(entry: &str) -> Vec<String> {
    live_processes(|env, _| env.contains(&entry.as_bytes()))
}
