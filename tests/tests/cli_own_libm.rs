//! A library that defines C library names (as Cephes defines `sqrt`, `exp`): its files' builds run its own
//! definitions, in the worker and the shipped binaries alike, while another library of the same database keeps
//! libm's; data no file defines is unreadable, so runs that read it are not compared.

use foe_e2e::foe_binary;
use serde_json::Value;
use std::process::Command;

/// `lib/` defines `sqrt` (divide-by-zero above 100) and calls it; `other/` calls `sqrt` too; `lib/reads.c` reads
/// `SCALE`, which no file defines.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let calls = "#include <math.h>\ndouble g(double x) {\n  double y = x * 1e306;\n  return sqrt(x) + y;\n}\n";
    let files = [
        (
            "lib/mysqrt.c",
            "double sqrt(double x) {\n  if (x > 100.0)\n    return x / (x - x);\n  return x;\n}\n".to_string(),
        ),
        ("lib/calls.c", calls.to_string()),
        ("other/calls.c", calls.replace("double g(", "double h(")),
        (
            "lib/reads.c",
            "extern double SCALE;\ndouble k(double x) {\n  double y = x * 1e306;\n  return x > 1 ? y * SCALE : y;\n}\n"
                .to_string(),
        ),
    ];
    let mut entries = Vec::new();
    for (path, text) in &files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        entries.push(serde_json::json!({
            "directory": path.parent().unwrap(),
            "file": path.file_name().unwrap().to_str().unwrap(),
            "command": "cc -c x.c",
        }));
    }
    std::fs::write(
        dir.path().join("compile_commands.json"),
        serde_json::to_string(&entries).unwrap(),
    )
    .unwrap();
    dir
}

/// The report of the file whose path ends in `suffix`.
fn report<'a>(all: &'a Value, suffix: &str) -> &'a Value {
    all["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"].as_str().unwrap().ends_with(suffix))
        .map(|f| &f["report"])
        .unwrap_or_else(|| panic!("no {suffix} in {all:#}"))
}

fn kinds(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().map(|k| k.as_str().unwrap()).collect())
        .unwrap_or_default()
}

#[test]
fn a_library_s_own_sqrt_is_the_program_s_and_unknown_data_is_not_read() {
    let dir = project();
    let out = Command::new(foe_binary())
        .args([
            "check",
            "-p",
            ".",
            "--no-cache",
            "-j",
            "1",
            "--format",
            "json",
        ])
        .args(["lib/calls.c", "other/calls.c", "lib/reads.c"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let all: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));

    // lib/calls.c links lib's sqrt: P calls it (divide-by-zero above 100), P' computes sqrtsd; the shipped
    // binaries show it. Its negative inputs raise nothing in lib's sqrt, invalid in P''s instruction.
    let lib = report(&all, "lib/calls.c");
    assert!(
        kinds(&lib["linked_units"])
            .iter()
            .any(|u| u.ends_with("lib/mysqrt.c")),
        "{lib:#}"
    );
    let g = &lib["functions"][0];
    let confirmed: Vec<&Value> = g["divergences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["confirmation"] == "confirmed")
        .collect();
    assert!(
        confirmed
            .iter()
            .any(|d| kinds(&d["shipped_p"]).contains(&"divide-by-zero")
                && !kinds(&d["shipped_p_prime"]).contains(&"divide-by-zero")),
        "{g:#}"
    );
    assert!(
        confirmed
            .iter()
            .any(|d| !kinds(&d["shipped_p"]).contains(&"invalid")
                && kinds(&d["shipped_p_prime"]).contains(&"invalid")),
        "{g:#}"
    );

    // other/calls.c is another library: libm's sqrt, which raises nothing P' does not.
    let other = report(&all, "other/calls.c");
    assert!(
        other["linked_units"]
            .as_array()
            .is_none_or(|u| u.is_empty()),
        "{other:#}"
    );
    assert!(
        other["functions"][0]["divergences"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| !kinds(&d["shipped_p"]).contains(&"divide-by-zero")),
        "{other:#}"
    );

    // lib/reads.c: runs that read SCALE crash (a zero would have been computed with), and say so.
    let k = &report(&all, "lib/reads.c")["functions"][0];
    assert_eq!(k["status"], "partial", "{k:#}");
    assert!(
        kinds(&k["reason_codes"]).contains(&"runs_incomplete"),
        "{k:#}"
    );
    assert!(
        k["reason"]
            .as_str()
            .unwrap()
            .contains("read SCALE, which no file defines"),
        "{k:#}"
    );
    assert!(
        k["divergences"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["confirmation"] != "confirmed"),
        "{k:#}"
    );
}
