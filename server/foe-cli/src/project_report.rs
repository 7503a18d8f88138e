//! The aggregated report of `foe check -p`: each file's result as its own `foe check` rendered it (text, JSON
//! report, SARIF run: [`crate::output`]'s renderers, in the child), joined into one text, one JSON document or one
//! SARIF run, with the counts of files and functions by status, and one exit status.

use crate::Format;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;

/// How one file went. The values are what a child printed with `--format bundle`: `report` (the JSON report),
/// `text` and `sarif`.
pub enum Outcome {
    Analysed(Value),
    Cached(Value),
    /// Why no report came: the file does not compile, foe crashed or was killed.
    Failed(String),
}

pub struct FileResult {
    /// The file as reports name it.
    pub shown: String,
    pub outcome: Outcome,
}

impl FileResult {
    fn bundle(&self) -> Option<&Value> {
        match &self.outcome {
            Outcome::Analysed(b) | Outcome::Cached(b) => Some(b),
            Outcome::Failed(_) => None,
        }
    }
}

/// The function statuses, in the order the summary lists them.
const STATUSES: [&str; 5] = [
    "analysed",
    "partial",
    "through_callers",
    "skipped",
    "failed",
];

#[derive(Default)]
struct Summary {
    analysed: usize,
    cached: usize,
    failed: usize,
    functions: BTreeMap<String, usize>,
    divergences: usize,
    findings: usize,
}

fn summarise(results: &[FileResult]) -> Summary {
    let mut s = Summary::default();
    for r in results {
        match &r.outcome {
            Outcome::Analysed(_) => s.analysed += 1,
            Outcome::Cached(_) => s.cached += 1,
            Outcome::Failed(_) => s.failed += 1,
        }
        let Some(bundle) = r.bundle() else { continue };
        let report = &bundle["report"];
        for f in report["functions"].as_array().into_iter().flatten() {
            let status = f["status"].as_str().unwrap_or("?").to_string();
            *s.functions.entry(status).or_default() += 1;
            s.divergences += f["divergences"].as_array().map_or(0, Vec::len);
        }
        s.findings += report["findings"].as_array().map_or(0, Vec::len);
    }
    s
}

/// The rendered report and the exit status: 2 when a file failed, else 1 when some divergence was found, else 0.
pub fn render(results: &[FileResult], format: Format) -> anyhow::Result<(String, ExitCode)> {
    let summary = summarise(results);
    let out = match format {
        Format::Text | Format::Bundle => text(results, &summary),
        Format::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&json_report(results, &summary))?
        ),
        Format::Sarif => format!("{}\n", serde_json::to_string_pretty(&sarif(results))?),
    };
    let code = if summary.failed > 0 {
        2
    } else if summary.divergences > 0 {
        1
    } else {
        0
    };
    Ok((out, ExitCode::from(code)))
}

fn text(results: &[FileResult], s: &Summary) -> String {
    let mut out = String::new();
    for r in results {
        match &r.outcome {
            Outcome::Failed(error) => {
                let _ = writeln!(out, "{}: error: {error}", r.shown);
            }
            Outcome::Analysed(b) | Outcome::Cached(b) => {
                out.push_str(b["text"].as_str().unwrap_or(""));
            }
        }
    }
    let functions: Vec<String> = STATUSES
        .iter()
        .map(|st| format!("{} {st}", s.functions.get(*st).copied().unwrap_or(0)))
        .collect();
    let _ = writeln!(
        out,
        "foe: {} file(s): {} analysed, {} from cache, {} failed; functions: {}; {} divergent input(s), {} finding(s)",
        results.len(),
        s.analysed,
        s.cached,
        s.failed,
        functions.join(", "),
        s.divergences,
        s.findings
    );
    if s.failed > 0 {
        let _ = writeln!(out, "files that failed:");
        for r in results {
            if let Outcome::Failed(error) = &r.outcome {
                let _ = writeln!(out, "  {}: {error}", r.shown);
            }
        }
    }
    out
}

fn json_report(results: &[FileResult], s: &Summary) -> Value {
    let files: Vec<Value> = results
        .iter()
        .map(|r| match &r.outcome {
            Outcome::Failed(error) => {
                json!({ "file": r.shown, "status": "failed", "error": error })
            }
            Outcome::Analysed(b) => {
                json!({ "file": r.shown, "status": "analysed", "report": b["report"] })
            }
            Outcome::Cached(b) => {
                json!({ "file": r.shown, "status": "cached", "report": b["report"] })
            }
        })
        .collect();
    let functions: serde_json::Map<String, Value> = STATUSES
        .iter()
        .map(|st| {
            (
                st.to_string(),
                json!(s.functions.get(*st).copied().unwrap_or(0)),
            )
        })
        .collect();
    json!({
        "files": files,
        "summary": {
            "files": results.len(),
            "analysed": s.analysed,
            "cached": s.cached,
            "failed": s.failed,
            "functions": functions,
            "divergences": s.divergences,
            "findings": s.findings,
        }
    })
}

/// One SARIF run holding every file's results (each result keeps its file's URI), the rules of all, and an
/// invocation that lists the files that failed.
fn sarif(results: &[FileResult]) -> Value {
    let mut driver: Option<Value> = None;
    let mut rules: BTreeMap<String, Value> = BTreeMap::new();
    let mut artifacts = Vec::new();
    let mut all = Vec::new();
    for r in results {
        let Some(run) = r.bundle().map(|b| &b["sarif"]["runs"][0]) else {
            continue;
        };
        let run_driver = &run["tool"]["driver"];
        for rule in run_driver["rules"].as_array().into_iter().flatten() {
            if let Some(id) = rule["id"].as_str() {
                rules.entry(id.to_string()).or_insert_with(|| rule.clone());
            }
        }
        driver.get_or_insert_with(|| run_driver.clone());
        artifacts.extend(run["artifacts"].as_array().into_iter().flatten().cloned());
        all.extend(run["results"].as_array().into_iter().flatten().cloned());
    }
    let ids: Vec<&String> = rules.keys().collect();
    for result in &mut all {
        let index = result["ruleId"]
            .as_str()
            .and_then(|id| ids.iter().position(|r| *r == id));
        result["ruleIndex"] = json!(index);
    }
    let mut driver = driver.unwrap_or_else(|| {
        json!({
            "name": "foe",
            "version": env!("CARGO_PKG_VERSION"),
            "informationUri": "https://github.com/foe-tools/foe",
        })
    });
    driver["rules"] = Value::Array(rules.into_values().collect());
    let failures: Vec<Value> = results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed(error) => Some(json!({
                "level": "error",
                "message": { "text": error },
                "locations": [{ "physicalLocation": { "artifactLocation": { "uri": r.shown } } }]
            })),
            _ => None,
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": driver },
            "invocations": [{
                "executionSuccessful": failures.is_empty(),
                "toolExecutionNotifications": failures,
            }],
            "artifacts": artifacts,
            "results": all
        }]
    })
}
