//! How findings are presented: which are shown and at which severity. Read by every front end.

use serde::{Deserialize, Serialize};

/// The severity of a finding, as every front end shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
    Information,
    Hint,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Information => "information",
            Severity::Hint => "hint",
        }
    }
}

/// A severity a setting may choose, or `off` to hide those findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShownAs {
    Warning,
    Information,
    Hint,
    Off,
}

impl ShownAs {
    pub fn severity(self) -> Option<Severity> {
        match self {
            ShownAs::Warning => Some(Severity::Warning),
            ShownAs::Information => Some(Severity::Information),
            ShownAs::Hint => Some(Severity::Hint),
            ShownAs::Off => None,
        }
    }
}

/// Presentation settings; each field documents its default.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FindingOptions {
    /// Severity of findings whose inputs all lie outside the function's declared domain
    /// (`// foe: assume`); `warning`, `information`, `hint` or `off`; default `information`.
    pub outside_domain_severity: ShownAs,
    /// Severity of findings that need extreme inputs only (a magnitude beyond 2^±64, 2^±32 for float:
    /// overflow near the largest double, subnormals, infinities); `warning`, `information`, `hint` or
    /// `off`; default `hint`.
    pub extreme_inputs_severity: ShownAs,
    /// Severity of findings that need a NaN or infinite input, in a function that never tests for NaN or
    /// infinity itself (where it does, they are warnings: it expects such values); `warning`, `information`,
    /// `hint` or `off`; default `hint`.
    pub non_finite_inputs_severity: ShownAs,
    /// Show a hint on each function foe did not analyse, with the reason; default true.
    pub report_skipped: bool,
}

impl Default for FindingOptions {
    fn default() -> Self {
        FindingOptions {
            outside_domain_severity: ShownAs::Information,
            extreme_inputs_severity: ShownAs::Hint,
            non_finite_inputs_severity: ShownAs::Hint,
            report_skipped: true,
        }
    }
}
