//! The server's settings: the `foe` section of the client's settings (camelCase JSON) ↔ [`AnalysisConfig`].
//!
//! Settings come from `initializationOptions` at start-up and from `workspace/didChangeConfiguration` (pushed
//! as `{"foe": {...}}`, or pulled with `workspace/configuration` when the client sends no value). Parsing is
//! lenient: an unknown key is ignored, a value of the wrong type is reported as a warning and the default kept,
//! and `null` means "use the default" (VS Code sends `null` for unset settings).

use foe_analysis::config::{AnalysisConfig, FtzMode};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::time::Duration;

/// Everything the server reads from the settings, resolved against the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Analyse documents at all; default true. When false, diagnostics are cleared and nothing runs.
    pub enable: bool,
    /// Delay between the last edit and the analysis of a changed document; default 150 ms.
    pub debounce: Duration,
    /// Publish a Hint on the declaration of each function the engine skipped, with its reason; default false.
    pub report_skipped: bool,
    /// Base of the diagnostics' `codeDescription.href` (the code's anchor is appended); default a `file://`
    /// URL of `docs/diagnostics.md` in the source tree the server was built from.
    pub docs_url: String,
    /// The engine's settings (`report_plain_exceptions` doubles as "publish the plain build's exceptions").
    pub analysis: AnalysisConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            enable: true,
            debounce: Duration::from_millis(150),
            report_skipped: false,
            docs_url: default_docs_url(),
            analysis: AnalysisConfig::default(),
        }
    }
}

/// The settings page in the source tree this binary was built from.
fn default_docs_url() -> String {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/diagnostics.md");
    let path = std::fs::canonicalize(docs).unwrap_or_else(|_| PathBuf::from(docs));
    format!("file://{}", path.display())
}

impl ServerConfig {
    /// Reads settings given either as the `foe` object itself or wrapped as `{"foe": {...}}`; returns the
    /// configuration and one warning per ignored value.
    pub fn from_json(value: &Value) -> (ServerConfig, Vec<String>) {
        let mut config = ServerConfig::default();
        let warnings = config.update(value);
        (config, warnings)
    }

    /// Whether `value` holds settings at all (`null` or an empty object ask the server to pull them).
    pub fn is_settings_value(value: &Value) -> bool {
        section(value).is_some_and(|m| !m.is_empty())
    }

    /// Applies the keys present in `value` over the current configuration.
    pub fn update(&mut self, value: &Value) -> Vec<String> {
        let mut r = Reader { warnings: vec![] };
        let Some(obj) = section(value) else {
            return r.warnings;
        };
        let a = &mut self.analysis;

        if let Some(v) = r.bool(obj, "enable") {
            self.enable = v;
        }
        if let Some(v) = r.u64(obj, "debounceMs") {
            self.debounce = Duration::from_millis(v);
        }
        if let Some(v) = r.bool(obj, "reportSkipped") {
            self.report_skipped = v;
        }
        if let Some(v) = r.string(obj, "docsUrl") {
            self.docs_url = v;
        }
        if let Some(v) = r.string(obj, "clang") {
            a.clang = PathBuf::from(v);
        }
        if let Some(v) = r.flags(obj, "flagsP") {
            a.flags_p = v;
        }
        if let Some(v) = r.flags(obj, "flagsPPrime") {
            a.flags_p_prime = v;
        }
        if let Some(v) = r.flags(obj, "extraFlags") {
            a.extra_flags = v;
        }
        if let Some(v) = r.u64(obj, "radius") {
            a.radius = v.min(u32::MAX as u64) as u32;
        }
        if let Some(v) = r.u64(obj, "neighbourhoodBudget") {
            a.neighbourhood_budget = v as usize;
        }
        if let Some(v) = r.u64(obj, "unrollBound") {
            a.unroll_bound = v.min(u32::MAX as u64) as u32;
        }
        if let Some(v) = r.u64(obj, "maxPaths") {
            a.max_paths = v as usize;
        }
        if let Some(v) = r.u64(obj, "solverTimeoutMs") {
            a.solver_timeout_ms = v;
        }
        if let Some(v) = r.bool(obj, "fpTheoryFallback") {
            a.fp_theory_fallback = v;
        }
        if let Some(v) = r.u64(obj, "execTimeoutMs") {
            a.exec_timeout_ms = v;
        }
        if let Some(v) = r.u64(obj, "memoryLimitMib") {
            a.memory_limit_mib = v;
        }
        if let Some(v) = r.string(obj, "ftzDaz") {
            match v.as_str() {
                "auto" => a.ftz_daz = FtzMode::Auto,
                "on" => a.ftz_daz = FtzMode::On,
                "off" => a.ftz_daz = FtzMode::Off,
                other => r.warnings.push(format!(
                    "foe.ftzDaz: expected \"auto\", \"on\" or \"off\", got {other:?}"
                )),
            }
        }
        if let Some(v) = r.bool(obj, "reportPlainExceptions") {
            a.report_plain_exceptions = v;
        }
        if let Some(v) = r.u64(obj, "threads") {
            if v > 0 {
                a.threads = v as usize;
            }
        }
        r.warnings
    }
}

/// The `foe` object inside `value`, or `value` itself when it is not wrapped.
fn section(value: &Value) -> Option<&Map<String, Value>> {
    let obj = value.as_object()?;
    match obj.get("foe") {
        Some(Value::Object(inner)) => Some(inner),
        _ => Some(obj),
    }
}

/// Typed access to optional keys, collecting a warning for each value of the wrong type.
struct Reader {
    warnings: Vec<String>,
}

impl Reader {
    fn get<'a>(&mut self, obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
        obj.get(key).filter(|v| !v.is_null())
    }

    fn wrong(&mut self, key: &str, expected: &str, got: &Value) {
        self.warnings
            .push(format!("foe.{key}: expected {expected}, got {got}"));
    }

    fn bool(&mut self, obj: &Map<String, Value>, key: &str) -> Option<bool> {
        let v = self.get(obj, key)?;
        v.as_bool().or_else(|| {
            self.wrong(key, "a boolean", v);
            None
        })
    }

    fn u64(&mut self, obj: &Map<String, Value>, key: &str) -> Option<u64> {
        let v = self.get(obj, key)?;
        v.as_u64().or_else(|| {
            self.wrong(key, "a non-negative integer", v);
            None
        })
    }

    fn string(&mut self, obj: &Map<String, Value>, key: &str) -> Option<String> {
        let v = self.get(obj, key)?;
        match v.as_str() {
            Some(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Some(_) => None,
            None => {
                self.wrong(key, "a string", v);
                None
            }
        }
    }

    /// Flags as an array of strings, or one string split on whitespace.
    fn flags(&mut self, obj: &Map<String, Value>, key: &str) -> Option<Vec<String>> {
        let v = self.get(obj, key)?;
        match v {
            Value::String(s) => Some(s.split_whitespace().map(str::to_string).collect()),
            Value::Array(items) if items.iter().all(Value::is_string) => Some(
                items
                    .iter()
                    .filter_map(|i| i.as_str())
                    .map(str::to_string)
                    .collect(),
            ),
            _ => {
                self.wrong(key, "an array of strings or a string", v);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_when_empty() {
        let (c, w) = ServerConfig::from_json(&Value::Null);
        assert!(w.is_empty());
        assert_eq!(c.analysis, AnalysisConfig::default());
        assert!(c.enable);
        assert_eq!(c.debounce, Duration::from_millis(150));
    }

    #[test]
    fn reads_wrapped_and_bare_sections() {
        let settings = json!({"foe": {"flagsPPrime": "-O3 -ffast-math", "radius": 5, "reportPlainExceptions": true,
            "clang": null, "debounceMs": 50, "ftzDaz": "off"}});
        let (c, w) = ServerConfig::from_json(&settings);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.analysis.flags_p_prime, vec!["-O3", "-ffast-math"]);
        assert_eq!(c.analysis.radius, 5);
        assert!(c.analysis.report_plain_exceptions);
        assert_eq!(c.analysis.clang, AnalysisConfig::default().clang);
        assert_eq!(c.debounce, Duration::from_millis(50));
        assert_eq!(c.analysis.ftz_daz, FtzMode::Off);

        let (bare, _) = ServerConfig::from_json(&json!({"flagsP": ["-O1"], "enable": false}));
        assert_eq!(bare.analysis.flags_p, vec!["-O1"]);
        assert!(!bare.enable);
    }

    #[test]
    fn wrong_types_warn_and_keep_defaults() {
        let (c, w) =
            ServerConfig::from_json(&json!({"radius": "three", "enable": 1, "flagsP": [1]}));
        assert_eq!(w.len(), 3, "{w:?}");
        assert_eq!(c.analysis.radius, 3);
        assert!(c.enable);
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
}
