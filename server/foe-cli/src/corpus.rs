//! `foe bench --corpus`: `foe check` on every file of a compilation database (or a list of files), one child
//! process per file as a user would run it, and the figures that say how far foe gets on real code: functions
//! by status and reason, the share analysed with evidence, time per file (median, p90, max), executions, and
//! the files where foe itself failed.

use crate::runner;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What one `foe check` of one file gave.
struct FileRun {
    file: String,
    seconds: f64,
    /// `foe check`'s exit status; `None` when it was killed (time limit) or died of a signal.
    exit: Option<i32>,
    /// (status, reason codes, executions) per function.
    functions: Vec<(String, Vec<String>, u64)>,
    /// (class, cause, confirmation) per reported divergence.
    divergences: Vec<(String, String, String)>,
    /// The first line foe printed on stderr when it failed.
    error: String,
}

/// The files of a compilation database, or of `files.txt` beside it when there is one (a corpus's own
/// selection), relative paths resolved against the database's directory.
pub fn corpus_files(corpus: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let db = runner::database_path(corpus);
    let root = runner::directory_of(&db).to_path_buf();
    let list = root.join("files.txt");
    if list.is_file() {
        let text = std::fs::read_to_string(&list)?;
        return Ok(text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| root.join(l))
            .collect());
    }
    Ok(runner::database_entries(&db)?
        .into_iter()
        .map(|e| e.file)
        .collect())
}

/// Runs `foe check --format json` on each file (with `extra_args`), at most `limit` per file, and prints the
/// figures; with `reports`, keeps each file's report there as `<path in the corpus, / as _>.json`.
pub fn run(
    corpus: &Path,
    files: &[PathBuf],
    limit: Duration,
    extra_args: &[String],
    reports: Option<&Path>,
) -> anyhow::Result<()> {
    let root = std::path::absolute(if corpus.is_dir() {
        corpus
    } else {
        runner::directory_of(corpus)
    })?;
    if let Some(dir) = reports {
        std::fs::create_dir_all(dir)?;
    }
    // With FOE_LOG set, each file's log is kept beside its report.
    let log = reports.is_some() && std::env::var_os("FOE_LOG").is_some();
    let mut runs = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let file = std::path::absolute(file)?;
        let dir = file.parent().unwrap_or(Path::new("/"));
        let run = runner::check_in_child(&file, dir, "json", extra_args, limit, log)?;
        if let Some(dir) = reports {
            let rel = file.strip_prefix(&root).unwrap_or(&file);
            let name = rel.to_string_lossy().replace('/', "_");
            if let Some(report) = &run.output {
                std::fs::write(
                    dir.join(format!("{name}.json")),
                    serde_json::to_vec(report)?,
                )?;
            }
            if log {
                std::fs::write(dir.join(format!("{name}.log")), &run.stderr)?;
            }
        }
        let functions = run
            .output
            .as_ref()
            .and_then(|r| r["functions"].as_array())
            .map(|fs| {
                fs.iter()
                    .map(|f| {
                        let codes = f["reason_codes"]
                            .as_array()
                            .map(|c| {
                                c.iter()
                                    .filter_map(|c| c.as_str().map(String::from))
                                    .collect()
                            })
                            .unwrap_or_default();
                        (
                            f["status"].as_str().unwrap_or("?").to_string(),
                            codes,
                            f["executions"].as_u64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let divergences = run
            .output
            .as_ref()
            .and_then(|r| r["functions"].as_array())
            .into_iter()
            .flatten()
            .flat_map(|f| f["divergences"].as_array().into_iter().flatten())
            .map(|d| {
                let text = |k: &str| d[k].as_str().unwrap_or("?").to_string();
                (text("class"), text("cause"), text("confirmation"))
            })
            .collect();
        let error = run.failure(limit).unwrap_or_default();
        eprintln!(
            "[{}/{}] {} {:.1} s{}",
            i + 1,
            files.len(),
            file.display(),
            run.seconds,
            if error.is_empty() {
                String::new()
            } else {
                format!(" ({error})")
            }
        );
        runs.push(FileRun {
            file: file.display().to_string(),
            seconds: run.seconds,
            exit: run.exit,
            functions,
            divergences,
            error,
        });
    }
    crate::emit(summary(&runs));
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(runs: &[FileRun]) -> String {
    let mut out = String::new();
    let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_reason: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut executions = 0u64;
    let mut total = 0usize;
    for run in runs {
        for (status, codes, execs) in &run.functions {
            if codes.iter().any(|c| c == "not_selected") {
                continue;
            }
            total += 1;
            executions += execs;
            *by_status.entry(status).or_default() += 1;
            for code in codes {
                *by_reason.entry((status, code)).or_default() += 1;
            }
        }
    }
    let pct = |n: usize| 100.0 * n as f64 / total.max(1) as f64;
    let count = |s: &str| by_status.get(s).copied().unwrap_or(0);
    let evidence = count("analysed") + count("partial") + count("through_callers");
    let _ = writeln!(
        out,
        "corpus: {} files, {total} functions; with evidence (analysed, partial, through callers): {evidence} ({:.1}%)",
        runs.len(),
        pct(evidence)
    );
    let _ = writeln!(out, "\n| status | functions | share |\n|---|---|---|");
    for (status, n) in &by_status {
        let _ = writeln!(out, "| {status} | {n} | {:.1}% |", pct(*n));
    }
    let _ = writeln!(out, "\n| status | reason | functions |\n|---|---|---|");
    let mut reasons: Vec<_> = by_reason.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for ((status, code), n) in reasons {
        let _ = writeln!(out, "| {status} | {code} | {n} |");
    }
    let mut seconds: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
    seconds.sort_by(f64::total_cmp);
    let over = seconds.iter().filter(|s| **s > 60.0).count();
    let _ = writeln!(
        out,
        "\ntime per file (s): median {:.2}, p90 {:.2}, max {:.2}; over 60 s: {over}; total {:.0}",
        percentile(&seconds, 0.5),
        percentile(&seconds, 0.9),
        seconds.last().copied().unwrap_or(0.0),
        seconds.iter().sum::<f64>()
    );
    let _ = writeln!(out, "executions (each on both builds): {executions}");
    // Divergences by kind (exception classes and result classes) and cause, and how they were confirmed.
    let mut by_kind: BTreeMap<(&str, &str), [usize; 3]> = BTreeMap::new();
    for (class, cause, confirmation) in runs.iter().flat_map(|r| &r.divergences) {
        let slot = match confirmation.as_str() {
            "confirmed" => 0,
            "trace_only" => 1,
            _ => 2,
        };
        by_kind.entry((class, cause)).or_default()[slot] += 1;
    }
    let _ = writeln!(
        out,
        "\n| divergence | cause | confirmed | trace only | not run |\n|---|---|---|---|---|"
    );
    for ((class, cause), [c, t, n]) in &by_kind {
        let _ = writeln!(out, "| {class} | {cause} | {c} | {t} | {n} |");
    }
    let mut slowest: Vec<&FileRun> = runs.iter().collect();
    slowest.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    let _ = writeln!(out, "slowest files:");
    for r in slowest.iter().take(5) {
        let _ = writeln!(out, "  {:.1} s {}", r.seconds, r.file);
    }
    let failures: Vec<&FileRun> = runs
        .iter()
        .filter(|r| !matches!(r.exit, Some(0) | Some(1)))
        .collect();
    let _ = writeln!(
        out,
        "files where foe did not finish with a report (exit 2: the file does not compile; else a crash or \
         the time limit): {}",
        failures.len()
    );
    for r in failures {
        let code = r.exit.map_or("killed".to_string(), |c| format!("exit {c}"));
        let _ = writeln!(out, "  {} ({code}): {}", r.file, r.error);
    }
    out
}
