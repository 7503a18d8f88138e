//! Bad input never crashes foe and loses nothing: broken files, empty files, huge files, solver time-outs.

use foe_e2e::foe;
use serde_json::Value;

fn check_json(path: &std::path::Path, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["check", "--format", "json"];
    args.extend_from_slice(extra);
    let p = path.to_str().unwrap();
    args.push(p);
    let out = foe(&args);
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_file_that_does_not_compile_gives_clangs_error_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.c");
    std::fs::write(&file, "double f(double x) {\n  return x +;\n}\n").unwrap();
    let (code, _, stderr) = check_json(&file, &[]);
    assert_eq!(code, 2);
    assert!(stderr.contains("broken.c:2:"), "{stderr}");
    assert!(stderr.contains("error:"), "{stderr}");
}

#[test]
fn a_missing_file_is_an_error_not_a_crash() {
    let out = foe(&["check", "/nonexistent/nothing.c"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

#[test]
fn a_thousand_functions_are_all_reported() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("many.c");
    let mut text = String::new();
    for i in 0..1000 {
        text.push_str(&format!(
            "double f{i}(double x) {{ return x * {}.5; }}\n",
            i % 7 + 1
        ));
    }
    std::fs::write(&file, text).unwrap();
    // Budgets large enough for a loaded machine: this is about every function being reported, not speed.
    let (code, json, stderr) = check_json(&file, &["--radius", "1", "--file-budget-ms", "3000000"]);
    assert!(code == 0 || code == 1, "status {code}: {stderr}");
    let functions = json["functions"].as_array().expect("a report");
    assert_eq!(functions.len(), 1000);
    assert!(
        functions.iter().all(|f| f["status"] == "analysed"),
        "every function is analysed"
    );
}

#[test]
fn solver_time_outs_are_reported_and_the_rest_goes_on() {
    let file = foe_e2e::repo_root().join("fixtures/bench/jetengine.c");
    let (code, json, stderr) = check_json(&file, &["--solver-timeout-ms", "1"]);
    assert!(code == 0 || code == 1, "status {code}: {stderr}");
    let f = &json["functions"][0];
    let timeouts = f["solver_timeouts"].as_u64().unwrap();
    if timeouts > 0 {
        // Queries given up on make the analysis partial, and the report says so.
        assert_eq!(f["status"], "partial", "{f}");
        assert!(f["reason"].as_str().unwrap().contains("gave up"), "{f}");
        assert!(
            f["reason_codes"].to_string().contains("solver_timeouts"),
            "{f}"
        );
    } else {
        assert_eq!(f["status"], "analysed", "{f}");
    }
    assert!(f["executions"].as_u64().unwrap() > 0, "{f}");
}

#[test]
fn unknown_function_is_an_error() {
    let file = foe_e2e::repo_root().join("fixtures/bench/identity.c");
    let out = foe(&["check", "--function", "nope", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sarif_output_is_valid_shape() {
    let file = foe_e2e::repo_root().join("fixtures/bench/identity.c");
    let out = foe(&["check", "--format", "sarif", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "identity diverges");
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert!(!results.is_empty());
    assert!(
        results[0]["locations"][0]["physicalLocation"]["region"]["startLine"]
            .as_u64()
            .unwrap()
            >= 3
    );
}
