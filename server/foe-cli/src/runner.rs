//! `foe check --format json` on one file in a child process (this binary started again), as `foe bench --corpus`
//! and `foe check -p` run each file: a crash, a hang or a compile error of one file is an outcome of that file,
//! never the end of the run. Also the compilation database's entries both read.

use foe_analysis::process;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What one `foe check` of one file gave.
pub struct CheckRun {
    pub seconds: f64,
    /// `foe check`'s exit status; `None` when it was killed (time limit) or died of a signal.
    pub exit: Option<i32>,
    pub timed_out: bool,
    /// What it printed on stdout, when that is JSON.
    pub output: Option<Value>,
    pub stderr: String,
}

impl CheckRun {
    /// Why this run gave no report (`None` when it finished with exit 0 or 1 and a report): foe's first line on
    /// stderr, the time limit, or the signal.
    pub fn failure(&self, limit: Duration) -> Option<String> {
        if matches!(self.exit, Some(0) | Some(1)) && self.output.is_some() {
            return None;
        }
        Some(if self.timed_out {
            format!("killed after {} s", limit.as_secs())
        } else if self.exit.is_none() {
            "foe crashed (killed by a signal)".to_string()
        } else {
            let line = self
                .stderr
                .lines()
                .find(|l| l.starts_with("foe:"))
                .or_else(|| self.stderr.lines().next())
                .unwrap_or("");
            let line = line.strip_prefix("foe: ").unwrap_or(line);
            match self.exit {
                Some(0) | Some(1) => format!("no report on stdout: {line}"),
                _ if line.is_empty() => format!("exit {}", self.exit.unwrap_or(-1)),
                _ => line.to_string(),
            }
        })
    }
}

/// Runs `foe check --format FORMAT ARGS FILE` in `cwd` (`file` absolute or relative to it), killing it after
/// `limit`; with `log`, passes `FOE_LOG` on, so that the child's log is its [`CheckRun::stderr`].
pub fn check_in_child(
    file: &Path,
    cwd: &Path,
    format: &str,
    args: &[String],
    limit: Duration,
    log: bool,
) -> anyhow::Result<CheckRun> {
    let exe = std::env::current_exe()?;
    let mut cmd = process::command(&exe, cwd);
    cmd.args(["check", "--format", format]).args(args).arg(file);
    if let Some(filter) = std::env::var_os("FOE_LOG").filter(|_| log) {
        cmd.env("FOE_LOG", filter);
    }
    let started = Instant::now();
    let out = process::run_tool_until(cmd, None, limit, &|| false)?;
    Ok(CheckRun {
        seconds: started.elapsed().as_secs_f64(),
        exit: if out.timed_out { None } else { out.status },
        timed_out: out.timed_out,
        output: serde_json::from_slice(&out.stdout).ok(),
        stderr: out.stderr,
    })
}

/// One entry of a compilation database: the file (absolute, symbolic links resolved when it exists) and the
/// entry as written.
pub struct DatabaseEntry {
    pub file: PathBuf,
    pub entry: Value,
}

/// The database `path` names: the file itself or the `compile_commands.json` in that directory.
pub fn database_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("compile_commands.json")
    } else {
        path.to_path_buf()
    }
}

/// The directory a path names a file of: `.` for a bare file name (whose `parent` is the empty path).
pub fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// The entries of a compilation database, sorted by file, one per file (the first).
pub fn database_entries(db: &Path) -> anyhow::Result<Vec<DatabaseEntry>> {
    let text = std::fs::read_to_string(db).map_err(|e| {
        anyhow::anyhow!("cannot read the compilation database {}: {e}", db.display())
    })?;
    let entries: Vec<Value> = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a compilation database: {e}", db.display()))?;
    let base = std::path::absolute(directory_of(db))?;
    let mut out: Vec<DatabaseEntry> = entries
        .into_iter()
        .filter_map(|entry| {
            let file = Path::new(entry["file"].as_str()?);
            let dir = base.join(entry["directory"].as_str().unwrap_or("."));
            let file = dir.join(file);
            let file = std::fs::canonicalize(&file).unwrap_or(file);
            Some(DatabaseEntry { file, entry })
        })
        .collect();
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out.dedup_by(|a, b| a.file == b.file);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_file_name_is_in_the_working_directory() {
        assert_eq!(
            directory_of(Path::new("compile_commands.json")),
            Path::new(".")
        );
        assert_eq!(
            directory_of(Path::new("build/compile_commands.json")),
            Path::new("build")
        );
        assert_eq!(
            directory_of(Path::new("/compile_commands.json")),
            Path::new("/")
        );
        assert!(std::path::absolute(directory_of(Path::new("compile_commands.json"))).is_ok());
    }
}
