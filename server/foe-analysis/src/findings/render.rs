//! The one renderer of exception traces and run endings, for the CLI (plain text) and for hovers and the trace
//! command (markdown): the same words in each, only the code quoting differs.

use crate::report::{RunEnd, TraceEvent};

/// Plain text (the CLI) or markdown (hovers, the trace command: operations and values in backticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Markdown,
}

impl Style {
    fn code(self, s: &str) -> String {
        match self {
            Style::Plain => s.to_string(),
            Style::Markdown => format!("`{s}`"),
        }
    }
}

/// An operation as C writes it: `fmul` → `*`, `call sqrt` → `sqrt()`, `fdiv <2 x double>` → `/ (vectorised)`;
/// an opcode C has no spelling for stays as it is.
pub fn c_operation(operation: &str) -> String {
    let (base, vectorised) = match operation.split_once(" <") {
        Some((base, _)) => (base, true),
        None => (operation, false),
    };
    let c = match base {
        "fadd" => "+".to_string(),
        "fsub" => "-".to_string(),
        "fmul" => "*".to_string(),
        "fdiv" => "/".to_string(),
        "frem" => "fmod()".to_string(),
        "fneg" => "unary -".to_string(),
        "fcmp" => "comparison".to_string(),
        "fptrunc" => "conversion to float".to_string(),
        "fpext" => "conversion to double".to_string(),
        "fptosi" | "fptoui" => "conversion to an integer".to_string(),
        "sitofp" | "uitofp" => "conversion of an integer".to_string(),
        other => match other.strip_prefix("call ") {
            Some(callee) if callee.starts_with('(') => "an indirect call".to_string(),
            Some(callee) => format!("{callee}()"),
            None => other.to_string(),
        },
    };
    if vectorised {
        format!("{c}, vectorised")
    } else {
        c
    }
}

/// One event: `overflow at 3:16 (*)`, `invalid at line 4 (sqrt())`, `underflow (/, no source line)`.
pub fn event(e: &TraceEvent, style: Style) -> String {
    let op = (!e.operation.is_empty()).then(|| style.code(&c_operation(&e.operation)));
    match (e.line, e.column.filter(|c| *c > 0), op) {
        (Some(l), Some(c), Some(op)) => format!("{} at {l}:{c} ({op})", e.kind),
        (Some(l), Some(c), None) => format!("{} at {l}:{c}", e.kind),
        (Some(l), None, Some(op)) => format!("{} at line {l} ({op})", e.kind),
        (Some(l), None, None) => format!("{} at line {l}", e.kind),
        (None, _, Some(op)) => format!("{} ({op}, no source line)", e.kind),
        (None, _, None) => format!("{} (no source line)", e.kind),
    }
}

/// A trace in one line, at most `limit` events: `overflow at 3:16 (*), … 2 more`, or `no exception`.
pub fn trace_line(trace: &[TraceEvent], limit: usize, style: Style) -> String {
    if trace.is_empty() {
        return "no exception".into();
    }
    let mut parts: Vec<String> = trace.iter().take(limit).map(|e| event(e, style)).collect();
    if trace.len() > limit {
        parts.push(format!("… {} more", trace.len() - limit));
    }
    parts.join(", ")
}

/// How a run ended, after its trace: `returns 0x1p+0 (1.0e0)` (exact, with what it wrote through pointers), or
/// `crashed (SIGSEGV)`, `stopped at `gsl_error` (line 12:5)`, `timed out after 1000 ms`; `None` for a `void` function
/// that returned and wrote nothing.
pub fn ending(end: &RunEnd, style: Style) -> Option<String> {
    match end {
        RunEnd::Returned { value, outputs } => {
            let mut parts = vec![];
            if let Some(v) = value {
                parts.push(format!("returns {}", style.code(&v.exact())));
            }
            for o in outputs {
                parts.push(format!(
                    "{} = {}",
                    style.code(&o.name),
                    style.code(&o.value.exact())
                ));
            }
            (!parts.is_empty()).then(|| parts.join(", "))
        }
        other => Some(other.describe()),
    }
}

/// A run in one line: its trace, then how it ended.
pub fn run_line(trace: &[TraceEvent], end: &RunEnd, limit: usize, style: Style) -> String {
    let mut s = trace_line(trace, limit, style);
    if let Some(e) = ending(end, style) {
        s.push_str("; ");
        s.push_str(&e);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Scalar;
    use crate::types::ExceptionKind;

    #[test]
    fn a_stopped_run_reads_as_a_stop_in_every_style() {
        let stopped = RunEnd::Stopped {
            callee: "gsl_error".into(),
            line: Some(1279),
            column: Some(9),
        };
        for style in [Style::Plain, Style::Markdown] {
            let line = run_line(&[], &stopped, 4, style);
            assert_eq!(line, "no exception; stopped at `gsl_error` (line 1279:9)");
        }
        let ev = TraceEvent {
            kind: ExceptionKind::Overflow,
            line: Some(3),
            column: Some(16),
            operation: "fmul".into(),
        };
        let returned = RunEnd::returned(Some(Scalar::F64(f64::INFINITY)));
        assert_eq!(
            run_line(std::slice::from_ref(&ev), &returned, 4, Style::Plain),
            "overflow at 3:16 (*); returns inf (inf)"
        );
        assert_eq!(
            run_line(&[ev], &returned, 4, Style::Markdown),
            "overflow at 3:16 (`*`); returns `inf (inf)`"
        );
    }
}
