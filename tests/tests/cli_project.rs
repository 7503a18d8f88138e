//! `foe check -p BUILD_DIR`: the real `foe` binary on a copy of fixtures/project_ci (scale.c calls ramp.c's
//! function; both include include/factor.h; standalone.c includes nothing): every file analysed in its own child,
//! one aggregated report (text, JSON, SARIF), one exit status, shards that partition the files, and a results
//! cache that re-analyses exactly the files whose inputs changed.

use foe_e2e::{foe_binary, repo_root};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A copy of fixtures/project_ci with its database instantiated, and a cache directory of its own.
struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
    cache: PathBuf,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project_ci");
        copy_tree(&repo_root().join("fixtures/project_ci"), &root);
        let template =
            std::fs::read_to_string(root.join("compile_commands.json.template")).unwrap();
        std::fs::write(
            root.join("compile_commands.json"),
            template.replace("@ROOT@", &root.display().to_string()),
        )
        .unwrap();
        let cache = dir.path().join("cache");
        Project {
            _dir: dir,
            root,
            cache,
        }
    }

    /// `foe ARGS` run in the project's directory.
    fn foe(&self, args: &[&str]) -> Output {
        Command::new(foe_binary())
            .args(args)
            .current_dir(&self.root)
            .output()
            .expect("foe runs")
    }

    /// `foe check -p . --format json` with the project's cache, and the report.
    fn check_json(&self, extra: &[&str]) -> (i32, Value) {
        let cache = self.cache.display().to_string();
        let mut args = vec![
            "check",
            "-p",
            ".",
            "--format",
            "json",
            "--cache-dir",
            &cache,
        ];
        args.extend(extra);
        let out = self.foe(&args);
        let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), report)
    }

    fn edit(&self, file: &str, from: &str, to: &str) {
        let path = self.root.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no `{from}`");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    }
}

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

/// The files of an aggregated JSON report with the given status (`analysed`, `cached`, `failed`).
fn files_with(report: &Value, status: &str) -> BTreeSet<String> {
    report["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] == status)
        .map(|f| f["file"].as_str().unwrap().to_string())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn file_report<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report}"))
}

#[test]
fn every_file_is_analysed_once_then_served_from_the_cache_until_its_inputs_change() {
    let project = Project::new();
    let all = set(&["ramp.c", "scale.c", "standalone.c"]);

    let (code, report) = project.check_json(&[]);
    assert_eq!(code, 1, "divergences were found: {report:#}");
    assert_eq!(files_with(&report, "analysed"), all);
    assert_eq!(report["summary"]["analysed"], 3);
    assert_eq!(report["summary"]["functions"]["analysed"], 4);
    // scale.c's call into ramp.c is resolved: ramp.c is linked in, scale_twice analysed with its divergence.
    let scale = &file_report(&report, "scale.c")["report"];
    assert!(
        scale["linked_units"][0]
            .as_str()
            .is_some_and(|u| u.ends_with("ramp.c")),
        "{scale:#}"
    );
    let twice = &scale["functions"][0];
    assert_eq!(twice["name"], "scale_twice");
    assert_eq!(twice["status"], "analysed", "{twice:#}");
    assert!(!twice["divergences"].as_array().unwrap().is_empty());
    assert!(!scale["findings"].as_array().unwrap().is_empty());

    let (code, again) = project.check_json(&[]);
    assert_eq!(code, 1);
    assert_eq!(
        files_with(&again, "cached"),
        all,
        "a second run is all cached"
    );
    assert_eq!(
        file_report(&again, "scale.c")["report"]["findings"],
        scale["findings"],
        "the cached report is the one analysed"
    );

    // Editing a file nothing else uses re-analyses that file only; the text summary says so.
    project.edit("standalone.c", "return -x;", "return -(x);");
    let cache = project.cache.display().to_string();
    let out = project.foe(&["check", "-p", ".", "--cache-dir", &cache]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("1 analysed, 2 from cache, 0 failed"),
        "{text}"
    );
    assert!(
        text.contains("scale.c:8:13:") && text.contains("ramp.c:8:13:"),
        "cached files still report their findings:\n{text}"
    );

    // A header: the two files that include it.
    project.edit("include/factor.h", "2.0", "4.0");
    let (_, report) = project.check_json(&[]);
    assert_eq!(files_with(&report, "analysed"), set(&["ramp.c", "scale.c"]));
    assert_eq!(files_with(&report, "cached"), set(&["standalone.c"]));

    // The unit linked into scale.c: both.
    project.edit("ramp.c", "(FACTOR / 16.0)", "(FACTOR / 32.0)");
    let (_, report) = project.check_json(&[]);
    assert_eq!(files_with(&report, "analysed"), set(&["ramp.c", "scale.c"]));

    // Its database entry: scale.c links ramp.c as that entry compiles it.
    project.edit(
        "compile_commands.json",
        "-DRAMP_LIMIT=1.0",
        "-DRAMP_LIMIT=2.0",
    );
    let (_, report) = project.check_json(&[]);
    assert_eq!(files_with(&report, "analysed"), set(&["ramp.c", "scale.c"]));
    assert_eq!(files_with(&report, "cached"), set(&["standalone.c"]));
}

#[test]
fn sarif_is_one_run_with_every_file_s_results() {
    let project = Project::new();
    let out = project.foe(&[
        "check",
        "-p",
        ".",
        "--format",
        "sarif",
        "--no-cache",
        "-j",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let runs = sarif["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["tool"]["driver"]["name"], "foe");
    assert_eq!(run["invocations"][0]["executionSuccessful"], true);
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let results = run["results"].as_array().unwrap();
    let uris: BTreeSet<String> = results
        .iter()
        .map(|r| {
            let index = r["ruleIndex"].as_u64().expect("a rule index") as usize;
            assert_eq!(
                rules[index]["id"], r["ruleId"],
                "ruleIndex points at its rule"
            );
            assert!(r["partialFingerprints"]["foeFinding/v1"].is_string());
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(uris, set(&["ramp.c", "scale.c"]));
    let ids: BTreeSet<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), rules.len(), "each rule once");
    assert_eq!(run["artifacts"].as_array().unwrap().len(), 3);
}

#[test]
fn shards_partition_the_files() {
    let project = Project::new();
    let (_, first) = project.check_json(&["--shard", "1/2", "--no-cache"]);
    let (_, second) = project.check_json(&["--shard", "2/2", "--no-cache"]);
    let (a, b) = (
        files_with(&first, "analysed"),
        files_with(&second, "analysed"),
    );
    assert!(a.is_disjoint(&b), "{a:?} {b:?}");
    assert_eq!(
        a.union(&b).cloned().collect::<BTreeSet<_>>(),
        set(&["ramp.c", "scale.c", "standalone.c"])
    );
    assert_eq!(
        (a.len(), b.len()),
        (2, 1),
        "round robin over the sorted files"
    );
    let out = project.foe(&["check", "-p", ".", "--shard", "3/2"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_file_past_the_time_limit_is_a_failed_entry() {
    let project = Project::new();
    let out = project.foe(&[
        "check",
        "-p",
        ".",
        "--no-cache",
        "--file-limit-s",
        "0",
        "standalone.c",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("standalone.c: error: killed after 0 s"),
        "{text}"
    );
    assert!(
        text.contains("0 analysed, 0 from cache, 1 failed"),
        "{text}"
    );
}

#[test]
fn a_file_that_does_not_compile_fails_alone() {
    let project = Project::new();
    std::fs::write(
        project.root.join("broken.c"),
        "double broken(double x) { return x +; }\n",
    )
    .unwrap();
    project.edit(
        "compile_commands.json",
        "\n]",
        &format!(
            ",\n  {{\"directory\": \"{}\", \"file\": \"broken.c\", \"arguments\": [\"cc\", \"-c\", \"broken.c\"]}}\n]",
            project.root.display()
        ),
    );
    let out = project.foe(&["check", "-p", ".", "--no-cache"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("broken.c: error: the file does not compile"),
        "{text}"
    );
    assert!(text.contains("files that failed:\n  broken.c:"), "{text}");
    assert!(
        text.contains("3 analysed, 0 from cache, 1 failed"),
        "{text}"
    );
    assert!(
        text.contains("scale.c: scale_twice:"),
        "the other files still report:\n{text}"
    );
    // The failure is not cached: a second run tries again and fails again.
    let (code, report) = project.check_json(&[]);
    assert_eq!(code, 2);
    assert_eq!(files_with(&report, "failed"), set(&["broken.c"]));
    assert!(file_report(&report, "broken.c")["error"]
        .as_str()
        .unwrap()
        .contains("broken.c:1:"));
}

#[test]
fn named_files_with_a_database_outside_their_directories() {
    let project = Project::new();
    // The database in out/, which foe's own search (the file's directories and their build/) does not find:
    // ramp.c compiles only with its entry's -DRAMP_LIMIT.
    std::fs::create_dir(project.root.join("out")).unwrap();
    std::fs::rename(
        project.root.join("compile_commands.json"),
        project.root.join("out/compile_commands.json"),
    )
    .unwrap();
    let ramp = project.root.join("ramp.c").display().to_string();
    let out = project.foe(&[
        "check",
        "-p",
        "out/compile_commands.json",
        "--no-cache",
        "--format",
        "json",
        "standalone.c",
        &ramp,
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        files_with(&report, "analysed"),
        set(&["ramp.c", "standalone.c"]),
        "{report:#}"
    );
    assert_eq!(out.status.code(), Some(1));
    let out = project.foe(&["check", "-p", "out", "--no-cache", "standalone.c"]);
    assert_eq!(out.status.code(), Some(0), "no divergence in standalone.c");
    let out = project.foe(&["check", "-p", "out", "--no-cache", "include/api.h"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not in the compilation database"));
}

#[test]
fn a_bare_file_name_finds_the_header_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.h"), "#define K 2.0\n").unwrap();
    std::fs::write(
        dir.path().join("a.c"),
        "#include \"k.h\"\ndouble a(double x) { return (x * K) / K; }\n",
    )
    .unwrap();
    let out = Command::new(foe_binary())
        .args(["check", "--format", "json", "a.c"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_ne!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["functions"][0]["name"], "a");
}
