//! `foe bench`: phase timings and executions per second, median of several runs per file.

use foe_analysis::pipeline::{self, AnalysisRequest, CancelToken, NoCache, NoProgress};
use foe_analysis::AnalysisConfig;
use std::path::{Path, PathBuf};

/// The bundled fixtures: `fixtures/bench/*.c` beside the working directory or the source tree.
fn default_files() -> Vec<PathBuf> {
    let roots = [
        PathBuf::from("fixtures/bench"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/bench"),
    ];
    for root in roots {
        if let Ok(entries) = std::fs::read_dir(&root) {
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "c"))
                .collect();
            files.sort();
            if !files.is_empty() {
                return files;
            }
        }
    }
    vec![]
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

pub fn run(files: &[PathBuf], runs: usize, config: &AnalysisConfig) -> anyhow::Result<()> {
    let files = if files.is_empty() {
        default_files()
    } else {
        files.to_vec()
    };
    anyhow::ensure!(
        !files.is_empty(),
        "no files to benchmark (give some, or run from the repository root)"
    );
    let phases = [
        "compile",
        "model",
        "solve",
        "build_runner",
        "execute",
        "total",
    ];
    crate::emit(format_args!(
        "{:<24} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>12} {:>6}\n",
        "file",
        "compile",
        "model",
        "solve",
        "runner",
        "execute",
        "total",
        "execs",
        "execs/s",
        "diffs"
    ));
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        let request = AnalysisRequest {
            path: file,
            text: &text,
            config,
            only_functions: None,
        };
        let mut samples: Vec<std::collections::BTreeMap<String, u64>> = Vec::new();
        let mut diffs = 0;
        for _ in 0..runs {
            let report =
                pipeline::analyse(&request, &NoCache, &NoProgress, &CancelToken::default())
                    .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            diffs = report
                .functions
                .iter()
                .map(|f| f.diff_producing)
                .sum::<usize>();
            samples.push(report.timings_ms);
        }
        let med = |k: &str| {
            median(
                samples
                    .iter()
                    .map(|s| s.get(k).copied().unwrap_or(0))
                    .collect(),
            )
        };
        let execs = med("executions");
        let exec_ms = med("execute").max(1);
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cols: Vec<String> = phases.iter().map(|p| format!("{:>8}", med(p))).collect();
        crate::emit(format_args!(
            "{:<24} {} {:>10} {:>12.0} {:>6}\n",
            name,
            cols.join(" "),
            execs,
            execs as f64 * 2.0 / (exec_ms as f64 / 1000.0),
            diffs
        ));
    }
    crate::emit(format!("(times in ms, medians of {runs} runs; execs counts inputs, execs/s counts runs of P and P' separately)\n"));
    Ok(())
}
