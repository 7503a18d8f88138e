//! The compilation database's tests: one read answers every file, odd entries read as ever, one read per analysis.

use super::*;
use crate::config::AnalysisConfig;
use crate::pipeline::{self, AnalysisRequest, CancelToken, NoCache, NoProgress};

/// A new directory holding `files` (name, text) and a database of `entries` (name, arguments), and the
/// database's path.
fn project(files: &[(&str, &str)], entries: &[(&str, &[&str])]) -> (tempfile::TempDir, PathBuf) {
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let entries: Vec<serde_json::Value> = entries
        .iter()
        .map(|(file, arguments)| {
            serde_json::json!({"directory": dir.path(), "file": file, "arguments": arguments})
        })
        .collect();
    let db = dir.path().join("compile_commands.json");
    std::fs::write(&db, serde_json::Value::from(entries).to_string()).unwrap();
    (dir, db)
}

#[test]
fn one_read_answers_for_every_file_of_the_database() {
    let (dir, db) = project(
        &[("a.c", "int a;"), ("b.c", "int b;"), ("c.c", "int c;")],
        &[
            ("a.c", &["cc", "-DA", "-O2", "-c", "a.c"]),
            ("b.c", &["cc", "-Iinc", "-c", "b.c"]),
            ("c.c", &["cc", "-DC", "-fplugin=x.so", "-c", "c.c"]),
        ],
    );
    let d = dir.path();
    let loaded = CompileDb::find(&d.join("a.c"), None).unwrap();
    assert_eq!(canonical(loaded.path()), canonical(&db));
    // The entries come from the database as read: gone from the disk, it still answers for every file.
    std::fs::remove_file(&db).unwrap();
    let a = loaded.entry(&d.join("a.c")).unwrap();
    assert_eq!(a.flags.meaning, ["-DA"]);
    assert_eq!(a.flags.build, ["-O2"]);
    assert_eq!(a.args, ["cc", "-DA", "-O2", "-c", "a.c"]);
    assert_eq!(a.directory, d);
    let b = loaded.entry(&d.join("b.c")).unwrap();
    assert_eq!(b.flags.meaning, [format!("-I{}/inc", d.display())]);
    let c = loaded.entry(&d.join("c.c")).unwrap();
    assert_eq!(c.flags.meaning, ["-DC"]);
    assert_eq!(c.flags.dropped, ["-fplugin=x.so"]);
    assert!(loaded.entry(&d.join("d.c")).is_none());
    assert_eq!(
        loaded.units_besides(&d.join("a.c")),
        [canonical(&d.join("b.c")), canonical(&d.join("c.c"))]
    );
    assert_eq!(loads(loaded.path()), 1);
}

#[test]
fn odd_entries_are_read_as_before() {
    let (dir, db) = project(
        &[("a.c", "int a;"), ("b.c", "int b;"), ("c.c", "int c;")],
        &[],
    );
    let d = dir.path();
    let entries = serde_json::json!([
        {"directory": d, "file": "a.c", "command": "cc -DFIRST -c a.c"},
        {"directory": d, "file": "a.c", "command": "cc -DSECOND -c a.c"},
        {"directory": d, "file": "c.c"},
        {"directory": d, "file": 3},
        {"directory": d, "file": "b.c", "command": "cc -DB -c b.c"},
    ]);
    std::fs::write(&db, entries.to_string()).unwrap();
    let loaded = CompileDb::find(&d.join("a.c"), Some(&db)).unwrap();
    // The first entry of a file is its entry.
    assert_eq!(
        loaded.entry(&d.join("a.c")).unwrap().flags.meaning,
        ["-DFIRST"]
    );
    // An entry without a command is no entry; nor is one after an entry without a file.
    assert!(loaded.entry(&d.join("c.c")).is_none());
    assert!(CompileDb::find(&d.join("c.c"), Some(&db)).is_none());
    assert!(loaded.entry(&d.join("b.c")).is_none());
    assert!(CompileDb::find(&d.join("b.c"), Some(d)).is_none());
    // Every file the database names is a unit to link.
    assert_eq!(
        loaded.units_besides(&d.join("a.c")),
        [canonical(&d.join("c.c")), canonical(&d.join("b.c"))]
    );
    for text in ["not json", r#"{"directory": "/"}"#, ""] {
        std::fs::write(&db, text).unwrap();
        assert!(
            CompileDb::find(&d.join("a.c"), Some(&db)).is_none(),
            "{text}"
        );
    }
}

#[test]
fn an_analysis_reads_its_database_once() {
    // The file's flags, its dropped flags, the unit it links and the harness's build of that unit all come from
    // one read.
    let a = "double scale(double);\ndouble f(double x) { return scale(x) * 0.5; }\n";
    let (dir, db) = project(
        &[
            ("a.c", a),
            ("b.c", "double scale(double x) { return x * FACTOR; }\n"),
        ],
        &[
            ("a.c", &["cc", "-fplugin=x.so", "-c", "a.c"]),
            ("b.c", &["cc", "-DFACTOR=3.0", "-c", "b.c"]),
        ],
    );
    let config = AnalysisConfig {
        compile_commands: Some(db.clone()),
        ..AnalysisConfig::default()
    };
    let file = dir.path().join("a.c");
    let request = AnalysisRequest {
        path: &file,
        text: a,
        config: &config,
        only_functions: None,
    };
    let report =
        pipeline::analyse(&request, &NoCache, &NoProgress, &CancelToken::default()).unwrap();
    let b = canonical(&dir.path().join("b.c"));
    assert_eq!(report.linked_units, [b.display().to_string()]);
    assert_eq!(report.dropped_flags, ["-fplugin=x.so"]);
    assert_eq!(loads(&db), 1);
}

#[test]
fn a_database_named_relative_to_the_working_directory_has_its_own_directory() {
    // `--compile-commands compile_commands.json`: the parent of a bare name is the empty path, under which no unit
    // lies, so every unit seemed of the file's own library and another library's units were linked.
    let (dir, db) = project(&[("a.c", "int a;")], &[("a.c", &["cc", "-c", "a.c"])]);
    let cwd = std::env::current_dir().unwrap();
    let mut relative: PathBuf = cwd.components().skip(1).map(|_| "..").collect();
    relative.push(db.strip_prefix("/").unwrap());
    assert!(relative.is_relative());
    let loaded = CompileDb::load(&relative).unwrap();
    assert_eq!(loaded.path(), canonical(&db));
    assert_eq!(
        loaded.path().parent(),
        Some(canonical(dir.path()).as_path())
    );
}
