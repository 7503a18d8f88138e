//! What one execution of one build produced, typed until a person reads it: how it ended ([`RunEnd`]), the value it
//! returned and the values it wrote through its pointer parameters ([`Output`]), and the one renderer of them that
//! the CLI, messages and hovers share.

use crate::scalar::{Scalar, ScalarType};
use serde::{Deserialize, Serialize};

/// A value a run wrote through a pointer parameter, named as C names it (`*err`, `out[2]`, `r->y`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub name: String,
    pub value: Scalar,
    /// Where it lives: the pointer parameter (its index among the C parameters), the byte offset into what it
    /// points to, and the C type there (how the shipped binaries' bytes are read back).
    pub param: u32,
    pub offset: u32,
    #[serde(rename = "ctype")]
    pub ty: ScalarType,
}

/// How one execution of one build ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunEnd {
    Returned {
        /// The return value (`None` for `void` and types foe does not read).
        value: Option<Scalar>,
        /// What the run left behind its pointer parameters where either build changed it, in buffer order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outputs: Vec<Output>,
    },
    Crashed {
        signal: i32,
        name: String,
    },
    TimedOut {
        limit_ms: u64,
    },
    /// The run reached a call foe does not execute (no definition, I/O, allocation, exit: an error reporter
    /// such as `gsl_error`) and stopped cleanly there; its trace holds the events before the call.
    Stopped {
        callee: String,
        line: Option<u32>,
        column: Option<u32>,
    },
}

impl Default for RunEnd {
    fn default() -> RunEnd {
        RunEnd::Returned {
            value: None,
            outputs: vec![],
        }
    }
}

impl RunEnd {
    /// A run that returned `value` with no outputs.
    pub fn returned(value: Option<Scalar>) -> RunEnd {
        RunEnd::Returned {
            value,
            outputs: vec![],
        }
    }

    /// The return value of a run that returned.
    pub fn value(&self) -> Option<Scalar> {
        match self {
            RunEnd::Returned { value, .. } => *value,
            _ => None,
        }
    }

    /// The outputs of a run that returned (empty otherwise).
    pub fn outputs(&self) -> &[Output] {
        match self {
            RunEnd::Returned { outputs, .. } => outputs,
            _ => &[],
        }
    }

    /// The output named `name`, if the run returned and wrote it.
    pub fn output(&self, name: &str) -> Option<Scalar> {
        self.outputs()
            .iter()
            .find(|o| o.name == name)
            .map(|o| o.value)
    }

    fn stopped_at(callee: &str, line: Option<u32>, column: Option<u32>) -> String {
        let at = match (line, column) {
            (Some(l), Some(c)) => format!(" (line {l}:{c})"),
            (Some(l), None) => format!(" (line {l})"),
            _ => String::new(),
        };
        format!("stopped at `{callee}`{at}")
    }

    /// Everything, exactly (`0x1p+0 (1.0e0)`, `returned`, `crashed (SIGSEGV)`, `timed out after 1000 ms`,
    /// `stopped at `gsl_error` (line 12:5)`): the CLI's and the trace command's form.
    pub fn describe(&self) -> String {
        match self {
            RunEnd::Returned { value, outputs } => {
                let mut s = value.map_or_else(|| "returned".to_string(), Scalar::exact);
                for o in outputs {
                    s.push_str(&format!("; {} = {}", o.name, o.value.exact()));
                }
                s
            }
            RunEnd::Crashed { name, .. } => format!("crashed ({name})"),
            RunEnd::TimedOut { limit_ms } => format!("timed out after {limit_ms} ms"),
            RunEnd::Stopped {
                callee,
                line,
                column,
            } => RunEnd::stopped_at(callee, *line, *column),
        }
    }

    /// What a caller observes, short, as a verb phrase (`returns 1.27e308`, `crashes (SIGFPE)`, `stops at
    /// `gsl_error``, `times out`); `None` for a `void` function that returned.
    pub fn observed(&self) -> Option<String> {
        match self {
            RunEnd::Returned { value, .. } => value.map(|v| format!("returns {}", v.short())),
            RunEnd::Crashed { name, .. } => Some(format!("crashes ({name})")),
            RunEnd::TimedOut { limit_ms } => Some(format!("does not return within {limit_ms} ms")),
            RunEnd::Stopped { callee, .. } => Some(format!("stops at `{callee}`")),
        }
    }

    /// The short form for a trace line: `returns `1.27e308``, `crashed (SIGFPE)`, `stopped at `gsl_error``.
    pub fn short(&self) -> Option<String> {
        match self {
            RunEnd::Returned { value, .. } => value.map(|v| format!("returns `{}`", v.short())),
            RunEnd::Crashed { name, .. } => Some(format!("crashed ({name})")),
            RunEnd::TimedOut { limit_ms } => Some(format!("timed out after {limit_ms} ms")),
            RunEnd::Stopped { callee, .. } => Some(format!("stopped at `{callee}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_run_is_never_read_as_a_return_value() {
        let stopped = RunEnd::Stopped {
            callee: "gsl_error".into(),
            line: Some(1279),
            column: Some(9),
        };
        assert_eq!(stopped.observed().as_deref(), Some("stops at `gsl_error`"));
        assert_eq!(stopped.value(), None);
        let ret = RunEnd::returned(Some(Scalar::F64(1.27e308)));
        assert_eq!(ret.observed().as_deref(), Some("returns 1.27e308"));
    }
}
