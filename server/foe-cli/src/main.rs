//! The `foe` binary: `check`, `replay`, `table`, `bench` and `lsp`.
//!
//! Exit status: 0 when no divergence was found, 1 when some were, 2 on an error (a file that does not
//! compile, a missing function, a tool that cannot run).

mod bench;
mod corpus;
mod output;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use foe_analysis::pipeline::{
    self, AnalysisError, AnalysisRequest, CancelToken, NoCache, NoProgress,
};
use foe_analysis::AnalysisConfig;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "foe",
    version,
    about = "Find where -ffast-math changes a C program's floating-point exceptions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Analyse a file: report inputs where P and P' raise different exception traces.
    Check {
        file: PathBuf,
        /// Analyse only this function.
        #[arg(long)]
        function: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[command(flatten)]
        settings: Settings,
    },
    /// Build and run both versions of a function on exactly the given input and print both traces.
    Replay {
        file: PathBuf,
        #[arg(long)]
        function: String,
        /// A parameter value, as NAME=VALUE (decimal, C99 hex float, inf, nan); repeat for each parameter.
        #[arg(long = "input", value_name = "NAME=VALUE", required = true, num_args = 1..)]
        inputs: Vec<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[command(flatten)]
        settings: Settings,
    },
    /// Print the FOE paper's Table III columns per function, plus the time taken.
    Table {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        settings: Settings,
    },
    /// Phase timings and executions per second on the fixtures (or the given files).
    Bench {
        files: Vec<PathBuf>,
        /// Runs per file; the figures are medians.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Also measure the language server: time from didOpen and didChange to publishDiagnostics, cold and
        /// warm, on turbine1 and on a file of 24 functions (this binary's `foe lsp` over stdio).
        #[arg(long)]
        lsp: bool,
        /// Instead, run `foe check` on every file of this compilation database (or directory holding one; a
        /// `files.txt` beside it selects the files) and print coverage by status and reason, time per file and
        /// executions.
        #[arg(long, value_name = "DB")]
        corpus: Option<PathBuf>,
        /// With --corpus: kill a `foe check` that runs longer than this many seconds.
        #[arg(long, default_value_t = 180)]
        file_limit_s: u64,
        #[command(flatten)]
        settings: Settings,
    },
    /// Run the language server on stdin/stdout.
    Lsp,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
    Sarif,
}

/// Settings shared by the analysing commands; unset ones keep the engine's defaults.
#[derive(Args, Clone, Default)]
struct Settings {
    /// Flags of the reference build P (default "-O0 -ffp-contract=off").
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    p_flags: Option<String>,
    /// Flags of the fast-math build P' (default "-O2 -ffast-math").
    #[arg(
        long = "p-prime-flags",
        value_name = "FLAGS",
        allow_hyphen_values = true
    )]
    p_prime_flags: Option<String>,
    /// The clang to use (default clang-19).
    #[arg(long)]
    clang: Option<PathBuf>,
    /// Neighbourhood radius in nextafter steps (default 3).
    #[arg(long)]
    radius: Option<u32>,
    /// Loop unrolling bound while modelling (default 2).
    #[arg(long)]
    unroll: Option<u32>,
    /// Per-query solver time limit in ms (default 500).
    #[arg(long)]
    solver_timeout_ms: Option<u64>,
    /// Per-execution time limit in ms (default 500).
    #[arg(long)]
    exec_timeout_ms: Option<u64>,
    /// Flush-to-zero/denormals-are-zero for P': auto (follow its flags), on, off.
    #[arg(long, value_name = "auto|on|off")]
    ftz: Option<String>,
    /// Also report the exceptions the plain build itself raises.
    #[arg(long)]
    plain_exceptions: bool,
    /// Wall-clock budget of one function (model, solve, search) in ms (default 10000).
    #[arg(long)]
    function_budget_ms: Option<u64>,
    /// Wall-clock budget of one file's analysis in ms (default 30000).
    #[arg(long)]
    file_budget_ms: Option<u64>,
}

impl Settings {
    fn config(&self) -> anyhow::Result<AnalysisConfig> {
        let mut c = AnalysisConfig::default();
        let split = |s: &String| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        if let Some(f) = &self.p_flags {
            c.flags_p = split(f);
        }
        if let Some(f) = &self.p_prime_flags {
            c.flags_p_prime = split(f);
        }
        if let Some(clang) = &self.clang {
            c.clang = clang.clone();
        }
        if let Some(r) = self.radius {
            c.radius = r;
        }
        if let Some(u) = self.unroll {
            c.unroll_bound = u;
        }
        if let Some(t) = self.solver_timeout_ms {
            c.solver_timeout_ms = t;
        }
        if let Some(t) = self.exec_timeout_ms {
            c.exec_timeout_ms = t;
        }
        if let Some(m) = &self.ftz {
            c.ftz_daz = match m.as_str() {
                "auto" => foe_analysis::config::FtzMode::Auto,
                "on" => foe_analysis::config::FtzMode::On,
                "off" => foe_analysis::config::FtzMode::Off,
                other => anyhow::bail!("--ftz takes auto, on or off, not `{other}`"),
            };
        }
        c.report_plain_exceptions = self.plain_exceptions;
        if let Some(b) = self.function_budget_ms {
            c.function_budget_ms = b;
        }
        if let Some(b) = self.file_budget_ms {
            c.file_budget_ms = b;
        }
        Ok(c)
    }
}

fn main() -> ExitCode {
    // Started by the engine to solve one function out of process (libz3 can crash): serve and exit (its log goes
    // to stderr, which the engine passes on when FOE_LOG is set).
    if std::env::var_os("FOE_SOLVER_CHILD").is_some() {
        init_logging("warn");
    }
    foe_analysis::solve::child::serve_if_child();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(args.as_slice(), [a] if a == "--version" || a == "-V") {
        print_version();
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    let lsp = matches!(cli.command, Command::Lsp);
    init_logging(if lsp { "info" } else { "warn" });
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("foe: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The version and the sandbox layers the user's code gets on this machine.
fn print_version() {
    let sandbox = match foe_analysis::sandbox::probe() {
        Ok(layers) => format!(
            "sandbox of the worker that runs your code:\n{}",
            layers.describe()
        ),
        Err(e) => format!("sandbox: cannot be checked: {e}\n"),
    };
    emit(format!("foe {}\n{sandbox}", env!("CARGO_PKG_VERSION")));
}

/// The file's text; bytes that are not UTF-8 (a Latin-1 comment) become U+FFFD with a warning, as clang would
/// accept them in comments, rather than losing the file.
/// Logs to stderr, filtered by FOE_LOG (else `default`).
fn init_logging(default: &str) {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FOE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .with_ansi(false)
        .init();
}

fn read_source(file: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let line = text[..valid].lines().count().max(1);
            eprintln!(
                "foe: warning: {}:{line}: bytes that are not UTF-8 are read as U+FFFD",
                file.display()
            );
            Ok(text)
        }
    }
}

/// Prints an engine error the way a compiler does and gives exit status 2.
fn engine_error(e: AnalysisError) -> anyhow::Result<ExitCode> {
    match &e {
        AnalysisError::Compile {
            message, stderr, ..
        } => {
            eprintln!("foe: the file does not compile: {message}");
            if stderr.lines().count() > 1 {
                eprint!("{stderr}");
            }
        }
        other => eprintln!("foe: {other}"),
    }
    Ok(ExitCode::from(2))
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Check {
            file,
            function,
            format,
            settings,
        } => {
            let config = settings.config()?;
            let text = read_source(&file)?;
            let request = AnalysisRequest {
                path: &file,
                text: &text,
                config: &config,
                only_function: function.as_deref(),
            };
            let report =
                match pipeline::analyse(&request, &NoCache, &NoProgress, &CancelToken::default()) {
                    Ok(r) => r,
                    Err(e) => return engine_error(e),
                };
            if let Some(name) = &function {
                if !report.functions.iter().any(|f| &f.name == name) {
                    eprintln!("foe: no function `{name}` is defined in {}", file.display());
                    return Ok(ExitCode::from(2));
                }
            }
            match format {
                Format::Text => emit(output::text_report(&report, &text)),
                Format::Json => emit(format!("{}\n", serde_json::to_string_pretty(&report)?)),
                Format::Sarif => emit(format!(
                    "{}\n",
                    serde_json::to_string_pretty(&output::sarif(&report))?
                )),
            }
            Ok(ExitCode::from(if report.divergence_count() > 0 {
                1
            } else {
                0
            }))
        }
        Command::Replay {
            file,
            function,
            inputs,
            format,
            settings,
        } => {
            let config = settings.config()?;
            let text = read_source(&file)?;
            let assignments = inputs
                .iter()
                .map(|a| {
                    a.split_once('=')
                        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
                        .ok_or_else(|| anyhow::anyhow!("--input takes NAME=VALUE, not `{a}`"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let request = AnalysisRequest {
                path: &file,
                text: &text,
                config: &config,
                only_function: None,
            };
            let replayed = match pipeline::replay(&request, &function, &assignments) {
                Ok(r) => r,
                Err(e) => return engine_error(e),
            };
            match format {
                Format::Json | Format::Sarif => {
                    emit(format!("{}\n", serde_json::to_string_pretty(&replayed)?))
                }
                Format::Text => emit(output::text_replay(&replayed, &file)),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Table { files, settings } => {
            let config = settings.config()?;
            let mut rows = Vec::new();
            let mut failed = false;
            for file in &files {
                let text = read_source(file)?;
                let request = AnalysisRequest {
                    path: file,
                    text: &text,
                    config: &config,
                    only_function: None,
                };
                let started = std::time::Instant::now();
                match pipeline::analyse(&request, &NoCache, &NoProgress, &CancelToken::default()) {
                    Ok(report) => rows.push((report, started.elapsed())),
                    Err(e) => {
                        eprintln!("foe: {}: {e}", file.display());
                        failed = true;
                    }
                }
            }
            emit(output::table(&rows));
            Ok(ExitCode::from(if failed { 2 } else { 0 }))
        }
        Command::Bench {
            corpus: Some(corpus),
            file_limit_s,
            settings,
            ..
        } => {
            let mut args = Vec::new();
            if let Some(b) = settings.function_budget_ms {
                args.extend(["--function-budget-ms".to_string(), b.to_string()]);
            }
            if let Some(b) = settings.file_budget_ms {
                args.extend(["--file-budget-ms".to_string(), b.to_string()]);
            }
            let files = corpus::corpus_files(&corpus)?;
            corpus::run(&files, std::time::Duration::from_secs(file_limit_s), &args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench {
            files,
            runs,
            lsp,
            settings,
            ..
        } => {
            let config = settings.config()?;
            bench::run(&files, runs.max(1), &config)?;
            if lsp {
                let me = std::env::current_exe()?;
                let server = move || {
                    let mut c = std::process::Command::new(&me);
                    c.arg("lsp");
                    c
                };
                let options = foe_lsp::bench::LatencyOptions {
                    runs: runs.max(1),
                    ..Default::default()
                };
                emit(format!(
                    "\n{}",
                    foe_lsp::bench::latency_benchmark(&server, &options)?
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Lsp => {
            foe_lsp::run_stdio()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Writes a result to stdout; a reader that went away (`foe check f.c | head`) ends foe quietly with the
/// shell's status for SIGPIPE instead of a panic.
pub(crate) fn emit(text: impl std::fmt::Display) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = write!(out, "{text}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("foe: cannot write the result: {e}");
        std::process::exit(2);
    }
}
