//! The settings parser, and the settings named by `package.json`, the README and the docs checked against
//! the declaration.

use super::*;
use foe_analysis::config::FtzMode;
use foe_analysis::findings::ShownAs;
use serde_json::json;

fn repo_file(rel: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../").to_string() + rel;
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn defaults_when_empty() {
    let (c, w) = ServerConfig::from_json(&Value::Null);
    assert!(w.is_empty());
    assert_eq!(*c.analysis(), AnalysisConfig::default());
    assert!(c.enable());
    assert_eq!(c.debounce, Duration::from_millis(150));
    assert!(c.docs_url.starts_with("file://"));
}

#[test]
fn reads_wrapped_and_bare_sections() {
    let settings = json!({"foe": {"flagsPPrime": "-O3 -ffast-math", "radius": 5, "reportPlainExceptions": true,
        "clang": null, "debounceMs": 50, "ftzDaz": "off", "extremeInputsSeverity": "off"}});
    let (c, w) = ServerConfig::from_json(&settings);
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(c.analysis().flags_p_prime, vec!["-O3", "-ffast-math"]);
    assert_eq!(c.analysis().radius, 5);
    assert!(c.analysis().report_plain_exceptions);
    assert_eq!(c.analysis().clang, AnalysisConfig::default().clang);
    assert_eq!(c.debounce, Duration::from_millis(50));
    assert_eq!(c.analysis().ftz_daz, FtzMode::Off);
    assert_eq!(c.findings().extreme_inputs_severity, ShownAs::Off);

    let (bare, _) = ServerConfig::from_json(&json!({"flagsP": ["-O1"], "enable": false}));
    assert_eq!(bare.analysis().flags_p, vec!["-O1"]);
    assert!(!bare.enable());
}

#[test]
fn wrong_types_and_unknown_keys_warn_and_keep_defaults() {
    let (c, w) = ServerConfig::from_json(
        &json!({"radius": "three", "enable": 1, "flagsP": [1], "pFlags": "-O1", "path": "foe",
                "trace": {"server": "off"}}),
    );
    assert_eq!(w.len(), 4, "{w:?}");
    assert!(
        w.iter()
            .any(|w| w.starts_with("foe.pFlags: unknown setting")),
        "{w:?}"
    );
    assert_eq!(c.analysis().radius, 3);
    assert!(c.enable());
    assert_eq!(c.settings, Settings::default());
}

#[test]
fn empty_values_ask_for_a_pull() {
    assert!(!ServerConfig::is_settings_value(&Value::Null));
    assert!(!ServerConfig::is_settings_value(&json!({})));
    assert!(!ServerConfig::is_settings_value(&json!({"foe": {}})));
    assert!(ServerConfig::is_settings_value(
        &json!({"foe": {"radius": 2}})
    ));
}

/// The default an editor should declare for a key: the server's, or null where it depends on the machine.
fn declared_default(key: &str) -> Value {
    if MACHINE_DEFAULTS.contains(&key) {
        Value::Null
    } else {
        Settings::defaults()[key].clone()
    }
}

#[test]
fn package_json_declares_exactly_the_settings_with_their_defaults() {
    let manifest: Value = serde_json::from_str(&repo_file("package.json")).unwrap();
    let properties = manifest["contributes"]["configuration"]["properties"]
        .as_object()
        .expect("contributes.configuration.properties");
    let mut problems = vec![];
    for (name, property) in properties {
        let key = name.strip_prefix("foe.").unwrap_or(name);
        let client_key = key.split('.').next().unwrap_or(key);
        if CLIENT_KEYS.contains(&client_key) {
            continue;
        }
        if !Settings::defaults().contains_key(key) {
            problems.push(format!(
                "package.json declares {name}, which the server does not read"
            ));
        } else if property["default"] != declared_default(key) {
            problems.push(format!(
                "package.json: {name} defaults to {}, the server to {}",
                property["default"],
                declared_default(key)
            ));
        }
    }
    for key in Settings::defaults().keys() {
        if !properties.contains_key(&format!("foe.{key}")) {
            problems.push(format!("package.json does not declare foe.{key}"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_readme_table_lists_every_setting_with_its_default() {
    let readme = repo_file("README.md");
    let mut seen = vec![];
    let mut problems = vec![];
    for line in readme.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(key) = cells
            .get(1)
            .and_then(|c| c.strip_prefix("`foe."))
            .and_then(|c| c.strip_suffix('`'))
        else {
            continue;
        };
        seen.push(key.to_string());
        let Some(default) = Settings::defaults().get(key).cloned() else {
            problems.push(format!(
                "README names foe.{key}, which the server does not read"
            ));
            continue;
        };
        if MACHINE_DEFAULTS.contains(&key) {
            continue;
        }
        let written = cells.get(2).copied().unwrap_or("");
        let parsed = written
            .strip_prefix('`')
            .and_then(|w| w.strip_suffix('`'))
            .and_then(|w| serde_json::from_str::<Value>(w).ok());
        if parsed.as_ref() != Some(&default) {
            problems.push(format!(
                "README: foe.{key} defaults to {written}, the server to `{default}`"
            ));
        }
    }
    for key in Settings::defaults().keys() {
        if !seen.contains(key) {
            problems.push(format!(
                "the README's settings table has no row for foe.{key}"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_docs_name_only_settings_the_server_reads() {
    let manifest: Value = serde_json::from_str(&repo_file("package.json")).unwrap();
    let commands: Vec<String> = manifest["contributes"]["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["command"].as_str().map(str::to_string))
        .chain(["foe.analyse".to_string()])
        .collect();
    let mut problems = vec![];
    for file in [
        "README.md",
        "docs/diagnostics.md",
        "docs/editors.md",
        "editors/vscode/README.md",
    ] {
        let text = repo_file(file);
        for piece in text.split("`foe.").skip(1) {
            let Some(name) = piece.split('`').next() else {
                continue;
            };
            let key = name.split_whitespace().next().unwrap_or(name);
            // Placeholders (`foe.<key>`, `foe.*`) name no setting.
            if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') || key.is_empty() {
                continue;
            }
            if commands.contains(&format!("foe.{key}"))
                || CLIENT_KEYS.contains(&key.split('.').next().unwrap_or(key))
            {
                continue;
            }
            if !Settings::defaults().contains_key(key) {
                problems.push(format!(
                    "{file} names `foe.{key}`, which the server does not read"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn package_json_bounds_are_the_declared_bounds_and_out_of_range_values_are_refused() {
    use foe_analysis::config::AnalysisConfig;
    let manifest: Value = serde_json::from_str(&repo_file("package.json")).unwrap();
    let properties = manifest["contributes"]["configuration"]["properties"]
        .as_object()
        .unwrap();
    let mut problems = vec![];
    for (name, p) in properties {
        let key = name.trim_start_matches("foe.");
        let declared = AnalysisConfig::BOUNDS.iter().find(|(k, _, _)| *k == key);
        let (min, max) = (p["minimum"].as_u64(), p["maximum"].as_u64());
        match declared {
            Some((_, dmin, dmax)) if min != Some(*dmin) || max != *dmax => problems.push(format!(
                "{name}: package.json allows {min:?}..{max:?}, the engine {dmin}..{dmax:?}"
            )),
            None if min.is_some_and(|m| m > 0) || max.is_some() => {
                problems.push(format!("{name}: bounds in package.json only"))
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    let mut settings = Settings::default();
    let refused = settings.set("memoryLimitMib", &json!(16)).unwrap_err();
    assert!(refused.contains("below its minimum 64"), "{refused}");
    assert_eq!(settings.analysis.memory_limit_mib, 2048);
    assert!(settings.set("accuracyBits", &json!(65)).is_err());
    assert!(settings.set("threads", &json!(0)).is_ok());
    assert!(settings.set("radius", &json!(0)).is_ok());
}
