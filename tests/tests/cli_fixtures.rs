//! The fixtures' inline expectations, checked against `foe check --format json`, and every reported
//! divergence confirmed with `foe replay`.
//!
//! Annotations in fixture files:
//! - `// foe: divergence KIND` at the end of a code line: a divergence is reported on this line whose first
//!   diverging event is KIND (overflow, underflow, divide-by-zero, invalid). Any divergence on a line without
//!   such an annotation fails the test. Several kinds are separated by commas.
//! - `// foe: skipped NAME REASON-WORDS`: function NAME is skipped and its reason contains REASON-WORDS; likewise
//!   `partial`, `failed` and `through_callers` (`// foe: through_callers helper analysed through `caller``) for those.
//! - `// foe: analysed NAME`: function NAME is analysed (with no divergence unless lines say otherwise).
//! - `// foe: reason NAME WORDS`: function NAME's reason contains WORDS, whatever its status.
//! - `// foe: maybe KIND`: a divergence of KIND on this line is allowed but not required.
//! - `// foe: any-divergences`: divergences on lines without annotations are allowed (the paper's programs,
//!   whose exact set of divergent lines and kinds moves with solver time-outs); they must still replay.
//! - `// foe: note CODE`: a finding with code CODE that is not a divergence (`runs-incomplete`,
//!   `function-skipped`) is shown at this line.
//! - `// foe: exit N`: `foe check` exits with status N (default: 1 when divergences are expected, else 0).
//! - `// foe: result CLASS` on the line a result divergence is flagged at (the function's declaration):
//!   its outputs differ in CLASS (`special-value`, `accuracy`; `ending`: one build stops at a call foe does not
//!   run, such as an error handler, where the other returns). In a fixture with a `// foe: result` annotation
//!   every result divergence must be annotated; elsewhere (fixtures written for exceptions) result divergences
//!   are allowed. Every one must replay with the same outputs. `// foe: maybe-result CLASS`: allowed, not required.
//!   `// foe: result CLASS CAUSE`: one of this line's result divergences of CLASS has that cause (`reciprocal`,
//!   `reassociation`: the JSON `cause`), where another cause on the same line would meet the class alone.
//!   A divergence seen only on the shipped binaries (`shipped_only`) must replay there.

use foe_e2e::{foe, repo_root};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

#[derive(Debug, Default)]
struct Expectations {
    divergences: BTreeSet<(u32, String)>,
    /// (status, function, words its reason contains).
    skipped: Vec<(String, String, String)>,
    analysed: Vec<String>,
    /// (function, words its reason contains), whatever its status: `// foe: reason NAME WORDS`.
    reasons: Vec<(String, String)>,
    exit: Option<i32>,
    any_divergences: bool,
    /// (line, class) of result divergences: `// foe: result CLASS`.
    results: BTreeSet<(u32, String)>,
    /// (line, class, cause) of result divergences whose cause is named: `// foe: result CLASS CAUSE`.
    result_causes: BTreeSet<(u32, String, String)>,
    /// Result divergences allowed but not required: `// foe: maybe-result CLASS` (inputs a loaded machine's
    /// execution time-outs may cut from the search).
    optional_results: BTreeSet<(u32, String)>,
    /// (line, code) of notes: `// foe: note CODE`.
    notes: BTreeSet<(u32, String)>,
    /// (line, kind) allowed but not required: `// foe: maybe KIND` (results that depend on solver timing).
    optional: BTreeSet<(u32, String)>,
}

fn expectations(text: &str) -> Expectations {
    let mut e = Expectations::default();
    for (i, line) in text.lines().enumerate() {
        for comment in line.split("// foe:").skip(1) {
            let words: Vec<&str> = comment.split_whitespace().collect();
            match words.as_slice() {
                ["divergence", kinds @ ..] => {
                    for kind in kinds
                        .join(" ")
                        .split(',')
                        .map(str::trim)
                        .filter(|k| !k.is_empty())
                    {
                        e.divergences.insert((i as u32 + 1, kind.to_string()));
                    }
                }
                [status @ ("skipped" | "partial" | "failed" | "through_callers"), name, reason @ ..] => {
                    e.skipped
                        .push((status.to_string(), name.to_string(), reason.join(" ")))
                }
                ["analysed", name, ..] => e.analysed.push(name.to_string()),
                ["reason", name, words @ ..] => e.reasons.push((name.to_string(), words.join(" "))),
                ["exit", n, ..] => e.exit = n.parse().ok(),
                ["any-divergences", ..] => e.any_divergences = true,
                ["result", class, rest @ ..] => {
                    e.results.insert((i as u32 + 1, class.to_string()));
                    if let Some(cause) = rest.first().filter(|w| !w.starts_with("//")) {
                        let named = (i as u32 + 1, class.to_string(), cause.to_string());
                        e.result_causes.insert(named);
                    }
                }
                ["note", code, ..] => {
                    e.notes.insert((i as u32 + 1, code.to_string()));
                }
                ["maybe-result", class, ..] => {
                    e.optional_results.insert((i as u32 + 1, class.to_string()));
                }
                ["maybe", kinds @ ..] => {
                    for kind in kinds
                        .join(" ")
                        .split(',')
                        .map(str::trim)
                        .filter(|k| !k.is_empty())
                    {
                        e.optional.insert((i as u32 + 1, kind.to_string()));
                    }
                }
                _ => {}
            }
        }
    }
    e
}

/// The kind of the first diverging event of a JSON divergence (P' first, as the location is chosen).
fn first_kind(d: &Value) -> String {
    let i = d["first_divergence"].as_u64().unwrap() as usize;
    let event = d["trace_p_prime"]
        .get(i)
        .or_else(|| d["trace_p"].get(i))
        .expect("first divergence indexes a trace");
    event["kind"].as_str().unwrap().to_string()
}

fn check_fixture(path: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let text = std::fs::read_to_string(path).unwrap();
    let expected = expectations(&text);
    // Fixtures of the repository by their relative path; an instantiated copy (the project) by its own.
    let rel = path
        .strip_prefix(repo_root())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.display().to_string());
    // Expectations are about what is found, not how fast: a generous solver limit and time budgets keep them
    // independent of the machine's speed and load (the defaults are measured by `foe bench`).
    let out = foe(&[
        "check",
        "--format",
        "json",
        "--solver-timeout-ms",
        "2000",
        "--function-budget-ms",
        "300000",
        "--file-budget-ms",
        "900000",
        &rel,
    ]);
    let code = out.status.code().unwrap_or(-1);
    let want_exit = expected.exit.unwrap_or(
        if expected.divergences.is_empty() && expected.results.is_empty() {
            0
        } else {
            1
        },
    );
    if code != want_exit {
        problems.push(format!(
            "{rel}: exit status {code}, expected {want_exit}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if code == 2 {
        return problems;
    }
    let report: Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(e) => return vec![format!("{rel}: output is not JSON ({e})")],
    };
    let functions = report["functions"].as_array().cloned().unwrap_or_default();
    let mut seen = BTreeSet::new();
    let mut results_seen = BTreeSet::new();
    let mut causes_seen = BTreeSet::new();
    for f in &functions {
        let name = f["name"].as_str().unwrap();
        let decl = f["span"]["line"].as_u64().unwrap_or(0) as u32;
        for d in f["divergences"].as_array().unwrap() {
            let line = d["location"]["line"].as_u64().map_or(decl, |l| l as u32);
            let class = d["class"].as_str().unwrap_or_default();
            let result_only = matches!(class, "special_value" | "accuracy" | "ending");
            if result_only {
                results_seen.insert((line, class.replace('_', "-")));
                let cause = d["cause"].as_str().unwrap_or_default().to_string();
                causes_seen.insert((line, class.replace('_', "-"), cause));
            } else {
                seen.insert((line, first_kind(d)));
            }
            // every report must replay: both builds run again on exactly this input, traces differ
            let mut args = vec![
                "replay".to_string(),
                rel.clone(),
                "--function".into(),
                name.into(),
                "--format".into(),
                "json".into(),
            ];
            for input in d["inputs"].as_array().unwrap() {
                args.push("--input".into());
                args.push(format!(
                    "{}={}",
                    input["name"].as_str().unwrap(),
                    input["value"].as_str().unwrap()
                ));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let replay = foe(&args);
            let replayed: Value = serde_json::from_slice(&replay.stdout).unwrap_or(Value::Null);
            let shipped = &replayed["shipped"];
            let replays = if d["shipped_only"] == true {
                // Found on the shipped binaries only: they must show it again.
                shipped["status"] == "ran"
                    && shipped["end_p"] == d["end_p"]
                    && shipped["end_p_prime"] == d["end_p_prime"]
                    && if class == "ending" {
                        true
                    } else if result_only {
                        shipped["result"]["class"] == d["class"]
                    } else {
                        shipped["sets_differ"] == true
                    }
            } else if class == "ending" {
                replayed["end_p"] == d["end_p"] && replayed["end_p_prime"] == d["end_p_prime"]
            } else if result_only {
                replayed["result"]["class"] == d["class"]
                    && replayed["end_p"] == d["end_p"]
                    && replayed["end_p_prime"] == d["end_p_prime"]
            } else {
                !replayed["first_divergence"].is_null()
                    && replayed["trace_p"] == d["trace_p"]
                    && replayed["trace_p_prime"] == d["trace_p_prime"]
            };
            if !replays {
                problems.push(format!(
                    "{rel}: {name}: divergence at line {line} does not replay: {}",
                    String::from_utf8_lossy(&replay.stdout)
                ));
            }
        }
    }
    for missing in expected.divergences.difference(&seen) {
        problems.push(format!(
            "{rel}:{}: expected a divergence ({}) that was not reported",
            missing.0, missing.1
        ));
    }
    for extra in seen
        .difference(&expected.divergences)
        .filter(|x| !expected.any_divergences && !expected.optional.contains(x))
    {
        problems.push(format!(
            "{rel}:{}: unexpected divergence ({})",
            extra.0, extra.1
        ));
    }
    for missing in expected.results.difference(&results_seen) {
        problems.push(format!(
            "{rel}:{}: expected a result divergence ({}) that was not reported",
            missing.0, missing.1
        ));
    }
    for missing in expected.result_causes.difference(&causes_seen) {
        problems.push(format!(
            "{rel}:{}: expected a result divergence ({}) caused by {} that was not reported",
            missing.0, missing.1, missing.2
        ));
    }
    if !expected.results.is_empty() {
        for extra in results_seen
            .difference(&expected.results)
            .filter(|x| !expected.optional_results.contains(x))
        {
            problems.push(format!(
                "{rel}:{}: unexpected result divergence ({})",
                extra.0, extra.1
            ));
        }
    }
    for (status, name, reason) in &expected.skipped {
        match functions.iter().find(|f| f["name"] == name.as_str()) {
            Some(f)
                if f["status"] == status.as_str()
                    && f["reason"].as_str().unwrap_or("").contains(reason.as_str()) => {}
            Some(f) => problems.push(format!(
                "{rel}: {name} should be {status} ({reason}), got {} / {}",
                f["status"], f["reason"]
            )),
            None => problems.push(format!("{rel}: no function {name}")),
        }
    }
    // Notes: where one is expected it is shown, and a fixture that expects notes gets no other.
    let notes: BTreeSet<(u32, String)> = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["rank"] == "note" && x["code"] != "function-skipped")
        .filter_map(|x| Some((x["line"].as_u64()? as u32, x["code"].as_str()?.to_string())))
        .collect();
    for missing in expected.notes.difference(&notes) {
        problems.push(format!("{rel}:{}: no {} note", missing.0, missing.1));
    }
    if !expected.notes.is_empty() {
        for extra in notes.difference(&expected.notes) {
            problems.push(format!("{rel}:{}: unexpected {} note", extra.0, extra.1));
        }
    }
    for (name, words) in &expected.reasons {
        match functions.iter().find(|f| f["name"] == name.as_str()) {
            Some(f) if f["reason"].as_str().unwrap_or("").contains(words.as_str()) => {}
            Some(f) => problems.push(format!(
                "{rel}: {name}'s reason should say \"{words}\", got {}",
                f["reason"]
            )),
            None => problems.push(format!("{rel}: no function {name}")),
        }
    }
    for name in &expected.analysed {
        match functions.iter().find(|f| f["name"] == name.as_str()) {
            Some(f) if f["status"] == "analysed" => {}
            Some(f) => problems.push(format!(
                "{rel}: {name} should be analysed, got {} ({})",
                f["status"], f["reason"]
            )),
            None => problems.push(format!("{rel}: no function {name}")),
        }
    }
    problems
}

fn check_dir(dir: &str) {
    let root = repo_root().join("fixtures").join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "c"));
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", root.display());
    let problems: Vec<String> = files.iter().flat_map(|f| check_fixture(f)).collect();
    assert!(
        problems.is_empty(),
        "fixture expectations failed:\n{}",
        problems.join("\n")
    );
}

#[test]
fn construct_fixtures_meet_their_expectations() {
    check_dir("constructs");
}

#[test]
fn robustness_fixtures_meet_their_expectations() {
    check_dir("robustness");
}

#[test]
fn paper_fixtures_meet_their_expectations() {
    check_dir("bench");
}

/// Copies `from` (a directory tree) to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The multi-file project: its compilation database is instantiated for a copy (entries need absolute
/// directories), and `main.c` is checked against its expectations: the function, the global and the error
/// reporter of `lib.c` are linked in (compiled with lib.c's own flags), so `main.c`'s functions are analysed
/// through them and every divergence replays.
#[test]
fn project_fixture_links_the_units_it_uses() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    copy_tree(&repo_root().join("fixtures").join("project"), &root);
    let template = std::fs::read_to_string(root.join("compile_commands.json.template")).unwrap();
    let db = template.replace("@ROOT@", &root.display().to_string());
    std::fs::write(root.join("compile_commands.json"), db).unwrap();
    let problems = check_fixture(&root.join("main.c"));
    assert!(
        problems.is_empty(),
        "project fixture expectations failed:\n{}",
        problems.join("\n")
    );
    // lib.c's functions are not reported as main.c's.
    let out = foe(&[
        "check",
        "--format",
        "json",
        root.join("main.c").to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["after_helper", "with_constant", "reports_error"]);
}

#[test]
fn result_fixtures_meet_their_expectations() {
    check_dir("results");
}
