//! Rendering reports for people and tools: compiler-style text, Table III rows, SARIF 2.1.0.

use foe_analysis::pipeline::ReplayReport;
use foe_analysis::report::{Divergence, FileReport, FunctionStatus, TraceEvent};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

fn event_text(e: &TraceEvent) -> String {
    match (e.line, e.column) {
        (Some(l), Some(c)) => format!("{} at {l}:{c} ({})", e.kind, e.operation),
        (Some(l), None) => format!("{} at {l} ({})", e.kind, e.operation),
        _ => format!(
            "{} at an instruction without a debug location ({})",
            e.kind, e.operation
        ),
    }
}

/// A trace as one line: `overflow at 3:45 (fmul), invalid at 4:2 (fsub)` or `no exceptions`.
pub fn trace_text(trace: &[TraceEvent]) -> String {
    if trace.is_empty() {
        return "no exceptions".into();
    }
    trace.iter().map(event_text).collect::<Vec<_>>().join(", ")
}

fn divergence_text(out: &mut String, file: &str, d: &Divergence, report: &FileReport) {
    let (line, col) = d.location.map(|l| (l.line, l.column)).unwrap_or((0, 0));
    let domain = if d.in_domain {
        ""
    } else {
        " [outside the declared domain]"
    };
    let _ = writeln!(
        out,
        "{file}:{line}:{col}: warning: {} [{:?}]{domain}",
        d.summary, d.class
    );
    let inputs: Vec<String> = d
        .inputs
        .iter()
        .map(|i| format!("{} = {} ({})", i.name, i.value, i.decimal))
        .collect();
    let _ = writeln!(out, "    input: {}", inputs.join(", "));
    let _ = writeln!(
        out,
        "    P  ({}): {}; {}",
        report.flags_p.join(" "),
        trace_text(&d.trace_p),
        run_ending(&d.result_p)
    );
    let ftz = if report.ftz_p_prime { ", FTZ/DAZ" } else { "" };
    let _ = writeln!(
        out,
        "    P' ({}{ftz}): {}; {}",
        report.flags_p_prime.join(" "),
        trace_text(&d.trace_p_prime),
        run_ending(&d.result_p_prime)
    );
    let _ = writeln!(out, "    first divergence at event {}", d.first_divergence);
    let _ = writeln!(
        out,
        "    {}; cause: {}",
        d.confirmation.describe(),
        d.cause.describe()
    );
    if let Some(change) = foe_analysis::fix::build_change(d.cause) {
        let _ = writeln!(out, "    fix: {change}");
    }
}

/// How a run ended, for a sentence: `returns 0x1p+0 (1)`, or the run's own ending (`stopped at `gsl_error`
/// (line 12:5)`, `crashed (SIGSEGV)`, `timed out after 1000 ms`).
fn run_ending(result: &str) -> String {
    if ["returned", "crashed", "timed out", "stopped"]
        .iter()
        .any(|p| result.starts_with(p))
    {
        result.to_string()
    } else {
        format!("returns {result}")
    }
}

/// The human report of `foe check`.
pub fn text_report(report: &FileReport, _source: &str) -> String {
    let mut out = String::new();
    let file = &report.file;
    for f in &report.functions {
        match f.status {
            FunctionStatus::Skipped | FunctionStatus::Failed | FunctionStatus::ThroughCallers => {
                if f.reason != "not selected" {
                    let _ = writeln!(out, "{file}: {}: {}: {}", f.name, f.status.name(), f.reason);
                }
            }
            FunctionStatus::Analysed | FunctionStatus::Partial => {
                let partial = if f.status == FunctionStatus::Partial {
                    " [partial]"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "{file}: {}{partial}: {} divergent input{} (formulae {} ({}, {}), satisfiable {}, candidates {}, executions {}){}",
                    f.name,
                    f.divergences.len(),
                    if f.divergences.len() == 1 { "" } else { "s" },
                    f.formulae.unique,
                    f.formulae.p,
                    f.formulae.p_prime,
                    f.satisfiable,
                    f.candidates,
                    f.executions,
                    if f.reason.is_empty() { String::new() } else { format!("; {}", f.reason) }
                );
                if !f.domain.is_empty() {
                    let inside = f.divergences.iter().filter(|d| d.in_domain).count();
                    let _ = writeln!(
                        out,
                        "  declared domain: {}; {inside} divergent inside it",
                        f.domain.join(" && ")
                    );
                }
                for d in &f.divergences {
                    divergence_text(&mut out, file, d, report);
                }
                for e in &f.plain_exceptions {
                    let inputs: Vec<String> = e
                        .inputs
                        .iter()
                        .map(|i| format!("{}={}", i.name, i.decimal))
                        .collect();
                    let _ = writeln!(
                        out,
                        "{file}:{}:{}: note: the plain build raises {} here ({})",
                        e.line.unwrap_or(0),
                        e.column.unwrap_or(0),
                        e.kind,
                        inputs.join(", ")
                    );
                }
            }
        }
    }
    let timings: Vec<String> = report
        .timings_ms
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(
        out,
        "{} divergent input(s); timings (ms): {}",
        report.divergence_count(),
        timings.join(", ")
    );
    out
}

/// The human output of `foe replay`.
pub fn text_replay(r: &ReplayReport, file: &Path) -> String {
    let mut out = String::new();
    let inputs: Vec<String> = r
        .inputs
        .iter()
        .map(|i| format!("{} = {} ({})", i.name, i.value, i.decimal))
        .collect();
    let _ = writeln!(
        out,
        "{}: {}({})",
        file.display(),
        r.function,
        inputs.join(", ")
    );
    let _ = writeln!(
        out,
        "P  ({}): {}; {}",
        r.flags_p.join(" "),
        trace_text(&r.trace_p),
        run_ending(&r.result_p)
    );
    let _ = writeln!(
        out,
        "P' ({}): {}; {}",
        r.flags_p_prime.join(" "),
        trace_text(&r.trace_p_prime),
        run_ending(&r.result_p_prime)
    );
    match (r.first_divergence, r.class) {
        (Some(i), Some(c)) => {
            let _ = writeln!(out, "traces differ ({c:?}) from event {i}");
        }
        _ => {
            let _ = writeln!(out, "traces are equal");
        }
    }
    out
}

/// The paper's Table III, one row per analysed function.
pub fn table(rows: &[(FileReport, Duration)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>18} {:>12} {:>14} {:>15} {:>10}",
        "program", "formulae (P, P')", "satisfiable", "unique inputs", "diff-producing", "time (s)"
    );
    for (report, elapsed) in rows {
        let analysed: Vec<_> = report.functions.iter().filter(|f| f.status.ran()).collect();
        for f in &analysed {
            let formulae = format!(
                "{} ({}, {})",
                f.formulae.unique, f.formulae.p, f.formulae.p_prime
            );
            let time = if analysed.len() == 1 {
                format!("{:.2}", elapsed.as_secs_f64())
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "{:<28} {:>18} {:>12} {:>14} {:>15} {:>10}",
                f.name, formulae, f.satisfiable, f.candidates, f.diff_producing, time
            );
        }
        if analysed.len() != 1 {
            let _ = writeln!(
                out,
                "{:<28} {:>82.2}",
                format!("({} total)", report.file),
                elapsed.as_secs_f64()
            );
        }
        for f in report.functions.iter().filter(|f| !f.status.ran()) {
            let _ = writeln!(out, "{:<28} {}: {}", f.name, f.status.name(), f.reason);
        }
    }
    out
}

/// Stable rule id of a divergence: the kind that appears or disappears first, or `order`.
pub fn rule_id(d: &Divergence) -> String {
    let p = d.trace_p.get(d.first_divergence).map(|e| e.kind);
    let pp = d.trace_p_prime.get(d.first_divergence).map(|e| e.kind);
    match (p, pp) {
        (_, Some(k)) if !d.trace_p.iter().any(|e| e.kind == k) => format!("fast-math-{k}-appears"),
        (Some(k), _) if !d.trace_p_prime.iter().any(|e| e.kind == k) => {
            format!("fast-math-{k}-disappears")
        }
        _ => "fast-math-exception-order".into(),
    }
}

/// SARIF 2.1.0 for code-scanning tools.
pub fn sarif(report: &FileReport) -> Value {
    let uri = report.file.clone();
    let mut rules: Vec<String> = Vec::new();
    let mut results = Vec::new();
    let region = |line: Option<u32>, col: Option<u32>| {
        let mut r = json!({ "startLine": line.unwrap_or(1).max(1) });
        if let Some(c) = col.filter(|c| *c > 0) {
            r["startColumn"] = json!(c);
        }
        r
    };
    for f in &report.functions {
        for d in &f.divergences {
            let id = rule_id(d);
            if !rules.contains(&id) {
                rules.push(id.clone());
            }
            let loc = d.location;
            let other = if d.trace_p_prime.get(d.first_divergence).is_some() {
                &d.trace_p
            } else {
                &d.trace_p_prime
            };
            let related: Vec<Value> = other
                .iter()
                .filter(|e| e.line.is_some())
                .enumerate()
                .map(|(i, e)| {
                    json!({
                        "id": i,
                        "physicalLocation": { "artifactLocation": { "uri": uri }, "region": region(e.line, e.column) },
                        "message": { "text": format!("{} in the other build", e.kind) }
                    })
                })
                .collect();
            let inputs: Vec<String> = d
                .inputs
                .iter()
                .map(|i| format!("{}={}", i.name, i.value))
                .collect();
            results.push(json!({
                "ruleId": id,
                "level": "warning",
                "message": { "text": format!("{} ({}) in `{}`", d.summary, inputs.join(", "), f.name) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri },
                        "region": region(loc.map(|l| l.line), loc.map(|l| l.column))
                    }
                }],
                "relatedLocations": related,
                "properties": {
                    "function": f.name,
                    "inputs": d.inputs,
                    "tracePlain": d.trace_p,
                    "traceFastMath": d.trace_p_prime,
                    "resultPlain": d.result_p,
                    "resultFastMath": d.result_p_prime,
                    "inDomain": d.in_domain,
                    "class": d.class,
                }
            }));
        }
    }
    let rules: Vec<Value> = rules
        .iter()
        .map(|id| {
            json!({
                "id": id,
                "shortDescription": { "text": "-ffast-math changes the floating-point exceptions raised here" },
                "helpUri": format!("https://github.com/foe-tools/foe/blob/main/docs/diagnostics.md#{id}"),
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "foe",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/foe-tools/foe",
                "rules": rules
            }},
            "artifacts": [{ "location": { "uri": uri } }],
            "results": results
        }]
    })
}
