//! The `foe` binary: `check`, `replay`, `table`, `bench` and `lsp`.
//!
//! Exit status: 0 when no divergence was found, 1 when some were, 2 on an error (a file that does not
//! compile, a missing function, a tool that cannot run).

mod bench;
mod corpus;
mod output;
mod project_mode;
mod project_report;
mod result_cache;
mod runner;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use foe_analysis::findings::{self, FindingOptions};
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
    about = "Find where -ffast-math changes what a C program computes: its floating-point exceptions, special values and accuracy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Analyse a file: report inputs where P and P' raise different exceptions or produce different results.
    /// With `-p BUILD_DIR`, every file of that compilation database (or the named ones), one report for all.
    Check {
        /// The file; with -p, the files of the database to analyse (default all of them).
        #[arg(required_unless_present = "build_dir")]
        files: Vec<PathBuf>,
        /// Project mode: the directory holding `compile_commands.json` (or the file itself); each file is analysed
        /// with its own entry's flags, in a child process of its own.
        #[arg(short = 'p', long = "build-dir", value_name = "BUILD_DIR")]
        build_dir: Option<PathBuf>,
        /// Analyse only this function.
        #[arg(long, conflicts_with = "build_dir")]
        function: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// With -p: files analysed at once (default: the number of cores).
        #[arg(short = 'j', long, requires = "build_dir")]
        jobs: Option<usize>,
        /// With -p: analyse only part K of N of the files (sorted by path, every N-th from the K-th), so that a
        /// CI matrix of N machines covers each file once.
        #[arg(long, value_name = "K/N", requires = "build_dir")]
        shard: Option<project_mode::Shard>,
        /// With -p: where results are cached (default $FOE_CACHE_DIR, else ~/.cache/foe/results).
        #[arg(long, value_name = "DIR", requires = "build_dir")]
        cache_dir: Option<PathBuf>,
        /// With -p: neither read nor store cached results.
        #[arg(long, requires = "build_dir")]
        no_cache: bool,
        /// With -p: kill the analysis of one file after this many seconds (the file is reported as failed).
        #[arg(long, default_value_t = 600, requires = "build_dir")]
        file_limit_s: u64,
        /// The compilation database to take the file's entry from (what -p gives each file's analysis).
        #[arg(long, value_name = "DB", hide = true, conflicts_with = "build_dir")]
        compile_commands: Option<PathBuf>,
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
        /// With --corpus: keep each file's JSON report in this directory (named after its path in the corpus),
        /// e.g. for `scripts/independent-check.py`; with FOE_LOG set, each file's log beside it (`NAME.log`).
        #[arg(long, value_name = "DIR")]
        reports: Option<PathBuf>,
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
pub(crate) enum Format {
    Text,
    Json,
    Sarif,
    /// The JSON report, the text and the SARIF together (`{"report", "text", "sarif"}`): what each file's child
    /// gives `foe check -p`.
    #[value(hide = true)]
    Bundle,
}

/// Settings shared by the analysing commands; unset ones keep the defaults. Each flag is a shorthand for a key
/// of the settings declaration (`foe_lsp::config::Settings`), applied by the same parser as the editors'.
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
    /// Neighbourhood radius in nextafter steps.
    #[arg(long)]
    radius: Option<u32>,
    /// Loop unrolling bound while modelling.
    #[arg(long)]
    unroll: Option<u32>,
    /// Per-query solver time limit in ms.
    #[arg(long)]
    solver_timeout_ms: Option<u64>,
    /// Per-execution time limit in ms.
    #[arg(long)]
    exec_timeout_ms: Option<u64>,
    /// Flush-to-zero/denormals-are-zero for P': auto (follow its flags), on, off.
    #[arg(long, value_name = "auto|on|off")]
    ftz: Option<String>,
    /// Also report the exceptions the plain build itself raises.
    #[arg(long)]
    plain_exceptions: bool,
    /// A first look, in about a second per file: ordinary, special and sampled inputs only, no solver, nothing
    /// confirmed on the shipped binaries (what the editors show while the analysis runs).
    #[arg(long)]
    quick: bool,
    /// Wall-clock budget of one function (model, solve, search) in ms (default 10000).
    #[arg(long)]
    function_budget_ms: Option<u64>,
    /// Wall-clock budget of one file's analysis in ms (default 30000).
    #[arg(long)]
    file_budget_ms: Option<u64>,
    /// Any setting, by its key in the editors' `foe` section (README, "Settings"); the value is JSON or a
    /// plain string: `--set extremeInputsSeverity=off --set maxPaths=128`. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

impl Settings {
    /// The key-value pairs these flags stand for, in the order they apply.
    fn pairs(&self) -> anyhow::Result<Vec<(String, serde_json::Value)>> {
        use serde_json::json;
        let mut pairs: Vec<(String, serde_json::Value)> = vec![];
        let mut put = |k: &str, v: serde_json::Value| pairs.push((k.to_string(), v));
        if let Some(f) = &self.p_flags {
            put("flagsP", json!(f));
        }
        if let Some(f) = &self.p_prime_flags {
            put("flagsPPrime", json!(f));
        }
        if let Some(c) = &self.clang {
            put("clang", json!(c));
        }
        if let Some(r) = self.radius {
            put("radius", json!(r));
        }
        if let Some(u) = self.unroll {
            put("unrollBound", json!(u));
        }
        if let Some(t) = self.solver_timeout_ms {
            put("solverTimeoutMs", json!(t));
        }
        if let Some(t) = self.exec_timeout_ms {
            put("execTimeoutMs", json!(t));
        }
        if let Some(m) = &self.ftz {
            put("ftzDaz", json!(m));
        }
        if let Some(b) = self.function_budget_ms {
            put("functionBudgetMs", json!(b));
        }
        if let Some(b) = self.file_budget_ms {
            put("fileBudgetMs", json!(b));
        }
        if self.plain_exceptions {
            put("reportPlainExceptions", json!(true));
        }
        for kv in &self.set {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("--set takes KEY=VALUE, not `{kv}`"))?;
            let v = serde_json::from_str(v.trim()).unwrap_or_else(|_| json!(v.trim()));
            put(k.trim().trim_start_matches("foe."), v);
        }
        Ok(pairs)
    }

    fn resolve(&self) -> anyhow::Result<foe_lsp::config::Settings> {
        let mut settings = foe_lsp::config::Settings::default();
        for (key, value) in self.pairs()? {
            settings.set(&key, &value).map_err(anyhow::Error::msg)?;
        }
        Ok(settings)
    }

    fn config(&self) -> anyhow::Result<AnalysisConfig> {
        let mut config = self.resolve()?.analysis;
        config.quick = self.quick;
        Ok(config)
    }

    fn finding_options(&self) -> anyhow::Result<FindingOptions> {
        Ok(self.resolve()?.findings)
    }

    /// These settings as `--set KEY=VALUE` arguments, for a child `foe check`.
    fn as_set_args(&self) -> anyhow::Result<Vec<String>> {
        let mut args: Vec<String> = self
            .pairs()?
            .into_iter()
            .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")])
            .collect();
        if self.quick {
            args.push("--quick".to_string());
        }
        Ok(args)
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
        foe_analysis::process::end_warm_clang();
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    let lsp = matches!(cli.command, Command::Lsp);
    init_logging(if lsp { "info" } else { "warn" });
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("foe: {e:#}");
            ExitCode::from(2)
        }
    };
    foe_analysis::process::end_warm_clang();
    foe_analysis::scratch::remove_own();
    code
}

/// The version, the libz3 loaded and the sandbox layers the user's code gets on this machine.
fn print_version() {
    let sandbox = match foe_analysis::sandbox::probe() {
        Ok(layers) => format!(
            "sandbox of the worker that runs your code:\n{}",
            layers.describe()
        ),
        Err(e) => format!("sandbox: cannot be checked: {e}\n"),
    };
    let tool = match foe_analysis::sandbox::probe_tool() {
        Ok(layers) => format!(
            "sandbox of clang and the linker (your files, the repository's flags):\n{}",
            layers.describe_tool()
        ),
        Err(e) => format!("sandbox of clang and the linker: cannot be checked: {e}\n"),
    };
    let clang = foe_analysis::config::AnalysisConfig::default().clang;
    emit(format!(
        "foe {}\nsolver: Z3 {}\ncompiles: {}\n{sandbox}{tool}",
        env!("CARGO_PKG_VERSION"),
        foe_analysis::solve::z3_version(),
        foe_analysis::process::describe_compiles(&clang)
    ));
}

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

/// The file's text; bytes that are not UTF-8 (a Latin-1 comment) become U+FFFD with a warning, as clang would
/// accept them in comments, rather than losing the file.
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
            build_dir: Some(build_dir),
            files,
            format,
            jobs,
            shard,
            cache_dir,
            no_cache,
            file_limit_s,
            settings,
            ..
        } => {
            let cache_dir = result_cache_dir(cache_dir, no_cache)?;
            project_mode::run(project_mode::ProjectOptions {
                build_dir,
                files,
                jobs: jobs
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
                shard,
                cache_dir,
                file_limit: std::time::Duration::from_secs(file_limit_s),
                format,
                child_args: settings.as_set_args()?,
                config: settings.config()?,
                findings_key: serde_json::to_string(&settings.finding_options()?)?,
            })
        }
        Command::Check {
            files,
            function,
            format,
            compile_commands,
            settings,
            ..
        } => check_file(&files, function, format, compile_commands, &settings),
        Command::Replay {
            file,
            function,
            inputs,
            format,
            settings,
        } => replay(&file, &function, &inputs, format, &settings),
        Command::Table { files, settings } => table(&files, &settings),
        Command::Bench {
            corpus: Some(corpus),
            file_limit_s,
            reports,
            settings,
            ..
        } => bench_corpus(&corpus, file_limit_s, reports.as_deref(), &settings),
        Command::Bench {
            files,
            runs,
            lsp,
            settings,
            ..
        } => bench_files(&files, runs, lsp, &settings),
        Command::Lsp => {
            foe_lsp::run_stdio()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Where `foe check -p` caches results: `None` with `--no-cache`, else `--cache-dir` or the default.
fn result_cache_dir(cache_dir: Option<PathBuf>, no_cache: bool) -> anyhow::Result<Option<PathBuf>> {
    if no_cache {
        return Ok(None);
    }
    Ok(Some(
        cache_dir
            .or_else(result_cache::default_dir)
            .ok_or_else(|| {
                anyhow::anyhow!("no cache directory: set HOME, FOE_CACHE_DIR or --cache-dir")
            })?,
    ))
}

/// `foe check FILE`: analyses one file and prints its findings; status 1 when it has divergences.
fn check_file(
    files: &[PathBuf],
    function: Option<String>,
    format: Format,
    compile_commands: Option<PathBuf>,
    settings: &Settings,
) -> anyhow::Result<ExitCode> {
    let [file] = files else {
        anyhow::bail!(
            "foe check takes one file; to analyse several, give their compilation database with -p"
        );
    };
    let mut config = settings.config()?;
    config.compile_commands = compile_commands;
    let options = settings.finding_options()?;
    let text = read_source(file)?;
    let request = AnalysisRequest {
        path: file,
        text: &text,
        config: &config,
        only_functions: function.as_ref().map(std::slice::from_ref),
    };
    let report = match pipeline::analyse(&request, &NoCache, &NoProgress, &CancelToken::default()) {
        Ok(r) => r,
        Err(e) => return engine_error(e),
    };
    if let Some(name) = &function {
        if !report.functions.iter().any(|f| &f.name == name) {
            eprintln!("foe: no function `{name}` is defined in {}", file.display());
            return Ok(ExitCode::from(2));
        }
    }
    let shown = findings::findings(&report, &text, &options);
    match format {
        Format::Text => emit(output::text_report(&report, &shown)),
        Format::Json => emit(format!(
            "{}\n",
            serde_json::to_string_pretty(&output::json_report(&report, &shown))?
        )),
        Format::Sarif => emit(format!(
            "{}\n",
            serde_json::to_string_pretty(&output::sarif(&report, &shown))?
        )),
        Format::Bundle => emit(format!(
            "{}\n",
            serde_json::json!({
                "report": output::json_report(&report, &shown),
                "text": output::text_report(&report, &shown),
                "sarif": output::sarif(&report, &shown),
            })
        )),
    }
    Ok(ExitCode::from(if report.divergence_count() > 0 {
        1
    } else {
        0
    }))
}

/// `foe replay`: runs both builds of `function` on the input `NAME=VALUE` assignments give.
fn replay(
    file: &Path,
    function: &str,
    inputs: &[String],
    format: Format,
    settings: &Settings,
) -> anyhow::Result<ExitCode> {
    let config = settings.config()?;
    let text = read_source(file)?;
    let assignments = inputs
        .iter()
        .map(|a| {
            a.split_once('=')
                .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| anyhow::anyhow!("--input takes NAME=VALUE, not `{a}`"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let request = AnalysisRequest {
        path: file,
        text: &text,
        config: &config,
        only_functions: None,
    };
    let replayed = match pipeline::replay(&request, function, &assignments) {
        Ok(r) => r,
        Err(e) => return engine_error(e),
    };
    match format {
        Format::Json | Format::Sarif | Format::Bundle => {
            emit(format!("{}\n", serde_json::to_string_pretty(&replayed)?))
        }
        Format::Text => emit(output::text_replay(&replayed, file)),
    }
    Ok(ExitCode::SUCCESS)
}

/// `foe table`: Table III's columns per function of each file, with the time taken; status 2 if a file failed.
fn table(files: &[PathBuf], settings: &Settings) -> anyhow::Result<ExitCode> {
    let config = settings.config()?;
    let mut rows = Vec::new();
    let mut failed = false;
    for file in files {
        let text = read_source(file)?;
        let request = AnalysisRequest {
            path: file,
            text: &text,
            config: &config,
            only_functions: None,
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

/// `foe bench --corpus`: `foe check` on every file of the corpus, with the settings given passed on.
fn bench_corpus(
    corpus: &Path,
    file_limit_s: u64,
    reports: Option<&Path>,
    settings: &Settings,
) -> anyhow::Result<ExitCode> {
    let mut args = Vec::new();
    if let Some(b) = settings.function_budget_ms {
        args.extend(["--function-budget-ms".to_string(), b.to_string()]);
    }
    if let Some(b) = settings.file_budget_ms {
        args.extend(["--file-budget-ms".to_string(), b.to_string()]);
    }
    if settings.plain_exceptions {
        args.push("--plain-exceptions".to_string());
    }
    if settings.quick {
        args.push("--quick".to_string());
    }
    for pair in &settings.set {
        args.extend(["--set".to_string(), pair.clone()]);
    }
    let files = corpus::corpus_files(corpus)?;
    let limit = std::time::Duration::from_secs(file_limit_s);
    corpus::run(corpus, &files, limit, &args, reports)?;
    Ok(ExitCode::SUCCESS)
}

/// `foe bench FILES`: the engine's timings on `files`, and with `lsp` the language server's latency.
fn bench_files(
    files: &[PathBuf],
    runs: usize,
    lsp: bool,
    settings: &Settings,
) -> anyhow::Result<ExitCode> {
    let config = settings.config()?;
    bench::run(files, runs.max(1), &config)?;
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

/// Writes a result to stdout; a reader that went away (`foe check f.c | head`) ends foe quietly with the
/// shell's status for SIGPIPE instead of a panic.
pub(crate) fn emit(text: impl std::fmt::Display) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = write!(out, "{text}").and_then(|()| out.flush()) {
        foe_analysis::scratch::remove_own();
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("foe: cannot write the result: {e}");
        std::process::exit(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_is_a_declared_setting() {
        let cli = Cli::parse_from([
            "foe",
            "check",
            "f.c",
            "--p-flags",
            "-O1",
            "--p-prime-flags",
            "-O3 -ffast-math",
            "--clang",
            "clang",
            "--radius",
            "2",
            "--unroll",
            "3",
            "--solver-timeout-ms",
            "7",
            "--exec-timeout-ms",
            "9",
            "--ftz",
            "off",
            "--plain-exceptions",
            "--set",
            "extremeInputsSeverity=off",
            "--set",
            "foe.maxPaths=5",
        ]);
        let Command::Check { settings, .. } = cli.command else {
            panic!("parsed as another command")
        };
        let s = settings
            .resolve()
            .expect("every flag maps to a declared key");
        assert_eq!(s.analysis.flags_p_prime, vec!["-O3", "-ffast-math"]);
        assert_eq!(
            (
                s.analysis.radius,
                s.analysis.unroll_bound,
                s.analysis.max_paths
            ),
            (2, 3, 5)
        );
        assert_eq!(
            (s.analysis.solver_timeout_ms, s.analysis.exec_timeout_ms),
            (7, 9)
        );
        assert!(s.analysis.report_plain_exceptions);
        assert_eq!(s.findings.extreme_inputs_severity, findings::ShownAs::Off);
        // Project mode hands each child the same settings.
        let mut child = vec!["foe".to_string(), "check".into(), "f.c".into()];
        child.extend(settings.as_set_args().expect("settings forward"));
        let Command::Check {
            settings: forwarded,
            ..
        } = Cli::parse_from(child).command
        else {
            panic!("parsed as another command")
        };
        assert_eq!(
            forwarded.resolve().expect("forwarded settings resolve"),
            s,
            "a child resolves the settings its parent did"
        );
        let bad = Settings {
            set: vec!["pFlags=-O1".into()],
            ..Settings::default()
        };
        assert!(bad.resolve().is_err());
    }
}
