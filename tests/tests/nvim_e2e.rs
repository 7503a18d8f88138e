//! The core LSP scenario through a real client: headless Neovim (0.7+) with the foe plugin and the real
//! `foe lsp`, scripted by tests/nvim/init.lua. Skipped, with a message, only when `nvim` is not installed.

use foe_e2e::{foe_binary, has_a_fix, repo_root};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for the whole Neovim session.
const SESSION: Duration = Duration::from_secs(900);
/// Longest wait for one analysis inside it.
const ANALYSIS_MS: u64 = 300_000;

const FIXTURE: &str = include_str!("../nvim/flagged.c");

fn nvim_available() -> bool {
    Command::new("nvim")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn neovim_shows_diagnostics_hover_trace_and_applies_the_verified_fix() {
    if !nvim_available() {
        eprintln!("SKIPPED: nvim is not installed (apt-get install neovim), so the headless Neovim test did not run");
        return;
    }
    let foe = foe_binary();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flagged.c");
    std::fs::write(&file, FIXTURE).unwrap();
    let out = dir.path().join("result.json");

    let mut child = Command::new("nvim")
        .args(["--headless", "--clean", "-u"])
        .arg(repo_root().join("tests/nvim/init.lua"))
        .env("FOE_NVIM_PLUGIN", repo_root().join("editors/nvim"))
        .env("FOE_BIN", &foe)
        .env("FOE_NVIM_FILE", &file)
        .env("FOE_NVIM_OUT", &out)
        .env("FOE_NVIM_TIMEOUT_MS", ANALYSIS_MS.to_string())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nvim");
    let deadline = Instant::now() + SESSION;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let r: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    println!(
        "neovim session result: {}",
        serde_json::to_string_pretty(&r).unwrap()
    );
    assert!(
        status.is_some(),
        "nvim did not finish within {SESSION:?}; steps done: {}",
        r["steps"]
    );
    assert!(
        r["error"].is_null(),
        "the Lua script failed: {}",
        r["error"].as_str().unwrap_or("")
    );
    assert_eq!(r["done"], true, "{text}");
    assert_eq!(r["filetype"], "c");
    assert_eq!(r["attached"], true, "the foe client attached to the buffer");

    // Diagnostics exactly on the fixture's `// foe: divergence` lines.
    let expected: Vec<u64> = FIXTURE
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("// foe: divergence "))
        .map(|(i, _)| i as u64)
        .collect();
    let diags = r["diagnostics"].as_array().cloned().unwrap_or_default();
    let mut lines: Vec<u64> = diags.iter().filter_map(|d| d["lnum"].as_u64()).collect();
    lines.dedup();
    assert_eq!(lines, expected, "flagged lines: {diags:#?}");
    assert!(diags.iter().all(|d| d["source"] == "foe"));
    assert!(diags
        .iter()
        .any(|d| d["function"] == "identity" && d["code"] == "fast-math-overflow-disappears"));

    let hover = r["hover"].as_str().unwrap_or("");
    for needle in ["Plain build (`", "Fast-math build (`", "-ffast-math", "0x"] {
        assert!(hover.contains(needle), "hover lacks {needle:?}: {hover}");
    }
    // Neovim 0.7 shows hovers as plain text: short, no table pipes.
    assert!(
        hover.lines().count() <= 20 && !hover.contains('|'),
        "{hover}"
    );
    assert!(
        r["trace"].as_str().unwrap_or("").contains("### Input 1"),
        ":FoeTrace markdown: {}",
        r["trace"]
    );
    // The statusline text at rest, from `foe/status`.
    let status = r["status"].as_str().unwrap_or("");
    assert!(
        status.starts_with("foe: ") && status.contains("warning"),
        "status: {status:?}"
    );
    assert!(
        r["first_code_action_ms"]
            .as_f64()
            .is_some_and(|ms| ms < 2000.0),
        "first code action: {} ms",
        r["first_code_action_ms"]
    );

    let titles = r["code_actions"].as_array().cloned().unwrap_or_default();
    assert!(
        titles
            .iter()
            .any(|t| t.as_str().unwrap_or("").contains("(verified")),
        "{titles:?}"
    );
    let fixed = r["fixed_text"].as_str().unwrap_or("");
    assert!(has_a_fix(fixed), "{fixed}");

    let after = r["after_fix"].as_array().cloned().unwrap_or_default();
    assert!(!after.is_empty(), "no diagnostics after the fix: {text}");
    // What is left in identity is what only the link flags cause (flush-to-zero of a subnormal input).
    assert!(
        after
            .iter()
            .all(|d| d["function"] != "identity" || d["cause"] == "flush_to_zero"),
        "identity still flagged: {after:#?}"
    );
    assert!(after.iter().any(|d| d["function"] == "turbine1"));
}
