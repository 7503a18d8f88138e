//! Rendering for people and tools: the engine's findings as compiler-style text, JSON and SARIF 2.1.0;
//! replays; Table III rows.

use foe_analysis::findings::render::{self, Style};
use foe_analysis::findings::{self, Code, Finding, Severity};
use foe_analysis::pipeline::{ReplayReport, ShippedReplay};
use foe_analysis::report::{FileReport, FunctionStatus};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

fn severity_label(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Information => "note",
        Severity::Hint => "hint",
    }
}

/// `file:line:col` (or `file:line` when only the line is known).
fn place(file: &str, line: u32, column: Option<u32>) -> String {
    match column {
        Some(c) => format!("{file}:{line}:{c}"),
        None => format!("{file}:{line}"),
    }
}

fn finding_text(out: &mut String, file: &str, f: &Finding, report: &FileReport) {
    let _ = writeln!(
        out,
        "{}: {}: {} [{}]",
        place(file, f.line, f.column),
        severity_label(f.severity),
        f.message,
        f.code
    );
    let Some(function) = report.functions.iter().find(|x| x.name == f.function) else {
        return;
    };
    let Some(best) = f.divergences_in(function).first().copied() else {
        return;
    };
    if let Some(c) = &f.cause {
        let _ = writeln!(out, "    cause: {}", c.text);
    }
    let inputs: Vec<String> = f
        .best_inputs
        .iter()
        .map(|i| format!("{} = {} ({})", i.name, i.value, i.decimal))
        .collect();
    let _ = writeln!(out, "    in `{}`, input: {}", f.function, inputs.join(", "));
    let _ = writeln!(
        out,
        "    P  ({}): {}",
        report.flags_p.join(" "),
        render::run_line(&best.trace_p, &best.end_p, usize::MAX, Style::Plain)
    );
    let ftz = if report.ftz_p_prime { ", FTZ/DAZ" } else { "" };
    let _ = writeln!(
        out,
        "    P' ({}{ftz}): {}",
        report.flags_p_prime.join(" "),
        render::run_line(
            &best.trace_p_prime,
            &best.end_p_prime,
            usize::MAX,
            Style::Plain
        )
    );
    let _ = writeln!(out, "    {}", best.confirmation.describe());
    for line in &f.shipped {
        let _ = writeln!(out, "    {line}");
    }
    if let Some(change) = foe_analysis::fix::build_change(best.cause) {
        let _ = writeln!(out, "    fix: {change}");
    }
    if let Some(r) = &f.related {
        let _ = writeln!(out, "    {}: {}", place(file, r.line, r.column), r.message);
    }
}

/// The human report of `foe check`: the findings, best first, then one line per analysed function.
pub fn text_report(report: &FileReport, findings: &[Finding]) -> String {
    let mut out = String::new();
    let file = &report.file;
    for f in findings {
        finding_text(&mut out, file, f, report);
    }
    for f in &report.functions {
        if !f.status.ran() {
            continue;
        }
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
        if let Some(v) = &f.verdict {
            let _ = writeln!(out, "  {}", v.line());
        }
        if !f.domain.is_empty() {
            let inside = f.divergences.iter().filter(|d| d.in_domain).count();
            let _ = writeln!(
                out,
                "  declared domain: {}; {inside} divergent inside it",
                f.domain.join(" && ")
            );
        }
    }
    let timings: Vec<String> = report
        .timings_ms
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(
        out,
        "{} divergent input(s), {} finding(s) shown; timings (ms): {}",
        report.divergence_count(),
        findings.len(),
        timings.join(", ")
    );
    out
}

/// `foe check --format json`: the report, with the findings as shown by every front end.
pub fn json_report(report: &FileReport, findings: &[Finding]) -> Value {
    let mut v = serde_json::to_value(report).unwrap_or(Value::Null);
    v["findings"] = serde_json::to_value(findings).unwrap_or(Value::Null);
    v
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
        "P  ({}): {}",
        r.flags_p.join(" "),
        render::run_line(&r.trace_p, &r.end_p, usize::MAX, Style::Plain)
    );
    let _ = writeln!(
        out,
        "P' ({}): {}",
        r.flags_p_prime.join(" "),
        render::run_line(&r.trace_p_prime, &r.end_p_prime, usize::MAX, Style::Plain)
    );
    match (r.first_divergence, r.class) {
        (Some(i), Some(c)) => {
            let (code, _) = findings::code::classify_traces(&r.trace_p, &r.trace_p_prime, i, c);
            let _ = writeln!(out, "traces differ from event {i} [{code}]");
        }
        _ => {
            let _ = writeln!(out, "traces are equal");
        }
    }
    if let Some(d) = &r.result {
        let what = d.output.as_deref().unwrap_or("the return value");
        let _ = writeln!(
            out,
            "results differ: {what} is {} in P, {} in P' [{}]",
            d.plain.short(),
            d.fast_math.short(),
            match d.class {
                foe_analysis::report::DivergenceClass::Accuracy => Code::Accuracy,
                _ => Code::SpecialValue,
            }
        );
    }
    match &r.shipped {
        Some(ShippedReplay::Ran {
            trace_p,
            trace_p_prime,
            end_p,
            end_p_prime,
            result,
            sets_differ,
        }) => {
            let line = |t, e| render::run_line(t, e, usize::MAX, Style::Plain);
            let _ = writeln!(out, "P  as shipped: {}", line(trace_p, end_p));
            let _ = writeln!(out, "P' as shipped: {}", line(trace_p_prime, end_p_prime));
            if *sets_differ {
                let _ = writeln!(out, "the shipped binaries raise different exceptions");
            }
            if let Some(d) = result {
                let what = d.output.as_deref().unwrap_or("the return value");
                let _ = writeln!(
                    out,
                    "shipped results differ: {what} is {} in P, {} in P'",
                    d.plain.short(),
                    d.fast_math.short()
                );
            }
        }
        Some(ShippedReplay::NotRun { why }) => {
            let _ = writeln!(out, "not run on the shipped binaries: {why}");
        }
        None => {}
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

fn sarif_level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Information | Severity::Hint => "note",
    }
}

/// SARIF 2.1.0 for code-scanning tools: one result per finding, `ruleId` its code, `partialFingerprints`
/// its fingerprint (stable when lines move).
pub fn sarif(report: &FileReport, findings: &[Finding]) -> Value {
    let uri = report.file.clone();
    let region = |line: u32, col: Option<u32>| {
        let mut r = json!({ "startLine": line.max(1) });
        if let Some(c) = col.filter(|c| *c > 0) {
            r["startColumn"] = json!(c);
        }
        r
    };
    let mut rules: Vec<Code> = findings.iter().map(|f| f.code).collect();
    rules.sort();
    rules.dedup();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let related: Vec<Value> = f
                .related
                .iter()
                .map(|r| {
                    json!({
                        "id": 0,
                        "physicalLocation": { "artifactLocation": { "uri": uri }, "region": region(r.line, r.column) },
                        "message": { "text": r.message }
                    })
                })
                .collect();
            let divergences = report
                .functions
                .iter()
                .find(|x| x.name == f.function)
                .map(|x| f.divergences_in(x))
                .unwrap_or_default();
            let best = divergences.first();
            json!({
                "ruleId": f.code.as_string(),
                "ruleIndex": rules.iter().position(|c| *c == f.code),
                "level": sarif_level(f.severity),
                "message": { "text": f.message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri },
                        "region": region(f.line, f.column)
                    },
                    "logicalLocations": [{ "name": f.function, "kind": "function" }]
                }],
                "relatedLocations": related,
                "partialFingerprints": { "foeFinding/v1": f.fingerprint },
                "properties": {
                    "function": f.function,
                    "severity": f.severity,
                    "rank": f.rank,
                    "cause": f.cause,
                    "domain": f.domain,
                    "inputCount": f.inputs,
                    "inputs": f.best_inputs,
                    "tracePlain": best.map(|d| &d.trace_p),
                    "traceFastMath": best.map(|d| &d.trace_p_prime),
                    "shipped": f.shipped,
                    "shippedTracePlain": best.map(|d| &d.shipped_trace_p),
                    "shippedTraceFastMath": best.map(|d| &d.shipped_trace_p_prime),
                    "resultPlain": best.map(|d| d.end_p.describe()),
                    "resultFastMath": best.map(|d| d.end_p_prime.describe()),
                }
            })
        })
        .collect();
    let rules: Vec<Value> = rules
        .iter()
        .map(|code| {
            let id = code.as_string();
            json!({
                "id": id,
                "shortDescription": { "text": code.short_description() },
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
