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
