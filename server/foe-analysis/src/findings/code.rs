//! The stable diagnostic codes (one per heading of `docs/diagnostics.md`) and how a divergence gets its code.

use crate::report::{Divergence, DivergenceClass, TraceEvent};
use crate::types::{ExceptionKind, SourceLoc};
use serde::{Serialize, Serializer};

/// Which way a divergence goes for one exception kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The fast-math build raises the kind, the plain build never does.
    Appears,
    /// The plain build raises the kind, the fast-math build never does.
    Disappears,
    /// Both raise it, a different number of times.
    Count,
}

impl Direction {
    pub const ALL: [Direction; 3] = [Direction::Appears, Direction::Disappears, Direction::Count];

    pub fn name(self) -> &'static str {
        match self {
            Direction::Appears => "appears",
            Direction::Disappears => "disappears",
            Direction::Count => "count",
        }
    }
}

/// A finding's stable code; its string form is the anchor of its heading in `docs/diagnostics.md`, the
/// LSP diagnostic code and the SARIF `ruleId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// `fast-math-<kind>-appears`, `-disappears` or `-count`.
    Divergence {
        kind: ExceptionKind,
        direction: Direction,
    },
    /// `fast-math-exception-order`: the same exceptions, in another order.
    ExceptionOrder,
    /// `fast-math-special-value`: an output is NaN, infinite, zero or finite in one build and in another category
    /// in the other, or an integer output differs.
    SpecialValue,
    /// `fast-math-accuracy`: finite outputs that differ by more than the accuracy threshold.
    Accuracy,
    /// `plain-<kind>`: the plain build itself raises the kind (the Ariadne view, on request).
    Plain(ExceptionKind),
    /// `compile-error`: the file does not compile.
    CompileError,
    /// `function-skipped`: foe did not analyse a function.
    FunctionSkipped,
    /// `runs-incomplete`: most runs of a function crashed or timed out, so its builds were hardly compared.
    RunsIncomplete,
}

impl Code {
    /// Every code, in the order of the documentation.
    pub fn all() -> Vec<Code> {
        let mut all = vec![];
        for direction in Direction::ALL {
            for kind in ExceptionKind::ALL {
                all.push(Code::Divergence { kind, direction });
            }
        }
        all.push(Code::ExceptionOrder);
        all.push(Code::SpecialValue);
        all.push(Code::Accuracy);
        all.push(Code::CompileError);
        all.extend(ExceptionKind::ALL.map(Code::Plain));
        all.push(Code::FunctionSkipped);
        all.push(Code::RunsIncomplete);
        all
    }

    pub fn as_string(self) -> String {
        match self {
            Code::Divergence { kind, direction } => {
                format!("fast-math-{kind}-{}", direction.name())
            }
            Code::ExceptionOrder => "fast-math-exception-order".into(),
            Code::SpecialValue => "fast-math-special-value".into(),
            Code::Accuracy => "fast-math-accuracy".into(),
            Code::Plain(kind) => format!("plain-{kind}"),
            Code::CompileError => "compile-error".into(),
            Code::FunctionSkipped => "function-skipped".into(),
            Code::RunsIncomplete => "runs-incomplete".into(),
        }
    }

    /// Whether this is a difference between the builds (the codes a quick fix addresses).
    pub fn is_divergence(self) -> bool {
        matches!(
            self,
            Code::Divergence { .. } | Code::ExceptionOrder | Code::SpecialValue | Code::Accuracy
        )
    }

    /// The SARIF rule's one-line description.
    pub fn short_description(self) -> String {
        match self {
            Code::Divergence {
                kind,
                direction: Direction::Appears,
            } => format!("-ffast-math makes this operation raise {kind}"),
            Code::Divergence {
                kind,
                direction: Direction::Disappears,
            } => format!("-ffast-math removes the {kind} exception this operation raises"),
            Code::Divergence {
                kind,
                direction: Direction::Count,
            } => format!("-ffast-math changes how often {kind} is raised"),
            Code::ExceptionOrder => "-ffast-math changes the order of the exceptions raised".into(),
            Code::SpecialValue => {
                "-ffast-math changes whether a result is NaN, infinite, zero or finite".into()
            }
            Code::Accuracy => {
                "-ffast-math changes a result by more than the accuracy threshold".into()
            }
            Code::Plain(kind) => format!("the plain build raises {kind} here"),
            Code::CompileError => "the file does not compile".into(),
            Code::FunctionSkipped => "foe did not analyse this function".into(),
            Code::RunsIncomplete => {
                "most runs of this function crashed or timed out: its builds were hardly compared"
                    .into()
            }
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_string())
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_string())
    }
}

/// A divergence's code and the event it is about: for a kind raised by one build only, that build's event
/// of that kind nearest the first difference (the fast-math side first); for a count, the first kind whose
/// counts differ (the one at the first difference first); otherwise the order code.
pub fn classify(d: &Divergence) -> (Code, Option<&TraceEvent>) {
    match d.class {
        DivergenceClass::SpecialValue | DivergenceClass::Ending => {
            return (Code::SpecialValue, None)
        }
        DivergenceClass::Accuracy => return (Code::Accuracy, None),
        _ => {}
    }
    classify_traces(&d.trace_p, &d.trace_p_prime, d.first_divergence, d.class)
}

/// [`classify`] on two traces that differ from event `first` on (`foe replay`'s result).
pub fn classify_traces<'t>(
    p: &'t [TraceEvent],
    pp: &'t [TraceEvent],
    first: usize,
    class: DivergenceClass,
) -> (Code, Option<&'t TraceEvent>) {
    let count = |t: &[TraceEvent], k: ExceptionKind| t.iter().filter(|e| e.kind == k).count();
    if class != DivergenceClass::Order {
        if let Some(e) = from_first(pp, first).find(|e| count(p, e.kind) == 0) {
            return (
                Code::Divergence {
                    kind: e.kind,
                    direction: Direction::Appears,
                },
                Some(e),
            );
        }
        if let Some(e) = from_first(p, first).find(|e| count(pp, e.kind) == 0) {
            return (
                Code::Divergence {
                    kind: e.kind,
                    direction: Direction::Disappears,
                },
                Some(e),
            );
        }
        let at_first = pp.get(first).or_else(|| p.get(first));
        if let Some(kind) = at_first
            .map(|e| e.kind)
            .into_iter()
            .chain(ExceptionKind::ALL)
            .find(|&k| count(p, k) != count(pp, k))
        {
            let event = from_first(pp, first)
                .chain(from_first(p, first))
                .find(|e| e.kind == kind);
            return (
                Code::Divergence {
                    kind,
                    direction: Direction::Count,
                },
                event,
            );
        }
    }
    (Code::ExceptionOrder, pp.get(first).or_else(|| p.get(first)))
}

/// Events from the first difference on, then the ones before it.
fn from_first(t: &[TraceEvent], first: usize) -> impl Iterator<Item = &TraceEvent> {
    let first = first.min(t.len());
    t[first..].iter().chain(t[..first].iter())
}

/// Where the divergence is flagged: the engine's location, else the classified event's.
pub fn flagged_location(d: &Divergence) -> Option<SourceLoc> {
    d.location
        .or_else(|| classify(d).1.and_then(TraceEvent::loc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExceptionKind::*;

    fn ev(kind: ExceptionKind, line: u32) -> TraceEvent {
        TraceEvent {
            kind,
            line: Some(line),
            column: Some(3),
            operation: "fmul".into(),
        }
    }

    fn div(p: Vec<TraceEvent>, q: Vec<TraceEvent>, class: DivergenceClass) -> Divergence {
        Divergence {
            trace_p: p,
            trace_p_prime: q,
            class,
            ..Divergence::default()
        }
    }

    fn code(d: &Divergence) -> String {
        classify(d).0.as_string()
    }

    #[test]
    fn codes_name_kind_and_direction() {
        let appears = div(vec![], vec![ev(Overflow, 1)], DivergenceClass::Appears);
        assert_eq!(code(&appears), "fast-math-overflow-appears");
        // The engine's class is `Appears` for a kind that vanishes too: the code says which way it goes.
        let gone = div(vec![ev(Invalid, 1)], vec![], DivergenceClass::Appears);
        assert_eq!(code(&gone), "fast-math-invalid-disappears");
        let count = div(
            vec![ev(Underflow, 1)],
            vec![ev(Underflow, 1), ev(Underflow, 2)],
            DivergenceClass::Count,
        );
        assert_eq!(code(&count), "fast-math-underflow-count");
        assert_eq!(classify(&count).1.unwrap().line, Some(1));
        let order = div(
            vec![ev(Underflow, 1), ev(Overflow, 2)],
            vec![ev(Overflow, 2), ev(Underflow, 1)],
            DivergenceClass::Order,
        );
        assert_eq!(code(&order), "fast-math-exception-order");
    }

    #[test]
    fn every_code_has_a_heading_in_the_docs() {
        let docs = include_str!("../../../../docs/diagnostics.md");
        for code in Code::all() {
            assert!(
                docs.contains(&format!("\n### {code}\n")),
                "docs/diagnostics.md has no heading for {code}"
            );
        }
        let headings = docs.lines().filter(|l| l.starts_with("### ")).count();
        assert_eq!(headings, Code::all().len(), "a heading without a code");
    }
}
