//! The latency benchmark as a program: `cargo run --release -p foe-lsp --example latency [-- --runs N]`.
//!
//! It starts itself with `--serve` as the server (the same `run_stdio` that `foe lsp` calls), so it needs no
//! other binary. `--server PATH` benchmarks another server command instead (e.g. `target/release/foe`, to
//! which `lsp` is appended).

use foe_lsp::bench::{latency_benchmark, LatencyOptions};
use std::process::Command;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--serve") {
        return foe_lsp::run_stdio();
    }
    let mut options = LatencyOptions::default();
    let mut server: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => options.runs = it.next().and_then(|v| v.parse().ok()).unwrap_or(options.runs),
            "--functions" => options.functions = it.next().and_then(|v| v.parse().ok()).unwrap_or(options.functions),
            "--debounce-ms" => options.debounce_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(options.debounce_ms),
            "--server" => server = it.next().cloned(),
            other => anyhow::bail!("unknown argument {other} (expected --runs N, --functions N, --debounce-ms N, --server PATH)"),
        }
    }
    let me = std::env::current_exe()?;
    let start = move || match &server {
        Some(path) => {
            let mut c = Command::new(path);
            c.arg("lsp");
            c
        }
        None => {
            let mut c = Command::new(&me);
            c.arg("--serve");
            c
        }
    };
    let report = latency_benchmark(&start, &options)?;
    print!("{report}");
    Ok(())
}
