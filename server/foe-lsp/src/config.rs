//! The settings, declared once: [`Settings`] is the `foe` section of an editor's settings (camelCase JSON),
//! the keys of `foe check --set KEY=VALUE`, and the source the tests check `package.json`, the README and
//! the docs against.
//!
//! [`Settings`] holds the server's own keys and flattens the engine's [`FindingOptions`] (presentation) and
//! [`AnalysisConfig`] (analysis), so a field added to either is a setting everywhere at once. Settings come
//! from `initializationOptions` at start-up and from `workspace/didChangeConfiguration` (pushed as
//! `{"foe": {...}}`, or pulled with `workspace/configuration` when the client sends no value). Parsing is
//! per key and lenient: a value of the wrong type and an unknown key are reported and otherwise ignored,
//! `null` (VS Code's value for unset settings) or an empty string means the default, and a flags setting may
//! be one string split on whitespace.

use foe_analysis::config::AnalysisConfig;
use foe_analysis::findings::FindingOptions;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::time::Duration;

/// Every setting, with its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Settings {
    /// Analyse documents at all; default true. When false, diagnostics are cleared and nothing runs.
    pub enable: bool,
    /// Delay between the last edit and the analysis of a changed document, in ms; default 150.
    pub debounce_ms: u64,
    /// Show a first look at a file (ordinary, special and sampled inputs, no solver, nothing confirmed yet) while
    /// its analysis runs, when the analysis takes longer; default true.
    pub first_look: bool,
    /// Base of the diagnostics' `codeDescription.href` (the code's anchor is appended); default null: a
    /// `file://` URL of `docs/diagnostics.md` in the source tree the server was built from.
    pub docs_url: Option<String>,
    #[serde(flatten)]
    pub findings: FindingOptions,
    #[serde(flatten)]
    pub analysis: AnalysisConfig,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enable: true,
            debounce_ms: 150,
            first_look: true,
            docs_url: None,
            findings: FindingOptions::default(),
            analysis: AnalysisConfig::default(),
        }
    }
}

/// Keys an editor's settings section holds for the editor itself (VS Code's `foe.path`, `foe.trace.server`):
/// read by the client, accepted silently by the server.
pub const CLIENT_KEYS: [&str; 2] = ["path", "trace"];

/// Settings whose default depends on the machine (the clang found on PATH, the number of cores, where the
/// source tree is): editors leave them unset (`null`).
pub const MACHINE_DEFAULTS: [&str; 3] = ["clang", "threads", "docsUrl"];

impl Settings {
    /// Every setting's key and default, in declaration order.
    pub fn defaults() -> Map<String, Value> {
        match serde_json::to_value(Settings::default()) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        }
    }

    /// The current value of one key.
    fn get(&self, key: &str) -> Value {
        match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m.get(key).cloned().unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    /// Applies one key; returns a warning when the key is unknown or the value does not fit it.
    pub fn set(&mut self, key: &str, value: &Value) -> Result<(), String> {
        let defaults = Settings::defaults();
        let Some(default) = defaults.get(key) else {
            return Err(format!("foe.{key}: unknown setting"));
        };
        let value = match value {
            Value::Null => default.clone(),
            Value::String(s) if s.trim().is_empty() => default.clone(),
            // Flags: one string split on whitespace.
            Value::String(s) if default.is_array() => {
                Value::Array(s.split_whitespace().map(Value::from).collect())
            }
            Value::String(s) => Value::String(s.trim().to_string()),
            other => other.clone(),
        };
        let mut all = match serde_json::to_value(&*self) {
            Ok(Value::Object(m)) => m,
            _ => return Err("settings do not serialise".into()),
        };
        all.insert(key.to_string(), value.clone());
        // `threads` 0 means the default (the number of cores), as before.
        let bounds = match value.as_u64() {
            Some(0) if key == "threads" => None,
            Some(n) => AnalysisConfig::out_of_bounds(key, n),
            None => None,
        };
        if let Some(why) = bounds {
            return Err(format!(
                "foe.{key}: {why} (default {default}); kept {}",
                self.get(key)
            ));
        }
        match serde_json::from_value::<Settings>(Value::Object(all)) {
            Ok(mut s) => {
                if s.analysis.threads == 0 {
                    s.analysis.threads = AnalysisConfig::default().threads;
                }
                *self = s;
                Ok(())
            }
            Err(e) => Err(format!(
                "foe.{key}: {value} does not fit (default {default}): {e}"
            )),
        }
    }
}

/// Everything the server reads from the settings, resolved against the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub settings: Settings,
    /// `settings.debounce_ms` as a duration.
    pub debounce: Duration,
    /// `settings.docs_url`, or the default page.
    pub docs_url: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig::from_settings(Settings::default())
    }
}

/// The settings page in the source tree this binary was built from.
fn default_docs_url() -> String {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/diagnostics.md");
    let path = std::fs::canonicalize(docs).unwrap_or_else(|_| PathBuf::from(docs));
    format!("file://{}", path.display())
}

impl ServerConfig {
    fn from_settings(settings: Settings) -> ServerConfig {
        ServerConfig {
            debounce: Duration::from_millis(settings.debounce_ms),
            docs_url: settings.docs_url.clone().unwrap_or_else(default_docs_url),
            settings,
        }
    }

    pub fn enable(&self) -> bool {
        self.settings.enable
    }

    pub fn analysis(&self) -> &AnalysisConfig {
        &self.settings.analysis
    }

    pub fn findings(&self) -> &FindingOptions {
        &self.settings.findings
    }

    /// Reads settings given either as the `foe` object itself or wrapped as `{"foe": {...}}`; returns the
    /// configuration and one warning per ignored key or value.
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
        let mut warnings = vec![];
        let Some(obj) = section(value) else {
            return warnings;
        };
        let mut settings = self.settings.clone();
        for (key, v) in obj {
            if CLIENT_KEYS.contains(&key.as_str()) {
                continue;
            }
            if let Err(w) = settings.set(key, v) {
                warnings.push(w);
            }
        }
        *self = ServerConfig::from_settings(settings);
        warnings
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

#[cfg(test)]
mod tests;
