//! `foe check -p BUILD_DIR [FILES...]`: every file of a compilation database (or the named ones, or one shard of
//! them), each in its own `foe check` child with its own entry's flags, `-j` at a time, results cached on disk
//! ([`crate::result_cache`]), one aggregated report ([`crate::project_report`]) and one exit status.

use crate::project_report::{self, FileResult, Outcome};
use crate::result_cache::{self, Dependency, Manifest, ResultCache};
use crate::runner::{self, DatabaseEntry};
use crate::Format;
use foe_analysis::compile::CompileDb;
use foe_analysis::pipeline::{self, AnalysisRequest};
use foe_analysis::AnalysisConfig;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// One part of a split file list: the files at positions K-1, K-1+N, ... of the sorted list (`--shard K/N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("--shard takes K/N with 1 <= K <= N, not `{s}`");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    fn takes(self, position: usize) -> bool {
        position % self.count == self.index - 1
    }
}

/// What `foe check -p` was asked to do.
pub struct ProjectOptions {
    pub build_dir: PathBuf,
    /// Only these files of the database (relative to the working directory or absolute); all when empty.
    pub files: Vec<PathBuf>,
    pub jobs: usize,
    pub shard: Option<Shard>,
    /// The results cache; `None` with `--no-cache`.
    pub cache_dir: Option<PathBuf>,
    /// A child that runs longer is killed and its file reported as failed.
    pub file_limit: Duration,
    pub format: Format,
    /// The settings as `--set KEY=VALUE` arguments, for each child.
    pub child_args: Vec<String>,
    /// The same settings resolved: the engine's, and those of the findings, serialised.
    pub config: AnalysisConfig,
    pub findings_key: String,
}

/// What every file's job shares.
struct Context<'a> {
    cwd: PathBuf,
    child_args: Vec<String>,
    limit: Duration,
    config: AnalysisConfig,
    cache: Option<&'a ResultCache>,
    /// The hash of each database entry, by file.
    entry_hashes: HashMap<PathBuf, String>,
    /// The database, read once (when results are cached) for the headers of every stored file and unit.
    db: Option<CompileDb>,
}

pub fn run(options: ProjectOptions) -> anyhow::Result<ExitCode> {
    let db = std::path::absolute(runner::database_path(&options.build_dir))?;
    let entries = runner::database_entries(&db)?;
    let mut selected = select(&entries, &options.files)?;
    if let Some(shard) = options.shard {
        selected = selected
            .into_iter()
            .enumerate()
            .filter(|(i, _)| shard.takes(*i))
            .map(|(_, e)| e)
            .collect();
    }
    let cwd = std::env::current_dir()?;
    let mut config = options.config;
    config.compile_commands = Some(db.clone());
    let settings_key = format!("{}\0{}", config.fingerprint(), options.findings_key);
    // A first look is never cached: it is not the analysis a cached result stands for.
    let cache = options
        .cache_dir
        .filter(|_| !config.quick)
        .map(|dir| ResultCache::open(dir, &config.clang, &settings_key))
        .transpose()?;
    let mut child_args = options.child_args;
    child_args.extend(["--compile-commands".to_string(), db.display().to_string()]);
    let context = Context {
        child_args,
        limit: options.file_limit,
        config,
        cache: cache.as_ref(),
        entry_hashes: entries
            .iter()
            .map(|e| (e.file.clone(), entry_hash(&e.entry)))
            .collect(),
        db: cache.as_ref().and_then(|_| CompileDb::load(&db)),
        cwd,
    };
    let results = run_all(&selected, options.jobs.max(1), &context);
    let (text, code) = project_report::render(&results, options.format)?;
    crate::emit(text);
    Ok(code)
}

/// The entries of the named files, in the database's order; all entries when none is named.
fn select<'a>(
    entries: &'a [DatabaseEntry],
    files: &[PathBuf],
) -> anyhow::Result<Vec<&'a DatabaseEntry>> {
    if files.is_empty() {
        return Ok(entries.iter().collect());
    }
    let mut selected = Vec::new();
    for file in files {
        let absolute = std::path::absolute(file)?;
        let wanted = std::fs::canonicalize(&absolute).unwrap_or(absolute);
        let entry = entries.iter().find(|e| e.file == wanted).ok_or_else(|| {
            anyhow::anyhow!("{} is not in the compilation database", file.display())
        })?;
        if !selected
            .iter()
            .any(|s: &&DatabaseEntry| s.file == entry.file)
        {
            selected.push(entry);
        }
    }
    selected.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(selected)
}

fn entry_hash(entry: &Value) -> String {
    result_cache::hash_bytes(entry.to_string().as_bytes())
}

/// The file as the report names it: relative to the working directory when it is below it.
fn shown_path(file: &Path, cwd: &Path) -> String {
    file.strip_prefix(cwd).unwrap_or(file).display().to_string()
}

/// Every selected file, `jobs` at a time, with a progress bar when stderr is a terminal.
fn run_all(selected: &[&DatabaseEntry], jobs: usize, context: &Context<'_>) -> Vec<FileResult> {
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(selected.len() as u64);
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}",
        ) {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    } else {
        ProgressBar::hidden()
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<FileResult>>> =
        Mutex::new((0..selected.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(selected.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(entry) = selected.get(i) else {
                    break;
                };
                let shown = shown_path(&entry.file, &context.cwd);
                bar.set_message(shown.clone());
                let outcome = one_file(entry, &shown, context);
                match &outcome {
                    // (the bar's state is locked inside `suspend`: ask it nothing there)
                    Outcome::Failed(error) if !bar.is_hidden() => {
                        bar.suspend(|| eprintln!("foe: {shown}: {error}"))
                    }
                    _ => {}
                }
                bar.inc(1);
                results.lock().expect("no job panics")[i] = Some(FileResult { shown, outcome });
            });
        }
    });
    bar.finish_and_clear();
    results
        .into_inner()
        .expect("no job panics")
        .into_iter()
        .flatten()
        .collect()
}

/// One file: from the cache when nothing it depends on changed, else analysed by a child (and stored).
fn one_file(entry: &DatabaseEntry, shown: &str, context: &Context<'_>) -> Outcome {
    let text = match std::fs::read(&entry.file) {
        Ok(text) => text,
        Err(e) => return Outcome::Failed(format!("cannot read {}: {e}", entry.file.display())),
    };
    let key = context
        .cache
        .map(|c| c.key(&entry.file, shown, &entry.entry));
    if let (Some(cache), Some(key)) = (context.cache, &key) {
        if let Some(result) = cache.get(key, &context.entry_hashes) {
            return Outcome::Cached(result);
        }
    }
    let run = match runner::check_in_child(
        Path::new(shown),
        &context.cwd,
        "bundle",
        &context.child_args,
        context.limit,
        false,
    ) {
        Ok(run) => run,
        Err(e) => return Outcome::Failed(format!("cannot run foe: {e}")),
    };
    if let Some(error) = run.failure(context.limit) {
        return Outcome::Failed(error);
    }
    let bundle = run.output.unwrap_or(Value::Null);
    if let (Some(cache), Some(key)) = (context.cache, &key) {
        if !cut_by_clock(&bundle["report"]) {
            match manifest(entry, &text, &bundle["report"], context) {
                Some(m) => {
                    if let Err(e) = cache.put(key, m, &bundle) {
                        tracing::warn!("cannot store the result of {shown}: {e}");
                    }
                }
                None => tracing::warn!("the inputs of {shown} cannot be listed; not cached"),
            }
        }
    }
    Outcome::Analysed(bundle)
}

/// Whether a clock cut some function short (such results are not stored, as the engine does not cache them: a
/// second run may get further). A function its work budget cut short is what every run gives, and is stored.
fn cut_by_clock(report: &Value) -> bool {
    report["functions"].as_array().is_some_and(|fs| {
        fs.iter().any(|f| {
            f["reason_codes"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c == "clock"))
        })
    })
}

/// Everything `report` read: the file (as `text`, read before the analysis), its headers, the units linked in,
/// their headers and their database entries. `None` when some cannot be read or listed.
fn manifest(
    entry: &DatabaseEntry,
    text: &[u8],
    report: &Value,
    context: &Context<'_>,
) -> Option<Manifest> {
    let mut manifest = Manifest::default();
    manifest.files.push(Dependency {
        path: entry.file.clone(),
        hash: result_cache::hash_bytes(text),
    });
    let add_headers = |file: &Path, text: &[u8], files: &mut Vec<Dependency>| -> Option<()> {
        let text = String::from_utf8_lossy(text);
        let request = AnalysisRequest {
            path: file,
            text: &text,
            config: &context.config,
            only_functions: None,
        };
        for header in pipeline::included_files(&request, context.db.as_ref()).ok()? {
            let hash = result_cache::content_hash(&header)?;
            files.push(Dependency { path: header, hash });
        }
        Some(())
    };
    add_headers(&entry.file, text, &mut manifest.files)?;
    for unit in report["linked_units"].as_array().into_iter().flatten() {
        let unit = PathBuf::from(unit.as_str()?);
        let unit_text = std::fs::read(&unit).ok()?;
        manifest.files.push(Dependency {
            path: unit.clone(),
            hash: result_cache::hash_bytes(&unit_text),
        });
        add_headers(&unit, &unit_text, &mut manifest.files)?;
        manifest.entries.push(Dependency {
            hash: context.entry_hashes.get(&unit)?.clone(),
            path: unit,
        });
    }
    manifest.files.sort_by(|a, b| a.path.cmp(&b.path));
    manifest.files.dedup_by(|a, b| a.path == b.path);
    Some(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_files() {
        let shards: Vec<Shard> = ["1/3", "2/3", "3/3"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        for position in 0..10 {
            assert_eq!(shards.iter().filter(|s| s.takes(position)).count(), 1);
        }
        assert!("0/2".parse::<Shard>().is_err());
        assert!("3/2".parse::<Shard>().is_err());
        assert!("2".parse::<Shard>().is_err());
    }
}
