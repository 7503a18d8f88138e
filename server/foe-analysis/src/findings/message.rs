//! The words of a finding: its one-line message, the inputs as shown, result values, related locations.

use super::{Code, Direction, DomainFit, Finding, Related};
use crate::report::{Divergence, FunctionReport, NamedValue, TraceEvent};
use crate::types::{ArgValue, ExceptionKind, SourceLoc};

/// Most input values named in a one-line message.
const MESSAGE_VALUES: usize = 4;

/// `raises invalid`, `divides by zero`, `overflows`, `underflows`.
pub fn verb(kind: ExceptionKind) -> &'static str {
    match kind {
        ExceptionKind::Invalid => "raises invalid",
        ExceptionKind::DivideByZero => "divides by zero",
        ExceptionKind::Overflow => "overflows",
        ExceptionKind::Underflow => "underflows",
    }
}

pub fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn times(n: usize) -> String {
    match n {
        0 => "never".into(),
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}

/// What happens at the site, in plain words.
pub fn what(code: Code, d: &Divergence) -> String {
    let count = |t: &[TraceEvent], k: ExceptionKind| t.iter().filter(|e| e.kind == k).count();
    match code {
        Code::Divergence {
            kind,
            direction: Direction::Appears,
        } => format!(
            "the fast-math build {} here, the plain build does not",
            verb(kind)
        ),
        Code::Divergence {
            kind,
            direction: Direction::Disappears,
        } => format!(
            "the plain build {} here, the fast-math build does not",
            verb(kind)
        ),
        Code::Divergence {
            kind,
            direction: Direction::Count,
        } => format!(
            "the fast-math build raises {kind} {}, the plain build {}",
            times(count(&d.trace_p_prime, kind)),
            times(count(&d.trace_p, kind))
        ),
        Code::SpecialValue | Code::Accuracy => result_what(d),
        _ => "both builds raise the same exceptions here, in another order".into(),
    }
}

/// What a caller observes of a result divergence: `the fast-math build returns inf where the plain build returns
/// 1.27e308`, `` `*err` is 0 in the fast-math build, 1e-20 in the plain build ``, with the bits apart for finite
/// values.
fn result_what(d: &Divergence) -> String {
    if d.class == crate::report::DivergenceClass::Ending {
        return crate::search::results::ending_summary(&d.end_p, &d.end_p_prime);
    }
    let Some(r) = &d.result else {
        return "the builds' results differ".into();
    };
    let (fast_math, plain) = crate::scalar::Scalar::short_pair(r.fast_math, r.plain);
    let mut s = match &r.output {
        None => {
            format!("the fast-math build returns {fast_math} where the plain build returns {plain}")
        }
        Some(name) => {
            format!("`{name}` is {fast_math} in the fast-math build, {plain} in the plain build")
        }
    };
    use crate::report::{DivergenceClass, Reference};
    match (&r.reference, r.class) {
        // An integer or a boolean (what a comparison decides): which build gives the real-number answer.
        (Some(Reference::Exact { value, .. }), _) if !r.plain.is_float() => {
            let which = match value {
                v if *v == r.fast_math.short() => ", as the fast-math build answers",
                v if *v == r.plain.short() => ", as the plain build answers",
                _ => "",
            };
            s.push_str(&format!(" (over the real numbers: {value}{which})"));
        }
        (
            Some(Reference::Exact {
                value, zero: true, ..
            }),
            _,
        ) if r.output.is_some() => {
            s.push_str(&format!(" (exact: {value}): the compensation is lost"));
        }
        (
            Some(
                reference @ Reference::Exact {
                    value, bits_plain, ..
                },
            ),
            _,
        ) if reference.plain_far() => {
            s.push_str(&format!(
                " (the real-number result of these operations is {value}, {bits_plain:.0} bits from the plain \
                 build's: the code relies on how they round, or cancels)"
            ));
        }
        (
            Some(Reference::Exact {
                value,
                bits_plain,
                bits_fast_math,
                ..
            }),
            DivergenceClass::Accuracy,
        ) => {
            if bits_fast_math >= bits_plain {
                s.push_str(&format!(
                    " (exact: {value}; {bits_fast_math:.0} bits of error against {bits_plain:.0})"
                ));
            } else {
                s.push_str(&format!(
                    " (exact: {value}): the fast-math build is the more accurate, {bits_fast_math:.0} bits of \
                     error against {bits_plain:.0}"
                ));
            }
        }
        (Some(reference @ Reference::Exact { value, .. }), _)
            if reference.fast_math_more_accurate() =>
        {
            s.push_str(&format!(
                " (exact: {value}): the fast-math build is the more accurate"
            ))
        }
        (Some(Reference::Exact { value, .. }), _) => s.push_str(&format!(" (exact: {value})")),
        (_, DivergenceClass::Accuracy) => {
            if let Some(bits) = r.bits() {
                s.push_str(&format!(" ({bits:.0} bits apart; no exact reference)"));
            }
        }
        _ => {}
    }
    s
}

/// `v=-0.25, w=1.34e154` (at most `limit` values, then `…`).
pub fn short_inputs(inputs: &[NamedValue], limit: usize) -> String {
    let mut parts: Vec<String> = inputs
        .iter()
        .take(limit)
        .map(|v| format!("{}={}", v.name, short_value(v)))
        .collect();
    if inputs.len() > limit {
        parts.push("…".into());
    }
    parts.join(", ")
}

pub fn short_value(v: &NamedValue) -> String {
    v.raw
        .map(ArgValue::short)
        .unwrap_or_else(|| v.decimal.clone())
}

/// The inputs a person is shown for a divergence: all of them, except array elements past the count when the
/// function follows the (pointer, count) convention: one integer parameter, elements named `p[i]`, and
/// `i >= count` (such elements are never read). The replay command keeps every input.
pub fn shown_inputs(f: &FunctionReport, d: &Divergence) -> Vec<NamedValue> {
    let ints: Vec<i64> = f
        .signature
        .iter()
        .flat_map(|s| s.call_params())
        .filter(|p| matches!(p.ty, crate::types::ParamType::Int { .. }))
        .filter_map(|p| d.inputs.iter().find(|v| v.name == p.name))
        .filter_map(|v| match v.raw {
            Some(ArgValue::Int(n)) => Some(n),
            _ => v.value.parse().ok(),
        })
        .collect();
    let count = match ints.as_slice() {
        [n] if *n >= 0 => *n,
        _ => return d.inputs.clone(),
    };
    let index = |name: &str| -> Option<i64> {
        let (_, rest) = name.split_once('[')?;
        let (i, tail) = rest.split_once(']')?;
        tail.is_empty().then(|| i.parse().ok())?
    };
    d.inputs
        .iter()
        .filter(|v| index(&v.name).is_none_or(|i| i < count))
        .cloned()
        .collect()
}

/// A float input of extreme magnitude: beyond 2^±64 (2^±32 for float), subnormal, infinite or NaN.
fn extreme_value(v: &NamedValue) -> bool {
    let (x, limit) = match v.raw {
        Some(ArgValue::F64(x)) => (x, 64),
        Some(ArgValue::F32(x)) => (x as f64, 32),
        Some(_) => return false,
        None => match v.decimal.parse::<f64>() {
            Ok(x) if v.value.contains('p') || !x.is_finite() => (x, 64),
            _ => return false,
        },
    };
    if x == 0.0 {
        return false;
    }
    let e = x.abs().log2();
    !x.is_finite() || e > limit as f64 || e < -(limit as f64)
}

/// Whether a divergence's input holds a NaN or an infinity.
pub fn needs_non_finite(d: &Divergence) -> bool {
    d.inputs.iter().any(|v| match v.raw {
        Some(ArgValue::F64(x)) => !x.is_finite(),
        Some(ArgValue::F32(x)) => !x.is_finite(),
        Some(_) => false,
        None => matches!(v.value.as_str(), "nan" | "-nan" | "inf" | "-inf"),
    })
}

/// Whether a divergence needs an extreme magnitude in some value. Inside a declared domain, the values the
/// domain constrains are the user's to choose and never count as extreme.
pub fn is_extreme(f: &FunctionReport, d: &Divergence) -> bool {
    let constrained = |name: &str| {
        d.in_domain
            && f.domain.iter().any(|c| {
                c.split(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                    .any(|w| w == name)
            })
    };
    d.inputs
        .iter()
        .any(|v| !constrained(&v.name) && extreme_value(v))
}

/// What the caller observes differently, when the builds' runs end differently: `the fast-math build returns -0
/// where the plain build returns nan`, `the fast-math build stops at `gsl_error` where the plain build returns 0`.
pub fn observed(d: &Divergence) -> Option<String> {
    let (p, pp) = (d.end_p.observed()?, d.end_p_prime.observed()?);
    (p != pp).then(|| format!("the fast-math build {pp} where the plain build {p}"))
}

/// The one-line message of a divergence finding.
pub fn divergence_message(f: &Finding, best: &Divergence, _event: Option<&TraceEvent>) -> String {
    let mut m = what(f.code, best);
    if !best.inputs.is_empty() {
        m.push_str(&format!(
            " (with {})",
            short_inputs(&f.best_inputs, MESSAGE_VALUES)
        ));
    }
    if let Some(o) =
        observed(best).filter(|_| !matches!(f.code, Code::SpecialValue | Code::Accuracy))
    {
        m.push_str(&format!("; {o}"));
    }
    if f.inputs > 1 {
        let more = f.inputs - 1;
        m.push_str(&format!("; {more} more input{}", plural(more)));
    }
    match f.domain {
        DomainFit::Inside => m.push_str("; inside the declared domain"),
        DomainFit::Outside => m.push_str("; outside the declared domain"),
        DomainFit::NotDeclared => {}
    }
    if let Some(c) = &f.cause {
        m.push_str(&format!("; cause: {}", c.text));
        if let Some(change) = &c.build_change {
            // The build change's first clause: `link with -mno-daz-ftz`.
            let short = change.split([':', '(']).next().unwrap_or(change).trim_end();
            m.push_str(&format!(" (no pragma removes it: {short})"));
        }
    }
    m
}

/// The other build's event at the same trace position, when it is somewhere else than the site.
pub fn related(
    d: &Divergence,
    code: Code,
    event: Option<&TraceEvent>,
    site: SourceLoc,
) -> Option<Related> {
    let flagged_in_p_prime = match code {
        Code::Divergence {
            direction: Direction::Appears,
            ..
        } => true,
        Code::Divergence {
            direction: Direction::Disappears,
            ..
        } => false,
        _ => event.is_some_and(|e| d.trace_p_prime.iter().any(|x| std::ptr::eq(x, e))),
    };
    let (other, name) = if flagged_in_p_prime {
        (&d.trace_p, "plain build")
    } else {
        (&d.trace_p_prime, "fast-math build")
    };
    let e = other.get(d.first_divergence)?;
    let loc = e.loc()?;
    if loc.line == site.line && (loc.column == site.column || site.column == 0) {
        return None;
    }
    Some(Related {
        line: loc.line,
        column: e.column.filter(|c| *c > 0),
        message: format!(
            "the {name} raises {} here instead (`{}`)",
            e.kind,
            super::render::c_operation(&e.operation)
        ),
    })
}

/// One event of a shipped trace: `overflow at 5:9`, `overflow in libm.so.6 (called at 3:10)`.
fn shipped_event(e: &TraceEvent) -> String {
    let at = match (e.line, e.column) {
        (Some(l), Some(c)) => Some(format!("{l}:{c}")),
        (Some(l), None) => Some(format!("line {l}")),
        _ => None,
    };
    match (e.operation.strip_prefix("in "), at) {
        (Some(library), Some(at)) => format!("{} in {library} (called at {at})", e.kind),
        (Some(library), None) => format!("{} in {library}", e.kind),
        (None, Some(at)) => format!("{} at {at}", e.kind),
        (None, None) => format!("{} (no line)", e.kind),
    }
}

/// The shipped traces of a divergence, one line per build, at most `limit` events each: `P as shipped: overflow
/// at 4:18` and `P' as shipped: no exception`; none when the shipped binaries did not run it.
pub fn shipped_lines(d: &Divergence, limit: usize) -> Vec<String> {
    if d.confirmation == crate::report::Confirmation::NotRun
        || d.shipped_trace_p.is_empty() && d.shipped_trace_p_prime.is_empty()
    {
        return vec![];
    }
    if d.shipped_only {
        return vec![
            "seen only in the binaries clang ships: the instrumented builds agree on this input (the code \
             generator's doing), so the runs above are the shipped ones"
                .into(),
        ];
    }
    [("P", &d.shipped_trace_p), ("P'", &d.shipped_trace_p_prime)]
        .into_iter()
        .map(|(build, trace)| {
            let mut events: Vec<String> = trace.iter().take(limit).map(shipped_event).collect();
            if trace.len() > limit {
                events.push(format!("… {} more", trace.len() - limit));
            }
            if events.is_empty() {
                events.push("no exception".into());
            }
            format!("{build} as shipped: {}", events.join(", "))
        })
        .collect()
}
