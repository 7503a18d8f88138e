//! How two runs differ, in the paper's terms and in words: the class of two exception traces (kind sequences,
//! locations ignored), and the one-line summary and location of a divergence.

use crate::report::{Divergence, DivergenceClass, TraceEvent};
use crate::types::ExceptionKind;

/// Compares two traces as the paper defines (sequence of kinds, order kept, locations ignored): `None` when
/// equal, else the index of the first difference and the class.
pub fn compare_traces(p: &[TraceEvent], pp: &[TraceEvent]) -> Option<(usize, DivergenceClass)> {
    let a: Vec<u8> = p.iter().map(|e| e.kind.runtime_code()).collect();
    let b: Vec<u8> = pp.iter().map(|e| e.kind.runtime_code()).collect();
    compare_kinds(&a, &b)
}

/// [`compare_traces`] on runtime kind codes.
pub fn compare_kinds(a: &[u8], b: &[u8]) -> Option<(usize, DivergenceClass)> {
    if a == b {
        return None;
    }
    let first = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let (ca, cb) = (counts(a.iter().copied()), counts(b.iter().copied()));
    let class = if ca.iter().zip(&cb).any(|(x, y)| (*x == 0) != (*y == 0)) {
        DivergenceClass::Appears
    } else if ca != cb {
        DivergenceClass::Count
    } else {
        DivergenceClass::Order
    };
    Some((first, class))
}

fn counts(kinds: impl Iterator<Item = u8>) -> [usize; 8] {
    let mut c = [0usize; 8];
    for k in kinds {
        c[(k & 7) as usize] += 1;
    }
    c
}

/// The one-line summary of a result divergence: `the fast-math build returns inf where the plain build returns
/// 1.27e308`, `*err is 0 in the fast-math build, 1e-20 in the plain build`.
pub(crate) fn result_summary(d: &Divergence) -> String {
    match &d.result {
        Some(r) => match &r.output {
            None => format!(
                "the fast-math build returns {} where the plain build returns {}",
                r.fast_math.short(),
                r.plain.short()
            ),
            Some(name) => format!(
                "{name} is {} in the fast-math build, {} in the plain build",
                r.fast_math.short(),
                r.plain.short()
            ),
        },
        None => "the builds' results differ".into(),
    }
}

fn verb(kind: ExceptionKind) -> &'static str {
    match kind {
        ExceptionKind::Invalid => "raises invalid",
        ExceptionKind::DivideByZero => "divides by zero",
        ExceptionKind::Overflow => "overflows",
        ExceptionKind::Underflow => "underflows",
    }
}

/// The one-line summary and the location to flag: for an exception that appears in one build only, where that
/// build raises it (the fast-math side first); otherwise the first diverging event of P', else of P.
pub(crate) fn explain(
    p: &[TraceEvent],
    pp: &[TraceEvent],
    first: usize,
    class: DivergenceClass,
) -> (String, Option<crate::types::SourceLoc>) {
    let has = |t: &[TraceEvent], k: ExceptionKind| t.iter().any(|e| e.kind == k);
    let count = |t: &[TraceEvent], k: ExceptionKind| t.iter().filter(|e| e.kind == k).count();
    let first_loc = pp.get(first).or_else(|| p.get(first)).and_then(|e| e.loc());
    match class {
        DivergenceClass::Appears => {
            let only_pp: Vec<ExceptionKind> = ExceptionKind::ALL
                .into_iter()
                .filter(|&k| has(pp, k) && !has(p, k))
                .collect();
            let only_p: Vec<ExceptionKind> = ExceptionKind::ALL
                .into_iter()
                .filter(|&k| has(p, k) && !has(pp, k))
                .collect();
            // The appearing event closest to the first divergence.
            let pick = |t: &[TraceEvent], kinds: &[ExceptionKind]| {
                t.iter()
                    .skip(first)
                    .chain(t.iter().take(first))
                    .find(|e| kinds.contains(&e.kind))
                    .cloned()
            };
            if let Some(e) = pick(pp, &only_pp) {
                let mut s = format!(
                    "fast-math build {} here, plain build does not",
                    verb(e.kind)
                );
                if let Some(k) = only_p.first() {
                    s.push_str(&format!(
                        "; plain build {}, fast-math build does not",
                        verb(*k)
                    ));
                }
                (s, e.loc())
            } else if let Some(e) = pick(p, &only_p) {
                (
                    format!(
                        "plain build {} here, fast-math build does not",
                        verb(e.kind)
                    ),
                    e.loc(),
                )
            } else {
                ("exception traces differ".into(), first_loc)
            }
        }
        DivergenceClass::Count => {
            let k = ExceptionKind::ALL
                .into_iter()
                .find(|&k| count(p, k) != count(pp, k));
            let s = match k {
                Some(k) => format!(
                    "fast-math build raises {k} {}, plain build {}",
                    times(count(pp, k)),
                    times(count(p, k))
                ),
                None => "exception counts differ".into(),
            };
            (s, first_loc)
        }
        DivergenceClass::Order => ("same exceptions in another order".into(), first_loc),
        DivergenceClass::SpecialValue | DivergenceClass::Accuracy | DivergenceClass::Ending => {
            ("the builds' results differ".into(), first_loc)
        }
    }
}

fn times(n: usize) -> String {
    if n == 1 {
        "once".into()
    } else {
        format!("{n} times")
    }
}
